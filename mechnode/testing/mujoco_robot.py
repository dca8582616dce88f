"""A legged robot simulated by MuJoCo, over ROS 2: what a state estimator and an effort
controller of a real robot would give the node.

:class:`MujocoRobot` steps a :class:`~mechnode.testing.mujoco_plant.MujocoPlant` in real time
(absolute deadlines every ``period``), applies the latest ``std_msgs/Float64MultiArray`` command
(the efforts of ``system.input_names``, held over the period) and publishes, every period, the
simulator's ground truth as

* ``sensor_msgs/JointState``: position and velocity of every joint;
* ``nav_msgs/Odometry`` (REP 105): the pose of ``base_frame`` in ``world_frame`` and its twist on
  the base's own axes (a motion-capture system or a simulator's ground truth feeds a real
  robot's node the same way),

both stamped with the simulated time of the tick (below). With ``start_on_command`` it holds its
initial state (still publishing it) until the first command: a robot on its stand until the
controller takes over. Threads: a step thread of its own and an executor thread for the command
subscription (as :class:`mechnode.testing.sim.SimRobot`).

Real time, or paused for a stalled controller (``stale_after``): by default (0) a tick applies
whatever command is there, as a real robot does; a controller that misses its period, or a host
that stalls the controller's process, shows as steps without a fresh command
(:attr:`MujocoRobot.fresh_steps`). With ``stale_after > 0`` the simulated world never runs longer
than that (simulated seconds) on one command: a step whose command arrived longer ago waits, at
most ``answer_wait`` (wall-clock seconds), for the next one. While commands come every period or
two, nothing waits and the robot runs in real time; a stall of the test host's processes pauses
the simulated world instead of letting it fall on a stale command, so that what the closed loop
does is the controller's law, not the test machine's load. The deadlines stay absolute (a late
robot catches up), and the steps that waited and those whose wait ran out are counted
(:attr:`MujocoRobot.waits`, :attr:`MujocoRobot.unanswered`). The controller's timing is measured
on its own (the node's latency figures, ``bench/bench_legged_node.py``).

Stamps: the simulated time, ``T0 + t_sim`` on the node clock (``T0`` the clock's time of the
first tick, or of the last tick before the first command), as
:class:`mechnode.testing.sim.SimRobot` stamps: a controller that evaluates a reference at the
state's stamp stays in step with the simulated world when the world pauses or runs late. The
stamps stay within ``[now - max_lag, now]`` of the clock, ``T0`` moved as little as that takes: a
world more than ``max_lag`` behind (a long stall) would send states the controller refuses as
stale (its ``state_timeout``), so ``T0`` moves forward (the reference then runs ahead of the
world by that much; the sum of these moves is :attr:`MujocoRobot.slipped`, seconds), and back when the world
has caught up with the clock.
"""
from __future__ import annotations

import gc
import threading
import time

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mechnode.ros import conversions as cv
from mechnode.testing.sim import ROBOT_COMMAND_QOS


