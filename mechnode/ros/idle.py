"""What the node commands while no schedule is in force: the idle hold (parameter ``idle_action``).

With ``idle_action: balance`` (or ``hold``) on a floating base (:mod:`mechnode.logic.legged`), the
hold is :func:`~mechnode.logic.legged.balance_hold`: the robot standing where it is on its
contacts, the contact-consistent LQR gain about that stance and the holding torques, computed
about the first state whose joints and base (Odometry) are both fresh, and published on the
GainSchedule topic (one knot, ``STATE_TANGENT``); ``balance`` on a fixed base is refused in the
log and the diagnostics.

With ``idle_action: hold`` (the default) the node holds the robot from activation until the
first schedule is in force: once the command path has accepted its first JointState after
activation, the managed node computes the law that holds the robot at rest at that
configuration (:func:`mechnode.logic.gains.hold_schedule`: the inputs that hold it against gravity and
the constraint forces, and the stationary LQR gains of the exact discrete linearization there,
with the node's weights ``Q``, ``R``) and hands it to the command path as a one-knot
:class:`~mechnode.ros.reference.ActiveSchedule` of kind ``"hold"`` — the same path and the same
generation and size checks as every schedule. A reference that becomes a schedule replaces it.
A hold that cannot be computed (a configuration the inputs cannot hold, e.g. an underactuated
robot off its equilibria; a singular linearization; no stabilizing gains; anything non-finite)
is refused with an error in the log and the diagnostics (``holds_refused``, ``last_error``), and
the node sends nothing until a schedule, as with ``idle_action: none``.

With ``idle_after_schedule: true`` (and ``idle_action: hold``), every new schedule carries the
hold about its last knot's configuration, and the command path switches to it once the schedule
has ended; without it the schedule's last knot's law goes on (tracking the final state).

After a jump of the clock (``use_sim_time``: :mod:`mechnode.ros.clock_jumps`) the hold is
computed anew, about the latest state the command path accepted once that state is fresh on
the new clock (stamped within ``stamp_tolerance`` ahead and ``state_timeout`` behind it).

The mode (``idle``, ``holding``, ``tracking``) is reported by the command path
(:meth:`mechnode.ros.command.CommandPath.mode`) in the diagnostics (key ``mode``).
"""
from __future__ import annotations

import time

import numpy as np

from mechnode.logic.gains import HoldError, hold_schedule
from mechnode.logic.legged import balance_hold
from mechnode.ros.command_process import CommandProcessError
from mechnode.ros.diagnostics import callback_guard, destroy_timer
from mechnode.ros.reference import ActiveSchedule

#: Seconds between the managed node's requests for the command path's first state.
POLL_PERIOD = 0.02


