"""What a peer on the DDS domain sends can neither run code in the node nor make it command
something absurd (issue 17, items 1, 2, 3, 7, 8 and Security), over real rclpy + DDS.

One node process (the polar slider of test_bad_input.py, handed over as YAML model text in the
parameter file, with small limits) is walked through: parameters refused while unconfigured,
bring-up, out-of-bounds states, saturated commands, bad stamps, a stale stream, unknown joints,
overflowing service requests, parameters locked while active, diagnostics, and the shutdown
transition, after which the process exits. A second process started with
``lock_parameters: true`` refuses every change of its model, topics and limits.
"""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

import core

from nodeproc import POLAR_YAML, TIMEOUT, NodeProcess, write_params

# slow: starts node processes (they load the numba kernels)
pytestmark = pytest.mark.slow

DT = 0.01
NS = 1_000_000_000
JOINTS = ["base_joint", "slide_joint"]
COMMAND_LIMIT = [2.0, 3.0]
VELOCITY_LIMIT = 50.0
STATE_TIMEOUT = 0.3


def _params_file(path, **extra):
    params = {"model": POLAR_YAML, "dt": DT, "joint_map": ["theta:base_joint", "r:slide_joint"],
              "Q": [10.0, 10.0, 1.0, 1.0], "R": [0.1, 0.1], "state_timeout": STATE_TIMEOUT,
              "timeout_action": "zero", "command_limit": COMMAND_LIMIT,
              "state_velocity_limit": VELOCITY_LIMIT, "diagnostics_period": 0.2, **extra}
    return write_params(path, params)


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("safety")
    h = NodeProcess(rclpy_mod, _params_file(d / "params.yaml"), f"/test_safety_{os.getpid()}",
                    d / "mechnode.log")
    h.tmp = d
    try:
        h.lifecycle.wait(60.0)
        yield h
    finally:
        h.close()


def _set(h, **values):
    """Set parameters through the node's parameter service; the SetParametersResults."""
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg()
                                            for k, v in values.items()])
    return h.call(SetParameters, "set_parameters", req).results


def _now(h):
    return h.client.get_clock().now().nanoseconds


def _send(h, q, dq, stamp=None, names=JOINTS):
    from mechnode.ros.conversions import joint_state
    h.state_pub.publish(joint_state(names, q, dq, _now(h) if stamp is None else stamp))


def _command_for(h, q, dq, stamp=None):
    """Send a state off the reference (resent until answered: sensor-data QoS); ``(command,
    stamps sent)``. Zeros are the watchdog's (no accepted state for state_timeout): skipped."""
    h.commands.clear()
    sent = []
    law = lambda: [c for c in h.commands if np.any(c)]  # noqa: E731
    deadline = time.monotonic() + TIMEOUT
    while not law() and time.monotonic() < deadline:
        sent.append(_now(h) if stamp is None else stamp)
        _send(h, q, dq, sent[-1])
        time.sleep(0.03)
    assert law(), f"no command for the state q={q}, dq={dq}: {h.commands}"
    return law()[0], sent


def _expected(h, q, dq, stamp):
    """The tracking law of the node's schedule at the knot of ``stamp``, computed here."""
    from mechnode.ros.conversions import schedule_from_msg
    sched, start = schedule_from_msg(h.schedules[-1])
    k = sched.knot((stamp - start) * 1e-9)
    x = np.concatenate([q, h.vi.momentum(np.asarray(q, float), np.asarray(dq, float))])
    return sched.u_ref[k] - sched.K[k] @ (x - sched.x_ref[k])


def _no_command_for(h, q, dq, stamp_fn, pattern, count=5):
    """Every one of ``count`` states (stamped by ``stamp_fn()``) is refused with a log line: no
    command but the watchdog's zeros (no accepted state for state_timeout)."""
    mark = len(h.log())
    h.commands.clear()
    for _ in range(count):
        _send(h, q, dq, stamp_fn())
        time.sleep(0.02)
    h.wait_log(r"JointState rejected: .*" + pattern, after=mark)
    time.sleep(0.2)
    sent = [c for c in h.commands if not np.array_equal(c, [0.0, 0.0])]
    assert not sent, f"a refused JointState ({pattern}) produced commands {sent}"


