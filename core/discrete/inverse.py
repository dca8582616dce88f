"""DEL inverse dynamics: along given configurations, the discrete momenta (the discrete
Legendre transform ``p_k = D2 L_d(q_k-1, q_k)``) and the force inputs that make the forced DEL
equations hold (least squares where the system is underactuated). Kernels only: the front-end
is :meth:`core.discrete.midpoint.MidpointVI.inverse_dynamics`.
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.tree.coupling import coupled_generalized_force, coupled_gradient_hessian, coupled_prepare


@njit(cache=True, nogil=True)
def del_inverse_dynamics(model, data, der, dt, dyn, kin, Q, p0, U, P, resid):
    """Inputs that make the configurations Q (N+1, n) satisfy the forced DEL equations.

    With p_k = D2 L_d(q_k-1, q_k) (p_0 given) the DEL residual of step k is affine in the force
    inputs, ``r_k(u) = p_k + D1 L_d(q_k, q_k+1) + dt F(qm, v, 0) + dt F_u(qm) u``; the least-squares
    (minimum-norm) u_k is returned in U[k, :m] and the next kinematic values q_k+1,kin in
    U[k, m:]. resid[k] = max |r_k(u_k)| relative to the size of the terms (as the DEL solve
    measures convergence). Holonomic constraint forces are not modelled here (they would add
    Dh^T lam to the residual), so constrained systems leave a residual.
    """
    n, nd, nk, m = model.nq, dyn.shape[0], kin.shape[0], model.nu
    N = Q.shape[0] - 1
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    e3 = np.empty((0, 0, 0))
    zero_u = np.zeros(m)
    r0 = np.empty(nd)
    G = np.empty((nd, m))
    for a in range(nd):
        P[0, a] = p0[a]
    for k in range(N):
        q0 = Q[k]
        q1 = Q[k + 1]
        qm = 0.5 * (q0 + q1)
        v = (q1 - q0) / dt
        coupled_prepare(model, data, qm, v)
        coupled_gradient_hessian(model, data, qm, 1, der, True)
        coupled_generalized_force(model, data, v, zero_u, 1, F, Fq, Fv, Fu, e3, e3, e3)
        scale = 1.0
        for a in range(nd):
            i = dyn[a]
            r0[a] = P[k, a] + 0.5 * dt * der.Lq[i] - der.Lv[i] + dt * F[i]
            scale = max(scale, abs(P[k, a]), abs(der.Lv[i]), abs(0.5 * dt * der.Lq[i]), abs(dt * F[i]))
            for r in range(m):
                G[a, r] = dt * Fu[i, r]
        uk = np.zeros(m)
        if nd > 0 and m > 0:
            sol = np.linalg.lstsq(G, -r0, 1e-12)[0]
            for r in range(m):
                uk[r] = sol[r]
        worst = 0.0
        for a in range(nd):
            s = r0[a]
            for r in range(m):
                s += G[a, r] * uk[r]
            worst = max(worst, abs(s) / scale)
        resid[k] = worst
        for r in range(m):
            U[k, r] = uk[r]
        for j in range(nk):
            U[k, m + j] = q1[kin[j]]
        for a in range(nd):
            i = dyn[a]
            P[k + 1, a] = 0.5 * dt * der.Lq[i] + der.Lv[i]


@njit(cache=True, nogil=True)
def discrete_momenta(model, data, der, dt, dyn, Q, P):
    """P[k] = D2 L_d(Q[k-1], Q[k]) for k >= 1 (P[0] is left as given)."""
    nd = dyn.shape[0]
    for k in range(1, Q.shape[0]):
        qm = 0.5 * (Q[k - 1] + Q[k])
        v = (Q[k] - Q[k - 1]) / dt
        coupled_prepare(model, data, qm, v)
        coupled_gradient_hessian(model, data, qm, 1, der, True)
        for a in range(nd):
            P[k, a] = 0.5 * dt * der.Lq[dyn[a]] + der.Lv[dyn[a]]