class IdleHold:
    """The idle hold of a :class:`~mechnode.ros.node.MechNode` (see the module docstring).
    :meth:`start` at activate, :meth:`stop` at teardown (under the node's lock),
    :meth:`attach_end_hold` for every new schedule before it is installed."""

    def __init__(self, node):
        self._node = node
        self.health = node.health
        self._timer = None
        self._token = 0             # one more at every start and stop: a poll of an old one is void
        self._config = None
        self._resume = False        # after a clock jump: the latest fresh state, not the first
        self.stance = None          # the configuration the balance hold stands at (a floating base)

    def start(self, config, resume: bool = False) -> None:
        """At activate (``config`` the node's Configuration): with ``idle_action: hold``, wait
        (polling the command path every :data:`POLL_PERIOD` s) for the first accepted state;
        ``resume``: after a clock jump, for the latest accepted state once it is fresh."""
        node = self._node
        self.stop()
        self._resume = resume
        action = node.params.value("idle_action")
        if action == "none":
            node.get_logger().info(f"idle_action {action}: no command until a schedule is in force")
            return
        if action == "balance" and not getattr(config.plant, "floating", False):
            self.health.count("holds_refused")
            self.health.last_error = "idle_action balance needs floating_base: quaternion and contacts"
            node.get_logger().error("idle_action balance needs a floating base (floating_base: quaternion, "
                                    "contacts); sending no command until a schedule is in force")
            return
        self._config = config
        self._timer = node.create_timer(POLL_PERIOD, self._poll, callback_group=node._cb_reference)

    def stop(self) -> None:
        self._token += 1
        timer, self._timer, self._config, self.stance = self._timer, None, None, None
        destroy_timer(self._node, timer)

    @callback_guard
    def _poll(self):
        node, timer, token, config = self._node, self._timer, self._token, self._config
        if timer is None or config is None or not node.is_active:
            return                              # (activation not complete yet, or stopped)
        if node.reference.active is not None:
            timer.cancel()                      # a schedule came first: nothing to hold
            return
        try:
            first = node.command.latest_state() if self._resume else node.command.first_state()
        except CommandProcessError as exc:
            timer.cancel()
            node.get_logger().error(f"idle hold: no state from the command path ({exc}); not holding")
            return
        if first is None or (self._resume and not self._fresh(first[2])):
            return                              # no state accepted yet (on the new clock)
        timer.cancel()                          # one attempt per activation
        q = first[0]
        t0 = time.perf_counter()
        weights = node.params.current_weights(config)
        try:
            if getattr(config.plant, "floating", False):
                sched = balance_hold(config.plant.system, q, weights.Q, weights.R, config.plant.dt,
                                     config.joint_map.joint_names)
            else:
                sched = hold_schedule(config.plant, q, weights, config.joint_map.joint_names)
        except HoldError as exc:
            self.health.count("holds_refused")
            self.health.last_error = f"idle hold refused: {exc}"
            node.get_logger().error(f"idle hold refused at q = {np.round(q, 4).tolist()}: {exc}; sending no "
                                    "command until a schedule is in force")
            return
        with node._lock:
            if (token != self._token or not node.is_active or node.config is not config
                    or node.reference.active is not None):
                return                          # deactivated, reconfigured or a schedule came meanwhile
            active = ActiveSchedule(sched, first[2], 0, config.generation, kind="hold")
            if sched.info.get("kind") == "balance":
                node.attach_lfc(active)                     # (lfc_topic: the balance law in LFC's form)
            node.command.install(active)
            if sched.info.get("kind") == "balance":
                node.publish_schedule(sched, first[2])     # the balance law and its stance, one knot
                self.stance = sched.x_ref[0, :config.plant.n].copy()
        seconds, age = time.perf_counter() - t0, (node.get_clock().now().nanoseconds - first[2]) * 1e-9
        self.health.count("holds")
        self.health.stats.update(hold_s=seconds, hold_state_age_s=age)
        node.get_logger().info(
            f"{'balancing' if sched.info.get('kind') == 'balance' else 'holding'} the robot at the state "
            f"measured {'after the clock jump' if self._resume else 'at activation'}, q = {np.round(q, 4).tolist()} "
            f"(holding inputs {np.round(sched.u_ref[0, :config.plant.m], 3).tolist()}; computed in "
            f"{1e3 * seconds:.1f} ms, in force {1e3 * age:.0f} ms after that state) until a schedule is in force")

    def _fresh(self, stamp_ns: int) -> bool:
        """Whether a state stamped ``stamp_ns`` is fresh on the node's clock now."""
        value = self._node.params.value
        ahead = (stamp_ns - self._node.get_clock().now().nanoseconds) * 1e-9
        return -float(value("state_timeout")) <= ahead <= float(value("stamp_tolerance"))

    def attach_end_hold(self, active, config) -> None:
        """With ``idle_after_schedule`` and ``idle_action: hold``: give ``active`` (a new
        schedule, not yet installed) the hold about its last knot's configuration; logged and
        left out if it cannot be computed (the last knot's law then goes on)."""
        node = self._node
        if not (node.params.value("idle_after_schedule") and node.params.value("idle_action") == "hold"):
            return
        plant = config.plant
        try:
            active.hold = hold_schedule(plant, active.schedule.x_ref[-1, :plant.n],
                                        node.params.current_weights(config), config.joint_map.joint_names)
        except HoldError as exc:
            self.health.count("holds_refused")
            self.health.last_error = f"hold after schedule #{active.seq} refused: {exc}"
            node.get_logger().warning(f"no hold after schedule #{active.seq} ({exc}); its last knot's law "
                                      "goes on after its end")
