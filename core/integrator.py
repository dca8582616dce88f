"""The midpoint variational integrator and its exact first- and second-order linearizations
(Johnson, Schultz & Murphey, "Structured linearization of discrete mechanical systems").

Discrete Lagrangian and forcing (the paper's choice)::

    L_d(q0, q1) = dt L((q0 + q1)/2, (q1 - q0)/dt),  F_d^- = dt F(qm, v, u),  F_d^+ = 0

Forced, constrained DEL equations (28a-c), imposed on the dynamic variables only::

    p_k + D1 L_d(q_k, q_k+1) + F_d^- - Dh(q_k)^T lam_k = 0
    h(q_k+1) = 0
    p_k+1 = D2 L_d(q_k, q_k+1)

Kinematic variables (trep's term) have prescribed trajectories: their next value is an input.

State and input ordering (documented everywhere)::

    x_k = [q_k (all n variables, model order), p_k (dynamic variables), v_k (kinematic variables'
           velocities (rho_k - rho_k-1)/dt)]
    u_k = [force inputs (model input order), rho_k+1 (next values of the kinematic variables)]

Second-order tensor index order: ``H[i, a, b] = d2 x_k+1,i / dz_a dz_b`` with ``z = [x_k, u_k]``
(symmetric in ``a, b``); ``x_k+1 ~ f + A dx + B du + 1/2 dz^T H_i dz``.

How the derivatives are exact: the next configuration and multipliers ``y = (q_k+1,dyn, lam)``
solve ``R(y, z) = 0``; so ``dy/dz = -R_y^-1 R_z`` and ``R_y y_zz = -R_ww(W, W)`` with ``W`` the
first derivatives of every argument of ``R``. ``R`` depends on ``(q_k, q_k+1)`` only through
the midpoint ``xi = (qm, v)``, so its second derivatives are third derivatives of ``L`` at ``xi``
(and the constraint terms ``lam . D3h(q_k)``, ``D2h(q_k+1)``), taken in the slot variables
``w = (q_k, q_k+1)`` and contracted with ``J = dw/dz`` (see :func:`_second_order`).
``R_y`` is ``[[M_k+1, -Dh(q_k)^T], [Dh(q_k+1), 0]]`` restricted to dynamic columns; the
singularity checks of Sec. VII test ``M_k+1`` and ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T``.
"""
from __future__ import annotations

import math
import threading
import numpy as np
from numba import njit, prange

from .constraints import holonomic
from .dynamics import check_vector, is_plain_vector, workspace
from .forces import generalized_force, has_wrench_inputs
from .kinematics import composites, copy_data, create_data, forward_kinematics
from .lagrangian import copy_derivs, create_derivs, gradient_hessian, prepare, third_order
from .rnea import mass_matrix
from .linalg import (add_product, add_run, condition_from_lu, copy_run, lu_checked, lu_solve,
                     symmetric_run)

OK, NEWTON_FAILED, SINGULAR_JACOBIAN, SINGULAR_M, SINGULAR_CONSTRAINT = 0, 1, 2, 3, 4
_NO_SCRATCH = np.empty(0)
_NO_TENSOR = np.empty((0, 0, 0))


class IntegratorError(ArithmeticError):
    """The DEL solve failed or the one-step map is singular; ``step``, ``matrix``, ``residual``
    and ``iterations`` say where and how. An ``ArithmeticError``, so callers that try steps
    (line searches) treat it as a failed trial."""

    def __init__(self, message, step=None, matrix=None, residual=None, iterations=None):
        super().__init__(message)
        self.step, self.matrix, self.residual, self.iterations = step, matrix, residual, iterations


# ------------------------------------------------------------------------------ midpoint terms
@njit(cache=True, nogil=True)
def _midpoint(model, data, der, dt, q0, q1, u, order, F, Fq, Fv, Fu, Fqq, Fqu):
    """Lagrangian (up to ``order``) and force derivatives at the midpoint of (q0, q1)."""
    qm = 0.5 * (q0 + q1)
    v = (q1 - q0) / dt
    prepare(model, data, qm, v)
    gradient_hessian(model, data, qm, min(order, 2), der)
    if order >= 3:
        third_order(model, data, True, v, v, der)
    generalized_force(model, data, v, u, min(order - 1, 2), F, Fq, Fv, Fu, Fqq, Fqu)


@njit(cache=True, nogil=True)
def _slot_jacobians(der, dt, Fq, Fv, Fu):
    """G = D1 L_d + F_d^- and P = D2 L_d as functions of (q0, q1): their Jacobians.

    With G = dt/2 Lq - Lv + dt F and P = dt/2 Lq + Lv at (qm, v):
    dG/dq0 = Gq/2 - Gv/dt, dG/dq1 = Gq/2 + Gv/dt (likewise P); dG/du = dt Fu.
    (One loop instead of array expressions: those built a dozen n x n temporaries.)
    """
    Lqq, Lqv, Lvv = der.Lqq, der.Lqv, der.Lvv
    n = Lqq.shape[0]
    Gq0, Gq1, Pq0, Pq1 = np.empty((n, n)), np.empty((n, n)), np.empty((n, n)), np.empty((n, n))
    half, inv_dt = 0.5 * dt, 1.0 / dt
    for i in range(n):
        for j in range(n):
            gq = half * Lqq[i, j] - Lqv[j, i] + dt * Fq[i, j]
            gv = half * Lqv[i, j] - Lvv[i, j] + dt * Fv[i, j]
            pq = half * Lqq[i, j] + Lqv[j, i]
            pv = half * Lqv[i, j] + Lvv[i, j]
            Gq0[i, j] = 0.5 * gq - gv * inv_dt
            Gq1[i, j] = 0.5 * gq + gv * inv_dt
            Pq0[i, j] = 0.5 * pq - pv * inv_dt
            Pq1[i, j] = 0.5 * pq + pv * inv_dt
    return Gq0, Gq1, Pq0, Pq1, dt * Fu


@njit(cache=True, nogil=True)
def _constraint_rows(model, data, q, order, lam, h, H1, H2, H2lam, H3lam):
    """Holonomic constraints at ``q`` (positions and joint screws are all they need); nothing
    to do, not even the kinematics, without constraints. See :func:`holonomic` for which of
    ``H2`` (per row), ``H2lam``, ``H3lam`` (contracted with ``lam``) are filled."""
    if model.hc_kind.shape[0] == 0:
        return
    forward_kinematics(model, q, np.zeros(q.shape[0]), data)
    holonomic(model, data, q, order, lam, q, h, H1, H2, H2lam, H3lam, np.empty((0, q.shape[0])))


