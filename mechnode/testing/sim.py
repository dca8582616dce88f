"""A simulated robot for demos and tests: the variational integrator as the plant, over ROS 2.

:class:`SimRobot` steps a :class:`mechnode.logic.plant.Plant` in real time, publishes
``sensor_msgs/JointState`` (position and velocity of every joint, named through a
:class:`~mechnode.logic.joint_map.JointMap`) and applies the latest ``std_msgs/Float64MultiArray``
command (the force inputs, as an effort forward_command_controller would). Kinematic variables,
if any, are held. With ``start_on_command`` it holds its initial state (still publishing it) until
the first command arrives — a robot held by its brakes until the controller takes over.

Threads: :meth:`SimRobot.start` starts two threads of its own, and the robot must not be added to
any other executor:

* the *step thread* ticks every ``dt``: it applies the latest command, steps the plant and
  publishes the state;
* the *executor thread* spins a ``SingleThreadedExecutor`` holding only this node (the command
  subscription). A multi-threaded executor shared with other nodes of the process can dispatch
  one subscription thousands of times per second while holding the GIL, starving the step
  thread (measured: waits of up to 1.3 s).

Timing (real-time stepping, absolute deadlines): tick ``k`` is due at ``t0 + k dt`` on the
monotonic clock, and the JointState it publishes is stamped with the simulated time of that tick,
``T0 + k dt`` on this node's ROS clock (``T0`` read together with ``t0``; never later than the ROS
clock's now). So the stamps are the simulated time, in the clock the controller uses (the ROS
clock, system time; no ``use_sim_time``), and simulated time stays locked to wall-clock time. A tick that starts
more than ``overrun_tolerance`` (default ``dt``: it missed its period) after its deadline is an
*overrun*: counted (:attr:`SimRobot.overruns`; the lateness of every tick goes into
:attr:`SimRobot.max_lateness`) and logged as a warning per episode of consecutive late ticks
(which ticks, how late at most; at most one warning a second, the rest summed into the next one),
and the deadlines are never reset: a late robot catches up by running its late ticks as fast as
the controller answers, each stamped with its own simulated time (old stamps, which a controller
may refuse, are what a late robot really delivers). A late tick waits for the command answering
the previous tick's state (at most ``catch_up_wait``, default ``dt/2``, so that it catches up even
without commands): in lock-step with the controller, the simulated world sees the commands it
would have seen had the simulation not stalled. Ticks on time never wait for a command: a
controller slower than ``dt`` shows as steps without a fresh command. Nothing is absorbed
silently: :meth:`SimRobot.stats` and :meth:`SimRobot.summary` report steps, commands, steps with
a fresh command (one that arrived since the previous step), overruns and the maximal lateness.

Why not simulated time on ``/clock`` with ``use_sim_time``: every peer (the node, its command
path's helper node, the demo) would have to follow ``/clock``, the node's state watchdog measures
wall time (``time.monotonic``), and the demo is meant to run the node as a user runs it against a
real robot. Real-time stepping needs nothing from the controller, and its stamps stay within
``overrun_tolerance`` of the controller's clock unless an overrun is reported.

Garbage collection: a full collection of the process that hosts the robot holds the interpreter
lock while it scans every object: 0.1-0.17 s measured in a test session's process (190 000
objects), more on a loaded host, and the robot stalls for as long (a pause over the node's
``state_timeout`` trips its watchdog). :meth:`SimRobot.start` therefore collects once and freezes
what is alive (``gc.freeze``: the model, its kernels, rclpy), as the node does after its
configure; collections while the robot runs scan only the objects made since. :meth:`stop`
unfreezes them.

Commands: received with depth ``COMMAND_DEPTH`` (reliable) so that every command reaches the
callback and is counted; the latest one is applied.

Record: every published state ``(stamp, q)`` also goes into a record of the last
``RECORD_TICKS`` ticks, read with :meth:`SimRobot.states_since`, so that a reader polling now and
then still sees every tick (:attr:`SimRobot.latest` is only the last one).
"""
from __future__ import annotations

