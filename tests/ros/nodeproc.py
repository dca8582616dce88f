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
STARTUP = 900.0       # configure: loads the numba kernels; compiles them on a cold cache


class NodeProcess:
    """A running ``python -m mechnode`` in namespace ``ns`` plus a client node ``client``."""

    def __init__(self, rclpy_mod, params_file, ns, log_path, params=()):
        from rclpy.context import Context
        self.ns, self.fqn, self.log_path = ns, f"{ns}/mechnode", str(log_path)
        self.t_start = time.monotonic()
        self.proc = start_node_process(params_file, ns, params, log_path=self.log_path,
                                       env=ros_environment())
        self.ctx = Context()
        rclpy_mod.init(context=self.ctx, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
        self.client = rclpy_mod.create_node("test_client", namespace=ns, context=self.ctx)
        self.spinner = Spinner(self.ctx, self.client, threads=3)
        self.lifecycle = LifecycleClient(self.client, self.fqn)
        self._clients = {}

    # ---------------------------------------------------------------- services
    def service(self, srv_type, name):
        key = (srv_type, name)
        if key not in self._clients:
            self._clients[key] = self.client.create_client(srv_type, f"{self.fqn}/{name}")
        return self._clients[key]

    def call(self, srv_type, name, request, timeout=TIMEOUT):
        self.check_alive()
        return call(self.service(srv_type, name), request, timeout, f"{self.fqn}/{name}")

    def transition(self, label, timeout=TIMEOUT):
        self.check_alive()
        return self.lifecycle.change(label, timeout)

    def state(self):
        return self.lifecycle.state(TIMEOUT)

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
