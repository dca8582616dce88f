"""Helpers shared by the demo, the ROS tests and the benchmarks: start the node as a process,
drive its lifecycle, call services with bounded waits while an executor spins in a thread.

Every wait here is bounded and raises :class:`TimeoutError` naming what did not happen.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, cast

from mechnode.paths import config_dir

if TYPE_CHECKING:
    from rclpy.executors import Executor

#: The parameter files shipped with mechnode (config/ of the repository, installed to
#: share/mechnode/config: mechnode.paths.config_dir).
PARAMS_DIR = str(config_dir())
DEFAULT_PARAMS = os.path.join(PARAMS_DIR, "cartpole_params.yaml")


def ros_environment(domain_id: int | None = None) -> dict:
    """Environment for ROS processes here: discovery on this host only and a private domain id
    (the given one, the current ROS_DOMAIN_ID, or one derived from the pid)."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_STATIC_PEERS", None)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    elif not env.get("ROS_DOMAIN_ID"):
        env["ROS_DOMAIN_ID"] = str(1 + os.getpid() % 100)
    env.setdefault("RCUTILS_COLORIZED_OUTPUT", "0")
    env.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "0")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def node_command(params_file: str = DEFAULT_PARAMS, namespace: str = "", params=(),
                 autostart: bool = False, cli_args=(), ros_args=()) -> list:
    """argv of ``python -m mechnode`` with a parameter file, namespace and ``-p`` overrides (and
    further ROS arguments ``ros_args``, e.g. ``["--enclave", "/mechnode"]``)."""
    cmd = [sys.executable, "-m", "mechnode"] + (["--autostart"] if autostart else []) + list(cli_args)
    cmd += ["--ros-args", "--params-file", params_file]
    if namespace:
        cmd += ["-r", f"__ns:={namespace}"]
    for p in params:
        cmd += ["-p", p]
    return cmd + list(ros_args)


