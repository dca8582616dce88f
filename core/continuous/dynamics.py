"""Continuous constrained dynamics and their exact first-order linearization (Johnson & Murphey
2010, Sec. III).

Equations (sign convention of the paper)::

    M(q) ddq + L_vq dq - L_q = F(q, dq, u) + A(q)^T lam        (n rows)
    A(q) ddq + b(q, dq) = 0                                       (one row per constraint)

``A`` stacks the Jacobians of the holonomic constraints and the rows of the velocity
constraints (``b = dA/dt dq``). ``lam`` is eliminated as a function of the state by the Schur
complement ``A M^-1 A^T``. The linearization differentiates both equations at fixed ``ddq`` and
``lam`` and solves the same block system for ``d ddq`` and ``d lam``; the tree's part of that
derivative is the derivative of the inverse dynamics ``M ddq + L_vq dq - L_q`` (kinetic energy
and gravity) from :mod:`core.tree.rnea`, in O(n d); springs, forces and constraints add their own.

State ``x = [q, dq]`` (2n), input ``u`` (m): ``A_lin`` is 2n x 2n, ``B_lin`` is 2n x m.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from core.base.jit import INTO_FLAT, flat, njit
from core.base.linalg import PIVOT_TOLERANCE, cholesky_checked, cholesky_solve, tree_cholesky, tree_cholesky_solve
from core.base.records import record_at
from core.cache import call_and_freeze
from core.continuous.second_order import dynamics_hessian
from core.errors import (
    BAD_SIZE,
    NONFINITE_INPUT,
    NONFINITE_INTERMEDIATE,
    OK,
    SINGULAR_CONSTRAINTS,
    SINGULAR_MASS,
    NonFiniteError,
    SingularMatrixError,
)
from core.tree import forces, kinematics, lagrangian, rnea, workspace
from core.tree.constraints import velocity_rows
from core.tree.coupling import (
    coupled_add_joint_accelerations,
    coupled_forward_kinematics,
    coupled_generalized_force,
    coupled_gradient_hessian,
    coupled_holonomic,
    coupled_inverse_dynamics_derivatives,
    coupled_mass_matrix,
    coupled_newton_euler,
    coupled_prepare,
    coupled_spring_potential_derivatives,
    coupled_third_order,
)
from core.tree.lagrangian import create_derivs
from core.validation import check_second_order_memory, check_vector, largest_entry, number, refuse_nonfinite

#: Plain-Python copy of the Lagrangian derivatives returned to users (see core.tree.lagrangian).
Derivatives = namedtuple("Derivatives", ["L", "Lq", "Lv", "Lqq", "Lqv", "Lvv", "Lqqq", "Lqqv", "Lqvv",
                                         "dLqq", "dLqv", "dLvv"])


# ------------------------------------------------------------------------------ kernel
@njit(cache=True, nogil=True, inline=INTO_FLAT)
def _first_nonfinite(q, dq, u):
    """Index of the first NaN or infinite entry of ``[q, dq, u]``, or -1."""
    for offset, x in ((0, q), (q.shape[0], dq), (2 * q.shape[0], u)):
        for i in range(x.shape[0]):
            if not np.isfinite(x[i]):
                return offset + i
    return -1


@njit(cache=True, nogil=True)
def _m_solve(tree_path, Lm, tree, X):
    """``M_DD^-1 X`` in place from :func:`continuous_dynamics`' factor (tree or dense)."""
    if tree_path:
        tree_cholesky_solve(Lm, tree, X)
    else:
        cholesky_solve(Lm, X)


@njit(cache=True, nogil=True)
@flat
def _articulated(model, data, work, q, dq, u, ddq, status):
    """``ddq`` of a system without constraints or kinematic variables in O(n) by
    :func:`core.tree.rnea.articulated_body` (after the kinematics and
    :func:`core.tree.kinematics.body_inertias` into ``work``, a :class:`~core.tree.workspace.Work`);
    False (nothing set) when a pivot is too small, so that the caller's factorization of ``M``
    names it, or when variables are coupled (the recursion is one of the tree's joint
    coordinates; the caller then factors ``T^T M T``). Flat (:func:`core.base.jit.flat`): the
    tree's kernels are inlined, called directly (no coupled variables here)."""
    n = model.nq
    if model.nj != n:
        return False
    kinematics.forward_kinematics(model, q, dq, data)
    kinematics.body_inertias(model, data, work.Ib, work.has_mass)
    Vs_q, F, tau = work.Vs_q, work.F, work.tau
    # (Work's own empty arrays: an empty view of a Work array has another numba layout, 'A',
    # and would compile the force and spring kernels once more for it)
    e2, e3 = work.e2, work.e3
    lagrangian.spring_potential_derivatives(model, data, q, Vs_q, e2)     # (gradient only)
    forces.generalized_force(model, data, dq, u[:model.nu], 0, F, e2, e2, e2, e3, e3, e3)
    for i in range(n):
        tau[i] = F[i] - Vs_q[i]
    if not np.isfinite(np.sum(tau)):
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1
        return True
    if rnea.articulated_body(model, data, work, dq, tau, ddq, PIVOT_TOLERANCE) >= 0:
        return False
    status[0], status[1] = (OK, -1) if np.isfinite(np.sum(ddq)) else (NONFINITE_INTERMEDIATE, -1)
    return True


