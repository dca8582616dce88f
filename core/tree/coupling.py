"""Coupled (mimic) joint coordinates: the kernels of the frame tree evaluated at the variables.

The kinematic kernels (:mod:`core.tree.kinematics`, :mod:`core.tree.lagrangian`, :mod:`core.tree.rnea`,
:mod:`core.tree.forces`, :mod:`core.tree.constraints`) work on the ``nj`` joint coordinates of the tree,
every joint its own coordinate. A model with coupled coordinates (URDF mimic joints,
:meth:`core.System.add_mimic`) has fewer configuration variables: joint coordinate ``j`` is
``q_j = mimic_mul[j] q[mimic_src[j]] + mimic_off[j]``, i.e. ``q_joints = T q + c`` with a constant
``T`` (nj x nq, one entry per row). The system's Lagrangian is then ``L(T q + c, T dq)`` and its
generalized forces ``T^T F(T q + c, T dq, u)``, so every derivative of the coupled system is the
tree's, evaluated at ``(T q + c, T dq)`` and contracted with ``T`` on every index (gradients
``T^T g``, Hessians ``T^T H T``, third-order tensors on all three indices, constraint Jacobians
``J T``): exact, with no kernel of its own.

This module is that map, written once: each function here is ``coupled_<name>`` with the
signature of the tree kernel ``<name>`` it wraps, and takes and returns the variables'
quantities. Without coupled coordinates (``nj == nq``) each is one comparison and the kernel's
own call. The consumers (:mod:`core.continuous.dynamics`, :mod:`core.discrete.step`, :mod:`core.discrete.inverse`,
:mod:`core.discrete.legendre`, :mod:`core.continuous.minimal`, :mod:`core.continuous.second_order`) import these,
never the raw kernels (whose variables are the tree's joints: a mimic model would be wrong).
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.tree import constraints as _constraints
from core.tree import forces as _forces
from core.tree import kinematics as _kinematics
from core.tree import lagrangian as _lagrangian
from core.tree import rnea as _rnea
from core.tree.lagrangian import LagrangianDerivs


# ------------------------------------------------------------------------------ the affine map
@njit(cache=True, nogil=True)
def _is_coupled(model):
    return model.nj != model.nq


@njit(cache=True, nogil=True)
def expand(model, q):
    """Joint coordinates ``T q + c`` of the variables ``q``."""
    src, mul, off = model.mimic_src, model.mimic_mul, model.mimic_off
    out = np.empty(model.nj)
    for j in range(model.nj):
        out[j] = mul[j] * q[src[j]] + off[j]
    return out


@njit(cache=True, nogil=True)
def _expand_velocity(model, v):
    """Joint velocities ``T v`` (also any direction: accelerations, perturbations)."""
    src, mul = model.mimic_src, model.mimic_mul
    out = np.empty(model.nj)
    for j in range(model.nj):
        out[j] = mul[j] * v[src[j]]
    return out


@njit(cache=True, nogil=True)
def _contract_vector(model, g, out):
    """``out = T^T g`` (a covector: gradient, generalized force)."""
    src, mul = model.mimic_src, model.mimic_mul
    out[:] = 0.0
    for j in range(model.nj):
        out[src[j]] += mul[j] * g[j]


@njit(cache=True, nogil=True)
def _contract_matrix(model, H, out):
    """``out = T^T H T`` (both indices joint coordinates)."""
    src, mul = model.mimic_src, model.mimic_mul
    out[:, :] = 0.0
    for i in range(model.nj):
        for j in range(model.nj):
            out[src[i], src[j]] += mul[i] * mul[j] * H[i, j]


@njit(cache=True, nogil=True)
def _contract_first(model, X, out):
    """``out = T^T X`` for ``X`` (nj, k): only the first index a joint coordinate."""
    src, mul = model.mimic_src, model.mimic_mul
    out[:, :] = 0.0
    for i in range(model.nj):
        for r in range(X.shape[1]):
            out[src[i], r] += mul[i] * X[i, r]


@njit(cache=True, nogil=True)
def _contract_columns(model, X, out):
    """``out = X T`` for ``X`` (k, nj): rows of a Jacobian."""
    src, mul = model.mimic_src, model.mimic_mul
    out[:, :] = 0.0
    for r in range(X.shape[0]):
        for j in range(model.nj):
            out[r, src[j]] += mul[j] * X[r, j]


@njit(cache=True, nogil=True)
def _contract_tensor(model, X, out):
    """``out[a, b, c] = sum T_ia T_jb T_kc X[i, j, k]`` (all three indices joint coordinates)."""
    src, mul = model.mimic_src, model.mimic_mul
    out[:, :, :] = 0.0
    for i in range(model.nj):
        for j in range(model.nj):
            mij = mul[i] * mul[j]
            for k in range(model.nj):
                out[src[i], src[j], src[k]] += mij * mul[k] * X[i, j, k]


@njit(cache=True, nogil=True)
def _contract_two(model, X, out):
    """``out[a, b, r] = sum T_ia T_jb X[i, j, r]`` (the last index not a joint coordinate)."""
    src, mul = model.mimic_src, model.mimic_mul
    out[:, :, :] = 0.0
    for i in range(model.nj):
        for j in range(model.nj):
            mij = mul[i] * mul[j]
            for r in range(X.shape[2]):
                out[src[i], src[j], r] += mij * X[i, j, r]


@njit(cache=True, nogil=True)
def _joint_size(model, k):
    """``nj`` for a dimension of size ``nq > 0`` of a caller's array, else ``k`` (empty stays empty)."""
    return model.nj if k > 0 else 0


