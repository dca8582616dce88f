"""Exact derivatives of world points and of point-pair scalars, to fourth order: the jets that
constraints, springs and wrenches are written in (:mod:`core.tree.constraints`,
:mod:`core.tree.forces`, :mod:`core.tree.lagrangian`).

A world point ``x`` attached at or below joints ``a <= b <= c`` (ordered root to leaf, the joints
of :func:`joint_union`) has, with the world screws ``S`` of :mod:`core.tree.kinematics`
(``S * x = w x x + v``)::

    dx/dq_a = S_a * x,   d2x/dq_a dq_b = w_a x (S_b * x),   d3x/dq_a dq_b dq_c = w_a x (w_b x (S_c * x))

:func:`point_jet` evaluates them for one point; :func:`pair_jet` composes them into the jets of a
scalar of two points (:data:`PAIR_SQUARED_DISTANCE`, :data:`PAIR_PLANE`,
:data:`PAIR_AXIS_DIFFERENCE`, :data:`PAIR_DIRECTION`); :func:`point_rate` and :func:`pair_fourth` give the fourth-order
terms along a velocity. Each needs :func:`core.tree.kinematics.forward_kinematics` at ``q`` first.
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.tree.kinematics import omega_cross


# ------------------------------------------------------------------------------ point jets
@njit(cache=True, nogil=True, inline="always")
def _frame_point(data, f, local, out):
    """World coordinates of the point with coordinates ``local`` in frame ``f`` (-1 = world)."""
    if f < 0:
        out[:] = local
    else:
        R, p = data.R[f], data.p[f]
        for i in range(3):
            out[i] = R[i, 0] * local[0] + R[i, 1] * local[1] + R[i, 2] * local[2] + p[i]


@njit(cache=True, nogil=True)
def joint_union(model, frames, pos, idx):
    """Union of the ancestor joints of ``frames`` (-1 entries ignored), in variable order.

    Writes the joints into ``idx`` and their compact positions into ``pos`` (``pos`` must be all
    -1 on entry; reset it with ``pos[idx[:k]] = -1`` after use). Returns the count ``k``.
    """
    k = 0
    for f in frames:
        if f < 0 or model.frame_joint[f] < 0:
            continue
        j = model.frame_joint[f]
        for ia in range(model.anc_ptr[j], model.anc_ptr[j + 1]):
            a = model.anc_idx[ia]
            if pos[a] < 0:
                pos[a] = 0
                idx[k] = a
                k += 1
    idx[:k].sort()
    for m in range(k):
        pos[idx[m]] = m
    return k


@njit(cache=True, nogil=True)
def point_jet(model, data, f, local, order, pos, x, X1, X2, X3):
    """World point attached to frame ``f`` and its exact derivatives in ``q``, on compact indices.

    ``X1[pa] = dx/dq_a``, ``X2[pa, pb] = d2x/dq_a dq_b``, ``X3[pa, pb, pc]`` up to ``order``
    (1..3), where ``pa = pos[a]`` (see :func:`joint_union`); rows of joints not above ``f`` are
    left untouched, so callers zero the arrays first.
    """
    _frame_point(data, f, local, x)
    if f < 0 or model.frame_joint[f] < 0:
        return
    j = model.frame_joint[f]
    lo, hi = model.anc_ptr[j], model.anc_ptr[j + 1]
    anc_idx, S = model.anc_idx, data.S
    x0, x1, x2 = x[0], x[1], x[2]
    # scalar code throughout: no temporaries and no array views in the inner loops (each view
    # costs reference counting; this runs per constraint and per spring on every evaluation).
    # Each derivative is computed once and copied to its symmetric slots.
    for ic in range(lo, hi):
        c = anc_idx[ic]
        pc = pos[c]
        y0 = S[c, 4] * x2 - S[c, 5] * x1 + S[c, 0]      # dx/dq_c = w_c x x + v_c
        y1 = S[c, 5] * x0 - S[c, 3] * x2 + S[c, 1]
        y2 = S[c, 3] * x1 - S[c, 4] * x0 + S[c, 2]
        X1[pc, 0], X1[pc, 1], X1[pc, 2] = y0, y1, y2
        if order < 2:
            continue
        for ib in range(lo, ic + 1):
            b = anc_idx[ib]
            pb = pos[b]
            t0 = S[b, 4] * y2 - S[b, 5] * y1             # d2x/dq_b dq_c = w_b x dx/dq_c, b <= c
            t1 = S[b, 5] * y0 - S[b, 3] * y2
            t2 = S[b, 3] * y1 - S[b, 4] * y0
            X2[pb, pc, 0], X2[pb, pc, 1], X2[pb, pc, 2] = t0, t1, t2
            X2[pc, pb, 0], X2[pc, pb, 1], X2[pc, pb, 2] = t0, t1, t2
            if order < 3:
                continue
            for ia in range(lo, ib + 1):
                a = anc_idx[ia]
                pa = pos[a]
                u0 = S[a, 4] * t2 - S[a, 5] * t1
                u1 = S[a, 5] * t0 - S[a, 3] * t2
                u2 = S[a, 3] * t1 - S[a, 4] * t0
                _store_symmetric3(X3, pa, pb, pc, u0, u1, u2)


@njit(cache=True, nogil=True)
def point_third_along(model, data, f, pos, w, sign, Y):
    """``Y[pc] += sign * sum_ab d3x/dq_a dq_b dq_c w_a w_b`` for the world origin ``x`` of frame
    ``f`` (``-1``: the world, nothing): the third derivatives of :func:`point_jet` contracted
    twice with ``w`` (full variable indices), in O(k) instead of the O(k^3) of the whole jet.

    With ``y_c = S_c * x``, ``Ω_c = sum_{a<=c} w_a ω_a`` and ``P_b = 2 Ω_{b-1} + w_b ω_b``, the
    pairs ``(a, b)`` split by where they fall against ``c`` (root to leaf)::

        Y_c = C_c y_c + 2 Ω_c x (ω_c x s_c) + ω_c x (z_c - 2 Ω_c x s_c),
        C_c = sum_{b<=c} w_b (ω_b P_b^T - (P_b . ω_b) I),
        s_c = sum_{b>c} w_b y_b,   z_c = sum_{b>c} w_b P_b x y_b

    (``C_c y = sum_b w_b P_b x (ω_b x y)``)."""
    if f < 0 or model.frame_joint[f] < 0:
        return
    lo, hi = _ancestor_range(model, f)
    anc_idx, S = model.anc_idx, data.S
    x0, x1, x2 = data.p[f, 0], data.p[f, 1], data.p[f, 2]
    nch = hi - lo
    y, P, Om = np.empty((nch, 3)), np.empty((nch, 3)), np.empty((nch, 3))
    wt = np.empty(nch)
    r0, r1, r2 = 0.0, 0.0, 0.0                       # Ω_{b-1}
    for i in range(nch):
        c = anc_idx[lo + i]
        wt[i] = w[c]
        y[i, 0] = S[c, 4] * x2 - S[c, 5] * x1 + S[c, 0]
        y[i, 1] = S[c, 5] * x0 - S[c, 3] * x2 + S[c, 1]
        y[i, 2] = S[c, 3] * x1 - S[c, 4] * x0 + S[c, 2]
        P[i, 0] = 2.0 * r0 + wt[i] * S[c, 3]
        P[i, 1] = 2.0 * r1 + wt[i] * S[c, 4]
        P[i, 2] = 2.0 * r2 + wt[i] * S[c, 5]
        r0 += wt[i] * S[c, 3]
        r1 += wt[i] * S[c, 4]
        r2 += wt[i] * S[c, 5]
        Om[i, 0], Om[i, 1], Om[i, 2] = r0, r1, r2
    C = np.zeros((3, 3))
    Cd = 0.0
    for i in range(nch):                              # C_c y_c, C accumulated root to leaf
        c = anc_idx[lo + i]
        for a in range(3):
            for b in range(3):
                C[a, b] += wt[i] * S[c, 3 + a] * P[i, b]
        Cd += wt[i] * (P[i, 0] * S[c, 3] + P[i, 1] * S[c, 4] + P[i, 2] * S[c, 5])
        pc = pos[c]
        for a in range(3):
            Y[pc, a] += sign * (C[a, 0] * y[i, 0] + C[a, 1] * y[i, 1] + C[a, 2] * y[i, 2] - Cd * y[i, a])
    s, z, t, u = np.zeros(3), np.zeros(3), np.empty(3), np.empty(3)
    for i in range(nch - 1, -1, -1):                  # the rest with s_c, z_c summed leaf to root
        c = anc_idx[lo + i]
        om = S[c, 3:6]
        # 2 Ω x (ω x s) + ω x (z - 2 Ω x s)
        _cross(om, s, t)
        _cross(Om[i], t, u)
        _cross(Om[i], s, t)
        for a in range(3):
            t[a] = z[a] - 2.0 * t[a]
        pc = pos[c]
        Y[pc, 0] += sign * (2.0 * u[0] + om[1] * t[2] - om[2] * t[1])
        Y[pc, 1] += sign * (2.0 * u[1] + om[2] * t[0] - om[0] * t[2])
        Y[pc, 2] += sign * (2.0 * u[2] + om[0] * t[1] - om[1] * t[0])
        _cross(P[i], y[i], t)
        for a in range(3):
            s[a] += wt[i] * y[i, a]
            z[a] += wt[i] * t[a]


@njit(cache=True, nogil=True, inline="always")
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit(cache=True, nogil=True, inline="always")
def _set_symmetric3(H3, a, b, c, s):
    """``H3[i, j, k] = s`` for the six orderings of ``(a, b, c)``."""
    for i, j, k in ((a, b, c), (a, c, b), (b, a, c), (b, c, a), (c, a, b), (c, b, a)):
        H3[i, j, k] = s


@njit(cache=True, nogil=True, inline="always")
def _store_symmetric3(X3, a, b, c, u0, u1, u2):
    """``X3[i, j, k] = u`` for the six orderings of ``(a, b, c)``."""
    for i, j, k in ((a, b, c), (a, c, b), (b, a, c), (b, c, a), (c, a, b), (c, b, a)):
        X3[i, j, k, 0], X3[i, j, k, 1], X3[i, j, k, 2] = u0, u1, u2


@njit(cache=True, nogil=True)
def _bilinear_jet(k, order, u, U1, U2, U3, w, W1, W2, W3, H1, H2, H3):
    """Derivatives of ``h = u . w`` from the jets of the 3-vectors ``u`` and ``w`` (compact
    indices ``0..k-1``); returns ``h`` and fills ``H1``, ``H2``, ``H3`` up to ``order``.
    (Written per component, without row views: this runs per constraint and per spring on
    every evaluation, where views and their reference counting cost more than the sums.)"""
    h = u[0] * w[0] + u[1] * w[1] + u[2] * w[2]
    for a in range(k):
        s = 0.0
        for i in range(3):
            s += U1[a, i] * w[i] + u[i] * W1[a, i]
        H1[a] = s
        if order < 2:
            continue
        for b in range(a + 1):
            s = 0.0
            for i in range(3):
                s += (U2[a, b, i] * w[i] + U1[a, i] * W1[b, i] + U1[b, i] * W1[a, i]
                      + u[i] * W2[a, b, i])
            H2[a, b] = s
            H2[b, a] = s
            if order < 3:
                continue
            for c in range(b + 1):
                s = 0.0
                for i in range(3):
                    s += (U3[a, b, c, i] * w[i] + u[i] * W3[a, b, c, i]
                          + U2[a, b, i] * W1[c, i] + U2[a, c, i] * W1[b, i]
                          + U2[b, c, i] * W1[a, i] + U1[a, i] * W2[b, c, i]
                          + U1[b, i] * W2[a, c, i] + U1[c, i] * W2[a, b, i])
                _set_symmetric3(H3, a, b, c, s)
    return h


@njit(cache=True, nogil=True)
def direction_jet(k, order, t, w, W1, W2, W3, H1, H2, H3):
    """Derivatives of ``h = t . w`` for a constant 3-vector ``t`` from the jet of ``w`` (compact
    indices ``0..k-1``): :func:`_bilinear_jet` without the terms of ``t``'s derivatives (a
    contact's row, :data:`PAIR_DIRECTION`). Returns ``h``; fills ``H1``, ``H2``, ``H3`` up to
    ``order``."""
    t0, t1, t2 = t[0], t[1], t[2]
    for a in range(k):
        H1[a] = t0 * W1[a, 0] + t1 * W1[a, 1] + t2 * W1[a, 2]
        if order < 2:
            continue
        for b in range(a + 1):
            s = t0 * W2[a, b, 0] + t1 * W2[a, b, 1] + t2 * W2[a, b, 2]
            H2[a, b] = s
            H2[b, a] = s
            if order < 3:
                continue
            for c in range(b + 1):
                _set_symmetric3(H3, a, b, c, t0 * W3[a, b, c, 0] + t1 * W3[a, b, c, 1] + t2 * W3[a, b, c, 2])
    return t0 * w[0] + t1 * w[1] + t2 * w[2]


@njit(cache=True, nogil=True)
def compose_scalar(k, order, f1, f2, f3, H1, H2, H3):
    """In place: derivatives of phi(h) from those of h, given phi', phi'' and phi''' at h."""
    if order >= 3:
        for a in range(k):
            for b in range(a + 1):
                for c in range(b + 1):
                    s = (f3 * H1[a] * H1[b] * H1[c]
                         + f2 * (H2[a, b] * H1[c] + H2[a, c] * H1[b] + H2[b, c] * H1[a])
                         + f1 * H3[a, b, c])
                    _set_symmetric3(H3, a, b, c, s)
    if order >= 2:
        for a in range(k):
            for b in range(a + 1):
                s = f2 * H1[a] * H1[b] + f1 * H2[a, b]
                H2[a, b] = s
                H2[b, a] = s
    for a in range(k):
        H1[a] *= f1


# Kinds of point-pair scalars, shared by constraints and springs.
PAIR_SQUARED_DISTANCE, PAIR_PLANE, PAIR_AXIS_DIFFERENCE, PAIR_DIRECTION = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def pair_work(kmax, order):
    """Work arrays of :func:`pair_jet` for up to ``kmax`` joints and derivatives up to ``order``:
    three point jets ``j`` = ``(x[j], X1[j], X2[j], X3[j])`` of shapes (3, 3), (3, kmax, 3),
    (3, kmax, kmax, 3), (3, kmax, kmax, kmax, 3) (orders not asked for have size 0).
    Allocated once for many pairs: this runs per constraint and per spring on every evaluation."""
    k2 = kmax if order >= 2 else 0
    k3 = kmax if order >= 3 else 0
    return (np.empty((3, 3)), np.empty((3, kmax, 3)), np.empty((3, k2, k2, 3)),
            np.empty((3, k3, k3, k3, 3)))


@njit(cache=True, nogil=True)
def scalar_jets(kmax, order):
    """``(H1, H2, H3)`` for scalar jets of up to ``kmax`` joints (a jet of ``k`` joints uses
    the leading ``[:k]`` entries of each axis)."""
    k2 = kmax if order >= 2 else 0
    k3 = kmax if order >= 3 else 0
    return np.empty(kmax), np.empty((k2, k2)), np.empty((k3, k3, k3))


@njit(cache=True, nogil=True)
def jets_max_joints(model, f1s, f2s):
    """An upper bound of ``joint_union`` over the frame pairs ``(f1s[r], f2s[r])``: the size to
    allocate per-pair work arrays once for all pairs."""
    kmax = 0
    for r in range(f1s.shape[0]):
        k = 0
        for f in (f1s[r], f2s[r]):
            if f >= 0 and model.frame_joint[f] >= 0:
                j = model.frame_joint[f]
                k += model.anc_ptr[j + 1] - model.anc_ptr[j]
        kmax = max(kmax, k)
    return min(kmax, model.nj)


@njit(cache=True, nogil=True)
def _subtract_jet(x, X1, X2, X3, i, j, k, k2, k3):
    """Point jet ``i`` -= point jet ``j`` in the work arrays of :func:`pair_work`."""
    for c in range(3):
        x[i, c] -= x[j, c]
    for a in range(k):
        for c in range(3):
            X1[i, a, c] -= X1[j, a, c]
    for a in range(k2):
        for b in range(k2):
            for c in range(3):
                X2[i, a, b, c] -= X2[j, a, b, c]
    for a in range(k3):
        for b in range(k3):
            for d in range(k3):
                for c in range(3):
                    X3[i, a, b, d, c] -= X3[j, a, b, d, c]


@njit(cache=True, nogil=True, inline="always")
def _ancestor_range(model, f):
    """``(lo, hi)``: the joints above frame ``f`` are ``model.anc_idx[lo:hi]``, root first
    (empty for the world and for frames without a joint above them)."""
    if f < 0 or model.frame_joint[f] < 0:
        return 0, 0
    j = model.frame_joint[f]
    return model.anc_ptr[j], model.anc_ptr[j + 1]


@njit(cache=True, nogil=True, inline="always")
def _cross_axis(w0, w1, w2, S, a):
    """``w x w_a`` with ``w_a`` the rotational part of joint ``a``'s world screw ``S[a]``."""
    return (w1 * S[a, 5] - w2 * S[a, 4], w2 * S[a, 3] - w0 * S[a, 5], w0 * S[a, 4] - w1 * S[a, 3])


