"""One step of the midpoint variational integrator: the forced, constrained DEL equations
solved for the next configuration (Johnson, Schultz & Murphey, Sec. III).

Discrete Lagrangian and forcing (the paper's choice)::

    L_d(q0, q1) = dt L((q0 + q1)/2, (q1 - q0)/dt),  F_d^- = dt F(qm, v, u),  F_d^+ = 0

Forced, constrained DEL equations (28a-c), imposed on the dynamic variables only::

    p_k + D1 L_d(q_k, q_k+1) + F_d^- - Dh(q_k)^T lam_k = 0
    h(q_k+1) = 0
    p_k+1 = D2 L_d(q_k, q_k+1)

Kinematic variables (trep's term) have prescribed trajectories: their next value is an input.
The state and input layouts are those of :mod:`core.conventions`; the Python front-end is
:class:`core.discrete.midpoint.MidpointVI`. Status codes: :mod:`core.errors`.
"""
from __future__ import annotations

import numpy as np

from core.base.jit import flat, njit
from core.base.linalg import lu_checked, lu_solve, tree_cholesky, tree_cholesky_solve, tree_lu, tree_lu_solve
from core.errors import NEWTON_FAILED, OK, OVERFLOW, SINGULAR_JACOBIAN
from core.tree.coupling import (
    coupled_forward_kinematics,
    coupled_generalized_force,
    coupled_gradient_hessian,
    coupled_holonomic,
    coupled_mass_matrix,
    coupled_prepare,
)
from core.tree.kinematics import composites


# ------------------------------------------------------------------------------ midpoint terms
@njit(cache=True, nogil=True)
def midpoint_terms(model, data, der, dt, q0, q1, u, order, F, Fq, Fv, Fu, curvature):
    """Lagrangian derivatives up to ``order`` (1 or 2) and force derivatives up to ``order - 1``
    at the midpoint of (q0, q1), the kinematics left prepared there. With ``curvature = (Fqq,
    Fqv, Fqu)`` (the second order's) also the forces' second derivatives, into those arrays;
    with None they are not compiled in (the DEL solve and the first-order linearization). The
    Lagrangian's third derivatives are the caller's (:func:`core.tree.lagrangian.third_order`)."""
    qm = 0.5 * (q0 + q1)
    v = (q1 - q0) / dt
    coupled_prepare(model, data, qm, v)
    coupled_gradient_hessian(model, data, qm, order, der, False)
    if curvature is None:
        e3 = np.empty((0, 0, 0))
        coupled_generalized_force(model, data, v, u, order - 1, F, Fq, Fv, Fu, e3, e3, e3)
        return
    coupled_generalized_force(model, data, v, u, 2, F, Fq, Fv, Fu, curvature[0], curvature[1], curvature[2])


@njit(cache=True, nogil=True)
def _hessian_at(model, data, der, dt, q0, q1, u, F, Fq, Fv, Fu):
    """:func:`midpoint_terms` of order 2 right after one of order 1 at the same (q0, q1): the
    kinematics are prepared, so only the Hessian and the force derivatives are added."""
    coupled_gradient_hessian(model, data, 0.5 * (q0 + q1), 2, der, False)
    e3 = np.empty((0, 0, 0))
    coupled_generalized_force(model, data, (q1 - q0) / dt, u, 1, F, Fq, Fv, Fu, e3, e3, e3)


@njit(cache=True, nogil=True)
def slot_jacobians(der, dt, Fq, Fv, Fu):
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
            gq, gv = _g_slopes(der, dt, Fq, Fv, i, j)
            pq = half * Lqq[i, j] + Lqv[j, i]
            pv = half * Lqv[i, j] + Lvv[i, j]
            Gq0[i, j] = 0.5 * gq - gv * inv_dt
            Gq1[i, j] = 0.5 * gq + gv * inv_dt
            Pq0[i, j] = 0.5 * pq - pv * inv_dt
            Pq1[i, j] = 0.5 * pq + pv * inv_dt
    return Gq0, Gq1, Pq0, Pq1, dt * Fu


@njit(cache=True, nogil=True)
def input_sources(Gu, dyn, src, gain):
    """Whether every input drives at most one dynamic variable (joint torques: one entry per
    column of ``Gu = dt Fu``); then input ``r`` acts as ``gain[r]`` times the momentum of
    dynamic variable ``src[r]`` (``-1``: none), and the linearization's columns of ``u`` are
    scaled copies of columns of ``p_k``."""
    single = True
    for r in range(Gu.shape[1]):
        src[r], gain[r] = -1, 0.0
        for a in range(dyn.shape[0]):
            g = Gu[dyn[a], r]
            if g != 0.0:
                if src[r] >= 0:
                    single = False
                src[r], gain[r] = a, g
    return single