@njit(cache=True, nogil=True, inline="always")
def _sizes_ok(ev, q, dq, u):
    """Whether ``q``, ``dq``, ``u`` have the model's lengths (else BAD_SIZE in ``ev.status``:
    the front-end's check names the argument)."""
    n = ev.model.nq
    if q.shape[0] != n or dq.shape[0] != n or u.shape[0] != ev.model.nu + ev.kin.shape[0]:
        ev.status[0], ev.status[1] = BAD_SIZE, -1
        return False
    return True


@njit(cache=True, nogil=True, inline="always")
def forward_dynamics(ev, q, dq, u, ddq):
    """``ddq`` at ``(q, dq, u)``, in place (``ev.status`` as in :func:`continuous_dynamics`): the
    work of ``System.qdd``'s entry :func:`qdd_at`, inlined there (a kernel that only calls
    another compiled one makes numba optimize the callee's code once more: about 10 s of
    compiling per entry). Without constraints,
    kinematic and coupled variables, and with no pivot of ``M`` too small, the articulated-body
    algorithm in O(n); otherwise :func:`continuous_dynamics`, which names a singular pivot."""
    model, data = ev.model, ev.data
    n = model.nq
    if not _sizes_ok(ev, q, dq, u) or ddq.shape[0] != n:
        ev.status[0] = BAD_SIZE
        return
    bad = _first_nonfinite(q, dq, u)
    if bad >= 0:
        ev.status[0], ev.status[1] = NONFINITE_INPUT, bad
        return
    nh = model.hc_kind.shape[0]
    nc = nh + model.vc_frame.shape[0]
    if nc == 0 and ev.kin.shape[0] == 0 and _articulated(model, data, ev.work, q, dq, u, ddq, ev.status):
        return
    e2 = np.empty((0, 0))
    continuous_dynamics(ev, q, dq, u, False, ddq, np.zeros(nc), e2, e2, e2, np.empty(nh),
                        np.empty((nc, n)))


@njit(cache=True, nogil=True, inline="always")
def linearize_plain(ev, q, dq, u, A, B):
    """``(A, B)`` at ``(q, dq, u)`` of a system without constraints, in place (``ev.status`` as
    in :func:`continuous_dynamics`): the work of ``System.linearize``'s entry
    :func:`linearize_at`, inlined there (as :func:`forward_dynamics`)."""
    model = ev.model
    n, mu = model.nq, model.nu + ev.kin.shape[0]
    if not _sizes_ok(ev, q, dq, u) or A.shape != (2 * n, 2 * n) or B.shape != (2 * n, mu):
        ev.status[0] = BAD_SIZE
        return
    if ev.kin.shape[0] == 0 and model.nj == n and model.hc_kind.shape[0] + model.vc_frame.shape[0] == 0:
        _linearize_tree(ev, q, dq, u, A, B)
        return
    continuous_dynamics(ev, q, dq, u, True, np.empty(n), np.zeros(0), A, B, np.zeros((0, 2 * n + mu)),
                        np.empty(0), np.empty((0, n)))


@njit(cache=True, nogil=True)
def qdd_at(address, q, dq, u, ddq):
    """:func:`forward_dynamics` on the :class:`~core.tree.workspace.Evaluation` at ``address``
    (:meth:`core.tree.workspace.Workspace.address`); returns the status code. The entry of
    ``System.qdd`` (five arguments: numba's call overhead grows with their number; an address
    costs it less to dispatch than a record, and an array the caller allocates less than one
    returned)."""
    ev = record_at(address, workspace.EVALUATION)
    forward_dynamics(ev, q, dq, u, ddq)
    return ev.status[0]


@njit(cache=True, nogil=True)
def linearize_at(address, q, dq, u, A, B):
    """:func:`linearize_plain` on the Evaluation at ``address``; returns the status code (the
    entry of ``System.linearize`` without constraints)."""
    ev = record_at(address, workspace.EVALUATION)
    linearize_plain(ev, q, dq, u, A, B)
    return ev.status[0]


