"""Heavy work never starves the command path, never goes unanswered, never outlives its
configuration (real node process, real DDS on loopback).

* A reference over ``max_reference_points`` is refused from its serialized size, before
  conversion: while a 1,000,000-point reference arrives, states streamed at 100 Hz keep
  becoming commands (no gap as long as the node's own state timeout) and the node's memory
  returns to where it was.
* Services: a burst of concurrent requests from many clients is answered in full (heavy ones
  one at a time, the others "busy" at once); a plan_trajectory asking for more iterations than
  ``max_request_iterations`` is refused, one with an unreachable tolerance stops at
  ``optimizer_time_limit``; neither blocks another service meanwhile.
* A reference still being processed when the node is reconfigured for another model is dropped:
  no schedule computed for the old model is published or used.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from mechnode.testing.harness import DEFAULT_PARAMS, ros_environment, start_big_reference

from nodeproc import NodeProcess

# slow: starts a node process (it loads the numba kernels)
pytestmark = pytest.mark.slow

JOINTS = ["cart_joint", "pole_joint"]
STATE_TIMEOUT = 0.25        # config/cartpole_params.yaml


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("heavy")
    h = NodeProcess(rclpy_mod, DEFAULT_PARAMS, f"/test_heavy_{os.getpid()}", d / "mechnode.log",
                    params=["max_knots:=5000", "optimizer_time_limit:=1.0"])
    h.tmp = d
    try:
        assert h.bring_up()[-1] == "active"
        _setup_io(h)
        yield h
    finally:
        h.close()


def _setup_io(h):
    h.command_times = []
    h.connect_io(lambda m: h.command_times.append(time.monotonic()))


def _reference(seconds=2.0, step=0.1, shift=0.3, swing=0.0):
    """The cart moves by ``shift`` sin(t) and the pole swings by ``swing`` sin(5 t): an
    infeasible reference the optimizer works on until its time limit."""
    from mechnode.ros.conversions import joint_trajectory
    t = np.arange(0.0, seconds + 1e-9, step)
    return joint_trajectory(JOINTS, t, np.stack([shift * np.sin(t), swing * np.sin(5 * t)], 1))


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def _state_stream(h):
    """JointState at 100 Hz and the command receipts, from a process of its own
    (mechnode.testing.state_stream: this process's own GIL and DDS work do not disturb the
    measurement); it measures until a line is written to its stdin."""
    stream = subprocess.Popen(
        [sys.executable, "-m", "mechnode.testing.state_stream", "--ns", h.ns, "--joints", ",".join(JOINTS),
         "--positions", "0.0,0.05", "--rate", "100", "--seconds", "120", "--until-stop"],
        env=ros_environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    line = stream.stdout.readline().strip()
    if line != "ready":
        stream.kill()
        raise AssertionError(f"the state stream got no command: {line} {stream.communicate(timeout=30)[0]}")
    return stream


def _stream_result(stream) -> dict:
    try:
        out, _ = stream.communicate("stop\n", timeout=30)
    finally:
        stream.kill()
    return json.loads(out.strip().splitlines()[-1])


def _clients(h, requests, settle=3.0):
    """One client per ``(srv_type, name, request)``, every one discovered both ways before the
    burst: ``service_is_ready`` sees only the request side, and a response sent before the
    service has matched the client's response reader is dropped by the middleware. (Seen here:
    with 1 s between creating 60 clients and calling them, the node's log showed all 60 requests
    answered while one response in about five runs never arrived.)"""
    clients = [h.client.create_client(t, f"{h.fqn}/{n}") for t, n, _ in requests]
    h.wait(lambda: all(c.service_is_ready() for c in clients), "every client's service")
    time.sleep(settle)
    return clients


def _call_async(h, srv_type, name, request):
    """A service call from a client of its own; returns (client, future)."""
    (cli,) = _clients(h, [(srv_type, name, request)], settle=1.0)
    return cli, cli.call_async(request)


def _set_parameters(h, **values):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg()
                                            for k, v in values.items()])
    res = h.call(SetParameters, "set_parameters", req)
    assert all(r.successful for r in res.results), [r.reason for r in res.results]



# ------------------------------------------------------------------------------ tests
def test_huge_reference_is_refused_before_conversion_and_commands_keep_flowing(node):
    h = node
    h.ref_pub.publish(_reference())                  # a schedule, so that states become commands
    h.wait(lambda: len(h.schedules) >= 1, "the first GainSchedule", timeout=60)
    stream = _state_stream(h)
    try:
        rss0 = _rss_mb(h.proc.pid)
        mark, t0 = len(h.log()), time.monotonic()
        # from a process of its own: publishing 56 MB from this process stalls its DDS traffic
        publisher = start_big_reference(f"{h.fqn}/reference", JOINTS, 1_000_000)
        try:
            out, _ = publisher.communicate(timeout=120)
        finally:
            publisher.kill()
        assert publisher.returncode == 0, out
        h.wait_log(r"reference rejected: 1000000 points; the limit \(parameter max_reference_points\) "
                   r"is 20000", after=mark, timeout=60)
        refused = time.monotonic() - t0
        time.sleep(0.5)
        rss1 = _rss_mb(h.proc.pid)
    finally:
        r = _stream_result(stream)
    gap = r["largest_gap"]
    print(f"{out.strip()}; refused after {refused:.2f} s, largest command gap {gap * 1e3:.1f} ms "
          f"(the stream's own largest gap between states {r['largest_state_gap'] * 1e3:.1f} ms), "
          f"RSS {rss0:.0f} -> {rss1:.0f} MB")
    # before: refused after 16-18 s of conversion, commands stopped for up to 0.67 s. The bounds
    # here are functional (a benchmark prints the figures): the refusal costs no conversion, and
    # the command path never stops for twice the node's own watchdog timeout
    assert refused < 10.0, f"the reference took {refused:.1f} s to be refused"
    assert gap < 2 * STATE_TIMEOUT, f"no command for {gap:.3f} s while the reference was refused"
    assert rss1 - rss0 < 50.0, f"memory grew from {rss0:.0f} MB to {rss1:.0f} MB"
    assert len(h.schedules) == 1


def test_a_point_longer_than_its_joint_names_is_refused(node):
    from rclpy.serialization import serialize_message

    from mechnode.ros.conversions import joint_trajectory
    h = node
    msg = joint_trajectory(JOINTS, [0.0, 1.0], [[0.0, 0.0], [0.1, 0.0]])
    msg.points[1].effort = [0.0] * 1000
    mark = len(h.log())
    h.ref_pub.publish(serialize_message(msg))
    h.wait_log(r"reference rejected: \d+ bytes for 2 points of 2 joints", after=mark)


def test_a_burst_of_requests_is_answered_in_full(node):
    from mechnode_interfaces.srv import ComputeGains, GetModel, Linearize, PlanTrajectory

    from mechnode.ros.conversions import matrix_msg
    h = node
    X = np.zeros((401, 2))
    X[:, 0] = np.linspace(0.0, 0.3, 401)
    requests = []       # 20 concurrent calls from 20 clients, as in the report that 9 went unanswered
    for i in range(10):
        if i % 2:
            requests.append((ComputeGains, "compute_gains", ComputeGains.Request(x_ref=matrix_msg(X))))
        else:
            requests.append((PlanTrajectory, "plan_trajectory",
                             PlanTrajectory.Request(x_ref=matrix_msg(np.zeros((401, 4))), max_iterations=20)))
    for _ in range(5):
        requests.append((Linearize, "linearize", Linearize.Request(q=[0.0, 0.1], dq=[0.0, 0.0], u=[0.0])))
        requests.append((GetModel, "get_model", GetModel.Request()))
    clients = _clients(h, requests)
    calls = [(cli, cli.call_async(req)) for cli, (_, _, req) in zip(clients, requests, strict=True)]
    try:
        h.wait(lambda: all(f.done() for _, f in calls), "an answer to each of 20 concurrent requests",
               timeout=120)
    finally:
        print("answered:", "".join(str(int(f.done())) for _, f in calls))
    heavy = [f.result() for _, f in calls[:10]]
    assert any(r.success for r in heavy), [r.message for r in heavy]
    for r in heavy:
        assert r.success or r.message.startswith("busy: "), r.message
    light = [f.result() for _, f in calls[10:]]
    assert all(r.success for r in light), [r.message for r in light if not r.success]
    for cli, _ in calls:
        h.client.destroy_client(cli)


def test_heavy_requests_are_bounded_and_do_not_block_others(node):
    from mechnode_interfaces.srv import ComputeGains, Linearize, PlanTrajectory

    from mechnode.ros.conversions import matrix_msg
    h = node
    X = np.zeros((301, 4))
    r = h.call(PlanTrajectory, "plan_trajectory",
               PlanTrajectory.Request(x_ref=matrix_msg(X), max_iterations=2**32 - 1, tolerance=1e-300))
    assert not r.success and "limit (parameter max_request_iterations) is 1000" in r.message, r.message
    r = h.call(ComputeGains, "compute_gains", ComputeGains.Request(x_ref=matrix_msg(np.zeros((100_000, 2)))))
    assert not r.success and "100000 knots; the limit (parameter max_knots) is 5000" in r.message, r.message
    # an unreachable tolerance: the optimizer stops at optimizer_time_limit
    _set_parameters(h, optimizer_time_limit=4.0)
    X[:, 0] = np.linspace(0.0, 0.5, 301)
    t0 = time.monotonic()
    cli, plan = _call_async(h, PlanTrajectory, "plan_trajectory",
                            PlanTrajectory.Request(x_ref=matrix_msg(X), max_iterations=1000, tolerance=1e-300))
    time.sleep(1.0)                             # it is computing now
    busy = h.call(ComputeGains, "compute_gains", ComputeGains.Request(x_ref=matrix_msg(X[:, :2])))
    lin = h.call(Linearize, "linearize", Linearize.Request(q=[0.0, 0.1], dq=[0.0, 0.0], u=[0.0]))
    running = not plan.done()
    h.wait(plan.done, "the plan_trajectory answer", timeout=60)
    took = time.monotonic() - t0
    _set_parameters(h, optimizer_time_limit=1.0)
    res = plan.result()
    assert res.success and "time_limit=4 s reached" in res.message, res.message
    assert running, f"plan_trajectory answered within 1 s: {res.message}"
    assert not busy.success and busy.message.startswith("busy: plan_trajectory has been computing for"), \
        busy.message
    assert lin.success, lin.message
    assert took < 60.0, f"plan_trajectory took {took:.1f} s with optimizer_time_limit 4 s"
    h.client.destroy_client(cli)


PENDULUM_YAML = """\
name: pendulum
gravity: [0, -9.81, 0]
frames:
  - {name: arm, parent: world, rz: theta}
  - {name: bob, parent: arm, ty: -1.0, mass: 1.0}
