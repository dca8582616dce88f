"""Recursive Newton-Euler inverse dynamics of the frame tree and its exact first derivatives.

Used by the continuous dynamics (:mod:`core.dynamics`): the mass matrix from composite inertias,
the bias forces by one Newton-Euler pass, and the derivatives of the inverse dynamics

    tau(q, dq, ddq) = M(q) ddq + L_vq dq - dL/dq        (kinetic energy and gravity only)

with respect to ``q`` and ``dq`` at fixed ``ddq`` (Sec. III of Johnson & Murphey 2010 needs
exactly these). The derivatives cost O(n d) for n variables and tree depth d (O(n^2) along a
chain), instead of the O(n d^2) of contracting third derivatives of L.

Everything is in world coordinates, with twists ``(v, w)`` and wrenches ``(f, n)`` (force, moment
about the world origin) as in :mod:`core.kinematics`. Gravity enters as the acceleration
``(-g, 0)`` of the world (the usual Newton-Euler trick).

Why the derivative along ``q_a`` is cheap: moving ``q_a`` moves the whole subtree below joint
``a`` rigidly with the twist ``S_a``; attached quantities change by ``S_a x .`` (motions) or
``S_a x* .`` (wrenches, inertias as ``S_a x* I - I S_a x``), while the velocity ``Vp_a`` and
acceleration ``Ap_a`` of the joint's parent do not move. So for every frame ``f`` below ``a``
(``W = V_f - Vp_a``)::

    dV_f = S_a x W
    dA_f = S_a x (A_f - Ap_a) - (S_a x Vp_a) x W
    d(I_f X)  = S_a x* (I_f X) + I_f (dX - S_a x X)

and the composite wrench derivative ``dF`` is summed up the subtree; above ``a`` it passes
through unchanged. Along ``dq_a``: ``dV_f = S_a``, ``dA_f = S_a x V_f + 2 Vp_a x S_a``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .kinematics import bracket, dot6, matvec6


@njit(cache=True, nogil=True)
def cross_force(x, F, out):
    """Dual action of twist ``x = (v, w)`` on wrench ``F = (f, n)``: ``(w x f, v x f + w x n)``."""
    v0, v1, v2, w0, w1, w2 = x[0], x[1], x[2], x[3], x[4], x[5]
    f0, f1, f2, n0, n1, n2 = F[0], F[1], F[2], F[3], F[4], F[5]
    out[0] = w1 * f2 - w2 * f1
    out[1] = w2 * f0 - w0 * f2
    out[2] = w0 * f1 - w1 * f0
    out[3] = v1 * f2 - v2 * f1 + w1 * n2 - w2 * n1
    out[4] = v2 * f0 - v0 * f2 + w2 * n0 - w0 * n2
    out[5] = v0 * f1 - v1 * f0 + w0 * n1 - w1 * n0


@njit(cache=True, nogil=True)
def mass_matrix(model, data, M):
    """``M[a, b] = S_a . Ic_b S_b`` for ``a`` at or above ``b`` (needs :func:`composites`)."""
    M[:, :] = 0.0
    IS = np.empty(6)
    for b in range(model.nq):
        fb = model.joint_frame[b]
        if fb < 0:
            continue
        matvec6(data.Ic[fb], data.S[b], IS)
        for ia in range(model.anc_ptr[b], model.anc_ptr[b + 1]):
            a = model.anc_idx[ia]
            M[a, b] = dot6(data.S[a], IS)
            M[b, a] = M[a, b]


@njit(cache=True, nogil=True)
def newton_euler(model, data, Ib, has_mass, dq, ddq, Ap, F, tau):
    """One Newton-Euler pass: the acceleration ``Ap[j]`` of each joint's parent (gravity
    included), composite wrenches ``F`` and ``tau[j] = S_j . F_(frame of j)`` (0 for a variable
    that drives no frame)."""
    g = model.gravity
    A = np.empty((model.nf, 6))      # frame accelerations
    h = np.empty(6)                  # body momentum I V
    tmp = np.empty(6)
    vxs = np.empty(6)
    for f in range(model.nf):
        par = model.frame_parent[f]
        if par < 0:
            A[f, 0], A[f, 1], A[f, 2] = -g[0], -g[1], -g[2]
            A[f, 3] = A[f, 4] = A[f, 5] = 0.0
        else:
            for i in range(6):
                A[f, i] = A[par, i]
        j = model.frame_qindex[f]
        if j >= 0:
            for i in range(6):
                Ap[j, i] = A[f, i]
            bracket(data.Vp[j], data.S[j], vxs)
            for i in range(6):
                A[f, i] += data.S[j, i] * ddq[j] + vxs[i] * dq[j]
    for f in range(model.nf):
        if has_mass[f]:
            matvec6(Ib[f], data.V[f], h)
            matvec6(Ib[f], A[f], F[f])
            cross_force(data.V[f], h, tmp)
            for i in range(6):
                F[f, i] += tmp[i]
        else:
            F[f, :] = 0.0
    for f in range(model.nf - 1, -1, -1):
        par = model.frame_parent[f]
        if par >= 0:
            for i in range(6):
                F[par, i] += F[f, i]
    for j in range(model.nq):
        fj = model.joint_frame[j]
        tau[j] = dot6(data.S[j], F[fj]) if fj >= 0 else 0.0


@njit(cache=True, nogil=True)
def _motion_cross_matrix(x, out):
    """``out`` such that ``out @ y = x × y`` (the Lie bracket ``[x, y]`` of twists ``(v, w)``)."""
    v0, v1, v2, w0, w1, w2 = x[0], x[1], x[2], x[3], x[4], x[5]
    out[:, :] = 0.0
    for blk in (0, 3):   # w^ on both diagonal blocks
        out[blk + 0, blk + 1], out[blk + 0, blk + 2] = -w2, w1
        out[blk + 1, blk + 0], out[blk + 1, blk + 2] = w2, -w0
        out[blk + 2, blk + 0], out[blk + 2, blk + 1] = -w1, w0
    out[0, 4], out[0, 5] = -v2, v1   # v^ in the upper right block
    out[1, 3], out[1, 5] = v2, -v0
    out[2, 3], out[2, 4] = -v1, v0


@njit(cache=True, nogil=True)
def _composite_velocity_coupling(model, data, Ib, has_mass, P):
    """``P_f = Σ_(g below f) I_g (V_g ×)`` for every frame (composite, like ``Ic``)."""
    X = np.empty((6, 6))
    for f in range(model.nf):
        if has_mass[f]:
            _motion_cross_matrix(data.V[f], X)
            for i in range(6):        # 6x6 product by hand: BLAS call overhead dominates here
                for k in range(6):
                    s = 0.0
                    for l in range(6):
                        s += Ib[f, i, l] * X[l, k]
                    P[f, i, k] = s
        else:
            P[f, :, :] = 0.0
    for f in range(model.nf - 1, -1, -1):
        par = model.frame_parent[f]
        if par >= 0:
            for i in range(6):
                for k in range(6):
                    P[par, i, k] += P[f, i, k]


@njit(cache=True, nogil=True)
def inverse_dynamics_derivatives(model, data, Ib, has_mass, Ap, F, dtau_dq, dtau_dv):
    """``dtau_dq[j, a] = dtau_j/dq_a`` and ``dtau_dv[j, a] = dtau_j/d dq_a`` at fixed ``ddq``,
    for the state of the last :func:`newton_euler` pass (its ``Ap`` and composite ``F``; the
    composites ``Ic, Hc`` of :func:`core.kinematics.composites`).

    With the composites ``Ic_j``, ``Hc_j`` and ``P_j = Σ I_f (V_f ×)`` over the subtree of
    joint ``j`` (note ``Σ V_f ×* I_f = -P_jᵀ``), and per joint ``a``: ``c1 = S_a × Ap_a``,
    ``c2 = S_a × Vp_a``, ``c3 = c2 × Vp_a``, summing the per-body derivatives of the module
    docstring over a subtree gives, for ``j`` at or below ``a``
    (the moving-screw term ``(S_a × S_j)·F_j`` cancels ``S_j·(S_a ×* F_j)``)::

        dtau_j/dq_a   = (Ic_j S_j)·(c3 - c1) + G_j·c2
        dtau_j/d dq_a = -G_j·S_a - 2 (Ic_j S_j)·c2,    G_j = P_jᵀ S_j + P_j S_j + S_j ×* Hc_j

    and for ``j`` strictly above ``a``: ``S_j·dF_a`` with the subtree wrench derivatives
    ``dF_a = S_a ×* F_a - Ic_a (c1 - c3) + (P_a + P_aᵀ) c2 - c2 ×* Hc_a`` and
    ``dFv_a = -(P_a + P_aᵀ) S_a - 2 Ic_a c2 + S_a ×* Hc_a``. Four dot products per comparable
    pair: O(n d).
    """
    nf, n = model.nf, model.nq
    dtau_dq[:, :] = 0.0
    dtau_dv[:, :] = 0.0
    P = np.empty((nf, 6, 6))
    _composite_velocity_coupling(model, data, Ib, has_mass, P)
    IS, G = np.zeros((n, 6)), np.zeros((n, 6))          # per joint: Ic_j S_j and G_j
    c1, c2, c3 = np.zeros((n, 6)), np.zeros((n, 6)), np.zeros((n, 6))
    dF, dFv = np.zeros((n, 6)), np.zeros((n, 6))        # subtree wrench derivatives per joint
    t1, t2, t3 = np.empty(6), np.empty(6), np.empty(6)
    for j in range(n):
        fj = model.joint_frame[j]
        if fj < 0:
            continue
        Sj, Icj, Pj, Hcj = data.S[j], data.Ic[fj], P[fj], data.Hc[fj]
        Vpj = data.Vp[j]
        matvec6(Icj, Sj, IS[j])
        cross_force(Sj, Hcj, t1)
        for i in range(6):
            s = t1[i]
            for k in range(6):
                s += Pj[k, i] * Sj[k] + Pj[i, k] * Sj[k]
            G[j, i] = s
        bracket(Sj, Ap[j], c1[j])
        bracket(Sj, Vpj, c2[j])
        bracket(c2[j], Vpj, c3[j])
        # dF_j = S_j ×* F_j - Ic_j (c1 - c3) + (P_j + P_jᵀ) c2 - c2 ×* Hc_j
        cross_force(Sj, F[fj], dF[j])
        for i in range(6):
            t2[i] = c1[j, i] - c3[j, i]
        matvec6(Icj, t2, t1)
        cross_force(c2[j], Hcj, t3)
        for i in range(6):
            s = 0.0
            for k in range(6):
                s += (Pj[i, k] + Pj[k, i]) * c2[j, k]
            dF[j, i] += s - t1[i] - t3[i]
        # dFv_j = -(P_j + P_jᵀ) S_j - 2 Ic_j c2 + S_j ×* Hc_j
        matvec6(Icj, c2[j], t1)
        cross_force(Sj, Hcj, t3)
        for i in range(6):
            s = 0.0
            for k in range(6):
                s += (Pj[i, k] + Pj[k, i]) * Sj[k]
            dFv[j, i] = t3[i] - s - 2.0 * t1[i]
    for j in range(n):
        if model.joint_frame[j] < 0:
            continue
        for ia in range(model.anc_ptr[j], model.anc_ptr[j + 1]):
            a = model.anc_idx[ia]
            for i in range(6):
                t1[i] = c3[a, i] - c1[a, i]
            dtau_dq[j, a] = dot6(IS[j], t1) + dot6(G[j], c2[a])
            dtau_dv[j, a] = -dot6(G[j], data.S[a]) - 2.0 * dot6(IS[j], c2[a])
            if a != j:
                dtau_dq[a, j] = dot6(data.S[a], dF[j])
                dtau_dv[a, j] = dot6(data.S[a], dFv[j])
