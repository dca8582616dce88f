"""Jumps of the node's clock under ``use_sim_time``: a simulator that resets or skips its time.

With ``use_sim_time: true`` the node's clock follows ``/clock``. A simulator reset sends it
backwards; a paused-then-resumed or fast-forwarded simulator can send it forwards. A schedule is
timed on the clock it was made on (``start_ns``) and the buffered states are stamped on it, so
after a jump both mean nothing. Both processes of the node watch their own clock (rclpy's
time-jump callbacks, :func:`watch`) and treat as a jump:

* any step backwards,
* a step forwards by more than ``state_timeout``,
* ROS time switched on or off (the clock changes its source).

The first ``/clock`` message (the clock leaving zero) is the clock starting, not a jump.

What follows a jump:

* the command process (:class:`~mechnode.ros.command.CommandPath`) sends its ``timeout_action``
  command once (zeros by default) if it was commanding, drops the schedule in force, the buffered
  states and the base's Odometry, counts ``clock_jumps``, logs and stops commanding; it takes no
  new schedule until the managed node has acknowledged the jump (so that no schedule made on the
  old clock gets in between);
* the managed node drops its schedule (and any reference or re-plan in flight), acknowledges the
  jump to the command process and, with ``idle_action`` ``hold``/``balance``, holds the robot
  again about the first fresh state on the new clock. A jump the managed node missed but the
  command process saw is caught up by the diagnostics (once a second).
"""
from __future__ import annotations

from collections import deque

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import ClockChange, JumpThreshold
from rclpy.duration import Duration

from mechnode.ros.diagnostics import callback_guard

#: the ``clock_change`` values that switch the clock's source
_SWITCHES = {ClockChange.ROS_TIME_ACTIVATED: "ROS time was switched on",
             ClockChange.ROS_TIME_DEACTIVATED: "ROS time was switched off"}


def describe(clock_change, delta_ns: int, now_ns: int) -> str | None:
    """What a jump of ``delta_ns`` (or a change of source) to ``now_ns`` is, in words; None for
    the clock starting (a jump from zero)."""
    if clock_change in _SWITCHES:
        return f"{_SWITCHES[clock_change]} (the clock now reads {now_ns * 1e-9:.3f} s)"
    if now_ns - delta_ns == 0:
        return None
    way = "backwards" if delta_ns < 0 else "forwards"
    return (f"the clock jumped {way} by {abs(delta_ns) * 1e-9:.3f} s, from {(now_ns - delta_ns) * 1e-9:.3f} s "
            f"to {now_ns * 1e-9:.3f} s")


def watch(clock, state_timeout: float, on_jump):
    """Call ``on_jump(text)`` on every jump of ``clock`` (see the module docstring) with its
    description. Runs where the clock is set (the executor taking ``/clock``): ``on_jump`` must
    be quick. Returns the handle; ``handle.unregister()`` ends the watch."""
    forward = Duration(nanoseconds=max(1, int(round(state_timeout * 1e9))))

    def post(jump) -> None:
        text = describe(jump.clock_change, jump.delta.nanoseconds, clock.now().nanoseconds)
        if text is not None:
            on_jump(text)

    threshold = JumpThreshold(min_forward=forward, min_backward=Duration(nanoseconds=-1), on_clock_change=True)
    return clock.create_jump_callback(threshold, post_callback=post)


class NodeClockJumps:
    """The managed node's side (see the module docstring) of a
    :class:`~mechnode.ros.node.MechNode`: :meth:`start` at activate, :meth:`stop` at teardown,
    :meth:`catch_up` with every status of the command path."""

    def __init__(self, node):
        self._node = node
        self.health = node.health
        self._watch = None
        self._guard = None
        self._config = None
        self._seen: deque[str] = deque()    # jumps seen and not yet handled (appended where the clock is set)
        self._unacknowledged = False        # the last report had a jump pending in the command path

    def start(self, config) -> None:
        node = self._node
        self.stop()
        self._config = config
        self._guard = node.create_guard_condition(self._handle, callback_group=MutuallyExclusiveCallbackGroup())
        self._watch = watch(node.get_clock(), float(node.params.value("state_timeout")), self._on_jump)

    def stop(self) -> None:
        watch_, guard, self._watch, self._guard, self._config = self._watch, self._guard, None, None, None
        if watch_ is not None:
            watch_.unregister()
        if guard is not None:
            try:
                self._node.destroy_guard_condition(guard)
            except Exception:  # noqa: BLE001 - the node is shutting down
                pass
        self._seen.clear()

    def _on_jump(self, text: str) -> None:
        """Where the clock is set: void the references being computed, hand the rest on."""
        self._node.reference.clock_jumped()
        self._seen.append(text)
        guard = self._guard
        if guard is not None:
            guard.trigger()

    def catch_up(self, status) -> None:
        """``status``: the command path's (or None). A jump it saw and this node did not (a
        ``/clock`` message one process missed), still unacknowledged at two reports in a row (the
        first may just precede this node's own callback), is handled here as one this node saw."""
        pending = bool(status and status.get("clock_jumps_pending", 0) > 0 and not self._seen)
        if pending and self._unacknowledged and self._config is not None:
            self._on_jump("the command process saw a clock jump this node did not")
            pending = False
        self._unacknowledged = pending

    @callback_guard
    def _handle(self) -> None:
        node, config = self._node, self._config
        texts = []
        while self._seen:
            texts.append(self._seen.popleft())
        if not texts or config is None:
            return
        with node._lock:
            if not node.is_active or node.config is not config:
                return
            node.reference.drop()
            for _ in texts:
                node.command.clock_jump_acknowledged()
            node.idle.start(config, resume=True)
        self.health.last_error = f"clock jump: {texts[-1]}"
        action = node.params.value("idle_action")
        node.get_logger().warning(
            f"{'; '.join(texts)}: dropped the schedule in force (a new reference is needed); "
            + ("no command until then" if action == "none" else
               f"{'balancing' if action == 'balance' else 'holding'} the robot about the first fresh state "
               "on the new clock meanwhile"))