# ------------------------------------------------------------------------------ one step
@njit(cache=True, nogil=True)
def del_step(model, data, der, dt, dyn, kin, q0, p0, u_force, rho1, tol, max_iter,
             q1, p1, lam, Dh1, status, info):
    """Solve the DEL equations for ``q1`` (all variables), ``p1`` (dynamic) and ``lam``;
    ``Dh1`` (nh, n) receives ``Dh(q1)`` at the returned ``q1`` (for :func:`del_linearize`).

    Newton's method in its chord form: the Jacobian (the Hessian of L and its LU) is computed
    at the first iterate and kept while the residual falls at least fourfold per iteration;
    otherwise it is recomputed at the current iterate (a plain Newton step). Each chord step
    needs only L's gradient, O(n), and no factorization.
    Converged when every momentum row is below ``tol`` relative to the largest term of the
    equation and every constraint row below ``tol`` absolutely.
    ``status``: OK, NEWTON_FAILED or SINGULAR_JACOBIAN (``status[1]`` = row);
    ``info``: [final (scaled) residual, iterations].
    """
    n, nd, nk, nc = model.nq, dyn.shape[0], kin.shape[0], model.hc_kind.shape[0]
    m = model.nu
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    e3, e2 = np.empty((0, 0, 0)), np.empty((0, 0))
    h0, Dh0 = np.empty(nc), np.zeros((nc, n))
    _constraint_rows(model, data, q0, 1, lam, h0, Dh0, e3, e2, e3)
    # initial guess: q1_dyn = q0 + dt M^-1 (p0 - M_dk v_kin) at q0 (M = L_vv from composites)
    q1[:] = q0
    for j in range(nk):
        q1[kin[j]] = rho1[j]
    forward_kinematics(model, q0, np.zeros(n), data)
    composites(model, data)
    M = np.empty((n, n))
    mass_matrix(model, data, M)
    Mdd = np.empty((nd, nd))
    rhs = np.empty((nd, 1))
    for a in range(nd):
        rhs[a, 0] = p0[a]
        for j in range(nk):
            rhs[a, 0] -= M[dyn[a], kin[j]] * (rho1[j] - q0[kin[j]]) / dt
        for b in range(nd):
            Mdd[a, b] = M[dyn[a], dyn[b]]
    LU0 = np.empty((nd, nd))
    piv0 = np.empty(nd, np.int64)
    if lu_checked(Mdd, LU0, piv0) < 0:
        lu_solve(LU0, piv0, rhs)
        for a in range(nd):
            q1[dyn[a]] = q0[dyn[a]] + dt * rhs[a, 0]
    lam[:] = 0.0
    ny = nd + nc
    R = np.empty((ny, 1))
    Ry = np.zeros((ny, ny))
    LU = np.empty((ny, ny))
    piv = np.empty(ny, np.int64)
    h1 = np.empty(nc)
    it = 0
    fresh = True            # evaluate the Jacobian at this iterate
    last_res = np.inf
    while True:
        _midpoint(model, data, der, dt, q0, q1, u_force, 2 if fresh else 1, F, Fq, Fv, Fu, e3, e3)
        Lq, Lv = der.Lq, der.Lv
        for a in range(nd):
            i = dyn[a]
            s = p0[a] + 0.5 * dt * Lq[i] - Lv[i] + dt * F[i]
            for r in range(nc):
                s -= Dh0[r, i] * lam[r]
            R[a, 0] = s
            p1[a] = 0.5 * dt * Lq[i] + Lv[i]
        if nc > 0:
            _constraint_rows(model, data, q1, 1, lam, h1, Dh1, e3, e2, e3)
            for r in range(nc):
                R[nd + r, 0] = h1[r]
        # momentum rows relative to the size of their terms (round-off grows with them),
        # constraint rows absolute (metres squared or metres)
        scale = 1.0
        for a in range(nd):
            i = dyn[a]
            scale = max(scale, abs(p0[a]), abs(Lv[i]), abs(0.5 * dt * Lq[i]), abs(dt * F[i]))
        res = 0.0
        for a in range(nd):
            res = max(res, abs(R[a, 0]) / scale)
        for r in range(nc):
            res = max(res, abs(R[nd + r, 0]))
        info[0], info[1] = res, it
        if res <= tol:
            status[0], status[1] = OK, -1
            return
        if it >= max_iter or not np.isfinite(res):
            status[0], status[1] = NEWTON_FAILED, -1
            return
        if not fresh and not res <= 0.25 * last_res:
            fresh = True    # the chord stalls: a Newton step from here (same iterate)
            continue
        if fresh:
            Gq1 = _slot_jacobians(der, dt, Fq, Fv, Fu)[1]
            for a in range(nd):
                for b in range(nd):
                    Ry[a, b] = Gq1[dyn[a], dyn[b]]
                for r in range(nc):
                    Ry[a, nd + r] = -Dh0[r, dyn[a]]
            for r in range(nc):
                for b in range(nd):
                    Ry[nd + r, b] = Dh1[r, dyn[b]]
                for s in range(nc):
                    Ry[nd + r, nd + s] = 0.0
            bad = lu_checked(Ry, LU, piv)
            if bad >= 0:
                status[0], status[1] = SINGULAR_JACOBIAN, bad
                return
        lu_solve(LU, piv, R)
        for a in range(nd):
            q1[dyn[a]] -= R[a, 0]
        for r in range(nc):
            lam[r] -= R[nd + r, 0]
        it += 1
        last_res = res
        fresh = False


# ------------------------------------------------------------------------------ linearization
@njit(cache=True, nogil=True)
def _packed_offsets(nw):
    """Row offsets of a symmetric nw x nw matrix stored as its upper triangle row by row (row
    s holds (s, s..nw-1), nw (nw + 1) / 2 numbers in all): entry (s, t) = (t, s) with s <= t
    is at ``off[s] + t``."""
    off = np.empty(nw, np.int64)
    for s in range(nw):
        off[s] = s * nw - (s * (s - 1)) // 2 - s
    return off


@njit(cache=True, nogil=True)
def _slot_order(n, dyn, kin):
    """Index of each slot variable ``w = (q0, q1)`` in the order of the pair tensors,
    ``w' = [q0, q1_kin, q1_dyn]``: the variables that ``J = dw/dz`` selects (q0 and the
    kinematic part of q1, the ``ns = n + nk`` "selected" ones) come first, the dense q1_dyn
    last. In the packed storage (:func:`_packed_offsets`) the blocks of the contraction are
    then contiguous runs: row s < ns holds its selected part ``(s, s..ns-1)`` followed by its
    q1_dyn part ``(s, ns..2n-1)``; rows from n on hold the q1-q1 block (the only block of the
    constraint rows), rows from ns on the q1_dyn-q1_dyn block."""
    pos = np.empty(2 * n, np.int64)
    for j in range(n):
        pos[j] = j
    for j in range(kin.shape[0]):
        pos[n + kin[j]] = n + j
    for a in range(dyn.shape[0]):
        pos[n + dyn[a]] = n + kin.shape[0] + a
    return pos


@njit(cache=True, nogil=True, inline="always")
def _pair_index(off, a, b):
    """Packed position of the pair (a, b) of reordered slot variables (either order)."""
    return off[a] + b if a <= b else off[b] + a


@njit(cache=True, nogil=True, inline="always")
def _unpack_block(T, off, s0, out):
    """``out`` (m x m) = the symmetric diagonal block of the packed ``T`` (see
    :func:`_packed_offsets`) on rows and columns ``s0 .. s0 + m - 1``."""
    m, flat = out.shape[0], out.ravel()
    for a in range(m):  # upper triangle: the start of each packed row, then its mirror
        copy_run(flat, a * m + a, T, off[s0 + a] + s0 + a, m - a)
    for a in range(m):
        for b in range(a):
            out[a, b] = out[b, a]


