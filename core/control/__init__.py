"""Control on discrete systems: the Riccati pass and LQR, simulation, trajectory optimization."""