@njit(cache=True, nogil=True)
@flat
def _linearize_tree(ev, q, dq, u, A, B):
    """:func:`continuous_dynamics` with ``linearize`` for a tree of joint coordinates alone (no
    constraints, kinematic or coupled variables): the same terms in the same order, each in the
    evaluation's :class:`~core.tree.workspace.Work` arrays, so that nothing is allocated::

        M ddq = tau,                 tau = F - bias - dV/dq
        [d ddq/dq, d ddq/d dq, d ddq/du] = M^-1 [Fq - dtau_dq - K, Fv - dtau_dv, Fu]

    (``M`` from composite inertias and factored along the tree; ``dtau_*`` the inverse dynamics'
    derivatives at fixed ``ddq``, :func:`core.tree.rnea.inverse_dynamics_derivatives`). Flat
    (:func:`core.base.jit.flat`): the tree's kernels are inlined, called directly (no coupled
    variables here)."""
    model, data, w, status = ev.model, ev.data, ev.work, ev.status
    n, m = model.nq, model.nu
    bad = _first_nonfinite(q, dq, u)
    if bad >= 0:
        status[0], status[1] = NONFINITE_INPUT, bad
        return
    Ib, has_mass, M, Lm, X, tau, ddq = w.Ib, w.has_mass, w.M, w.L, w.X, w.tau, w.ddq
    Fq, Fv, Fu, Ks, dtau_dq, dtau_dv = w.Fq, w.Fv, w.Fu, w.Ks, w.dtau_dq, w.dtau_dv
    kinematics.forward_kinematics(model, q, dq, data)
    kinematics.body_inertias(model, data, Ib, has_mass)
    kinematics.composites_from_bodies(model, data, Ib, has_mass)
    rnea.mass_matrix(model, data, M)
    lagrangian.spring_potential_derivatives(model, data, q, w.Vs_q, Ks)
    rnea.newton_euler(model, data, Ib, has_mass, dq, w.zeros, w.Ap, w.Ff, tau)
    e3 = w.e3
    forces.generalized_force(model, data, dq, u, 1, w.F, Fq, Fv, Fu, e3, e3, e3)
    F, Vs_q = w.F, w.Vs_q
    for i in range(n):
        tau[i] = F[i] - tau[i] - Vs_q[i]
    if not (np.isfinite(np.sum(M)) and np.isfinite(np.sum(tau))):
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1
        return
    tree = (model.tree_order, model.tree_anc_ptr, model.tree_anc_idx, model.tree_desc_ptr,
            model.tree_desc_idx)
    bad = tree_cholesky(M, tree, Lm)
    if bad >= 0:    # name the pivot the plain (root-first) factorization would name
        dense = cholesky_checked(M, np.empty((n, n)))
        status[0], status[1] = SINGULAR_MASS, dense if dense >= 0 else bad
        return
    col = X[:, :1]
    for i in range(n):
        col[i, 0] = tau[i]
    tree_cholesky_solve(Lm, tree, col)
    for i in range(n):
        ddq[i] = col[i, 0]
    if not np.isfinite(np.sum(ddq)):
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1
        return
    rnea.add_joint_accelerations(model, data, Ib, has_mass, ddq, w.Ap, w.Ff)
    rnea.inverse_dynamics_derivatives(model, data, Ib, has_mass, w.Ap, w.Ff, dtau_dq, dtau_dv)
    for i in range(n):
        for k in range(n):
            X[i, k] = Fq[i, k] - dtau_dq[i, k] - Ks[i, k]
            X[i, n + k] = Fv[i, k] - dtau_dv[i, k]
        for r in range(m):
            X[i, 2 * n + r] = Fu[i, r]
    tree_cholesky_solve(Lm, tree, X)
    for i in range(n):
        for k in range(2 * n):
            A[i, k] = 1.0 if k == n + i else 0.0
            A[n + i, k] = X[i, k]
        for r in range(m):
            B[i, r] = 0.0
            B[n + i, r] = X[i, 2 * n + r]
    status[0], status[1] = OK, -1
    if not np.isfinite(np.sum(X[:, :2 * n + m])):
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1


