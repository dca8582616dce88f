"""The compiled model record (``Model``) and the rigid-body inertias it holds."""