@njit(cache=True, nogil=True)
def _derivs(n, third):
    """Scratch for the tree's derivatives (unset: the kernels set what they fill, and only that
    is read)."""
    n3 = n if third else 0
    return LagrangianDerivs(np.empty(1), np.empty(n), np.empty(n), np.empty((n, n)), np.empty((n, n)),
                            np.empty((n, n)), np.empty((n3, n3, n3)), np.empty((n3, n3, n3)),
                            np.empty((n3, n3, n3)), np.empty((n, n)), np.empty((n, n)), np.empty((n, n)))


# ------------------------------------------------------------------------------ kinematics
@njit(cache=True, nogil=True)
def coupled_forward_kinematics(model, q, dq, data):
    """:func:`core.tree.kinematics.forward_kinematics` at the variables ``(q, dq)``."""
    if not _is_coupled(model):
        _kinematics.forward_kinematics(model, q, dq, data)
    else:
        _kinematics.forward_kinematics(model, expand(model, q), _expand_velocity(model, dq), data)


# ------------------------------------------------------------------------------ Lagrangian
@njit(cache=True, nogil=True)
def coupled_prepare(model, data, q, dq):
    """:func:`core.tree.lagrangian.prepare` at the variables ``(q, dq)``."""
    if not _is_coupled(model):
        _lagrangian.prepare(model, data, q, dq)
    else:
        _lagrangian.prepare(model, data, expand(model, q), _expand_velocity(model, dq))


@njit(cache=True, nogil=True)
def coupled_gradient_hessian(model, data, q, order, out, value):
    """:func:`core.tree.lagrangian.gradient_hessian` of ``L(T q + c, T dq)`` (after :func:`coupled_prepare`)."""
    if not _is_coupled(model):
        _lagrangian.gradient_hessian(model, data, q, order, out, value)
        return
    full = _derivs(model.nj, False)
    _lagrangian.gradient_hessian(model, data, expand(model, q), order, full, value)
    out.L[0] = full.L[0]
    if order >= 1:
        _contract_vector(model, full.Lq, out.Lq)
        _contract_vector(model, full.Lv, out.Lv)
    if order >= 2:
        _contract_matrix(model, full.Lqq, out.Lqq)
        _contract_matrix(model, full.Lqv, out.Lqv)
        _contract_matrix(model, full.Lvv, out.Lvv)


@njit(cache=True, nogil=True)
def coupled_third_order(model, data, q, full, wq, wv, out):
    """:func:`core.tree.lagrangian.third_order` of ``L(T q + c, T dq)``: the tensors (``full``) or
    the directional derivatives along ``(wq, wv)`` (after :func:`coupled_prepare` at ``q``)."""
    if not _is_coupled(model):
        _lagrangian.third_order(model, data, q, full, wq, wv, out)
        return
    der = _derivs(model.nj, full)
    _lagrangian.third_order(model, data, expand(model, q), full, _expand_velocity(model, wq),
                            _expand_velocity(model, wv), der)
    if full:
        _contract_tensor(model, der.Lqqq, out.Lqqq)
        _contract_tensor(model, der.Lqqv, out.Lqqv)
        _contract_tensor(model, der.Lqvv, out.Lqvv)
    else:
        _contract_matrix(model, der.dLqq, out.dLqq)
        _contract_matrix(model, der.dLqv, out.dLqv)
        _contract_matrix(model, der.dLvv, out.dLvv)


