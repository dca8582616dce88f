"""First-order linearization of the midpoint variational integrator's one-step map at a
solved step, with the singularity checks of Sec. VII (Johnson, Schultz & Murphey).

The implicit-function theorem on the stacked DEL residual ``R(q_k+1, lam; x_k, u_k)`` gives
``dy/dz = -R_y^-1 R_z``; ``R_y`` is ``[[M_k+1, -Dh(q_k)^T], [Dh(q_k+1), 0]]`` restricted to the
dynamic columns, and the checks test ``M_k+1`` (VII-A) and ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T``
(VII-B). Given an array ``H``, :func:`core.discrete.second_order.second_order` fills it with the
second derivatives; given ``None`` it is not compiled in (numba prunes the branch on the
argument's type): the first-order kernels compile in a fraction of the time.

Sec. VII checks, scale-aware. A plain condition number ``|X| |X^-1|`` is 1 for any 1 x 1
matrix, so it cannot tell a vanishing ``M_k+1`` of a one-variable system, or a vanishing ``S`` of
one constraint, from a regular one. Both measures compare the matrix with the sizes of what it
is made of:

* VII-A: ``kappa_A = max(|M_k+1|_1, |T|_1) |M_k+1^-1|_1``, ``T`` the entrywise sum of the
  absolute values of the terms of ``M_k+1 = dt/4 Lqq + (Lqv - Lqv^T)/2 - Lvv/dt + dt/2 Fq + Fv``.
  It is at least the condition number, and large when the terms cancel (the pendulum's
  ``dt^2 g cos(theta_m) + 4 r = 0``), not because the system is light or heavy.
* VII-B: ``kappa_B = |C^-1|_1`` with ``C_ij = S_ij / (|Dh_i(q_k+1)|_2 |M_k+1^-1 Dh_j(q_k)^T|_2)``
  the cosines of the angles between the factors of ``S = Dh(q_k+1) M_k+1^-1 Dh(q_k)^T``:
  independent of the scale of the masses and of each constraint; for one constraint
  ``1/|cos|`` (the paper's pendulum turning pi/2 in one step has ``cos = 6e-17``).

A step is singular when a measure is not below ``MidpointVI.condition_limit`` (default 1e12:
the matrix is then within about 1e-12 of its factors' size, and its float64 inverse keeps at
most about 4 significant digits).
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.base.linalg import add_product, condition_from_lu, lu_checked, norm1, tree_lu, tree_lu_solve
from core.discrete.second_order import contracted_second_order, costate_directions, second_order
from core.discrete.step import constraint_rows, input_sources, midpoint_terms, slot_jacobians, sparse_newton
from core.errors import OK, SINGULAR_CONSTRAINT_STEP, SINGULAR_M_NEXT
from core.tree.coupling import coupled_third_order
from core.tree.forces import has_dampers, has_force_curvature


@njit(cache=True, nogil=True)
def _term_scale(der, dt, Fq, Fv, dyn):
    """``|T|_1`` for ``T`` the sum of the absolute values of the terms of
    ``M_k+1 = dt/4 Lqq + (Lqv - Lqv^T)/2 - Lvv/dt + dt/2 Fq + Fv`` (dynamic rows and columns)."""
    Lqq, Lqv, Lvv = der.Lqq, der.Lqv, der.Lvv
    nd = dyn.shape[0]
    c_qq, c_vv, c_f = 0.25 * dt, 1.0 / dt, 0.5 * dt
    col = np.zeros(nd)      # the column sums, summed row by row (the arrays' order)
    for a in range(nd):
        i = dyn[a]
        row = 0.0           # |Lqv| along row i: the (Lqv^T)'s term of column a
        for b in range(nd):
            j = dyn[b]
            col[b] += (c_qq * abs(Lqq[i, j]) + 0.5 * abs(Lqv[i, j]) + c_vv * abs(Lvv[i, j])
                       + c_f * abs(Fq[i, j]) + abs(Fv[i, j]))
            row += abs(Lqv[i, j])
        col[a] += 0.5 * row
    return col.max() if nd > 0 else 0.0


@njit(cache=True, nogil=True, inline="always")
def del_linearize(model, data, der, dt, dyn, kin, q0, p0, u_force, rho1, q1, lam, Dh1_solved,
                  cond_limit, A, B, H, contraction, status, conds, scratch):
    """Exact derivatives of ``x_k+1 = f(x_k, u_k)`` at a solved step (``q1``, ``lam`` and, if
    at hand, ``Dh1_solved = Dh(q1)`` from :func:`del_step`; pass an empty (0, n) array to have
    it evaluated here). Fills ``A``, ``B`` and, unless ``H`` is None, ``H`` (see module
    docstring), the tensor (nx, nz, nz); unless ``contraction`` is None, a pair ``(w, W)``
    (``w`` a vector over x_k+1), ``W`` (nz, nz) the contraction ``sum_i w_i H[i]``, computed
    without the tensor (:func:`core.discrete.second_order.contracted_second_order`). Each is
    compiled in only when given (numba prunes a branch on a None argument). ``scratch`` is work
    space for the second order (:func:`second_order_scratch`, :func:`contracted_scratch`).
    ``status``: OK, SINGULAR_M_NEXT or SINGULAR_CONSTRAINT_STEP; ``conds`` = the two
    singularity measures of :func:`singularity_measures`' docstring, compared with ``cond_limit``.
    Inlined into its compiled callers (a layer of its own would optimize and emit its whole tree
    once more: 7 s of compiling the trajectory kernel)."""
    n, nd, nk, nc, m = model.nq, dyn.shape[0], kin.shape[0], model.hc_kind.shape[0], model.nu
    nx = n + nd + nk
    nz = nx + m + nk
    # columns of z: q0 [0, n), p0 [n, n+nd), v0 [.., nx), u [nx, nx+m), rho1 [nx+m, nz)
    cp, cu, cr = n, nx, nx + m
    second = H is not None or contraction is not None
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    n3 = n if second else 0
    nf = n3 if has_force_curvature(model) else 0    # (else Fqq and Fqu are zero: left empty)
    nfv = n3 if has_dampers(model) else 0           # (likewise Fqv)
    Fqq, Fqv, Fqu = np.empty((nf, nf, nf)), np.empty((nfv, nfv, nfv)), np.empty((nf, nf, m if second else 0))
    # (holonomic() zeroes what it fills.) The first order needs lam . D2h(q_k) only; the
    # second also D2h(q_k) per row, D2h(q_k+1) and lam . D3h(q_k)
    nc2, nc3 = (nc if second else 0), (nc if second and nc > 0 else 0)
    h0, Dh0, D2h0 = np.empty(nc), np.empty((nc, n)), np.empty((nc2, n, n))
    lamD2h0 = np.zeros((n, n))
    H3lam = np.empty((n3, n3, n3) if nc3 > 0 else (0, 0, 0))
    constraint_rows(model, data, q0, 3 if second else 2, lam, h0, Dh0, D2h0, lamD2h0, H3lam)
    D2h1 = np.empty((nc2, n3, n3))
    if second or Dh1_solved.shape[0] != nc:   # (the second order needs D2h(q_k+1) as well)
        Dh1 = np.empty((nc, n))
        constraint_rows(model, data, q1, 2 if second else 1, lam, np.empty(nc), Dh1, D2h1,
                         np.empty((0, 0)), np.empty((0, 0, 0)))
    else:
        Dh1 = Dh1_solved
    # (each branch compiled only where its output is given: a None argument prunes it)
    qm = 0.5 * (q0 + q1)
    if H is not None:
        midpoint_terms(model, data, der, dt, q0, q1, u_force, 2, F, Fq, Fv, Fu, (Fqq, Fqv, Fqu))
        coupled_third_order(model, data, qm, True, (q1 - q0) / dt, (q1 - q0) / dt, der)
    elif contraction is not None:   # (its third order: once its direction is known, below)
        midpoint_terms(model, data, der, dt, q0, q1, u_force, 2, F, Fq, Fv, Fu, (Fqq, Fqv, Fqu))
    else:
        midpoint_terms(model, data, der, dt, q0, q1, u_force, 2, F, Fq, Fv, Fu, None)
    Gq0, Gq1, Pq0, Pq1, Gu = slot_jacobians(der, dt, Fq, Fv, Fu)
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
    # Inputs that each drive one dynamic variable (joint torques) have R_z columns that are
    # gain times a p0 column (the identity's): their columns of dy/dz are copies, not products
    u_src, u_gain = np.empty(m, np.int64), np.empty(m)
    mp = 0 if input_sources(Gu, dyn, u_src, u_gain) else m     # input columns multiplied
    Rzu = np.zeros((ny, mp + nk))
    for a in range(nd):
        i = dyn[a]
        for b in range(nd):
            Ry[a, b] = Gq1[i, dyn[b]]
        for r in range(nc):
            Ry[a, nd + r] = -Dh0[r, i]
        for j in range(n):
            Rzq[a, j] = Gq0[i, j] - lamD2h0[i, j]
        for r in range(mp):
            Rzu[a, r] = Gu[i, r]
        for j in range(nk):
            Rzu[a, mp + j] = Gq1[i, kin[j]]
    for r in range(nc):
        for b in range(nd):
            Ry[nd + r, b] = Dh1[r, dyn[b]]
        Rzq[nd + r] = 0.0
        for j in range(nk):
            Rzu[nd + r, mp + j] = Dh1[r, kin[j]]
    # Sec. VII checks, scale-aware (a plain condition number cannot see a 1 x 1 matrix vanish):
    # see :func:`singularity_measures`. One LU of M_k+1 gives its inverse, from which the Schur
    # complement and R_y^-1 follow
    Mk = Ry[:nd, :nd].copy()
    LUm = np.empty((nd, nd))
    pivm = np.empty(nd, np.int64)
    Minv = np.empty((nd, nd))
    # M_k+1 is the DEL Newton matrix at the solution: with the tree's pattern (see
    # core.discrete.step.sparse_newton) its LU has no fill-in, and so its inverse costs n solves
    # of O(sum of depths) each; the pivoted dense LU otherwise (or where the tree LU declines)
    tree = (model.tree_order, model.tree_anc_ptr, model.tree_anc_idx, model.tree_desc_ptr,
            model.tree_desc_idx)
    if nd > 0 and sparse_newton(model, nk) and tree_lu(Mk, tree, LUm) < 0:
        Minv[:, :] = 0.0
        for a in range(nd):
            Minv[a, a] = 1.0
        tree_lu_solve(LUm, tree, Minv)
        conds[0] = max(norm1(Mk), _term_scale(der, dt, Fq, Fv, dyn)) * norm1(Minv)
    elif nd > 0 and lu_checked(Mk, LUm, pivm) >= 0:
        conds[0] = np.inf
    elif nd > 0:
        condition_from_lu(Mk, LUm, pivm, Minv)
        conds[0] = max(norm1(Mk), _term_scale(der, dt, Fq, Fv, dyn)) * norm1(Minv)
    else:
        conds[0] = 1.0
    if not conds[0] < cond_limit:
        status[0], status[1] = SINGULAR_M_NEXT, -1
        return
    if nc > 0:
        # R_y^-1 by blocks from M^-1 and the Schur complement S = Dh(q1) M^-1 Dh(q0)^T: with
        # B = M^-1 Dh(q0)^T and C = S^-1 Dh(q1) M^-1,
        # R_y^-1 = [[M^-1 - B C, B S^-1], [-C, S^-1]] (dynamic columns throughout; nc rows
        # or columns each, so the products are loops)
        D0t, D1 = Ry[:nd, nd:], Ry[nd:, :nd]         # -Dh(q0)^T and Dh(q1)
        Bm = np.zeros((nd, nc))
        add_product(Minv, D0t, Bm, -1.0)
        S = np.zeros((nc, nc))
        add_product(D1, Bm, S, 1.0)
        # S_ij = r_i c_j cos(angle between Dh_i(q1) and B_j), r_i = |Dh_i(q1)|, c_j = |B_j|:
        # the cosines C form S scaled by its factors, and S^-1 = diag(1/c) C^-1 diag(1/r)
        r, c = np.empty(nc), np.empty(nc)
        for i in range(nc):
            r[i] = np.sqrt(np.sum(D1[i] ** 2))
            c[i] = np.sqrt(np.sum(Bm[:, i] ** 2))
        Sinv = np.empty((nc, nc))
        if np.min(r) > 0.0 and np.min(c) > 0.0:
            for i in range(nc):
                for j in range(nc):
                    S[i, j] /= r[i] * c[j]
            LUs = np.empty((nc, nc))
            pivs = np.empty(nc, np.int64)
            if lu_checked(S, LUs, pivs) >= 0:
                conds[1] = np.inf
            else:
                condition_from_lu(S, LUs, pivs, Sinv)
                conds[1] = norm1(Sinv)
                for i in range(nc):
                    for j in range(nc):
                        Sinv[i, j] /= c[i] * r[j]
        else:
            conds[1] = np.inf
        if not conds[1] < cond_limit:
            status[0], status[1] = SINGULAR_CONSTRAINT_STEP, -1
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
    # inverse is at hand: condition numbers); the p0 columns are -R_y^-1's dynamic columns,
    # and those of inputs on one variable each scaled copies of them
    Y = np.zeros((ny, nz))
    if ny > 0:
        Yq = Ry_inv @ Rzq
        Yu = Ry_inv @ Rzu if mp + nk > 0 else np.zeros((ny, 0))
        for a in range(ny):
            for j in range(n):
                Y[a, j] = -Yq[a, j]
            for b in range(nd):
                Y[a, cp + b] = -Ry_inv[a, b]
            for j in range(mp + nk):
                Y[a, cu + m - mp + j] = -Yu[a, j]
            if mp < m:
                for r in range(m):
                    if u_src[r] >= 0:
                        Y[a, cu + r] = u_gain[r] * Y[a, cp + u_src[r]]
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
    if H is not None:
        second_order(der, dt, dyn, kin, Fqq, Fqv, Fqu, Gu, H3lam, D2h0, D2h1, Ry_inv, Rzq, Pq1d, Q1,
                     Lam, H, scratch)
    if contraction is not None:
        w, W = contraction
        ell, wq, wv = costate_directions(n, dt, dyn, Ry_inv, Pq1d, w)
        coupled_third_order(model, data, qm, False, wq, wv, der)   # (kinematics still at qm)
        contracted_second_order(der, dt, dyn, kin, Fqq, Fqv, Fqu, Gu, H3lam, D2h0, D2h1, Rzq, Q1,
                                Lam, ell, W, scratch)
