"""The closed loop over DDS: the node (a subprocess started from config/cartpole_params.yaml)
balances the simulated cart-pole (mechnode.testing.sim.SimRobot: the variational integrator stepping in
real time, JointState out, Float64MultiArray commands in) while tracking a reference that moves
the cart with the pole upright; the tracking error must converge. This is the README demo
(``python -m mechnode.demo``) run on this test run's ROS_DOMAIN_ID, several times in a row: it
must converge every time, with the simulated robot on time (steps at 100 Hz, few overruns) and
fed (almost) every step with a fresh command."""
from __future__ import annotations

import os

import numpy as np
import pytest

# slow: a node process per run, then the closed loop runs in real time (about 15 s per run)
pytestmark = pytest.mark.slow

RUNS = 3


def check_run(status, history, stats, text, start_error=0.1):
    assert status == 0, text
    t = np.array([h[0] for h in history])
    err = np.array([h[1] for h in history])
    # every tick of the robot from the schedule's start: the first is the state the tracking starts from
    assert t.size and t[0] <= 0.0, f"no robot state at the schedule's start:\n{text}"
    assert np.all(np.diff(t) >= 0) and np.diff(t).max() < 0.05, f"ticks missing from the history:\n{text}"
    early = err[t < 0.5].max()
    assert early > start_error, f"the robot starts off the reference (error {early})"
    assert err[-1] < 0.01 and err[-1] < early / 10, text
    assert t[-1] >= 5.0 - 0.05                      # the whole reference has been run through
    assert "deactivate, cleanup, shutdown done" in text
    # the simulated robot kept time and got its commands (see mechnode.testing.sim)
    assert stats is not None, text
    assert "summary: converged; robot:" in text
    assert stats["steps"] >= 400, stats          # most of the 5 s reference (the first command comes late)
    assert 95.0 <= stats["step_rate"] <= 105.0, stats           # dt = 0.01 s: 100 Hz
    assert stats["fresh_fraction"] >= 0.9, stats
    assert stats["bad_commands"] == 0, stats
    assert stats["commands"] >= 0.9 * stats["steps"], stats
    # overruns: on 2 cores shared with other jobs the demo process is descheduled now and then
    # (up to ~0.2 s seen); the robot reports them and catches up, the bounds catch a robot that
    # falls behind for good (as with the shared multi-threaded executor: 4-7x slower than real time)
    # A single late tick is the test machine's, not the node's (a 0.3 s pause of the robot's
    # process has been seen under CI load: full garbage collections of this test process, 0.1-0.17 s
    # on an idle host, which SimRobot.start now keeps out by freezing the heap): the node's answer
    # to a pause is its watchdog, and the loop must converge regardless. What is bounded is a
    # robot that stalls for good (overruns on most ticks): a clean-clone CI run saw 84 of 670
    # ticks late (max 0.22 s) in a run that converged, so the bound is a quarter of the ticks.
    assert stats["overruns"] <= 0.25 * stats["ticks"], stats
    assert stats["max_lateness"] < 1.0, stats


def test_closed_loop_over_dds_converges_every_time(rclpy_mod, ifaces):
    from mechnode import demo
    summaries = []
    for i in range(RUNS):
        lines = []
        status, history, stats = demo.run(namespace=f"/test_loop_{os.getpid()}_{i}", timeout=30.0,
                                          threshold=0.01, log=lines.append,
                                          context_domain=int(os.environ["ROS_DOMAIN_ID"]))
        text = "\n".join(lines)
        print(f"---- run {i + 1} of {RUNS}\n{text}")
        check_run(status, history, stats, f"run {i + 1} of {RUNS}:\n{text}")
        summaries.append(next(s for s in lines if s.startswith("summary:")))
    print("\n".join(summaries))


def test_closed_loop_with_the_urdf_arm_from_robot_description(rclpy_mod, ifaces):
    """The main job's second mode: the node takes core/data/arm7.urdf from /robot_description and
    the simulated arm tracks the reference under its gains."""
    from mechnode import demo
    lines = []
    status, history, stats = demo.run(namespace=f"/test_arm_{os.getpid()}", timeout=30.0, threshold=0.01,
                                      log=lines.append, context_domain=int(os.environ["ROS_DOMAIN_ID"]),
                                      robot="arm7")
    text = "\n".join(lines)
    print(text)
    assert "robot description published: arm7.urdf" in text
    check_run(status, history, stats, text, start_error=0.05)


def test_closed_loop_with_the_panda_gripper_locked_held_from_activation(rclpy_mod, ifaces):
    """The main job's Panda mode (``--robot panda``): example-robot-data's Panda from
    /robot_description with its fingers locked (7 joints in the node's and the simulated robot's
    model, JointState and command), held by the node from activation, then tracking."""
    from mechnode import demo
    lines = []
    status, history, stats = demo.run(namespace=f"/test_panda_{os.getpid()}", timeout=30.0, threshold=0.01,
                                      log=lines.append, context_domain=int(os.environ["ROS_DOMAIN_ID"]),
                                      robot="panda")
    text = "\n".join(lines)
    print(text)
    assert "robot description published: panda.urdf" in text
    assert "locked joints {'panda_finger_joint1': 0.04}" in text and "the 7-joint model" in text, text
    assert "the effort command has 7 values" in text
    assert "node mode: holding; the robot stayed within" in text, text
    check_run(status, history, stats, text, start_error=0.1)