def _diagnostics(h):
    from diagnostic_msgs.msg import DiagnosticArray
    got = []
    sub = h.client.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
    try:
        h.wait(lambda: any(s.name.startswith(f"{h.fqn}: ") and s.values for m in got for s in m.status),
               "a mechnode DiagnosticArray", timeout=5.0)
    finally:
        h.client.destroy_subscription(sub)
    status = [s for m in got for s in m.status if s.name.startswith(f"{h.fqn}: ")][-1]
    return {kv.key: kv.value for kv in status.values}


# ------------------------------------------------------------------------------ unconfigured
def test_python_model_value_is_refused_and_runs_nothing(node):
    """Item 1: the model parameter is data. A python: value set over the parameter service is
    refused, and configuring afterwards runs nothing."""
    marker = node.tmp / "pwned"
    (res,) = _set(node, model=f"python:os.system('touch {marker}')")
    assert not res.successful and "neither a model file" in res.reason, res.reason
    (res,) = _set(node, model="python:core.examples.chain(2)")
    assert not res.successful
    assert node.transition("configure", 900), node.log()[-3000:]
    assert node.transition("cleanup")
    assert not marker.exists(), "code named in the model parameter was run"


def test_bad_weights_joint_map_and_limits_are_refused_when_set(node):
    """Item 8: refused at set time while unconfigured, with the reason naming the value."""
    assert node.state() == "unconfigured"
    for values, pattern in [
        (dict(Q=[-1.0]), r"Q\[0\] = -1.0"),
        (dict(R=[-1.0]), r"R\[0\] = -1.0"),
        (dict(R=[0.0]), r"R\[0\] = 0.0.*> 0"),
        (dict(Q=[1.0, -2.0, -2.0, 1.0]), r"positive semi-definite"),
        (dict(joint_map=["theta:wheel", "r:wheel"]), r"same joint name.*wheel"),
        (dict(joint_map=["theta:a", "theta:b"]), r"variable 'theta' twice"),
        (dict(command_limit=0.0), r"command_limit\[0\] = 0.0"),
        (dict(command_limit=[1.0, -1.0]), r"command_limit\[1\] = -1.0"),
        (dict(state_velocity_limit=float("inf")), r"state_velocity_limit\[0\] = inf"),
        (dict(state_position_limit="far"), r"state_position_limit"),
    ]:
        (res,) = _set(node, **values)
        assert not res.successful, f"{values} accepted"
        assert re.search(pattern, res.reason), f"{values}: {res.reason!r}"
    for values in (dict(Q=[1.0, 0.5, 0.5, 1.0]), dict(R=[0.1, 0.1]), dict(command_limit=COMMAND_LIMIT)):
        (res,) = _set(node, **values)
        assert res.successful, f"{values}: {res.reason}"


def test_bring_up_with_a_reference(node):
    from mechnode.ros.conversions import joint_trajectory
    assert node.bring_up()[-1] == "active"
    node.vi = core.MidpointVI(core.load_system(POLAR_YAML), DT)
    node.commands = []
    node.connect_io(lambda m: node.commands.append(np.asarray(m.data)))
    t = np.linspace(0.0, 20.0, 21)              # hold theta = 0, r = 0.5 (then its final knot)
    node.ref_pub.publish(joint_trajectory(JOINTS, t, np.tile([0.0, 0.5], (t.size, 1))))
    node.wait(lambda: node.schedules, "the GainSchedule", timeout=120)
    u, sent = _command_for(node, [0.01, 0.51], [0.0, 0.0])
    assert np.all(np.abs(u) <= COMMAND_LIMIT)


# ------------------------------------------------------------------------------ item 2
def test_out_of_bounds_states_are_refused(node):
    for q, dq, pattern in [
        ([0.0, 0.5], [0.0, 1e300], r"velocity of joint 'slide_joint' is 1e\+300, outside \+-50"),
        ([0.0, 0.5], [1e307, 0.0], r"velocity of joint 'base_joint' is 1e\+307"),
        ([1e300, 0.5], [0.0, 0.0], r"position of joint 'base_joint' is 1e\+300, outside \+-1000"),
        ([0.0, -1010.0], [0.0, 0.0], r"position of joint 'slide_joint' is -1010"),
    ]:
        _no_command_for(node, q, dq, lambda: _now(node), pattern)
    u, _ = _command_for(node, [0.0, 0.5], [0.0, -VELOCITY_LIMIT * 0.99])   # inside: commanded
    assert np.all(np.abs(u) <= COMMAND_LIMIT)