@njit(cache=True, nogil=True)
def _squared_distance_jet(model, data, f1, f2, order, pos, k, H1, H2, H3, work):
    """``|p1 - p2|^2`` up to order 3 from point jets one order lower (constraints and springs
    are the common case, so this path skips the highest point jets).

    With ``w = p1 - p2``: ``h = w . w``, ``dh/dq_a = 2 w . W_a`` and ``d2h/dq_b dq_c =
    2 (W_b . W_c + w . d2w/dq_b dq_c)``, where for ``b`` above ``c`` (both above frame ``f``)
    ``d2p_f/dq_b dq_c = w_b x dp_f/dq_c`` (see :func:`point_jet`), so that
    ``w . d2p_f/dq_b dq_c = (w x w_b) . dp_f/dq_c``; ``f`` = ``f1`` adds, ``f2`` subtracts.
    Likewise ``d3h/dq_a dq_b dq_c = 2 (W_ab . W_c + W_ac . W_b + W_bc . W_a + w . W_abc)``
    with ``w . d3p_f/dq_a dq_b dq_c = (w x w_a) . d2p_f/dq_b dq_c`` for ``a`` above ``b``
    above ``c``.
    """
    x, X1, X2, X3 = work
    x[:2] = 0.0
    X1[:2, :k] = 0.0     # point_jet leaves rows of joints not above its frame untouched
    kj = k if order >= 3 else 0
    X2[:2, :kj, :kj] = 0.0
    origin = np.zeros(3)
    jet_order = 2 if order >= 3 else 1
    point_jet(model, data, f1, origin, jet_order, pos, x[0], X1[0], X2[0], X3[0])
    point_jet(model, data, f2, origin, jet_order, pos, x[1], X1[1], X2[1], X3[1])
    w0, w1, w2 = x[0, 0] - x[1, 0], x[0, 1] - x[1, 1], x[0, 2] - x[1, 2]
    for a in range(k):
        H1[a] = 2.0 * (w0 * (X1[0, a, 0] - X1[1, a, 0]) + w1 * (X1[0, a, 1] - X1[1, a, 1])
                       + w2 * (X1[0, a, 2] - X1[1, a, 2]))
    if order >= 2:
        for a in range(k):
            for b in range(a + 1):
                s = 0.0
                for i in range(3):
                    s += (X1[0, a, i] - X1[1, a, i]) * (X1[0, b, i] - X1[1, b, i])
                H2[a, b] = 2.0 * s
                H2[b, a] = 2.0 * s
        anc_idx = model.anc_idx
        for jet, f, sign in ((0, f1, 2.0), (1, f2, -2.0)):
            lo, hi = _ancestor_range(model, f)
            for ib in range(lo, hi):
                b = anc_idx[ib]
                pb = pos[b]
                c0, c1, c2 = _cross_axis(w0, w1, w2, data.S, b)     # w x w_b
                for ic in range(ib, hi):                # c at or below b
                    pc = pos[anc_idx[ic]]
                    t = sign * (c0 * X1[jet, pc, 0] + c1 * X1[jet, pc, 1] + c2 * X1[jet, pc, 2])
                    H2[pb, pc] += t
                    if pc != pb:
                        H2[pc, pb] += t
    if order >= 3:
        _squared_distance_third(model, data, f1, f2, pos, k, w0, w1, w2, X1, X2, X3, H3)
    return w0 * w0 + w1 * w1 + w2 * w2


