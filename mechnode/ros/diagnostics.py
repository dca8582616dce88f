"""The node's health: counters, timings, the last error, rate-limited logging, callbacks that
never raise, and the ``diagnostic_msgs/DiagnosticStatus`` that reports all of it."""
from __future__ import annotations

import functools
import time
import traceback

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

from mechnode.logic.limits import STAMP_KINDS

#: counters reported even while zero: what the command path refused or changed
SAFETY_COUNTERS = (("states_rejected", "states_out_of_bounds")
                   + tuple(f"states_stamp_{kind}" for kind in STAMP_KINDS)
                   + ("commands_saturated", "commands_not_finite", "watchdog_trips"))


class Health:
    """What every part of the node records for the diagnostics: ``counters`` (events),
    ``stats`` (seconds of the last operations, how the last reference was made feasible;
    reported as ``last_<name>``), ``figures`` (running figures reported under their own names, as
    the re-planner's latency), ``last_error``; and a logger that repeats a warning at most once
    per period."""

    def __init__(self, logger):
        self.logger = logger
        self.counters = {}
        self.stats = {}
        self.figures: dict = {}
        self._last_error, self.last_error_time = "", None
        self._warned = {}

    @property
    def last_error(self) -> str:
        """The last error recorded (``last_error_time``: its ``time.monotonic()``)."""
        return self._last_error

    @last_error.setter
    def last_error(self, text: str):
        self._last_error, self.last_error_time = text, time.monotonic()

    def count(self, key, n=1):
        self.counters[key] = self.counters.get(key, 0) + n

    def warn_limited(self, key, text, period=2.0, error=False):
        """Log ``text`` at most once per ``period`` seconds per ``key``."""
        now = time.monotonic()
        last = self._warned.get(key)
        if last is not None and now - last < period:
            return
        if len(self._warned) > 256:
            self._warned.clear()
        self._warned[key] = now
        (self.logger.error if error else self.logger.warning)(text)


def destroy_timer(node, timer) -> None:
    """Destroy ``node``'s ``timer`` if there is one (the idle hold's and the re-planner's stop);
    a node that is already shutting down may refuse, which is not an error here."""
    if timer is None:
        return
    try:
        node.destroy_timer(timer)
    except Exception:  # noqa: BLE001
        pass


def callback_guard(method):
    """Subscription/timer callbacks never raise: an exception is counted and logged (rate
    limited). For methods of objects with a ``health`` attribute (:class:`Health`)."""
    @functools.wraps(method)
    def wrapper(self, *args):
        try:
            return method(self, *args)
        except Exception as exc:  # noqa: BLE001
            self.health.count("callback_errors")
            self.health.warn_limited(f"err:{method.__name__}:{type(exc).__name__}",
                                     f"{method.__name__} failed: {type(exc).__name__}: {exc}\n"
                                     f"{traceback.format_exc()}", error=True)
    return wrapper


def tracking_status(name, plant, lifecycle_state, active, command, schedule, health,
                    now_ns, heartbeat=None) -> DiagnosticStatus:
    """The status of the tracking controller.

    ``plant``: the configured Plant or None; ``active``: whether the node is active;
    ``command``: the command path's report (:meth:`~mechnode.ros.command.CommandPath.status`: state
    age, watchdog, latencies, its counters and last error) or None if it cannot report;
    ``schedule``: the :class:`~mechnode.ros.reference.ActiveSchedule` in force or None (the idle
    hold is not a schedule: the command path's ``mode``, reported as ``mode``, says whether it
    is ``idle``, ``holding`` or ``tracking``);
    ``health``: the managed node's :class:`Health`; ``now_ns``: ROS time; ``heartbeat``: the
    command process's heartbeat (``age`` [s] or None if it is not running, ``stalls``,
    ``longest`` [s], ``stalled`` now, ``new_stalls`` since the last report).
    """
    st = DiagnosticStatus()
    st.name = f"{name}: tracking controller"
    st.hardware_id = plant.system.name if plant is not None else ""
    cmd = command or {}
    age, tripped = cmd.get("state_age"), bool(cmd.get("tripped"))
    remaining = None if schedule is None else max(0.0, (schedule.end_ns - now_ns) * 1e-9)
    median, p99 = cmd.get("latency_median_us"), cmd.get("latency_p99_us")
    last_error = health.last_error
    if cmd.get("last_error_time") is not None and (health.last_error_time is None
                                                   or cmd["last_error_time"] > health.last_error_time):
        last_error = cmd["last_error"]
    beat = heartbeat or {}
    stalled = bool(beat.get("stalled"))
    mode = cmd.get("mode", "idle") if active else "idle"
    values = {
        "lifecycle_state": lifecycle_state,
        "mode": mode,
        "command_process": "stalled" if stalled else "running" if command is not None else "not running",
        "command_heartbeat_age_s": "none" if beat.get("age") is None else f"{beat['age']:.4f}",
        "command_stalls": str(beat.get("stalls", 0)),
        "command_longest_stall_s": f"{beat.get('longest', 0.0):.4f}",
        "state_age_s": "none" if age is None else f"{age:.4f}",
        "schedule_active": str(schedule is not None),
        "schedule_time_remaining_s": "none" if remaining is None else f"{remaining:.4f}",
        "schedule_knots": "0" if schedule is None else str(schedule.schedule.knots),
        "watchdog_tripped": str(tripped),
        "command_latency_median_us": "none" if median is None else f"{median:.1f}",
        "command_latency_p99_us": "none" if p99 is None else f"{p99:.1f}",
        "last_error": last_error,
    }
    for key, val in sorted(health.stats.items()):
        values["last_" + key] = f"{val:.6f}" if isinstance(val, float) else str(val)
    for key, val in sorted(health.figures.items()):
        values[key] = f"{val:.4f}" if isinstance(val, float) else str(val)
    counters = dict.fromkeys(SAFETY_COUNTERS, 0)
    for source in (health.counters, cmd.get("counters", {})):
        for key, val in source.items():
            counters[key] = counters.get(key, 0) + val
    for key, val in sorted(counters.items(), key=lambda kv: (kv[0] not in SAFETY_COUNTERS, kv[0])):
        values[key] = str(val)
    st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
    if plant is None:
        st.level, st.message = DiagnosticStatus.WARN, "unconfigured"
    elif stalled:
        st.level, st.message = DiagnosticStatus.ERROR, (
            f"the command path is stalled: no heartbeat from the command process for {beat['age']:.2f} s")
    elif command is None:
        st.level, st.message = DiagnosticStatus.ERROR, "the command process is not running: not commanding"
    elif not active:
        st.level, st.message = DiagnosticStatus.OK, "inactive"
    elif beat.get("new_stalls"):
        st.level, st.message = DiagnosticStatus.ERROR, (
            f"the command path stalled {beat['new_stalls']} time(s) since the last report (the longest "
            f"stall so far {beat['longest']:.2f} s): commands were late")
    elif tripped:
        st.level, st.message = DiagnosticStatus.ERROR, (
            f"state timeout: no JointState for {age:.2f} s, not commanding")
    elif schedule is None:
        st.level, st.message = DiagnosticStatus.OK, (
            "active, holding the robot where it was at activation; waiting for a reference" if mode == "holding"
            else "active, waiting for a reference (no command sent)")
    elif age is None:
        st.level, st.message = DiagnosticStatus.WARN, "schedule active, waiting for JointState"
    else:
        st.level, st.message = DiagnosticStatus.OK, (
            f"tracking schedule #{schedule.seq}, {remaining:.2f} s remaining" if mode != "holding" or remaining
            else f"schedule #{schedule.seq} ended: holding its last configuration")
    return st
