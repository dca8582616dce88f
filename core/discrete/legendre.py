"""Exact transforms between the continuous state ``[q, qdot]`` and the midpoint variational
integrator's state ``x = [q, p, v]`` (:mod:`core.conventions`).

The forward transform is the (continuous) Legendre transform ``p = dL/dqdot = M(q) qdot`` on
the dynamic rows, with ``v = qdot`` on the kinematic rows; the inverse solves
``M_dd qdot_dyn = p - M_dk v`` by Cholesky with a relative pivot test. Kernels only: the front-end
is :class:`core.discrete.midpoint.MidpointVI` (``discrete_state``, ``continuous_state``,
``state_jacobian``); the tracking law on this state is :mod:`core.discrete.tracking`.
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.base.linalg import cholesky_checked, cholesky_solve
from core.tree.coupling import coupled_gradient_hessian, coupled_prepare


@njit(cache=True, nogil=True)
def legendre(model, data, der, dyn, kin, q, dq, x):
    """x = [q, p = dL/dqdot on dynamic rows, qdot on kinematic rows]."""
    n, nd = q.shape[0], dyn.shape[0]
    coupled_prepare(model, data, q, dq)
    coupled_gradient_hessian(model, data, q, 1, der, True)
    for i in range(n):
        x[i] = q[i]
    for a in range(nd):
        x[n + a] = der.Lv[dyn[a]]
    for j in range(kin.shape[0]):
        x[n + nd + j] = dq[kin[j]]


@njit(cache=True, nogil=True)
def legendre_many(model, data, der, dyn, kin, Q, dQ, X):
    for k in range(Q.shape[0]):
        legendre(model, data, der, dyn, kin, Q[k], dQ[k], X[k])


@njit(cache=True, nogil=True)
def inverse_legendre(model, data, der, dyn, kin, q, p, v, dq):
    """qdot from (q, p, v): qdot_kin = v, M_dd qdot_dyn = p - M_dk v. Returns False if M_dd is
    singular."""
    n, nd, nk = q.shape[0], dyn.shape[0], kin.shape[0]
    coupled_prepare(model, data, q, np.zeros(n))
    coupled_gradient_hessian(model, data, q, 2, der, True)
    M = der.Lvv
    for j in range(nk):
        dq[kin[j]] = v[j]
    if nd == 0:
        return True
    Mdd = np.empty((nd, nd))
    rhs = np.empty(nd)
    for a in range(nd):
        s = p[a]
        for j in range(nk):
            s -= M[dyn[a], kin[j]] * v[j]
        rhs[a] = s
        for b in range(nd):
            Mdd[a, b] = M[dyn[a], dyn[b]]
    # symmetric positive definite when regular: Cholesky with a relative pivot test
    L = np.empty((nd, nd))
    if cholesky_checked(Mdd, L, 1e-14) >= 0:
        return False
    y = rhs.reshape(nd, 1)
    cholesky_solve(L, y)
    for a in range(nd):
        dq[dyn[a]] = y[a, 0]
    return True


@njit(cache=True, nogil=True)
def legendre_jacobian(model, data, der, dyn, kin, q, dq, J):
    """J = d[q, p, v] / d[q, qdot] at (q, qdot) (2n x 2n)."""
    n, nd, nk = q.shape[0], dyn.shape[0], kin.shape[0]
    coupled_prepare(model, data, q, dq)
    coupled_gradient_hessian(model, data, q, 2, der, True)
    J[:, :] = 0.0
    for i in range(n):
        J[i, i] = 1.0
    for a in range(nd):
        for j in range(n):
            J[n + a, j] = der.Lqv[j, dyn[a]]      # d(Lv_i)/dq_j = Lqv[j, i]
            J[n + a, n + j] = der.Lvv[dyn[a], j]
    for c in range(nk):
        J[n + nd + c, n + kin[c]] = 1.0