def start_node_process(params_file: str = DEFAULT_PARAMS, namespace: str = "", params=(),
                       log_path: str | None = None, env: dict | None = None,
                       autostart: bool = False, cli_args=(), ros_args=()) -> subprocess.Popen:
    """Start the node; its output goes to ``log_path`` (or is discarded)."""
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(node_command(params_file, namespace, params, autostart, cli_args, ros_args),
                                stdout=out, stderr=subprocess.STDOUT,
                                env=env or ros_environment())
    finally:
        if log_path:
            cast(IO[bytes], out).close()        # the log file opened above


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """SIGINT, then SIGTERM, then SIGKILL (each after ``timeout/2``); returns the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=timeout / 2)
        except subprocess.TimeoutExpired:
            proc.terminate()
        try:
            return proc.wait(timeout=timeout / 2)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout=5)
    return proc.returncode


def wait_for(predicate, timeout: float, what: str, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Spinner:
    """An executor spinning some nodes in a background thread: a SingleThreadedExecutor (the
    default, ``threads=1``) or a MultiThreadedExecutor with ``threads`` threads.

    Keep the default in a process that also runs a simulated robot (:class:`~mechnode.testing.sim.SimRobot`,
    the MuJoCo robot): rclpy's multi-threaded executor re-dispatches a ready entity until a worker
    thread takes it, holding the interpreter lock meanwhile, and the robot's step thread then
    stalls for tenths of a second (measured 0.26-0.4 s), long enough for the node to refuse its
    states as stale."""

    def __init__(self, context, *nodes, threads: int = 1):
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
        if threads == 1:
            self.executor: Executor = SingleThreadedExecutor(context=context)
        else:
            self.executor = MultiThreadedExecutor(num_threads=threads, context=context)
        for n in nodes:
            self.executor.add_node(n)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        try:
            self.executor.spin()
        except Exception:  # noqa: BLE001 - context shut down
            pass

    def add(self, node):
        self.executor.add_node(node)

    def stop(self):
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(timeout=5.0)


def call(client, request, timeout: float, what: str = "", resend_after: float | None = None):
    """Call a service (the client's node must be spun elsewhere); bounded wait for the answer.

    ``resend_after``: for idempotent requests, send again when no answer came within that many
    seconds. A service drops its answer to a client whose response reader it has not matched yet
    (rmw_fastrtps logs "failed to send response (timeout): client will not receive response"),
    which happens to clients created moments before the call on a loaded machine."""
    what = what or client.srv_name
    deadline = time.monotonic() + timeout
    wait_for(client.service_is_ready, timeout, f"service {client.srv_name}", interval=0.02)
    while True:
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _, done=done: done.set())
        left = deadline - time.monotonic()
        if done.wait(max(0.0, min(left, resend_after or left))):
            break
        client.remove_pending_request(future)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for the answer of {what}")
    result = future.result()
    if result is None:
        raise RuntimeError(f"{what}: no result ({future.exception()!r})")
    return result


class LifecycleClient:
    """``change_state`` / ``get_state`` of a lifecycle node, by its fully qualified name."""

    def __init__(self, node, target: str):
        from lifecycle_msgs.srv import ChangeState, GetState
        self.target = target
        self._change = node.create_client(ChangeState, f"{target}/change_state")
        self._get = node.create_client(GetState, f"{target}/get_state")

    def wait(self, timeout: float):
        wait_for(lambda: self._change.service_is_ready() and self._get.service_is_ready(), timeout,
                 f"the lifecycle services of {self.target}", interval=0.02)

    def state(self, timeout: float = 10.0) -> str:
        from lifecycle_msgs.srv import GetState
        return call(self._get, GetState.Request(), timeout, f"{self.target}/get_state",
                    resend_after=1.0).current_state.label

    def change(self, transition: str, timeout: float = 30.0) -> bool:
        """Trigger a transition by label (configure, activate, deactivate, cleanup, shutdown).
        If its answer is lost (see :func:`call`), the node's state after it decides."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState
        ids = {"configure": Transition.TRANSITION_CONFIGURE, "activate": Transition.TRANSITION_ACTIVATE,
               "deactivate": Transition.TRANSITION_DEACTIVATE, "cleanup": Transition.TRANSITION_CLEANUP}
        goals = {"configure": "inactive", "activate": "active", "deactivate": "inactive",
                 "cleanup": "unconfigured", "shutdown": "finalized"}
        req = ChangeState.Request()
        if transition in ids:
            req.transition.id = ids[transition]
        else:
            req.transition.label = transition
        what = f"{self.target} {transition}"
        wait_for(self._change.service_is_ready, timeout, f"service {self._change.srv_name}", interval=0.02)
        future = self._change.call_async(req)
        start = time.monotonic()
        reached = None                  # when get_state first showed the goal
        polled = start                  # get_state at most once a second, after the first 2 s
        while not future.done():
            now = time.monotonic()
            if now - start > timeout:
                self._change.remove_pending_request(future)
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for the answer of {what}")
            if reached is not None and now - reached > 2.0:
                self._change.remove_pending_request(future)   # answer lost; the state decides
                return True
            time.sleep(0.05)
            if reached is None and transition in goals and now - start > 2.0 and now - polled > 1.0:
                polled = now
                try:
                    if self.state(5.0) == goals[transition]:
                        reached = time.monotonic()
                except TimeoutError:
                    pass                # e.g. the process exits after shutdown
        result = future.result()
        if result is None:
            raise RuntimeError(f"{what}: no result ({future.exception()!r})")
        return result.success


def start_big_reference(topic: str, joint_names, points: int, env=None) -> subprocess.Popen:
    """Start a process that publishes a ``points``-point JointTrajectory on ``topic`` and exits
    (:mod:`mechnode.testing.big_reference`); its output is captured."""
    cmd = [sys.executable, "-m", "mechnode.testing.big_reference", "--topic", topic,
           "--points", str(points), "--joints", ",".join(joint_names)]
    return subprocess.Popen(cmd, env=env or ros_environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
