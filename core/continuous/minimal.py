"""Minimal linearization: linear equations in independent coordinates and speeds only.

Peterson, Gede & Hubbard ("A linearization procedure for constrained multibody systems")
write a constrained system with coordinates ``q`` (n), generalized speeds ``v`` (o; the paper's
``u``), configuration constraints ``f_c(q) = 0`` (l rows) and velocity constraints
``f_v(q, v) = 0`` (m rows), and linearize it in ``n - l`` independent coordinates ``q_i`` and
``o - m`` independent speeds ``v_i`` only. (As everywhere in mechnode, ``u`` are the inputs,
the paper's ``r``; see :mod:`core.conventions`.)

In mechnode the speeds are the coordinate rates, ``v = dq`` (``o = n``), and the velocity
constraints of the paper are *all* velocity-level rows, the differentiated holonomic ones
included (as the paper allows)::

    f_c(q)     = h(q)                          l  = nh rows
    f_v(q, dq) = [Dh(q) dq ; A_v(q) dq]        m  = nh + nv rows

with ``A_v`` the rows of the velocity constraints (knife edges, skates; see
:mod:`core.tree.constraints`). The minimal state therefore has ``p = (n - l) + (n - l - nv)``
entries, ordered ``x_i = [q_i, dq_i]``, each group in model order; speeds are named like the
state (``"d" + coordinate``, see :attr:`core.System.state_names`).

Maps back to all coordinates (the paper's C0, C1, C2, with ``P_qi, P_qd, P_vi, P_vd`` the
column selections of independent / dependent coordinates and speeds; the paper's ``P_ui, P_ud``)::

    dq_full  = C0 dq_i                     C0 = [I - P_qd (Df_c P_qd)^-1 Df_c] P_qi
    dv_full  = C1 dq_full + C2 dv_i        C1 = -P_vd (D_v f_v P_vd)^-1 D_q f_v
                                           C2 = [I - P_vd (D_v f_v P_vd)^-1 D_v f_v] P_vi
    dx_full  = T dx_i,   T = [[C0, 0], [C1 C0, C2]]     (2n x p)

``T`` is the derivative of the local parameterization ``x = phi(x_i)`` of the constraint
manifold ``{h = 0, Dh dq = 0, A_v dq = 0}`` by the independent variables (dependent coordinates
solved from ``h``, dependent speeds from the velocity rows), so ``range(T)`` is the tangent space
of the manifold, i.e. the null space of the constraint derivatives.

How A and B are computed, and why this is the paper's result
------------------------------------------------------------
With ``(A_full, B_full) = System.linearize`` (the exact full-coordinate linearization, the
multipliers eliminated as functions of the state) and ``S`` the selection of the rows
``[dq_i', dv_i']`` of the full state derivative::

    A = S A_full T,        B = S B_full.

This is the exact Jacobian of the reduced equations ``x_i' = S f(phi(x_i), u)`` at the given
state, equilibrium or not. It is the same matrix as the paper's ``P'^T M~^-1 A~`` /
``P'^T M~^-1 B~``: the paper stacks the kinematic rows (``M~_qq = I``, ``A~_qv = I``), the
linearized acceleration constraints ``D_v f_v dv' = -D_q f_a dq - D_v f_a dv`` and ``o - m``
constraint-free dynamic rows, substitutes ``[dq; dv] = T [dq_i; dv_i]`` (its eq. "state space
constrained" is exactly ``A~ T``), solves with ``M~`` and keeps the rows ``P' = blkdiag(P_qi,
P_vi)`` of the independent rates. ``A_full`` satisfies every one of those rows for every state
direction (its accelerations satisfy the linearized acceleration constraints, and the projected
dynamic rows are the full dynamics with the multipliers eliminated), so ``M~^-1 A~ T = A_full T``
and ``P'^T M~^-1 A~ T = S A_full T``. (The paper's definitions ``A~_vqc = -A~_qq - D_q f_a``
and ``A~_vvc = -A~_qv - D_v f_a`` (its ``A~_uqc``, ``A~_uuc``) contain a misprint: ``A~_qv`` is
n x o while ``A~_vvc`` is m x o; with ``f_a`` independent of ``dq`` as here the correct blocks
are ``-D_q f_a`` and ``-D_v f_a``.)
``tests/test_minimal.py`` assembles the paper's M~, A~, B~, P' and checks the equality.

At an equilibrium (``dq = 0``, ``ddq = 0``) ``range(T)`` is invariant under ``A_full`` and
``A_full T = T A``: ``A`` is ``A_full`` restricted to the constraint-consistent subspace, the
remaining ``2 nh + nv`` eigenvalues of ``A_full`` are the zeros of the (linearly evolving)
constraint residuals, and the two linear systems have the same trajectories from consistent
initial conditions. Away from equilibria the tangent space of the manifold is not invariant
under the frozen ``A_full`` (the manifold is curved and the flow moves along it), so only the
reduced-ODE statement above holds; for the same reason two different choices of independent
variables give similar matrices only at equilibria.

Choice of the independent variables and its conditioning
--------------------------------------------------------
The paper needs ``Df_c P_qd`` and ``D_v f_v P_vd`` invertible. Their plain condition number
says nothing for a single constraint (a 1 x 1 matrix), so we report the representation-
independent amplification

    condition = || (J P_d)^-1 J ||_2 = 1 / sigma_min(N P_d)  (>= 1)

with ``J`` the constraint Jacobian and ``N`` an orthonormal basis of its rows; it does not
change when constraints are rescaled or combined, it is infinite for a singular choice, and for
the coordinates it equals ``||C0||_2``, the gain from independent to all coordinates. By default
the dependent coordinates are the first ``l`` pivots of a column-pivoted QR factorization of
``N`` (best-conditioned columns first). The dependent speeds are the rates of the dependent
coordinates plus ``nv`` speeds picked by a pivoted QR of the velocity rows restricted to the
remaining speeds (``A_v C0``, orthonormalized), so the independent speeds are rates of
independent coordinates; should that pairing be ill conditioned, a pivoted QR of all velocity
rows is used instead when it is better. A user choice (names of coordinates and/or speeds) is
validated; a choice whose condition exceeds ``condition_limit`` raises a ValueError naming the
automatic choice.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from core.base.jit import njit
from core.continuous import floating
from core.continuous.dynamics import check_consistent
from core.tree.constraints import velocity_rows
from core.tree.coupling import coupled_prepare
from core.validation import check_vector, number

__all__ = ["MinimalInfo", "linearize_minimal", "velocity_constraint"]


@dataclass(frozen=True, eq=False)
class MinimalInfo:
    """What :func:`linearize_minimal` chose and the maps back to all coordinates.

    Attributes
    ----------
    independent_coordinates, dependent_coordinates : tuple of str
        Names, model order.
    independent_speeds, dependent_speeds : tuple of str
        Names ``"d" + coordinate``, model order.
    C0 : ndarray, shape (n, n - l)
        ``dq = C0 dq_i``.
    C1, C2 : ndarray, shapes (n, n) and (n, n - l - nv)
        ``d(dq) = C1 dq + C2 d(dq_i)`` (so ``d(dq) = C1 C0 dq_i + C2 d(dq_i)``).
    T : ndarray, shape (2n, p)
        ``[dq; d(dq)] = T x_i`` for the minimal state ``x_i``.
    state_index : ndarray of int
        Positions of the minimal state's entries in the full state ``[q, dq]`` (the paper's
        ``P'``: ``A = A_full[state_index] @ T``).
    condition_coordinates, condition_speeds : float
        ``||(J P_d)^-1 J||_2`` of the holonomic Jacobian and of the velocity rows for the
        dependent choice (1 when nothing is dependent).
    """

    independent_coordinates: tuple
    independent_speeds: tuple
    dependent_coordinates: tuple
    dependent_speeds: tuple
    C0: np.ndarray
    C1: np.ndarray
    C2: np.ndarray
    T: np.ndarray
    condition_coordinates: float
    condition_speeds: float
    state_index: np.ndarray

    @property
    def state_names(self) -> list:
        """Names of the minimal state ``[independent coordinates, independent speeds]``."""
        return list(self.independent_coordinates) + list(self.independent_speeds)


# ------------------------------------------------------------------------------ kernels
@njit(cache=True, nogil=True)
def _velocity_kernel(model, data, q, dq, Av, Gv):
    """Rows ``A_v`` of the velocity constraints and ``Gv = d(A_v(q) dq)/dq`` (exact).

    ``velocity_rows`` adds ``lam_r d a_r,i / dq_k`` into ``lam_dA[i, k]``; with ``lam = e_r``
    row ``r`` of ``Gv`` is ``sum_i lam_dA[i, k] dq_i``.
    """
    n = model.nq
    nv = model.vc_frame.shape[0]
    coupled_prepare(model, data, q, dq)
    b = np.zeros(nv)
    Cq = np.zeros((nv, n))
    Cv = np.zeros((nv, n))
    zeros_n = np.zeros(n)
    lam = np.zeros(nv)
    for r in range(nv):
        lam[:] = 0.0
        lam[r] = 1.0
        lam_dA = np.zeros((n, n))
        velocity_rows(model, data, dq, zeros_n, lam, 0, Av, b, Cq, Cv, lam_dA)
        Gv[r, :] = lam_dA.T @ dq


def velocity_constraint(system, q, dq):
    """Velocity constraints ``f_v = A_v(q) dq`` and their Jacobians.

    Returns ``(f_v, df_v/dq, df_v/d(dq))`` = ``(A_v dq, d(A_v(q) dq)/dq, A_v)``, shapes (nv,),
    (nv, n), (nv, n); rows in the model's order of velocity constraints.
    """
    model = system.model
    n, nv = model.nq, model.nv
    q = check_vector("q", q, n, system.config_names)
    dq = check_vector("dq", dq, n, system.config_names)
    Av, Gv = np.zeros((nv, n)), np.zeros((nv, n))
    if nv:
        data, _ = system.workspace.get()
        _velocity_kernel(model, data, q, dq, Av, Gv)
    return Av @ dq, Gv, Av


# ------------------------------------------------------------------------------ selection
def _orthonormal_rows(J: np.ndarray, what: str) -> np.ndarray:
    """Orthonormal basis (as rows) of the row space of ``J``; ValueError if rank deficient."""
    if J.shape[0] == 0:
        return np.zeros((0, J.shape[1]))
    if J.shape[0] > J.shape[1]:
        raise ValueError(f"{what}: {J.shape[0]} independent rows are needed but there are only "
                         f"{J.shape[1]} variables")
    _, s, Vt = np.linalg.svd(J, full_matrices=False)
    if not s[-1] > 1e-12 * max(s[0], 1e-300):
        raise ValueError(f"{what} are linearly dependent at this state (singular values "
                         f"{np.array2string(s, precision=3)}): redundant or degenerate "
                         "constraints, so no choice of independent variables exists")
    return Vt


def _condition(N: np.ndarray, dep) -> float:
    """``1 / sigma_min(N[:, dep])`` = ``||(J P_d)^-1 J||_2`` for orthonormal rows ``N``."""
    if len(dep) == 0:
        return 1.0
    s = np.linalg.svd(N[:, list(dep)], compute_uv=False)
    return float("inf") if not s[-1] > 0 else max(1.0, float(1.0 / s[-1]))  # >= 1 exactly


def _pivots(N: np.ndarray, k: int) -> list:
    """Columns of ``N`` chosen first by column-pivoted QR (the best-conditioned ``k``)."""
    if k == 0:
        return []
    _, _, piv = scipy.linalg.qr(N, mode="economic", pivoting=True)
    return sorted(int(i) for i in piv[:k])


def _complement(n: int, dep) -> list:
    d = set(dep)
    return [i for i in range(n) if i not in d]


def _elimination(J: np.ndarray, dep, ind) -> np.ndarray:
    """Columns ``[I; -(J P_d)^-1 J P_i]`` placed in model rows: the paper's C0 / C2 form."""
    n = J.shape[1]
    C = np.zeros((n, len(ind)))
    C[ind, np.arange(len(ind))] = 1.0
    if len(dep):
        C[dep] = -np.linalg.solve(J[:, dep], J[:, ind])
    return C