@njit(cache=True, nogil=True)
def _pair_tensors(der, dt, dyn, Fqq, H3lam, off, pos, TG, TP):
    """Second derivatives of G = D1 L_d + F_d^- and P = D2 L_d (dynamic rows) in the slot
    variables w = (q0, q1): ``TG[a, p] = d2 G_dyn[a] / dw_s dw_t`` at the packed position
    ``p`` of (``pos[s]``, ``pos[t]``) (see :func:`_slot_order`), likewise TP, each a
    symmetric 2n x 2n matrix.

    In the midpoint variables xi = (qm, v) (blocks qq, qv, vv; T_vq = T_qv^T) they are
    G: dt/2 Lqqq_i - Lqqv_.i + dt Fqq_i,  dt/2 Lqqv_i.. - Lqvv_.i.,  dt/2 Lqvv_i..  (P: + for -,
    no force); with dqm/dq0 = dqm/dq1 = 1/2, dv/dq0 = -1/dt, dv/dq1 = 1/dt the slot blocks are
    T_00 = Tqq/4 - (Tqv + Tvq)/(2dt) + Tvv/dt^2, T_01 = Tqq/4 + (Tqv - Tvq)/(2dt) - Tvv/dt^2,
    T_11 = Tqq/4 + (Tqv + Tvq)/(2dt) + Tvv/dt^2. ``- lam . D3h(q0)`` enters G's q0 block.
    """
    n = der.Lqqq.shape[0]
    Lqqq, Lqqv, Lqvv = der.Lqqq, der.Lqqv, der.Lqvv
    constrained, forced = H3lam.shape[0] > 0, Fqq.shape[0] > 0    # (else they are empty)
    half, c1, c2 = 0.5 * dt, 0.5 / dt, 1.0 / (dt * dt)
    for a in range(dyn.shape[0]):
        i = dyn[a]
        G, P = TG[a], TP[a]
        for j in range(n):
            pj = pos[n + j]
            for k in range(j, n):
                lqq = half * Lqqq[i, j, k]
                lvv = half * Lqvv[i, j, k] * c2
                # qv blocks (j from qm, k from v) and their transposes (k from qm, j from v)
                qv_jk = half * Lqqv[i, j, k]
                qv_kj = half * Lqqv[i, k, j]
                gqv_jk, gqv_kj = (qv_jk - Lqvv[j, i, k]) * c1, (qv_kj - Lqvv[k, i, j]) * c1
                pqv_jk, pqv_kj = (qv_jk + Lqvv[j, i, k]) * c1, (qv_kj + Lqvv[k, i, j]) * c1
                gqq = 0.25 * (lqq - Lqqv[j, k, i] + (dt * Fqq[i, j, k] if forced else 0.0))
                pqq = 0.25 * (lqq + Lqqv[j, k, i])
                # blocks 00, 11, 01 (j in q0, k in q1) and 10 (j in q1, k in q0); q0 comes
                # first in w', so only the 11 pair needs ordering (unsigned positions: see
                # core.linalg.add_run)
                pk = pos[n + k]
                s00, s11 = np.uint64(off[j] + k), np.uint64(_pair_index(off, pj, pk))
                s01, s10 = np.uint64(off[j] + pk), np.uint64(off[k] + pj)
                G[s00] = gqq - gqv_jk - gqv_kj + lvv - (H3lam[i, j, k] if constrained else 0.0)
                G[s11] = gqq + gqv_jk + gqv_kj + lvv
                G[s01] = gqq + gqv_jk - gqv_kj - lvv
                G[s10] = gqq + gqv_kj - gqv_jk - lvv
                P[s00] = pqq - pqv_jk - pqv_kj + lvv
                P[s11] = pqq + pqv_jk + pqv_kj + lvv
                P[s01] = pqq + pqv_jk - pqv_kj - lvv
                P[s10] = pqq + pqv_kj - pqv_jk - lvv


