"""Second-order linearization of the continuous dynamics: ``H[i, a, b] = d2 xdot_i / dz_a dz_b``
with ``x = [q, dq]``, ``z = [q, dq, u]`` (trep's ``f_dqdq``, ``f_ddqdq``, ``f_ddqddq``,
``f_dudq``, ``f_duddq``, ``f_dudu`` in one tensor).

The accelerations ``a = ddq`` solve ``E(q, v, a, u) = M(q) a + Lqv^T v - Lq - F(q, v, u) = 0``
on the dynamic rows (``v = dq``; kinematic rows are prescribed, ``a_K = u_acc``). With ``a_z``
the first derivatives (the lower rows of the first-order ``A, B``), differentiating ``E = 0``
twice at fixed ``a`` gives, per pair ``(z_a, z_b)``::

    M a_ab = -(E_ab + M_,a a_b + M_,b a_a)        (M_,a = dM/dz_a: nonzero for q only)

where, row ``i``, with the third derivatives of ``L`` at ``(q, v)`` (:mod:`core.tree.lagrangian`)
and ``Lqqv(a)`` the same tensor at velocity ``a``::

    E_{q_x q_y} = Lqqv(a)[x, y, i] + T4[x, y, i] - Lqqq[x, y, i] - Fqq[i, x, y]
    E_{q_x v_j} = W[x, i, j] + Lqqv[x, j, i] - Lqqv[x, i, j] - Fqv[i, x, j]
    E_{v_j v_k} = Lqvv[k, i, j] + Lqvv[j, i, k] - Lqvv[i, j, k]
    E_{q_x u_r} = -Fqu[i, x, r]                  (M_,x a_b with a_b = e_K covers u_acc)

``T4`` and ``W`` are the fourth-order terms, the rates along ``v`` of ``Lqqv`` and ``Lqvv``
(:func:`core.tree.lagrangian.fourth_order`); ``F`` is affine in ``u``, ``Fvv = 0``. The rows of
``xdot = [v, a]`` for ``q`` are linear: their ``H`` is zero.

Constraints ``a_r(q) . a + b_r(q, v) = 0`` (holonomic rows ``a_r = Dh_r``, ``b_r = v^T D2h_r v``;
velocity rows as in :func:`core.tree.constraints.velocity_rows`) add ``-A^T lam`` to ``E``: its
second derivatives (``lam . D2a`` and the first-order ``dlam`` against ``Da``) join the right
side, and ``lam_ab`` comes from the same Schur complement as ``lam``
(:func:`_constraint_correction`). ``b``'s Hessian in ``q`` needs the constraint points' fourth
derivative along ``v`` twice, again a rate of the third order
(:func:`core.tree.jets.point_rate`).
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.base.linalg import cholesky_checked, cholesky_solve
from core.errors import NONFINITE_INTERMEDIATE, OK, SINGULAR_CONSTRAINTS, SINGULAR_MASS
from core.tree.constraints import velocity_fourth
from core.tree.coupling import (
    coupled_fourth_order,
    coupled_generalized_force,
    coupled_gradient_hessian,
    coupled_holonomic,
    coupled_holonomic_fourth,
    coupled_prepare,
    coupled_third_order,
)
from core.tree.forces import has_dampers


@njit(cache=True, nogil=True)
def dynamics_hessian(model, data, der, der_a, q, dq, u, dyn, kin, ddq, lam, A_lin, B_lin, dlam, H, status):
    """Fill ``H`` (2n x nz x nz, ``nz = 2n + m + nk``) from the solution ``ddq``, ``lam`` and
    the first-order ``A_lin, B_lin, dlam`` of :func:`core.continuous.dynamics.continuous_dynamics` at the
    same point. ``der`` and ``der_a`` are third-order
    derivative scratch. ``status`` as there (SINGULAR_MASS, SINGULAR_CONSTRAINTS,
    NONFINITE_INTERMEDIATE or OK)."""
    n, m, nh = model.nq, model.nu, model.nh
    nd, nk = dyn.shape[0], kin.shape[0]
    mu = m + nk
    nz = 2 * n + mu
    # the first derivatives of a for every variable (kinematic rows: e on their input)
    Z = np.empty((n, nz))
    for i in range(n):
        for k in range(2 * n):
            Z[i, k] = A_lin[n + i, k]
        for r in range(mu):
            Z[i, 2 * n + r] = B_lin[n + i, r]
    coupled_prepare(model, data, q, dq)
    coupled_gradient_hessian(model, data, q, 2, der, False)
    coupled_third_order(model, data, q, True, dq, dq, der)
    T4, W = np.empty((n, n, n)), np.empty((n, n, n))
    coupled_fourth_order(model, data, dq, T4, W)
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    damped = has_dampers(model)       # (else Fqv is zero: left empty)
    Fqq, Fqv, Fqu = np.empty((n, n, n)), np.empty((n, n, n) if damped else (0, 0, 0)), np.empty((n, n, m))
    coupled_generalized_force(model, data, dq, u[:m], 2, F, Fq, Fv, Fu, Fqq, Fqv, Fqu)
    Lqqq, Lqqv, Lqvv = der.Lqqq, der.Lqqv, der.Lqvv
    # constraint rows a_r(q) . ddq + b_r = 0: A, Da[r, i, x] = da_r,i/dq_x, D2a, and the Hessian
    # Bqq of b_r = sum da_r,i/dq_k v_i v_k at fixed v (holonomic: a_r = Dh_r, so Da = D2h,
    # D2a = D3h, Bqq = D4h(v, v))
    nc = nh + model.nv
    Ac, Da = np.empty((nc, n)), np.empty((nc, n, n))
    D2a, Bqq = np.empty((nc, n, n, n)), np.empty((nc, n, n))
    e2, e3 = np.empty((0, 0)), np.empty((0, 0, 0))
    if nh > 0:
        coupled_holonomic(model, data, q, 2, np.empty(0), dq, np.empty(nh), Ac[:nh], Da[:nh], e2, e3, e2)
        coupled_holonomic_fourth(model, data, dq, D2a[:nh], Bqq[:nh])
    if model.nv > 0:
        velocity_fourth(model, data, dq, Ac[nh:], Da[nh:], D2a[nh:], Bqq[nh:])
    coupled_prepare(model, data, q, ddq)
    coupled_third_order(model, data, q, True, ddq, ddq, der_a)
    Lqqv_a = der_a.Lqqv
    Mdd, Lm = np.empty((nd, nd)), np.empty((nd, nd))
    for a in range(nd):
        for c in range(nd):
            Mdd[a, c] = der.Lvv[dyn[a], dyn[c]]
    bad = cholesky_checked(Mdd, Lm)
    if bad >= 0:
        status[0], status[1] = SINGULAR_MASS, dyn[bad]
        return
    # MZ[x, a, b] = (dM/dq_x a_b) on dynamic row a
    MZ = np.zeros((n, nd, nz))
    for x in range(n):
        for a in range(nd):
            i = dyn[a]
            for j in range(n):
                mij = Lqvv[x, i, j]
                if mij != 0.0:
                    for b in range(nz):
                        MZ[x, a, b] += mij * Z[j, b]
    R = np.empty((nd, nz * nz))
    for a in range(nd):
        i = dyn[a]
        for s in range(nz):
            for t in range(s, nz):
                e = 0.0
                if t < n:                           # q_s q_t
                    e = Lqqv_a[s, t, i] + T4[s, t, i] - Lqqq[s, t, i] - Fqq[i, s, t]
                elif s < n and t < 2 * n:           # q_s v_j
                    j = t - n
                    e = W[s, i, j] + Lqqv[s, j, i] - Lqqv[s, i, j]
                    if damped:
                        e -= Fqv[i, s, j]
                elif s < n:                         # q_s u_r (force inputs)
                    r = t - 2 * n
                    if r < m:
                        e = -Fqu[i, s, r]
                elif s < 2 * n and t < 2 * n:       # v_j v_k
                    j, k = s - n, t - n
                    e = Lqvv[k, i, j] + Lqvv[j, i, k] - Lqvv[i, j, k]
                if s < n:
                    e += MZ[s, a, t]
                if t < n:
                    e += MZ[t, a, s]
                R[a, s * nz + t] = -e
                R[a, t * nz + s] = -e
    if nc > 0:
        _multiplier_terms(n, nz, dyn, lam, dlam, Da, D2a, R)
    cholesky_solve(Lm, R)
    if nc > 0 and not _constraint_correction(n, nz, dyn, Lm, ddq, dq, Z, Ac, Da, D2a, Bqq, R, status):
        return
    H[:, :, :] = 0.0
    for a in range(nd):
        i = dyn[a]
        for s in range(nz):
            for t in range(nz):
                H[n + i, s, t] = R[a, s * nz + t]
    if not np.isfinite(np.sum(R)):
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1
        return
    status[0], status[1] = OK, -1


@njit(cache=True, nogil=True)
def _multiplier_terms(n, nz, dyn, lam, dlam, Da, D2a, R):
    """The constraint force ``A^T lam`` in ``E``'s second derivatives, subtracted from ``R``
    (= -E_ab on the dynamic rows): ``lam . D2a`` on (q, q) and ``Da dlam`` on (q, any)."""
    nc = lam.shape[0]
    for a in range(dyn.shape[0]):
        i = dyn[a]
        for s in range(nz):
            for t in range(s, nz):
                e = 0.0
                for r in range(nc):
                    if t < n:
                        e += lam[r] * D2a[r, i, s, t]
                    if s < n:
                        e += Da[r, i, s] * dlam[r, t]
                    if t < n:
                        e += Da[r, i, t] * dlam[r, s]
                R[a, s * nz + t] += e
                if t != s:
                    R[a, t * nz + s] += e


@njit(cache=True, nogil=True)
def _constraint_correction(n, nz, dyn, Lm, ddq, dq, Z, Ac, Da, D2a, Bqq, Y, status):
    """Constraint rows: ``Y`` holds ``M_DD^-1 R``; add ``M_DD^-1 A_D^T lam_ab`` with ``lam_ab``
    from ``(A_D M_DD^-1 A_D^T) lam_ab = -(C_ab + A_D Y)``, where ``C_r = a_r . ddq + b_r`` has
    the second derivatives ``D2a_r(., q, q) . ddq + Bqq_r`` on (q, q), ``sum_k (D2a_r[j, k, x] +
    D2a_r[k, j, x]) v_k`` on (q_x, v_j), ``Da_r[j, k] + Da_r[k, j]`` on (v_j, v_k) and
    ``Da_r(., q_x) . a_b`` for each q slot. False (with ``status``) when the constraint rows are
    singular."""
    nc, nd = Ac.shape[0], dyn.shape[0]
    Ad = np.empty((nc, nd))
    MAt = np.empty((nd, nc))
    for r in range(nc):
        for a in range(nd):
            Ad[r, a] = Ac[r, dyn[a]]
            MAt[a, r] = Ac[r, dyn[a]]
    cholesky_solve(Lm, MAt)
    schur, Ls = Ad @ MAt, np.empty((nc, nc))
    bad = cholesky_checked(schur, Ls)
    if bad >= 0:
        status[0], status[1] = SINGULAR_CONSTRAINTS, bad
        return False
    rhs = -(Ad @ Y)
    Cqq, Cqv, DaZ = np.empty((n, n)), np.empty((n, n)), np.empty((n, nz))
    for r in range(nc):
        for s in range(n):
            for t in range(n):
                sa = Bqq[r, s, t]
                for i in range(n):
                    sa += D2a[r, i, s, t] * ddq[i]
                Cqq[s, t] = sa
            for j in range(n):
                sv = 0.0
                for k in range(n):
                    sv += (D2a[r, j, k, s] + D2a[r, k, j, s]) * dq[k]
                Cqv[s, j] = sv
            for t in range(nz):
                x = 0.0
                for i in range(n):
                    x += Da[r, i, s] * Z[i, t]
                DaZ[s, t] = x
        for s in range(nz):
            for t in range(s, nz):
                c = 0.0
                if t < n:
                    c = Cqq[s, t]
                elif s < n and t < 2 * n:
                    c = Cqv[s, t - n]
                elif n <= s < 2 * n and t < 2 * n:
                    c = Da[r, s - n, t - n] + Da[r, t - n, s - n]
                if s < n:
                    c += DaZ[s, t]
                if t < n:
                    c += DaZ[t, s]
                rhs[r, s * nz + t] -= c
                if t != s:
                    rhs[r, t * nz + s] -= c
    cholesky_solve(Ls, rhs)
    Y += MAt @ rhs
    return True
