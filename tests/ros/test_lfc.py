"""The LFC output over real DDS: with ``lfc_topic`` set, the node publishes its schedule knot by
knot as ``linear_feedback_controller_msgs/Control``, and LAAS's law on those messages,
``tau = feedforward + feedback_gain ([q, qdot]_ref - [q, qdot])``, is the node's own command at
the same states to first order: same gains, sign, joint order and reference.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from mechnode.testing.harness import DEFAULT_PARAMS

from nodeproc import NodeProcess

pytestmark = pytest.mark.slow

JOINTS = ["cart_joint", "pole_joint"]


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("lfc")
    h = NodeProcess(rclpy_mod, DEFAULT_PARAMS, f"/test_lfc_{os.getpid()}", d / "mechnode.log",
                    params=["lfc_topic:=lfc/control", "command_echo_topic:=command_echo"])
    try:
        assert h.bring_up()[-1] == "active"
        yield h
    finally:
        h.close()


def test_lfc_control_messages_are_the_nodes_law(node):
    from linear_feedback_controller_msgs.msg import Control
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState

    from mechnode.logic.plant import Plant
    from mechnode.ros import conversions as cv
    from mechnode.ros.qos import COMMAND_QOS
    h = node
    controls, echoes = {}, []
    h.client.create_subscription(Control, f"{h.ns}/lfc/control",
                                 lambda m: controls.setdefault(cv.stamp_ns(m.header.stamp), m), COMMAND_QOS)
    h.client.create_subscription(JointState, f"{h.ns}/command_echo", echoes.append, qos_profile_sensor_data)
    h.connect_io(lambda m: None)
    # the cart moves 0.3 sin(t) for 60 s: gains, feed-forward and reference change along the way
    # (long enough for the retries below on a loaded machine: a CI run lost so many state pairs
    # to stale stamps that a 20 s reference ended before the fifth check, and no Control came)
    t = np.arange(0.0, 60.0 + 1e-9, 0.1)
    h.ref_pub.publish(cv.joint_trajectory(JOINTS, t, np.stack([0.3 * np.sin(t), 0 * t], 1)))
    h.wait(lambda: h.schedules, "the GainSchedule", timeout=60)
    sched, start = cv.schedule_from_msg(h.schedules[-1])
    h.wait(lambda: len(controls) >= 20, "LFC Control messages", timeout=10)
    stamps = sorted(controls)
    # knot by knot: stamps on the schedule's grid (start + t_k), in order
    steps = np.diff(stamps) * 1e-9
    assert np.all(steps > 0) and np.allclose(steps / sched.dt, np.round(steps / sched.dt), atol=1e-6)
    msg = controls[stamps[0]]
    assert list(msg.initial_state.joint_state.name) == JOINTS
    assert [d.label for d in msg.feedback_gain.layout.dim] == ["rows", "cols"]
    assert cv.row_major_from_msg(msg.feedback_gain).shape == (2, 4)
    assert cv.row_major_from_msg(msg.feedforward).shape == (2, 1)

    plant = Plant.load("cartpole.yaml", sched.dt)
    Fu = plant.system.input_matrix(np.zeros(2))                # joint efforts = Fu u
    checked = 0
    for _ in range(5):
        # a state near the knot due now, sent twice (+delta, -delta) with the same stamp; the node
        # answers each with a command (echoed with the state's stamp), LFC's law on the Control
        # message of that knot must give the same efforts to first order
        # the Control due now, and states stamped at its knot's time (the node then uses that
        # knot); stamps 1 ns apart (the same knot) tell the two echoes apart. States and echoes
        # are best effort (sensor-data QoS) and a state stamped more than state_timeout (0.25 s)
        # ago is refused (seen: states reaching the node 0.3-0.43 s after this process published
        # them, on a machine running other tests): a lost or late pair is tried again with the
        # next Control
        delta = 1e-4 * np.array([1.0, -2.0, 3.0, 1.5])
        for _attempt in range(10):
            n_controls = len(controls)
            h.wait(lambda n=n_controls: len(controls) > n, "a fresh Control message", timeout=5)
            stamp = max(controls)
            k = sched.knot((stamp - start) * 1e-9)
            assert stamp == start + int(round(sched.times[k] * 1e9))
            q_ref, v_ref = plant.vi.continuous_state(sched.x_ref[k])
            taus = []
            for i, sign in enumerate((1.0, -1.0)):
                z, t_ns = np.concatenate([q_ref, v_ref]) + sign * delta, stamp + i
                h.state_pub.publish(cv.joint_state(JOINTS, z[:2], z[2:], t_ns))
                deadline, echo = time.monotonic() + 0.2, None
                while echo is None and time.monotonic() < deadline:
                    echo = next((e for e in echoes if cv.stamp_ns(e.header.stamp) == t_ns), None)
                    time.sleep(0.002)
                if echo is None:
                    break
                taus.append((z, Fu @ np.asarray(echo.effort)))
            if len(taus) == 2:
                break
        assert len(taus) == 2, "no command echoes for a pair of states (10 tries):\n" + h.log()[-3000:]
        c = controls[stamp]
        K, u_ff = cv.row_major_from_msg(c.feedback_gain), cv.row_major_from_msg(c.feedforward)[:, 0]
        z_ref = np.concatenate([c.initial_state.joint_state.position, c.initial_state.joint_state.velocity])
        np.testing.assert_allclose(z_ref, np.concatenate([q_ref, v_ref]), atol=1e-12)
        lfc = [u_ff + K @ (z_ref - z) for z, _ in taus]
        ours = [tau for _, tau in taus]
        # the mean: the feed-forward (second order in delta); the difference: the gains, exactly
        # up to third order (a wrong sign or column order is off by 2 |K delta|, ~1e-3 here)
        scale = np.abs(K @ delta).max()
        assert scale > 1e-5
        np.testing.assert_allclose((lfc[0] + lfc[1]) / 2, (ours[0] + ours[1]) / 2, atol=1e-6 + 1e-3 * scale)
        np.testing.assert_allclose(lfc[0] - lfc[1], ours[0] - ours[1], atol=1e-3 * scale)
        checked += 1
        time.sleep(0.3)
    assert checked == 5
