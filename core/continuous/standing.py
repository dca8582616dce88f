"""Standing equilibria of a robot on its contacts (:meth:`core.System.add_contact`): the base pose
that puts the contacts on the ground, the joint torques that hold the robot there and the contact
forces (:func:`standing`).

At rest (``v = 0``) the dynamics hold the robot still when::

    B u + Dhᵀ lam = -dL/dq            (nv rows; tangent space on a quaternion base)

with ``B`` the input matrix, ``Dh`` the contacts' rows and ``dL/dq = -dV/dq`` the gravity.
The rows that no input drives (the base, unactuated joints: the null space ``Z`` of ``Bᵀ``) fix
what the contacts must carry, ``Zᵀ Dhᵀ lam = -Zᵀ dL/dq``; among the forces that do, the one of
minimum norm is taken (or the one that splits the vertical load as asked), then ``u`` holds the
rest. The contacts are bilateral in the dynamics, so a robot that could only stand by pulling on
the ground is refused by the support polygon: point feet need the centre of mass above the convex
hull of their contact points. (Flat feet hold moments; the soles' extent is not in the model,
so their polygon is not checked.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.continuous import floating
from core.continuous.contacts import mass_points, wrenches
from core.errors import EquilibriumError, ModelError
from core.validation import check_vector, number

__all__ = ["Standing", "standing"]

#: The largest unbalanced generalized force (relative to gravity's) a standing state may keep.
BALANCE_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class Standing:
    """A standing equilibrium (:func:`standing`).

    Attributes
    ----------
    q : ndarray, shape (nq,)
        The configuration: the posture given, the base placed.
    u : ndarray, shape (nu,)
        The inputs that hold it (:attr:`core.System.input_names`).
    wrenches : ndarray, shape (nc, 6)
        Each contact's wrench on the robot (:meth:`core.System.contact_wrenches`).
    multipliers : ndarray, shape (nh,)
        The constraint forces (:meth:`core.System.constraint_forces`).
    com : ndarray, shape (3,)
        The centre of mass in the world.
    support : ndarray, shape (k, 2) or None
        The support polygon's vertices (x, y), counter-clockwise, for point contacts.
    """

    q: np.ndarray
    u: np.ndarray
    wrenches: np.ndarray
    multipliers: np.ndarray
    com: np.ndarray
    support: np.ndarray | None


def _gravity(system, q) -> np.ndarray:
    """``dL/dq`` at rest (the tangent space's on a quaternion base)."""
    if system.free_flyer:
        return floating.gravity_force(system, q)
    return system.lagrangian_derivatives(q, np.zeros(system.nq), 1).Lq


def _heights(system, q, height: float):
    """Per contact the row ``z - height`` (and a flat foot's tilt ``e_z . R e_x``, ``e_z . R
    e_y``) and their tangent Jacobian."""
    R, p = system.contact_anchors(q)
    _, Dh = system.constraint(q, 1)
    rows, jac = [], []
    for k, (_, kind, row) in enumerate(system.contacts):
        rows.append(p[k, 2] - height)
        jac.append(Dh[row + 2])
        if kind == "frame":
            omega = R[k] @ Dh[row + 3:row + 6]                    # the foot's angular velocity, world axes
            for axis in (0, 1):
                rows.append(R[k][2, axis])
                jac.append(np.cross(R[k][:, axis], [0.0, 0.0, 1.0]) @ omega)
    return np.array(rows), np.array(jac)


def _place(system, q, height: float) -> np.ndarray:
    """``q`` with its base moved (Gauss-Newton on the base's six tangent directions, minimum
    norm) so that every contact is at ``height`` and every flat foot level."""
    for _ in range(30):
        r, J = _heights(system, q, height)
        if np.abs(r).max() < 1e-13:
            return q
        step = np.zeros(system.nv)
        step[:6] = -np.linalg.lstsq(J[:, :6], r, rcond=None)[0]
        q = system.integrate(q, step)
    r = _heights(system, q, height)[0]
    if np.abs(r).max() > 1e-9:
        heights = {name: float(h) for (name, _, _), h in zip(system.contacts, system.contact_anchors(q)[1][:, 2],
                                                               strict=True)}
        raise EquilibriumError(f"standing: the contacts cannot all be at height {height:g} (with flat feet level) "
                               f"by moving the base at this posture: their heights {heights} (m); the "
                               "posture puts them at different levels", residual=float(np.abs(r).max()))
    return q


def _com(system, q) -> np.ndarray:
    """The centre of mass in the world."""
    masses, points = mass_points(system, q)
    return masses @ points / masses.sum()


def _hull(points: np.ndarray) -> np.ndarray:
    """The convex hull of 2-D points, counter-clockwise (monotone chain)."""
    pts = sorted(map(tuple, points))
    if len(pts) < 3:
        return np.array(pts)

    def half(seq):
        out: list = []
        for p in seq:
            while len(out) >= 2 and _turn(out[-2], out[-1], p) <= 0:
                out.pop()
            out.append(p)
        return out[:-1]
    return np.array(half(pts) + half(pts[::-1]))


def _turn(o, a, b) -> float:
    """The z of ``(a - o) x (b - o)``: positive for a left turn."""
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _outside(point, hull) -> float:
    """How far ``point`` is outside the convex polygon ``hull`` (<= 0 inside)."""
    if len(hull) < 3:
        return float("inf")
    worst = -np.inf
    for a, b in zip(hull, np.roll(hull, -1, axis=0), strict=True):
        edge = b - a
        normal = np.array([edge[1], -edge[0]]) / np.linalg.norm(edge)     # outward (counter-clockwise)
        worst = max(worst, float(normal @ (point - a)))
    return worst


def _split_rows(system, split, nh: int) -> np.ndarray:
    """Rows ``f_z,k - s_k Σ_j f_z,j = 0`` of a vertical-load split ``s`` (normalized)."""
    contacts = system.contacts
    try:
        s = np.array([number(f"split[{k}]", x) for k, x in enumerate(split)])
    except TypeError:
        raise ValueError(f"split: expected one number per contact {[c[0] for c in contacts]}, got {split!r}") \
            from None
    if s.shape != (len(contacts),) or np.any(s < 0) or not s.sum() > 0:
        raise ValueError(f"split: expected {len(contacts)} non-negative numbers (one per contact "
                         f"{[c[0] for c in contacts]}) with a positive sum, got {list(split)}")
    s = s / s.sum()
    z = np.zeros(nh)
    for _, _, row in contacts:
        z[row + 2] = 1.0
    rows = []
    for k, (_, _, row) in enumerate(contacts):
        r = -s[k] * z
        r[row + 2] += 1.0
        rows.append(r)
    return np.array(rows)


def standing(system, q, height: float | None = None, split=None) -> Standing:
    """The standing equilibrium of ``system`` on its contacts at the posture of ``q`` (the module
    docstring): with ``height``, the base is first moved so that every contact is at that height
    (and every flat foot level); the inputs that hold the robot; the contact forces of minimum
    norm, or (``split``) those that share the vertical load in the given proportions.

    Parameters
    ----------
    system : System
        With contacts (:meth:`core.System.add_contact`), on a quaternion or a fixed base.
    q : array_like, shape (nq,)
        The posture (the joints); with ``height``, the base's yaw and x, y are kept.
    height : float, optional
        The ground plane's height (m); None keeps the base where ``q`` puts it.
    split : sequence of float, optional
        The share of the vertical load per contact (normalized); default: the least-norm forces.

    Returns
    -------
    Standing
        The configuration, the holding inputs, the contact wrenches and multipliers, the centre
        of mass and the support polygon.

    Raises
    ------
    ModelError
        A system without contacts; ``height`` without a quaternion base.
    EquilibriumError
        The contacts cannot be put on the plane at this posture; the inputs and contacts cannot
        hold the weight (the unbalanced force); point feet with the centre of mass outside their
        support polygon (its position, the polygon, the distance); a split the contacts cannot take.
    ValueError
        A wrong size, a non-finite entry, a non-unit quaternion, a bad ``height`` or ``split``.
    """
    if not system.contacts:
        raise ModelError("standing: the system has no contacts (System.add_contact); core.holding_inputs holds a "
                         "robot without them")
    q = floating.configuration(system, q) if system.free_flyer else check_vector("q", q, system.nq, system.config_names)
    if height is not None:
        if not system.free_flyer:
            raise ModelError("standing: height moves a floating base; this system's base is fixed")
        q = _place(system, q, number("height", height))
    g = _gravity(system, q)
    B = system.input_matrix(q)
    _, Dh = system.constraint(q, 1)
    nh = Dh.shape[0]
    _, s, Vt = np.linalg.svd(B.T)
    Z = Vt[int(np.sum(s > 1e-12 * max(s[0] if s.size else 0.0, 1e-300))):].T     # directions no input drives
    rows, rhs = Z.T @ Dh.T, -(Z.T @ g)
    if split is not None:
        rows, rhs = np.vstack([rows, _split_rows(system, split, nh)]), np.concatenate([rhs, np.zeros(len(split))])
    lam = np.linalg.lstsq(rows, rhs, rcond=None)[0]
    scale = max(1.0, float(np.linalg.norm(g)))
    unbalanced = float(np.linalg.norm(rows @ lam - rhs))
    if unbalanced > BALANCE_TOLERANCE * scale:
        what = "the vertical load split" if split is not None else "the weight"
        raise EquilibriumError(f"standing: the contacts {[c[0] for c in system.contacts]} and the inputs cannot "
                               f"hold {what} at this posture: {unbalanced:.3g} (N, N m) of generalized force is "
                               "left on the directions no input drives", residual=unbalanced)
    u = np.linalg.lstsq(B, -g - Dh.T @ lam, rcond=None)[0]
    com = _com(system, q)
    support = None
    points = [system.contact_anchors(q)[1][k] for k, (_, kind, _) in enumerate(system.contacts) if kind == "point"]
    if len(points) == len(system.contacts):
        support = _hull(np.array(points)[:, :2])
        outside = _outside(com[:2], support)
        if outside > 0.0:
            where = (f"by {outside:.4g} m" if np.isfinite(outside)
                     else "(fewer than three point contacts span no polygon)")
            raise EquilibriumError(f"standing: the centre of mass ({com[0]:.4g}, {com[1]:.4g}) m is outside the "
                                   f"support polygon of the point contacts {np.round(support, 4).tolist()} {where}: "
                                   "the robot would tip over", residual=outside)
    return Standing(q, u, wrenches(system, q, lam), lam, com, support)