def _auto_speeds(Nv: np.ndarray, Dh: np.ndarray, Av: np.ndarray, q_dep, n: int, limit: float):
    """Dependent speeds: rates of ``q_dep`` plus pivoted-QR picks from ``A_v`` restricted to the
    other rates (fallback: pivoted QR of all velocity rows when that is better conditioned)."""
    nv = Av.shape[0]
    q_ind = _complement(n, q_dep)
    picks: list | None = []
    if nv:
        Sv = Av @ _elimination(Dh, q_dep, q_ind)  # nv x (n - l): A_v on the holonomic tangent space
        try:
            Nav = _orthonormal_rows(Sv, "the velocity constraint rows")
            picks = [q_ind[j] for j in _pivots(Nav, nv)]
        except ValueError:
            picks = None
    if picks is not None:
        v_dep = sorted(list(q_dep) + picks)
        kappa = _condition(Nv, v_dep)
        if kappa <= limit:
            return v_dep, kappa
    v_dep_global = _pivots(Nv, Nv.shape[0])
    kappa_global = _condition(Nv, v_dep_global)
    if picks is None or kappa_global < kappa:
        return v_dep_global, kappa_global
    return v_dep, kappa


def _parse_independent(independent, config_names):
    """Split user names into coordinate and speed indices (model order); validate names."""
    if isinstance(independent, str):
        independent = [independent]
    try:
        names = list(independent)
    except TypeError:
        raise ValueError(f"independent must be a list of variable names, got {independent!r}") from None
    index = {nm: i for i, nm in enumerate(config_names)}
    coords, speeds, unknown = [], [], []
    for nm in names:
        if not isinstance(nm, str):
            raise ValueError(f"independent: names must be strings, got {nm!r}")
        if nm in index:
            coords.append(index[nm])
        elif nm.startswith("d") and nm[1:] in index:
            speeds.append(index[nm[1:]])
        else:
            unknown.append(nm)
    if unknown:
        raise ValueError(f"independent: unknown variable name(s) {unknown}; coordinates are "
                         f"{list(config_names)} and speeds {['d' + c for c in config_names]}")
    for kind, idx in (("coordinate", coords), ("speed", speeds)):
        if len(set(idx)) != len(idx):
            dup = sorted({config_names[i] for i in idx if idx.count(i) > 1})
            pre = "d" if kind == "speed" else ""
            raise ValueError(f"independent: {kind}(s) {[pre + d for d in dup]} named more than once")
    return sorted(coords), sorted(speeds)