@njit(cache=True, nogil=True)
def continuous_dynamics(ev, q, dq, u, linearize, ddq, lam, A_lin, B_lin, dlam, h_out, A_out):
    """Solve for ``ddq`` and ``lam``; with ``linearize``, fill ``A_lin`` and ``B_lin``.

    ``ev``: the model, this thread's Data, the dynamic and kinematic variables ``dyn``, ``kin``
    and the ``status`` this writes (:class:`core.tree.workspace.Evaluation`). ``u`` = [force inputs
    (m), accelerations of the kinematic variables (nk)]; the equations of motion hold on the
    dynamic rows ``dyn`` only (see the module docstring).
    ``dlam`` (nc x (2n + m + nk)) receives the derivatives of ``lam`` with respect to
    ``[q, dq, u]``; ``h_out`` (nh) and ``A_out`` (nc x n) receive ``h(q)`` and the constraint
    rows ``A(q)`` (for the consistency check of the front-end).
    ``status[0]`` is OK, SINGULAR_MASS, SINGULAR_CONSTRAINTS, NONFINITE_INPUT or
    NONFINITE_INTERMEDIATE (also a non-finite ``ddq``, ``A_lin`` or ``B_lin``), ``status[1]``
    the index of the offending variable or constraint row (of ``[q, dq, u]`` for a non-finite
    entry). Both checks are here rather than in Python, where they cost more than in the kernel.

    The tree terms come from :mod:`core.tree.rnea`: ``M`` from composite inertias, the bias forces
    from a Newton-Euler pass, their derivatives in O(n d) (through :mod:`core.tree.coupling` when
    variables are coupled). Without kinematic or coupled variables ``M`` is factored along the
    tree; with them its dynamic block ``M_DD`` densely. Without constraints, kinematic or
    coupled variables and ``linearize``, ``ddq`` comes from the articulated-body algorithm in
    O(n) instead (:func:`core.tree.rnea.articulated_body`; ``M`` is then not formed).
    """
    model, data, dyn, kin, status = ev.model, ev.data, ev.dyn, ev.kin, ev.status
    n, m, nf = model.nq, model.nu, model.nf
    nd, nk = dyn.shape[0], kin.shape[0]
    nh, nv = model.hc_kind.shape[0], model.vc_frame.shape[0]
    nc = nh + nv
    bad = _first_nonfinite(q, dq, u)
    if bad >= 0:
        status[0], status[1] = NONFINITE_INPUT, bad
        return
    acc = u[m:]
    if not linearize and nc == 0 and nk == 0 and _articulated(model, data, ev.work, q, dq, u, ddq, status):
        return
    coupled_forward_kinematics(model, q, dq, data)
    Ib, has_mass = ev.work.Ib, ev.work.has_mass
    kinematics.body_inertias(model, data, Ib, has_mass)
    kinematics.composites_from_bodies(model, data, Ib, has_mass)
    M = np.empty((n, n))
    coupled_mass_matrix(model, data, M)
    Vs_q, Ks = np.empty(n), np.empty((n, n))
    coupled_spring_potential_derivatives(model, data, q, Vs_q, Ks)
    Ap, Ff, tau0 = np.empty((model.nj, 6)), np.empty((nf, 6)), np.empty(n)
    coupled_newton_euler(model, data, Ib, has_mass, dq, np.zeros(n), Ap, Ff, tau0)
    forder = 1 if linearize else 0
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    empty3 = np.empty((0, 0, 0))
    coupled_generalized_force(model, data, dq, u[:m], forder, F, Fq, Fv, Fu, empty3, empty3, empty3)
    tau = F - tau0 - Vs_q
    if not (np.isfinite(np.sum(M)) and np.isfinite(np.sum(tau))):
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1
        return
    tree_path = nk == 0 and model.nj == n     # coupled variables: M = T^T M_joints T, dense
    tree = (model.tree_order, model.tree_anc_ptr, model.tree_anc_idx, model.tree_desc_ptr,
            model.tree_desc_idx)
    Lm = np.empty((nd, nd))
    if tree_path:
        bad = tree_cholesky(M, tree, Lm)
        if bad >= 0:    # name the pivot the plain (root-first) factorization would name
            dense = cholesky_checked(M, np.empty((n, n)))
            status[0], status[1] = SINGULAR_MASS, dense if dense >= 0 else bad
            return
    else:
        Mdd = np.empty((nd, nd))
        for a in range(nd):
            for c in range(nd):
                Mdd[a, c] = M[dyn[a], dyn[c]]
        bad = cholesky_checked(Mdd, Lm)
        if bad >= 0:
            status[0], status[1] = SINGULAR_MASS, dyn[bad]
            return
    # constraint rows: A ddq + b = 0
    Ac = np.zeros((nc, n))
    b = np.zeros(nc)
    h = np.empty(nh)
    H2 = np.empty((nh, n, n))
    H3ww = np.empty((nh if linearize else 0, n))
    coupled_holonomic(model, data, q, 3 if linearize else 2, np.empty(0), dq, h, Ac[:nh], H2,
              np.empty((0, 0)), empty3, H3ww)
    for r in range(nh):
        b[r] = dq @ H2[r] @ dq
    Cq, Cv, lam_dA = np.zeros((nc, n)), np.zeros((nc, n)), np.zeros((n, n))
    zeros_n = np.zeros(n)
    if nv > 0:
        velocity_rows(model, data, dq, zeros_n, np.zeros(nc), nh, Ac, b, Cq, Cv, lam_dA)
    h_out[:] = h
    A_out[:, :] = Ac
    # on the dynamic rows D (kinematic rows K prescribed: ddq_K = acc):
    # ddq_D = M_DD^-1 (tau_D - M_DK acc + A_D^T lam),
    # lam = -(A_D M_DD^-1 A_D^T)^-1 (b + A_K acc + A_D M_DD^-1 (tau_D - M_DK acc))
    Ad = np.empty((nc, nd))
    for r in range(nc):
        for a in range(nd):
            Ad[r, a] = Ac[r, dyn[a]]
        for j in range(nk):
            b[r] += Ac[r, kin[j]] * acc[j]
    Minv_tau_At = np.empty((nd, 1 + nc))      # one solve for M^-1 [tau, A^T]
    for a in range(nd):
        t = tau[dyn[a]]
        for j in range(nk):
            t -= M[dyn[a], kin[j]] * acc[j]
        Minv_tau_At[a, 0] = t
        for r in range(nc):
            Minv_tau_At[a, 1 + r] = Ad[r, a]
    _m_solve(tree_path, Lm, tree, Minv_tau_At)
    Minv_tau, Minv_At = Minv_tau_At[:, :1], np.ascontiguousarray(Minv_tau_At[:, 1:])
    Ls = np.empty((nc, nc))
    ddq_d = np.empty(nd)
    if nc > 0:
        schur = Ad @ Minv_At
        if not np.isfinite(np.sum(schur)):
            status[0], status[1] = NONFINITE_INTERMEDIATE, -1
            return
        bad = cholesky_checked(schur, Ls)
        if bad >= 0:
            status[0], status[1] = SINGULAR_CONSTRAINTS, bad
            return
        rhs = (-(b + Ad @ np.ascontiguousarray(Minv_tau[:, 0]))).reshape(nc, 1)
        cholesky_solve(Ls, rhs)
        lam[:] = rhs[:, 0]
        ddq_d[:] = Minv_tau[:, 0] + Minv_At @ lam
    else:
        ddq_d[:] = Minv_tau[:, 0]
    for a in range(nd):
        ddq[dyn[a]] = ddq_d[a]
    for j in range(nk):
        ddq[kin[j]] = acc[j]
    if not np.isfinite(np.sum(ddq)):
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1
        return
    status[0], status[1] = OK, -1
    if not linearize:
        return
    # derivatives of the inverse dynamics M ddq + L_vq dq - L_q at fixed ddq
    coupled_add_joint_accelerations(model, data, Ib, has_mass, ddq, Ap, Ff)
    dtau_dq, dtau_dv = np.empty((n, n)), np.empty((n, n))
    coupled_inverse_dynamics_derivatives(model, data, Ib, has_mass, Ap, Ff, dtau_dq, dtau_dv)
    for r in range(nh):
        Cq[r] = H2[r] @ ddq + H3ww[r]
        Cv[r] = 2.0 * (H2[r] @ dq)
        lam_dA += lam[r] * H2[r]
    if nv > 0:
        velocity_rows(model, data, dq, ddq, lam, nh, Ac, b, Cq, Cv, lam_dA)
    # Residual derivatives R1 = M ddq + L_vq dq - L_q - F - A^T lam on the dynamic rows
    # (nd x (2n + m + nk); d/d acc = M_DK), negated into X and solved in place (one solve for
    # all columns): d ddq_D = X + M_DD^-1 A_D^T d lam.
    mu = m + nk
    nz = 2 * n + mu
    X = np.empty((nd, nz))
    for a in range(nd):
        i = dyn[a]
        for k in range(n):
            X[a, k] = Fq[i, k] + lam_dA[i, k] - dtau_dq[i, k] - Ks[i, k]
            X[a, n + k] = Fv[i, k] - dtau_dv[i, k]
        for r in range(m):
            X[a, 2 * n + r] = Fu[i, r]
        for j in range(nk):
            X[a, 2 * n + m + j] = -M[i, kin[j]]
    _m_solve(tree_path, Lm, tree, X)
    if nc > 0:
        # d lam = (A_D M_DD^-1 A_D^T)^-1 (A_D M_DD^-1 R1 - R2), R2 = d(A ddq + b) = [Cq, Cv, 0, A_K]
        dlam_z = -(Ad @ X)
        dlam_z[:, :n] -= Cq
        dlam_z[:, n:2 * n] -= Cv
        for j in range(nk):
            dlam_z[:, 2 * n + m + j] -= Ac[:, kin[j]]
        cholesky_solve(Ls, dlam_z)
        X += Minv_At @ dlam_z
        dlam[:, :] = dlam_z
    A_lin[:, :] = 0.0
    B_lin[:, :] = 0.0
    for i in range(n):
        A_lin[i, n + i] = 1.0
    for a in range(nd):
        i = dyn[a]
        for k in range(2 * n):
            A_lin[n + i, k] = X[a, k]
        for r in range(mu):
            B_lin[n + i, r] = X[a, 2 * n + r]
    for j in range(nk):
        B_lin[n + kin[j], m + j] = 1.0
    if not np.isfinite(np.sum(X)):      # A_lin, B_lin hold X and constants
        status[0], status[1] = NONFINITE_INTERMEDIATE, -1


