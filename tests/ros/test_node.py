"""The mechnode node over real rclpy + Fast DDS on loopback, started as a subprocess from its
parameter file (``python -m mechnode --ros-args --params-file config/cartpole_params.yaml``) in a
namespace of its own on this run's ROS_DOMAIN_ID, driven through its lifecycle services.

Every answer is compared with the library (core) computed here. Tests run in file order on
one node process; the last one walks the lifecycle down to finalized.
"""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

import core
from mechnode.testing.harness import DEFAULT_PARAMS

from nodeproc import FIRST_CALL_TIMEOUT, TIMEOUT, NodeProcess

# slow: starts a node process (it loads the numba kernels)
pytestmark = pytest.mark.slow

DT = 0.01
Q_PARAM, R_PARAM = np.diag([10.0, 10.0, 1.0, 10.0]), np.array([[0.1]])
JOINTS = ["cart_joint", "pole_joint"]


@pytest.fixture(scope="module")
def vi():
    return core.MidpointVI(core.load_system("cartpole.yaml"), DT)


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    from mechnode_interfaces.srv import GetModel
    h = NodeProcess(rclpy_mod, DEFAULT_PARAMS, f"/test_node_{os.getpid()}",
                    tmp_path_factory.mktemp("node") / "mechnode.log")
    try:
        h.lifecycle.wait(60.0)
        # (idempotent, and the first call of a new client: a reply the service sends before it has
        # matched the client's reader is lost, so it is sent again after 2 s)
        h.unconfigured_model = h.call(GetModel, "get_model", GetModel.Request(), resend_after=2.0)
        h.states = h.bring_up()
        yield h
    finally:
        h.close()


def _matrix(a):
    from mechnode.ros.conversions import matrix_msg
    return matrix_msg(a)


def _arr(m):
    from mechnode.ros.conversions import matrix_from_msg, tensor_from_msg
    return tensor_from_msg(m) if hasattr(m, "shape") else matrix_from_msg(m)


def _library_gains(vi, X, U, Q, R, Q_N=None):
    A, B = vi.linearize_trajectory(X, U)
    if Q_N is None:
        Q_N = core.dlqr(A[-1], B[-1], Q, R)[1]
    return core.tvlqr(A, B, Q, R, Q_N)[0]


# ------------------------------------------------------------------------------ start-up
def test_node_from_params_file_reaches_active(node):
    assert node.states == ["unconfigured", "inactive", "active"]
    assert not node.unconfigured_model.success
    assert "configure" in node.unconfigured_model.message
    assert "configured: model 'cartpole.yaml'" in node.log()


def test_get_model(node):
    from mechnode_interfaces.srv import GetModel
    r = node.call(GetModel, "get_model", GetModel.Request())
    assert r.success, r.message
    assert list(r.config_names) == ["x", "theta"]
    assert list(r.dynamic_config_names) == ["x", "theta"] and list(r.kinematic_config_names) == []
    assert list(r.input_names) == ["cart_force"]
    assert list(r.continuous_state_names) == ["x", "theta", "dx", "dtheta"]
    assert list(r.discrete_state_names) == ["x", "theta", "p_x", "p_theta"]
    assert r.dt == DT
    assert "cart_joint" in r.conventions and "underactuated" in r.message
    assert r.conventions.startswith(core.CONVENTIONS)   # written once, in core


