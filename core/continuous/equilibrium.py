"""Consistent states and static equilibria (trep's ``satisfy_constraints`` and the static part of
``minimize_potential_energy``), built on the public functions of :class:`core.System`.

* :func:`satisfy_constraints` — a configuration moved onto ``h(q) = 0`` by Gauss-Newton with
  least-norm steps in the free coordinates (chosen coordinates held fixed);
* :func:`project_velocity` — a velocity moved onto ``{Dh(q) dq = 0, A_v(q) dq = 0}`` by the
  least-norm change of the free velocities;
* :func:`holding_inputs` — the inputs that hold a configuration at rest (``dq = 0``,
  ``ddq = 0``), in the least-squares sense, with the residual force that no input can cancel.

Static balance. The continuous equations (:mod:`core.continuous.dynamics`) at ``dq = 0``, ``ddq = 0`` on
the dynamic rows ``d`` (the kinematic variables' accelerations are inputs, here zero) read::

    L_q(q, 0)_d + B(q)_d u + C(q)_d^T lam = 0,        C = [Dh ; A_v]

with ``B = System.input_matrix`` and ``lam`` the constraint forces, which are free. With ``N`` an
orthonormal basis of the motions the constraints allow (the null space of ``C_d``) the
multipliers drop out: ``N^T (L_q,d + B_d u) = 0``. :func:`holding_inputs` returns the least-norm
``u`` that minimizes ``|N^T (L_q,d + B_d u)|``; that minimum is the reported residual (a
generalized force, N or N m), zero when the system can hold ``q``.

The midpoint integrator's rest state is :meth:`core.MidpointVI.rest_state`: ``p = D2 L_d(q, q)``
(not ``dL/d dq (q, 0) = 0``), kept fixed by the one-step map under :func:`holding_inputs`.
"""
from __future__ import annotations

import numpy as np

from core.continuous.floating import refuse
from core.continuous.minimal import velocity_constraint
from core.errors import EquilibriumError, SingularMatrixError
from core.validation import check_vector, number

__all__ = ["satisfy_constraints", "project_velocity", "holding_inputs"]

#: Relative singular-value threshold below which a constraint Jacobian has lost rank.
RANK_TOLERANCE = 1e-10


