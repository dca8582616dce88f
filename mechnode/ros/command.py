"""The 1 kHz command path: JointState in, command out, and the state watchdog.

It runs in a process of its own, the command process (:mod:`mechnode.ros.command_process`), on a
node ``<name>_control`` spun by a single-threaded executor whose wait set holds only the
JointState subscription and the watchdog timer. Nothing else runs in that process: a huge
message taken by the managed node, its services' conversions and its garbage collections hold
*its* interpreter lock, not this one.

Per JointState (mapped by joint name): the state is checked against the bounds and its stamp
against the node's clock (:mod:`mechnode.logic.limits`: out of bounds, zero, negative, future, stale
or out-of-order stamps are refused like NaN states, counted in the diagnostics and logged at
most once per period per kind); then the state ``x = [q, p = M(q) qdot, v]`` (exact Legendre
transform) and the command ``u = u_ref[k] - K[k] (x - x_ref[k])`` at the knot nearest to the
message's stamp are computed in one numba call (``plant.vi.feedback``), saturated to
``+-command_limit`` (counted as ``commands_saturated``) and published as
``std_msgs/Float64MultiArray``: the force inputs (``command_mode: effort``) or the whole
integrator input (``full``). A non-finite command is never published. Before the first schedule
the law in force may be the idle hold (:mod:`mechnode.ros.idle`, a one-knot schedule installed the
same way); with no law in force nothing is sent. :meth:`CommandPath.mode` says which.

LFC output (``lfc_topic``): every ``dt`` the knot due now, in the form of LAAS's
``linear_feedback_controller`` (:mod:`mechnode.logic.lfc`, computed by the managed node), as a
``linear_feedback_controller_msgs/Control`` stamped with the knot's time; each knot once.

Watchdog: when no accepted JointState arrived for ``state_timeout`` seconds while commanding
(states that are refused, e.g. stale-stamped ones, do not count), the path sends once either
zeros (``timeout_action: zero``) or the last command sent (``hold``, already saturated), stops
commanding and logs a warning; it resumes with the next accepted state. The warning tells the two
causes apart: the path's own thread stalled (the watchdog itself ran late: CPU starvation, a
paused process) or the states stopped coming (the watchdog ran on time); the line logged on
resuming gives the gap between the stamps of the last state before and the first after.

Clock jumps (``use_sim_time``, :mod:`mechnode.ros.clock_jumps`): the path sends its timeout action
once if it was commanding, drops the schedule in force and everything stamped on the old clock,
and takes no schedule until the managed node has acknowledged the jump.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import rclpy
from nav_msgs.msg import Odometry
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mechnode.errors import InputError
from mechnode.logic.legged import base_state, pulling_contacts
from mechnode.logic.limits import Limits, StampError
from mechnode.ros import clock_jumps
from mechnode.ros import conversions as cv
from mechnode.ros.diagnostics import callback_guard
from mechnode.ros.qos import COMMAND_QOS

if TYPE_CHECKING:
    from rclpy.clock import Clock
    from rclpy.node import Node
    from rclpy.publisher import Publisher
    from rclpy.timer import Timer

    from mechnode.logic.joint_map import JointMap
    from mechnode.logic.plant import Plant
    from mechnode.ros.reference import ActiveSchedule

    #: the path's node, its executor, the executor's thread and the watchdog timer
    _Control = tuple[Node, SingleThreadedExecutor, threading.Thread, Timer]


@dataclass(frozen=True)
class CommandSettings:
    """What the command path is started with at activate (plain data: it is sent to the
    command process). Topic names are resolved by the managed node (expanded, remapped)."""
    state_topic: str
    command_topic: str
    echo_topic: str             # "" = no command echo
    lfc_topic: str              # "" = no LFC Control output (mechnode.logic.lfc)
    limits: Limits
    command_mode: str           # "effort" | "full"; may change while active (set_modes)
    timeout_action: str         # "zero" | "hold"; may change while active (set_modes)
    generation: int             # of the configuration the path is started for
    odometry_topic: str = ""    # a floating base's nav_msgs/Odometry ("" = a fixed base)
    odometry_frame: str = ""    # the header.frame_id an Odometry must carry ("" = any)
    base_frame: str = ""        # the child_frame_id an Odometry must carry


def watchdog_period(state_timeout: float) -> float:
    """Seconds between the watchdog's checks: a quarter of ``state_timeout``, in [5 ms, 250 ms]."""
    return min(max(state_timeout / 4, 0.005), 0.25)