import gc
import threading
import time
from collections import deque
from typing import cast

import numpy as np
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mechnode.ros import conversions as cv

#: Queue depth of the command subscription: every command is delivered (and counted), the
#: latest one applied. Compatible with the node's COMMAND_QOS publisher (reliable, volatile).
COMMAND_DEPTH = 10
ROBOT_COMMAND_QOS = QoSProfile(depth=COMMAND_DEPTH, history=HistoryPolicy.KEEP_LAST,
                               reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
#: Ticks kept in the record (:meth:`SimRobot.states_since`): one minute at 100 Hz.
RECORD_TICKS = 6000


class SimRobot(Node):
    """The simulated robot (see the module docstring). ``start()`` / ``stop()``; statistics in
    :meth:`stats`. ``overrun_tolerance`` [s]: lateness of a tick counted as an overrun
    (default ``dt``); ``catch_up_wait`` [s]: how long a late tick waits for a fresh command
    (default ``dt/2``; 0: late ticks run back to back)."""

    def __init__(self, plant, joint_names, q0, dq0=None, *, name: str = "sim_robot",
                 namespace: str = "", state_topic: str = "joint_states",
                 command_topic: str = "effort_controller/commands", start_on_command: bool = True,
                 overrun_tolerance: float | None = None, catch_up_wait: float | None = None,
                 context=None):
        super().__init__(name, namespace=namespace, context=context)
        self.plant = plant
        self.joint_names = list(joint_names)
        q0 = np.asarray(q0, dtype=float)
        dq0 = np.zeros(plant.n) if dq0 is None else np.asarray(dq0, dtype=float)
        self._x = plant.vi.discrete_state(q0, dq0)
        self._u = np.zeros(plant.m)
        self._cond = threading.Condition()     # guards _u, running, commands; notified per command
        self.running = not start_on_command
        self.overrun_tolerance = plant.dt if overrun_tolerance is None else float(overrun_tolerance)
        self.catch_up_wait = 0.5 * plant.dt if catch_up_wait is None else float(catch_up_wait)
        # statistics (written by the step thread, commands by the executor thread)
        self.ticks = 0                  # ticks published (held or stepped)
        self.steps = 0                  # plant steps
        self.fresh_steps = 0            # steps applying a command that arrived since the previous step
        self.commands = 0               # valid commands received
        self.bad_commands = 0
        self.overruns = 0               # ticks later than overrun_tolerance
        self.max_lateness = 0.0         # [s], over all ticks
        self.first_step_mono: float | None = None   # time.monotonic() of the first and the last step
        self.last_step_mono: float | None = None
        self.failure: str | None = None
        self.latest = (0, q0.copy(), dq0.copy())   # (stamp ns = simulated time, q, qdot)
        self._record: deque = deque(maxlen=RECORD_TICKS)   # (stamp, q) per tick, guarded by _cond
        self._recorded = 0                                 # ticks ever recorded
        self._impulse: np.ndarray | None = None     # added to the momenta at the next step (push)
        self.pushes = 0
        self._last_command_mono: float | None = None
        self.max_command_gap = 0.0      # [s] between consecutive commands (after the first)
        self.command_gaps: list[float] = []
        self._pub = self.create_publisher(JointState, state_topic, qos_profile_sensor_data)
        self._command_sub = self.create_subscription(Float64MultiArray, command_topic, self._on_command,
                                                     ROBOT_COMMAND_QOS)
        self._stop = threading.Event()
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self)
        self._spin_thread = threading.Thread(target=self._spin, name=f"{name}_executor", daemon=True)
        self._thread = threading.Thread(target=self._loop, name=f"{name}_steps", daemon=True)

    @property
    def connected(self) -> bool:
        """Whether a subscriber gets this robot's JointState and a publisher sends it commands
        (the controller's command path has discovered it)."""
        return self._pub.get_subscription_count() > 0 and self._command_sub.get_publisher_count() > 0

    def _on_command(self, msg: Float64MultiArray):
        u = np.frombuffer(msg.data, dtype=np.float64) if len(msg.data) else np.zeros(0)
        if u.size != self.plant.m or not np.all(np.isfinite(u)):
            self.bad_commands += 1
            return
        now = time.monotonic()
        with self._cond:
            if self._last_command_mono is not None:
                gap = now - self._last_command_mono
                self.command_gaps.append(gap)
                self.max_command_gap = max(self.max_command_gap, gap)
            self._last_command_mono = now
            self._u = u.copy()
            self.commands += 1
            self.running = True
            self._cond.notify_all()

    def push(self, impulse) -> None:
        """A push: ``impulse`` (one entry per dynamic variable, N s or N m s) is added to the
        robot's momenta ``p`` at its next step, as a blow would (the discrete state is
        ``[q, p, v]``)."""
        impulse = np.asarray(impulse, dtype=float)
        if impulse.shape != (self.plant.vi.nd,) or not np.all(np.isfinite(impulse)):
            raise ValueError(f"a push needs {self.plant.vi.nd} finite momenta, got {impulse!r}")
        with self._cond:
            self._impulse = impulse if self._impulse is None else self._impulse + impulse

    def states_since(self, index: int) -> tuple[int, list]:
        """The ticks recorded from the ``index``-th on (counting from 0, the first tick), as
        ``(next index, [(stamp ns, q), ...])``; ticks older than the record's ``RECORD_TICKS``
        are gone."""
        with self._cond:
            total, kept = self._recorded, list(self._record)
        return total, kept[max(index - (total - len(kept)), 0):]

    def start(self):
        """Collect and freeze the process's objects (see the module docstring), start the
        executor thread, then the step thread (the first tick is due now)."""
        gc.collect()
        gc.freeze()
        self._spin_thread.start()
        self._thread.start()
        return self

    def halt(self):
        """Stop stepping and publishing states (the step thread ends); commands are still
        received and counted until :meth:`stop`."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def stop(self):
        self.halt()
        self._executor.shutdown(timeout_sec=2.0)
        if self._spin_thread.is_alive():
            self._spin_thread.join(timeout=2.0)
        gc.unfreeze()

    def _spin(self):
        try:
            self._executor.spin()
        except Exception:  # noqa: BLE001 - context shut down while stopping
            pass

    # ------------------------------------------------------------------ statistics
    def stats(self) -> dict:
        """Steps, commands and timing so far (see the module docstring)."""
        steps = self.steps
        # steps > 1: the first step has set both
        span = (cast(float, self.last_step_mono) - cast(float, self.first_step_mono)) if steps > 1 else 0.0
        return {"ticks": self.ticks, "steps": steps, "commands": self.commands,
                "bad_commands": self.bad_commands, "fresh_steps": self.fresh_steps,
                "fresh_fraction": self.fresh_steps / steps if steps else 0.0,
                "step_rate": (steps - 1) / span if span > 0 else 0.0,
                "overruns": self.overruns, "max_lateness": self.max_lateness,
                "max_command_gap": self.max_command_gap, "pushes": self.pushes}

    def summary(self) -> str:
        s = self.stats()
        return (f"robot: {s['steps']} steps at {s['step_rate']:.1f} Hz (dt {self.plant.dt} s), "
                f"{s['fresh_steps']} with a fresh command ({100 * s['fresh_fraction']:.1f} %), "
                f"{s['commands']} commands received ({s['bad_commands']} refused), "
                f"{s['overruns']} overruns (> {1e3 * self.overrun_tolerance:.1f} ms late), "
                f"max lateness {1e3 * s['max_lateness']:.1f} ms")

    # ------------------------------------------------------------------ step thread
    def _loop(self):
        dt = self.plant.dt
        dt_ns = int(round(dt * 1e9))
        clock = self.get_clock()
        t0 = time.monotonic()
        stamp0 = clock.now().nanoseconds
        self._used_commands = 0
        self._episode = None            # [first tick, last tick, max lateness] of late ticks in a row
        self._unreported = None         # [first tick, last tick, episodes, ticks, max lateness] not logged
        self._last_report = -1.0
        k = 0
        try:
            while not self._stop.is_set():
                deadline = t0 + k * dt
                delay = deadline - time.monotonic()
                if delay > 0:
                    if self._stop.wait(delay):
                        return
                elif self.running and self.catch_up_wait > 0:
                    with self._cond:    # late: lock-step with the controller while catching up
                        self._cond.wait_for(lambda: self.commands > self._used_commands or self._stop.is_set(),
                                            timeout=self.catch_up_wait)
                lateness = time.monotonic() - deadline
                self.max_lateness = max(self.max_lateness, lateness)
                if lateness > self.overrun_tolerance:
                    self.overruns += 1
                    ep = self._episode
                    if ep is None:
                        self._episode = [k, k, lateness]
                    else:
                        ep[1], ep[2] = k, max(ep[2], lateness)
                elif self._episode is not None:
                    self._end_episode()
                if not self._tick(stamp0 + k * dt_ns, clock):
                    return
                k += 1
        finally:
            if self._episode is not None:
                self._end_episode()
            if self._unreported is not None:
                self._report_overruns(force=True)

    def _tick(self, stamp, clock) -> bool:
        """Apply the latest command, step (unless held or failed), publish the state stamped with
        ``stamp`` (the tick's simulated time, never ahead of ``clock``). False: shut down."""
        plant = self.plant
        with self._cond:
            u, running, received = self._u.copy(), self.running, self.commands
            impulse, self._impulse = self._impulse, None
        if impulse is not None:
            n = plant.n
            self._x = self._x.copy()
            self._x[n:n + impulse.size] += impulse
            self.pushes += 1
        if running and self.failure is None:
            full = np.concatenate([u, self._x[:plant.n][plant.kin]])
            try:
                self._x = plant.vi.step(self._x, full)
                self.steps += 1
                if received > self._used_commands:
                    self.fresh_steps += 1
                self.last_step_mono = time.monotonic()
                if self.first_step_mono is None:
                    self.first_step_mono = self.last_step_mono
            except Exception as exc:  # noqa: BLE001 - report, keep publishing the last state
                self.failure = f"{type(exc).__name__}: {exc}"
        self._used_commands = received
        q, dq = plant.vi.continuous_state(self._x)
        stamp = min(stamp, clock.now().nanoseconds)
        self.latest = (stamp, q, dq)
        with self._cond:
            self._record.append((stamp, q))
            self._recorded += 1
        try:
            self._pub.publish(cv.joint_state(self.joint_names, q, dq, stamp))
        except Exception:  # noqa: BLE001 - context shut down while stopping
            return False
        self.ticks += 1
        return True

    def _end_episode(self):
        first, last, worst = self._episode
        self._episode = None
        un = self._unreported
        if un is None:
            self._unreported = [first, last, 1, last - first + 1, worst]
        else:
            un[1], un[2], un[3], un[4] = last, un[2] + 1, un[3] + last - first + 1, max(un[4], worst)
        self._report_overruns()

    def _report_overruns(self, force: bool = False):
        """Log the overrun episodes not logged yet; at most once a second unless ``force``."""
        now = time.monotonic()
        if not force and now - self._last_report < 1.0:
            return
        first, last, episodes, ticks, worst = self._unreported
        where = f"tick {first}" if first == last else f"ticks {first}-{last}"
        if episodes > 1:
            where = f"{episodes} episodes in {where}"
        try:
            self.get_logger().warning(
                f"overrun: {where}: {ticks} tick(s) started more than {1e3 * self.overrun_tolerance:.1f} ms "
                f"(up to {1e3 * worst:.1f} ms) after their deadlines, then caught up "
                f"(deadlines are never reset); {self.overruns} overrun(s) in all")
        except Exception:  # noqa: BLE001 - context shut down while stopping
            pass
        self._unreported = None
        self._last_report = now