def test_large_finite_command_is_saturated(node):
    q, dq = np.array([1.0, 4.5]), np.array([0.0, 0.0])
    u, sent = _command_for(node, q, dq)
    want = [_expected(node, q, dq, s) for s in sent]
    assert any(np.any(np.abs(w) > COMMAND_LIMIT) for w in want), f"not beyond the limits: {want}"
    assert any(np.array_equal(u, np.clip(w, -np.array(COMMAND_LIMIT), COMMAND_LIMIT)) for w in want), \
        f"published {u}, unsaturated {want}"
    assert np.all(np.abs(u) <= COMMAND_LIMIT)
    node.wait_log(r"saturated to")
    # below the limits: the law itself, unchanged
    q = np.array([0.01, 0.52])
    u, sent = _command_for(node, q, dq)
    assert any(np.allclose(u, _expected(node, q, dq, s), rtol=1e-10, atol=1e-12) for s in sent), u


# ------------------------------------------------------------------------------ item 3
def test_bad_stamps_are_refused(node):
    q, dq = [0.05, 0.55], [0.0, 0.1]            # off the reference: the law's command is not zero
    _no_command_for(node, q, dq, lambda: _now(node) + 10 * NS, r"ahead of the node's clock")
    _no_command_for(node, q, dq, lambda: _now(node) - 10 * NS, r"s old \(state_timeout 0.3 s\)")
    _no_command_for(node, q, dq, lambda: 0, r"zero stamp")
    _no_command_for(node, q, dq, lambda: -5 * NS, r"negative stamp")
    # out of order: older than the last accepted one, though fresh enough on its own
    _, sent = _command_for(node, q, dq)
    _no_command_for(node, q, dq, lambda: sent[-1] - int(0.1 * NS), r"older than the last accepted")
    _command_for(node, q, dq)                  # and a fresh one is used again


def test_stale_stream_trips_the_watchdog(node):
    q, dq = [0.01, 0.51], [0.0, 0.0]
    _command_for(node, q, dq)
    mark = len(node.log())
    node.commands.clear()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:               # a steady stream, every state 1 s old
        _send(node, q, dq, _now(node) - NS)
        time.sleep(0.01)
    node.wait_log(r"watchdog: no valid JointState .* stopped commanding after sending zeros",
                  after=mark, timeout=1.0)
    assert node.commands and np.array_equal(node.commands[-1], [0.0, 0.0]), node.commands[-3:]
    zeros = [c for c in node.commands if np.array_equal(c, [0.0, 0.0])]
    assert len(zeros) == 1 and len(node.commands) <= 2, f"commands from stale states: {node.commands}"
    _command_for(node, q, dq)                   # fresh states resume commanding