class CommandPath:
    """The command path (see the module docstring) of the process whose rclpy ``context`` it
    uses; its node is ``node_name`` in ``namespace``. ``health``: a
    :class:`~mechnode.ros.diagnostics.Health` for its counters and logs.

    :meth:`start` at activate, :meth:`stop` at deactivate, :meth:`close` when the model goes;
    :meth:`install` swaps the schedule in force (an :class:`~mechnode.ros.reference.ActiveSchedule`);
    :meth:`status` reports.
    """

    def __init__(self, context, node_name: str, namespace: str, health, use_sim_time=False):
        self._context = context
        self._node_name, self._namespace = node_name, namespace
        self._use_sim_time = bool(use_sim_time)
        self.health = health
        self._control: _Control | None = None     # (node, executor, thread, watchdog timer) once started
        self._pubs: dict[str, Publisher] = {}      # "command" and the optional "echo"
        self._clock: Clock | None = None
        self._plant: Plant | None = None
        self._joint_map: JointMap | None = None
        self._limits: Limits | None = None
        self._settings: CommandSettings | None = None
        self._command_mode: str | None = None
        self._timeout_action: str | None = None
        self._last_stamp_ns: int | None = None        # stamp of the last accepted JointState
        self._enabled = False           # publishing allowed: set at start, cleared first at stop
        self._publish_lock = threading.Lock()
        self.active: ActiveSchedule | None = None    # the schedule in force, swapped atomically
        self._last_state_mono: float | None = None    # time.monotonic() of the last valid JointState
        self._watchdog_mono: float | None = None      # time.monotonic() of the watchdog's last run
        self._stamp_at_trip: int | None = None        # last accepted stamp when the watchdog tripped
        # (q, qdot, stamp ns) of the first accepted state since start
        self._first_state: tuple[np.ndarray, np.ndarray, int] | None = None
        # (q, qdot, stamp ns) of the latest accepted state (the re-planner's starting point)
        self._latest_state: tuple[np.ndarray, np.ndarray, int] | None = None
        # a floating base: (base pose (7), base twist (6), stamp ns) of the last accepted Odometry
        self._base: tuple[np.ndarray, np.ndarray, int] | None = None
        self._last_odometry_ns: int | None = None
        self._last_command: np.ndarray | None = None
        self._commanding = False
        self.tripped = False            # the watchdog stopped commanding
        # clock jumps (use_sim_time, mechnode.ros.clock_jumps): the watch, the jumps seen and the
        # managed node's acknowledgements since start; no schedule is taken while acks < jumps
        self._jump_watch = None
        self._jumps = self._acks = 0
        self._install_lock = threading.Lock()
        self.latency_us: deque[float] = deque(maxlen=2000)   # JointState callback -> command published

    def state_age(self) -> float | None:
        """Seconds since the last valid JointState (None: none yet since activation)."""
        last = self._last_state_mono
        return None if last is None else time.monotonic() - last

    def status(self) -> dict:
        """What the managed node's diagnostics report of the path (plain data)."""
        lat = np.asarray(self.latency_us) if self.latency_us else None
        return {"state_age": self.state_age(), "tripped": self.tripped,
                "latency_median_us": None if lat is None else float(np.median(lat)),
                "latency_p99_us": None if lat is None else float(np.percentile(lat, 99)),
                "counters": dict(self.health.counters), "last_error": self.health.last_error,
                "last_error_time": self.health.last_error_time, "mode": self.mode(),
                "clock_jumps_pending": max(0, self._jumps - self._acks)}

    def mode(self) -> str:
        """What the path is doing: ``idle`` (no law in force: nothing is sent), ``holding`` (a
        hold law: about the state measured at activation, or about the end of a schedule that
        has ended, ``idle_after_schedule``) or ``tracking`` (a schedule, including its last
        knot's law after its end)."""
        active = self.active
        if active is None or not self._enabled:
            return "idle"
        if active.kind == "hold":
            return "holding"
        if active.hold is not None and self._clock is not None and \
                self._clock.now().nanoseconds > active.end_ns:
            return "holding"
        return "tracking"

    def first_state(self):
        """``(q, qdot, stamp_ns)`` of the first JointState accepted since :meth:`start` (model
        order), or None: the state the idle hold is computed about."""
        return self._first_state

    def latest_state(self):
        """``(q, qdot, stamp_ns)`` of the latest JointState accepted since :meth:`start` (model
        order), or None: the state the re-planner starts from."""
        return self._latest_state

    # ------------------------------------------------------------------ start / stop
    def start(self, plant, joint_map, settings: CommandSettings):
        """Start commanding with ``plant`` under ``settings``. The path's node, its command
        publisher(s), the watchdog and (last) the JointState subscription are created the first
        time and kept while the topics stay the same: a re-activation finds them matched
        with their peers already. Spun in a thread of their own."""
        with self._publish_lock:
            self._enabled = False
        self.active = None
        topics = lambda s: None if s is None else (s.state_topic, s.command_topic, s.echo_topic, s.lfc_topic,  # noqa: E731
                                                   s.odometry_topic)
        if self._control is not None and (topics(self._settings) != topics(settings)
                                          or self._plant is not plant):
            self.close()
        self._plant, self._joint_map, self._settings = plant, joint_map, settings
        self._limits = settings.limits
        self.set_modes(settings.command_mode, settings.timeout_action)
        self._last_stamp_ns = None
        self._last_state_mono = None
        self._first_state = self._latest_state = None
        self._base, self._last_odometry_ns = None, None
        self._last_command = None
        self._lfc_sent: tuple[int, int] | None = None     # (schedule seq, knot) of the last LFC Control
        self.tripped = False
        self._commanding = False
        self._jumps = self._acks = 0
        if self._control is None:
            self._create(settings)
        control = cast("_Control", self._control)      # set above or by _create
        ctl, _, _, timer = control
        period = watchdog_period(self._limits.state_timeout)
        if abs(timer.timer_period_ns * 1e-9 - period) > 1e-9:
            ctl.destroy_timer(timer)
            self._control = control[:3] + (ctl.create_timer(period, self._on_watchdog),)
        if self._use_sim_time:          # (a forward jump's threshold is the state timeout: anew)
            if self._jump_watch is not None:
                self._jump_watch.unregister()
            self._jump_watch = clock_jumps.watch(self._clock, self._limits.state_timeout, self._on_clock_jump)
        with self._publish_lock:
            self._enabled = True

    def _create(self, settings):
        overrides = [Parameter("use_sim_time", Parameter.Type.BOOL, True)] if self._use_sim_time else []
        ctl = rclpy.create_node(self._node_name, namespace=self._namespace, context=self._context,
                                use_global_arguments=False, start_parameter_services=False,
                                enable_rosout=False, parameter_overrides=overrides)
        self._clock = ctl.get_clock()
        executor = SingleThreadedExecutor(context=self._context)
        thread = threading.Thread(target=self._spin, args=(executor,), daemon=True,
                                  name="mechnode_control")
        self._pubs["command"] = ctl.create_publisher(Float64MultiArray, settings.command_topic, COMMAND_QOS)
        if settings.echo_topic:
            self._pubs["echo"] = ctl.create_publisher(JointState, settings.echo_topic, qos_profile_sensor_data)
        if settings.lfc_topic:
            from linear_feedback_controller_msgs.msg import Control
            self._pubs["lfc"] = ctl.create_publisher(Control, settings.lfc_topic, COMMAND_QOS)
            ctl.create_timer(self._plant.dt, self._on_lfc)
        timer = ctl.create_timer(watchdog_period(self._limits.state_timeout), self._on_watchdog)
        self._control = (ctl, executor, thread, timer)
        executor.add_node(ctl)
        thread.start()
        # the subscriptions last: their callbacks may run as soon as they exist
        if settings.odometry_topic:
            ctl.create_subscription(Odometry, settings.odometry_topic, self._on_odometry, qos_profile_sensor_data)
        ctl.create_subscription(JointState, settings.state_topic, self._on_joint_state,
                                qos_profile_sensor_data)

    def set_modes(self, command_mode: str, timeout_action: str):
        """The parameters ``command_mode`` and ``timeout_action`` (they may change while active)."""
        self._command_mode, self._timeout_action = command_mode, timeout_action

    def install(self, active):
        """Make ``active`` (an ActiveSchedule, or None) the schedule in force: a schedule from a
        reference, or the idle hold (``kind == "hold"``); both are checked against the path's
        generation and model before every use. After a clock jump the managed node has not yet
        acknowledged (:meth:`clock_jump_acknowledged`), a schedule is refused: it may have been
        made on the old clock."""
        with self._install_lock:
            if active is not None and self._acks < self._jumps:
                self.health.count("schedules_refused_clock_jump")
                self.health.warn_limited("install:jump", f"{active.kind} #{active.seq} refused: it may be "
                                         "timed on the clock before its jump (not acknowledged yet)")
                return
            self.active = active

    def clock_jump_acknowledged(self):
        """The managed node has dropped what it timed on the old clock (one call per jump it
        saw): schedules are taken again once every jump seen here is acknowledged. Whatever was
        installed before the acknowledgement is dropped."""
        with self._install_lock:
            self._acks += 1
            self.active = None

    def _on_clock_jump(self, text: str):
        """A jump of the path's clock (:mod:`mechnode.ros.clock_jumps`): the timeout action once
        if commanding, then nothing timed on the old clock is kept."""
        sent, enabled = None, self._enabled
        if enabled and self._commanding and self._plant is not None:
            sent = self._timeout_command()
            self._publish("command", cv.command_msg(sent))
        with self._install_lock:
            self._jumps += 1
            self.active = None
        self._last_stamp_ns = self._last_state_mono = self._stamp_at_trip = None
        self._first_state = self._latest_state = None
        self._base, self._last_odometry_ns = None, None
        self._last_command, self._lfc_sent = None, None
        self._commanding, self.tripped = False, False
        if not enabled:
            return                      # (inactive: the next start begins afresh anyway)
        self.health.count("clock_jumps")
        self.health.last_error = f"clock jump: {text}"
        what = ("nothing was being commanded" if sent is None else
                f"sent {np.round(sent, 6).tolist()} ({self._timeout_action})")
        self.health.logger.warning(f"{text}: {what}; dropped the schedule in force and the states stamped on the "
                                   "old clock; commanding again once the node has a new law and a fresh state")

    def _spin(self, executor):
        try:
            executor.spin()
        except Exception as exc:  # noqa: BLE001 - context shut down under us
            if self._context.ok():
                self.health.logger.error(f"control executor stopped: {type(exc).__name__}: {exc}")

    def stop(self):
        """Stop publishing: no command is sent after this returns (a publish in progress is
        waited for). The schedule is dropped; the entities stay (see :meth:`start`)."""
        with self._publish_lock:
            self._enabled = False
        self.active = None

    def close(self):
        """Stop, then stop the executor thread and destroy the node and its entities."""
        self.stop()
        control, self._control = self._control, None
        if control is None:
            return
        ctl, executor, thread, _ = control
        if self._jump_watch is not None:
            self._jump_watch.unregister()
            self._jump_watch = None
        executor.shutdown(timeout_sec=2.0)
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        try:
            ctl.destroy_node()
        except Exception:  # noqa: BLE001
            pass
        self._pubs = {}
        self._plant = self._joint_map = self._limits = self._settings = None

    def _publish(self, key, msg) -> bool:
        """Publish unless stopped (:meth:`stop` waits for a publish in progress)."""
        with self._publish_lock:
            pub = self._pubs.get(key)
            if pub is None or not self._enabled:
                return False
            pub.publish(msg)
            return True

    # ------------------------------------------------------------------ callbacks
    @callback_guard
    def _on_joint_state(self, msg: JointState):
        t_cb = time.perf_counter()
        # start sets the joint map, the limits and the settings with the plant (and _create the
        # clock before publishing is enabled); close clears them with it: with a plant, all are set
        plant, jm, limits, health = (self._plant, cast("JointMap", self._joint_map), cast(Limits, self._limits),
                                     self.health)
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
            t_ns = limits.check_stamp(cv.stamp_ns(msg.header.stamp), cast("Clock", self._clock).now().nanoseconds,
                                      self._last_stamp_ns)
        except StampError as exc:
            return self._refuse("state:stamp_" + exc.kind, exc, "states_stamp_" + exc.kind)
        if self._base_wanted():
            try:
                q, dq = self._with_base(q, dq)
            except StampError as exc:
                return self._refuse("state:base_" + exc.kind, exc, "states_base_" + exc.kind)
        if unknown:
            health.count("states_with_unknown_joints")
            health.warn_limited("state:unknown_joints", f"JointState: ignoring joint(s) unknown to "
                                f"the model: {list(unknown)} (logged at most every 10 s)", period=10.0)
        self._last_stamp_ns = t_ns
        self._last_state_mono = time.monotonic()
        if self._first_state is None:
            self._first_state = (q.copy(), dq.copy(), t_ns)
        self._latest_state = (q, dq, t_ns)      # (fresh arrays per message, never written to)
        health.count("states")
        if self.tripped:
            self.tripped = False
            gap = "" if self._stamp_at_trip is None else \
                f" (stamps {1e-9 * (t_ns - self._stamp_at_trip):.3f} s after the last state before the trip)"
            health.logger.info(f"JointState messages resumed{gap}: commanding again")
        active = self.active
        if active is None:
            return
        generation = cast(CommandSettings, self._settings).generation
        law, t = active.schedule, (t_ns - active.start_ns) * 1e-9
        if active.hold is not None and t > law.times[-1]:
            law = active.hold                       # the schedule has ended: hold its end
        if active.generation != generation or not law.fits(plant):
            # never reached in normal operation (the pipeline installs only its own
            # configuration's schedules); the kernel does not check bounds, so check here
            health.count("schedules_refused")
            health.warn_limited("foreign", f"{active.kind} #{active.seq} is for configuration "
                                f"#{active.generation}, not #{generation}: not used")
            return
        u, _, _ = law.command(plant, t, q, dq)
        if u is None:
            health.count("commands_not_finite")
            health.warn_limited("u_nan", "the control law gave a non-finite command; not sent")
            return
        cmd, clipped = limits.saturate(u[:plant.m] if self._command_mode == "effort" else u)
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
        if self._base_wanted():
            self._check_contacts(plant, q, dq, cmd)     # (after the command: it reports, never delays)

    # ------------------------------------------------------------------ a floating base
    def _base_wanted(self) -> bool:
        settings = self._settings
        return settings is not None and bool(settings.odometry_topic)

    @callback_guard
    def _on_odometry(self, msg: Odometry):
        """A floating base's pose and twist (REP 105), checked as a JointState is (frames,
        stamp, values; each refusal counted as ``odometry_<kind>`` and logged at most once per
        2 s), kept for the next JointState."""
        settings, limits, health = self._settings, self._limits, self.health
        if settings is None or limits is None or not self._enabled:
            return
        frame, child = msg.header.frame_id, msg.child_frame_id
        if (settings.odometry_frame and frame != settings.odometry_frame) or child != settings.base_frame:
            return self._refuse_odometry("wrong_frame", InputError(
                f"Odometry frames {frame[:64]!r} -> {child[:64]!r}, expected "
                f"{settings.odometry_frame or '(any)'!r} -> {settings.base_frame!r} (odometry_frame, base_frame)"))
        try:
            t_ns = limits.check_stamp(cv.stamp_ns(msg.header.stamp), cast("Clock", self._clock).now().nanoseconds,
                                      self._last_odometry_ns)
        except StampError as exc:
            return self._refuse_odometry("stamp_" + exc.kind, exc)
        pose, twist = msg.pose.pose, msg.twist.twist
        try:
            qb, vb = base_state((pose.position.x, pose.position.y, pose.position.z),
                                (pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w),
                                (twist.linear.x, twist.linear.y, twist.linear.z),
                                (twist.angular.x, twist.angular.y, twist.angular.z))
        except InputError as exc:
            return self._refuse_odometry("values", exc)
        self._last_odometry_ns = t_ns
        self._base = (qb, vb, t_ns)
        health.count("odometry")

    def _refuse_odometry(self, kind: str, exc):
        health = self.health
        health.count("odometry_rejected")
        health.count("odometry_" + kind)
        health.last_error = f"Odometry rejected: {exc}"
        health.warn_limited("odometry:" + kind, f"Odometry rejected: {exc}")

    def _with_base(self, q, dq):
        """``(q, v)`` of the whole robot: the last accepted Odometry's base and the joints; a
        :class:`StampError` (``missing`` or ``stale``) when there is none younger than
        ``state_timeout``: no command from a state whose two parts are not both fresh."""
        base, limits = self._base, cast(Limits, self._limits)
        if base is None:
            raise StampError("missing", "no accepted Odometry yet (odometry_topic): the base's state is unknown")
        age = (cast("Clock", self._clock).now().nanoseconds - base[2]) * 1e-9
        if age > limits.state_timeout:
            raise StampError("stale", f"the last accepted Odometry is {age:.6f} s old (state_timeout "
                                      f"{limits.state_timeout} s)")
        return np.concatenate([base[0], q]), np.concatenate([base[1], dq])

    def _check_contacts(self, plant, q, v, u) -> None:
        """Count and log (at most once per 2 s) a command that would need a contact to pull
        (:func:`mechnode.logic.legged.pulling_contacts`); it is sent all the same, not silently."""
        try:
            pulling = pulling_contacts(plant.system, q, v, u)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            pulling = [("(the contact forces cannot be computed)", float("nan"))]
            self.health.last_error = f"contact check: {exc}"
        if pulling:
            self.health.count("commands_pulling_contacts")
            text = ", ".join(f"{frame} {force:.3g} N" for frame, force in pulling)
            self.health.last_error = f"loss of contact: the command needs {text} (a negative normal force)"
            self.health.warn_limited("contacts_pull", f"loss of contact: the command needs the ground to pull "
                                     f"at {text} (normal force in the model's solution); sent all the same")

    @callback_guard
    def _on_lfc(self):
        """Every ``dt``: the knot due now as an LFC ``Control`` (each knot once; the last one
        stays in force after the end, as LFC keeps the last message)."""
        active = self.active
        if active is None or getattr(active, "lfc", None) is None or not self._enabled:
            return
        if active.generation != self._settings.generation:
            return
        sched, lfc = active.schedule, active.lfc
        k = sched.knot((self._clock.now().nanoseconds - active.start_ns) * 1e-9)
        if self._lfc_sent == (active.seq, k):
            return
        if not (np.isfinite(lfc.K[k]).all() and np.isfinite(lfc.u_ff[k]).all()):
            self.health.count("lfc_not_finite")
            self.health.warn_limited("lfc_nan", f"LFC form of knot {k} is not finite; not sent")
            return
        stamp = active.start_ns + int(round(float(sched.times[k]) * 1e9))
        if self._publish("lfc", cv.lfc_control_msg(lfc, k, stamp)):
            self._lfc_sent = (active.seq, k)
            self.health.count("lfc_controls")

    def _refuse(self, key, exc, counter=None):
        """Count and log (at most once per 2 s per ``key``) a refused JointState."""
        health = self.health
        health.count("states_rejected")
        if counter:
            health.count(counter)
        health.last_error = f"JointState rejected: {exc}"
        health.warn_limited(key, f"JointState rejected: {exc}")

    def _timeout_command(self) -> np.ndarray:
        """What ``timeout_action`` sends: zeros, or the last command (saturated)."""
        # called while commanding (fail_safe, the watchdog): start has set the plant and the limits
        plant, limits = cast("Plant", self._plant), cast(Limits, self._limits)
        m = plant.m if self._command_mode == "effort" else plant.nu
        if self._timeout_action == "zero" or self._last_command is None or self._last_command.size != m:
            return np.zeros(m)
        return limits.saturate(self._last_command)[0]

    def fail_safe(self, reason: str) -> bool:
        """If commanding: send the ``timeout_action`` command once and stop (the node's main
        process is gone: the robot must not keep the last torque). Returns whether it sent."""
        if not self._enabled or not self._commanding or self._plant is None:
            return False
        hold = self._timeout_command()
        sent = self._publish("command", cv.command_msg(hold))
        self.stop()
        self.health.logger.error(f"{reason}: sent {np.round(hold, 6).tolist()} ({self._timeout_action}) and "
                                 "stopped commanding")
        return sent

    @callback_guard
    def _on_watchdog(self):
        now = time.monotonic()
        previous, self._watchdog_mono = self._watchdog_mono, now
        if not self._enabled or not self._commanding or self._last_state_mono is None:
            return
        timeout = self._limits.state_timeout
        age = now - self._last_state_mono
        if age <= timeout:
            return
        period = watchdog_period(timeout)
        if previous is not None and now - previous > 2 * period:
            cause = (f"this path's thread was stalled: the watchdog ran {now - previous:.3f} s after its "
                     f"previous run (period {period:.4f} s)")
        else:
            cause = f"the watchdog ran on time (period {period:.4f} s): the states stopped coming"
        action = self._timeout_action
        hold = self._timeout_command()
        self._publish("command", cv.command_msg(hold))
        self._commanding = False
        self.tripped = True
        self._stamp_at_trip = self._last_stamp_ns
        self.health.count("watchdog_trips")
        self.health.last_error = f"state timeout after {age:.3f} s"
        self.health.logger.warning(
            f"watchdog: no valid JointState for {age:.3f} s (state_timeout {timeout} s): stopped "
            f"commanding after sending {'zeros' if action == 'zero' else 'the last command'} "
            f"{np.round(hold, 6).tolist()}; {cause}")
