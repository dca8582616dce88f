"""Constraints and their exact derivatives.

Holonomic rows ``h_r(q) = 0`` (in the order of the model's constraint list):

* distance: ``h = |p1 - p2|^2 - d^2`` (squared form, as in Johnson & Murphey and trep), where
  ``d`` is a constant or a configuration variable (a prescribed string length);
* plane: ``h = n . (p - p_plane) - offset`` with ``n`` an axis of the plane frame;
* coincide: ``h = (p1 - p2)[axis]``, one row per world axis;
* direction (a contact's rows, :mod:`core.continuous.contacts`): ``h = t . (p1 - p2) - c`` with
  the world vector ``t`` and the number ``c`` set per evaluation (``data.hc_dir``, ``data.hc_off``).

Index order: ``H1[r, a] = dh_r/dq_a``, ``H2[r, a, b]`` (or contracted, ``H2lam[a, b] =
sum_r lam_r d2h_r/dq_a dq_b``), and third derivatives only contracted:
``H3lam[a, b, c] = sum_r lam_r d3h_r/dq_a dq_b dq_c`` and ``H3ww[r, c] = d3h_r(w, w, e_c)``.

Velocity rows (continuous dynamics only): the origin of a frame has zero velocity along one of
that frame's own axes, ``a_r(q) . dq = 0`` with ``a_r,i = n . dp/dq_i``.
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.model.record import HC_DIRECTION, HC_DISTANCE, HC_PLANE
from core.tree.jets import (
    PAIR_AXIS_DIFFERENCE,
    PAIR_DIRECTION,
    PAIR_PLANE,
    PAIR_SQUARED_DISTANCE,
    direction_jet,
    jets_max_joints,
    joint_union,
    pair_fourth,
    pair_jet,
    pair_work,
    point_jet,
    point_rate,
    point_third_along,
    scalar_jets,
)
from core.tree.kinematics import dot3

_PAIR_OF = (PAIR_SQUARED_DISTANCE, PAIR_PLANE, PAIR_AXIS_DIFFERENCE, PAIR_DIRECTION)


@njit(cache=True, nogil=True)
def holonomic(model, data, q, order, lam, w, h, H1, H2, H2lam, H3lam, H3ww):
    """Values and derivatives of all holonomic constraints at the prepared configuration.

    ``order`` 0..3. Second derivatives go to ``H2`` (nh, n, n) per row when it is non-empty and
    to ``H2lam`` (n, n) as ``sum_r lam_r D2h_r`` when that is non-empty (the first-order DEL
    linearization needs only the sum). At order 3, ``H3lam`` (n, n, n) receives
    ``sum_r lam_r D3h_r`` when it is non-empty and ``H3ww`` (nh, n) ``D3h_r(w, w, .)`` when it is
    non-empty.
    """
    nh = model.hc_kind.shape[0]
    pos = -np.ones(model.nj, np.int64)
    idx = np.empty(model.nj, np.int64)
    frames = np.empty(2, np.int64)
    want_rows2 = order >= 2 and H2.shape[0] > 0
    want_lam2 = order >= 2 and H2lam.shape[0] > 0
    want_lam3 = order >= 3 and H3lam.shape[0] > 0
    want_ww = order >= 3 and H3ww.shape[0] > 0
    if order >= 1:
        H1[:, :] = 0.0
    if want_rows2:
        H2[:, :, :] = 0.0
    if want_lam2:
        H2lam[:, :] = 0.0
    if want_lam3:
        H3lam[:, :, :] = 0.0
    if want_ww:
        H3ww[:, :] = 0.0
    jet_order = max(order, 1)
    # a contact's row t . (p1 - p2) needs only D3h(w, w, .): t . (Y(p1) - Y(p2)), from
    # point_third_along in O(k), and its jet to second order (unless lam . D3h is asked for)
    along = want_ww and not want_lam3
    # work arrays once for all rows (sized for the largest joint union)
    kmax = jets_max_joints(model, model.hc_f1, model.hc_f2)
    J1, J2, J3 = scalar_jets(kmax, order)   # (a row's jet uses the leading k entries)
    work = pair_work(kmax, jet_order)
    Yw = np.empty((kmax, 3))
    for r in range(nh):
        kind = model.hc_kind[r]
        frames[0], frames[1] = model.hc_f1[r], model.hc_f2[r]
        k = joint_union(model, frames, pos, idx)
        row_order = 2 if along and kind == HC_DIRECTION else jet_order
        if (kind == HC_DIRECTION and r > 0 and model.hc_kind[r - 1] == HC_DIRECTION
                and model.hc_f1[r - 1] == frames[0] and model.hc_f2[r - 1] == frames[1]):
            # the next row of a contact on the same frames: the jet of p1 - p2 is in work (and Yw)
            val = direction_jet(k, row_order, data.hc_dir[r], work[0][0], work[1][0], work[2][0], work[3][0],
                                J1, J2, J3)
        else:
            val = pair_jet(model, data, _PAIR_OF[kind], frames[0], frames[1],
                           r if kind == HC_DIRECTION else model.hc_axis[r], row_order, pos, k, J1, J2, J3, work)
            if row_order < jet_order:
                Yw[:k] = 0.0
                point_third_along(model, data, frames[0], pos, w, 1.0, Yw)
                point_third_along(model, data, frames[1], pos, w, -1.0, Yw)
        dlen = 0.0   # d(-d^2)/d(length variable), when the length is one
        lv = -1
        if kind == HC_DISTANCE:
            lv = model.hc_lenvar[r]
            d = q[lv] if lv >= 0 else model.hc_value[r]
            val -= d * d
            dlen = -2.0 * d
        elif kind == HC_PLANE:
            val -= model.hc_value[r]
        elif kind == HC_DIRECTION:
            val -= data.hc_off[r]
        h[r] = val
        if lv >= 0 and order >= 1:
            H1[r, lv] += dlen
            if want_rows2:
                H2[r, lv, lv] -= 2.0
            if want_lam2:
                H2lam[lv, lv] -= 2.0 * lam[r]
        if order >= 1:
            for a in range(k):
                H1[r, idx[a]] += J1[a]
        if want_rows2:
            for a in range(k):
                for b in range(k):
                    H2[r, idx[a], idx[b]] += J2[a, b]
        if want_lam2:
            for a in range(k):
                for b in range(k):
                    H2lam[idx[a], idx[b]] += lam[r] * J2[a, b]
        if row_order < jet_order:          # (along: want_ww on a contact's row)
            t = data.hc_dir[r]
            for a in range(k):
                H3ww[r, idx[a]] += t[0] * Yw[a, 0] + t[1] * Yw[a, 1] + t[2] * Yw[a, 2]
        elif want_lam3 or want_ww:
            for a in range(k):
                for b in range(k):
                    for c in range(k):
                        t = J3[a, b, c]
                        if want_lam3:
                            H3lam[idx[a], idx[b], idx[c]] += lam[r] * t
                        if want_ww:
                            H3ww[r, idx[c]] += t * w[idx[a]] * w[idx[b]]
        pos[idx[:k]] = -1


@njit(cache=True, nogil=True)
def velocity_rows(model, data, dq, ddq, lam, row0, A, b, Cq, Cv, lam_dA):
    """Velocity constraints ``a_r(q) . dq = 0`` as rows ``row0 + r`` of the acceleration-level
    system ``A ddq + b = 0`` (``b = da/dt . dq``), with ``Cq = d(A ddq + b)/dq``,
    ``Cv = db/d(dq)`` and ``lam_dA[i, k] += sum_r lam_r d a_r,i / dq_k``."""
    nv = model.vc_frame.shape[0]
    pos = -np.ones(model.nj, np.int64)
    idx = np.empty(model.nj, np.int64)
    frames = np.empty(1, np.int64)
    origin = np.zeros(3)
    for r in range(nv):
        f = model.vc_frame[r]
        frames[0] = f
        k = joint_union(model, frames, pos, idx)
        x, X1, X2, X3 = np.zeros(3), np.zeros((k, 3)), np.zeros((k, k, 3)), np.zeros((k, k, k, 3))
        t, T1, T2, T3 = np.zeros(3), np.zeros((k, 3)), np.zeros((k, k, 3)), np.zeros((0, 0, 0, 3))
        point_jet(model, data, f, origin, 3, pos, x, X1, X2, X3)
        local = np.zeros(3)
        local[model.vc_axis[r]] = 1.0
        point_jet(model, data, f, local, 2, pos, t, T1, T2, T3)
        n, N1, N2 = t - x, T1 - X1, T2 - X2
        row = row0 + r
        # a_i = n . X1_i ; da_i/dq_k = N1_k . X1_i + n . X2_ki ;
        # d2a_i/dq_k dq_l = N2_kl . X1_i + N1_k . X2_li + N1_l . X2_ki + n . X3_kli
        da = np.zeros((k, k))  # [i, k]
        for i in range(k):
            A[row, idx[i]] = dot3(n, X1[i])
            for kk in range(k):
                da[i, kk] = dot3(N1[kk], X1[i]) + dot3(n, X2[kk, i])
        bval = 0.0
        for i in range(k):
            for kk in range(k):
                bval += da[i, kk] * dq[idx[i]] * dq[idx[kk]]
                lam_dA[idx[i], idx[kk]] += lam[row] * da[i, kk]
        b[row] = bval
        for l in range(k):
            s = 0.0
            for i in range(k):
                s += da[i, l] * ddq[idx[i]]
                for kk in range(k):
                    d2 = (dot3(N2[kk, l], X1[i]) + dot3(N1[kk], X2[l, i]) + dot3(N1[l], X2[kk, i])
                          + dot3(n, X3[kk, l, i]))
                    s += d2 * dq[idx[i]] * dq[idx[kk]]
            Cq[row, idx[l]] = s
            s = 0.0
            for kk in range(k):
                s += (da[kk, l] + da[l, kk]) * dq[idx[kk]]
            Cv[row, idx[l]] = s
        pos[idx[:k]] = -1


@njit(cache=True, nogil=True)
def holonomic_fourth(model, data, v, T3, Q4):
    """Per holonomic row, for the continuous second-order linearization: ``T3[r] = D3h_r``
    (n, n, n) and ``Q4[r, a, b] = d4h_r/dv dv dq_a dq_b`` (the fourth derivative along the
    velocity ``v`` twice, :func:`core.tree.jets.pair_fourth`), after
    :func:`core.tree.lagrangian.prepare` at ``(q, v)``. (A length variable's ``-d^2`` has neither.)"""
    nh = model.hc_kind.shape[0]
    pos = -np.ones(model.nj, np.int64)
    idx = np.empty(model.nj, np.int64)
    frames = np.empty(2, np.int64)
    T3[:, :, :, :] = 0.0
    Q4[:, :, :] = 0.0
    kmax = jets_max_joints(model, model.hc_f1, model.hc_f2)
    J1, J2, J3 = scalar_jets(kmax, 3)
    work = pair_work(kmax, 3)
    vk = np.empty(kmax)
    Qk = np.empty((kmax, kmax))
    for r in range(nh):
        kind = model.hc_kind[r]
        frames[0], frames[1] = model.hc_f1[r], model.hc_f2[r]
        k = joint_union(model, frames, pos, idx)
        axis = r if kind == HC_DIRECTION else model.hc_axis[r]
        pair_jet(model, data, _PAIR_OF[kind], frames[0], frames[1], axis, 3, pos, k, J1, J2, J3, work)
        for a in range(k):
            vk[a] = v[idx[a]]
            for b in range(k):
                for c in range(k):
                    T3[r, idx[a], idx[b], idx[c]] = J3[a, b, c]
        pair_fourth(model, data, _PAIR_OF[kind], frames[0], frames[1], axis, pos, k, vk, Qk)
        for a in range(k):
            for b in range(k):
                Q4[r, idx[a], idx[b]] = Qk[a, b]
        pos[idx[:k]] = -1


@njit(cache=True, nogil=True)
def velocity_fourth(model, data, v, A, Da, D2a, Bqq):
    """Per velocity constraint ``a_r(q) . dq = 0`` (``a_r,i = n . dp/dq_i``, see
    :func:`velocity_rows`), for the continuous second-order linearization: ``A[r] = a_r``,
    ``Da[r, i, x] = da_r,i/dq_x``, ``D2a[r, i, x, y]`` and ``Bqq[r] = d2b_r/dq2`` of
    ``b_r = sum_ik da_r,i/dq_k v_i v_k`` at fixed ``v``: with ``P = dp/dq . v``, ``b = dn/dv . P
    + n . dP/dv``, whose Hessian takes the point's fourth derivative along ``v`` twice
    (:func:`core.tree.jets.point_rate`). After :func:`core.tree.lagrangian.prepare` at ``(q, v)``."""
    nv = model.vc_frame.shape[0]
    pos = -np.ones(model.nj, np.int64)
    idx = np.empty(model.nj, np.int64)
    frames = np.empty(1, np.int64)
    origin = np.zeros(3)
    A[:, :] = 0.0
    Da[:, :, :] = 0.0
    D2a[:, :, :, :] = 0.0
    Bqq[:, :, :] = 0.0
    for r in range(nv):
        f = model.vc_frame[r]
        frames[0] = f
        k = joint_union(model, frames, pos, idx)
        vk = np.empty(k)
        for a in range(k):
            vk[a] = v[idx[a]]
        x, X1, X2, X3 = np.zeros(3), np.zeros((k, 3)), np.zeros((k, k, 3)), np.zeros((k, k, k, 3))
        t, N1, N2, N3 = np.zeros(3), np.zeros((k, 3)), np.zeros((k, k, 3)), np.zeros((k, k, k, 3))
        Y4 = np.zeros((k, k, 3))
        point_jet(model, data, f, origin, 3, pos, x, X1, X2, X3)
        point_rate(model, data, f, pos, k, vk, x, X1, Y4)
        local = np.zeros(3)
        local[model.vc_axis[r]] = 1.0
        point_jet(model, data, f, local, 3, pos, t, N1, N2, N3)
        n = t - x
        N1 -= X1
        N2 -= X2
        N3 -= X3
        # contractions with v: P = X1.v, Pd = X2(v, v), N1v, and per joint / pair
        P, Pd, N1v = np.zeros(3), np.zeros(3), np.zeros(3)
        X2v, X3vv, N2v = np.zeros((k, 3)), np.zeros((k, 3)), np.zeros((k, 3))
        X3v, N3v = np.zeros((k, k, 3)), np.zeros((k, k, 3))
        for c in range(k):
            P += vk[c] * X1[c]
            N1v += vk[c] * N1[c]
            for a in range(k):
                X2v[a] += vk[c] * X2[c, a]
                N2v[a] += vk[c] * N2[c, a]
                Pd += vk[c] * vk[a] * X2[c, a]
                for b in range(k):
                    X3v[a, b] += vk[c] * X3[c, a, b]
                    N3v[a, b] += vk[c] * N3[c, a, b]
                    X3vv[b] += vk[c] * vk[a] * X3[c, a, b]
        row = r
        for i in range(k):
            A[row, idx[i]] = dot3(n, X1[i])
            for xx in range(k):
                Da[row, idx[i], idx[xx]] = dot3(N1[xx], X1[i]) + dot3(n, X2[xx, i])
                for yy in range(k):
                    D2a[row, idx[i], idx[xx], idx[yy]] = (dot3(N2[xx, yy], X1[i]) + dot3(N1[xx], X2[yy, i])
                                                          + dot3(N1[yy], X2[xx, i]) + dot3(n, X3[xx, yy, i]))
        for xx in range(k):
            for yy in range(k):
                Bqq[row, idx[xx], idx[yy]] = (
                    dot3(N3v[xx, yy], P) + dot3(N2[xx, yy], Pd) + dot3(N2v[xx], X2v[yy])
                    + dot3(N1[xx], X3vv[yy]) + dot3(N2v[yy], X2v[xx]) + dot3(N1[yy], X3vv[xx])
                    + dot3(N1v, X3v[xx, yy]) + dot3(n, Y4[xx, yy]))
        pos[idx[:k]] = -1
