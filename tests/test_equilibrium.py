"""Consistent states and equilibria (core.continuous.equilibrium, MidpointVI.rest_state): projections onto
the constraints, inputs that hold a configuration, the integrator's discrete rest state."""
import numpy as np
import pytest

import core
from core import holding_inputs, project_velocity, satisfy_constraints
from core.continuous.minimal import velocity_constraint
from core.errors import EquilibriumError, SingularMatrixError
from core.examples import chain, marionette, marionette_rest_state

from randsys import random_system


@pytest.fixture(scope="module")
def double_pendulum():
    return core.load_system("double_pendulum.yaml")


@pytest.fixture(scope="module")
def puppet():
    s = marionette()
    return s, marionette_rest_state(s)


def constraint_rows(system, q):
    rows = [system.constraint(q, 1)[1]]
    if system.model.nv:
        rows.append(velocity_constraint(system, q, np.zeros(system.nq))[2])
    return np.vstack(rows)


# ------------------------------------------------------------------ satisfy_constraints
@pytest.mark.parametrize("fixed", [(), ["theta1"], [1]])
def test_satisfy_constraints_double_pendulum(double_pendulum, fixed):
    s = double_pendulum
    q0 = np.array([0.3, 1.2])
    assert abs(s.constraint(q0)[0]) > 0.1
    q = satisfy_constraints(s, q0, fixed=fixed)
    assert np.max(np.abs(s.constraint(q))) <= 1e-12
    held = [s.config_names.index(f) if isinstance(f, str) else f for f in fixed]
    assert np.array_equal(q[held], q0[held])
    assert np.array_equal(q0, [0.3, 1.2])              # the argument is not modified


def test_satisfy_constraints_marionette_holds_the_controllers(puppet):
    s, q_rest = puppet
    rng = np.random.default_rng(1)
    q0 = q_rest + 0.02 * rng.standard_normal(s.nq)
    kin = [s.config_names.index(k) for k in s.kinematic_names]
    q = satisfy_constraints(s, q0, fixed=s.kinematic_names)
    assert np.max(np.abs(s.constraint(q))) <= 1e-12
    assert np.array_equal(q[kin], q0[kin])


@pytest.mark.parametrize("seed", range(6))
def test_satisfy_constraints_random_systems(seed):
    s, q0, _, _ = random_system(seed, constraints=2, velocity_constraints=1)
    assert s.model.nh > 0          # these seeds all draw holonomic constraints (2 or 3)
    rng = np.random.default_rng(seed)
    start = q0 + 1e-2 * rng.standard_normal(s.nq)
    q = satisfy_constraints(s, start)
    h, Dh = s.constraint(q, 1)
    assert np.all(np.abs(h) <= 1e-12 * np.maximum(1.0, np.linalg.norm(Dh, axis=1)))
    # least-norm steps: the correction is small, of the size of the perturbation
    assert np.linalg.norm(q - start) < 10 * np.linalg.norm(start - q0)


def test_satisfy_constraints_without_constraints_is_a_copy():
    s = core.load_system("cartpole.yaml")
    q0 = np.array([0.1, 0.2])
    q = satisfy_constraints(s, q0)
    assert np.array_equal(q, q0) and q is not q0


def test_satisfy_constraints_errors(double_pendulum):
    s = double_pendulum
    q0 = np.array([0.3, 1.2])
    with pytest.raises(SingularMatrixError, match=r"leaves 0"):
        satisfy_constraints(s, q0, fixed=["theta1", "theta2"])
    with pytest.raises(ValueError, match=r"unknown coordinate 'elbow'.*theta1"):
        satisfy_constraints(s, q0, fixed=["elbow"])
    with pytest.raises(ValueError, match=r"index 5 in fixed is out of range"):
        satisfy_constraints(s, q0, fixed=[5])
    with pytest.raises(ValueError, match=r"named more than once"):
        satisfy_constraints(s, q0, fixed=["theta1", 0])
    with pytest.raises(ValueError, match=r"q must be a vector of 2 entries"):
        satisfy_constraints(s, [0.3, 1.2, 0.0])
    # the lower mass cannot reach 1 m from the anchor with the upper link pointing up
    with pytest.raises(EquilibriumError, match=r"stalled at \|h\|") as info:
        satisfy_constraints(s, [np.pi, 0.0], fixed=["theta1"])
    assert info.value.residual > 0.1
    with pytest.raises(EquilibriumError, match=r"no convergence in 1 iterations"):
        satisfy_constraints(s, q0, max_iter=1)


