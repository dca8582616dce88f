"""A simulated robot for demos and tests: the variational integrator as the plant, over ROS 2.

:class:`SimRobot` steps a :class:`mechnode.plant.Plant` in real time (its own thread, one step
every ``dt`` against absolute deadlines), publishes ``sensor_msgs/JointState`` (position and
velocity of every joint, named through a :class:`~mechnode.joint_map.JointMap`, stamped with the
ROS time of the step) and applies the latest ``std_msgs/Float64MultiArray`` command (the force
inputs, as an effort forward_command_controller would). Kinematic variables, if any, are held.
With ``start_on_command`` it holds its initial state (still publishing it) until the first
command arrives — a robot held by its brakes until the controller takes over.
"""
from __future__ import annotations

import threading
import time

import numpy as np
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from .. import conversions as cv
from ..qos import COMMAND_QOS


class SimRobot(Node):
    def __init__(self, plant, joint_names, q0, dq0=None, *, name: str = "sim_robot",
                 namespace: str = "", state_topic: str = "joint_states",
                 command_topic: str = "effort_controller/commands", start_on_command: bool = True,
                 context=None):
        super().__init__(name, namespace=namespace, context=context)
        self.plant = plant
        self.joint_names = list(joint_names)
        q0 = np.asarray(q0, dtype=float)
        dq0 = np.zeros(plant.n) if dq0 is None else np.asarray(dq0, dtype=float)
        self._x = plant.vi.discrete_state(q0, dq0)
        self._u = np.zeros(plant.m)
        self._lock = threading.Lock()
        self.running = not start_on_command
        self.steps = 0
        self.commands = 0
        self.bad_commands = 0
        self.failure = None
        self.latest = (0, q0.copy(), dq0.copy())   # (stamp ns, q, qdot)
        self._pub = self.create_publisher(JointState, state_topic, qos_profile_sensor_data)
        self.create_subscription(Float64MultiArray, command_topic, self._on_command, COMMAND_QOS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"{name}_loop", daemon=True)

    def _on_command(self, msg: Float64MultiArray):
        u = np.frombuffer(msg.data, dtype=np.float64) if len(msg.data) else np.zeros(0)
        if u.size != self.plant.m or not np.all(np.isfinite(u)):
            self.bad_commands += 1
            return
        with self._lock:
            self._u = u.copy()
            self.commands += 1
            self.running = True

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def _loop(self):
        plant = self.plant
        dt = plant.dt
        deadline = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                u, running = self._u.copy(), self.running
            if running and self.failure is None:
                full = np.concatenate([u, self._x[:plant.n][plant.kin]])
                try:
                    self._x = plant.vi.step(self._x, full)
                    self.steps += 1
                except Exception as exc:  # noqa: BLE001 - report, keep publishing the last state
                    self.failure = f"{type(exc).__name__}: {exc}"
            q, dq = plant.vi.continuous_state(self._x)
            stamp = self.get_clock().now().nanoseconds
            self.latest = (stamp, q, dq)
            try:
                self._pub.publish(cv.joint_state(self.joint_names, q, dq, stamp))
            except Exception:  # noqa: BLE001 - context shut down while stopping
                return
            deadline += dt
            delay = deadline - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            elif delay < -10 * dt:
                deadline = time.monotonic()  # far behind (overloaded machine): do not catch up
