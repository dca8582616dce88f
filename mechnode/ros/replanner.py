"""Re-planning while a schedule is in force (parameter ``replan_period``, seconds; 0 = off).

Every period, on a timer of its own callback group (never the command path's: that runs in its
own process and never waits for this), the managed node takes the latest state the command path
accepted and its stamp (``CommandProcess.latest_state``), and re-plans the schedule in force from
it (:func:`mechnode.logic.replan.replan`): the closed loop predicted from that state over the rest of the
reference (or ``replan_horizon`` seconds of it), linearized exactly along the prediction, the
Riccati pass along it and, with ``replan_step`` (the default), one Gauss-Newton step of the
tracking cost towards the reference's own schedule, which updates the feed-forward as a
real-time iteration does. The result is installed through the reference pipeline's
generation-checked path (:meth:`mechnode.ros.reference.ReferencePipeline.install`), so it is
published as a ``GainSchedule`` (and, with ``lfc_topic``, streamed as LFC ``Control``) like any
schedule, on the same time base as the schedule it replaces.

What is never installed: a re-plan that took longer than the period (dropped, counted in
``replan_drops``: its state is older than the next re-plan's), one whose base was replaced
meanwhile (a new reference, a deactivation, a new configuration: counted in
``replans_discarded``), one from a state older than ``state_timeout`` or stamped before the
schedule's start (not attempted), and one whose prediction fails (a step that does not solve, a
singular linearization: counted in ``replans_failed``, the schedule in force stays).

A floating base's body motion (:mod:`mechnode.logic.body`) is re-planned by
:func:`mechnode.logic.body.replan_body`: the rest of its base path (or ``replan_horizon`` seconds of
it) re-solved with the contacts anchored where the measured configuration has them (a foot that
slipped is stood on where it is), and the gains along it, on the reference pipeline's planning
thread.

Diagnostics: ``replans`` (installed), ``replan_drops``, ``replans_discarded``, ``replans_failed``
and ``replan_latency_median_ms``, ``replan_latency_p99_ms`` (timer callback to installed, over
the last :data:`LATENCY_WINDOW` re-plans).
"""
from __future__ import annotations

import time
from collections import deque

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

import core
from mechnode.logic.body import replan_body
from mechnode.logic.replan import replan, terminal_for
from mechnode.ros.command_process import CommandProcessError
from mechnode.ros.diagnostics import callback_guard, destroy_timer

#: re-plans over which the latency's median and 99th percentile are reported
LATENCY_WINDOW = 1000


class Replanner:
    """The re-planning of a :class:`~mechnode.ros.node.MechNode` (see the module docstring).
    :meth:`start` at activate, :meth:`stop` at teardown (under the node's lock)."""

    def __init__(self, node):
        self._node = node
        self.health = node.health
        self._group = MutuallyExclusiveCallbackGroup()
        self._timer = None
        self._config = None
        self._period = 0.0
        self._horizon: float | None = None
        self._step = True
        self._terminal: tuple | None = None       # (the reference's schedule, its terminal weight)
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)

    def start(self, config) -> None:
        """At activate (``config`` the node's Configuration): a timer every ``replan_period``
        seconds, if it is not 0."""
        node, value = self._node, self._node.params.value
        self.stop()
        period = float(value("replan_period"))
        if period <= 0.0:
            return
        horizon = float(value("replan_horizon"))
        self._config, self._period = config, period
        self._horizon, self._step = (horizon if horizon > 0 else None), bool(value("replan_step"))
        for key in ("replans", "replan_drops", "replans_discarded", "replans_failed"):
            self.health.counters.setdefault(key, 0)         # reported while zero too
        self._timer = node.create_timer(period, self._on_timer, callback_group=self._group)
        node.get_logger().info(
            f"re-planning every {period} s from the measured state over "
            f"{'the rest of the reference' if self._horizon is None else f'{horizon} s of the reference'}"
            f"{', with a Gauss-Newton step towards it' if self._step else ' (gains only)'}")

    def stop(self) -> None:
        timer, self._timer, self._config, self._terminal = self._timer, None, None, None
        destroy_timer(self._node, timer)

    @callback_guard
    def _on_timer(self):
        t_fire = time.monotonic()
        node, config, pipeline = self._node, self._config, self._node.reference
        if config is None or not node.is_active:
            return
        base, origin = pipeline.active, pipeline.origin
        if base is None or origin is None or base.kind != "schedule" or base.generation != config.generation:
            return                                  # nothing to re-plan (no schedule, or the hold)
        now_ns = node.get_clock().now().nanoseconds
        if now_ns >= base.end_ns:
            return                                  # the reference has ended
        try:
            latest = node.command.latest_state()
        except CommandProcessError as exc:
            self.health.warn_limited("replan:state", f"re-plan: no state from the command path ({exc})")
            return
        if latest is None:
            return
        q, dq, stamp_ns = latest
        t = (stamp_ns - base.start_ns) * 1e-9
        if t < 0.0 or (now_ns - stamp_ns) * 1e-9 > float(node.params.value("state_timeout")):
            return                                  # before the schedule's start, or a stale state
        plant = config.plant
        try:
            weights = node.params.current_weights(config)
            if getattr(plant, "floating", False):      # a body motion: re-solved on the measured contacts
                new = pipeline.plan(replan_body, plant.system, base.schedule, q, t, weights.Q, weights.R,
                                    self._horizon)
            else:
                x = plant.vi.discrete_state(q, dq)
                if self._terminal is None or self._terminal[0] is not origin.schedule:
                    self._terminal = (origin.schedule, terminal_for(plant, origin.schedule, weights))
                new = replan(plant, base.schedule, x, t, weights, self._horizon, self._terminal[1],
                             origin.schedule if self._step else None)
        except (core.CoreError, np.linalg.LinAlgError, ValueError) as exc:
            self.health.count("replans_failed")
            self.health.warn_limited("replan:failed", f"re-plan from the state at t = {t:.3f} s failed "
                                     f"({type(exc).__name__}: {exc}); the schedule in force stays")
            return
        if new is None:
            return
        latency = time.monotonic() - t_fire
        if latency > self._period:
            self.health.count("replan_drops")
            self.health.warn_limited("replan:late", f"re-plan dropped: it took {1e3 * latency:.1f} ms, more "
                                     f"than the period of {1e3 * self._period:.1f} ms (counted in replan_drops)")
            return
        installed, _ = pipeline.install(config, new, base.start_ns, replaces=base)
        if installed is None:
            self.health.count("replans_discarded")
            return
        latency = time.monotonic() - t_fire
        self.latencies.append(latency)
        self.health.count("replans")
        lat = np.array(self.latencies)
        self.health.figures.update(replan_latency_median_ms=float(1e3 * np.median(lat)),
                                   replan_latency_p99_ms=float(1e3 * np.percentile(lat, 99)),
                                   replan_knot=int(new.info["replan_knot"]),
                                   replan_steps=int(new.info["replan_steps"]))