# ------------------------------------------------------------------ project_velocity
@pytest.mark.parametrize("seed", range(6))
def test_project_velocity_is_the_least_norm_change(seed):
    s, q0, _, _ = random_system(seed, constraints=2, velocity_constraints=1)
    C = constraint_rows(s, q0)
    rng = np.random.default_rng(100 + seed)
    dq0 = rng.standard_normal(s.nq)
    dq = project_velocity(s, q0, dq0)
    assert np.max(np.abs(C @ dq)) <= 1e-12 * max(1.0, np.linalg.norm(dq0)) * np.abs(C).max()
    # least-norm: the change lies in the row space of C (orthogonal to the tangent space)
    _, sv, Vt = np.linalg.svd(C)
    tangent = Vt[int(np.sum(sv > 1e-10 * sv[0])):]
    assert np.max(np.abs(tangent @ (dq - dq0))) <= 1e-12 * np.linalg.norm(dq0)
    np.testing.assert_allclose(project_velocity(s, q0, dq), dq, atol=1e-13)   # a projection


def test_project_velocity_holds_fixed_velocities(puppet):
    s, q = puppet
    rng = np.random.default_rng(2)
    dq0 = rng.standard_normal(s.nq)
    kin = [s.config_names.index(k) for k in s.kinematic_names]
    free = [i for i in range(s.nq) if i not in kin]
    dq = project_velocity(s, q, dq0, fixed=s.kinematic_names)
    Dh = s.constraint(q, 1)[1]
    assert np.max(np.abs(Dh @ dq)) <= 1e-11
    assert np.array_equal(dq[kin], dq0[kin])
    # least-norm change of the free velocities: in the row space of Dh's free columns
    J = Dh[:, free]
    change = dq[free] - dq0[free]
    np.testing.assert_allclose(J.T @ np.linalg.lstsq(J.T, change, rcond=None)[0], change, atol=1e-12)


def test_project_velocity_errors(double_pendulum):
    s = double_pendulum
    q = satisfy_constraints(s, [0.3, 1.2])
    with pytest.raises(SingularMatrixError, match=r"leaves 0"):
        project_velocity(s, q, [1.0, 1.0], fixed=[0, 1])
    with pytest.raises(ValueError, match=r"dq must be a vector of 2 entries"):
        project_velocity(s, q, [1.0])
    with pytest.raises(ValueError, match=r"unknown coordinate 'x'"):
        project_velocity(s, q, [1.0, 1.0], fixed="x")


# ------------------------------------------------------------------ holding_inputs
def test_holding_inputs_pendulum_is_gravity_torque():
    s = core.load_system("pendulum.yaml")
    u, residual = holding_inputs(s, [0.7])
    np.testing.assert_allclose(u, [9.8 * np.sin(0.7)], rtol=1e-14)
    assert residual <= 1e-12
    assert abs(s.qdd([0.7], [0.0], u)[0]) <= 1e-12


def test_holding_inputs_fully_actuated_chain():
    s = chain(4)
    q = np.random.default_rng(3).uniform(-1.5, 1.5, s.nq)
    u, residual = holding_inputs(s, q)
    assert residual <= 1e-12
    assert np.max(np.abs(s.qdd(q, np.zeros(s.nq), u))) <= 1e-12


def test_holding_inputs_constrained_double_pendulum(double_pendulum):
    s = double_pendulum
    q = satisfy_constraints(s, [0.5, 1.0], fixed=["theta1"])
    u, residual = holding_inputs(s, q)
    assert residual <= 1e-12 and u.shape == (1,)
    assert np.max(np.abs(s.qdd(q, np.zeros(2), u))) <= 1e-12


def test_holding_inputs_marionette_rest_state(puppet):
    s, q = puppet
    u, residual = holding_inputs(s, q)
    assert u.shape == (s.nu,) and residual <= 1e-8
    zero_kin = np.zeros(len(s.kinematic_names))
    assert np.max(np.abs(s.qdd(q, np.zeros(s.nq), np.concatenate([u, zero_kin])))) <= 1e-8


def test_holding_inputs_underactuated_cartpole_reports_the_residual():
    s = core.load_system("cartpole.yaml")
    u, residual = holding_inputs(s, [0.0, 0.5])
    # the pole's gravity torque m g l sin(theta), which the cart force cannot cancel
    np.testing.assert_allclose(residual, 0.2 * 9.81 * 0.5 * np.sin(0.5), rtol=1e-12)
    assert np.all(np.abs(u) <= 1e-12)
    assert abs(s.qdd([0.0, 0.5], [0.0, 0.0], u)[1]) > 1.0
    with pytest.raises(EquilibriumError, match=r"cannot hold this configuration") as info:
        holding_inputs(s, [0.0, 0.5], tol=1e-9)
    assert info.value.residual == pytest.approx(residual)
    u, residual = holding_inputs(s, [0.3, 0.0], tol=1e-9)         # upright: held without force
    assert residual <= 1e-12 and np.all(np.abs(u) <= 1e-12)


