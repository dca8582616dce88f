"""The recursions over the frame tree: kinematics, the Lagrangian's derivatives, Newton-Euler and
the articulated body, forces, constraints, coupled (mimic) variables, the per-thread scratch."""