@njit(cache=True, nogil=True)
def lagrangian_kernel(model, data, der, q, dq, order, third):
    """Lagrangian derivatives up to ``order`` (0, 1 or 2) and, with ``third`` True, the full
    third-order tensors; ``third`` None leaves them out at compile time (what a controller
    needs compiles without them)."""
    coupled_prepare(model, data, q, dq)
    coupled_gradient_hessian(model, data, q, order, der, True)
    if third is None:
        return
    coupled_third_order(model, data, q, True, dq, dq, der)


@njit(cache=True, nogil=True)
def input_matrix_kernel(model, data, q, Fu):
    """``Fu = dF/du`` at ``q`` (the generalized forces of unit inputs; independent of dq)."""
    n, m = model.nq, model.nu
    coupled_prepare(model, data, q, np.zeros(n))
    e3 = np.empty((0, 0, 0))
    coupled_generalized_force(model, data, np.zeros(n), np.zeros(m), 1, np.empty(n), np.empty((n, n)),
                      np.empty((n, n)), Fu, e3, e3, e3)


@njit(cache=True, nogil=True)
def constraint_kernel(model, data, q, order, h, H1, H2):
    dq = np.zeros(q.shape[0])
    coupled_prepare(model, data, q, dq)
    e3 = np.empty((0, 0, 0))
    coupled_holonomic(model, data, q, order, np.empty(0), dq, h, H1, H2, np.empty((0, 0)), e3,
              np.empty((0, q.shape[0])))


