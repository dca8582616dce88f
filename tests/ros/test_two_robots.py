"""Two robots on one network: two nodes with their simulated robots (the cart-pole and the 7-joint
arm, each the README demo, ``python -m mechnode.demo``, a process of its own) in two namespaces on
this test run's DDS domain. Each tracks its own reference; no state of one reaches the other's
node (it would be refused: the joint names differ, and counted as ``states_rejected``); and
killing one node (SIGKILL) leaves the other's commands flowing as before and its robot
converging."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mechnode.testing.harness import ros_environment, wait_for

pytestmark = pytest.mark.slow


class Demo:
    """``python -m mechnode.demo`` in a process of its own, its output lines collected."""

    def __init__(self, robot: str, namespace: str, *args: str):
        self.namespace = namespace
        self.proc = subprocess.Popen([sys.executable, "-m", "mechnode.demo", "--robot", robot, "--namespace",
                                      namespace, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=ros_environment())
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self.lines.append(raw.decode("utf-8", "replace").rstrip())

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def node_pid(self) -> int:
        """The pid of the node process this demo started (its child running ``-m mechnode``)."""
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as fh:
            children = [int(p) for p in fh.read().split()]
        for pid in children:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            if b"mechnode" in argv and b"-m" in argv:
                return pid
        raise AssertionError(f"no node process among the demo's children {children}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._reader.join(timeout=5)


def _counter(text: str, name: str) -> int:
    m = re.search(rf"node: .*\b{name} (\d+)", text)
    assert m, f"no {name} in the demo's node counters:\n{text[-3000:]}"
    return int(m.group(1))


def test_two_robots_on_one_domain_and_one_node_killed(rclpy_mod, ifaces):
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float64MultiArray

    from mechnode.ros.qos import COMMAND_QOS
    pid = os.getpid()
    # the cart-pole runs until it is killed (no error is ever below 1e-12): its node, its command
    # process and its robot stay busy on the domain while the arm starts, tracks and converges
    a = Demo("cartpole", f"/two_cartpole_{pid}", "--threshold", "1e-12", "--timeout", "300")
    b = None
    ctx = Context()
    rclpy_mod.init(context=ctx, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
    watcher = rclpy_mod.create_node("two_robots_watcher", context=ctx)
    arrivals: list[float] = []
    watcher.create_subscription(Float64MultiArray, f"/two_arm_{pid}/effort_controller/commands",
                                lambda m: arrivals.append(time.monotonic()), COMMAND_QOS)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(watcher)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    try:
        wait_for(lambda: a.said("reference published") or a.proc.poll() is not None, 300.0,
                 "the cart-pole demo's reference")
        assert a.proc.poll() is None, a.text
        b = Demo("arm7", f"/two_arm_{pid}", "--timeout", "60")
        wait_for(lambda: b.said("reference published") or b.proc.poll() is not None, 300.0,
                 "the arm demo's reference")
        assert b.proc.poll() is None, b.text
        wait_for(lambda: len(arrivals) > 200, 30.0, "the arm's commands")
        time.sleep(1.0)
        assert a.proc.poll() is None and not a.said("converged:"), a.text     # the cart-pole still runs
        node_a = a.node_pid()
        killed = time.monotonic()
        os.kill(node_a, signal.SIGKILL)
        assert b.proc.wait(timeout=120) == 0, b.text            # the arm converges
        b._reader.join(timeout=5)
    finally:
        executor.shutdown(timeout_sec=2.0)
        watcher.destroy_node()
        rclpy_mod.try_shutdown(context=ctx)
        a.stop()
        if b is not None:
            b.stop()
    print(b.text)
    # each node tracked its own robot: the arm's never saw a cart-pole state (it would refuse it)
    assert "summary: converged" in b.text
    assert _counter(b.text, "states_rejected") == 0
    assert _counter(b.text, "states") > 300
    # the arm's commands flowed as before the cart-pole's node died
    t = np.array(arrivals)
    before = np.diff(t[(t > killed - 1.0) & (t <= killed)])
    after = np.diff(t[(t > killed) & (t <= killed + 2.0)])
    print(f"arm command gaps (ms): 1 s before the kill p99 {1e3 * np.percentile(before, 99):.1f} max "
          f"{1e3 * before.max():.1f}; 2 s after p99 {1e3 * np.percentile(after, 99):.1f} max {1e3 * after.max():.1f}")
    assert before.size > 50 and after.size > 100, (before.size, after.size)
    assert np.percentile(after, 99) <= 2.0 * np.percentile(before, 99) + 0.01
    assert after.max() < 0.25                                   # never the watchdog's state_timeout
