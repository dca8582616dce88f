"""The node's ROS-free logic (mechnode.logic.plant, .joint_map, .resampling, .feasibility, .weights,
.gains, .schedule): exact state conversion, joint mapping by name, reference resampling,
feasibility (DEL inverse dynamics / optimizer), gain schedules equal to the library's TV-LQR,
knot lookup and the control law. No rclpy here."""
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

import core
from core.examples import chain, chain_spec
from mechnode.errors import InputError
from mechnode.logic.feasibility import discrete_reference, make_feasible
from mechnode.logic.gains import STATE_Q_QDOT, gain_schedule, schedule_in_qdot
from mechnode.logic.joint_map import JointMap
from mechnode.logic.plant import (
    MAX_MODEL_BYTES,
    ModelSpecError,
    Plant,
    check_model_spec,
    load_model,
)
from mechnode.logic.resampling import Reference, resample
from mechnode.logic.schedule import Options, schedule_from_reference
from mechnode.logic.weights import Weights, weight_matrix

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DT = 0.01

# A point mass on a rotating slider in a horizontal plane: q = [theta, r], M = diag(r^2, 1),
# fully actuated (torque on theta, force on r) and singular at r = 0.
POLAR = {
    "name": "polar", "gravity": [0, 0, -9.81],
    "frames": [{"name": "arm", "parent": "world", "rz": "theta"},
               {"name": "slider", "parent": "arm", "tx": "r", "mass": 1.0}],
    "inputs": [{"type": "torque", "config": "theta"}, {"type": "torque", "config": "r", "name": "push"}],
}


@pytest.fixture(scope="module")
def cartpole():
    p = Plant.load("cartpole.yaml", DT)
    p.warm_up()
    return p


@pytest.fixture(scope="module")
def chain2():
    return Plant(chain(2), DT)


def smooth(s):
    s = np.clip(s, 0.0, 1.0)
    return s ** 3 * (10 - 15 * s + 6 * s ** 2)