@njit(cache=True, nogil=True)
def _newton_matrix(der, dt, Fq, Fv, dyn, tree, on_tree, Ry):
    """``Ry[:nd, :nd] = dG/dq1`` on the dynamic rows and columns (:func:`slot_jacobians`'
    ``Gq1``, alone). With ``on_tree`` (every variable dynamic, ``dyn`` the identity) only the
    tree's pattern is written: the entries of comparable pairs, the only nonzero ones when
    there are no frame springs (see :func:`del_step`); the others keep their zeros. Returns
    whether every entry written is finite."""
    total = 0.0
    if on_tree:
        anc_ptr, anc_idx = tree[1], tree[2]
        for k in range(dyn.shape[0]):
            g = _newton_entry(der, dt, Fq, Fv, k, k)
            Ry[k, k] = g
            total += g
            for t in range(anc_ptr[k], anc_ptr[k + 1]):
                i = anc_idx[t]
                g, h = _newton_entry(der, dt, Fq, Fv, i, k), _newton_entry(der, dt, Fq, Fv, k, i)
                Ry[i, k], Ry[k, i] = g, h
                total += g + h
        return np.isfinite(total)
    for a in range(dyn.shape[0]):
        for c in range(dyn.shape[0]):
            g = _newton_entry(der, dt, Fq, Fv, dyn[a], dyn[c])
            Ry[a, c] = g
            total += g
    return np.isfinite(total)


@njit(cache=True, nogil=True, inline="always")
def _g_slopes(der, dt, Fq, Fv, i, j):
    """``(Gq, Gv)[i, j]`` of :func:`slot_jacobians`: G's derivatives at the midpoint along q
    and along v."""
    half = 0.5 * dt
    return (half * der.Lqq[i, j] - der.Lqv[j, i] + dt * Fq[i, j],
            half * der.Lqv[i, j] - der.Lvv[i, j] + dt * Fv[i, j])


@njit(cache=True, nogil=True, inline="always")
def _newton_entry(der, dt, Fq, Fv, i, j):
    """``Gq1[i, j] = Gq/2 + Gv/dt`` of :func:`slot_jacobians`."""
    gq, gv = _g_slopes(der, dt, Fq, Fv, i, j)
    return 0.5 * gq + gv * (1.0 / dt)


@njit(cache=True, nogil=True)
def constraint_rows(model, data, q, order, lam, h, H1, H2, H2lam, H3lam):
    """Holonomic constraints at ``q`` (positions and joint screws are all they need); nothing
    to do, not even the kinematics, without constraints. See :func:`coupled_holonomic` for which of
    ``H2`` (per row), ``H2lam``, ``H3lam`` (contracted with ``lam``) are filled."""
    if model.hc_kind.shape[0] == 0:
        return
    coupled_forward_kinematics(model, q, np.zeros(q.shape[0]), data)
    coupled_holonomic(model, data, q, order, lam, q, h, H1, H2, H2lam, H3lam, np.empty((0, q.shape[0])))


# ------------------------------------------------------------------------------ one step
@njit(cache=True, nogil=True)
def sparse_newton(model, nk):
    """Whether the DEL Newton matrix has the variables' tree pattern (nonzero only between a
    variable and its ancestors, as ``M``), so that :func:`core.base.linalg.tree_lu` factors it
    without fill-in: no holonomic constraints (their rows and columns are dense), no
    kinematic variables (the dynamic ones are then a sub-tree only in general), no springs or
    dampers between frames (they couple the two frames' branches). Everything else keeps the pattern:
    ``L``'s second derivatives and ``M`` are nonzero only for comparable pairs, damping and
    springs on variables are diagonal, and a wrench at a frame couples only the joints above
    it (:mod:`core.tree.forces`). The dense path is used otherwise, and for trees too deep to pay.
    Coupled (mimic) variables break the pattern too: the tree is that of the joint coordinates,
    and a variable stands for several of them (:mod:`core.tree.coupling`)."""
    if (model.hc_kind.shape[0] > 0 or nk > 0 or model.fspring_f1.shape[0] > 0
            or model.damper_f1.shape[0] > 0 or model.nj != model.nq):
        return False
    # and only when the tree is large and sparse enough to pay: elimination costs
    # sum(depth^2) against the dense LU's n^3 / 3 (a chain is all fill: its dense LU is faster
    # than the indexed one), and below 8 variables the dense LU costs next to nothing
    n, work = model.nq, 0
    for k in range(n):
        d = model.tree_anc_ptr[k + 1] - model.tree_anc_ptr[k]
        work += d * d
    return n >= 8 and 6 * work <= n * n * n


