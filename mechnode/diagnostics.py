"""The node's health: counters, timings, the last error, rate-limited logging, callbacks that
never raise, and the ``diagnostic_msgs/DiagnosticStatus`` that reports all of it."""
from __future__ import annotations

import functools
import time
import traceback

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

from .limits import STAMP_KINDS

#: counters reported even while zero: what the command path refused or changed
SAFETY_COUNTERS = (("states_rejected", "states_out_of_bounds")
                   + tuple(f"states_stamp_{kind}" for kind in STAMP_KINDS)
                   + ("commands_saturated", "commands_not_finite", "watchdog_trips"))


class Health:
    """What every part of the node records for the diagnostics: ``counters`` (events),
    ``stats`` (seconds of the last operations, how the last reference was made feasible),
    ``last_error``; and a logger that repeats a warning at most once per period."""

    def __init__(self, logger):
        self.logger = logger
        self.counters = {}
        self.stats = {}
        self.last_error = ""
        self._warned = {}

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
                    now_ns) -> DiagnosticStatus:
    """The status of the tracking controller.

    ``plant``: the configured Plant or None; ``active``: whether the node is active;
    ``command``: the :class:`~mechnode.command.CommandPath` (state age, watchdog, latencies);
    ``schedule``: the :class:`~mechnode.reference.ActiveSchedule` in force or None;
    ``now_ns``: ROS time.
    """
    st = DiagnosticStatus()
    st.name = f"{name}: tracking controller"
    st.hardware_id = plant.system.name if plant is not None else ""
    age = command.state_age()
    remaining = None if schedule is None else max(0.0, (schedule.end_ns - now_ns) * 1e-9)
    lat = np.asarray(command.latency_us) if command.latency_us else None
    values = {
        "lifecycle_state": lifecycle_state,
        "state_age_s": "none" if age is None else f"{age:.4f}",
        "schedule_active": str(schedule is not None),
        "schedule_time_remaining_s": "none" if remaining is None else f"{remaining:.4f}",
        "schedule_knots": "0" if schedule is None else str(schedule.schedule.knots),
        "watchdog_tripped": str(command.tripped),
        "command_latency_median_us": "none" if lat is None else f"{np.median(lat):.1f}",
        "command_latency_p99_us": "none" if lat is None else f"{np.percentile(lat, 99):.1f}",
        "last_error": health.last_error,
    }
    for key, val in sorted(health.stats.items()):
        values["last_" + key] = f"{val:.6f}" if isinstance(val, float) else str(val)
    for key in SAFETY_COUNTERS:
        values[key] = "0"
    for key, val in sorted(health.counters.items()):
        values[key] = str(val)
    st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
    if plant is None:
        st.level, st.message = DiagnosticStatus.WARN, "unconfigured"
    elif not active:
        st.level, st.message = DiagnosticStatus.OK, "inactive"
    elif command.tripped:
        st.level, st.message = DiagnosticStatus.ERROR, (
            f"state timeout: no JointState for {age:.2f} s, not commanding")
    elif schedule is None:
        st.level, st.message = DiagnosticStatus.OK, "active, waiting for a reference"
    elif age is None:
        st.level, st.message = DiagnosticStatus.WARN, "schedule active, waiting for JointState"
    else:
        st.level, st.message = DiagnosticStatus.OK, (
            f"tracking schedule #{schedule.seq}, {remaining:.2f} s remaining")
    return st
