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

both stamped with the node clock's time of the tick. With ``start_on_command`` it holds its
initial state (still publishing it) until the first command: a robot on its stand until the
controller takes over. Threads: a step thread of its own and an executor thread for the command
subscription (as :class:`mechnode.testing.sim.SimRobot`).
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
    once in the step thread at its time (a push: ``lambda p: p.push([0, 0.3, 0])``)."""

    def __init__(self, plant, q0, v0=None, *, period: float = 0.002, name: str = "mujoco_robot",
                 namespace: str = "", state_topic: str = "joint_states", odometry_topic: str = "odom",
                 command_topic: str = "effort_controller/commands", world_frame: str = "odom",
                 base_frame: str | None = None, start_on_command: bool = True, events=(), context=None):
        super().__init__(name, namespace=namespace, context=context)
        self.plant, self.period = plant, float(period)
        system = plant.system
        self.joint_names = list(system.velocity_names[6:])
        self.world_frame, self.base_frame = world_frame, base_frame or system.free_flyer
        plant.set_state(q0, np.zeros(system.nv) if v0 is None else v0)
        self._u = np.zeros(system.nu)
        self._lock = threading.Lock()
        self.running = not start_on_command
        self.commands = self.bad_commands = self.steps = self.overruns = 0
        self.fresh_steps = 0            # steps applying a command that arrived since the previous step
        self._used = 0
        self.max_lateness = 0.0
        self.started: float | None = None           # simulated time of the first step
        self._events = sorted(events, key=lambda e: e[0])
        #: per tick: (simulated time, q, contact frames' positions, the command applied, the stamp
        #: (ns, ROS time) the state was published with)
        self.record: list = []
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
            self._publish(clock.now().nanoseconds, u if running else None)
            k += 1

    def _publish(self, stamp: int, u) -> None:
        q, v = self.plant.state()
        self.record.append((self.plant.time, q, self.plant.contact_positions(), u, stamp))
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