# ------------------------------------------------------------------------------ main entry
def linearize_minimal(system, q, dq, u=None, independent=None, condition_limit: float = 1e8, *,
                      residual_limit: float | None = 1e-6, anchors=None):
    """Linearization in independent coordinates and speeds only: ``(A, B, info)``.

    ``x_i' = A x_i + B u`` with ``x_i = [q_i, dq_i]`` (each group in model order), ``A`` of size
    ``p = (n - nh) + (n - nh - nv)``, ``B`` (p x inputs), ``u`` as in :meth:`System.linearize`
    (:attr:`System.continuous_input_names`: force inputs, then the accelerations of kinematic
    variables); ``info`` is a :class:`MinimalInfo`
    (choice of variables, maps ``C0, C1, C2, T`` back to all coordinates, conditioning).

    ``(q, dq)`` must satisfy the constraints (``h = 0``, ``Dh dq = 0``, ``A_v dq = 0``) to within
    ``residual_limit`` (a distance in ``q`` / relative in ``dq``; ``None`` skips the check).

    ``independent``: ``None`` (automatic: pivoted QR of the constraint Jacobians), or names of
    the independent coordinates (``n - nh`` of them) and/or of the independent speeds
    (``"d" + coordinate``, ``n - nh - nv`` of them); a group left out is chosen automatically
    (given coordinates without speeds: their rates, plus a pivoted-QR choice when there are
    velocity constraints). A choice whose :attr:`MinimalInfo.condition_coordinates` or
    ``condition_speeds`` exceeds ``condition_limit`` raises ValueError naming the automatic
    choice; so does a state where the constraints themselves are degenerate.

    On a quaternion base (with contacts, :mod:`core.continuous.contacts`) the coordinates are the
    tangent space's ``δ`` and the speeds ``v`` (:mod:`core.continuous.floating`), both named by
    :attr:`System.velocity_names`; ``anchors`` hold the contacts (default: where they are at ``q``).
    """
    model = system.model
    n, nh, nv = model.nq, model.nh, model.nv
    names = system.config_names
    if system.free_flyer:
        n, names = system.nv, system.velocity_names
        q = floating.configuration(system, q)
    else:
        q = check_vector("q", q, n, names)
    dq = check_vector("dq", dq, n, names)
    unames = system.continuous_input_names      # [force inputs, kinematic accelerations]
    u = check_vector("u", u, len(unames), unames, optional=True)
    if not (np.isfinite(condition_limit) and condition_limit >= 1.0):
        raise ValueError(f"condition_limit must be a finite number >= 1, got {condition_limit!r}")
    ni_q, ni_v = n - nh, n - nh - nv
    if ni_v < 0:
        raise ValueError(f"{nh} holonomic + {nv} velocity constraints on {n} coordinates: more "
                         "velocity-level constraints than speeds")

    if system.free_flyer:                                    # (contacts only: no velocity rows)
        h, Dh, Jq = floating.constraint_jacobians(system, q, dq)
        Av = np.zeros((0, n))
    else:
        h, Dh, H2 = system.constraint(q, order=2, anchors=anchors)
        _, Gv, Av = velocity_constraint(system, q, dq)
        Jq = np.vstack([np.einsum("rij,j->ri", H2, dq), Gv])   # D_q f_v   (m x n)
    Jv = np.vstack([Dh, Av])                                 # D_v f_v   (m x n), v = dq

    if residual_limit is not None:
        check_consistent(system, h, Jv, dq, number("residual_limit", residual_limit, positive=True),
                         "the minimal linearization")

    Nc = _orthonormal_rows(Dh, "the holonomic constraint rows")
    Nv = _orthonormal_rows(Jv, "the velocity-level constraint rows (Dh and the velocity constraints)")

    user_q, user_v = _parse_independent(independent, names) if independent is not None else ([], [])
    if user_q and len(user_q) != ni_q:
        raise ValueError(f"independent: {len(user_q)} coordinate(s) {[names[i] for i in user_q]} "
                         f"named, but there are exactly {ni_q} independent coordinates "
                         f"({n} coordinates - {nh} holonomic constraints)")
    if user_v and len(user_v) != ni_v:
        raise ValueError(f"independent: {len(user_v)} speed(s) {['d' + names[i] for i in user_v]} "
                         f"named, but there are exactly {ni_v} independent speeds ({n} speeds - "
                         f"{nh} holonomic - {nv} velocity constraints)")

    # coordinates
    q_dep_auto = _pivots(Nc, nh)
    kappa_auto = _condition(Nc, q_dep_auto)
    if kappa_auto > condition_limit:
        raise ValueError(f"the holonomic constraint Jacobian is nearly singular at this state: even "
                         f"the best choice of dependent coordinates {[names[i] for i in q_dep_auto]} has "
                         f"condition {kappa_auto:.3g} > condition_limit {condition_limit:g}")
    if user_q:
        q_dep = _complement(n, user_q)
        kappa_q = _condition(Nc, q_dep)
        if kappa_q > condition_limit:
            better = [names[i] for i in _complement(n, q_dep_auto)]
            raise ValueError(
                f"independent coordinates {[names[i] for i in user_q]} are a poorly conditioned "
                f"choice at this state: the dependent coordinates {[names[i] for i in q_dep]} are "
                f"(nearly) undetermined by the holonomic constraints (condition of Df_c P_qd "
                f"{kappa_q:.3g} > condition_limit {condition_limit:g}); better independent "
                f"coordinates: {better} (condition {kappa_auto:.3g})")
    else:
        q_dep, kappa_q = q_dep_auto, kappa_auto
    q_ind = _complement(n, q_dep)

    # speeds
    v_dep_auto, kappa_v_auto = _auto_speeds(Nv, Dh, Av, q_dep, n, condition_limit)
    if kappa_v_auto > condition_limit:
        raise ValueError(f"the velocity-level constraint rows are nearly singular at this state: "
                         f"even the best choice of dependent speeds {['d' + names[i] for i in v_dep_auto]} "
                         f"has condition {kappa_v_auto:.3g} > condition_limit {condition_limit:g}")
    if user_v:
        v_dep = _complement(n, user_v)
        kappa_v = _condition(Nv, v_dep)
        if kappa_v > condition_limit:
            better = ["d" + names[i] for i in _complement(n, v_dep_auto)]
            raise ValueError(
                f"independent speeds {['d' + names[i] for i in user_v]} are a poorly conditioned "
                f"choice at this state: the dependent speeds {['d' + names[i] for i in v_dep]} are "
                f"(nearly) undetermined by the velocity constraints (condition of D_v f_v P_vd "
                f"{kappa_v:.3g} > condition_limit {condition_limit:g}); better independent "
                f"speeds: {better} (condition {kappa_v_auto:.3g})")
    else:
        v_dep, kappa_v = v_dep_auto, kappa_v_auto
    v_ind = _complement(n, v_dep)

    # maps back to all coordinates (paper eqs. C_0, C_1, C_2)
    C0 = _elimination(Dh, q_dep, q_ind)
    C2 = _elimination(Jv, v_dep, v_ind)
    C1 = np.zeros((n, n))
    if v_dep:
        C1[v_dep] = -np.linalg.solve(Jv[:, v_dep], Jq)
    p = len(q_ind) + len(v_ind)
    T = np.zeros((2 * n, p))
    T[:n, :len(q_ind)] = C0
    T[n:, :len(q_ind)] = C1 @ C0
    T[n:, len(q_ind):] = C2

    A_full, B_full = system.linearize(q, dq, u, residual_limit=None, anchors=anchors)   # (checked above)
    state_index = np.array(q_ind + [n + i for i in v_ind], dtype=np.int64)
    A = A_full[state_index] @ T
    B = B_full[state_index].copy()
    info = MinimalInfo(
        independent_coordinates=tuple(names[i] for i in q_ind),
        independent_speeds=tuple("d" + names[i] for i in v_ind),
        dependent_coordinates=tuple(names[i] for i in q_dep),
        dependent_speeds=tuple("d" + names[i] for i in v_dep),
        C0=C0, C1=C1, C2=C2, T=T,
        condition_coordinates=kappa_q, condition_speeds=kappa_v, state_index=state_index)
    return A, B, info
