"""Second-order linearization of the continuous dynamics: ``H[i, a, b] = d2 xdot_i / dz_a dz_b``
with ``x = [q, dq]``, ``z = [q, dq, u]`` (trep's ``f_dqdq``, ``f_ddqdq``, ``f_ddqddq``,
``f_dudq``, ``f_duddq``, ``f_dudu`` in one tensor).

The accelerations ``a = ddq`` solve ``E(q, v, a, u) = M(q) a + Lqv^T v - Lq - F(q, v, u) = 0``
on the dynamic rows (``v = dq``; kinematic rows are prescribed, ``a_K = u_acc``). With ``a_z``
the first derivatives (the lower rows of the first-order ``A, B``), differentiating ``E = 0``
twice at fixed ``a`` gives, per pair ``(z_a, z_b)``::

    M a_ab = -(E_ab + M_,a a_b + M_,b a_a)        (M_,a = dM/dz_a: nonzero for q only)

where, row ``i``, with the third derivatives of ``L`` at ``(q, v)`` (:mod:`core.lagrangian`)
and ``Lqqv(a)`` the same tensor at velocity ``a``::

    E_{q_x q_y} = Lqqv(a)[x, y, i] + T4[x, y, i] - Lqqq[x, y, i] - Fqq[i, x, y]
    E_{q_x v_j} = W[x, i, j] + Lqqv[x, j, i] - Lqqv[x, i, j] - Fqv[i, x, j]
    E_{v_j v_k} = Lqvv[k, i, j] + Lqvv[j, i, k] - Lqvv[i, j, k]
    E_{q_x u_r} = -Fqu[i, x, r]                  (M_,x a_b with a_b = e_K covers u_acc)

``T4`` and ``W`` are the fourth-order terms, the rates along ``v`` of ``Lqqv`` and ``Lqvv``
(:func:`core.lagrangian.fourth_order`); ``F`` is affine in ``u``, ``Fvv = 0``. The rows of
``xdot = [v, a]`` for ``q`` are linear: their ``H`` is zero.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .coupling import fourth_order, generalized_force, gradient_hessian, prepare, third_order
from .errors import NONFINITE_INTERMEDIATE, OK, SINGULAR_MASS
from .linalg import cholesky_checked, cholesky_solve


@njit(cache=True, nogil=True)
def second_order(model, data, der, der_a, q, dq, u, dyn, kin, ddq, A_lin, B_lin, H, status):
    """Fill ``H`` (2n x nz x nz, ``nz = 2n + m + nk``) from the solution ``ddq`` and the
    first-order ``A_lin, B_lin`` of :func:`core.dynamics.continuous_dynamics` at the same point
    (a model without constraints). ``der`` and ``der_a`` are third-order derivative scratch.
    ``status`` as there (SINGULAR_MASS, NONFINITE_INTERMEDIATE or OK)."""
    n, m = model.nq, model.nu
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
    prepare(model, data, q, dq)
    gradient_hessian(model, data, q, 2, der, False)
    third_order(model, data, True, dq, dq, der)
    T4, W = np.empty((n, n, n)), np.empty((n, n, n))
    fourth_order(model, data, dq, T4, W)
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    Fqq, Fqu = np.empty((n, n, n)), np.empty((n, n, m))
    generalized_force(model, data, dq, u[:m], 2, F, Fq, Fv, Fu, Fqq, Fqu)
    Lqqq, Lqqv, Lqvv = der.Lqqq, der.Lqqv, der.Lqvv
    prepare(model, data, q, ddq)
    third_order(model, data, True, ddq, ddq, der_a)
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
    cholesky_solve(Lm, R)
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