def test_holding_inputs_errors(double_pendulum):
    with pytest.raises(ValueError, match=r"q must be a vector of 2 entries"):
        holding_inputs(double_pendulum, [0.1])
    with pytest.raises(ValueError, match=r"holonomic constraint row 0.*holding_inputs"):
        holding_inputs(double_pendulum, [0.3, 1.2])


# ------------------------------------------------------------------ the discrete rest state
def drift(vi, x, u, steps):
    """Largest ``|q_k - q_0|`` and ``|p_k - p_0|`` over ``steps`` steps."""
    dq, dp, xk = 0.0, 0.0, x
    for _ in range(steps):
        xk = vi.step(xk, u)
        dq = max(dq, float(np.max(np.abs(xk[:vi.nq] - x[:vi.nq]))))
        dp = max(dp, float(np.max(np.abs(xk[vi.nq:] - x[vi.nq:]))))
    return dq, dp


@pytest.mark.parametrize("model", ["pendulum", "double_pendulum", "marionette"])
def test_rest_state_is_a_fixed_point(model, double_pendulum, puppet):
    if model == "pendulum":
        s, q = core.load_system("pendulum.yaml"), np.array([0.7])
    elif model == "double_pendulum":
        s = double_pendulum
        q = satisfy_constraints(s, [0.5, 1.0], fixed=["theta1"])
    else:
        s, q = puppet
    # the DEL solve starts from q + dt M^-1 p and stops at its tolerance: the fixed point is
    # reproduced to that tolerance (1e-11 by default: about 3e-11 on the double pendulum)
    vi = core.MidpointVI(s, 0.01, tolerance=1e-13)
    assert holding_inputs(s, q)[1] <= 1e-8
    x, u = vi.rest_state(q), vi.rest_input(q)
    np.testing.assert_array_equal(x[vi.nq:vi.nq + vi.nd], vi.discrete_momentum(q, q))
    dq, dp = drift(vi, x, u, 50)
    # p = D2 L_d responds to q with M / dt: rounding in q (1e-14) shows as 1e-11 in p on the
    # marionette (whose rest state balances to 2e-13)
    M = s.lagrangian_derivatives(q, np.zeros(s.nq), 2).Lvv
    assert dq < 1e-12 and dp < 1e-12 * max(1.0, np.abs(M).max() / vi.dt)
    # the continuous rest momentum (p = 0) is not at rest in the discrete map: p jumps by
    # dt/2 L_q; q moves too unless, as on the input-free marionette hanging from its strings,
    # the strings' impulse absorbs that jump in the first step
    x0 = vi.state(q, vi.momentum(q, np.zeros(s.nq)))
    dq0, dp0 = drift(vi, x0, u, 50)
    assert dp0 > 1e-4 and (dq0 > 1e-6 or model == "marionette")


def test_rest_state_pendulum_drift_figures():
    """The measured figures: p = 0 leaves rest by dt/2 L_q in p at once, then swings."""
    s = core.load_system("pendulum.yaml")
    vi = core.MidpointVI(s, 0.01)
    q = np.array([0.7])
    u = vi.rest_input(q)
    p_rest = vi.rest_state(q)[1]
    np.testing.assert_allclose(p_rest, -0.005 * 9.8 * np.sin(0.7), rtol=1e-13)   # dt/2 L_q
    x0 = vi.state(q, vi.momentum(q, [0.0]))
    q_after = [x0[0]]
    for _ in range(10):
        x0 = vi.step(x0, u)
        q_after.append(x0[0])
    assert abs(q_after[-1] - 0.7) > 1e-4


def test_rest_state_errors(double_pendulum):
    vi = core.MidpointVI(double_pendulum, 0.01)
    with pytest.raises(ValueError, match=r"holonomic constraint row 0.*rest state"):
        vi.rest_state([0.3, 1.2])
    with pytest.raises(ValueError, match=r"q must be a vector of 2 entries"):
        vi.rest_state([0.3])
    q = satisfy_constraints(double_pendulum, [0.5, 1.0])
    with pytest.raises(ValueError, match=r"u must be a vector of 1 entries"):
        vi.rest_input(q, [1.0, 2.0])