class MujocoRobot(Node):
    """The simulated legged robot (see the module docstring); :meth:`start` / :meth:`stop`.
    ``events``: ``(seconds after the first command, action)`` pairs, each ``action(plant)`` run
    once in the step thread at its time (a push: ``lambda p: p.push([0, 0.3, 0])``);
    ``stale_after``, ``answer_wait``: the pause for a stalled controller (module docstring)."""

    def __init__(self, plant, q0, v0=None, *, period: float = 0.002, name: str = "mujoco_robot",
                 namespace: str = "", state_topic: str = "joint_states", odometry_topic: str = "odom",
                 command_topic: str = "effort_controller/commands", world_frame: str = "odom",
                 base_frame: str | None = None, start_on_command: bool = True, events=(),
                 stale_after: float = 0.0, answer_wait: float = 0.25, max_lag: float = 0.1, context=None):
        super().__init__(name, namespace=namespace, context=context)
        for label, value, most in (("stale_after", stale_after, 1.0), ("answer_wait", answer_wait, 1.0),
                                   ("max_lag", max_lag, 10.0)):
            if not 0.0 <= value <= most:
                raise ValueError(f"{label} must be in [0, {most:g}] s, got {value!r}")
        self.plant, self.period = plant, float(period)
        self.stale_after, self.answer_wait = float(stale_after), float(answer_wait)
        self._max_lag_ns = int(round(float(max_lag) * 1e9))
        self._epoch_ns: int | None = None   # T0 - t_sim(first tick): the stamp is epoch + t_sim
        self.slipped = 0.0                  # seconds the stamps were moved forward (max_lag)
        system = plant.system
        self.joint_names = list(system.velocity_names[6:])
        self.world_frame, self.base_frame = world_frame, base_frame or system.free_flyer
        plant.set_state(q0, np.zeros(system.nv) if v0 is None else v0)
        self._u = np.zeros(system.nu)
        self._lock = threading.Lock()
        self._answered = threading.Condition(self._lock)     # a command arrived
        self.running = not start_on_command
        self.commands = self.bad_commands = self.steps = self.overruns = 0
        self.waits = self.unanswered = 0    # steps that waited for a command (stale_after); in vain
        self._command_time = 0.0            # simulated time when the latest command arrived
        self.fresh_steps = 0            # steps applying a command that arrived since the previous step
        self._used = 0
        self.max_lateness = 0.0
        self.started: float | None = None           # simulated time of the first step
        self._events = sorted(events, key=lambda e: e[0])
        #: per tick: (simulated time, q, contact frames' positions, the command applied, the stamp
        #: (ns, ROS time) the state was published with)
        self.record: list = []
        #: the floor's normal force on each contact frame's body (N), read in the step thread at the
        #: latest tick (MuJoCo's data must not be read while the step thread steps it)
        self.normal_forces = plant.normal_forces()
        self._joint_pub = self.create_publisher(JointState, state_topic, qos_profile_sensor_data)
        self._odom_pub = self.create_publisher(Odometry, odometry_topic, qos_profile_sensor_data)
        self._command_sub = self.create_subscription(Float64MultiArray, command_topic, self._on_command,
                                                     ROBOT_COMMAND_QOS)
        self._stop = threading.Event()
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self)
        self._spin_thread = threading.Thread(target=self._executor.spin, name=f"{name}_executor", daemon=True)
        self._thread = threading.Thread(target=self._loop, name=f"{name}_steps", daemon=True)

    @property
    def connected(self) -> bool:
        """Whether the node's command path takes this robot's states and sends it commands."""
        return (self._joint_pub.get_subscription_count() > 0 and self._odom_pub.get_subscription_count() > 0
                and self._command_sub.get_publisher_count() > 0)

    def _on_command(self, msg: Float64MultiArray):
        u = np.frombuffer(msg.data, dtype=np.float64) if len(msg.data) else np.zeros(0)
        if u.size != self._u.size or not np.all(np.isfinite(u)):
            self.bad_commands += 1
            return
        with self._lock:
            self._u = u.copy()
            self.commands += 1
            self.running = True
            self._command_time = self.plant.time
            self._answered.notify()

    def start(self):
        """Collect and freeze the process's objects (a full collection would stall the step
        thread: :mod:`mechnode.testing.sim`), then start the executor and the step thread."""
        gc.collect()
        gc.freeze()
        self._spin_thread.start()
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        with self._lock:
            self._answered.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self._executor.shutdown(timeout_sec=2.0)
        gc.unfreeze()

    def _loop(self):
        t0, k = time.monotonic(), 0
        clock = self.get_clock()
        while not self._stop.is_set():
            deadline = t0 + k * self.period
            delay = deadline - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            lateness = time.monotonic() - deadline
            self.max_lateness = max(self.max_lateness, lateness)
            self.overruns += lateness > self.period
            if self.running and self.stale_after > 0.0 and \
                    self.plant.time - self._command_time > self.stale_after - 1e-12:
                self._wait_for_command(clock)
            with self._lock:
                u, running, received = self._u.copy(), self.running, self.commands
            if running:
                self.fresh_steps += received > self._used
                self._used = received
                if self.started is None:
                    self.started = self.plant.time
                while self._events and self.plant.time - self.started >= self._events[0][0] - 1e-9:
                    self._events.pop(0)[1](self.plant)
                self.plant.step(u, self.period)
                self.steps += 1
            self._publish(self._stamp(clock), u if running else None)
            k += 1

    def _stamp(self, clock) -> int:
        """The simulated time's stamp (ns; the module docstring)."""
        now = clock.now().nanoseconds
        sim = int(round(self.plant.time * 1e9))
        if self._epoch_ns is None or not self.running:     # (on its stand the world does not run)
            self._epoch_ns = now - sim
        lag = now - (self._epoch_ns + sim)
        if lag > self._max_lag_ns:                      # too old for the controller: slip forward
            self._epoch_ns += lag - self._max_lag_ns
            self.slipped += 1e-9 * (lag - self._max_lag_ns)
        elif lag < 0:                                   # caught up after a slip: never ahead of now
            self._epoch_ns += lag
        return self._epoch_ns + sim

    def _wait_for_command(self, clock) -> None:
        """The simulated world paused: wait (at most ``answer_wait``) for a new command, the state
        published again every period as the robot's sensors would (a lost message or a stale
        stamp would otherwise leave the controller nothing to answer)."""
        self.waits += 1
        with self._lock:
            seen = self.commands
        end = time.monotonic() + self.answer_wait
        while not self._stop.is_set():
            with self._lock:
                if self._answered.wait_for(lambda: self.commands > seen or self._stop.is_set(),
                                           min(self.period, max(0.0, end - time.monotonic()))):
                    return
            if time.monotonic() >= end:
                self.unanswered += 1
                return
            self._send(self._stamp(clock), *self.plant.state())

    def _publish(self, stamp: int, u) -> None:
        q, v = self.plant.state()
        self.record.append((self.plant.time, q, self.plant.contact_positions(), u, stamp))
        self.normal_forces = self.plant.normal_forces()
        self._send(stamp, q, v)

    def _send(self, stamp: int, q, v) -> None:
        """Publish the state ``(q, v)``, stamped ``stamp`` (ns)."""
        odom = Odometry()
        odom.header.stamp = cv.time_msg(stamp)
        odom.header.frame_id, odom.child_frame_id = self.world_frame, self.base_frame
        p, o = odom.pose.pose.position, odom.pose.pose.orientation
        p.x, p.y, p.z = (float(x) for x in q[:3])
        o.x, o.y, o.z, o.w = (float(x) for x in q[3:7])
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        lin.x, lin.y, lin.z = (float(x) for x in v[:3])
        ang.x, ang.y, ang.z = (float(x) for x in v[3:6])
        self._odom_pub.publish(odom)
        # the JointState last: the node computes a command per JointState, with the latest Odometry
        self._joint_pub.publish(cv.joint_state(self.joint_names, q[7:], v[6:], stamp))