inputs:
  - {type: torque, config: theta}
"""


def test_reconfiguring_during_a_reference_drops_its_schedule(node):
    """(Last in this module: it leaves the node on another model.)"""
    h = node
    # a reference whose optimizer runs for the whole optimizer_time_limit (5 s)
    _set_parameters(h, optimizer_time_limit=5.0, optimizer_max_iterations=10000, optimizer_tolerance=1e-15)
    n = len(h.schedules)
    mark = len(h.log())
    h.ref_pub.publish(_reference(seconds=4.0, shift=0.0, swing=0.5))
    time.sleep(0.5)                                  # it is being processed now
    pendulum = h.tmp / "pendulum.yaml"
    pendulum.write_text(PENDULUM_YAML)
    assert h.transition("deactivate") and h.transition("cleanup")
    _set_parameters(h, model=str(pendulum), joint_map=["theta:pole_joint"], Q=[10.0, 1.0],
                    state_position_limit=100.0, state_velocity_limit=100.0)
    assert h.transition("configure", 300) and h.transition("activate")
    h.wait_log(r"dropped the schedule computed for configuration #1 \(now #2\)", after=mark, timeout=60)
    time.sleep(0.5)
    for s in h.schedules[n:]:       # only schedules for the pendulum: [theta, p_theta]
        assert len(s.state_names) == 2, f"a schedule for {list(s.state_names)} after reconfiguring"
