"""Continuous dynamics and their exact linearizations (first and second order, stacked, minimal,
floating base) and static equilibria."""