# ------------------------------------------------------------------------------ Python API
def raise_for_status(system, status, where: str, inputs=()) -> None:
    code, index = int(status[0]), int(status[1])
    if code == NONFINITE_INTERMEDIATE:
        raise NonFiniteError(
            f"{where} overflowed: finite inputs gave non-finite intermediates (largest input entry "
            f"{largest_entry(inputs)}); the state or inputs are too large for this model")
    if code == SINGULAR_MASS:
        name = system.config_names[index]
        raise SingularMatrixError(
            f"{where}: the mass matrix is singular at variable {index} ({name!r}); a variable "
            "that moves no mass, or a singular coordinate chart, makes M non-invertible. A joint "
            f"whose links carry no mass (a URDF without rotor inertia): give {name!r} an armature "
            "(System.add_armature, load_urdf(armature=...)) or lock it (System.lock, "
            "load_urdf(locked=...))",
            "mass matrix", index)
    if code == SINGULAR_CONSTRAINTS:
        raise SingularMatrixError(
            f"{where}: the constraint Jacobian is rank deficient at constraint row {index} "
            "(A M^-1 A^T is singular): redundant or degenerate constraints", "constraint Jacobian", index)
    if code == NONFINITE_INPUT:
        raise ValueError(f"{where}: entry {index} of [q, dq, u] is not finite")


@njit(cache=True, nogil=True)
def first_violation(h, Jv, dq, tol):
    """``(kind, row)`` of the first row :func:`check_consistent` refuses: ``(1, r)`` holonomic
    ``h``, ``(2, r)`` velocity level (``dq`` empty: not checked), ``(0, -1)`` none. (Compiled:
    it runs on every linearization, where the array expressions cost tens of microseconds.)"""
    nh, nr, n = h.shape[0], Jv.shape[0], Jv.shape[1]
    norms = np.empty(nr)
    for r in range(nr):
        s = 0.0
        for k in range(n):
            s += Jv[r, k] * Jv[r, k]
        norms[r] = np.sqrt(s)
    for r in range(nh):
        if abs(h[r]) > tol * norms[r]:
            return 1, r
    if dq.shape[0] == 0:
        return 0, -1
    scale = 0.0
    for k in range(n):
        scale += dq[k] * dq[k]
    scale = max(1.0, np.sqrt(scale))
    for r in range(nr):
        s = 0.0
        for k in range(n):
            s += Jv[r, k] * dq[k]
        if abs(s) > tol * max(norms[r], 1e-12) * scale:
            return 2, r
    return 0, -1


def check_consistent(system, h, Jv, dq, tol, what: str) -> None:
    """ValueError naming the violated row if ``(q, dq)`` is off the constraint manifold:
    ``|h_r| > tol |Dh_r|`` (about ``tol`` in q from it) or ``|(J dq)_r| > tol |J_r| max(1, |dq|)``
    for the holonomic Jacobian and velocity-constraint rows ``Jv`` (``h``'s rows first); ``dq``
    None checks the configuration only. ``what`` names the computation that needs a consistent
    state."""
    nh = h.shape[0]
    h, Jv = np.ascontiguousarray(h, dtype=float), np.ascontiguousarray(Jv, dtype=float)
    dq = None if dq is None else np.ascontiguousarray(dq, dtype=float)
    kind, r = first_violation(h, Jv, np.zeros(0) if dq is None else dq, float(tol))
    if kind == 0:
        return
    norms = np.sqrt(np.einsum("ij,ij->i", Jv, Jv))
    if kind == 1:
        g = float(norms[r])
        raise ValueError(f"the state violates holonomic constraint row {r}: h = {h[r]:.3g} "
                         f"(about {abs(h[r]) / max(g, 1e-300):.3g} in q from the constraint, "
                         f"residual_limit {tol:g}); {what} needs a state on the constraint "
                         "manifold (residual_limit=None skips this check)")
    res = Jv @ dq
    what_row = "holonomic constraint row" if r < nh else "velocity constraint"
    raise ValueError(f"dq violates {what_row} {r if r < nh else r - nh} at velocity level: residual "
                     f"{res[r]:.3g} (residual_limit {tol:g}); {what} needs a state on the constraint "
                     f"manifold: project dq ({system.config_names}) onto the null space of the "
                     "constraint rows (residual_limit=None skips this check)")


def _indices(system):
    """(dynamic, kinematic) variable indices: the workspace's, made at compilation."""
    ws = system.workspace
    return ws.dyn, ws.kin


def continuous_input_names(system) -> list[str]:
    """The continuous input ``u = [force inputs, accelerations of the kinematic variables]``:
    ``System.input_names`` then ``<kinematic>_ddot`` (see :mod:`core.conventions`)."""
    return list(system.input_names) + [k + "_ddot" for k in system.kinematic_names]