@njit(cache=True, nogil=True)
def _displacement(q0, q1, info):
    """``info[2:4] = (max |q1 - q0|, its index)``; inf where an entry is not finite."""
    info[2], info[3] = 0.0, -1.0
    for i in range(q0.shape[0]):
        d = abs(q1[i] - q0[i])
        if not d <= info[2]:
            info[2], info[3] = (d if np.isfinite(d) else np.inf), i
            if not np.isfinite(d):
                return


@njit(cache=True, nogil=True)
@flat
def del_step(model, data, der, dt, dyn, kin, q0, p0, u_force, rho1, tol, max_iter,
             q1, p1, lam, Dh1, status, info):
    """Solve the DEL equations for ``q1`` (all variables), ``p1`` (dynamic) and ``lam``;
    ``Dh1`` (nh, n) receives ``Dh(q1)`` at the returned ``q1`` (for :func:`del_linearize`).

    Newton's method in its chord form: the Jacobian (the Hessian of L and its LU) is computed
    at the first iterate and kept while the residual falls at least fourfold per iteration;
    otherwise it is recomputed at the current iterate (a plain Newton step). Each chord step
    needs only L's gradient, O(n), and no factorization. When the Newton matrix has the tree's
    pattern (:func:`sparse_newton`) it is factored without fill-in (:func:`core.base.linalg.tree_lu`,
    the pivoted dense LU where that declines), cheaply enough that the Jacobian is also
    recomputed when the chord's rate would need more than two further steps.
    Converged when every momentum row is below ``tol`` relative to the largest term of the
    equation and every constraint row below ``tol`` absolutely.
    ``status``: OK, NEWTON_FAILED, SINGULAR_JACOBIAN (``status[1]`` = row) or OVERFLOW
    (``status[1]`` = 1 when the Newton matrix itself has non-finite entries, else -1);
    ``info``: [final (scaled) residual, iterations, largest |q1 - q0| of the last iterate (inf if
    not finite), its variable] (the front-end tells a step far too large from a singular one).
    """
    n, nd, nk, nc = model.nq, dyn.shape[0], kin.shape[0], model.hc_kind.shape[0]
    m = model.nu
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    e3, e2 = np.empty((0, 0, 0)), np.empty((0, 0))
    tree = (model.tree_order, model.tree_anc_ptr, model.tree_anc_idx, model.tree_desc_ptr,
            model.tree_desc_idx)
    on_tree = sparse_newton(model, nk)
    h0, Dh0 = np.empty(nc), np.zeros((nc, n))
    constraint_rows(model, data, q0, 1, lam, h0, Dh0, e3, e2, e3)
    # initial guess: q1_dyn = q0 + dt M^-1 (p0 - M_dk v_kin) at q0 (M = L_vv from composites)
    q1[:] = q0
    for j in range(nk):
        q1[kin[j]] = rho1[j]
    coupled_forward_kinematics(model, q0, np.zeros(n), data)
    composites(model, data)
    M = np.empty((n, n))
    coupled_mass_matrix(model, data, M)
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
    if on_tree:     # M has the tree's pattern: its Cholesky factor has no fill-in
        solved = tree_cholesky(Mdd, tree, LU0) < 0
        if solved:
            tree_cholesky_solve(LU0, tree, rhs)
    else:
        solved = lu_checked(Mdd, LU0, piv0) < 0
        if solved:
            lu_solve(LU0, piv0, rhs)
    if solved:
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
    alpha = 1.0             # scale of the constraint rows and multiplier columns of R_y
    tree_factor = False     # LU holds tree_lu's factors (else lu_checked's)
    # On the tree path the first step takes -M(q_k)/dt, factored for the guess, as the Jacobian
    # (its leading term): it needs only the gradient, and the full Jacobian is then formed
    # nearer the solution, which saves a Newton step
    guess_step = on_tree and solved
    while True:
        order = 2 if fresh and not guess_step else 1
        midpoint_terms(model, data, der, dt, q0, q1, u_force, order, F, Fq, Fv, Fu, None)
        Lq, Lv = der.Lq, der.Lv
        for a in range(nd):
            i = dyn[a]
            s = p0[a] + 0.5 * dt * Lq[i] - Lv[i] + dt * F[i]
            for r in range(nc):
                s -= Dh0[r, i] * lam[r]
            R[a, 0] = s
            p1[a] = 0.5 * dt * Lq[i] + Lv[i]
        if nc > 0:
            constraint_rows(model, data, q1, 1, lam, h1, Dh1, e3, e2, e3)
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
        _displacement(q0, q1, info)
        if res <= tol:
            # relative convergence with overflowing terms (inf - inf momenta): not a step
            finite = np.isfinite(np.sum(p1)) and np.isfinite(np.sum(q1))
            status[0], status[1] = (OK, -1) if finite else (OVERFLOW, -1)
            return
        if it >= max_iter or not np.isfinite(res):
            status[0], status[1] = NEWTON_FAILED, -1
            return
        # The chord stalls (the residual falls less than fourfold): a Newton step from here.
        # With the tree factorization a new Jacobian costs under twice a chord step, so it is
        # also taken when two more chord steps at the last rate would not converge
        if guess_step:
            tree_cholesky_solve(LU0, tree, R)
            for a in range(nd):
                q1[a] += dt * R[a, 0]
            it += 1
            last_res = res
            guess_step = False
            continue
        ratio = res / last_res
        if not fresh and (not ratio <= 0.25 or (on_tree and res * ratio * ratio > tol)):
            fresh = True
            if nc == 0:     # (the constraint rows evaluated the kinematics at q1 since)
                _hessian_at(model, data, der, dt, q0, q1, u_force, F, Fq, Fv, Fu)
            else:
                midpoint_terms(model, data, der, dt, q0, q1, u_force, 2, F, Fq, Fv, Fu, None)
        if fresh:
            finite = _newton_matrix(der, dt, Fq, Fv, dyn, tree, on_tree, Ry)
            if on_tree:
                if not finite:
                    status[0], status[1] = OVERFLOW, 1
                    return
                # unpivoted, without fill-in; the pivoted dense LU where that is unstable
                # (it also names the row of a singular matrix)
                tree_factor = tree_lu(Ry, tree, LU) < 0
                if not tree_factor:
                    bad = lu_checked(Ry, LU, piv)
                    if bad >= 0:
                        status[0], status[1] = SINGULAR_JACOBIAN, bad
                        return
        if fresh and not on_tree:
            for a in range(nd):
                for r in range(nc):
                    Ry[a, nd + r] = -Dh0[r, dyn[a]]
            for r in range(nc):
                for b in range(nd):
                    Ry[nd + r, b] = Dh1[r, dyn[b]]
                for s in range(nc):
                    Ry[nd + r, nd + s] = 0.0
            if not np.isfinite(np.sum(Ry)):
                status[0], status[1] = OVERFLOW, 1
                return
            # constraint rows and multiplier columns scaled to M_k+1's size, so that the
            # pivot test (relative to the largest entry) sees S = Dh(q1) M^-1 Dh(q0)^T relative
            # to its factors, whatever the masses (m = 1e6 kg at dt = 0.1 made |S|/|M| 4e-16)
            msize, dsize = 0.0, 0.0
            for a in range(nd):
                for b in range(nd):
                    msize = max(msize, abs(Ry[a, b]))
                for r in range(nc):
                    dsize = max(dsize, abs(Ry[a, nd + r]), abs(Ry[nd + r, a]))
            alpha = msize / dsize if msize > 0.0 and dsize > 0.0 else 1.0
            for r in range(nc):
                for b in range(nd):
                    Ry[nd + r, b] *= alpha
                    Ry[b, nd + r] *= alpha
            bad = lu_checked(Ry, LU, piv)
            if bad >= 0:
                status[0], status[1] = SINGULAR_JACOBIAN, bad
                return
        for r in range(nc):          # the scaled system: rows times alpha, lam / alpha
            R[nd + r, 0] *= alpha
        if tree_factor:
            tree_lu_solve(LU, tree, R)
        else:
            lu_solve(LU, piv, R)
        for a in range(nd):
            q1[dyn[a]] -= R[a, 0]
        for r in range(nc):
            lam[r] -= alpha * R[nd + r, 0]
        it += 1
        last_res = res
        fresh = False