@njit(cache=True, nogil=True)
def _squared_distance_third(model, data, f1, f2, pos, k, w0, w1, w2, X1, X2, X3, H3):
    """The third derivatives of :func:`_squared_distance_jet` from the point jets of order 2
    (``X1[f], X2[f]`` for f = 0, 1); ``X3[f][..., 0]`` holds frame f's ``w . W_abc`` term."""
    anc_idx = model.anc_idx
    for jet, f in ((0, f1), (1, f2)):
        D = X3[jet]
        for a in range(k):
            for b in range(k):
                for c in range(k):
                    D[a, b, c, 0] = 0.0
        lo, hi = _ancestor_range(model, f)
        for ia in range(lo, hi):
            a = anc_idx[ia]
            pa = pos[a]
            c0, c1, c2 = _cross_axis(w0, w1, w2, data.S, a)         # w x w_a
            for ib in range(ia, hi):
                pb = pos[anc_idx[ib]]
                for ic in range(ib, hi):
                    pc = pos[anc_idx[ic]]
                    t = (c0 * X2[jet, pb, pc, 0] + c1 * X2[jet, pb, pc, 1]
                         + c2 * X2[jet, pb, pc, 2])
                    # each triple once, written at its orderings (repeated indices: same slot)
                    for i, j2, l in ((pa, pb, pc), (pa, pc, pb), (pb, pa, pc), (pb, pc, pa),
                                     (pc, pa, pb), (pc, pb, pa)):
                        D[i, j2, l, 0] = t
    for a in range(k):
        for b in range(a + 1):
            for c in range(b + 1):
                s = X3[0, a, b, c, 0] - X3[1, a, b, c, 0]
                for i in range(3):   # W_ab . W_c + W_ac . W_b + W_bc . W_a
                    wa, wb = X1[0, a, i] - X1[1, a, i], X1[0, b, i] - X1[1, b, i]
                    wc = X1[0, c, i] - X1[1, c, i]
                    s += ((X2[0, a, b, i] - X2[1, a, b, i]) * wc
                          + (X2[0, a, c, i] - X2[1, a, c, i]) * wb
                          + (X2[0, b, c, i] - X2[1, b, c, i]) * wa)
                s *= 2.0
                _set_symmetric3(H3, a, b, c, s)


