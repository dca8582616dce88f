"""Rigid bodies merged exactly: the mass, centre of mass and inertia of several bodies fixed to
one frame (parallel-axis theorem), as Pinocchio merges the links of fixed joints. Used by the
URDF import (:mod:`core.urdf`) and by the model compiler (:mod:`core.system`), which folds the
bodies of rigidly attached frames into their parent so that the kernels skip those frames."""
from __future__ import annotations

import numpy as np


class MergedBody:
    """Mass ``m``, first moment ``m c`` and inertia ``J`` about the body frame's origin of the
    bodies added so far (all in body-frame coordinates)."""

    def __init__(self):
        self.m, self.mc, self.J = 0.0, np.zeros(3), np.zeros((3, 3))

    def add(self, mass, com, inertia_com, R, p):
        """Add a body with ``(mass, com, inertia about com)`` in its own coordinates, placed at
        ``(R, p)`` in the body frame: ``J += R I Rᵀ + m (|c|² 1 - c cᵀ)`` with ``c = R com + p``."""
        c = R @ np.asarray(com, float) + p
        self.m += mass
        self.mc += mass * c
        self.J += R @ np.asarray(inertia_com, float) @ R.T + mass * (c @ c * np.eye(3) - np.outer(c, c))

    def is_empty(self) -> bool:
        return self.m == 0.0 and not self.J.any()

    def mass_com_inertia(self):
        """``(m, c, I about c)``: the centre of mass and the inertia about it."""
        if self.m <= 0.0:
            return 0.0, np.zeros(3), 0.5 * (self.J + self.J.T)
        c = self.mc / self.m
        I = self.J - self.m * (c @ c * np.eye(3) - np.outer(c, c))
        return self.m, c, 0.5 * (I + I.T)