# ------------------------------------------------------------------------------ Linearize
def test_linearize_equals_library(node, vi):
    from mechnode_interfaces.srv import Linearize
    system = vi.system
    q, dq, u = np.array([0.1, 0.3]), np.array([-0.2, 0.5]), np.array([1.5])
    # (each first request of a kind may wait for its kernels' compilation on a cold cache)
    r = node.call(Linearize, "linearize", Linearize.Request(q=q.tolist(), dq=dq.tolist(), u=u.tolist(),
                                                             discrete=False, order=1), timeout=FIRST_CALL_TIMEOUT)
    assert r.success, r.message
    A, B = system.linearize(q, dq, u)
    np.testing.assert_allclose(_arr(r.a), A, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_arr(r.b), B, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(r.f), np.concatenate([dq, system.qdd(q, dq, u)]), rtol=1e-12)
    assert list(r.state_names) == system.state_names and list(r.input_names) == ["cart_force"]

    p = vi.momentum(q, dq)
    for order in (1, 2):
        request = Linearize.Request(q=q.tolist(), p=p.tolist(), u=u.tolist(), discrete=True, order=order)
        r = node.call(Linearize, "linearize", request, timeout=FIRST_CALL_TIMEOUT)
        assert r.success, r.message
        x = vi.state(q, p)
        want = vi.linearize2(x, u) if order == 2 else vi.linearize(x, u)
        np.testing.assert_allclose(_arr(r.a), want[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(_arr(r.b), want[1], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(np.asarray(r.f), vi.step(x, u), rtol=1e-12, atol=1e-14)
        assert list(r.state_names) == vi.state_names
        if order == 2:
            assert list(r.second_order.shape) == [4, 5, 5]
            np.testing.assert_allclose(_arr(r.second_order), want[2], rtol=1e-12, atol=1e-14)
        else:
            assert len(r.second_order.data) == 0
    # minimal coordinates of an unconstrained system are all coordinates
    r = node.call(Linearize, "linearize", Linearize.Request(q=q.tolist(), dq=dq.tolist(), u=u.tolist(),
                                                             minimal=True), timeout=FIRST_CALL_TIMEOUT)
    assert r.success and "unconstrained" in r.message


# ------------------------------------------------------------------------------ ComputeGains
def test_compute_gains_equals_library_tvlqr(node, vi):
    from mechnode_interfaces.srv import ComputeGains
    rng = np.random.default_rng(7)
    N = 40
    X, U = 0.05 * rng.standard_normal((N + 1, 4)), rng.standard_normal((N, 1))
    Q, R, QN = np.diag([3.0, 4.0, 0.5, 0.7]), np.array([[0.2]]), np.diag([9.0, 8.0, 7.0, 6.0])
    req = ComputeGains.Request(x_ref=_matrix(X), u_ref=_matrix(U), q=_matrix(Q), r=_matrix(R),
                               q_n=_matrix(QN), state_convention=0)
    r = node.call(ComputeGains, "compute_gains", req)
    assert r.success, r.message
    s = r.schedule
    K = _arr(s.k)
    assert K.shape == (N + 1, 1, 4) and s.state_convention == 0
    np.testing.assert_allclose(K[:N], _library_gains(vi, X, U, Q, R, QN), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(K[N], K[N - 1])
    np.testing.assert_array_equal(_arr(s.x_ref), X)
    np.testing.assert_array_equal(_arr(s.u_ref)[:N], U)
    np.testing.assert_allclose(np.asarray(s.times), DT * np.arange(N + 1))
    assert list(s.joint_names) == JOINTS and list(s.state_names) == vi.state_names

    # empty weights: the node's parameters (Q, R) and the DARE terminal weight
    r = node.call(ComputeGains, "compute_gains", ComputeGains.Request(x_ref=_matrix(X), u_ref=_matrix(U)))
    assert r.success, r.message
    np.testing.assert_allclose(_arr(r.schedule.k)[:N], _library_gains(vi, X, U, Q_PARAM, R_PARAM),
                               rtol=1e-9, atol=1e-12)


def test_compute_gains_positions_only_and_qdot_convention(node, vi):
    from mechnode_interfaces.srv import ComputeGains

    from mechnode.logic.gains import schedule_in_qdot
    from mechnode.logic.plant import Plant
    from mechnode.logic.weights import Weights
    t = DT * np.arange(101)
    pos = np.stack([0.2 * t, 0 * t], 1)
    r = node.call(ComputeGains, "compute_gains", ComputeGains.Request(x_ref=_matrix(pos)))
    assert r.success, r.message
    assert "positions only" in r.message
    X = _arr(r.schedule.x_ref)
    U = _arr(r.schedule.u_ref)[:-1]
    np.testing.assert_allclose(core.simulate_open_loop(vi.step, X[0], U), X, atol=1e-8)   # feasible

    rng = np.random.default_rng(8)
    Xqd, U = 0.05 * rng.standard_normal((31, 4)), rng.standard_normal((30, 1))
    Qqd, R = np.diag([10.0, 10.0, 1.0, 1.0]), np.array([[0.1]])
    r = node.call(ComputeGains, "compute_gains", ComputeGains.Request(
        x_ref=_matrix(Xqd), u_ref=_matrix(U), q=_matrix(Qqd), r=_matrix(R), q_n=_matrix(2 * Qqd),
        state_convention=1))
    assert r.success, r.message
    assert r.schedule.state_convention == 1
    assert list(r.schedule.state_names) == ["x", "theta", "dx", "dtheta"]
    local = schedule_in_qdot(Plant.load("cartpole.yaml", DT), Xqd, U, Weights(Qqd, R, 2 * Qqd), JOINTS)
    np.testing.assert_allclose(_arr(r.schedule.k), local.K, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------ PlanTrajectory
def test_plan_trajectory(node, vi):
    from mechnode_interfaces.srv import PlanTrajectory
    t = DT * np.arange(151)
    Xref = np.zeros((151, 4))
    Xref[:, 0] = 0.2 * np.clip(t - 0.2, 0, 1)
    r = node.call(PlanTrajectory, "plan_trajectory", PlanTrajectory.Request(
        x_ref=_matrix(Xref), method=PlanTrajectory.Request.FIRST_ORDER, max_iterations=3), timeout=120)
    assert r.success and re.match(r"first_order: (not )?converged after \d+ iterations", r.message), r.message
    X, U = _arr(r.x), _arr(r.u)
    assert X.shape == (151, 4) and U.shape == (150, 1) and 0 < r.iterations <= 3 and np.isfinite(r.cost)
    np.testing.assert_allclose(core.simulate_open_loop(vi.step, Xref[0], U), X, atol=1e-8)
    np.testing.assert_allclose(_arr(r.schedule.k)[:150], _library_gains(vi, X, U, Q_PARAM, R_PARAM),
                               rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------------ topics
def _reference_msg(start_ns=0):
    from mechnode.ros.conversions import joint_trajectory
    t = np.linspace(0.0, 3.0, 31)
    cart = 0.3 * np.clip((t - 0.5) / 2.0, 0, 1)
    # joints deliberately in the other order than the model: mapping is by name
    return joint_trajectory(["pole_joint", "cart_joint"], t, np.stack([0 * t, cart], 1), start_ns=start_ns)


@pytest.fixture(scope="module")
def schedule(node):
    """Publish a reference on the topic; the GainSchedule the node publishes in return."""
    from mechnode_interfaces.msg import GainSchedule
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from trajectory_msgs.msg import JointTrajectory
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    got = []
    node.client.create_subscription(GainSchedule, f"{node.fqn}/gain_schedule", got.append, latched)
    pub = node.client.create_publisher(JointTrajectory, f"{node.fqn}/reference", latched)
    node.wait(lambda: pub.get_subscription_count() > 0, "the node's reference subscription")
    t0 = time.monotonic()
    pub.publish(_reference_msg())
    node.wait(lambda: got, "the GainSchedule on the schedule topic", timeout=120)
    node.reference_publisher = pub
    return got[0], time.monotonic() - t0


def test_reference_topic_yields_schedule_equal_to_library_tvlqr(node, vi, schedule):
    from mechnode.ros.conversions import stamp_ns
    msg, seconds = schedule
    X, U, K = _arr(msg.x_ref), _arr(msg.u_ref), _arr(msg.k)
    N = X.shape[0] - 1
    assert N == 300 and K.shape == (N + 1, 1, 4) and msg.state_convention == 0
    assert list(msg.joint_names) == JOINTS and msg.dt == DT
    assert stamp_ns(msg.header.stamp) > 0                      # zero stamp -> the start time
    np.testing.assert_allclose(np.asarray(msg.times), DT * np.arange(N + 1), atol=1e-12)
    # made feasible (cart-pole is underactuated: optimizer): a rollout of the integrator
    np.testing.assert_allclose(core.simulate_open_loop(vi.step, X[0], U[:N]), X, atol=1e-8)
    np.testing.assert_allclose(X[:, 0], 0.3 * np.clip((DT * np.arange(N + 1) - 0.5) / 2.0, 0, 1), atol=0.05)
    np.testing.assert_allclose(K[:N], _library_gains(vi, X, U[:N], Q_PARAM, R_PARAM), rtol=1e-9, atol=1e-12)
    node.wait_log(r"schedule #1 published: 301 knots")
    print(f"reference -> schedule received: {seconds * 1e3:.0f} ms (300 knots, optimizer)")


def test_state_message_yields_command_of_the_tracking_law(node, vi, schedule):
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from mechnode.ros.conversions import joint_state, stamp_ns
    from mechnode.ros.node import COMMAND_QOS
    msg = schedule[0]
    X, U, K = _arr(msg.x_ref), _arr(msg.u_ref), _arr(msg.k)
    start = stamp_ns(msg.header.stamp)
    commands = []
    node.client.create_subscription(Float64MultiArray, f"{node.ns}/effort_controller/commands",
                                    lambda m: commands.append(np.asarray(m.data)), COMMAND_QOS)
    pub = node.client.create_publisher(JointState, f"{node.ns}/joint_states", qos_profile_sensor_data)
    node.wait(lambda: pub.get_subscription_count() > 0, "the node's JointState subscription")
    q, dq = np.array([0.05, 0.02]), np.array([0.1, -0.3])
    x = np.concatenate([q, vi.momentum(q, dq)])
    clock = node.client.get_clock()
    # states are stamped now (the node refuses stale and future stamps): the knot follows the
    # clock through the 3 s schedule to its end, after which the final knot is held
    seen, sent = set(), []         # a late answer may belong to an earlier round's state
    end = time.monotonic() + 3.0 + (start - clock.now().nanoseconds) * 1e-9 + 0.5
    while (time.monotonic() < end or 300 not in seen) and time.monotonic() < end + 20:
        commands.clear()
        deadline = time.monotonic() + TIMEOUT
        # the law's command here is not zero; zeros come from the watchdog (state_timeout 0.25 s)
        # when this loop's pauses exceed it on a loaded machine
        law = lambda: [c for c in commands if np.any(c)]  # noqa: E731
        while not law() and time.monotonic() < deadline:    # sensor-data QoS: resend if lost
            sent.append(clock.now().nanoseconds)
            pub.publish(joint_state(["pole_joint", "cart_joint"], q[::-1], dq[::-1], sent[-1]))
            time.sleep(0.05)
        assert law(), f"no command of the law on the command topic: {commands}"
        got = law()[0]
        knots = sorted({min(max(int(np.floor((s - start) * 1e-9 / DT + 0.5)), 0), 300) for s in sent})
        match = [kk for kk in knots if np.allclose(got, U[kk] - K[kk] @ (x - X[kk]), rtol=1e-10, atol=1e-12)]
        assert match, f"command {got} is not the law at knots {knots}"
        seen.add(match[-1])
        time.sleep(0.1)
    assert len(seen) >= 3 and 300 in seen, seen


def test_parameters_are_validated_on_set(node):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    def set_params(*params):
        req = SetParameters.Request(parameters=[p.to_parameter_msg() for p in params])
        return node.call(SetParameters, "set_parameters", req).results

    bad = [Parameter("command_mode", value="velocity"), Parameter("timeout_action", value="explode"),
           Parameter("Q", value=[1.0, float("nan"), 1.0, 1.0]), Parameter("R", value=[1.0, 2.0]),
           Parameter("dt", value=0.02), Parameter("model", value="pendulum.yaml"),
           Parameter("state_timeout", value=-1.0), Parameter("feasibility", value="magic"),
           Parameter("joint_map", value=["x=cart"]), Parameter("state_topic", value="elsewhere"),
           Parameter("idle_action", value="drift")]
    for p, res in zip(bad, set_params(*bad), strict=True):
        assert not res.successful, f"{p.name} accepted"
        assert res.reason, f"{p.name}: no reason"
    (res,) = set_params(Parameter("Q", value=[10.0, 10.0, 1.0, 10.0]))
    assert res.successful, res.reason
    (res,) = set_params(Parameter("timeout_action", value="zero"))
    assert res.successful, res.reason


def test_diagnostics(node, schedule):
    from diagnostic_msgs.msg import DiagnosticArray
    got = []
    sub = node.client.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
    try:
        node.wait(lambda: any(s.name.startswith(f"{node.fqn}: ") for m in got for s in m.status),
                  "a mechnode DiagnosticArray on /diagnostics", timeout=5.0)
    finally:
        node.client.destroy_subscription(sub)
    status = next(s for m in got for s in m.status if s.name.startswith(f"{node.fqn}: "))
    values = {kv.key: kv.value for kv in status.values}
    for key in ("state_age_s", "schedule_time_remaining_s", "last_reference_to_schedule_s",
                "last_linearization_s", "last_riccati_s", "last_feasibility_s",
                "command_latency_median_us", "lifecycle_state"):
        assert key in values, key
    assert values["lifecycle_state"] == "active" and values["schedule_active"] == "True"


# ------------------------------------------------------------------------------ lifecycle
def test_lifecycle_transitions(node, schedule):
    from mechnode_interfaces.srv import GetModel, Linearize
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from mechnode.ros.conversions import joint_state
    from mechnode.ros.node import COMMAND_QOS
    commands = []
    node.client.create_subscription(Float64MultiArray, f"{node.ns}/effort_controller/commands",
                                    commands.append, COMMAND_QOS)
    pub = node.client.create_publisher(JointState, f"{node.ns}/joint_states", qos_profile_sensor_data)

    def send_states(seconds=0.5):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pub.publish(joint_state(JOINTS, [0.0, 0.01], [0.0, 0.0], node.client.get_clock().now().nanoseconds))
            time.sleep(0.02)

    assert node.transition("deactivate") and node.state() == "inactive"
    commands.clear()
    send_states()
    assert not commands, "commands published while inactive"
    r = node.call(Linearize, "linearize", Linearize.Request(q=[0.0, 0.0], dq=[0.0, 0.0], u=[0.0]))
    assert r.success                                  # services keep answering while inactive

    # activate recreates the subscriptions: the latched reference arrives again, a new schedule
    # is computed and commanding resumes
    mark = len(node.log())
    assert node.transition("activate") and node.state() == "active"
    node.wait_log(r"schedule #2 published", timeout=120, after=mark)
    send_states()
    assert commands, "no commands after re-activation"

    assert node.transition("deactivate") and node.transition("cleanup")
    assert node.state() == "unconfigured"
    r = node.call(GetModel, "get_model", GetModel.Request())
    assert not r.success and "configure" in r.message
    assert not node.transition("activate")            # not a valid transition from unconfigured
    assert node.state() == "unconfigured"

    assert node.transition("configure", 300) and node.transition("activate")
    assert node.state() == "active"
    assert node.call(GetModel, "get_model", GetModel.Request()).success
    assert node.transition("shutdown")
    assert node.proc.wait(timeout=10.0) == 0, "the process must exit (status 0) after shutdown"
