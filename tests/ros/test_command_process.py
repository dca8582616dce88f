"""The command path runs in a process of its own (real node process, real DDS on loopback).

* Whatever holds the node's main process — a huge message being taken, a long conversion, a
  collector pause — cannot stop the commands: with the main process *frozen* (SIGSTOP), states
  streamed at 100 Hz keep becoming commands. (In one process, as before, nothing was sent.)
* A command process that dies is reported (diagnostics at ERROR, ``command_process: not
  running``, a logged error), the node leaves ``active``, and the next activate starts a new one
  that commands again; one that stalls (SIGSTOP) is reported by its heartbeat.
* The command process ends with the node's process, after a zero command: a killed node leaves
  nothing commanding and no torque applied.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from mechnode.testing.harness import DEFAULT_PARAMS, ros_environment, wait_for

from nodeproc import NodeProcess

# slow: starts node processes (they load the numba kernels)
pytestmark = pytest.mark.slow

JOINTS = ["cart_joint", "pole_joint"]


def _reference():
    from mechnode.ros.conversions import joint_trajectory
    t = np.arange(0.0, 30.0 + 1e-9, 0.5)
    return joint_trajectory(JOINTS, t, np.zeros((t.size, 2)))     # 30 s holding upright


def _up(rclpy_mod, tmp_path_factory, label):
    d = tmp_path_factory.mktemp(label)
    h = NodeProcess(rclpy_mod, DEFAULT_PARAMS, f"/test_{label}_{os.getpid()}", d / "mechnode.log")
    assert h.bring_up()[-1] == "active"
    h.command_times = []
    h.connect_io(lambda m: h.command_times.append(time.monotonic()))
    h.ref_pub.publish(_reference())
    h.wait(lambda: h.schedules, "the GainSchedule", timeout=60)
    return h


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    h = _up(rclpy_mod, tmp_path_factory, "cmdproc")
    try:
        yield h
    finally:
        h.close()


def command_pid(h) -> int:
    """The pid of the node's command process: its one child (listed by the thread that made it)."""
    children = []
    for task in os.listdir(f"/proc/{h.proc.pid}/task"):
        with open(f"/proc/{h.proc.pid}/task/{task}/children") as fh:
            children += [int(c) for c in fh.read().split()]
    assert len(children) == 1, f"the node process has children {children}"
    return children[0]


def gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie not yet reaped counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


class StateStream:
    """JointState at 100 Hz, stamped now, from this process's executor thread."""

    def __init__(self, h):
        from mechnode.ros.conversions import joint_state
        clock = h.client.get_clock()
        self._timer = h.client.create_timer(0.01, lambda: h.state_pub.publish(
            joint_state(JOINTS, [0.0, 0.02], [0.0, 0.0], clock.now().nanoseconds)))
        self.h = h

    def close(self):
        self.h.client.destroy_timer(self._timer)


def test_commands_flow_while_the_node_process_is_frozen(node):
    """States from a process of their own (mechnode.testing.state_stream: this test process's
    own DDS traffic stalled for up to 0.24 s while the node's process was stopped); the node's
    main process is stopped for 1 s in the middle of a 3 s stream."""
    h = node
    pid = h.proc.pid
    assert command_pid(h) != pid
    stream = subprocess.Popen(
        [sys.executable, "-m", "mechnode.testing.state_stream", "--ns", h.ns, "--joints", ",".join(JOINTS),
         "--positions", "0.0,0.02", "--rate", "100", "--seconds", "3"],
        env=ros_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert stream.stdout.readline().strip() == "ready", stream.communicate(timeout=30)[0]
        time.sleep(1.0)
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)
        finally:
            os.kill(pid, signal.SIGCONT)
        out, _ = stream.communicate(timeout=30)
    finally:
        stream.kill()
    r = json.loads(out.strip().splitlines()[-1])
    print(r)
    # stopped for 1 s: in one process (as before) no command at all for 1 s; here the stream's
    # own timing (up to ~20 ms gaps on a busy machine) is all there is
    assert r["commands"] >= 200 and r["largest_gap"] < 0.5, r