@njit(cache=True, nogil=True)
def pair_jet(model, data, kind, f1, f2, axis, order, pos, k, H1, H2, H3, work):
    """Jet of a scalar of frame origins, on compact indices ``0..k-1`` (see ``joint_union``):

    * ``PAIR_SQUARED_DISTANCE``: ``|p1 - p2|^2``;
    * ``PAIR_PLANE``: ``n . (p1 - p2)`` with ``n`` the ``axis`` of frame ``f2`` (the plane frame);
    * ``PAIR_AXIS_DIFFERENCE``: ``(p1 - p2)[axis]`` in world coordinates;
    * ``PAIR_DIRECTION``: ``t . (p1 - p2)`` with ``t = data.hc_dir[axis]`` a constant world
      vector (``axis``: the constraint row; a contact's row, set per evaluation); the jet of
      ``p1 - p2`` is left in ``work``'s first point jet, for the next row of the same pair
      (:func:`direction_jet`).

    Returns the value; fills ``H1``, ``H2``, ``H3`` up to ``order``. ``work`` holds the point
    jets (:func:`pair_work`, for at least ``k`` joints and ``order``).
    """
    if kind == PAIR_SQUARED_DISTANCE:
        return _squared_distance_jet(model, data, f1, f2, order, pos, k, H1, H2, H3, work)
    x, X1, X2, X3 = work
    k2 = k if order >= 2 else 0
    k3 = k if order >= 3 else 0
    # point_jet leaves rows of joints not above its frame untouched: clear the three jets
    x[:, :] = 0.0
    X1[:, :k] = 0.0
    X2[:, :k2, :k2] = 0.0
    X3[:, :k3, :k3, :k3] = 0.0
    # jet 0: p1, then w = p1 - p2 in place; jet 1: p2. (Whole kmax-sized jets, of which the
    # first k rows are used: contiguous arrays index faster than sliced ones.)
    w, W1, W2, W3 = x[0], X1[0], X2[0], X3[0]
    origin = np.zeros(3)
    point_jet(model, data, f1, origin, order, pos, w, W1, W2, W3)
    point_jet(model, data, f2, origin, order, pos, x[1], X1[1], X2[1], X3[1])
    _subtract_jet(x, X1, X2, X3, 0, 1, k, k2, k3)
    # jet 2: a constant unit vector (axis difference) or the plane normal
    t, T1, T2, T3 = x[2], X1[2], X2[2], X3[2]
    if kind == PAIR_AXIS_DIFFERENCE:
        t[axis] = 1.0
        return _bilinear_jet(k, order, t, T1, T2, T3, w, W1, W2, W3, H1, H2, H3)
    if kind == PAIR_DIRECTION:
        return direction_jet(k, order, data.hc_dir[axis], w, W1, W2, W3, H1, H2, H3)
    # plane: n = tip - origin of the plane frame, tip at unit distance along its axis
    local = np.zeros(3)
    local[axis] = 1.0
    point_jet(model, data, f2, local, order, pos, t, T1, T2, T3)
    _subtract_jet(x, X1, X2, X3, 2, 1, k, k2, k3)
    return _bilinear_jet(k, order, t, T1, T2, T3, w, W1, W2, W3, H1, H2, H3)


