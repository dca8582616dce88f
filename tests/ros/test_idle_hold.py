"""The idle hold (parameter ``idle_action``), end to end: a real node process, a simulated robot
(:class:`mechnode.testing.sim.SimRobot`, the 7-joint arm of ``core/data/arm7.urdf`` stepping in
real time) over real DDS on this run's private domain.

* ``idle_action: hold`` (the default): the arm, kicked (0.3 rad/s or m/s on every joint) when the
  node's first command releases it, stays within a bound of where it was measured at activation
  before any reference is sent; the diagnostics say ``holding``; a reference then takes over
  (``tracking``) and, with ``idle_after_schedule: true``, the node holds the reference's end
  once it is over (``holding``).
* ``idle_action: none``: no command at all before a reference; the same arm, released at once,
  falls.
"""
from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

from nodeproc import NodeProcess, diagnostics, write_params

pytestmark = pytest.mark.slow

ARM_Q = [2500.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
ARM_R = [1.1e-5, 1.6e-4, 1.6e-4, 6.3e-4, 6.3e-4, 4.4e-3, 1.0e-2]
POSE = np.array([0.15, 0.3, 0.6, -0.4, -1.2, 0.5, 0.2])
KICK = 0.3          # initial velocity of every joint [rad/s or m/s]
HOLD_BOUND = 0.05   # largest |q - q_activation| of any joint under the hold [rad or m]
WATCH = 3.0         # seconds watched before any reference


def _node(rclpy_mod, tmp_path, name, **params):
    p = {"model": "arm7.urdf", "dt": 0.01, "Q": ARM_Q, "R": ARM_R, "state_timeout": 0.25,
         "diagnostics_period": 0.2, "feasibility": "auto", **params}
    return NodeProcess(rclpy_mod, write_params(tmp_path / "params.yaml", p), f"/test_{name}_{os.getpid()}",
                       tmp_path / "mechnode.log")


def _robot(h, start_on_command):
    from mechnode.logic.plant import Plant
    from mechnode.testing.sim import SimRobot
    plant = Plant.load("arm7.urdf", 0.01)
    plant.warm_up()
    robot = SimRobot(plant, plant.config_names, POSE, KICK * np.ones(plant.n), namespace=h.ns,
                     context=h.ctx, start_on_command=start_on_command)
    return robot


def _watch(robot, seconds):
    """Largest |q - POSE| per joint over ``seconds`` of the robot's states, and the last q."""
    worst = np.zeros(POSE.size)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _, q, _ = robot.latest
        worst = np.maximum(worst, np.abs(q - POSE))
        time.sleep(0.005)
    return worst, robot.latest[1]


def test_hold_before_the_first_reference_then_track_then_hold_the_end(rclpy_mod, ifaces, tmp_path):
    from mechnode.demo import arm_reference_points
    from mechnode.ros import conversions as cv
    h = _node(rclpy_mod, tmp_path, "hold", idle_after_schedule=True)
    robot = None
    try:
        status = diagnostics(h)
        h.bring_up()
        robot = _robot(h, start_on_command=True)      # held by its brakes until the first command
        robot.start()
        h.wait(lambda: robot.running, "the node's first (hold) command", timeout=30.0)
        t_first = time.monotonic()
        worst, q_end = _watch(robot, WATCH)
        print(f"hold: first command {t_first - h.t_active:.2f} s after activation; largest |q - q0| per "
              f"joint over {WATCH} s {np.round(worst, 4).tolist()}; after it |q - q0| = "
              f"{np.abs(q_end - POSE).max():.2e}; "
              f"{robot.commands} commands")
        assert worst.max() < HOLD_BOUND, (worst, h.log()[-3000:])
        assert worst.max() > 1e-3                     # the kick moved it: the hold brought it back
        # back at rest where it was measured (the published velocity is the integrator's
        # rest-state velocity M^-1 D2 L_d(q, q), dt/2 g on the lift: not a motion)
        assert np.abs(q_end - POSE).max() < 1e-3
        assert robot.commands >= 0.8 * WATCH / 0.01 and robot.bad_commands == 0
        h.wait(lambda: status.get("mode") == "holding", "mode holding in the diagnostics")
        assert "holding the robot" in status["_message"] and status["schedule_active"] == "False"
        line = next(x for x in h.log().splitlines() if "holding the robot at the state measured" in x)
        print("node:", line.split("]: ", 1)[-1])

        # a reference takes over: tracking, then (idle_after_schedule) the hold about its end
        from trajectory_msgs.msg import JointTrajectory

        from mechnode.ros.qos import LATCHED
        names, times, pos = arm_reference_points()       # from POSE, at rest after 3 s, 5 s long
        pub = h.client.create_publisher(JointTrajectory, f"{h.fqn}/reference", LATCHED)
        h.wait(lambda: pub.get_subscription_count() > 0, "the node's reference subscription")
        pub.publish(cv.joint_trajectory(names, times, pos))
        h.wait(lambda: status.get("mode") == "tracking", "mode tracking in the diagnostics", timeout=30.0)
        h.wait(lambda: status.get("mode") == "holding" and status.get("schedule_active") == "True",
               "mode holding after the schedule's end", timeout=30.0)
        assert "holding its last configuration" in status["_message"]
        time.sleep(0.5)
        assert np.abs(robot.latest[1] - pos[-1]).max() < 0.01, robot.latest
        assert int(status.get("holds_refused", 0)) == 0 and int(status.get("commands_not_finite", 0)) == 0
    finally:
        if robot is not None:
            robot.stop()
        h.close()


def test_no_command_with_idle_action_none(rclpy_mod, ifaces, tmp_path):
    h = _node(rclpy_mod, tmp_path, "none", idle_action="none")
    robot = None
    try:
        status = diagnostics(h)
        h.bring_up()
        robot = _robot(h, start_on_command=False)     # released at once: nothing holds it
        robot.start()
        # the robot's process froze its heap (SimRobot.start): no full collection stalls its steps
        assert gc.get_freeze_count() > 0
        h.wait(lambda: int(status.get("states", 0)) > 0, "the node to take the robot's states")
        worst, _ = _watch(robot, 1.0)
        print(f"idle_action none: largest |q - q0| per joint over 1 s {np.round(worst, 3).tolist()}")
        assert robot.commands == 0 and robot.bad_commands == 0
        assert status.get("mode") == "idle" and int(status.get("commands", 0)) == 0, status
        assert "(no command sent)" in status["_message"]
        assert "idle_action none: no command until a schedule is in force" in h.log()
        assert worst.max() > 10 * HOLD_BOUND            # it fell
        # its record has every tick, a dt apart in stamp, read from any index on
        total, ticks = robot.states_since(0)
        stamps = np.array([s for s, _ in ticks])
        assert total == len(ticks) >= 90 and np.allclose(np.diff(stamps), 1e9 * robot.plant.dt, atol=1.0)
        assert robot.states_since(total - 2)[1][0][0] == stamps[-2]
        assert robot.states_since(total)[1] == []
        robot.stop()
        robot, frozen = None, gc.get_freeze_count()
        assert frozen == 0                              # and SimRobot.stop unfroze it
    finally:
        if robot is not None:
            robot.stop()
        h.close()