def test_a_stalled_command_process_is_reported(node):
    """The command process stopped (SIGSTOP) for 1 s: its heartbeat stops, and the node's
    diagnostics report the stall at ERROR (while it lasts, or once it is over)."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    h = node
    pid = command_pid(h)
    got = []
    sub = h.client.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
    try:
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)
        finally:
            os.kill(pid, signal.SIGCONT)

        def reported():
            for m in got:
                for st in m.status:
                    values = {kv.key: kv.value for kv in st.values}
                    if (st.name.startswith(f"{h.fqn}: ") and st.level == DiagnosticStatus.ERROR
                            and "stall" in st.message and float(values["command_longest_stall_s"]) >= 0.9):
                        return st, values
            return None
        status, values = h.wait(reported, "diagnostics reporting the stalled command path", timeout=10)
    finally:
        h.client.destroy_subscription(sub)
    print(status.message, values["command_longest_stall_s"])
    assert command_pid(h) == pid                    # reported, not killed


def test_a_dead_command_process_leaves_active_and_is_replaced(node):
    """A command process that dies while active: the node reports it (ERROR, ``command_process:
    not running``), logs it and leaves ``active`` on its own (nothing commands the robot); the
    next activate starts a new process that commands again."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    h = node
    old = command_pid(h)
    mark = len(h.log())
    got = []
    sub = h.client.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
    os.kill(old, signal.SIGKILL)
    try:
        def reported():
            for m in got:
                for st in m.status:
                    values = {kv.key: kv.value for kv in st.values}
                    if (st.name.startswith(f"{h.fqn}: ") and st.level == DiagnosticStatus.ERROR
                            and values.get("command_process") == "not running"):
                        return st
            return None
        status = h.wait(reported, "diagnostics reporting the command process not running", timeout=10)
    finally:
        h.client.destroy_subscription(sub)
    assert "command process is not running" in status.message
    h.wait_log(r"the command process died while active: nothing commands the robot; deactivating", after=mark)
    wait_for(lambda: h.state() == "inactive", 10.0, "the node to leave active")
    # activate again: a new command process, and commands flow
    assert h.transition("activate", 120), f"activate failed:\n{h.log()[-3000:]}"
    h.wait_log(r"command process restarted \(pid \d+\)", after=mark)
    new = command_pid(h)
    assert new != old
    h.ref_pub.publish(_reference())
    h.wait(lambda: len(h.schedules) >= 2, "a GainSchedule after the restart", timeout=60)
    n0 = len(h.command_times)
    stream = StateStream(h)
    try:
        h.wait(lambda: len(h.command_times) > n0 + 20, "commands from the new command process")
    finally:
        stream.close()


def test_the_command_process_ends_with_the_node_after_a_zero_command(rclpy_mod, ifaces, tmp_path_factory):
    """The node's main process killed (SIGKILL) while commanding: the command process sends its
    timeout action (zeros) before it ends, so the robot is not left with the last torque."""
    h = _up(rclpy_mod, tmp_path_factory, "cmdkill")
    try:
        commands = []
        h.connect_io(lambda m: commands.append(np.asarray(m.data)))
        stream = StateStream(h)
        try:
            child = command_pid(h)
            # (a torque is being applied: the last command is not a watchdog's zero)
            h.wait(lambda: len(commands) > 20 and np.abs(commands[-1]).max() > 0.0, "torque commands before the kill")
            h.proc.kill()                   # SIGKILL: no shutdown transition, no clean-up
            h.proc.wait(10)
            wait_for(lambda: gone(child), 10.0, f"the command process {child} to end with the node")
            time.sleep(0.3)
        finally:
            stream.close()
        assert np.all(commands[-1] == 0.0), commands[-3:]
    finally:
        h.close()
