"""Generalized forces F(q, dq, u) and their exact derivatives.

``F = B_torque u - C dq + sum over frame wrenches of J_f^T W_f - sum over dampers of
c xdot dx/dq``: torques act directly on their variable, damping is viscous on each variable, a
wrench ``W = (f, m)`` applied at frame ``f`` in that frame's coordinates maps through the
frame's body Jacobian (an input ``W_f(u)``, or constant: ``System.add_wrench``), and a linear
damper between two frame origins (trep's ``LinearDamper``, ``System.add_damper``) acts along
the line between them with the force ``-c xdot``, ``x = |p1 - p2|``. F is affine in ``u`` and
in ``dq``, so its derivatives are

* ``Fq[i, a] = dF_i/dq_a``, ``Fv[i, j] = dF_i/d dq_j``, ``Fu[i, r] = dF_i/du_r``,
* ``Fqq[i, a, b]``, ``Fqv[i, a, j] = d2F_i/dq_a d dq_j``, ``Fqu[i, a, r]`` (``Fvv``, ``Fvu``
  and ``Fuu`` are zero).

For a wrench at frame ``f`` with world wrench ``Ws`` (``F_i = S_i . Ws``), body-frame columns obey
``dJ_i/dq_a = [J_i, J_a]`` for ``i`` above ``a``, so ``Fq[i, a] = [S_i, S_a] . Ws`` and
``Fqq[i, a, b] = [[S_i, S_a], S_b] . Ws`` for ``i`` above ``a <= b``.

For a damper, with the distance's derivatives ``x_a = dx/dq_a``, ``x_ab``, ``x_abc`` and its
rates ``xdot = x_a v_a``, ``xd_a = x_ab v_b``, ``xd_ab = x_abc v_c`` (sums over repeated
indices)::

    F_i = -c xdot x_i                    Fv[i, j] = -c x_i x_j
    Fq[i, a] = -c (xdot x_ia + x_i xd_a)
    Fqv[i, a, j] = -c (x_j x_ia + x_i x_aj)
    Fqq[i, a, b] = -c (xdot x_iab + xd_a x_ib + xd_b x_ia + x_i xd_ab)

Only wrenches at frames and dampers make ``F`` nonlinear in ``q`` (:func:`has_force_curvature`);
only dampers give ``Fqv`` (:func:`has_dampers`).
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.model.record import INPUT_TORQUE
from core.tree.jets import (
    PAIR_SQUARED_DISTANCE,
    compose_scalar,
    jets_max_joints,
    joint_union,
    pair_jet,
    pair_work,
    scalar_jets,
)
from core.tree.kinematics import bracket, dot6


@njit(cache=True, nogil=True)
def _world_wrench(data, f, comp, out):
    """World wrench (f, m about the world origin) of a unit body wrench component at frame f."""
    R, p = data.R[f], data.p[f]
    out[:] = 0.0
    if comp < 3:
        for i in range(3):
            out[i] = R[i, comp]
        # moment of the force about the world origin: p x f
        out[3] = p[1] * out[2] - p[2] * out[1]
        out[4] = p[2] * out[0] - p[0] * out[2]
        out[5] = p[0] * out[1] - p[1] * out[0]
    else:
        for i in range(3):
            out[3 + i] = R[i, comp - 3]


@njit(cache=True, nogil=True)
def has_dampers(model):
    """Whether the model has dampers between frames, the only source of ``Fqv``."""
    return model.damper_f1.shape[0] > 0


@njit(cache=True, nogil=True)
def has_force_curvature(model):
    """Whether ``F`` is nonlinear in ``q``: only a wrench at a frame (an input or constant) and
    a damper between frames give ``Fqq`` and ``Fqu`` (torques and damping on variables are
    linear), so without them callers can pass empty arrays for both."""
    if model.cwrench_frame.shape[0] > 0 or has_dampers(model):
        return True
    for r in range(model.nu):
        if model.input_kind[r] != INPUT_TORQUE:
            return True
    return False


@njit(cache=True, nogil=True)
def _frame_wrench(model, data, f, comp, value, r, order, F, Fq, Fu, Fqq, Fqu, Ws, t1, t2):
    """Add the wrench component ``comp`` of size ``value`` at frame ``f``: input ``r`` (its unit
    column into ``Fu``, ``Fqu``) or constant (``r`` = -1)."""
    _world_wrench(data, f, comp, Ws)
    j = model.frame_joint[f]
    if j < 0:
        return
    lo, hi = model.anc_ptr[j], model.anc_ptr[j + 1]
    for ii in range(lo, hi):
        i = model.anc_idx[ii]
        unit = dot6(data.S[i], Ws)
        F[i] += unit * value
        if order < 1:
            continue
        if r >= 0:
            Fu[i, r] += unit
        for ia in range(ii + 1, hi):
            a = model.anc_idx[ia]
            bracket(data.S[i], data.S[a], t1)
            d1 = dot6(t1, Ws)
            Fq[i, a] += d1 * value
            if order < 2:
                continue
            if r >= 0:
                Fqu[i, a, r] += d1
            for ib in range(ia, hi):
                b = model.anc_idx[ib]
                bracket(t1, data.S[b], t2)
                d2 = dot6(t2, Ws) * value
                Fqq[i, a, b] += d2
                if a != b:
                    Fqq[i, b, a] += d2


@njit(cache=True, nogil=True)
def _dampers(model, data, dq, order, F, Fq, Fv, Fqq, Fqv):
    """Add every damper's force and its derivatives up to ``order`` (the module docstring's
    formulas); at order 2 ``Fqv`` may be empty when the caller does not need it."""
    pos = -np.ones(model.nj, np.int64)
    idx = np.empty(model.nj, np.int64)
    frames = np.empty(2, np.int64)
    jet_order = order + 1           # the force holds dx/dq: one order above the force's
    kmax = jets_max_joints(model, model.damper_f1, model.damper_f2)
    X1, X2, X3 = scalar_jets(kmax, jet_order)
    work = pair_work(kmax, jet_order)
    vk, xd1 = np.empty(kmax), np.empty(kmax)
    want_qv = Fqv.shape[0] > 0
    for d in range(model.damper_f1.shape[0]):
        frames[0], frames[1] = model.damper_f1[d], model.damper_f2[d]
        k = joint_union(model, frames, pos, idx)
        sq = pair_jet(model, data, PAIR_SQUARED_DISTANCE, frames[0], frames[1], 0, jet_order,
                      pos, k, X1, X2, X3, work)
        x = np.sqrt(sq)
        if x < 1e-12:
            raise ValueError("damper with coincident endpoints: its direction is not defined")
        # x = sqrt(s): dx/ds = 1/(2x), d2x/ds2 = -1/(4x^3), d3x/ds3 = 3/(8x^5)
        compose_scalar(k, jet_order, 0.5 / x, -0.25 / x ** 3, 0.375 / x ** 5, X1, X2, X3)
        c = model.damper_c[d]
        xdot = 0.0
        for a in range(k):
            vk[a] = dq[idx[a]]
            xdot += X1[a] * vk[a]
        for a in range(k):
            F[idx[a]] -= c * xdot * X1[a]
        if order >= 1:
            for a in range(k):
                s = 0.0
                for b in range(k):
                    s += X2[a, b] * vk[b]
                xd1[a] = s
            for i in range(k):
                for a in range(k):
                    Fv[idx[i], idx[a]] -= c * X1[i] * X1[a]
                    Fq[idx[i], idx[a]] -= c * (xdot * X2[i, a] + X1[i] * xd1[a])
        if order >= 2:
            for a in range(k):
                for b in range(k):
                    xd2 = 0.0
                    for e in range(k):
                        xd2 += X3[a, b, e] * vk[e]
                    for i in range(k):
                        Fqq[idx[i], idx[a], idx[b]] -= c * (xdot * X3[i, a, b] + xd1[a] * X2[i, b]
                                                            + xd1[b] * X2[i, a] + X1[i] * xd2)
                        if want_qv:
                            Fqv[idx[i], idx[a], idx[b]] -= c * (X1[b] * X2[i, a] + X1[i] * X2[a, b])
        pos[idx[:k]] = -1


@njit(cache=True, nogil=True)
def generalized_force(model, data, dq, u, order, F, Fq, Fv, Fu, Fqq, Fqv, Fqu):
    """Fill ``F`` and, for ``order`` >= 1, ``Fq, Fv, Fu``; for ``order`` >= 2, ``Fqq, Fqv,
    Fqu``. ``Fqq`` and ``Fqu`` may be empty when :func:`has_force_curvature` is false, ``Fqv``
    when :func:`has_dampers` is (or when the caller needs no ``Fqv``). Needs the forward
    kinematics at ``q``."""
    n, damping = model.nj, model.damping
    for i in range(n):
        F[i] = -damping[i] * dq[i]
    if order >= 1:
        Fq[:, :] = 0.0
        Fv[:, :] = 0.0
        Fu[:, :] = 0.0
        for i in range(n):
            Fv[i, i] = -damping[i]
    if order >= 2:
        Fqq[:, :, :] = 0.0
        Fqv[:, :, :] = 0.0
        Fqu[:, :, :] = 0.0
    t6 = data.t6                    # (three 6-vectors of the Data's scratch)
    Ws, t1, t2 = t6[0], t6[1], t6[2]
    for r in range(model.nu):
        if model.input_kind[r] == INPUT_TORQUE:
            i = model.input_q[r]
            F[i] += u[r]
            if order >= 1:
                Fu[i, r] += 1.0
            continue
        _frame_wrench(model, data, model.input_frame[r], model.input_comp[r], u[r], r, order, F, Fq, Fu,
                      Fqq, Fqu, Ws, t1, t2)
    for c in range(model.cwrench_frame.shape[0]):
        _frame_wrench(model, data, model.cwrench_frame[c], model.cwrench_comp[c], model.cwrench_value[c], -1,
                      order, F, Fq, Fu, Fqq, Fqu, Ws, t1, t2)
    if has_dampers(model):
        _dampers(model, data, dq, order, F, Fq, Fv, Fqq, Fqv)
