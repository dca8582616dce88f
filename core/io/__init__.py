"""Models and trajectories from and to files: URDF, YAML, ``.npz``."""