# ------------------------------------------------------------------------------ fourth order
@njit(cache=True, nogil=True)
def point_rate(model, data, f, pos, k, vk, x, X1, Y4):
    """``Y4[x, y] = d4p/dv dv dq_x dq_y`` of the world point of :func:`point_jet` (its value
    and first derivatives in ``x, X1``), as the rate along ``v`` of ``X3`` contracted with ``v``
    (``vk``: ``v`` on compact indices): for ``a <= b <= c``, ``X3[a, b, c] = w_a x (w_b x y_c)``
    with ``y_c = S_c * p``, whose rate along ``v`` takes ``dw/dv`` and ``dv_c/dv`` from
    ``D_j = [Vp_j, S_j]`` (:func:`core.tree.lagrangian.prepare`) and ``dp/dv = X1 . v``."""
    Y4[:k, :k, :] = 0.0
    if f < 0 or model.frame_joint[f] < 0:
        return
    lo, hi = _ancestor_range(model, f)
    anc_idx, S, D = model.anc_idx, data.S, data.D
    pd = np.zeros(3)
    for a in range(k):
        for i in range(3):
            pd[i] += X1[a, i] * vk[a]
    Xd = np.zeros((k, k, k, 3))
    y, yd, t, td, u = np.empty(3), np.empty(3), np.empty(3), np.empty(3), np.empty(3)
    for ic in range(lo, hi):
        c = anc_idx[ic]
        pc = pos[c]
        for i in range(3):
            y[i] = X1[pc, i]
        # yd = D_c * p + w_c x pd
        yd[0] = D[c, 4] * x[2] - D[c, 5] * x[1] + D[c, 0] + S[c, 4] * pd[2] - S[c, 5] * pd[1]
        yd[1] = D[c, 5] * x[0] - D[c, 3] * x[2] + D[c, 1] + S[c, 5] * pd[0] - S[c, 3] * pd[2]
        yd[2] = D[c, 3] * x[1] - D[c, 4] * x[0] + D[c, 2] + S[c, 3] * pd[1] - S[c, 4] * pd[0]
        for ib in range(lo, ic + 1):
            b = anc_idx[ib]
            pb = pos[b]
            omega_cross(S[b], y, t)             # t = w_b x y_c, td its rate
            omega_cross(D[b], y, td)
            omega_cross(S[b], yd, u)
            for i in range(3):
                td[i] += u[i]
            for ia in range(lo, ib + 1):
                a = anc_idx[ia]
                pa = pos[a]
                omega_cross(D[a], t, u)         # rate of w_a x t
                r0, r1, r2 = u[0], u[1], u[2]
                omega_cross(S[a], td, u)
                _store_symmetric3(Xd, pa, pb, pc, r0 + u[0], r1 + u[1], r2 + u[2])
    for c in range(k):
        if vk[c] != 0.0:
            for a in range(k):
                for b in range(k):
                    for i in range(3):
                        Y4[a, b, i] += vk[c] * Xd[c, a, b, i]


