"""Bad input never kills the node: each case gets a logged warning or ``success: false`` with the
reason, and the node keeps serving (services answer, states still become commands).

The node runs as a subprocess on a fully actuated model that is singular at r = 0: a point mass
on a rotating slider, q = [theta, r], M = diag(r^2, 1), joints named base_joint / slide_joint.
References are made feasible by DEL inverse dynamics here (the fully actuated path).
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import core

from nodeproc import FIRST_CALL_TIMEOUT, POLAR_YAML, TIMEOUT, NodeProcess

# slow: starts a node process (it loads the numba kernels)
pytestmark = pytest.mark.slow

DT = 0.01
JOINTS = ["base_joint", "slide_joint"]
PARAMS_YAML = """\
/**/mechnode:
  ros__parameters:
    model: {model}
    dt: 0.01
    joint_map: ["theta:base_joint", "r:slide_joint"]
    Q: [10.0, 10.0, 1.0, 1.0]
    R: [0.1, 0.1]
    state_timeout: 0.3
    timeout_action: zero
"""


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_input")
    (d / "polar.yaml").write_text(POLAR_YAML)
    (d / "params.yaml").write_text(PARAMS_YAML.format(model=d / "polar.yaml"))
    h = NodeProcess(rclpy_mod, str(d / "params.yaml"), f"/test_bad_{os.getpid()}", d / "mechnode.log")
    try:
        assert h.bring_up()[-1] == "active"
        _setup_io(h)
        yield h
    finally:
        h.close()


def _setup_io(h):
    h.commands = []
    h.connect_io(lambda m: h.commands.append(np.asarray(m.data)))


def _reference(names=JOINTS, times=None, positions=None):
    from mechnode.ros.conversions import joint_trajectory
    t = np.linspace(0, 2.0, 21) if times is None else np.asarray(times, dtype=float)
    if positions is None:
        positions = np.stack([0.5 * np.sin(t), 0.5 + 0.1 * t], 1)
    return joint_trajectory(names, t, positions)


def _send_state(h, names, pos, vel, stamp=None):
    """A JointState stamped now (the node refuses unstamped and stale states)."""
    from mechnode.ros.conversions import joint_state
    stamp = h.client.get_clock().now().nanoseconds if stamp is None else stamp
    h.state_pub.publish(joint_state(names, pos, vel, stamp))


def _commands_flow(h, what=""):
    """A valid state still becomes a command (resends: sensor-data QoS)."""
    h.commands.clear()
    deadline = time.monotonic() + TIMEOUT
    while not h.commands and time.monotonic() < deadline:
        _send_state(h, JOINTS, [0.0, 0.5], [0.0, 0.0])
        time.sleep(0.03)
    assert h.commands, f"no command for a valid JointState {what}"
    assert np.all(np.isfinite(h.commands[-1])) and h.commands[-1].size == 2


def _still_serving(h):
    from mechnode_interfaces.srv import Linearize
    h.check_alive()
    # (the first call may compile the linearization on a cold cache: FIRST_CALL_TIMEOUT)
    r = h.call(Linearize, "linearize", Linearize.Request(q=[0.1, 0.5], dq=[0.0, 0.1], u=[0.0, 0.0]),
               timeout=FIRST_CALL_TIMEOUT)
    assert r.success, r.message


def _reject_reference(h, msg, pattern):
    mark = len(h.log())
    n = len(h.schedules)
    h.ref_pub.publish(msg)
    h.wait_log(r"reference rejected.*" + pattern, after=mark)
    assert len(h.schedules) == n, "a bad reference produced a schedule"
    _still_serving(h)


# ------------------------------------------------------------------------------ references
def test_valid_reference_by_inverse_dynamics(node):
    """Baseline: a good reference gives a schedule (fully actuated: DEL inverse dynamics) whose
    inputs reproduce the reference exactly, and states then become commands."""
    from mechnode.ros.conversions import matrix_from_msg, tensor_from_msg
    node.ref_pub.publish(_reference())
    node.wait(lambda: node.schedules, "the GainSchedule", timeout=60)
    s = node.schedules[-1]
    X, U, K = matrix_from_msg(s.x_ref), matrix_from_msg(s.u_ref), tensor_from_msg(s.k)
    vi = core.MidpointVI(core.load_system(POLAR_YAML), DT)
    np.testing.assert_allclose(core.simulate_open_loop(vi.step, X[0], U[:-1]), X, atol=1e-9)
    t = DT * np.arange(X.shape[0])
    np.testing.assert_allclose(X[:, 1], 0.5 + 0.1 * t, atol=1e-9)   # the reference itself
    A, B = vi.linearize_trajectory(X, U[:-1])
    Q, R = np.diag([10.0, 10.0, 1.0, 1.0]), np.diag([0.1, 0.1])
    want = core.tvlqr(A, B, Q, R, core.dlqr(A[-1], B[-1], Q, R)[1])[0]
    np.testing.assert_allclose(K[:-1], want, rtol=1e-9, atol=1e-12)
    node.wait_log(r"feasibility inverse_dynamics")
    _commands_flow(node, "after the first reference")


def test_empty_trajectory(node):
    from trajectory_msgs.msg import JointTrajectory
    msg = JointTrajectory()
    msg.joint_names = JOINTS
    _reject_reference(node, msg, "no points")


def test_non_monotonic_trajectory(node):
    _reject_reference(node, _reference(times=[0.0, 0.5, 0.4, 1.0], positions=np.zeros((4, 2)) + [0, 0.5]),
                      "increase strictly")
    _reject_reference(node, _reference(times=[0.0, 0.5, 0.5, 1.0], positions=np.zeros((4, 2)) + [0, 0.5]),
                      "increase strictly")


def test_malformed_trajectories(node):
    from mechnode.ros.conversions import float_array
    msg = _reference()
    msg.points[3].positions = float_array([0.1])
    _reject_reference(node, msg, "point 3 has 1 positions")
    _reject_reference(node, _reference(names=["base_joint", "elbow"]), "lacks joint")
    _reject_reference(node, _reference(positions=np.full((21, 2), np.nan)), "non-finite")
    _reject_reference(node, _reference(times=[0.0, 0.001], positions=[[0, 0.5], [0, 0.5]]),
                      "at least one time step")


def test_singular_reference(node):
    """Holding r = 0 makes M_k+1 singular: the schedule computation fails with the reason."""
    t = np.linspace(0, 1.0, 11)
    _reject_reference(node, _reference(times=t, positions=np.stack([0.3 * t, 0 * t], 1)),
                      r"SingularStepError: .*singular .*Sec. VII-A")
    _commands_flow(node, "after a singular reference")


# ------------------------------------------------------------------------------ JointState
@pytest.mark.parametrize("names, pos, vel, pattern", [
    (JOINTS, [0.0], [0.0, 0.0], r"2 names but 1 positions"),
    (JOINTS, [0.0, 0.5], [0.0], r"2 names but 1 velocities"),
    (JOINTS, [0.0, 0.5], [], r"velocities"),
    (JOINTS, [float("nan"), 0.5], [0.0, 0.0], r"non-finite position/velocity for \['base_joint'\]"),
    (JOINTS, [0.0, 0.5], [0.0, float("inf")], r"non-finite.*slide_joint"),
    (["wrist", "elbow"], [0.0, 0.5], [0.0, 0.0], r"lacks joint\(s\) \['base_joint', 'slide_joint'\]"),
    (["base_joint", "base_joint"], [0.0, 0.5], [0.0, 0.0], r"appears twice"),
])
def test_bad_joint_states(node, names, pos, vel, pattern):
    mark = len(node.log())
    node.commands.clear()
    for _ in range(5):
        _send_state(node, names, pos, vel)
        time.sleep(0.02)
    node.wait_log(r"JointState rejected: .*" + pattern, after=mark)
    time.sleep(0.1)
    assert not node.commands, "a rejected JointState produced a command"
    _commands_flow(node, "after a rejected JointState")
    _still_serving(node)


def test_unknown_extra_joints_are_ignored_with_a_warning(node):
    mark = len(node.log())
    node.commands.clear()
    deadline = time.monotonic() + TIMEOUT
    while not node.commands and time.monotonic() < deadline:
        _send_state(node, ["gripper", "slide_joint", "base_joint"], [9.0, 0.5, 0.0], [9.0, 0.0, 0.0])
        time.sleep(0.03)
    assert node.commands, "known joints in a message with an extra joint must still be used"
    node.wait_log(r"ignoring joint\(s\) unknown to the model: \['gripper'\]", after=mark)


# ------------------------------------------------------------------------------ services
def test_wrong_sized_and_singular_linearize_requests(node):
    from mechnode_interfaces.srv import Linearize
    cases = [
        (dict(q=[0.1], dq=[0.0, 0.0], u=[0.0, 0.0]), "q must have 2 entries"),
        (dict(q=[0.1, 0.5], dq=[0.0], u=[0.0, 0.0]), "dq must have 2 entries"),
        (dict(q=[0.1, 0.5], dq=[0.0, 0.0], u=[0.0]), "u must have 2 entries"),
        (dict(q=[0.1, 0.5], p=[0.0], u=[0.0, 0.0], discrete=True), "p must have 2 entries"),
        (dict(q=[0.1, 0.5], dq=[0.0, 0.0], u=[0.0, 0.0], order=3), "order must be 1 or 2"),
        (dict(q=[0.1, 0.5], dq=[0.0, 0.0], u=[0.0, 0.0], order=2), "discrete"),
        (dict(q=[float("nan"), 0.5], dq=[0.0, 0.0], u=[0.0, 0.0]), "not finite"),
        (dict(q=[0.1, 0.0], dq=[0.0, 0.0], u=[0.0, 0.0]), "SingularMatrixError"),
        (dict(q=[0.1, 0.0], p=[0.0, 0.0], u=[0.0, 0.0], discrete=True), "singular"),
    ]
    for fields, pattern in cases:
        # (a case may be the first of its kind: on a cold cache its answer waits for the kernel's
        # compilation, which the node's low-priority background warm-up may not have finished)
        r = node.call(Linearize, "linearize", Linearize.Request(**fields), timeout=FIRST_CALL_TIMEOUT)
        assert not r.success, f"{fields} succeeded"
        assert pattern in r.message, f"{fields}: {r.message!r}"
    _still_serving(node)


def test_wrong_sized_compute_gains_and_plan_requests(node):
    import array

    from mechnode_interfaces.msg import Matrix
    from mechnode_interfaces.srv import ComputeGains, PlanTrajectory

    from mechnode.ros.conversions import matrix_msg
    X = np.tile([0.0, 0.5, 0.0, 0.0], (11, 1))
    broken = Matrix(rows=11, cols=4, data=array.array("d", np.zeros(40).tobytes()))
    cases = [
        (ComputeGains.Request(x_ref=broken), "rows * cols"),
        (ComputeGains.Request(x_ref=matrix_msg(X[:, :3])), "columns"),
        (ComputeGains.Request(x_ref=matrix_msg(X[:1])), "at least 2 knots"),
        (ComputeGains.Request(x_ref=matrix_msg(X), u_ref=matrix_msg(np.zeros((10, 1)))), "u_ref must be"),
        (ComputeGains.Request(x_ref=matrix_msg(X), r=matrix_msg(np.eye(3))), "r must be"),
        (ComputeGains.Request(x_ref=matrix_msg(X), q=matrix_msg(-np.eye(4))), "semi-definite"),
        (ComputeGains.Request(x_ref=matrix_msg(X), state_convention=7), "state_convention"),
        (ComputeGains.Request(x_ref=matrix_msg(X), dt=-1.0), "dt must be"),
        (ComputeGains.Request(x_ref=matrix_msg(np.zeros((11, 4)))), "singular"),
    ]
    for req, pattern in cases:
        r = node.call(ComputeGains, "compute_gains", req)
        assert not r.success and pattern in r.message, r.message
    for req, pattern in [
        (PlanTrajectory.Request(x_ref=matrix_msg(X), x0=[0.0]), "x0 must have 4 entries"),
        (PlanTrajectory.Request(x_ref=matrix_msg(X[:, :2])), "x_ref must be"),
        (PlanTrajectory.Request(x_ref=matrix_msg(X), method=9), "method must be"),
    ]:
        r = node.call(PlanTrajectory, "plan_trajectory", req)
        assert not r.success and pattern in r.message, r.message
    r = node.call(ComputeGains, "compute_gains", ComputeGains.Request(x_ref=matrix_msg(X)))
    assert r.success, r.message
    _still_serving(node)


# ------------------------------------------------------------------------------ watchdog
def test_watchdog_stops_commanding_when_states_stop(node):
    _commands_flow(node, "before the watchdog test")
    mark = len(node.log())
    time.sleep(0.05)
    node.commands.clear()
    # the warning says which cause it was: states that stopped coming (here), or the path's own
    # thread stalled (only if this host starved it: the watchdog ran late)
    node.wait_log(r"watchdog: no valid JointState for .* stopped commanding after sending zeros \[.*\]; "
                  r"(the watchdog ran on time \(period 0\.\d+ s\): the states stopped coming|"
                  r"this path's thread was stalled: the watchdog ran \d+\.\d+ s after its previous run)",
                  after=mark, timeout=5.0)
    node.wait(lambda: node.commands, "the zero command sent by the watchdog", timeout=2.0)
    np.testing.assert_array_equal(node.commands[-1], [0.0, 0.0])
    n = len(node.commands)
    time.sleep(0.5)
    assert len(node.commands) == n, "commands continued after the watchdog tripped"
    _commands_flow(node, "after the watchdog tripped")         # resumes with the next state
    node.wait_log(r"JointState messages resumed \(stamps \d+\.\d+ s after the last state before the trip\)",
                  after=mark)