def check_configuration(system, q, residual_limit: float = 1e-6, what: str = "the computation") -> None:
    """ValueError naming the violated row if ``q`` is off the holonomic constraints ``h(q) = 0``
    (``|h_r| > residual_limit |Dh_r|``, see :func:`check_consistent`)."""
    if system.model.nh == 0:
        return
    tol = number("residual_limit", residual_limit, positive=True)
    h, Dh = constraint(system, q, 1)
    check_consistent(system, h, Dh, None, tol, what)


def _arguments(system, q, dq, u, nk):
    """``(q, dq, u)`` checked for shape (finiteness is the kernels' check), as the
    ``(name, vector, entry names)`` triples that error messages use; ``nk`` kinematic variables."""
    n, mu = system.model.nq, system.model.nu + nk
    names = system._config_names     # not the property: it copies the list on every call
    unames = system._input_names if mu == system.model.nu else continuous_input_names(system)
    return (("q", check_vector("q", q, n, names, finite=False), names),
            ("dq", check_vector("dq", dq, n, names, finite=False), names),
            ("u", check_vector("u", u, mu, unames, finite=False, optional=True), unames))


def _raise_for(system, status, inputs) -> None:
    if status[0] == NONFINITE_INPUT:
        refuse_nonfinite(inputs)
    raise_for_status(system, status, "continuous dynamics", inputs)     # (non-finite results too)


def dynamics_and_derivatives(system, q, dq, u, linearize, residual_limit=None, what=""):
    """``(ddq, lam, A, B, dlam)`` by the general kernel (constraints, kinematic and coupled
    variables; ``A``, ``B``, ``dlam`` only with ``linearize``), inputs checked and errors named;
    with ``residual_limit`` the state must satisfy the constraints (``what`` names the caller)."""
    model = system.model
    n, m = model.nq, model.nu
    dyn, kin = _indices(system)
    mu = m + kin.shape[0]
    inputs = _arguments(system, q, dq, u, kin.shape[0])
    q, dq, u = inputs[0][1], inputs[1][1], inputs[2][1]
    ev = system.workspace.evaluation()
    nc = model.nh + model.nv
    ddq, lam = np.empty(n), np.zeros(nc)
    k = 1 if linearize else 0      # (the kernel writes A, B and dlam only when linearizing)
    A, B = np.empty((2 * n * k, 2 * n * k)), np.empty((2 * n * k, mu * k))
    dlam = np.zeros((nc * k, (2 * n + mu) * k))
    h, Arows = np.empty(model.nh), np.empty((nc, n))
    continuous_dynamics(ev, q, dq, u, linearize, ddq, lam, A, B, dlam, h, Arows)
    _raise_for(system, ev.status, inputs)
    if residual_limit is not None and nc > 0:
        tol = number("residual_limit", residual_limit, positive=True)
        check_consistent(system, h, Arows, dq, tol, what)
    return ddq, lam, A, B, dlam


#: Entry kernels called the checked way once (:func:`_checked`): they compile nothing more, so
#: plain float64 vectors may go to them directly.
_DIRECT: set = set()


def _checked(entry, system, q, dq, u, out):
    """``entry(address, q, dq, u, *out)`` on the checked and converted arguments; raises
    naming what is wrong. Its first call compiles (or loads) the kernel, which then compiles nothing
    more (``disable_compile``): from then on :func:`qdd` and :func:`linearize` hand plain
    float64, C-contiguous, writable vectors to it directly, and anything else is a
    ``TypeError`` there (then this path), never a new compilation."""
    ws = system.workspace
    inputs = _arguments(system, q, dq, u, ws.kin.shape[0])
    ev = ws.evaluation()
    call_and_freeze(entry, _DIRECT, ws.address(), inputs[0][1], inputs[1][1], inputs[2][1], *out)
    _raise_for(system, ev.status, inputs)


def qdd(system, q, dq, u=None) -> np.ndarray:
    """Accelerations ``ddq`` of the constrained, forced system; ``u`` = [force inputs,
    accelerations of the kinematic variables] (which ``ddq`` repeats on their rows).
    Without constraints, kinematic and coupled variables: the articulated-body algorithm, O(n).
    Plain float64 vectors go straight to the kernel; anything else is checked and converted
    first (:func:`_checked`)."""
    ws = system.workspace
    ddq = np.empty(ws.n)
    if qdd_at in _DIRECT:
        try:
            if qdd_at(ws.address(), q, dq, u, ddq) == OK:
                return ddq
        except (TypeError, ValueError):     # (numba: an unsupported type; an empty list)
            pass
    _checked(qdd_at, system, q, dq, u, (ddq,))
    return ddq


def constraint_forces(system, q, dq, u=None) -> np.ndarray:
    """Constraint multipliers ``lam`` (holonomic rows first, then velocity rows)."""
    return dynamics_and_derivatives(system, q, dq, u, False)[1]