@njit(cache=True, nogil=True)
def second_order_scratch(n, nd, nc):
    """Length of the work space of the second-order linearization: the packed symmetric
    (2n)^2 pair tensors of the nd G rows, of P's nd rows and of the 2 nd output rows, and the
    q1-q1 blocks (n (n + 1) / 2 numbers) of the nc constraint rows."""
    return 4 * nd * n * (2 * n + 1) + nc * ((n * (n + 1)) // 2)


@njit(cache=True, nogil=True)
def _second_order(der, dt, dyn, kin, Fqq, Fqu, Gu, H3lam, D2h0, D2h1, Ry_inv, Rzq, Pq1d, Q1, Lam,
                  H, scratch):
    """Second derivatives of ``x_k+1`` (see the module docstring); H's kinematic rows are 0.

    The unknowns y = (q1_dyn, lam) solve R(y, z) = 0, R = [G + p0 - Dh(q0)^T lam; h(q1)]; so
    ``q1_dyn,zz = N RHS`` with ``N = -(R_y^-1)[:nd]`` and ``RHS_b = R_b,ww(J, J)`` + cross terms,
    ``J = d(q0, q1)/dz``; and ``p1_zz = P_ww(J, J) + Pq1 q1_dyn,zz``. Every output row is thus
    a combination of the pair tensors (packed symmetric, in the slot order of
    :func:`_slot_order`), formed first in the small (2n)^2 space (one product; the constraint
    rows only have a q1-q1 block) and contracted once. J's rows for q0 and the kinematic part
    of q1 select a column of z; only its nd rows for q1_dyn are dense, joined by the nc rows
    of dlam/dz for the multipliers' q0-lam cross term (together ``Y``), so per output row the
    work is two products with Y (:func:`_contract`; without constraints and kinematic variables
    :func:`_contract_plain`, using ``Rzq``, the G_q0 block of R's first-order derivative).
    The contraction works in z' = [q0, rho1, p0, u] (the selected columns first; v_k, on
    which nothing depends, left out), and :func:`_expand` writes z' into z's order. Inputs
    that act as ``p0 + dt Fu u`` with constant ``Fu`` are left out of z' too and copied from
    the p0 rows and columns afterwards.
    The pair tensors live in ``scratch`` (see :func:`second_order_scratch`; reallocated if too
    small): allocating megabytes per call made glibc return them to the OS and fault them
    back in, which cost as much as the arithmetic.
    """
    n, nd, nk, nc = Q1.shape[0], dyn.shape[0], kin.shape[0], Lam.shape[0]
    nz, m = Q1.shape[1], Fqu.shape[2]
    ny = nd + nc
    nw = 2 * n
    cp, cu = n, n + nd + nk          # columns of z where p0 and u start
    cr = cu + m                      # and rho1
    if nd == 0:  # everything prescribed: x_k+1 is linear in z
        H[:, :, :] = 0.0
        return
    # combination weights: rows 0..nd-1 give q1_dyn, rows nd..2nd-1 give p1
    Nc = np.empty((2 * nd, ny))
    Nc[:nd] = -Ry_inv[:nd]
    Nc[nd:] = Pq1d @ np.ascontiguousarray(Nc[:nd])
    # pair tensors of every residual row: G rows, then constraint rows (h(q1): their q1-q1
    # block only, the packed storage's tail from row n on)
    # (symmetric: stored packed, which halves the memory traffic of the combination product)
    size = n * (nw + 1)
    tail0 = n * nw - (n * (n - 1)) // 2       # = off[n] + n
    ntail = size - tail0
    if scratch.shape[0] < second_order_scratch(n, nd, nc):
        scratch = np.empty(second_order_scratch(n, nd, nc))
    Tin = scratch[:nd * size].reshape(nd, size)
    TP = scratch[nd * size:2 * nd * size].reshape(nd, size)
    Tout = scratch[2 * nd * size:4 * nd * size].reshape(2 * nd, size)
    Tc = scratch[4 * nd * size:4 * nd * size + nc * ntail].reshape(nc, ntail)
    off = _packed_offsets(nw)
    pos = _slot_order(n, dyn, kin)
    _pair_tensors(der, dt, dyn, Fqq, H3lam, off, pos, Tin, TP)
    for r in range(nc):
        for j in range(n):
            for k in range(j, n):
                Tc[r, _pair_index(off, pos[n + j], pos[n + k]) - tail0] = D2h1[r, j, k]
    # the G rows' weights and the constraint rows' (theirs on the tail only)
    Ncg = np.ascontiguousarray(Nc[:, :nd])
    np.dot(Ncg, Tin, Tout)
    if nc > 0:
        tail = np.ascontiguousarray(Nc[:, nd:]) @ Tc
        for o in range(2 * nd):
            add_run(Tout[o], tail0, tail[o], 0, ntail, 1.0)
    Tout[nd:] += TP
    # cross terms of the G rows, combined the same way: forcing dt Fqu(dqm/dz, du/dz) and the
    # multipliers' -(D2h_r(q0) dq0/dz) x dlam_r/dz (both symmetrized)
    force_cross = m > 0 and np.any(Fqu != 0.0)
    # Without a forcing cross term the inputs enter the residual only as p0 + Gu u (Gu = dt Fu
    # constant here: torques on variables), so H's u columns are combinations of its p0
    # columns; when each input drives at most one dynamic variable they are scaled copies. The
    # contraction then runs without the u columns (for a chain with a torque on every joint a
    # third fewer columns) and the u rows and columns are copied in afterwards.
    u_src, u_gain = np.full(m, -1, np.int64), np.zeros(m)
    reduce_u = m > 0 and not force_cross
    for r in range(m):
        for a in range(nd):
            g = Gu[dyn[a], r]
            if g != 0.0:
                if u_src[r] >= 0:
                    reduce_u = False
                u_src[r], u_gain[r] = a, g
    mr = 0 if reduce_u else m            # u columns kept in z'
    ns = n + nk                          # selected columns of z' (q0, rho1)
    nzr = ns + nd + mr
    # z' -> z: segments (start in z', start in z, length)
    seg = np.array([[0, 0, n], [n, cr, nk], [ns, cp, nd], [ns + nd, cu, mr]])
    # forcing: C[o, r] = (sum_a Nc[o, a] dt Fqu[dyn a, :, r]) . dqm/dz (Fu depends on q only
    # through inputs at frames)
    C = np.empty((2 * nd, m, nz))
    if force_cross:
        Xq = 0.5 * Q1  # dqm/dz = (dq0/dz + Q1)/2, dq0/dz selects the q0 columns
        for i in range(n):
            Xq[i, i] += 0.5
        Fd = np.empty((nd, m * n))
        for a in range(nd):
            Fd[a] = dt * np.ascontiguousarray(Fqu[dyn[a]].T).ravel()
        C = ((Ncg @ Fd).reshape(2 * nd * m, n) @ Xq).reshape(2 * nd, m, nz)
    # multipliers: E[o, j, r] = sum_a Nc[o, a] D2h_r(q0)[dyn a, j]
    E = np.empty((2 * nd, n, nc))
    if nc > 0:
        Ed = np.empty((nd, n * nc))
        for a in range(nd):
            for j in range(n):
                for r in range(nc):
                    Ed[a, j * nc + r] = D2h0[r, dyn[a], j]
        E = (Ncg @ Ed).reshape(2 * nd, n, nc)
    # the dense rows of J in z': [q1_dyn; lam] (the multipliers' cross term is a q0-lam block
    # of T, so their rows Lam join)
    nl = nd + nc
    Y = np.empty((nl, nzr))
    for g in range(4):
        for c in range(seg[g, 2]):
            cy, cz = seg[g, 0] + c, seg[g, 1] + c
            for a in range(nd):
                Y[a, cy] = Q1[dyn[a], cz]
            for r in range(nc):
                Y[nd + r, cy] = Lam[r, cz]
    YT = np.ascontiguousarray(Y.T)
    Yh = 0.5 * Y[:nd]
    TLL, K = np.empty((nd, nd)), np.zeros((nl, nzr))
    # no constraints, no kinematic variables, no inputs left in z': z' = [q0, p0] and
    # dq1/dz' = Yp [G, I] (Yp = -M^-1, G = dG/dq0), which _contract_plain exploits
    plain = nc == 0 and nk == 0 and nzr == n + nd
    direct = plain and nzr == nz         # z' = z: the products write H's rows themselves
    O = np.empty((0, 0)) if direct else np.empty((nzr, nzr))
    if plain:
        Yp, G = np.ascontiguousarray(Y[:, n:]), Rzq
        YpT = np.ascontiguousarray(Yp.T)
        plain_work = np.empty((6, n, n))
    for j in range(nk):  # q1_kin = rho1 and v1 are linear in z
        H[kin[j]] = 0.0
        H[n + nd + j] = 0.0
    for o in range(2 * nd):
        out = H[dyn[o]] if o < nd else H[n + o - nd]
        T = Tout[o]
        if plain:  # (no u columns in z', so no forcing cross term either)
            _contract_plain(T, off, n, Yp, G, YpT, plain_work, out if direct else O)
        else:
            _contract(T, off, ns, E[o], Yh, YT, TLL, K, O)
        if not direct:
            _expand(O, not plain, seg, cp, cu, reduce_u, u_src, u_gain, out)
        if force_cross:
            for c in range(nz):
                for r in range(m):
                    out[c, cu + r] += C[o, r, c]
            for r in range(m):
                out[cu + r] += C[o, r]


@njit(cache=True, nogil=True)
def _contract(T, off, ns, E, Yh, YT, TLL, K, O):
    """``O`` with ``O + O^T = J^T T J`` (``T`` packed in the order of :func:`_slot_order`) for
    J = [[I, 0], Y] in z' (its first ``ns`` columns selected by the q0 and q1_kin rows),
    ``Y`` the dense rows of L = (q1_dyn, lam) (``Yh`` = Y's q1_dyn rows / 2, ``YT`` = Y^T),
    ``T`` having the multipliers' cross term ``-E`` as its q0-lam block (``E`` n x nc).
    J^T T J = Y^T T_LL Y + Y^T T_LS Sel + Sel^T T_SL Y + Sel^T T_SS Sel; the middle two are
    each other's transpose, so with K = T_LL Y / 2 + T_LS Sel it is Y^T K + (Y^T K)^T +
    Sel^T T_SS Sel: one product for both cross terms (and T_SS's upper triangle, half its
    diagonal, added to O; :func:`_expand` adds the transpose). T_LL = [[T_DD, 0], [0, 0]],
    T_LS = [T_DS; -E^T] (q0 columns). ``K``'s lam rows must be zero outside the q0 columns
    (they are never written there)."""
    nd, nc, n = Yh.shape[0], E.shape[1], E.shape[0]
    _unpack_block(T, off, ns, TLL)          # T_DD: rows ns.. of the packed storage
    np.dot(TLL, Yh, K[:nd])
    for s in range(ns):  # T_SD: the end of row s
        rs = off[s] + ns
        for b in range(nd):
            K[b, s] += T[rs + b]
    for r in range(nc):
        for j in range(n):
            K[nd + r, j] = -E[j, r]
    np.dot(YT, K, O)
    nzr, flat = O.shape[0], O.ravel()
    for s in range(ns):  # T_SS: the start of row s (upper triangle, as O + O^T will add)
        rs = off[s]
        O[s, s] += 0.5 * T[rs + s]
        add_run(flat, s * nzr + s + 1, T, rs + s + 1, ns - s - 1, 1.0)


@njit(cache=True, nogil=True)
def _contract_plain(T, off, n, Yp, G, YpT, work, O):
    """``O = J^T T J`` (``T`` packed, see :func:`_packed_offsets`) for ``J = dw/dz'`` with
    ``z' = [q0, p0]`` and ``q1 = q1(q0, p0)``: ``J = [[I, 0], [Yp G, Yp]] = D E`` with
    ``D = diag(I, Yp)``, ``E = [[I, 0], [G, I]]``. With ``X01 = T01 Yp``, ``X11 = Yp^T T11 Yp``,
    ``R = X11 G`` and ``V = X01 + R^T / 2`` the blocks are (q0, q0)
    ``T00 + X01 G + G^T X01^T + G^T X11 G = T00 + V G + (V G)^T``, (q0, p0) ``X01 + R^T`` and
    (p0, p0) ``X11``: five n x n x n products instead of the general path's eight, in four
    BLAS calls (``work`` (6, n, n) holds T01 and T11 adjacent: one call for both times Yp)."""
    w2, flat = work.reshape(6 * n, n), work.ravel()
    for j in range(n):  # T01 row j
        copy_run(flat, j * n, T, off[j] + n, n)
    _unpack_block(T, off, n, work[1])
    np.dot(w2[:2 * n], Yp, w2[2 * n:4 * n])      # work[2] = X01, work[3] = T11 Yp
    X11, X01, R, V, VG = work[1], work[2], work[4], work[5], work[3]
    np.dot(YpT, work[3], X11)                     # (T11 is spent)
    np.dot(X11, G, R)
    for j in range(n):
        for k in range(n):
            V[j, k] = X01[j, k] + 0.5 * R[k, j]
    np.dot(V, G, VG)                              # (T11 Yp is spent)
    for j in range(n):
        row, prow = O[j], O[n + j]
        copy_run(row, j, T, off[j] + j, n - j)    # T00's upper triangle, then its lower
        for k in range(j):
            row[k] = T[np.uint64(off[k] + j)]
        for k in range(n):
            row[k] += VG[j, k] + VG[k, j]
            row[n + k] = X01[j, k] + R[k, j]
            prow[k] = X01[k, j] + R[j, k]
            prow[n + k] = X11[j, k]


@njit(cache=True, nogil=True)
def _expand(O, symmetrize, seg, cp, cu, reduce_u, u_src, u_gain, out):
    """``out`` (z x z) from ``O`` (z' x z'), or from ``O + O^T`` with ``symmetrize``. z' goes
    to z in the segments ``seg`` (rows: start in z', start in z, length; q0, rho1, p0, u);
    z's v_k rows and columns [cp + nd, cu) are zero and, with ``reduce_u``, input r acts as
    ``u_gain[r]`` times the momentum of dynamic variable ``u_src[r]`` (column
    ``cp + u_src[r]``; -1: no effect). Rows are addressed in the flat arrays (a row view
    per row cost more than the copy)."""
    m, nzr, nz = u_src.shape[0], O.shape[0], out.shape[1]
    flat, dst = O.ravel(), out.ravel()
    v0 = cp + seg[2, 2]
    for g in range(seg.shape[0]):
        for c in range(seg[g, 2]):
            cs, row = seg[g, 0] + c, (seg[g, 1] + c) * nz
            for h in range(seg.shape[0]):
                if symmetrize:
                    symmetric_run(dst, row + seg[h, 1], flat, nzr, cs, seg[h, 0], seg[h, 2])
                else:
                    copy_run(dst, row + seg[h, 1], flat, cs * nzr + seg[h, 0], seg[h, 2])
            for d in range(v0, cu):
                dst[row + d] = 0.0
            if reduce_u:
                for r in range(m):
                    u = u_gain[r] * dst[row + cp + u_src[r]] if u_src[r] >= 0 else 0.0
                    dst[row + cu + r] = u
    for d in range(v0, cu):
        out[d, :] = 0.0
    if reduce_u:
        for r in range(m):
            u_row = out[cu + r]
            if u_src[r] >= 0:
                gain, src = u_gain[r], out[cp + u_src[r]]
                for d in range(nz):
                    u_row[d] = gain * src[d]
            else:
                u_row[:] = 0.0


@njit(cache=True, nogil=True)
def del_linearize(model, data, der, dt, dyn, kin, q0, p0, u_force, rho1, q1, lam, Dh1_solved,
                  second, cond_limit, A, B, H, status, conds, scratch):
    """Exact derivatives of ``x_k+1 = f(x_k, u_k)`` at a solved step (``q1``, ``lam`` and, if
    at hand, ``Dh1_solved = Dh(q1)`` from :func:`del_step`; pass an empty (0, n) array to have
    it evaluated here). Fills ``A``, ``B`` and, with ``second``, ``H`` (see module docstring);
    ``scratch`` is work space for the second order (:func:`second_order_scratch`).
    ``status``: OK, SINGULAR_M or SINGULAR_CONSTRAINT; ``conds`` = the two condition numbers."""
    n, nd, nk, nc, m = model.nq, dyn.shape[0], kin.shape[0], model.hc_kind.shape[0], model.nu
    nx = n + nd + nk
    nz = nx + m + nk
    # columns of z: q0 [0, n), p0 [n, n+nd), v0 [.., nx), u [nx, nx+m), rho1 [nx+m, nz)
    cp, cu, cr = n, nx, nx + m
    order = 3 if second else 2
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    n3 = n if second else 0
    nf = n3 if has_wrench_inputs(model) else 0      # (else Fqq and Fqu are zero: left empty)
    Fqq, Fqu = np.empty((nf, nf, nf)), np.empty((nf, nf, m if second else 0))
    # (holonomic() zeroes what it fills.) The first order needs lam . D2h(q_k) only; the
    # second also D2h(q_k) per row, D2h(q_k+1) and lam . D3h(q_k)
    nc2, nc3 = (nc if second else 0), (nc if second and nc > 0 else 0)
    h0, Dh0, D2h0 = np.empty(nc), np.empty((nc, n)), np.empty((nc2, n, n))
    lamD2h0 = np.zeros((n, n))
    H3lam = np.empty((n3, n3, n3) if nc3 > 0 else (0, 0, 0))
    _constraint_rows(model, data, q0, 3 if second else 2, lam, h0, Dh0, D2h0, lamD2h0, H3lam)
    D2h1 = np.empty((nc2, n3, n3))
    if second or Dh1_solved.shape[0] != nc:   # (the second order needs D2h(q_k+1) as well)
        Dh1 = np.empty((nc, n))
        _constraint_rows(model, data, q1, 2 if second else 1, lam, np.empty(nc), Dh1, D2h1,
                         np.empty((0, 0)), np.empty((0, 0, 0)))
    else:
        Dh1 = Dh1_solved
    _midpoint(model, data, der, dt, q0, q1, u_force, order, F, Fq, Fv, Fu, Fqq, Fqu)
    Gq0, Gq1, Pq0, Pq1, Gu = _slot_jacobians(der, dt, Fq, Fv, Fu)
    # Q1 = dq1/dz: kinematic rows select rho1 (dynamic rows: Y below); dq0/dz = [I 0] is used
    # as a selection throughout
    Q1 = np.zeros((n, nz))
    for j in range(nk):
        Q1[kin[j], cr + j] = 1.0
    # R_y and R_z (first order); unknowns y = (q1_dyn, lam). R_z in parts: its q0 columns
    # Rzq, its u and rho1 columns Rzu; its p0 columns are the identity on the dynamic rows and
    # its v_k columns zero (nothing depends on v_k)
    ny = nd + nc
    Ry = np.zeros((ny, ny))
    Rzq = np.empty((ny, n))
    Rzu = np.zeros((ny, m + nk))
    for a in range(nd):
        i = dyn[a]
        for b in range(nd):
            Ry[a, b] = Gq1[i, dyn[b]]
        for r in range(nc):
            Ry[a, nd + r] = -Dh0[r, i]
        for j in range(n):
            Rzq[a, j] = Gq0[i, j] - lamD2h0[i, j]
        for r in range(m):
            Rzu[a, r] = Gu[i, r]
        for j in range(nk):
            Rzu[a, m + j] = Gq1[i, kin[j]]
    for r in range(nc):
        for b in range(nd):
            Ry[nd + r, b] = Dh1[r, dyn[b]]
        Rzq[nd + r] = 0.0
        for j in range(nk):
            Rzu[nd + r, m + j] = Dh1[r, kin[j]]
    # Sec. VII checks: M_k+1 and Dh(q_k+1) M_k+1^-1 Dh(q_k)^T (one LU of M_k+1 gives its
    # condition number and its inverse, from which the Schur complement and R_y^-1 follow)
    Mk = Ry[:nd, :nd].copy()
    LUm = np.empty((nd, nd))
    pivm = np.empty(nd, np.int64)
    Minv = np.empty((nd, nd))
    if nd > 0 and lu_checked(Mk, LUm, pivm) >= 0:
        conds[0] = np.inf
    else:
        conds[0] = condition_from_lu(Mk, LUm, pivm, Minv) if nd > 0 else 1.0
    if not conds[0] < cond_limit:
        status[0], status[1] = SINGULAR_M, -1
        return
    if nc > 0:
        # R_y^-1 by blocks from M^-1 and the Schur complement S = Dh(q1) M^-1 Dh(q0)^T (its
        # condition is the Sec. VII-B check): with B = M^-1 Dh(q0)^T and C = S^-1 Dh(q1) M^-1,
        # R_y^-1 = [[M^-1 - B C, B S^-1], [-C, S^-1]] (dynamic columns throughout; nc rows
        # or columns each, so the products are loops)
        D0t, D1 = Ry[:nd, nd:], Ry[nd:, :nd]         # -Dh(q0)^T and Dh(q1)
        Bm = np.zeros((nd, nc))
        add_product(Minv, D0t, Bm, -1.0)
        S = np.zeros((nc, nc))
        add_product(D1, Bm, S, 1.0)
        LUs = np.empty((nc, nc))
        pivs = np.empty(nc, np.int64)
        Sinv = np.empty((nc, nc))
        if lu_checked(S, LUs, pivs) >= 0:
            conds[1] = np.inf
        else:
            conds[1] = condition_from_lu(S, LUs, pivs, Sinv)
        if not conds[1] < cond_limit:
            status[0], status[1] = SINGULAR_CONSTRAINT, -1
            return
        D1Minv = np.zeros((nc, nd))
        add_product(D1, Minv, D1Minv, 1.0)
        Ry_inv = np.zeros((ny, ny))
        add_product(Sinv, D1Minv, Ry_inv[nd:, :nd], -1.0)          # -C
        Ry_inv[:nd, :nd] = Minv
        add_product(Bm, Ry_inv[nd:, :nd], Ry_inv[:nd, :nd], 1.0)   # M^-1 - B C
        add_product(Bm, Sinv, Ry_inv[:nd, nd:], 1.0)
        Ry_inv[nd:, nd:] = Sinv
    else:
        Ry_inv = Minv
    # dy/dz = -R_y^-1 R_z: a BLAS product for the q0 columns and one for the inputs' (the
    # inverse is at hand: condition numbers); the p0 columns are -R_y^-1's dynamic columns
    Y = np.zeros((ny, nz))
    if ny > 0:
        Yq = Ry_inv @ Rzq
        Yu = Ry_inv @ Rzu if m + nk > 0 else np.zeros((ny, 0))
        for a in range(ny):
            for j in range(n):
                Y[a, j] = -Yq[a, j]
            for b in range(nd):
                Y[a, cp + b] = -Ry_inv[a, b]
            for j in range(m + nk):
                Y[a, cu + j] = -Yu[a, j]
    for a in range(nd):
        Q1[dyn[a]] = Y[a]
    Lam = Y[nd:]
    # first-order outputs: p_k+1 = P(q0, q1) on the dynamic rows, P1 = Pq1 Q1 + Pq0 Q0 with
    # Q1's dynamic rows Y, its kinematic rows selecting rho1 and Q0 = [I 0]
    Pq1d = np.empty((nd, nd))
    for a in range(nd):
        for b in range(nd):
            Pq1d[a, b] = Pq1[dyn[a], dyn[b]]
    P1 = Pq1d @ np.ascontiguousarray(Y[:nd]) if nd > 0 else np.zeros((0, nz))
    for a in range(nd):
        for j in range(n):
            P1[a, j] += Pq0[dyn[a], j]
        for j in range(nk):
            P1[a, cr + j] += Pq1[dyn[a], kin[j]]
    A[:, :] = 0.0
    B[:, :] = 0.0
    for i in range(n):
        A[i] = Q1[i, :nx]
        B[i] = Q1[i, nx:]
    for a in range(nd):
        A[n + a] = P1[a, :nx]
        B[n + a] = P1[a, nx:]
    for j in range(nk):  # v1 = (rho1 - q0_kin)/dt
        A[n + nd + j, kin[j]] = -1.0 / dt
        B[n + nd + j, m + j] = 1.0 / dt
    status[0], status[1] = OK, -1
    if not second:
        return
    _second_order(der, dt, dyn, kin, Fqq, Fqu, Gu, H3lam, D2h0, D2h1, Ry_inv, Rzq, Pq1d, Q1, Lam,
                  H, scratch)


@njit(cache=True, nogil=True)
def simulate_kernel(model, data, der, dt, dyn, kin, q0, p0, u_force, rho, tol, max_iter,
                    Q, P, LAM, status, info):
    """Steps k = 0..N-1 from (q0, p0); stops at the first failure (status[2] = step)."""
    N = u_force.shape[0]
    Q[0] = q0
    P[0] = p0
    Dh1 = np.empty((model.hc_kind.shape[0], q0.shape[0]))
    for k in range(N):
        del_step(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k], tol, max_iter,
                 Q[k + 1], P[k + 1], LAM[k], Dh1, status, info)
        if status[0] != OK:
            status[2] = k
            return
    status[2] = -1


