"""Test helper (not a test module): the mechnode node as a subprocess on this run's domain, and a
client node spun in a background thread. Every wait is bounded and fails naming what is missing."""
from __future__ import annotations

import os
import re
import time

import pytest

from mechnode.testing.harness import (
    LifecycleClient,
    Spinner,
    call,
    ros_environment,
    start_node_process,
    stop_process,
    wait_for,
)

TIMEOUT = 20.0        # seconds for any one message or service answer on loopback
#: seconds for the first answer of a service whose kernels a cold numba cache compiles then (the
#: node compiles them in the background after configure; a call that comes first compiles them)
FIRST_CALL_TIMEOUT = 240.0
STARTUP = 900.0       # configure: loads the numba kernels; compiles them on a cold cache


#: A fully actuated model that is singular at r = 0: a point mass on a rotating slider,
#: q = [theta, r], M = diag(r^2, 1); joints named base_joint / slide_joint in the tests.
POLAR_YAML = """\
name: polar
gravity: [0, 0, -9.81]
frames:
  - {name: arm, parent: world, rz: theta}
  - {name: slider, parent: arm, tx: r, mass: 1.0}
inputs:
  - {type: torque, config: theta}
  - {type: torque, config: r, name: push}
"""


def write_params(path, params: dict) -> str:
    """``params`` as a node parameter file at ``path`` (for any node named mechnode); its path."""
    import yaml
    path.write_text(yaml.safe_dump({"/**/mechnode": {"ros__parameters": params}}))
    return str(path)


class NodeProcess:
    """A running ``python -m mechnode`` in namespace ``ns`` plus a client node ``client``."""

    def __init__(self, rclpy_mod, params_file, ns, log_path, params=(), ros_args=(), env=None):
        from rclpy.context import Context
        self.ns, self.fqn, self.log_path = ns, f"{ns}/mechnode", str(log_path)
        self.t_start = time.monotonic()
        self.proc = start_node_process(params_file, ns, params, log_path=self.log_path,
                                       env={**ros_environment(), **(env or {})}, ros_args=ros_args)
        self.ctx = Context()
        rclpy_mod.init(context=self.ctx, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
        self.client = rclpy_mod.create_node("test_client", namespace=ns, context=self.ctx)
        self.spinner = Spinner(self.ctx, self.client)   # one thread: see Spinner
        self.lifecycle = LifecycleClient(self.client, self.fqn)
        self._clients = {}

    # ---------------------------------------------------------------- services
    def service(self, srv_type, name):
        key = (srv_type, name)
        if key not in self._clients:
            # a deep reply queue: every client of a service reads every reply (the guide's note)
            from rclpy.qos import QoSProfile, qos_profile_services_default
            qos = QoSProfile(depth=100, reliability=qos_profile_services_default.reliability,
                             durability=qos_profile_services_default.durability)
            self._clients[key] = self.client.create_client(srv_type, f"{self.fqn}/{name}", qos_profile=qos)
        return self._clients[key]

    def call(self, srv_type, name, request, timeout=TIMEOUT, resend_after=None):
        """The node's answer to ``request``; ``resend_after``: for an idempotent request, send it
        again when no answer came within that many seconds (see :func:`call`)."""
        self.check_alive()
        return call(self.service(srv_type, name), request, timeout, f"{self.fqn}/{name}", resend_after)

    def transition(self, label, timeout=TIMEOUT):
        self.check_alive()
        return self.lifecycle.change(label, timeout)

    def state(self):
        return self.lifecycle.state(TIMEOUT)

    # ---------------------------------------------------------------- topics
    def connect_io(self, on_command):
        """Subscribe to the node's commands (``on_command(Float64MultiArray)``) and GainSchedules
        (into ``self.schedules``); publishers ``self.state_pub`` (JointState) and ``self.ref_pub``
        (JointTrajectory); returns once the node's subscriptions see them."""
        from mechnode_interfaces.msg import GainSchedule
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        from mechnode.ros.qos import COMMAND_QOS, LATCHED
        self.schedules = []
        self.client.create_subscription(Float64MultiArray, f"{self.ns}/effort_controller/commands",
                                        on_command, COMMAND_QOS)
        self.client.create_subscription(GainSchedule, f"{self.fqn}/gain_schedule", self.schedules.append,
                                        LATCHED)
        self.state_pub = self.client.create_publisher(JointState, f"{self.ns}/joint_states",
                                                      qos_profile_sensor_data)
        self.ref_pub = self.client.create_publisher(JointTrajectory, f"{self.fqn}/reference", LATCHED)
        self.wait(lambda: self.state_pub.get_subscription_count() > 0
                  and self.ref_pub.get_subscription_count() > 0, "the node's subscriptions")

    # ---------------------------------------------------------------- process and log
    def check_alive(self):
        if self.proc.poll() is not None:
            pytest.fail(f"the node process exited with status {self.proc.returncode}; log:\n"
                        + self.log()[-4000:], pytrace=False)

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def wait_log(self, pattern, timeout=TIMEOUT, after=0):
        """Wait until the node's log (from character ``after`` on) matches ``pattern``."""
        rx = re.compile(pattern)
        try:
            return wait_for(lambda: rx.search(self.log()[after:]), timeout, f"log line /{pattern}/",
                            interval=0.05)
        except TimeoutError as exc:
            pytest.fail(f"{exc}; node log tail:\n{self.log()[-3000:]}", pytrace=False)

    def wait(self, predicate, what, timeout=TIMEOUT):
        try:
            return wait_for(predicate, timeout, what, interval=0.01)
        except TimeoutError as exc:
            self.check_alive()
            pytest.fail(str(exc), pytrace=False)

    def bring_up(self):
        """unconfigured -> inactive -> active; returns the states seen."""
        try:
            self.lifecycle.wait(60.0)
        except TimeoutError as exc:
            self.check_alive()
            pytest.fail(f"{exc}; node log:\n{self.log()[-3000:]}", pytrace=False)
        seen = [self.state()]
        assert self.transition("configure", STARTUP), "configure failed:\n" + self.log()[-3000:]
        seen.append(self.state())
        assert self.transition("activate"), "activate failed:\n" + self.log()[-3000:]
        seen.append(self.state())
        self.t_active = time.monotonic()
        return seen

    def close(self):
        try:
            self.spinner.stop()
            self.client.destroy_node()
        finally:
            code = stop_process(self.proc)
            self.ctx.try_shutdown()
        return code


def diagnostics(h) -> dict:
    """A dict kept up to date with the node's latest DiagnosticStatus values (and ``_message``),
    from ``/diagnostics`` through ``h.client``."""
    from diagnostic_msgs.msg import DiagnosticArray
    status: dict = {}

    def take(msg):
        for st in msg.status:
            if st.name.startswith(f"{h.fqn}: "):
                status.update({kv.key: kv.value for kv in st.values}, _message=st.message)
    h.client.create_subscription(DiagnosticArray, "/diagnostics", take, 10)
    return status