def linearize(system, q, dq, u=None, multipliers: bool = False,
              residual_limit: float | None = 1e-6):
    """Exact ``(A, B)`` of ``d/dt [q, dq] = f(q, dq, u)`` about the given point; ``u`` =
    [force inputs, accelerations of the kinematic variables] (:mod:`core.conventions`).

    ``(q, dq)`` must satisfy the constraints (``h = 0``, ``A dq = 0``) to within
    ``residual_limit`` (as in :func:`core.continuous.minimal.linearize_minimal`; ``None`` skips the check).
    With ``multipliers=True`` also returns ``dlam/dx`` (nc x 2n) and ``dlam/du`` (nc x nu).
    """
    ws = system.workspace
    if not multipliers and ws.plain:
        A, B = np.empty(ws.shape_A), np.empty(ws.shape_B)
        if linearize_at in _DIRECT:
            try:
                if linearize_at(ws.address(), q, dq, u, A, B) == OK:
                    return A, B
            except (TypeError, ValueError):
                pass
        _checked(linearize_at, system, q, dq, u, (A, B))
        return A, B
    _, _, A, B, dlam = dynamics_and_derivatives(system, q, dq, u, True, residual_limit, "the linearization")
    if multipliers:
        n2 = A.shape[0]
        return A, B, dlam[:, :n2], dlam[:, n2:]
    return A, B


def linearize2(system, q, dq, u=None, residual_limit: float | None = 1e-6):
    """Exact ``(A, B, H)`` of ``d/dt [q, dq] = f(q, dq, u)``: ``A, B`` as :func:`linearize` and
    ``H[i, a, b] = d2 f_i / dz_a dz_b`` with ``z = [q, dq, u]`` (2n x nz x nz, symmetric in
    ``a, b``; ``u`` = [force inputs, accelerations of the kinematic variables]); see
    :mod:`core.continuous.second_order`. Holonomic and velocity constraints are included (the
    state must satisfy them to within ``residual_limit``, as for :func:`linearize`)."""
    model = system.model
    dyn, kin = _indices(system)
    check_second_order_memory("linearize2", 2 * model.nq, 2 * model.nq + model.nu + kin.shape[0])
    inputs = _arguments(system, q, dq, u, kin.shape[0])
    q, dq, u = inputs[0][1], inputs[1][1], inputs[2][1]
    ddq, lam, A, B, dlam = dynamics_and_derivatives(system, q, dq, u, True, residual_limit, "the linearization")
    n = model.nq
    nz = 2 * n + u.shape[0]
    data, der = system.workspace.get(third_order=True)
    H, status = np.empty((2 * n, nz, nz)), np.zeros(2, np.int64)
    dynamics_hessian(model, data, der, create_derivs(n, True), q, dq, u, dyn, kin, ddq, lam, A, B, dlam, H,
                 status)
    _raise_for(system, status, inputs)
    return A, B, H


def lagrangian_derivatives(system, q, dq, order: int = 2):
    """Derivatives of L up to ``order`` (0..3) as a :class:`Derivatives` namedtuple of copies;
    fields above ``order`` (and the directional ones) are ``None``."""
    if order not in (0, 1, 2, 3):
        raise ValueError(f"order must be 0, 1, 2 or 3, got {order}")
    n = system.nq
    q = check_vector("q", q, n, system.config_names)
    dq = check_vector("dq", dq, n, system.config_names)
    data, der = system.workspace.get(third_order=order >= 3)
    lagrangian_kernel(system.model, data, der, q, dq, min(order, 2), True if order >= 3 else None)
    # fields above the requested order are not part of the answer (the scratch is shared)
    wanted = {0: 1, 1: 3, 2: 6, 3: 9}[order]
    return Derivatives._make([a.copy() if i < wanted else None for i, a in enumerate(der.fields()[:9])]
                             + [None, None, None])


def momentum(system, q, dq) -> np.ndarray:
    """Generalized momentum ``p = dL/d dq``."""
    return lagrangian_derivatives(system, q, dq, 1).Lv


def energy(system, q, dq) -> float:
    """Total energy ``KE + V = dq . p - L``."""
    d = lagrangian_derivatives(system, q, dq, 1)
    return float(np.asarray(dq, dtype=float) @ d.Lv - d.L[0])


def constraint(system, q, order: int = 0):
    """Holonomic constraint values ``h(q)``; with ``order`` 1 also ``Dh``, 2 also ``D2h``."""
    if order not in (0, 1, 2):
        raise ValueError(f"order must be 0, 1 or 2, got {order!r}")
    model = system.model
    q = check_vector("q", q, model.nq, system.config_names)
    data, _ = system.workspace.get()
    h, H1, H2 = np.empty(model.nh), np.zeros((model.nh, model.nq)), np.zeros((model.nh, model.nq, model.nq))
    constraint_kernel(model, data, q, order, h, H1, H2)
    return (h, H1, H2)[:order + 1] if order else h


def input_matrix(system, q) -> np.ndarray:
    """``dF/du`` (n x m) at ``q``: column ``r`` is the generalized force of a unit input ``r``."""
    model = system.model
    q = check_vector("q", q, model.nq, system.config_names)
    Fu = np.empty((model.nq, model.nu))
    data, _ = system.workspace.get()
    input_matrix_kernel(model, data, q, Fu)
    return Fu
