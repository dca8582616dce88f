"""The 1 kHz command path: JointState in, command out, and the state watchdog.

While the node is active, the path runs on a helper node ``<name>_control`` spun by a
single-threaded executor in a thread of its own. That executor's wait set holds only the
JointState subscription and the watchdog timer, not every service, timer and subscription of
the managed node: rclpy's multi-threaded executor over all of them cannot keep up with 1 kHz.

Per JointState (mapped by joint name): the state is checked against the bounds and its stamp
against the node's clock (:mod:`mechnode.limits`: out of bounds, zero, negative, future, stale
or out-of-order stamps are refused like NaN states, counted in the diagnostics and logged at
most once per period per kind); then the state ``x = [q, p = M(q) qdot, v]`` (exact Legendre
transform) and the command ``u = u_ref[k] - K[k] (x - x_ref[k])`` at the knot nearest to the
message's stamp are computed in one numba call (``plant.vi.feedback``), saturated to
``+-command_limit`` (counted as ``commands_saturated``) and published as
``std_msgs/Float64MultiArray``: the force inputs (``command_mode: effort``) or the whole
integrator input (``full``). A non-finite command is never published.

Watchdog: when no accepted JointState arrived for ``state_timeout`` seconds while commanding
(states that are refused, e.g. stale-stamped ones, do not count), the path sends once either
zeros (``timeout_action: zero``) or the last command sent (``hold``, already saturated), stops
commanding and logs a warning; it resumes with the next accepted state.
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
from .limits import StampError
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
        self._plant = self._joint_map = self._schedules = self._limits = None
        self._last_stamp_ns = None      # stamp of the last accepted JointState
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
        self._limits = self._params.limits(config.plant, config.joint_map.joint_names)
        self._plant, self._joint_map, self._schedules = config.plant, config.joint_map, schedules
        self._last_stamp_ns = None
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
        self._plant = self._joint_map = self._schedules = self._limits = None

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
        plant, jm, limits, health = self._plant, self._joint_map, self._limits, self.health
        if plant is None or not self._enabled:
            return
        try:
            q, dq, unknown = jm.state(msg.name, msg.position, msg.velocity)
        except InputError as exc:
            return self._refuse("state:" + str(exc)[:60], exc)
        try:
            limits.check_state(q, dq)
        except InputError as exc:
            # logged per joint and kind ("velocity of joint 'j'"), whatever the value
            return self._refuse("state:bounds:" + str(exc).split(" is ")[0], exc, "states_out_of_bounds")
        try:
            t_ns = limits.check_stamp(cv.stamp_ns(msg.header.stamp),
                                      self._node.get_clock().now().nanoseconds, self._last_stamp_ns)
        except StampError as exc:
            return self._refuse("state:stamp_" + exc.kind, exc, "states_stamp_" + exc.kind)
        if unknown:
            health.count("states_with_unknown_joints")
            health.warn_limited("state:unknown_joints", f"JointState: ignoring joint(s) unknown to "
                                f"the model: {list(unknown)} (logged at most every 10 s)", period=10.0)
        self._last_stamp_ns = t_ns
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
        u, _, _ = active.schedule.command(plant, (t_ns - active.start_ns) * 1e-9, q, dq)
        if u is None:
            health.count("commands_not_finite")
            health.warn_limited("u_nan", "the control law gave a non-finite command; not sent")
            return
        cmd, clipped = limits.saturate(u[:plant.m] if self._params.command_mode == "effort" else u)
        if clipped:
            health.count("commands_saturated")
            health.warn_limited("u_saturated", f"command {np.round(u[:cmd.size], 6).tolist()} "
                                f"saturated to {np.round(cmd, 6).tolist()} (limits "
                                f"{limits.command[:cmd.size].tolist()})")
        if self._publish("command", cv.command_msg(cmd)):
            self._last_command = cmd
            self._commanding = True
            health.count("commands")
            if "echo" in self._pubs:
                self._publish("echo", cv.joint_state(list(plant.input_names[:cmd.size]), None, None,
                                                     cv.stamp_ns(msg.header.stamp), effort=cmd))
        self.latency_us.append(1e6 * (time.perf_counter() - t_cb))

    def _refuse(self, key, exc, counter=None):
        """Count and log (at most once per 2 s per ``key``) a refused JointState."""
        health = self.health
        health.count("states_rejected")
        if counter:
            health.count(counter)
        health.last_error = f"JointState rejected: {exc}"
        health.warn_limited(key, f"JointState rejected: {exc}")

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
                or self._last_command.size != m else self._limits.saturate(self._last_command)[0])
        self._publish("command", cv.command_msg(hold))
        self._commanding = False
        self.tripped = True
        self.health.count("watchdog_trips")
        self.health.last_error = f"state timeout after {age:.3f} s"
        self.health.logger.warning(
            f"watchdog: no valid JointState for {age:.3f} s (state_timeout {timeout} s): stopped "
            f"commanding after sending {'zeros' if action == 'zero' else 'the last command'} "
            f"{np.round(hold, 6).tolist()}")