@njit(cache=True, nogil=True, inline="always")
def _contracted(J1, J2, J3, Y4, vk, k, nv, a, b, out):
    """The derivative of a point jet along ``nv`` copies of ``v`` and the compact joints
    ``a`` and ``b`` (-1: absent), from its jets (``Y4`` for ``nv`` = 2 with both joints)."""
    out[:] = 0.0
    na = (a >= 0) + (b >= 0)
    if nv + na == 0:
        return
    if nv == 2 and na == 2:
        for i in range(3):
            out[i] = Y4[a, b, i]
        return
    if nv == 0:
        if na == 1:
            e = a if a >= 0 else b
            for i in range(3):
                out[i] = J1[e, i]
        else:
            for i in range(3):
                out[i] = J2[a, b, i]
        return
    for c in range(k):
        if vk[c] == 0.0:
            continue
        if nv == 1:
            if na == 0:
                for i in range(3):
                    out[i] += vk[c] * J1[c, i]
            elif na == 1:
                e = a if a >= 0 else b
                for i in range(3):
                    out[i] += vk[c] * J2[c, e, i]
            else:
                for i in range(3):
                    out[i] += vk[c] * J3[c, a, b, i]
        else:
            for d in range(k):
                if na == 0:
                    for i in range(3):
                        out[i] += vk[c] * vk[d] * J2[c, d, i]
                else:
                    e = a if a >= 0 else b
                    for i in range(3):
                        out[i] += vk[c] * vk[d] * J3[c, d, e, i]