# ------------------------------------------------------------------------------ separation
def test_importing_the_ros_free_modules_imports_no_rclpy():
    code = ("import sys, core, mechnode.logic.plant, mechnode.errors, mechnode.logic.joint_map, "
            "mechnode.logic.resampling, mechnode.logic.feasibility, mechnode.logic.weights, mechnode.logic.gains, "
            "mechnode.logic.schedule, mechnode.logic.lfc, mechnode.logic.replan; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rcl_interfaces')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=600)


# ------------------------------------------------------------------------------ model loading
def test_model_parameter_values_resolve_as_core_resolves_them():
    packaged = Plant.load("cartpole.yaml", 0.01)          # named as the parameter names it
    assert packaged.source == "cartpole.yaml" and packaged.text == open(core.data.model_file("cartpole.yaml")).read()
    assert Plant.load(core.data.model_file("pendulum.yaml"), 0.01).source == core.data.model_file("pendulum.yaml")
    with pytest.raises(ModelSpecError, match="neither a model file .looked in .*no_such_model.yaml"):
        load_model("no_such_model.yaml")
    s = load_model(yaml.safe_dump(chain_spec(3)))        # YAML model text
    assert s.nq == 3 and s.config_names == chain(3).config_names
    assert load_model("{name: one, frames: [{name: a, parent: world, rz: t, mass: 1.0}]}").nq == 1


def test_model_parameter_never_runs_code(tmp_path):
    """A model value that is neither a file nor YAML model text is refused without importing or
    calling anything: python:module.function(args) specs are gone."""
    marker = tmp_path / "ran"
    code = (f"import sys; from mechnode.logic.plant import load_model, check_model_spec, ModelSpecError\n"
            f"for spec in [\"python:os.system('touch {marker}')\", 'python:core.examples.chain(3)',\n"
            f"             'python:colorsys.rgb_to_hsv(1, 2, 3)', 'no_such_model.yaml', 'just words']:\n"
            f"    for fn in (check_model_spec, load_model):\n"
            f"        try:\n"
            f"            fn(spec)\n"
            f"        except ModelSpecError as exc:\n"
            f"            assert 'neither a model file' in str(exc), exc\n"
            f"        else:\n"
            f"            raise SystemExit('accepted ' + spec)\n"
            f"assert 'colorsys' not in sys.modules and 'core.examples' not in sys.modules, 'imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=600)
    assert not marker.exists()
    for value in ("'just a string'\n", "- a\n- list\n"):
        with pytest.raises(ModelSpecError, match="expected a YAML mapping"):
            check_model_spec(value)


def test_model_size_is_bounded_before_parsing(tmp_path):
    text = "name: big\n" + "#" * MAX_MODEL_BYTES
    with pytest.raises(ModelSpecError, match=f"{len(text)} bytes, more than the limit of {MAX_MODEL_BYTES}"):
        load_model(text)
    big = tmp_path / "big.yaml"
    big.write_text(text)
    with pytest.raises(ModelSpecError, match=f"model file {big} has {len(text)} bytes"):
        check_model_spec(str(big))


def test_cartpole_model(cartpole):
    assert cartpole.config_names == ["x", "theta"]
    assert cartpole.input_names == ["cart_force"]
    assert cartpole.state_names == ["x", "theta", "p_x", "p_theta"]
    assert not cartpole.fully_actuated and "underactuated" in cartpole.actuation
    assert Plant(chain(2), DT).fully_actuated
    assert not Plant(core.load_system("double_pendulum.yaml"), DT).fully_actuated


# ------------------------------------------------------------------------------ Legendre
@pytest.mark.parametrize("model", ["cartpole.yaml", "double_pendulum.yaml", "marionette.yaml"])
def test_legendre_transform_is_exact_and_invertible(model):
    plant = Plant.load(model, DT)
    rng = np.random.default_rng(1)
    q, dq = 0.3 * rng.standard_normal(plant.n), rng.standard_normal(plant.n)
    x = plant.vi.discrete_state(q, dq)
    np.testing.assert_array_equal(x[:plant.n], q)
    np.testing.assert_allclose(x[plant.n:plant.n + plant.nd], plant.vi.momentum(q, dq), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(x[plant.n + plant.nd:], dq[plant.kin])
    q2, dq2 = plant.vi.continuous_state(x)
    np.testing.assert_array_equal(q2, q)
    np.testing.assert_allclose(dq2, dq, rtol=1e-10, atol=1e-10)
    # Jacobian against central differences
    J = plant.vi.state_jacobian(q, dq)
    z, eps = np.concatenate([q, dq]), 1e-6
    Jn = np.empty_like(J)
    for i in range(z.size):
        zp, zm = z.copy(), z.copy()
        zp[i] += eps
        zm[i] -= eps
        Jn[:, i] = (plant.vi.discrete_state(zp[:plant.n], zp[plant.n:])
                    - plant.vi.discrete_state(zm[:plant.n], zm[plant.n:])) / (2 * eps)
    np.testing.assert_allclose(J, Jn, atol=1e-7 * max(1.0, np.abs(J).max()))


def test_discrete_momenta_are_the_discrete_legendre_transform(cartpole):
    rng = np.random.default_rng(2)
    Q = np.cumsum(0.01 * rng.standard_normal((6, 2)), axis=0)
    P = cartpole.vi.discrete_momenta(Q, [0.3, -0.1])
    np.testing.assert_array_equal(P[0], [0.3, -0.1])
    for k in range(1, 6):
        np.testing.assert_allclose(P[k], cartpole.vi.discrete_momentum(Q[k - 1], Q[k]), rtol=1e-13, atol=1e-15)


def test_singular_mass_matrix_is_reported():
    plant = Plant(core.load_system(POLAR), DT)
    assert plant.fully_actuated
    with pytest.raises(core.errors.SingularMatrixError):
        plant.vi.continuous_state([0.0, 0.0, 0.1, 0.0])
    with pytest.raises(core.errors.IntegratorError, match="singular"):
        plant.vi.linearize(plant.vi.state([0.0, 0.0], [0.0, 0.0]), np.zeros(2))
    with pytest.raises(core.errors.SingularMatrixError):
        plant.system.linearize([0.0, 0.0], [0.0, 0.0], [0.0, 0.0])


# ------------------------------------------------------------------------------ the plant
@pytest.mark.parametrize("model", ["cartpole.yaml", "marionette.yaml"])
def test_plant_sizes_and_names_are_the_integrators(model):
    plant = Plant.load(model, DT)
    vi, system = plant.vi, plant.system
    assert (plant.n, plant.nd, plant.nk, plant.m, plant.nx, plant.nu) == (
        system.nq, vi.nd, vi.nk, system.nu, vi.nx, vi.nu)
    assert plant.n == plant.nd + plant.nk and plant.nx == plant.n + plant.nd + plant.nk
    np.testing.assert_array_equal(plant.dyn, vi.dynamic_index)
    np.testing.assert_array_equal(plant.kin, vi.kinematic_index)
    assert list(plant.state_names) == list(vi.state_names)
    assert list(plant.input_names) == list(vi.input_names)
    assert list(plant.continuous_state_names) == list(system.state_names)
    assert plant.with_dt(DT) is plant and plant.with_dt(2 * DT).dt == 2 * DT


def test_overflowing_step_is_an_arithmetic_error(cartpole):
    with pytest.raises(ArithmeticError):      # a rejected trial for the optimizer's line search
        cartpole.vi.step(np.array([0, 0, 1e200, 0.0]), np.zeros(1))


# ------------------------------------------------------------------------------ joint names
def test_joint_map_by_name_never_by_index():
    jm = JointMap(["x", "theta"], ["x:cart_joint", "theta:pole_joint"])
    assert jm.joint_names == ["cart_joint", "pole_joint"]
    q, dq, unknown = jm.state(["pole_joint", "extra", "cart_joint"], [0.2, 9.0, 1.0], [0.3, 9.0, 2.0])
    np.testing.assert_array_equal(q, [1.0, 0.2])
    np.testing.assert_array_equal(dq, [2.0, 0.3])
    assert unknown == ("extra",)
    with pytest.raises(InputError, match="lacks joint"):
        jm.state(["cart_joint", "other"], [0, 0], [0, 0])
    with pytest.raises(InputError, match="2 names but 1 positions"):
        jm.state(["cart_joint", "pole_joint"], [0.0], [0.0, 0.0])
    with pytest.raises(InputError, match="velocities"):
        jm.state(["cart_joint", "pole_joint"], [0.0, 0.0], [])
    with pytest.raises(InputError, match="non-finite.*pole_joint"):
        jm.state(["cart_joint", "pole_joint"], [0.0, np.nan], [0.0, 0.0])
    with pytest.raises(InputError, match="twice"):
        jm.state(["cart_joint", "cart_joint", "pole_joint"], [0, 0, 0], [0, 0, 0])
    for bad in (["x=cart"], ["nope:j"], ["x:a", "x:b"], ["x:j", "theta:j"]):
        with pytest.raises(InputError):
            JointMap(["x", "theta"], bad)


# ------------------------------------------------------------------------------ references
def test_resample_onto_dt_grid():
    t = np.array([0.0, 0.5, 1.0, 1.234])
    ref = Reference(t, np.stack([t ** 2, -t], 1))
    tk, Q, dQ = resample(ref, 0.1)
    np.testing.assert_allclose(tk, 0.1 * np.arange(13))
    np.testing.assert_allclose(Q[:, 1], -tk, atol=1e-12)      # PCHIP reproduces a line
    # with velocities: cubic Hermite, exact for cubics
    c = np.array([0.3, -1.0, 0.5, 0.2])
    poly, dpoly = np.polynomial.Polynomial(c), np.polynomial.Polynomial(c).deriv()
    ref = Reference(t, poly(t)[:, None], dpoly(t)[:, None])
    tk, Q, dQ = resample(ref, 0.01)
    np.testing.assert_allclose(Q[:, 0], poly(tk), atol=1e-12)
    np.testing.assert_allclose(dQ[:, 0], dpoly(tk), atol=1e-11)
    # two points: linear; starting later than 0: knot 0 at the first point
    tk, Q, dQ = resample(Reference(np.array([0.2, 0.4]), np.array([[0.0], [1.0]])), 0.05)
    np.testing.assert_allclose(tk, [0.2, 0.25, 0.3, 0.35, 0.4])
    np.testing.assert_allclose(Q[:, 0], [0, 0.25, 0.5, 0.75, 1.0])


@pytest.mark.parametrize("times, match", [
    ([], "no points"), ([0.0, 0.2, 0.2], "increase strictly"), ([0.0, 0.3, 0.1], "increase strictly"),
    ([0.0, 0.001], "at least one time step"), ([-1.0, 0.5], "negative"), ([0.0, np.nan], "non-finite")])
def test_bad_references_are_rejected(times, match):
    ref = Reference(np.array(times, dtype=float), np.zeros((len(times), 1)))
    with pytest.raises(InputError, match=match):
        resample(ref, 0.01)


def test_huge_reference_positions_are_named_not_reported_as_infs():
    # 1e300 positions used to end in scipy's "Array must not contain infs" (the interpolant's
    # slopes overflow); the point, the variable and the value are named instead
    t = np.array([0.0, 0.5, 1.0])
    for vel in (None, np.zeros((3, 2))):
        pos = np.zeros((3, 2))
        pos[1, 1] = 1e300
        with pytest.raises(InputError, match=r"positions\[1, 1\] = 1e\+300 is too large"):
            resample(Reference(t, pos, vel), 0.01)
    with pytest.raises(InputError, match=r"velocities\[2, 0\] = -1e\+200 is too large"):
        resample(Reference(t, np.zeros((3, 2)), np.array([[0, 0], [0, 0], [-1e200, 0]])), 0.01)


def test_too_long_and_nan_references_are_rejected():
    with pytest.raises(InputError, match="max_knots"):
        resample(Reference(np.array([0.0, 100.0]), np.zeros((2, 1))), 0.01, max_knots=1000)
    with pytest.raises(InputError, match="non-finite position"):
        resample(Reference(np.array([0.0, 1.0]), np.array([[0.0], [np.inf]])), 0.01)
    jm = JointMap(["a"])
    with pytest.raises(InputError, match="every point needs"):
        jm.reference(["a"], [0.0, 1.0], np.zeros((2, 2)))


# ------------------------------------------------------------------------------ feasibility
def test_inverse_dynamics_makes_a_fully_actuated_reference_exactly_feasible(chain2):
    t = DT * np.arange(201)
    Q = np.stack([0.5 * np.sin(2 * t), 0.3 * smooth(t)], 1)
    weights = Weights(np.eye(4), np.eye(2))
    feas = make_feasible(chain2, Q, np.array([1.0, 0.0]), weights)
    assert feas.method == "inverse_dynamics" and feas.residual < 1e-12
    np.testing.assert_array_equal(feas.X[:, :2], Q)
    X = core.simulate_open_loop(chain2.vi.step, feas.X[0], feas.U)
    np.testing.assert_allclose(X, feas.X, atol=1e-9)


def test_underactuated_reference_goes_through_the_optimizer(cartpole):
    t = DT * np.arange(301)
    Q = np.stack([0.3 * smooth((t - 0.5) / 1.5), 0 * t], 1)
    weights = Weights.from_values(cartpole, [10, 10, 1, 10], [0.1])
    with pytest.raises(InputError, match="not dynamically feasible"):
        make_feasible(cartpole, Q, np.zeros(2), weights, mode="inverse_dynamics")
    feas = make_feasible(cartpole, Q, np.zeros(2), weights, max_iterations=3)
    assert feas.method == "optimizer" and feas.residual > 1e-6
    X = core.simulate_open_loop(cartpole.vi.step, feas.X[0], feas.U)
    np.testing.assert_allclose(X, feas.X, atol=1e-8)           # feasible: a rollout
    assert np.abs(feas.X[:, :2] - Q).max() < 0.1               # and close to the request
    X0, U0, _ = discrete_reference(cartpole, Q, np.zeros(2))
    none = make_feasible(cartpole, Q, np.zeros(2), weights, mode="none")
    np.testing.assert_array_equal(none.X, X0)


# ------------------------------------------------------------------------------ schedules
def test_gain_schedule_equals_library_tvlqr(cartpole):
    rng = np.random.default_rng(4)
    N = 50
    X = 0.05 * rng.standard_normal((N + 1, 4))
    U = rng.standard_normal((N, 1))
    w = Weights.from_values(cartpole, [10, 10, 1, 10], [0.1])
    s = gain_schedule(cartpole, X, U, w, ["cart_joint", "pole_joint"])
    A, B = cartpole.vi.linearize_trajectory(X, U)
    _, P = core.dlqr(A[-1], B[-1], w.Q, w.R)
    K, _ = core.tvlqr(A, B, w.Q, w.R, P)
    np.testing.assert_allclose(s.K[:N], K, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(s.K[N], s.K[N - 1])
    np.testing.assert_array_equal(s.u_ref[:N], U)
    np.testing.assert_array_equal(s.x_ref, X)
    assert s.knots == N + 1 and s.info["terminal_weight"] == "dare"
    w2 = Weights.from_values(cartpole, [10, 10, 1, 10], [0.1], [5, 5, 5, 5])
    s2 = gain_schedule(cartpole, X, U, w2, ["a", "b"])
    np.testing.assert_allclose(s2.K[:N], core.tvlqr(A, B, w2.Q, w2.R, w2.Q_N)[0], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError):
        s.K[0, 0, 0] = 1.0                                      # immutable


def test_knot_lookup_and_control_law(cartpole):
    rng = np.random.default_rng(5)
    X, U = 0.05 * rng.standard_normal((11, 4)), rng.standard_normal((10, 1))
    s = gain_schedule(cartpole, X, U, Weights(np.eye(4), np.eye(1)), ["a", "b"])
    assert [s.knot(t) for t in (-1.0, 0.0, 0.004, 0.006, 0.0149, 0.05, 0.1, 5.0, np.nan)] == \
        [0, 0, 0, 1, 1, 5, 10, 10, 0]
    q, dq = rng.standard_normal(2), rng.standard_normal(2)
    u, k, x = s.command(cartpole, 0.031, q, dq)
    assert k == 3
    xs = np.concatenate([q, cartpole.vi.momentum(q, dq)])
    np.testing.assert_allclose(x, xs, rtol=1e-13)
    np.testing.assert_allclose(u, U[3] - s.K[3] @ (xs - X[3]), rtol=1e-12)


def test_schedule_in_qdot_coordinates_is_the_exact_change_of_coordinates(cartpole):
    rng = np.random.default_rng(6)
    N = 30
    Xqd = 0.05 * rng.standard_normal((N + 1, 4))
    U = rng.standard_normal((N, 1))
    Qqd = np.diag([10.0, 10.0, 1.0, 1.0])
    w = Weights(Qqd, 0.1 * np.eye(1), 2 * Qqd)
    s = schedule_in_qdot(cartpole, Xqd, U, w, ["a", "b"])
    assert s.convention == STATE_Q_QDOT
    # the same LQR problem posed directly in [q, qdot]: A_qd = J_k+1^-1 A_k J_k, B_qd = J_k+1^-1 B_k
    Xqp = cartpole.vi.discrete_states(Xqd[:, :2], Xqd[:, 2:])
    A, B = cartpole.vi.linearize_trajectory(Xqp, U)
    J = np.stack([cartpole.vi.state_jacobian(x[:2], x[2:]) for x in Xqd])
    Aqd = np.stack([np.linalg.solve(J[k + 1], A[k] @ J[k]) for k in range(N)])
    Bqd = np.stack([np.linalg.solve(J[k + 1], B[k]) for k in range(N)])
    # the two LQR problems are the same under z_qp,k = J_k z_qd,k, so K_qd,k = K_qp,k J_k exactly
    K, _ = core.tvlqr(Aqd, Bqd, Qqd, w.R, w.Q_N)
    np.testing.assert_allclose(s.K[:N], K, rtol=1e-8, atol=1e-10)


def test_schedule_from_reference_closed_loop_converges(cartpole):
    jm = JointMap(cartpole.config_names, ["x:cart_joint", "theta:pole_joint"])
    tp = np.linspace(0, 4, 41)
    ref = jm.reference(["pole_joint", "cart_joint"], tp, np.stack([0 * tp, 0.4 * smooth((tp - 0.5) / 2)], 1))
    w = Weights.from_values(cartpole, [10, 10, 1, 10], [0.1])
    s = schedule_from_reference(cartpole, jm, ref, w, Options(optimizer_max_iterations=3))
    assert s.knots == 401 and s.info["feasibility"] == "optimizer"
    for key in ("resample_s", "feasibility_s", "linearization_s", "riccati_s", "total_s"):
        assert s.info[key] >= 0
    x0 = cartpole.vi.discrete_state([-0.1, 0.15], [0.0, 0.0])
    N = s.knots - 1
    X, _ = core.simulate_closed_loop(cartpole.vi.step, x0, s.x_ref, s.u_ref[:N], s.K[:N])
    err = np.linalg.norm(X[:, :2] - s.x_ref[:, :2], axis=1)
    assert err[0] > 0.15 and err[-1] < 1e-3


# ------------------------------------------------------------------------------ weights
def test_weight_validation():
    np.testing.assert_array_equal(weight_matrix([1, 2], 2, "Q"), np.diag([1.0, 2.0]))
    np.testing.assert_array_equal(weight_matrix([2, 1, 1, 2], 2, "Q"), [[2, 1], [1, 2]])
    for values, match in (([1, 2, 3], "needs 2"), ([1, np.nan], "non-finite"),
                          ([1, 2, 3, 4], "symmetric"), ([1, -1], "semi-definite")):
        with pytest.raises(InputError, match=match):
            weight_matrix(values, 2, "Q")
    with pytest.raises(InputError, match="positive definite"):
        weight_matrix([1, 0], 2, "R", definite=True)


# ------------------------------------------------------------------------------ LFC form
@pytest.mark.parametrize("model", ["cartpole", "chain2"])
@pytest.mark.parametrize("in_qdot", [False, True])
def test_lfc_form_is_our_law_to_first_order(model, in_qdot, request):
    """tau = u_ff + K_lfc (z_ref - z) equals F_u times our law u(z) at the reference, and its
    Jacobian is our law's (central differences of the exact law, in [q, qdot])."""
    from mechnode.logic.lfc import lfc_effort, lfc_schedule
    plant = request.getfixturevalue(model)
    n, N = plant.n, 30
    rng = np.random.default_rng(3)
    Q = 0.3 * np.sin(np.linspace(0, 2, N + 1)[:, None] + np.arange(n))
    dQ = np.gradient(Q, DT, axis=0)
    U = rng.normal(size=(N, plant.nu))
    names = [f"j{i}" for i in range(n)]
    if in_qdot:
        sched = schedule_in_qdot(plant, np.hstack([Q, dQ]), U, Weights.from_values(plant, np.ones(2 * n),
                                 np.ones(plant.nu), ()), names)
    else:
        X = plant.vi.discrete_states(Q, dQ)
        sched = gain_schedule(plant, X, U, Weights.from_values(plant, np.ones(plant.nx), np.ones(plant.nu), ()),
                              names)
    lfc = lfc_schedule(plant, sched)
    Fu = plant.system.input_matrix(np.zeros(n))
    assert lfc.K.shape == (N + 1, n, 2 * n) and lfc.joint_names == tuple(names)
    for k in (0, 7, N):
        t = sched.times[k]
        z_ref = np.concatenate([lfc.q_ref[k], lfc.v_ref[k]])
        np.testing.assert_allclose(z_ref, np.concatenate([Q[k], dQ[k]]), atol=1e-9)

        def ours(z, k=k, t=t):
            if in_qdot:         # the law on [q, qdot] itself (Schedule.command is for [q, p, v])
                return Fu @ (sched.u_ref[k] - sched.K[k] @ (z - sched.x_ref[k]))
            u, kk, _ = sched.command(plant, t, z[:n], z[n:])
            assert kk == k
            return Fu @ u
        np.testing.assert_allclose(lfc_effort(lfc, k, lfc.q_ref[k], lfc.v_ref[k]), ours(z_ref), atol=1e-9)
        eps = 1e-6
        J = np.stack([(ours(z_ref + eps * e) - ours(z_ref - eps * e)) / (2 * eps) for e in np.eye(2 * n)], 1)
        # tau = u_ff + K (z_ref - z): d tau / dz = -K
        np.testing.assert_allclose(-lfc.K[k], J, rtol=1e-6, atol=1e-6 * np.abs(J).max())
        assert np.abs(lfc.K[k]).max() > 0.1                   # a law, not zeros
    # rows of joints no input acts on are zero (the cart-pole's pole)
    unactuated = ~Fu.any(axis=1)
    assert not lfc.K[:, unactuated].any() and not lfc.u_ff[:, unactuated].any()


def test_lfc_form_refuses_models_without_joint_efforts():
    from mechnode.logic.lfc import check_lfc_model
    spec = {"name": "m", "frames": [{"name": "a", "parent": "world", "tx": "x", "mass": 1.0}],
            "inputs": [{"type": "force", "frame": "a", "axis": "x", "name": "push"}]}
    with pytest.raises(InputError, match=r"needs joint torque/force inputs; \['push'\] act on frames"):
        check_lfc_model(Plant(core.load_system(spec), DT))
