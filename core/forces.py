"""Generalized forces F(q, dq, u) and their exact derivatives.

``F = B_torque u - C dq + sum over frame wrenches of J_f^T W_f``: torques act directly on their
variable, damping is viscous on each variable, and a wrench ``W = (f, m)`` applied at frame ``f``
in that frame's coordinates maps through the frame's body Jacobian; a frame wrench is an input
(``W_f(u)``) or constant (``System.add_wrench``). F is affine in ``u`` and in ``dq``, so the only
non-trivial derivatives are in ``q``:

* ``Fq[i, a] = dF_i/dq_a``, ``Fv[i, j] = dF_i/d dq_j``, ``Fu[i, r] = dF_i/du_r``,
* ``Fqq[i, a, b]``, ``Fqu[i, a, r]`` (all other second derivatives are zero).

For a wrench at frame ``f`` with world wrench ``Ws`` (``F_i = S_i . Ws``), body-frame columns obey
``dJ_i/dq_a = [J_i, J_a]`` for ``i`` above ``a``, so ``Fq[i, a] = [S_i, S_a] . Ws`` and
``Fqq[i, a, b] = [[S_i, S_a], S_b] . Ws`` for ``i`` above ``a <= b``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .kinematics import bracket, dot6
from .model import INPUT_TORQUE


@njit(cache=True, nogil=True)
def world_wrench(data, f, comp, out):
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
def has_wrench_inputs(model):
    """Whether any force is a wrench at a frame (an input or constant): only those give ``Fqq``
    and ``Fqu`` (torques and damping are linear), so without them callers can pass empty arrays
    for both."""
    if model.cwrench_frame.shape[0] > 0:
        return True
    for r in range(model.nu):
        if model.input_kind[r] != INPUT_TORQUE:
            return True
    return False


@njit(cache=True, nogil=True)
def _frame_wrench(model, data, f, comp, value, r, order, F, Fq, Fu, Fqq, Fqu, Ws, t1, t2):
    """Add the wrench component ``comp`` of size ``value`` at frame ``f``: input ``r`` (its unit
    column into ``Fu``, ``Fqu``) or constant (``r`` = -1)."""
    world_wrench(data, f, comp, Ws)
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
def generalized_force(model, data, dq, u, order, F, Fq, Fv, Fu, Fqq, Fqu):
    """Fill ``F`` and, for ``order`` >= 1, ``Fq, Fv, Fu``; for ``order`` >= 2, ``Fqq, Fqu``
    (which may be empty if the model has no frame wrenches, see :func:`has_wrench_inputs`)."""
    n = model.nj
    F[:] = -model.damping * dq
    if order >= 1:
        Fq[:, :] = 0.0
        Fv[:, :] = 0.0
        Fu[:, :] = 0.0
        for i in range(n):
            Fv[i, i] = -model.damping[i]
    if order >= 2:
        Fqq[:, :, :] = 0.0
        Fqu[:, :, :] = 0.0
    Ws = np.empty(6)
    t1 = np.empty(6)
    t2 = np.empty(6)
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