@njit(cache=True, nogil=True)
def pair_fourth(model, data, kind, f1, f2, axis, pos, k, vk, Q4):
    """``Q4[x, y] = d4h/dv dv dq_x dq_y`` of :func:`pair_jet`'s scalar ``h = t . w`` (compact
    indices; ``vk``: the velocity on them; after :func:`core.tree.lagrangian.prepare`): the product
    rule over the 16 ways to share the four directions between ``t`` and ``w``, with each
    point's jets to order 3 (:func:`point_jet`) and its fourth (:func:`point_rate`)."""
    x, X1, X2, X3 = np.zeros((3, 3)), np.zeros((3, k, 3)), np.zeros((3, k, k, 3)), np.zeros((3, k, k, k, 3))
    Y4 = np.zeros((3, k, k, 3))
    tmp = np.zeros((k, k, 3))
    origin = np.zeros(3)
    point_jet(model, data, f1, origin, 3, pos, x[0], X1[0], X2[0], X3[0])
    point_rate(model, data, f1, pos, k, vk, x[0], X1[0], Y4[0])
    point_jet(model, data, f2, origin, 3, pos, x[1], X1[1], X2[1], X3[1])
    point_rate(model, data, f2, pos, k, vk, x[1], X1[1], tmp)
    _subtract_jet(x, X1, X2, X3, 0, 1, k, k, k)
    Y4[0] -= tmp
    jt = 0                          # t's jet: w itself (squared distance)
    if kind == PAIR_AXIS_DIFFERENCE:
        jt = 2
        x[2, axis] = 1.0            # a constant vector: every derivative zero
    elif kind == PAIR_DIRECTION:
        jt = 2
        x[2] = data.hc_dir[axis]
    elif kind == PAIR_PLANE:
        jt = 2
        local = np.zeros(3)
        local[axis] = 1.0
        point_jet(model, data, f2, local, 3, pos, x[2], X1[2], X2[2], X3[2])
        point_rate(model, data, f2, pos, k, vk, x[2], X1[2], Y4[2])
        _subtract_jet(x, X1, X2, X3, 2, 1, k, k, k)
        Y4[2] -= tmp
    tv, wv = np.empty(3), np.empty(3)
    for a in range(k):
        for b in range(a + 1):
            s = 0.0
            for nv in range(3):             # copies of v on t's side (binomial weight)
                weight = 1.0 if nv != 1 else 2.0
                for ta in range(2):
                    for tb in range(2):
                        _contracted(X1[jt], X2[jt], X3[jt], Y4[jt], vk, k, nv, a if ta else -1,
                                    b if tb else -1, tv)
                        if nv + ta + tb == 0:
                            tv[:] = x[jt]
                        _contracted(X1[0], X2[0], X3[0], Y4[0], vk, k, 2 - nv, -1 if ta else a,
                                    -1 if tb else b, wv)
                        if 2 - nv + (1 - ta) + (1 - tb) == 0:
                            wv[:] = x[0]
                        s += weight * (tv[0] * wv[0] + tv[1] * wv[1] + tv[2] * wv[2])
            Q4[a, b] = s
            Q4[b, a] = s
