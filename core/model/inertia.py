"""Rigid-body inertias: which ones are physical (the inertia policy), and bodies merged exactly.

**The inertia policy** (:func:`check_inertia`), written once for the URDF, YAML and Python
loaders. A rotational inertia about the centre of mass is physical when its principal moments
``I1 <= I2 <= I3`` are non-negative and satisfy the triangle inequality ``I3 <= I1 + I2`` (each at
most the sum of the other two: the moments are sums of ``m (y² + z²)`` and the like). A
violation up to :data:`ROUND_OFF` is round-off and accepted silently::

    tolerance = ROUND_OFF_RELATIVE * max |I_k| + ROUND_OFF_ABSOLUTE

(``1e-6`` of the body's largest moment: inertias are written with six or more significant digits
and rotated by ``rpy`` angles, so a thin rod or a flat plate, which meets ``I3 = I1 + I2``
exactly, lands a few 1e-7 on either side of it; plus ``1e-12 kg m²``, below any real body's
moment, so that a point mass written as ``[-2.4e-35, 0, 2.4e-35]`` is a point mass). Beyond
that the policy decides:

* ``"warn"`` (the default): load the inertia as written, with one :class:`InertiaWarning` per
  body naming it, its principal moments and the condition it violates (what Drake and
  Pinocchio do: vendor files carry such defects and users cannot fix them);
* ``"strict"``: refuse it (:class:`ModelError`, the same text);
* ``"repair"``: replace it by the nearest physical inertia (:func:`nearest_physical`: the same
  principal axes, the moments projected onto the physical cone in the Frobenius norm; the mass
  and centre of mass kept) and say so in the warning, with the new moments (MuJoCo's
  ``balanceinertia`` does a similar repair).

**Merging** (:class:`MergedBody`): the mass, centre of mass and inertia of several bodies fixed
to one frame (parallel-axis theorem), as Pinocchio merges the links of fixed joints. Used by the
URDF import (:mod:`core.io.urdf`) and by the model compiler (:mod:`core.system`), which folds the
bodies of rigidly attached frames into their parent so that the kernels skip those frames."""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from core.errors import InertiaWarning, ModelError

#: The inertia policies (see the module docstring).
INERTIA_POLICIES = ("warn", "strict", "repair")
#: Round-off: a violation up to ``ROUND_OFF_RELATIVE * max |I_k| + ROUND_OFF_ABSOLUTE`` (kg m²).
ROUND_OFF_RELATIVE = 1e-6
ROUND_OFF_ABSOLUTE = 1e-12

# the physical cone of sorted or unsorted principal moments: a . I >= 0 for every row
_CONE = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1, -1], [1.0, -1, 1], [-1.0, 1, 1]])


def check_policy(policy) -> str:
    """``policy`` if it is one of :data:`INERTIA_POLICIES`, else a :class:`ModelError`."""
    if policy not in INERTIA_POLICIES:
        raise ModelError(f"inertia: the policy must be one of {', '.join(map(repr, INERTIA_POLICIES))}, "
                         f"got {policy!r}")
    return policy


def _fmt(values) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


def inertia_violations(inertia) -> list[str]:
    """The physical conditions that the symmetric 3x3 ``inertia`` violates beyond round-off
    (empty when it is physical); each names the principal moments."""
    moments = np.linalg.eigvalsh(np.asarray(inertia, float))
    tol = ROUND_OFF_RELATIVE * float(np.max(np.abs(moments))) + ROUND_OFF_ABSOLUTE
    out = []
    if moments[0] < -tol:
        out.append(f"principal moments {_fmt(moments)} are not all non-negative (the inertia is not "
                   "positive semi-definite)")
    if moments[2] > moments[0] + moments[1] + tol:
        out.append(f"principal moments {_fmt(moments)} violate the triangle inequality (the largest, "
                   f"{moments[2]:.6g}, exceeds the sum of the other two, {moments[0] + moments[1]:.6g})")
    return out


def nearest_physical(inertia) -> np.ndarray:
    """The physical inertia nearest to the symmetric ``inertia`` in the Frobenius norm: the same
    principal axes, the principal moments projected onto the cone ``I_k >= 0``, ``I_i <= I_j +
    I_k`` (an exact projection: the nearest point over the cone's faces, edges and apex)."""
    I = np.asarray(inertia, float)
    moments, axes = np.linalg.eigh(0.5 * (I + I.T))
    best, best_d = np.zeros(3), float(moments @ moments)
    for k in range(1, 3):
        for rows in itertools.combinations(range(6), k):
            C = _CONE[list(rows)]
            # the projection onto {C x = 0}: x = m - C^T (C C^T)^-1 C m
            G = C @ C.T
            if abs(np.linalg.det(G)) < 1e-12:
                continue
            x = moments - C.T @ np.linalg.solve(G, C @ moments)
            d = float((x - moments) @ (x - moments))
            if d < best_d and np.all(_CONE @ x >= -1e-15 * max(1.0, float(np.abs(x).max()))):
                best, best_d = x, d
    if np.all(_CONE @ moments >= 0):
        best = moments
    return (axes * best) @ axes.T


def check_inertia(inertia, where: str, policy: str = "warn", stacklevel: int = 3) -> np.ndarray:
    """The inertia to use for a body under ``policy`` (see the module docstring): as given when
    it is physical to round-off, or under ``"warn"``; refused under ``"strict"``; the nearest
    physical one under ``"repair"``. ``where`` names the body in the message."""
    I = np.asarray(inertia, float)
    violations = inertia_violations(I)
    if not violations:
        return I
    text = f"{where}: inertia is not physical: " + "; ".join(violations)
    if policy == "strict":
        raise ModelError(text + " (inertia='strict' refuses it; the default 'warn' loads it with a "
                         "warning, 'repair' replaces it by the nearest physical inertia)")
    if policy == "repair":
        J = nearest_physical(I)
        warnings.warn(f"{text}; repaired to the nearest physical inertia, principal moments "
                      f"{_fmt(np.linalg.eigvalsh(J))} (inertia='repair')", InertiaWarning, stacklevel=stacklevel)
        return J
    warnings.warn(f"{text}; loaded as written (inertia='repair' replaces it by the nearest physical "
                  "inertia, inertia='strict' refuses it)", InertiaWarning, stacklevel=stacklevel)
    return I


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
