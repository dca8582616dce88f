"""The Newton-Euler kernels of core.tree.rnea, checked directly (the continuous linearization tests
in test_derivatives check them again through A and B).

* ``newton_euler`` equals the Euler-Lagrange form ``M ddq + L_vq dq - L_q`` built from the
  independent composite-bracket derivatives of core.tree.lagrangian (springs removed);
* ``mass_matrix`` equals ``L_vv``;
* ``articulated_body`` (O(n) forward dynamics) inverts ``newton_euler``;
* ``inverse_dynamics_derivatives`` equals central finite differences of ``newton_euler``
  along q and dq, on random trees with every transform kind, full inertias and massless frames.
"""
from __future__ import annotations

import numpy as np
import pytest

from core.tree.kinematics import body_inertias, composites_from_bodies, create_data, forward_kinematics
from core.tree.lagrangian import spring_potential_derivatives
from core.tree.rnea import (
    add_joint_accelerations,
    articulated_body,
    inverse_dynamics_derivatives,
    mass_matrix,
    newton_euler,
)
from core.tree.workspace import create_work

from randsys import assert_close, fd, random_system

SEEDS = list(range(12)) + [200, 201]


def _system(seed):
    n_frames = (15, 15) if seed >= 200 else (3, 15)
    return random_system(seed, n_frames=n_frames)


def _kinematics(system, q, dq):
    """Model, data after the forward pass, body inertias and composites."""
    model = system.model
    nf = model.nf
    data = create_data(model)
    forward_kinematics(model, q, dq, data)
    Ib, has_mass = np.empty((nf, 6, 6)), np.empty(nf, np.bool_)
    body_inertias(model, data, Ib, has_mass)
    composites_from_bodies(model, data, Ib, has_mass)
    return model, data, Ib, has_mass


def _work(model, Ib, has_mass):
    """A Work record holding the body inertias ``Ib``, ``has_mass``."""
    work = create_work(model)
    work.Ib[:], work.has_mass[:] = Ib, has_mass
    return work


def _pass(system, q, dq, ddq, derivatives=False):
    """tau (and its derivatives) of the tree: kinetic energy and gravity only."""
    model, data, Ib, has_mass = _kinematics(system, q, dq)
    n, nf = model.nq, model.nf
    Ap, F, tau = np.empty((n, 6)), np.empty((nf, 6)), np.empty(n)
    newton_euler(model, data, Ib, has_mass, dq, ddq, Ap, F, tau)
    if not derivatives:
        return tau
    M, dq_, dv_ = np.empty((n, n)), np.empty((n, n)), np.empty((n, n))
    mass_matrix(model, data, M)
    inverse_dynamics_derivatives(model, data, Ib, has_mass, Ap, F, dq_, dv_)
    grad, hess = np.empty(n), np.empty((n, n))
    spring_potential_derivatives(model, data, q, grad, hess)
    return tau, M, dq_, dv_, grad, hess


@pytest.mark.parametrize("seed", SEEDS)
def test_newton_euler_matches_the_euler_lagrange_form(seed):
    system, q, dq, _ = _system(seed)
    rng = np.random.default_rng(seed)
    ddq = rng.normal(size=q.size)
    tau, M, _, _, spring_grad, _ = _pass(system, q, dq, ddq, derivatives=True)
    d = system.lagrangian_derivatives(q, dq, 2)
    # L_q includes the springs (-dV_s/dq); the Newton-Euler pass covers kinetic energy and gravity
    lagrange = d.Lvv @ ddq + d.Lqv.T @ dq - (d.Lq + spring_grad)
    assert_close(tau, lagrange, "tau vs Euler-Lagrange", tol=1e-10)
    assert_close(M, d.Lvv, "mass matrix vs L_vv", tol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_adding_joint_accelerations_equals_a_pass_at_those_accelerations(seed):
    system, q, dq, _ = _system(seed)
    model, data, Ib, has_mass = _kinematics(system, q, dq)
    n, nf = model.nq, model.nf
    ddq = np.random.default_rng(seed + 2).normal(size=n)
    Ap, F, tau = np.empty((n, 6)), np.empty((nf, 6)), np.empty(n)
    newton_euler(model, data, Ib, has_mass, dq, ddq, Ap, F, tau)
    Ap0, F0 = np.empty((n, 6)), np.empty((nf, 6))
    newton_euler(model, data, Ib, has_mass, dq, np.zeros(n), Ap0, F0, tau)
    assert np.abs(F0 - F).max() > 1e-3        # the accelerations matter in this comparison
    add_joint_accelerations(model, data, Ib, has_mass, ddq, Ap0, F0)
    driven = model.joint_frame >= 0
    assert_close(Ap0[driven], Ap[driven], "parent accelerations", tol=1e-12)
    assert_close(F0, F, "composite wrenches", tol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_inverse_dynamics_derivatives_match_finite_differences(seed):
    system, q, dq, _ = _system(seed)
    rng = np.random.default_rng(seed + 1)
    ddq = rng.normal(size=q.size)
    _, _, dtau_dq, dtau_dv, _, spring_hess = _pass(system, q, dq, ddq, derivatives=True)
    assert_close(dtau_dq, fd(lambda x: _pass(system, x, dq, ddq), q), "dtau/dq")
    assert_close(dtau_dv, fd(lambda x: _pass(system, q, x, ddq), dq), "dtau/d dq")
    # the spring Hessian is the derivative of the spring gradient
    grad_of = lambda x: _pass(system, x, dq, ddq, derivatives=True)[4]  # noqa: E731
    assert_close(spring_hess, fd(grad_of, q), "spring Hessian")


@pytest.mark.parametrize("seed", SEEDS)
def test_articulated_body_inverts_newton_euler(seed):
    """``articulated_body`` (O(n) forward dynamics) returns the ``ddq`` at which the
    Newton-Euler pass needs exactly the applied ``tau``, on random trees (every transform kind,
    full inertias, massless frames, centres of mass off the frames)."""
    system, q, dq, _ = random_system(seed, n_frames=(15, 15) if seed >= 200 else (3, 15),
                                      constraints=0, velocity_constraints=0, com=True)
    model, data, Ib, has_mass = _kinematics(system, q, dq)
    tau = np.random.default_rng(seed + 3).normal(size=model.nq)
    ddq = np.full(model.nq, np.nan)
    bad = articulated_body(model, data, _work(model, Ib, has_mass), dq, tau, ddq, 1e-12)
    M = _pass(system, q, dq, np.zeros(model.nq), derivatives=True)[1]
    if bad >= 0:        # a variable without inertia below it: M is singular there
        assert np.linalg.eigvalsh(M).min() <= 1e-9 * np.abs(M).max()
        return
    assert_close(_pass(system, q, dq, ddq), tau, "tau(ddq)", tol=1e-10)
    assert_close(ddq, np.linalg.solve(M, tau - _pass(system, q, dq, np.zeros(model.nq))), "ddq", tol=1e-8)


def test_articulated_body_reports_a_variable_without_inertia():
    import core
    s = core.System(gravity=[0, 0, -9.8])
    s.add_frame("a", rz="q0", mass=1.0, inertia=[1, 1, 1])
    s.add_frame("b", parent="a", offset={"translation": [1, 0, 0]}, rz="q1")   # nothing below q1
    model, data, Ib, has_mass = _kinematics(s, np.zeros(2), np.zeros(2))
    work = _work(model, Ib, has_mass)
    assert articulated_body(model, data, work, np.zeros(2), np.zeros(2), np.empty(2), 1e-12) == 1