def _free_index(system, fixed, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(free, fixed)`` index arrays from ``fixed`` (names and/or indices of coordinates);
    ValueError naming an unknown name, an index out of range or a repeated entry."""
    names = system.config_names
    n = len(names)
    if fixed is None:
        fixed = ()
    elif isinstance(fixed, (str, int, np.integer)):
        fixed = (fixed,)
    try:
        items = list(fixed)
    except TypeError:
        raise ValueError(f"{what}: fixed must be names or indices of coordinates, got {fixed!r}") from None
    index = []
    for item in items:
        if isinstance(item, str):
            if item not in names:
                raise ValueError(f"{what}: unknown coordinate {item!r} in fixed; the coordinates "
                                 f"are {names}")
            index.append(names.index(item))
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not -n <= item < n:
                raise ValueError(f"{what}: index {item} in fixed is out of range for {n} "
                                 f"coordinates {names}")
            index.append(int(item) % n)
        else:
            raise ValueError(f"{what}: fixed entries must be coordinate names or indices, got {item!r}")
    if len(set(index)) != len(index):
        dup = sorted({names[i] for i in index if index.count(i) > 1})
        raise ValueError(f"{what}: coordinate(s) {dup} named more than once in fixed")
    held = np.array(sorted(index), np.int64)
    free = np.array([i for i in range(n) if i not in set(index)], np.int64)
    return free, held


def _rank_check(J: np.ndarray, free, held, rows: str, system, what: str) -> None:
    """SingularMatrixError unless the constraint rows ``J`` (restricted to the free columns)
    have full row rank: the free coordinates must be able to move every row."""
    names = system.config_names
    nrow = J.shape[0]
    held_names = [names[i] for i in held]
    if J.shape[1] < nrow:
        raise SingularMatrixError(
            f"{what}: {nrow} {rows} need at least {nrow} free coordinates, but fixed = "
            f"{held_names} leaves {J.shape[1]} ({[names[i] for i in free]})",
            f"{rows} of the free coordinates", -1)
    s = np.linalg.svd(J, compute_uv=False)
    if not (s.size and s[-1] > RANK_TOLERANCE * max(s[0], 1e-300)):
        raise SingularMatrixError(
            f"{what}: the {rows} restricted to the free coordinates {[names[i] for i in free]} "
            f"are rank deficient at this configuration (singular values "
            f"{np.array2string(s, precision=3)}): fixed = {held_names} holds a coordinate "
            "the constraints need, or the constraints are redundant or degenerate here",
            f"{rows} of the free coordinates", -1)


def satisfy_constraints(system, q, fixed=(), tol: float = 1e-12, max_iter: int = 50) -> np.ndarray:
    """``q`` moved onto the holonomic constraints ``h(q) = 0``, the coordinates in ``fixed`` held
    exactly (trep's ``satisfy_constraints``).

    Gauss-Newton with least-norm steps in the free coordinates ``f``:
    ``q_f <- q_f - Dh_f(q)^+ h(q)`` (``Dh_f`` the columns of the free coordinates), halved
    while a step does not reduce ``|h|``. Converged when every ``|h_r| <= tol`` (or when the
    step has shrunk to rounding level: ``h`` is then as small as float64 allows at this
    scale).

    Parameters
    ----------
    system : System
        Not one with a quaternion floating base.
    q : array_like, shape (nq,)
        The configuration to start from.
    fixed : str, int or sequence of str or int
        Names or indices of the coordinates held (default none).
    tol : float
        Largest ``|h_r|`` accepted, > 0.
    max_iter : int
        Most Gauss-Newton iterations, >= 1.

    Returns
    -------
    ndarray, shape (nq,)
        A new array; a system without holonomic constraints returns a copy of ``q``.

    Raises
    ------
    SingularMatrixError
        ``Dh_f`` lacks full row rank (``fixed`` leaves too few free coordinates, or holds one the
        constraints need).
    EquilibriumError
        No convergence within ``max_iter`` iterations, or a stall (the constraints cannot be met
        with these coordinates held); ``.residual`` is the largest ``|h_r|``.
    ValueError
        ``q`` of the wrong length or not finite, ``tol`` or ``max_iter`` out of range, or an
        unknown, out-of-range or repeated entry of ``fixed``.
    ModelError
        ``system`` has a quaternion floating base.
    """
    what = "satisfy_constraints"
    refuse(system, what)
    q = check_vector("q", q, system.nq, system.config_names).copy()
    tol = number("tol", tol, positive=True)
    max_iter = int(number("max_iter", max_iter, positive=True, integer=True))
    free, held = _free_index(system, fixed, what)
    if system.model.nh == 0:
        return q
    h, Dh = system.constraint(q, 1)
    eps = np.finfo(float).eps
    for it in range(max_iter + 1):
        if np.max(np.abs(h)) <= tol:
            return q
        if it == max_iter:
            break
        J = Dh[:, free]
        _rank_check(J, free, held, "holonomic constraint rows", system, what)
        step = np.linalg.lstsq(J, h, rcond=None)[0]
        if np.linalg.norm(step) <= 4 * eps * (1.0 + np.linalg.norm(q[free])):
            return q          # at rounding level: no further progress is possible
        norm, alpha = np.linalg.norm(h), 1.0
        while True:
            trial = q.copy()
            trial[free] -= alpha * step
            h_t, Dh_t = system.constraint(trial, 1)
            if np.linalg.norm(h_t) < norm:
                break
            alpha *= 0.5
            if alpha < 1e-8:
                raise EquilibriumError(
                    f"{what}: Gauss-Newton stalled at |h| = {np.max(np.abs(h)):.3g} (constraint "
                    f"row {int(np.argmax(np.abs(h)))}) after {it} iteration(s): the free "
                    f"coordinates cannot bring h to zero from here (a least-squares point, not a "
                    f"solution); hold fewer coordinates or start closer", residual=float(np.max(np.abs(h))))
        q, h, Dh = trial, h_t, Dh_t
    raise EquilibriumError(
        f"{what}: no convergence in {max_iter} iterations: |h| = {np.max(np.abs(h)):.3g} "
        f"(constraint row {int(np.argmax(np.abs(h)))}, tol {tol:g}); start closer to the "
        "constraints or raise max_iter", residual=float(np.max(np.abs(h))))


def _constraint_rows(system, q) -> np.ndarray:
    """``C(q) = [Dh(q); A_v(q)]``: the holonomic Jacobian and the velocity constraint rows."""
    rows = [system.constraint(q, 1)[1]] if system.model.nh else []
    if system.model.nv:
        rows.append(velocity_constraint(system, q, np.zeros(system.nq))[2])
    return np.vstack(rows) if rows else np.zeros((0, system.nq))


def project_velocity(system, q, dq, fixed=()) -> np.ndarray:
    """``dq`` moved onto the constraint tangent space ``{Dh(q) dq = 0, A_v(q) dq = 0}`` by the
    least-norm change of the free velocities, those of ``fixed`` unchanged.

    ``dq_f <- dq_f - C_f^+ C dq`` with ``C = [Dh; A_v]`` and ``C_f`` its free columns (the
    orthogonal projection of ``dq`` when nothing is fixed).

    Parameters
    ----------
    system : System
        Not one with a quaternion floating base.
    q : array_like, shape (nq,)
        The configuration; it should satisfy the constraints (see :func:`satisfy_constraints`).
    dq : array_like, shape (nq,)
        The velocity to project.
    fixed : str, int or sequence of str or int
        Names or indices of the coordinates whose velocities are held (default none).

    Returns
    -------
    ndarray, shape (nq,)
        A new array (a copy of ``dq`` for a system without constraints).

    Raises
    ------
    SingularMatrixError
        ``C_f`` lacks full row rank.
    ValueError
        ``q`` or ``dq`` of the wrong length or not finite, or an unknown, out-of-range or
        repeated entry of ``fixed``.
    ModelError
        ``system`` has a quaternion floating base.
    """
    what = "project_velocity"
    refuse(system, what)
    names = system.config_names
    q = check_vector("q", q, system.nq, names)
    dq = check_vector("dq", dq, system.nq, names).copy()
    free, held = _free_index(system, fixed, what)
    C = _constraint_rows(system, q)
    if C.shape[0] == 0:
        return dq
    _rank_check(C[:, free], free, held, "constraint rows (holonomic and velocity)", system, what)
    dq[free] -= np.linalg.lstsq(C[:, free], C @ dq, rcond=None)[0]
    return dq


def holding_inputs(system, q, tol: float | None = None):
    """Inputs that hold ``q`` at rest: ``u`` making ``dq = 0``, ``ddq = 0`` a solution of the
    constrained dynamics when ``residual`` is zero (the kinematic variables held: their
    accelerations zero).

    Static balance on the dynamic rows, constraint forces free (module docstring):
    ``u`` is the least-norm minimizer of ``|N^T (L_q(q, 0) + B(q) u)|`` over the motions ``N``
    the constraints allow, and ``residual`` that minimum. By default a ``q`` that the inputs
    cannot hold is *returned* with its residual (``u`` then the least-squares best).

    Parameters
    ----------
    system : System
        Not one with a quaternion floating base.
    q : array_like, shape (nq,)
        The configuration; it must satisfy the holonomic constraints.
    tol : float, optional
        With it (> 0), a residual above ``tol`` raises :class:`EquilibriumError`.

    Returns
    -------
    u : ndarray, shape (nu,)
        The inputs, in :attr:`System.input_names` order.
    residual : float
        The 2-norm of the generalized force (N, N m) no input can cancel: > 0 when an
        underactuated system cannot hold ``q``.

    Raises
    ------
    EquilibriumError
        With ``tol``: ``residual > tol`` (``.residual``).
    ValueError
        ``q`` off the holonomic constraints, of the wrong length or not finite; a ``tol`` that
        is not a positive number.
    ModelError
        ``system`` has a quaternion floating base.
    """
    refuse(system, "holding_inputs")
    names = system.config_names
    q = check_vector("q", q, system.nq, names)
    system.check_configuration(q, what="holding_inputs")
    kin = set(system.kinematic_names)
    dyn = np.array([i for i, nm in enumerate(names) if nm not in kin], np.int64)
    zero = np.zeros(system.nq)
    g = system.lagrangian_derivatives(q, zero, 1).Lq[dyn]
    B = system.input_matrix(q)[dyn]
    C = _constraint_rows(system, q)[:, dyn]
    if C.shape[0]:
        _, s, Vt = np.linalg.svd(C)
        rank = int(np.sum(s > RANK_TOLERANCE * max(s[0] if s.size else 0.0, 1e-300)))
        N = Vt[rank:].T            # orthonormal basis of the allowed motions
    else:
        N = np.eye(dyn.size)
    if B.shape[1]:
        u = np.linalg.lstsq(N.T @ B, -(N.T @ g), rcond=None)[0]
    else:
        u = np.zeros(0)
    residual = float(np.linalg.norm(N.T @ (g + B @ u)))
    if tol is not None and residual > number("tol", tol, positive=True):
        raise EquilibriumError(
            f"holding_inputs: the inputs {system.input_names} cannot hold this configuration: "
            f"an unbalanced generalized force of {residual:.3g} remains (tol {tol:g}); the best "
            f"u = {np.array2string(u, precision=4)}", residual=residual)
    return u, residual