# ------------------------------------------------------------------------------ item 8
def test_unknown_joint_names_are_logged_rate_limited(node):
    """One line per 10 s whatever the unknown names (each message names another one here)."""
    mark, t0 = len(node.log()), time.monotonic()
    for i in range(1000):
        _send(node, [0.0, 0.5, 1.0], [0.0, 0.0, 0.0], names=JOINTS + [f"gripper_{i}"])
        if i % 10 == 9:
            time.sleep(0.005)
    time.sleep(0.5)
    lines = re.findall(r".*unknown to the model.*", node.log()[mark:])
    allowed = 1 + int((time.monotonic() - t0) // 10.0)      # a loaded machine sends slowly
    assert 1 <= len(lines) <= allowed, f"{len(lines)} log lines for 1000 messages with unknown joints " \
                                       f"in {time.monotonic() - t0:.1f} s: {lines}"


# ------------------------------------------------------------------------------ item 7
def test_overflowing_and_non_finite_service_results_are_refused(node):
    from mechnode_interfaces.srv import ComputeGains, Linearize

    from mechnode.ros.conversions import matrix_msg
    for fields, pattern in [
        (dict(q=[0.1, 0.5], dq=[0.0, 1e200], u=[0.0, 0.0]), r"input dq\[1\] \(r\) = 1e\+200 is too large"),
        (dict(q=[0.1, 1e300], dq=[0.0, 0.0], u=[0.0, 0.0]), r"input q\[1\] \(r\) = 1e\+300 is too large"),
        (dict(q=[0.1, 0.5], p=[1e300, 0.0], u=[0.0, 0.0], discrete=True),
         r"input p\[0\] \(theta\) = 1e\+300 is too large"),
        (dict(q=[0.1, 0.5], p=[0.0, 1e300], u=[0.0, 0.0], discrete=True, order=2), r"input p\[1\]"),
    ]:
        r = node.call(Linearize, "linearize", Linearize.Request(**fields))
        assert not r.success, f"{fields}: success with A {list(r.a.data)[:8]}"
        assert re.search(pattern, r.message), f"{fields}: {r.message!r}"
        assert "singular" not in r.message and "condition" not in r.message, r.message
    X = np.tile([0.0, 0.5, 0.0, 0.0], (11, 1))
    X[3, 2] = 1e300
    r = node.call(ComputeGains, "compute_gains", ComputeGains.Request(x_ref=matrix_msg(X)))
    assert not r.success and "x_ref[3, 2]" in r.message and "too large" in r.message, r.message
    r = node.call(Linearize, "linearize", Linearize.Request(q=[0.1, 0.5], dq=[0.0, 0.1], u=[0.0, 0.0]))
    assert r.success, r.message


# ------------------------------------------------------------------------------ Security
LOCKED = dict(model="pendulum.yaml", dt=0.02, joint_map=["theta:j"], state_topic="elsewhere",
              command_topic="elsewhere", command_limit=10.0, state_position_limit=5.0,
              state_velocity_limit=5.0, stamp_tolerance=0.2, accept_unstamped=True, state_timeout=1.0)


def test_model_topics_and_limits_cannot_change_while_active(node):
    assert node.state() == "active"
    for name, value in LOCKED.items():
        (res,) = _set(node, **{name: value})
        assert not res.successful and ("deactivate first" in res.reason or "cleanup first" in res.reason), \
            f"{name} changed while active: {res.reason!r}"
    (res,) = _set(node, Q=[10.0, 10.0, 1.0, 1.0])        # weights stay settable
    assert res.successful, res.reason


def test_diagnostics_report_refusals_and_saturation(node):
    values = _diagnostics(node)
    for key in ("states_out_of_bounds", "commands_saturated", "states_stamp_future", "states_stamp_stale",
                "states_stamp_zero", "states_stamp_negative", "states_stamp_out_of_order",
                "states_rejected", "watchdog_trips"):
        assert int(values[key]) >= 1, f"{key} = {values.get(key)}"


def test_limits_change_while_inactive_then_shutdown_exits_the_process(node):
    assert node.transition("deactivate")
    for res in _set(node, command_limit=[1.0, 1.0], stamp_tolerance=0.1):
        assert res.successful, res.reason
    (res,) = _set(node, command_limit=[1.0, 1.0, 1.0])     # one per force input, checked now
    assert not res.successful and "needs 1 value or 2" in res.reason, res.reason
    assert node.transition("shutdown")
    try:
        code = node.proc.wait(timeout=5.0)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
        pytest.fail("the node process is still running 5 s after the shutdown transition")
    assert code == 0, node.log()[-2000:]
    assert "shut down" in node.log()


@pytest.fixture(scope="module")
def locked(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("locked")
    h = NodeProcess(rclpy_mod, _params_file(d / "params.yaml", lock_parameters=True),
                    f"/test_locked_{os.getpid()}", d / "mechnode.log")
    try:
        h.lifecycle.wait(60.0)
        yield h
    finally:
        h.close()


def test_lock_parameters_makes_model_topics_and_limits_read_only(locked):
    from rcl_interfaces.srv import DescribeParameters, GetParameters
    assert locked.state() == "unconfigured"      # read-only even where they could change
    for name, value in dict(LOCKED, lock_parameters=False).items():
        (res,) = _set(locked, **{name: value})
        assert not res.successful and "read-only" in res.reason, f"{name}: {res.reason!r}"
    r = locked.call(DescribeParameters, "describe_parameters",
                    DescribeParameters.Request(names=list(LOCKED) + ["lock_parameters", "Q"]))
    flags = {d.name: d.read_only for d in r.descriptors}
    assert all(flags[n] for n in LOCKED) and flags["lock_parameters"] and not flags["Q"], flags
    r = locked.call(GetParameters, "get_parameters", GetParameters.Request(names=["command_limit"]))
    assert list(r.values[0].double_array_value) == COMMAND_LIMIT      # from the parameter file
    (res,) = _set(locked, R=[0.2, 0.2])
    assert res.successful, res.reason
