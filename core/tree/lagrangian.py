"""Exact derivatives of the Lagrangian L(q, v) = KE - V up to third order, by tree recursion.

Index order of the returned arrays (``v`` stands for the velocity slot ``dq``):

* ``Lq[a] = dL/dq_a``, ``Lv[i] = dL/dv_i``
* ``Lqq[a, b]``, ``Lqv[a, i] = d2L/dq_a dv_i``, ``Lvv[i, j]`` (the mass matrix)
* ``Lqqq[a, b, c]``, ``Lqqv[a, b, i]``, ``Lqvv[a, i, j]`` (``Lvvv`` is zero for L of this form)
* directional: ``dLqq = Lqqq.wq + Lqqv.wv`` and likewise ``dLqv``, ``dLvv`` (contraction on the
  last slot) — the derivative of the Hessian along the direction ``(wq, wv)``.

How: body-frame Jacobian columns obey ``dJ_i/dq_a = [J_i, J_a]`` for ``i`` strictly above ``a``,
so for one body every derivative is a nested bracket of columns (e.g. ``d2V/dq_a dq_b =
[[V_<a, J_a], J_b]`` with ``V_<a`` the velocity contributed above ``a``). Mapping the columns to
world screws, every per-body term is an inner product ``x . I_b y`` or ``x . I_b V_b`` whose
other factors depend only on the joints of the index tuple, so the sum over all bodies below the
deepest joint ``m`` of the tuple is that term with the composite inertia ``Ic_m`` or composite
momentum ``Hc_m``. Each entry costs O(1); only mutually comparable tuples (all on one root-to-leaf
path) are non-zero and visited: O(n^2) pairs and O(n^3) triples for a chain, far fewer for a tree.
Gravity acts on composite mass and first moment the same way.

The directional derivatives need no triples: they are the rates of the Hessian's pair formulas
along ``(wq, wv)``, whose factors (screws, composite inertias and momenta, first moments) move
as the frames do under the twist ``W_f = sum wq_j S_j`` (:func:`_hessian_rate`): O(n^2) for a
chain, about a Hessian's cost, where the triples cost O(n^3).
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.base.records import record_type, set_constructor
from core.tree.jets import (
    PAIR_SQUARED_DISTANCE,
    compose_scalar,
    jets_max_joints,
    joint_union,
    pair_jet,
    pair_work,
    scalar_jets,
)
from core.tree.kinematics import (
    body_com,
    body_inertias,
    bracket,
    composites,
    cross_force,
    dot6,
    forward_kinematics,
    matvec6,
    omega_cross,
    spatial_inertia,
    subtree_sums,
)

DERIV_FIELDS = ["L", "Lq", "Lv", "Lqq", "Lqv", "Lvv", "Lqqq", "Lqqv", "Lqvv", "dLqq", "dLqv", "dLvv"]
LagrangianDerivsType, LagrangianDerivs = record_type("LagrangianDerivs", DERIV_FIELDS, __name__)


@njit(cache=True)
def _new_lagrangianderivs(*fields):
    return LagrangianDerivs(*fields)


set_constructor(LagrangianDerivs, _new_lagrangianderivs)


def create_derivs(nq: int, third_order: bool = False):
    n3 = (nq, nq, nq) if third_order else (0, 0, 0)
    return LagrangianDerivs(np.zeros(1), np.zeros(nq), np.zeros(nq),
                            np.zeros((nq, nq)), np.zeros((nq, nq)), np.zeros((nq, nq)),
                            np.zeros(n3), np.zeros(n3), np.zeros(n3),
                            np.zeros((nq, nq)), np.zeros((nq, nq)), np.zeros((nq, nq)))


@njit(cache=True, nogil=True)
def copy_derivs(d):
    """Fresh derivative arrays with the same shapes (for parallel evaluations)."""
    return LagrangianDerivs(d.L.copy(), d.Lq.copy(), d.Lv.copy(), d.Lqq.copy(), d.Lqv.copy(),
                            d.Lvv.copy(), d.Lqqq.copy(), d.Lqqv.copy(), d.Lqvv.copy(),
                            d.dLqq.copy(), d.dLqv.copy(), d.dLvv.copy())


# ------------------------------------------------------------------------------ preparation
@njit(cache=True, nogil=True)
def prepare(model, data, q, dq):
    """Forward kinematics, composites and ``D[a] = [Vp_a, S_a]`` (dV/dq_a for any body below
    a): all that L, its gradient and its Hessian need. O(n); the third order builds its own
    pair tables (:func:`_pair_tables`)."""
    forward_kinematics(model, q, dq, data)
    composites(model, data)
    S, D, Vp, joint_frame = data.S, data.D, data.Vp, model.joint_frame
    for b in range(model.nj):
        if joint_frame[b] >= 0:
            bracket(Vp[b], S[b], D[b])


@njit(cache=True, nogil=True)
def _pair_tables(model, data):
    """Per-joint-pair tables for the third order (after :func:`prepare`): ``DD[a, b] = [D_a, S_b]``
    for a <= b (d2V/dq_a dq_b), ``dJ[i, a] = [S_i, S_a]`` for i above a (zero otherwise),
    ``IcS[m, j] = Ic_m S_j`` and ``IcD[m, j] = Ic_m D_j`` for j at or above m."""
    # record fields read into locals once (a field read inside a loop costs reference counting)
    S, D, DD, dJ, Ic, IcS, IcD = data.S, data.D, data.DD, data.dJ, data.Ic, data.IcS, data.IcD
    if DD.shape[0] < model.nj:
        raise ValueError("third order: this scratch has no joint-pair tables (Workspace.get(third_order=True))")
    joint_frame, anc_ptr, anc_idx = model.joint_frame, model.anc_ptr, model.anc_idx
    for b in range(model.nj):
        fb = joint_frame[b]
        if fb < 0:
            continue
        Icb = Ic[fb]
        for ia in range(anc_ptr[b], anc_ptr[b + 1]):
            a = anc_idx[ia]
            bracket(D[a], S[b], DD[a, b])
            bracket(S[a], S[b], dJ[a, b])  # zero when a == b
            if a != b:
                dJ[b, a, :] = 0.0
            matvec6(Icb, S[a], IcS[b, a])
            matvec6(Icb, D[a], IcD[b, a])


@njit(cache=True, nogil=True, inline="always")
def _gravity_moment(data, f, x, out):
    """Composite of m (w x p + v) contracted as a world vector: S * (first moment) (3)."""
    mp, mc = data.mp[f], data.mc[f]
    out[0] = x[4] * mp[2] - x[5] * mp[1] + mc * x[0]
    out[1] = x[5] * mp[0] - x[3] * mp[2] + mc * x[1]
    out[2] = x[3] * mp[1] - x[4] * mp[0] + mc * x[2]


# ------------------------------------------------------------------------------ springs on variables
@njit(cache=True, nogil=True, inline="always")
def _config_spring_jet(model, s, q):
    """``(V, dV, d2V, d3V)`` of the spring ``s`` on a variable at the joint coordinates ``q``:
    with ``d = q[spring_q[s]] - spring_rest[s]`` and ``c = spring_coef[s]``,
    ``V = sum_k c_k d^(k+1) / (k+1)``, so ``dV = sum_k c_k d^k`` is minus the spring's force
    (Horner, the derivatives carried along; a linear spring [0, k] gives k/2 d^2, k d, k, 0)."""
    coef = model.spring_coef
    d = q[model.spring_q[s]] - model.spring_rest[s]
    deg = coef.shape[1] - 1
    c = coef[s, deg]
    v, p, p1, p2 = c / (deg + 1), c, 0.0, 0.0     # p2 carries P''/2 of P = dV
    for k in range(deg - 1, -1, -1):
        c = coef[s, k]
        v = v * d + c / (k + 1)
        p2 = p2 * d + p1
        p1 = p1 * d + p
        p = p * d + c
    return v * d, p, p1, 2.0 * p2


# ------------------------------------------------------------------------------ value..hessian
@njit(cache=True, nogil=True)
def _lagrangian_value(model, data, q):
    """L = KE - V for the prepared state (gravity, springs on variables and between frames)."""
    Ib = np.empty((6, 6))
    tmp = np.empty(6)
    pc = np.empty(3)
    g = data.gravity
    L = 0.0
    for f in range(model.nf):
        m = model.frame_mass[f]
        body_com(model.frame_com, data.R, data.p, f, pc)   # V = -m g . (p + R c)
        L += m * (g[0] * pc[0] + g[1] * pc[1] + g[2] * pc[2])
        if m > 0.0 or model.frame_inertia[f].any():
            spatial_inertia(m, model.frame_inertia[f], data.R[f], pc, Ib)
            matvec6(Ib, data.V[f], tmp)
            L += 0.5 * dot6(data.V[f], tmp)
    armature, qd = model.armature, data.dq
    for j in range(armature.shape[0]):
        L += 0.5 * armature[j] * qd[j] * qd[j]
    for s in range(model.spring_q.shape[0]):
        L -= _config_spring_jet(model, s, q)[0]
    return L


@njit(cache=True, nogil=True)
def gradient_hessian(model, data, q, order, out, value):
    """Fill ``out.L`` (order 0), ``Lq, Lv`` (order >= 1), ``Lqq, Lqv, Lvv`` (order >= 2)
    (after :func:`prepare`); without ``value`` ``out.L`` is left meaningless (the DEL solve
    and its linearizations need only the derivatives, and L costs a gradient's time)."""
    out.L[0] = _lagrangian_value(model, data, q) if value else 0.0
    if order >= 1:
        _tree_gradient_hessian(model, data, order, out)
        for s in range(model.spring_q.shape[0]):
            i = model.spring_q[s]
            _, v1, v2, _ = _config_spring_jet(model, s, q)
            out.Lq[i] -= v1
            if order >= 2:
                out.Lqq[i, i] -= v2
    _frame_springs(model, data, min(order, 2), True, out.Lq, out.L, out.Lq, out.Lqq, out.Lqqq, out.dLqq)


@njit(cache=True, nogil=True)
def _tree_gradient_hessian(model, data, order, out):
    """Gradient and Hessian of the kinetic energy and gravity over comparable joint pairs."""
    S, D, Hc, Ic = data.S, data.D, data.Hc, data.Ic
    joint_frame, anc_ptr, anc_idx = model.joint_frame, model.anc_ptr, model.anc_idx
    Lq, Lv, Lqq, Lqv, Lvv = out.Lq, out.Lv, out.Lqq, out.Lqv, out.Lvv
    g = data.gravity
    t3 = np.empty(3)
    Lq[:] = 0.0
    Lv[:] = 0.0
    for a in range(model.nj):
        fa = joint_frame[a]
        if fa < 0:
            continue
        Lv[a] = dot6(S[a], Hc[fa])
        _gravity_moment(data, fa, S[a], t3)
        Lq[a] = dot6(D[a], Hc[fa]) + g[0] * t3[0] + g[1] * t3[1] + g[2] * t3[2]
    armature = model.armature
    for a in range(model.nj):         # rotor inertia: KE += armature dq^2 / 2
        Lv[a] += armature[a] * data.dq[a]
    if order < 2:
        return
    Lqq[:, :] = 0.0
    Lqv[:, :] = 0.0
    Lvv[:, :] = 0.0
    # Per pair a at or above b, with Ic_b, Hc_b the composites of b's subtree, IS = Ic_b S_b,
    # ID = Ic_b D_b and w = S_b x* Hc_b (so [x, S_b] . Hc_b = x . w):
    #   Lvv[a, b] = S_a . IS,   Lqq[a, b] = D_a . (ID + w) + g . (w_a x t3),
    #   Lqv[b, a] = S_a . (ID + w),   Lqv[a, b] = D_a . IS   (a != b)
    IS, IDw, SxH = np.empty(6), np.empty(6), np.empty(6)
    g0, g1, g2 = g[0], g[1], g[2]
    for b in range(model.nj):
        fb = joint_frame[b]
        if fb < 0:
            continue
        matvec6(Ic[fb], S[b], IS)
        matvec6(Ic[fb], D[b], IDw)
        cross_force(S[b], Hc[fb], SxH)
        for i in range(6):
            IDw[i] += SxH[i]
        _gravity_moment(data, fb, S[b], t3)
        # b's vectors in locals (registers) for the O(n d) pair loop
        i0, i1, i2, i3, i4, i5 = IS[0], IS[1], IS[2], IS[3], IS[4], IS[5]
        w0, w1, w2, w3, w4, w5 = IDw[0], IDw[1], IDw[2], IDw[3], IDw[4], IDw[5]
        # gravity term g . (w_a x t3) = w_a . (t3 x g)
        c0 = t3[1] * g2 - t3[2] * g1
        c1 = t3[2] * g0 - t3[0] * g2
        c2 = t3[0] * g1 - t3[1] * g0
        for ia in range(anc_ptr[b], anc_ptr[b + 1]):
            a = anc_idx[ia]
            s0, s1, s2, s3, s4, s5 = S[a, 0], S[a, 1], S[a, 2], S[a, 3], S[a, 4], S[a, 5]
            d0, d1, d2, d3, d4, d5 = D[a, 0], D[a, 1], D[a, 2], D[a, 3], D[a, 4], D[a, 5]
            mvv = (s0 * i0 + s1 * i1 + s2 * i2) + (s3 * i3 + s4 * i4 + s5 * i5)
            mqq = ((d0 * w0 + d1 * w1 + d2 * w2) + (d3 * w3 + d4 * w4 + d5 * w5)
                   + (s3 * c0 + s4 * c1 + s5 * c2))
            Lvv[a, b] = mvv
            Lvv[b, a] = mvv
            Lqq[a, b] = mqq
            Lqq[b, a] = mqq
            Lqv[b, a] = (s0 * w0 + s1 * w1 + s2 * w2) + (s3 * w3 + s4 * w4 + s5 * w5)
            if a != b:
                Lqv[a, b] = (d0 * i0 + d1 * i1 + d2 * i2) + (d3 * i3 + d4 * i4 + d5 * i5)
    for a in range(model.nj):
        Lvv[a, a] += armature[a]


@njit(cache=True, nogil=True)
def _frame_springs(model, data, order, full, wq, L, Lq, Lqq, Lqqq, dLqq):
    """Subtract V = k/2 (|p1 - p2| - rest)^2 of every frame spring.

    ``order`` 0..2 updates ``L, Lq, Lqq``; ``order`` 3 updates ``Lqqq`` (``full``) or the
    directional ``dLqq`` along ``wq`` (arrays shaped like the fields of LagrangianDerivs).
    """
    ns = model.fspring_f1.shape[0]
    if ns == 0:
        return
    pos = -np.ones(model.nj, np.int64)
    idx = np.empty(model.nj, np.int64)
    frames = np.empty(2, np.int64)
    jet_order = 3 if order == 3 else max(order, 1)
    kmax = jets_max_joints(model, model.fspring_f1, model.fspring_f2)
    H1, H2, H3 = scalar_jets(kmax, jet_order)   # (a spring's jet uses the leading k entries)
    work = pair_work(kmax, jet_order)
    for s in range(ns):
        frames[0], frames[1] = model.fspring_f1[s], model.fspring_f2[s]
        k = joint_union(model, frames, pos, idx)
        sq = pair_jet(model, data, PAIR_SQUARED_DISTANCE, frames[0], frames[1], 0, jet_order,
                      pos, k, H1, H2, H3, work)
        r = np.sqrt(sq)
        stiff, rest = model.fspring_k[s], model.fspring_rest[s]
        if r < 1e-12:
            raise ValueError("frame spring with coincident endpoints: its potential is not differentiable")
        # V(s) = k/2 (sqrt(s) - rest)^2 as a function of s = |p1 - p2|^2
        v1 = 0.5 * stiff * (1.0 - rest / r)
        v2 = 0.25 * stiff * rest / r ** 3
        v3 = -0.375 * stiff * rest / r ** 5
        compose_scalar(k, jet_order, v1, v2, v3, H1, H2, H3)
        if order < 3:
            L[0] -= 0.5 * stiff * (r - rest) ** 2
            if order >= 1:
                for a in range(k):
                    Lq[idx[a]] -= H1[a]
            if order >= 2:
                for a in range(k):
                    for b in range(k):
                        Lqq[idx[a], idx[b]] -= H2[a, b]
        else:
            for a in range(k):
                for b in range(k):
                    for c in range(k):
                        if full:
                            Lqqq[idx[a], idx[b], idx[c]] -= H3[a, b, c]
                        else:
                            dLqq[idx[a], idx[b]] -= H3[a, b, c] * wq[idx[c]]
        pos[idx[:k]] = -1


@njit(cache=True, nogil=True)
def spring_potential_derivatives(model, data, q, grad, hess):
    """Gradient and Hessian of the spring potential alone (springs on variables and between
    frames): ``grad = dV_s/dq``, ``hess = d2V_s/dq2`` (needs forward kinematics); an empty
    ``hess`` (0 x 0) asks for the gradient only."""
    n = model.nj
    hessian = hess.shape[0] > 0
    grad[:] = 0.0
    if hessian:
        hess[:, :] = 0.0
    for s in range(model.spring_q.shape[0]):
        i = model.spring_q[s]
        _, v1, v2, _ = _config_spring_jet(model, s, q)
        grad[i] += v1
        if hessian:
            hess[i, i] += v2
    if model.fspring_f1.shape[0] > 0:
        # _frame_springs subtracts V from L: collect -V's derivatives, then flip the sign
        L0, Lq, Lqq = np.zeros(1), np.zeros(n), np.zeros((n, n) if hessian else (0, 0))
        empty3 = np.empty((0, 0, 0))
        _frame_springs(model, data, 2 if hessian else 1, True, Lq, L0, Lq, Lqq, empty3, Lqq)
        grad -= Lq
        if hessian:
            hess -= Lqq


# ------------------------------------------------------------------------------ third order
@njit(cache=True, nogil=True)
def _emit_qqq(val, a, b, c, Lqqq):
    # stores: a repeated index only repeats a store
    Lqqq[a, b, c] = Lqqq[a, c, b] = Lqqq[b, a, c] = val
    Lqqq[b, c, a] = Lqqq[c, a, b] = Lqqq[c, b, a] = val


@njit(cache=True, nogil=True)
def _emit_qqv(val, lo, hi, i, Lqqv):
    Lqqv[lo, hi, i] = val
    Lqqv[hi, lo, i] = val


@njit(cache=True, nogil=True)
def _emit_qvv(val, a, i, j, Lqvv):
    Lqvv[a, i, j] = val
    Lqvv[a, j, i] = val


@njit(cache=True, nogil=True)
def _moving_frames(model, data, wq, wv, Ib, has_mass, dIc, dHc, dmp, Wpre, dVp):
    """Rates along ``(wq, wv)`` of what the Hessian of L is made of (after :func:`prepare`).

    Moving the joints by ``wq`` moves frame ``f`` by the twist ``W_f = sum wq_j S_j`` over the
    joints on its path, so ``dS_a = [W_<a, S_a]`` (``Wpre[a] = W_<a``, the joints strictly
    above a), a body's inertia by ``dI = -(ad_W^T I + I ad_W)`` and its momentum ``h = I V`` by
    ``W x* h + I (dV - [W, V])``, ``dV_f = sum (wv_j S_j + dq_j dS_j)`` (``dVp[a]``: that sum
    strictly above a), its first moment ``m c`` by ``m (W_v + W_w x c)``. Summed over each
    subtree: ``dIc``, ``dHc``, ``dmp`` per frame."""
    S, V, R, p, frame_com = data.S, data.V, data.R, data.p, model.frame_com
    frame_parent, frame_qindex, frame_mass, dq = model.frame_parent, model.frame_qindex, model.frame_mass, data.dq
    nf = model.nf
    W, dV = np.empty((nf, 6)), np.empty((nf, 6))
    t, u, h, pc = np.empty(6), np.empty(6), np.empty(6), np.empty(3)
    body_inertias(model, data, Ib, has_mass)
    for f in range(nf):
        par = frame_parent[f]
        for i in range(6):
            W[f, i] = W[par, i] if par >= 0 else 0.0
            dV[f, i] = dV[par, i] if par >= 0 else 0.0
        j = frame_qindex[f]
        if j >= 0:
            bracket(W[f], S[j], t)                 # dS_j, with W_f still W_<j
            for i in range(6):
                Wpre[j, i] = W[f, i]
                dVp[j, i] = dV[f, i]
                dV[f, i] += wv[j] * S[j, i] + dq[j] * t[i]
                W[f, i] += wq[j] * S[j, i]
        m = frame_mass[f]
        body_com(frame_com, R, p, f, pc)
        Wf = W[f]
        dmp[f, 0] = m * (Wf[0] + Wf[4] * pc[2] - Wf[5] * pc[1])
        dmp[f, 1] = m * (Wf[1] + Wf[5] * pc[0] - Wf[3] * pc[2])
        dmp[f, 2] = m * (Wf[2] + Wf[3] * pc[1] - Wf[4] * pc[0])
        if not has_mass[f]:
            dIc[f, :, :] = 0.0
            dHc[f, :] = 0.0
            continue
        I = Ib[f]
        for c in range(6):          # dI = -(M + M^T), M = I ad_W: column c of ad_W is [W, e_c]
            for i in range(6):
                t[i] = 0.0
            t[c] = 1.0
            bracket(Wf, t, u)
            for i in range(6):
                s_ = 0.0
                for k in range(6):
                    s_ += I[i, k] * u[k]
                dIc[f, i, c] = s_
        for i in range(6):
            for c in range(i, 6):
                x = -(dIc[f, i, c] + dIc[f, c, i])
                dIc[f, i, c] = x
                dIc[f, c, i] = x
        matvec6(I, V[f], h)
        cross_force(Wf, h, t)
        bracket(Wf, V[f], u)
        for i in range(6):
            u[i] = dV[f, i] - u[i]
        matvec6(I, u, h)
        for i in range(6):
            dHc[f, i] = t[i] + h[i]
    subtree_sums(frame_parent, dIc, dHc, dmp)


@njit(cache=True, nogil=True)
def _hessian_rate(model, data, wq, wv, dLqq, dLqv, dLvv):
    """The derivative of the Hessian blocks of L along ``(wq, wv)`` (after :func:`prepare`):
    ``dLqq = Lqqq.wq + Lqqv.wv`` etc. (see the module docstring), springs excepted, by
    differentiating :func:`_tree_gradient_hessian`'s pair formulas along the direction (the
    rates of their factors from :func:`_moving_frames`): O(pairs), where the triples of
    :func:`third_order` cost O(n^3) on a chain."""
    nf, nj = model.nf, model.nj
    S, D, Vp, Ic, Hc, mp, mc = data.S, data.D, data.Vp, data.Ic, data.Hc, data.mp, data.mc
    joint_frame, anc_ptr, anc_idx = model.joint_frame, model.anc_ptr, model.anc_idx
    g = data.gravity
    Ib, has_mass = np.empty((nf, 6, 6)), np.empty(nf, np.bool_)
    dIc, dHc, dmp = np.empty((nf, 6, 6)), np.empty((nf, 6)), np.empty((nf, 3))
    Wpre, dVp = np.zeros((nj, 6)), np.zeros((nj, 6))
    _moving_frames(model, data, wq, wv, Ib, has_mass, dIc, dHc, dmp, Wpre, dVp)
    dS, dD = np.zeros((nj, 6)), np.zeros((nj, 6))
    t, u = np.empty(6), np.empty(6)
    for a in range(nj):
        if joint_frame[a] < 0:
            continue
        bracket(Wpre[a], S[a], dS[a])
        bracket(dVp[a], S[a], t)
        bracket(Vp[a], dS[a], u)
        for i in range(6):
            dD[a, i] = t[i] + u[i]
    dLqq[:, :] = 0.0
    dLqv[:, :] = 0.0
    dLvv[:, :] = 0.0
    IS, dIS, IDw, dIDw = np.empty(6), np.empty(6), np.empty(6), np.empty(6)
    t3, dt3 = np.empty(3), np.empty(3)
    for b in range(nj):
        fb = joint_frame[b]
        if fb < 0:
            continue
        Sb, dSb = S[b], dS[b]
        # IS = Ic S_b, IDw = Ic D_b + S_b x* Hc (their rates by the product rule)
        matvec6(Ic[fb], Sb, IS)
        matvec6(dIc[fb], Sb, t)
        matvec6(Ic[fb], dSb, u)
        for i in range(6):
            dIS[i] = t[i] + u[i]
        matvec6(Ic[fb], D[b], IDw)
        cross_force(Sb, Hc[fb], t)
        for i in range(6):
            IDw[i] += t[i]
        matvec6(dIc[fb], D[b], dIDw)
        matvec6(Ic[fb], dD[b], t)
        for i in range(6):
            dIDw[i] += t[i]
        cross_force(dSb, Hc[fb], t)
        cross_force(Sb, dHc[fb], u)
        for i in range(6):
            dIDw[i] += t[i] + u[i]
        # gravity: t3 = w_b x mp + mc v_b, c = t3 x g
        _gravity_moment(data, fb, Sb, t3)
        mpb, dmpb, m = mp[fb], dmp[fb], mc[fb]
        dt3[0] = dSb[4] * mpb[2] - dSb[5] * mpb[1] + Sb[4] * dmpb[2] - Sb[5] * dmpb[1] + m * dSb[0]
        dt3[1] = dSb[5] * mpb[0] - dSb[3] * mpb[2] + Sb[5] * dmpb[0] - Sb[3] * dmpb[2] + m * dSb[1]
        dt3[2] = dSb[3] * mpb[1] - dSb[4] * mpb[0] + Sb[3] * dmpb[1] - Sb[4] * dmpb[0] + m * dSb[2]
        c0, c1, c2 = t3[1] * g[2] - t3[2] * g[1], t3[2] * g[0] - t3[0] * g[2], t3[0] * g[1] - t3[1] * g[0]
        e0, e1, e2 = dt3[1] * g[2] - dt3[2] * g[1], dt3[2] * g[0] - dt3[0] * g[2], dt3[0] * g[1] - dt3[1] * g[0]
        for ia in range(anc_ptr[b], anc_ptr[b + 1]):
            a = anc_idx[ia]
            Sa, dSa, Da, dDa = S[a], dS[a], D[a], dD[a]
            vv = dot6(dSa, IS) + dot6(Sa, dIS)
            qq = (dot6(dDa, IDw) + dot6(Da, dIDw) + dSa[3] * c0 + dSa[4] * c1 + dSa[5] * c2
                  + Sa[3] * e0 + Sa[4] * e1 + Sa[5] * e2)
            dLvv[a, b] = vv
            dLvv[b, a] = vv
            dLqq[a, b] = qq
            dLqq[b, a] = qq
            dLqv[b, a] = dot6(dSa, IDw) + dot6(Sa, dIDw)
            if a != b:
                dLqv[a, b] = dot6(dDa, IS) + dot6(Da, dIS)


@njit(cache=True, nogil=True)
def third_order(model, data, q, full, wq, wv, out):
    """Third derivatives of L (after :func:`prepare` at ``q``), springs included.

    ``full``: the tensors ``Lqqq, Lqqv, Lqvv`` over all comparable joint triples (:func:`_triples`;
    O(n^3) entries on a chain); otherwise the directional derivatives ``dLqq, dLqv, dLvv`` along
    ``(wq, wv)`` without forming them (:func:`_hessian_rate`, O(pairs)).
    """
    if full:
        _triples(model, data, out.Lqqq, out.Lqqv, out.Lqvv)
    else:
        _hessian_rate(model, data, wq, wv, out.dLqq, out.dLqv, out.dLvv)
    for s in range(model.spring_q.shape[0]):      # (after the tree's terms: they store, not add)
        i = model.spring_q[s]
        v3 = _config_spring_jet(model, s, q)[3]
        if full:
            out.Lqqq[i, i, i] -= v3
        else:
            out.dLqq[i, i] -= v3 * wq[i]
    _frame_springs(model, data, 3, full, wq, out.L, out.Lq, out.Lqq, out.Lqqq, out.dLqq)


@njit(cache=True, nogil=True)
def _triples(model, data, Lqqq, Lqqv, Lqvv):
    """The tree's third derivatives of L over all comparable joint triples a <= b <= c.

    Every term ``[X, S_y].H_c + X.Ic_c D_y`` (X a pair table entry, y one of the triple) is
    ``X . V_y`` with ``V_y = S_y x* H_c + Ic_c D_y`` (``[X, Y].H = X.(Y x* H)``), formed once
    per (c, y) before the triple loop instead of a bracket per triple.
    """
    _pair_tables(model, data)
    S, DD, dJ, IcS, IcD, Hcs = data.S, data.DD, data.dJ, data.IcS, data.IcD, data.Hc
    joint_frame, anc_ptr, anc_idx = model.joint_frame, model.anc_ptr, model.anc_idx
    g = data.gravity
    Lqqq[:, :, :] = 0.0
    Lqqv[:, :, :] = 0.0
    Lqvv[:, :, :] = 0.0
    V = np.empty((model.nj, 6))
    t3 = np.empty(3)
    u3 = np.empty(3)
    v3 = np.empty(3)
    for c in range(model.nj):
        fc = joint_frame[c]
        if fc < 0:
            continue
        Hc = Hcs[fc]
        _gravity_moment(data, fc, S[c], t3)
        lo, hi = anc_ptr[c], anc_ptr[c + 1]
        for iy in range(lo, hi):
            y = anc_idx[iy]
            cross_force(S[y], Hc, V[y])
            for k in range(6):
                V[y, k] += IcD[c, y, k]
        for ib in range(lo, hi):
            b = anc_idx[ib]
            omega_cross(S[b], t3, u3)
            for ia in range(lo, ib + 1):
                a = anc_idx[ia]
                # Lqqq: DDD.Hc + DD(a,b).Ic D_c (together DD(a,b).V_c) + DD(a,c).Ic D_b
                # + DD(b,c).Ic D_a + gravity
                omega_cross(S[a], u3, v3)
                val = (dot6(DD[a, b], V[c]) + dot6(DD[a, c], IcD[c, b]) + dot6(DD[b, c], IcD[c, a])
                       + g[0] * v3[0] + g[1] * v3[1] + g[2] * v3[2])
                _emit_qqq(val, a, b, c, Lqqq)
                # each distinct member of the triple as the velocity index i (Lqqv) and as
                # the position index (Lqvv), the other two as (x, y)
                _velocity_terms(a, b, c, c, dJ, DD, IcS, IcD, V, Lqqv, Lqvv)
                if b != a:
                    _velocity_terms(b, a, c, c, dJ, DD, IcS, IcD, V, Lqqv, Lqvv)
                if c != b:
                    _velocity_terms(c, a, b, c, dJ, DD, IcS, IcD, V, Lqqv, Lqvv)


@njit(cache=True, nogil=True, inline="always")
def _velocity_terms(i, x, y, c, dJ, DD, IcS, IcD, V, Lqqv, Lqvv):
    """Lqqv[x, y, i] = ddJ(i;x,y).Hc + dJ(i;x).Ic D_y + dJ(i;y).Ic D_x + Ic S_i . DD(x,y)
    (the first two: dJ(i;x) . V_y) and Lqvv[i, x, y] = dJ(x;i).Ic S_y + dJ(y;i).Ic S_x."""
    val = dot6(dJ[i, x], V[y]) + dot6(dJ[i, y], IcD[c, x]) + dot6(IcS[c, i], DD[x, y])
    _emit_qqv(val, x, y, i, Lqqv)
    val = dot6(dJ[x, i], IcS[c, y]) + dot6(dJ[y, i], IcS[c, x])
    _emit_qvv(val, i, x, y, Lqvv)


# ------------------------------------------------------------------------------ fourth order
@njit(cache=True, nogil=True)
def _rates(model, data, Ib, has_mass, dq, Ap, Dd, Icd, Hcd):
    """Rates along the velocity (``D_v = sum_c v_c d/dq_c`` at fixed ``v``, the time derivative
    at zero acceleration) of the world quantities the third order is made of: ``Ap[j] =
    D_v Vp_j`` (``D_v S_j = D_j``), ``Dd[j] = D_v D_j = [Ap_j, S_j] + [Vp_j, D_j]``, and the
    composites ``Icd[f] = sum (V_b x* I_b - I_b V_b x)`` and ``Hcd[f] = sum (V_b x* I_b V_b +
    I_b A_b)`` over the bodies ``b`` below ``f`` (``A_b = D_v V_b``)."""
    S, D, Vp, V = data.S, data.D, data.Vp, data.V
    frame_parent, frame_qindex, joint_frame = model.frame_parent, model.frame_qindex, model.joint_frame
    nf = model.nf
    A = np.zeros((nf, 6))
    e, t1, t2, t3 = np.zeros(6), np.empty(6), np.empty(6), np.empty(6)
    for f in range(nf):
        par = frame_parent[f]
        if par >= 0:
            for i in range(6):
                A[f, i] = A[par, i]
        j = frame_qindex[f]
        if j >= 0 and joint_frame[j] == f:
            for i in range(6):
                Ap[j, i] = A[f, i]
            bracket(Ap[j], S[j], t1)
            bracket(Vp[j], D[j], t2)
            for i in range(6):
                Dd[j, i] = t1[i] + t2[i]
            for i in range(6):      # V_f = Vp_j + S_j v_j: D_v V_f = Ap_j + D_j v_j
                A[f, i] += D[j, i] * dq[j]
    for f in range(nf):
        for i in range(6):
            Hcd[f, i] = 0.0
            for k in range(6):
                Icd[f, i, k] = 0.0
        if not has_mass[f]:
            continue
        Vf = V[f]
        matvec6(Ib[f], Vf, t1)
        cross_force(Vf, t1, t2)
        matvec6(Ib[f], A[f], t3)
        for i in range(6):
            Hcd[f, i] = t2[i] + t3[i]
        for k in range(6):      # column k: V x* (I e_k) - I [V, e_k]
            e[:] = 0.0
            e[k] = 1.0
            for i in range(6):
                t1[i] = Ib[f, i, k]
            cross_force(Vf, t1, t2)
            bracket(Vf, e, t1)
            matvec6(Ib[f], t1, t3)
            for i in range(6):
                Icd[f, i, k] = t2[i] - t3[i]
    for f in range(nf - 1, -1, -1):
        par = frame_parent[f]
        if par >= 0:
            for i in range(6):
                Hcd[par, i] += Hcd[f, i]
                for k in range(6):
                    Icd[par, i, k] += Icd[f, i, k]


@njit(cache=True, nogil=True)
def fourth_order(model, data, dq, T4, W):
    """The fourth derivatives of L that the continuous second-order linearization needs, as the
    rates along the velocity of the third-order tensors (``D_v = sum_c v_c d/dq_c``, ``v = dq``
    held fixed; after :func:`prepare` and :func:`third_order` with ``full`` at ``(q, dq)``):

    * ``T4[x, y, i] = D_v Lqqv[x, y, i] = sum_c d4L/dq_x dq_y dq_c dv_i v_c``
      (``d2/dq_x dq_y`` of the velocity-product force ``Lqv^T v``),
    * ``W[x, i, j] = D_v Lqvv[x, i, j] = sum_c d2M_ij/dq_x dq_c v_c``.

    Every third-order entry is a sum of inner products of world quantities (screws ``S``, their
    rates ``D``, composites ``Ic``, ``Hc``) over a comparable joint triple (see
    :func:`third_order`); its rate is the same sum with each factor replaced in turn by its rate
    (:func:`_rates`): ``D_v S_j = D_j``, ``D_v Ic = sum (V x* I - I V x)`` and ``D_v Hc =
    sum (V x* I V + I A)`` with ``A`` the bodies' accelerations at zero ``ddq``. O(n^3) for a
    chain, like the third order.
    """
    nj, nf = model.nj, model.nf
    S, D, DD, dJ, Ic, IcS, IcD, Hcs = data.S, data.D, data.DD, data.dJ, data.Ic, data.IcS, data.IcD, data.Hc
    if DD.shape[0] < nj:
        raise ValueError("fourth order: this scratch has no joint-pair tables (Workspace.get(third_order=True))")
    joint_frame, anc_ptr, anc_idx = model.joint_frame, model.anc_ptr, model.anc_idx
    Ib, has_mass = np.empty((nf, 6, 6)), np.empty(nf, np.bool_)
    body_inertias(model, data, Ib, has_mass)
    Ap, Dd = np.zeros((nj, 6)), np.zeros((nj, 6))
    Icd, Hcd = np.empty((nf, 6, 6)), np.empty((nf, 6))
    _rates(model, data, Ib, has_mass, dq, Ap, Dd, Icd, Hcd)
    # rates of the pair tables: dJd[i, a] = D_v [S_i, S_a] (i above a), DDd[a, b] = D_v [D_a, S_b]
    dJd, DDd = np.zeros((nj, nj, 6)), np.zeros((nj, nj, 6))
    t1, t2 = np.empty(6), np.empty(6)
    for b in range(nj):
        if joint_frame[b] < 0:
            continue
        for ia in range(anc_ptr[b], anc_ptr[b + 1]):
            a = anc_idx[ia]
            bracket(Dd[a], S[b], t1)
            bracket(D[a], D[b], t2)
            for k in range(6):
                DDd[a, b, k] = t1[k] + t2[k]
            if a != b:
                bracket(D[a], S[b], t1)
                bracket(S[a], D[b], t2)
                for k in range(6):
                    dJd[a, b, k] = t1[k] + t2[k]
    T4[:, :, :] = 0.0
    W[:, :, :] = 0.0
    V, Vd, IcDd, IcSd = np.empty((nj, 6)), np.empty((nj, 6)), np.empty((nj, 6)), np.empty((nj, 6))
    t3 = np.empty(6)
    for c in range(nj):
        fc = joint_frame[c]
        if fc < 0:
            continue
        Hc, Icc, Icdc, Hcdc = Hcs[fc], Ic[fc], Icd[fc], Hcd[fc]
        lo, hi = anc_ptr[c], anc_ptr[c + 1]
        for iy in range(lo, hi):
            y = anc_idx[iy]
            cross_force(S[y], Hc, V[y])          # V_y = S_y x* Hc + Ic D_y
            matvec6(Icdc, D[y], t1)
            matvec6(Icc, Dd[y], t2)
            for k in range(6):
                V[y, k] += IcD[c, y, k]
                IcDd[y, k] = t1[k] + t2[k]
            cross_force(D[y], Hc, t1)
            cross_force(S[y], Hcdc, t2)
            for k in range(6):
                Vd[y, k] = t1[k] + t2[k] + IcDd[y, k]
            matvec6(Icdc, S[y], t1)
            matvec6(Icc, D[y], t3)
            for k in range(6):
                IcSd[y, k] = t1[k] + t3[k]
        for ib in range(lo, hi):
            b = anc_idx[ib]
            for ia in range(lo, ib + 1):
                a = anc_idx[ia]
                _velocity_rates(a, b, c, c, dJ, dJd, DD, DDd, IcS, IcSd, IcD, IcDd, V, Vd, T4, W)
                if b != a:
                    _velocity_rates(b, a, c, c, dJ, dJd, DD, DDd, IcS, IcSd, IcD, IcDd, V, Vd, T4, W)
                if c != b:
                    _velocity_rates(c, a, b, c, dJ, dJd, DD, DDd, IcS, IcSd, IcD, IcDd, V, Vd, T4, W)


@njit(cache=True, nogil=True, inline="always")
def _velocity_rates(i, x, y, c, dJ, dJd, DD, DDd, IcS, IcSd, IcD, IcDd, V, Vd, T4, W):
    """The rates of :func:`_velocity_terms`' two entries (product rule on each factor)."""
    val = (dot6(dJd[i, x], V[y]) + dot6(dJ[i, x], Vd[y]) + dot6(dJd[i, y], IcD[c, x])
           + dot6(dJ[i, y], IcDd[x]) + dot6(IcSd[i], DD[x, y]) + dot6(IcS[c, i], DDd[x, y]))
    _emit_qqv(val, x, y, i, T4)
    val = (dot6(dJd[x, i], IcS[c, y]) + dot6(dJ[x, i], IcSd[y]) + dot6(dJd[y, i], IcS[c, x])
           + dot6(dJ[y, i], IcSd[x]))
    _emit_qvv(val, i, x, y, W)
