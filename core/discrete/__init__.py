"""The midpoint variational integrator: the DEL step, its exact first- and second-order
linearizations, inverse dynamics, trajectories, the Legendre transforms and ``MidpointVI``."""
