"""The 1 kHz command path: JointState in, command out, and the state watchdog.

While the node is active, the path runs on a helper node ``<name>_control`` spun by a
single-threaded executor in a thread of its own. That executor's wait set holds only the
JointState subscription and the watchdog timer, not every service, timer and subscription of
the managed node: rclpy's multi-threaded executor over all of them cannot keep up with 1 kHz.

Per JointState (mapped by joint name): the state ``x = [q, p = M(q) qdot, v]`` (exact Legendre
transform) and the command ``u = u_ref[k] - K[k] (x - x_ref[k])`` at the knot nearest to the
message's stamp (its receipt time if the stamp is zero) are computed in one numba call
(``Plant.control``) and published as ``std_msgs/Float64MultiArray``: the force inputs
(``command_mode: effort``) or the whole integrator input (``full``).

Watchdog: when no valid JointState arrived for ``state_timeout`` seconds while commanding, the
path sends once either zeros (``timeout_action: zero``) or the last command computed from a
valid state (``hold``), stops commanding and logs a warning; it resumes with the next valid
state.
"""
from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from . import conversions as cv
from .diagnostics import callback_guard
from .errors import InputError
from .qos import COMMAND_QOS


class CommandPath:
    """The command path of the managed node ``node`` (see the module docstring).

    ``params``: the node's :class:`~mechnode.parameters.NodeParameters` (command_mode,
    state_timeout, timeout_action are read per message); ``health``: its
    :class:`~mechnode.diagnostics.Health`. :meth:`start` at activate, :meth:`stop` at
    deactivate. Between them the schedule in force is read from ``schedules.active``.
    """

    def __init__(self, node, params, health):
        self._node = node
        self._params = params
        self.health = health
        self._control = None            # (helper node, executor, thread) while started
        self._pubs = {}                 # "command" and the optional "echo", on the helper node
        self._state_sub = None
        self._plant = self._joint_map = self._schedules = None
        self._generation = None         # of the configuration the path was started with
        # The helper node is a plain rclpy Node, which has no lifecycle publishers: this flag
        # gates its publishing explicitly (set at start, cleared first thing at stop).
        self._enabled = False
        self._last_state_mono = None    # time.monotonic() of the last valid JointState
        self._last_command = None
        self._commanding = False
        self.tripped = False            # the watchdog stopped commanding
        self.latency_us = deque(maxlen=2000)   # JointState callback -> command published

    def state_age(self) -> float | None:
        """Seconds since the last valid JointState (None: none yet since activation)."""
        last = self._last_state_mono
        return None if last is None else time.monotonic() - last

    # ------------------------------------------------------------------ start / stop
    def start(self, config, schedules):
        """Create the helper node with the command publisher(s), the watchdog and, last, the
        JointState subscription, and spin it. Topic names are resolved (expanded, remapped) by
        the managed node, so ``~/...`` names and remappings mean what they mean for it."""
        node, value = self._node, self._params.value
        self._plant, self._joint_map, self._schedules = config.plant, config.joint_map, schedules
        self._generation = config.generation
        ctl = rclpy.create_node(f"{node.get_name()}_control", namespace=node.get_namespace(),
                                context=node.context, use_global_arguments=False,
                                start_parameter_services=False, enable_rosout=False)
        executor = SingleThreadedExecutor(context=node.context)
        thread = threading.Thread(target=self._spin, args=(executor,), daemon=True,
                                  name="mechnode_control")
        self._control = (ctl, executor, thread)
        self._pubs["command"] = ctl.create_publisher(
            Float64MultiArray, node.resolve_topic_name(value("command_topic")), COMMAND_QOS)
        echo = value("command_echo_topic")
        if echo:
            self._pubs["echo"] = ctl.create_publisher(JointState, node.resolve_topic_name(echo),
                                                      qos_profile_sensor_data)
        timeout = float(value("state_timeout"))
        ctl.create_timer(min(max(timeout / 4, 0.005), 0.25), self._on_watchdog)
        executor.add_node(ctl)
        thread.start()
        self._last_state_mono = None
        self.tripped = False
        self._commanding = False
        self._enabled = True
        # the subscription last: its callback may run as soon as it exists
        self._state_sub = ctl.create_subscription(
            JointState, node.resolve_topic_name(value("state_topic")), self._on_joint_state,
            qos_profile_sensor_data)

    @property
    def state_topic(self) -> str:
        return self._state_sub.topic_name

    @property
    def command_topic(self) -> str:
        return self._pubs["command"].topic_name

    def _spin(self, executor):
        try:
            executor.spin()
        except Exception as exc:  # noqa: BLE001 - context shut down under us
            if self._node.context.ok():
                self.health.logger.error(f"control executor stopped: {type(exc).__name__}: {exc}")

    def stop(self):
        """Stop publishing, stop the executor thread, destroy the helper node and its entities."""
        self._enabled = False
        control, self._control = self._control, None
        if control is None:
            return
        ctl, executor, thread = control
        executor.shutdown(timeout_sec=2.0)
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        try:
            ctl.destroy_node()
        except Exception:  # noqa: BLE001
            pass
        self._pubs, self._state_sub = {}, None
        self._plant = self._joint_map = self._schedules = None

    def _publish(self, key, msg) -> bool:
        """Publish on a publisher of the helper node, from the control thread only: no lock,
        since :meth:`stop` joins the control thread before it destroys that node."""
        pub = self._pubs.get(key)
        if pub is None or not self._enabled:
            return False
        pub.publish(msg)
        return True

    # ------------------------------------------------------------------ callbacks
    @callback_guard
    def _on_joint_state(self, msg: JointState):
        t_cb = time.perf_counter()
        plant, jm, health = self._plant, self._joint_map, self.health
        if plant is None or not self._enabled:
            return
        try:
            q, dq, unknown = jm.state(msg.name, msg.position, msg.velocity)
        except InputError as exc:
            health.count("states_rejected")
            health.last_error = f"JointState rejected: {exc}"
            health.warn_limited("state:" + str(exc)[:60], f"JointState rejected: {exc}")
            return
        if unknown:
            health.warn_limited("unknown:" + ",".join(unknown), f"JointState: ignoring joint(s) "
                                f"unknown to the model: {list(unknown)}", period=60.0)
        self._last_state_mono = time.monotonic()
        health.count("states")
        if self.tripped:
            self.tripped = False
            health.logger.info("JointState messages resumed: commanding again")
        active = self._schedules.active
        if active is None:
            return
        if active.generation != self._generation or not active.schedule.fits(plant):
            # never reached in normal operation (the pipeline installs only its own
            # configuration's schedules); the kernel does not check bounds, so check here
            health.count("schedules_refused")
            health.warn_limited("foreign", f"schedule #{active.seq} is for configuration "
                                f"#{active.generation}, not #{self._generation}: not used")
            return
        t_ns = cv.stamp_ns(msg.header.stamp) or self._node.get_clock().now().nanoseconds
        u, _, _ = active.schedule.command(plant, (t_ns - active.start_ns) * 1e-9, q, dq)
        if u is None:
            health.count("commands_not_finite")
            health.warn_limited("u_nan", "the control law gave a non-finite command; not sent")
            return
        cmd = u[:plant.m] if self._params.command_mode == "effort" else u
        if self._publish("command", cv.command_msg(cmd)):
            self._last_command = cmd
            self._commanding = True
            health.count("commands")
            if "echo" in self._pubs:
                self._publish("echo", cv.joint_state(list(plant.input_names[:cmd.size]), None, None,
                                                     cv.stamp_ns(msg.header.stamp), effort=cmd))
        self.latency_us.append(1e6 * (time.perf_counter() - t_cb))

    @callback_guard
    def _on_watchdog(self):
        if not self._enabled or not self._commanding or self._last_state_mono is None:
            return
        timeout = float(self._params.state_timeout)
        age = time.monotonic() - self._last_state_mono
        if age <= timeout:
            return
        action = self._params.timeout_action
        plant = self._plant
        m = plant.m if self._params.command_mode == "effort" else plant.nu
        hold = (np.zeros(m) if action == "zero" or self._last_command is None
                or self._last_command.size != m else self._last_command)
        self._publish("command", cv.command_msg(hold))
        self._commanding = False
        self.tripped = True
        self.health.count("watchdog_trips")
        self.health.last_error = f"state timeout after {age:.3f} s"
        self.health.logger.warning(
            f"watchdog: no valid JointState for {age:.3f} s (state_timeout {timeout} s): stopped "
            f"commanding after sending {'zeros' if action == 'zero' else 'the last command'} "
            f"{np.round(hold, 6).tolist()}")