# ------------------------------------------------------------------------------ Python API
class MidpointVI:
    """Midpoint variational integrator for a :class:`core.System` with time step ``dt``.

    Ordering: ``x = [q (all), p (dynamic variables), v (kinematic variables)]``,
    ``u = [force inputs, next values of the kinematic variables]`` (see module docstring).
    ``step`` raises :class:`IntegratorError` when Newton's method does not converge (with the
    residual and iteration count) and ``linearize`` when ``M_k+1`` or
    ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T`` is singular (condition number above ``condition_limit``).
    """

    def __init__(self, system, dt: float, tolerance: float = 1e-11, max_iterations: int = 50,
                 condition_limit: float = 1e12):
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a positive number, got {dt!r}")
        self.system, self.dt = system, float(dt)
        self.tolerance, self.max_iterations = float(tolerance), int(max_iterations)
        self.condition_limit = float(condition_limit)
        kin_names = set(system.kinematic_names)
        names = system.config_names
        self._last = threading.local()
        self.kinematic_index = np.array([i for i, nm in enumerate(names) if nm in kin_names], np.int64)
        self.dynamic_index = np.array([i for i, nm in enumerate(names) if nm not in kin_names], np.int64)
        # dimensions are fixed with the index arrays (plain attributes: read on every call)
        self._nq, self._nd, self._nk = len(names), len(self.dynamic_index), len(self.kinematic_index)
        self._nu = system.nu + self._nk

    # ---------------------------------------------------------------- dimensions and names
    @property
    def nq(self):
        return self._nq

    @property
    def nd(self):
        return self._nd

    @property
    def nk(self):
        return self._nk

    @property
    def nx(self):
        return self._nq + self._nd + self._nk

    @property
    def nu(self):
        return self._nu

    @property
    def state_names(self):
        return list(self._names()[0])

    @property
    def input_names(self):
        return list(self._names()[1])

    def _names(self):
        """(state names, input names) as tuples, built once per model compilation: the
        vector checks on every call take them, and building 100 strings costs microseconds."""
        model = self.system.model
        cached = self.__dict__.get("_names_cache")
        if cached is None or cached[0] is not model:
            names = self.system.config_names
            state = (names + ["p_" + names[i] for i in self.dynamic_index]
                     + ["v_" + names[i] for i in self.kinematic_index])
            inputs = self.system.input_names + [names[i] + "_next" for i in self.kinematic_index]
            cached = self.__dict__["_names_cache"] = (model, tuple(state), tuple(inputs))
        return cached[1], cached[2]

    # ---------------------------------------------------------------- conversions
    # (called on every step and linearization: the names for the error message are only
    # looked up when the check fails)
    def split_state(self, x, finite: bool = True):
        """``(q, p, v)`` views of ``x`` (a ValueError naming a wrong size or, with ``finite``,
        the first non-finite entry)."""
        n, nd = self._nq, self._nd
        if not is_plain_vector(x, n + nd + self._nk, finite):
            x = check_vector("x", x, n + nd + self._nk, self._names()[0], finite)
        return x[:n], x[n:n + nd], x[n + nd:]

    def split_input(self, u, finite: bool = True, copy: bool = True):
        """``(u_force, rho)`` copies of ``u`` (views without ``copy``; errors as
        :meth:`split_state`)."""
        if not is_plain_vector(u, self._nu, finite):
            u = check_vector("u", u, self._nu, self._names()[1], finite)
        m = self._nu - self._nk
        return (u[:m].copy(), u[m:].copy()) if copy else (u[:m], u[m:])

    def state(self, q, p, v=None):
        """Pack ``x = [q, p_dyn, v_kin]``."""
        v = np.zeros(self.nk) if v is None else v
        return np.concatenate([check_vector("q", q, self.nq), check_vector("p", p, self.nd),
                               check_vector("v", v, self.nk)])

    def momentum(self, q, dq):
        """Discrete-state momentum from a continuous state: ``p = dL/d dq`` on dynamic rows."""
        return self.system.momentum(q, dq)[self.dynamic_index]

    def discrete_momentum(self, q_prev, q, u_prev=None):
        """Discrete Legendre transform ``p_k = D2 L_d(q_k-1, q_k)`` (dynamic rows)."""
        from .dynamics import lagrangian_derivatives
        q_prev = check_vector("q_prev", q_prev, self.nq)
        q = check_vector("q", q, self.nq)
        d = lagrangian_derivatives(self.system, 0.5 * (q_prev + q), (q - q_prev) / self.dt, 1)
        return (0.5 * self.dt * d.Lq + d.Lv)[self.dynamic_index]

    # ---------------------------------------------------------------- stepping
    def _solve(self, q, p, u_force, rho, check=None):
        """DEL solve; the last result is remembered per thread, so ``f(x, u)`` followed by
        ``linearize(x, u)`` (the usual pattern along a trajectory) solves once. The arrays
        returned are the cache's own: copy them before handing them out. ``check`` (raising
        for bad input) runs before a solve, not on a hit: the inputs were checked then."""
        key = (q.tobytes(), p.tobytes(), u_force.tobytes(), rho.tobytes())
        cache = self._last.__dict__
        if cache.get("key") == key and cache.get("model") is self.system.model:
            return cache["value"]
        if check is not None:
            check()
        value = self._solve_uncached(q, p, u_force, rho)
        cache.update(key=key, model=self.system.model, value=value)
        return value

    def _solve_uncached(self, q, p, u_force, rho):
        model = self.system.model
        data, der = workspace(self.system)
        n = model.nq
        q1, p1, lam = np.empty(n), np.empty(self.nd), np.zeros(model.nh)
        Dh1 = np.empty((model.nh, n))
        status, info = np.zeros(2, np.int64), np.zeros(2)
        del_step(model, data, der, self.dt, self.dynamic_index, self.kinematic_index, q, p,
                 u_force, rho, self.tolerance, self.max_iterations, q1, p1, lam, Dh1, status, info)
        self._raise(status, info, None)
        # Shared through the cache: callers copy them or only pass them to kernels. (Kept
        # writable: numba types read-only arrays apart and types them slowly, ~9 us a call.)
        # Dh(q_k+1) goes to the linearization, which then need not evaluate it again.
        return q1, p1, lam, Dh1

    def _raise(self, status, info, step):
        code = int(status[0])
        at = f" at step {step}" if step is not None else ""
        if code == NEWTON_FAILED:
            raise IntegratorError(
                f"DEL solve did not converge{at}: residual {info[0]:.3e} after {int(info[1])} "
                f"Newton iterations (tolerance {self.tolerance:.1e}); reduce dt or check the inputs",
                step=step, matrix=None, residual=float(info[0]), iterations=int(info[1]))
        if code == SINGULAR_JACOBIAN:
            raise IntegratorError(
                f"DEL Newton Jacobian is singular{at} (row {int(status[1])}): M_k+1 or the "
                "constraint Jacobian lost rank", step=step, matrix="DEL Jacobian",
                residual=float(info[0]), iterations=int(info[1]))

    def step(self, q, p, u=None, return_multipliers: bool = False):
        """One step: ``(q_k+1, p_k+1)`` (and ``lam_k``) from ``(q_k, p_k)`` and ``u_k``.

        ``p`` holds the dynamic variables' momenta; ``u`` = [force inputs, rho_k+1]."""
        q = check_vector("q", q, self.nq, self.system.config_names)
        p = check_vector("p", p, self.nd)
        u_force, rho = self.split_input(np.zeros(self.nu) if u is None else u)
        q1, p1, lam = (a.copy() for a in self._solve(q, p, u_force, rho)[:3])
        return (q1, p1, lam) if return_multipliers else (q1, p1)

    def f(self, x, u=None):
        """The one-step map in state form, ``x_k+1 = f(x_k, u_k)``."""
        q, p, _ = self.split_state(x)
        u_force, rho = self.split_input(np.zeros(self.nu) if u is None else u)
        q1, p1, _, _ = self._solve(q, p, u_force, rho)
        v1 = (rho - q[self.kinematic_index]) / self.dt
        return np.concatenate([q1, p1, v1])

    def simulate(self, q0, p0, u_sequence):
        """Simulate ``N = len(u_sequence)`` steps; returns ``(Q, P, LAM)`` of shapes (N+1, n),
        (N+1, nd) and (N, nh). Raises :class:`IntegratorError` naming the failing step."""
        model = self.system.model
        U = np.asarray(u_sequence, dtype=float)
        if U.ndim != 2 or U.shape[1] != self.nu:
            raise ValueError(f"u_sequence must have shape (N, {self.nu}), got {U.shape}")
        if not np.all(np.isfinite(U)):
            raise ValueError("u_sequence contains non-finite values")
        q0 = check_vector("q0", q0, self.nq, self.system.config_names)
        p0 = check_vector("p0", p0, self.nd)
        N, m = U.shape[0], self.system.nu
        Q, P, LAM = np.empty((N + 1, self.nq)), np.empty((N + 1, self.nd)), np.zeros((N, model.nh))
        data, der = workspace(self.system)
        status, info = np.zeros(3, np.int64), np.zeros(2)
        simulate_kernel(model, data, der, self.dt, self.dynamic_index, self.kinematic_index, q0, p0,
                        np.ascontiguousarray(U[:, :m]), np.ascontiguousarray(U[:, m:]),
                        self.tolerance, self.max_iterations, Q, P, LAM, status, info)
        if status[0] != OK:
            self._raise(status, info, int(status[2]))
        return Q, P, LAM

    # ---------------------------------------------------------------- linearization
    def _linearize(self, x, u, second):
        u = np.zeros(self.nu) if u is None else u
        # sizes now; finiteness with the solve (a step solved before had its inputs checked)
        # and for v_k, which the solve does not see
        q, p, v = self.split_state(x, finite=False)
        u_force, rho = self.split_input(u, finite=False, copy=False)  # the kernels only read
        check = lambda: (self.split_state(x), self.split_input(u))  # noqa: E731
        if v.shape[0] and not math.isfinite(np.dot(v, v)):   # (an overflow: the full check)
            check()
        q1, _, lam, Dh1 = self._solve(q, p, u_force, rho, check)
        model = self.system.model
        data, der = workspace(self.system, third_order=second)
        A, B = np.empty((self.nx, self.nx)), np.empty((self.nx, self.nu))
        nz = self.nx + self.nu
        H = np.empty((self.nx, nz, nz)) if second else _NO_TENSOR
        status, conds = self._status()
        del_linearize(model, data, der, self.dt, self.dynamic_index, self.kinematic_index, q, p,
                      u_force, rho, q1, lam, Dh1, second, self.condition_limit, A, B, H, status,
                      conds, self._scratch(second))
        self._raise_singular(int(status[0]), conds, None)
        return A, B, H

    def _status(self):
        """Per-thread status and condition-number arrays of the linearization kernel (read
        right after each call)."""
        cache = self._last.__dict__
        pair = cache.get("status")
        if pair is None:
            pair = cache["status"] = (np.zeros(2, np.int64), np.zeros(2))
        return pair

    def _scratch(self, second):
        """Per-thread work space of the second-order linearization (kept: see _second_order)."""
        if not second:
            return _NO_SCRATCH
        cache = self._last.__dict__
        size = second_order_scratch(self.nq, self.nd, self.system.model.nh)
        scratch = cache.get("scratch")
        if scratch is None or scratch.shape[0] != size:
            scratch = cache["scratch"] = np.empty(size)
        return scratch

    def _raise_singular(self, code, conds, step):
        at = f" at step {step}" if step is not None else ""
        if code == SINGULAR_M:
            raise IntegratorError(
                f"M_k+1 = D2 D1 L_d + D2 F_d^- is singular{at} (condition number {conds[0]:.3e} > "
                f"{self.condition_limit:.1e}): singular coordinates or too large a time step "
                "(Sec. VII-A)", step=step, matrix="M_k+1")
        if code == SINGULAR_CONSTRAINT:
            raise IntegratorError(
                f"Dh(q_k+1) M_k+1^-1 Dh(q_k)^T is singular{at} (condition number {conds[1]:.3e} > "
                f"{self.condition_limit:.1e}): the constraint moved too far in one step or is "
                "degenerate (Sec. VII-B)", step=step, matrix="Dh M^-1 Dh^T")

    def linearize(self, x, u=None):
        """Exact first-order linearization ``(A, B)`` of the one-step map at ``(x, u)``."""
        A, B, _ = self._linearize(x, u, False)
        return A, B

    def linearize2(self, x, u=None):
        """``(A, B, H)`` with ``H[i, a, b] = d2 x_k+1,i / dz_a dz_b``, ``z = [x, u]``."""
        return self._linearize(x, u, True)

    def discrete_system(self) -> "VIDiscreteSystem":
        """This integrator in state form, for :func:`core.control.optimize_trajectory` and the
        closed-loop simulators."""
        return VIDiscreteSystem(self)

    def linearize_trajectory(self, X, U, second: bool = False, threads: int | None = None):
        """Linearizations along a trajectory ``X`` (N+1, nx), ``U`` (N, nu) — the steps are
        re-solved from each ``X[k]`` — computed in parallel over k. Returns ``(A, B)`` stacks
        (N, nx, nx), (N, nx, nu), plus ``H`` (N, nx, nz, nz) with ``second``."""
        X = np.asarray(X, dtype=float)
        U = np.asarray(U, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.nx or U.ndim != 2 or U.shape != (X.shape[0] - 1, self.nu):
            raise ValueError(f"X must be (N+1, {self.nx}) and U (N, {self.nu}); got {X.shape}, {U.shape}")
        N, n, nd, m = U.shape[0], self.nq, self.nd, self.system.nu
        model = self.system.model
        Q = np.ascontiguousarray(X[:, :n])
        P = np.ascontiguousarray(X[:, n:n + nd])
        Q1 = np.empty_like(Q)
        LAM, DH1 = np.zeros((N, model.nh)), np.empty((N, model.nh, n))
        for k in range(N):  # next configurations, multipliers, Dh(q_k+1), step by step from X[k]
            Q1[k + 1], _, LAM[k], DH1[k] = self._solve(Q[k], P[k], U[k, :m].copy(),
                                                       U[k, m:].copy())
        Q1[0] = Q[0]
        nz = self.nx + self.nu
        As, Bs = np.empty((N, self.nx, self.nx)), np.empty((N, self.nx, self.nu))
        Hs = np.empty((N, self.nx, nz, nz) if second else (N, 0, 0, 0))
        stat, conds = np.zeros(N, np.int64), np.zeros((N, 2))
        data, der = workspace(self.system, third_order=second)
        import numba
        nchunks = max(1, min(N, threads or numba.get_num_threads()))
        # del_linearize takes q_k+1 from the row after k: use a shifted array
        Qnext = np.concatenate([Q[:1], Q1[1:]], axis=0)
        _linearize_pairs(model, data, der, self.dt, self.dynamic_index, self.kinematic_index, Q,
                         Qnext, P, LAM, DH1, np.ascontiguousarray(U[:, :m]),
                         np.ascontiguousarray(U[:, m:]), second, self.condition_limit, As, Bs, Hs,
                         stat, conds, nchunks)
        bad = np.flatnonzero(stat != OK)
        if bad.size:
            k = int(bad[0])
            self._raise_singular(int(stat[k]), conds[k], k)
        return (As, Bs, Hs) if second else (As, Bs)


@njit(cache=True, nogil=True, parallel=True)
def _linearize_pairs(model, data_proto, der_proto, dt, dyn, kin, Q, Qnext, P, LAM, DH1, u_force,
                     rho, second, cond_limit, As, Bs, Hs, stat, conds, nchunks):
    """Parallel over chunks of k: linearize the step from (Q[k], P[k]) to Qnext[k+1]."""
    N = u_force.shape[0]
    for c in prange(nchunks):
        data = copy_data(data_proto)
        der = copy_derivs(der_proto)
        st = np.zeros(2, np.int64)
        scratch = np.empty(second_order_scratch(model.nq, dyn.shape[0], model.hc_kind.shape[0])
                           if second else 0)
        for k in range(c, N, nchunks):
            del_linearize(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k],
                          Qnext[k + 1], LAM[k], DH1[k], second, cond_limit, As[k], Bs[k], Hs[k], st, conds[k],
                          scratch)
            stat[k] = st[0]


class VIDiscreteSystem:
    """A :class:`MidpointVI` seen through the state-form protocol of :mod:`core.control`
    (``nx``, ``nu``, ``step(x, u)``, ``linearize(x, u)``, ``linearize2(x, u)``); get one with
    :meth:`MidpointVI.discrete_system`."""

    def __init__(self, vi: MidpointVI):
        self.vi = vi
        self.nx, self.nu = vi.nx, vi.nu

    def step(self, x, u):
        return self.vi.f(x, u)

    def linearize(self, x, u):
        return self.vi.linearize(x, u)

    def linearize2(self, x, u):
        return self.vi.linearize2(x, u)