@njit(cache=True, nogil=True)
def coupled_fourth_order(model, data, dq, T4, W):
    """:func:`core.tree.lagrangian.fourth_order` of ``L(T q + c, T dq)`` (after :func:`coupled_prepare` and
    :func:`coupled_third_order` with ``full``): the joint coordinates' tensors move along ``T dq``."""
    if not _is_coupled(model):
        _lagrangian.fourth_order(model, data, dq, T4, W)
        return
    nj = model.nj
    T4j, Wj = np.empty((nj, nj, nj)), np.empty((nj, nj, nj))
    _lagrangian.fourth_order(model, data, _expand_velocity(model, dq), T4j, Wj)
    _contract_tensor(model, T4j, T4)
    _contract_tensor(model, Wj, W)


@njit(cache=True, nogil=True)
def coupled_spring_potential_derivatives(model, data, q, grad, hess):
    """:func:`core.tree.lagrangian.spring_potential_derivatives` at the variables ``q``."""
    if not _is_coupled(model):
        _lagrangian.spring_potential_derivatives(model, data, q, grad, hess)
        return
    nj = model.nj
    g, H = np.empty(nj), np.empty((_joint_size(model, hess.shape[0]), _joint_size(model, hess.shape[1])))
    _lagrangian.spring_potential_derivatives(model, data, expand(model, q), g, H)
    _contract_vector(model, g, grad)
    if hess.shape[0] > 0:
        _contract_matrix(model, H, hess)


# ------------------------------------------------------------------------------ forces
@njit(cache=True, nogil=True)
def coupled_generalized_force(model, data, dq, u, order, F, Fq, Fv, Fu, Fqq, Fqv, Fqu):
    """:func:`core.tree.forces.generalized_force` of the variables: ``T^T F(T q + c, T dq, u)`` and
    its derivatives (after :func:`coupled_prepare` or :func:`coupled_forward_kinematics`)."""
    if not _is_coupled(model):
        _forces.generalized_force(model, data, dq, u, order, F, Fq, Fv, Fu, Fqq, Fqv, Fqu)
        return
    nj, m = model.nj, u.shape[0]
    Ff, Fqf, Fvf, Fuf = np.empty(nj), np.empty((nj, nj)), np.empty((nj, nj)), np.empty((nj, m))
    Fqqf = np.empty((_joint_size(model, Fqq.shape[0]), _joint_size(model, Fqq.shape[1]),
                     _joint_size(model, Fqq.shape[2])))
    Fqvf = np.empty((_joint_size(model, Fqv.shape[0]), _joint_size(model, Fqv.shape[1]),
                     _joint_size(model, Fqv.shape[2])))
    Fquf = np.empty((_joint_size(model, Fqu.shape[0]), _joint_size(model, Fqu.shape[1]), Fqu.shape[2]))
    _forces.generalized_force(model, data, _expand_velocity(model, dq), u, order, Ff, Fqf, Fvf, Fuf,
                              Fqqf, Fqvf, Fquf)
    _contract_vector(model, Ff, F)
    if order >= 1:
        _contract_matrix(model, Fqf, Fq)
        _contract_matrix(model, Fvf, Fv)
        _contract_first(model, Fuf, Fu)
    if order >= 2:
        if Fqq.shape[0] > 0:
            _contract_tensor(model, Fqqf, Fqq)
        if Fqv.shape[0] > 0:
            _contract_tensor(model, Fqvf, Fqv)
        if Fqu.shape[0] > 0:
            _contract_two(model, Fquf, Fqu)


