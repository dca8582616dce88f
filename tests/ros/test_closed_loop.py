"""The closed loop over DDS: the node (a subprocess started from config/cartpole_params.yaml)
balances the simulated cart-pole (mechnode.testing.sim.SimRobot: the variational integrator stepping in
real time, JointState out, Float64MultiArray commands in) while tracking a reference that moves
the cart with the pole upright; the tracking error must converge. This is the README demo
(``python -m mechnode.demo``) run on this test run's ROS_DOMAIN_ID."""
from __future__ import annotations

import os

import numpy as np
import pytest

# slow: a node process, then the closed loop runs in real time
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:module .sre_:DeprecationWarning")]


def test_closed_loop_over_dds_converges(rclpy_mod, ifaces):
    from mechnode import demo
    lines = []
    status, history = demo.run(namespace=f"/test_loop_{os.getpid()}", timeout=30.0, threshold=0.01,
                               log=lines.append, context_domain=int(os.environ["ROS_DOMAIN_ID"]))
    text = "\n".join(lines)
    print(text)
    assert status == 0, text
    t = np.array([h[0] for h in history])
    err = np.array([h[1] for h in history])
    early = err[t < 0.5].max()
    assert early > 0.1, f"the robot starts off the reference (error {early})"
    assert err[-1] < 0.01 and err[-1] < early / 10, text
    assert t[-1] >= 5.0 - 0.05                      # the whole reference has been run through
    assert "deactivate, cleanup, shutdown done" in text