# ------------------------------------------------------------------------------ constraints
@njit(cache=True, nogil=True)
def coupled_holonomic(model, data, q, order, lam, w, h, H1, H2, H2lam, H3lam, H3ww):
    """:func:`core.tree.constraints.holonomic` of ``h(T q + c)``: ``H1 = Dh T``, the second and third
    derivatives contracted with ``T`` on every index (after the kinematics at ``q``)."""
    if not _is_coupled(model):
        _constraints.holonomic(model, data, q, order, lam, w, h, H1, H2, H2lam, H3lam, H3ww)
        return
    H1f = np.zeros((H1.shape[0], _joint_size(model, H1.shape[1])))
    H2f = np.zeros((H2.shape[0], _joint_size(model, H2.shape[1]), _joint_size(model, H2.shape[2])))
    H2lamf = np.zeros((_joint_size(model, H2lam.shape[0]), _joint_size(model, H2lam.shape[1])))
    H3lamf = np.zeros((_joint_size(model, H3lam.shape[0]), _joint_size(model, H3lam.shape[1]),
                       _joint_size(model, H3lam.shape[2])))
    H3wwf = np.zeros((H3ww.shape[0], _joint_size(model, H3ww.shape[1])))
    _constraints.holonomic(model, data, expand(model, q), order, lam, _expand_velocity(model, w), h,
                           H1f, H2f, H2lamf, H3lamf, H3wwf)
    if H1.shape[1] > 0:
        _contract_columns(model, H1f, H1)
    if H2.shape[1] > 0:
        for r in range(H2.shape[0]):
            _contract_matrix(model, H2f[r], H2[r])
    if H2lam.shape[0] > 0:
        _contract_matrix(model, H2lamf, H2lam)
    if H3lam.shape[0] > 0:
        _contract_tensor(model, H3lamf, H3lam)
    if H3ww.shape[1] > 0:
        _contract_columns(model, H3wwf, H3ww)


@njit(cache=True, nogil=True)
def coupled_holonomic_fourth(model, data, v, T3, Q4):
    """:func:`core.tree.constraints.holonomic_fourth` of ``h(T q + c)`` along ``T v``, contracted with
    ``T`` on every index (after :func:`coupled_prepare`)."""
    if not _is_coupled(model):
        _constraints.holonomic_fourth(model, data, v, T3, Q4)
        return
    nh, nj = T3.shape[0], model.nj
    T3f, Q4f = np.empty((nh, nj, nj, nj)), np.empty((nh, nj, nj))
    _constraints.holonomic_fourth(model, data, _expand_velocity(model, v), T3f, Q4f)
    for r in range(nh):
        _contract_tensor(model, T3f[r], T3[r])
        _contract_matrix(model, Q4f[r], Q4[r])


# ------------------------------------------------------------------------------ recursive dynamics
@njit(cache=True, nogil=True)
def coupled_mass_matrix(model, data, M):
    """:func:`core.tree.rnea.mass_matrix` of the variables: ``T^T M T`` (needs composites)."""
    if not _is_coupled(model):
        _rnea.mass_matrix(model, data, M)
        return
    Mf = np.empty((model.nj, model.nj))
    _rnea.mass_matrix(model, data, Mf)
    _contract_matrix(model, Mf, M)


@njit(cache=True, nogil=True)
def coupled_newton_euler(model, data, Ib, has_mass, dq, ddq, Ap, F, tau):
    """:func:`core.tree.rnea.newton_euler` at the variables' ``(dq, ddq)``: ``tau = T^T tau_joints``;
    ``Ap`` has one row per joint coordinate (``nj``)."""
    if not _is_coupled(model):
        _rnea.newton_euler(model, data, Ib, has_mass, dq, ddq, Ap, F, tau)
        return
    tf = np.empty(model.nj)
    _rnea.newton_euler(model, data, Ib, has_mass, _expand_velocity(model, dq),
                       _expand_velocity(model, ddq), Ap, F, tf)
    _contract_vector(model, tf, tau)


@njit(cache=True, nogil=True)
def coupled_add_joint_accelerations(model, data, Ib, has_mass, ddq, Ap, F):
    """:func:`core.tree.rnea.add_joint_accelerations` for the variables' ``ddq``."""
    if not _is_coupled(model):
        _rnea.add_joint_accelerations(model, data, Ib, has_mass, ddq, Ap, F)
    else:
        _rnea.add_joint_accelerations(model, data, Ib, has_mass, _expand_velocity(model, ddq), Ap, F)


@njit(cache=True, nogil=True)
def coupled_inverse_dynamics_derivatives(model, data, Ib, has_mass, Ap, F, dtau_dq, dtau_dv):
    """:func:`core.tree.rnea.inverse_dynamics_derivatives` of the variables (``T^T X T`` each)."""
    if not _is_coupled(model):
        _rnea.inverse_dynamics_derivatives(model, data, Ib, has_mass, Ap, F, dtau_dq, dtau_dv)
        return
    nj = model.nj
    dq_f, dv_f = np.empty((nj, nj)), np.empty((nj, nj))
    _rnea.inverse_dynamics_derivatives(model, data, Ib, has_mass, Ap, F, dq_f, dv_f)
    _contract_matrix(model, dq_f, dtau_dq)
    _contract_matrix(model, dv_f, dtau_dv)
