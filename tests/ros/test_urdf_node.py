"""The node with a URDF model (real node process, real DDS on loopback): taken from the
``/robot_description`` topic as robot_state_publisher publishes it (std_msgs/String, reliable,
transient local), configure waiting a bounded time; joint names from the URDF; commands
saturated at the URDF effort limits; the limits reported by GetModel.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from nodeproc import NodeProcess, write_params

pytestmark = pytest.mark.slow

#: Two links on revolute joints about tilted axes, centres of mass off the joint axes; the
#: shoulder's effort limit is 3 N m, the elbow's "0" (URDF for "not given").
URDF = """<?xml version="1.0"?>
<robot name="two_link">
  <link name="base"/>
  <link name="upper">
    <inertial><origin xyz="0 0 -0.25" rpy="0.1 0 0"/><mass value="1.5"/>
      <inertia ixx="0.03" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.004"/></inertial>
  </link>
  <link name="lower">
    <inertial><origin xyz="0.01 0 -0.2" rpy="0 0.2 0"/><mass value="0.8"/>
      <inertia ixx="0.012" ixy="0" ixz="0.0005" iyy="0.012" iyz="0" izz="0.002"/></inertial>
  </link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="upper"/><origin xyz="0 0 1.0" rpy="0 0 0"/>
    <axis xyz="0 0.8 0.6"/><limit lower="-2.5" upper="2.5" velocity="4.0" effort="3.0"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="upper"/><child link="lower"/><origin xyz="0 0 -0.5" rpy="0 0 0.3"/>
    <axis xyz="0 1 0"/><limit lower="-2.0" upper="2.0" velocity="5.0" effort="0"/>
  </joint>
</robot>
"""
JOINTS = ["shoulder", "elbow"]
COMMAND_LIMIT = 20.0


def _params_file(path, **extra):
    params = {"robot_description_topic": "robot_description", "robot_description_timeout": 1.0,
              "dt": 0.01, "Q": [10.0, 10.0, 1.0, 1.0], "R": [0.1, 0.1], "state_timeout": 0.3,
              "command_limit": COMMAND_LIMIT, "diagnostics_period": 0.2, **extra}
    return write_params(path, params)


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("urdf_node")
    h = NodeProcess(rclpy_mod, _params_file(d / "params.yaml"), f"/test_urdf_{os.getpid()}",
                    d / "mechnode.log")
    try:
        h.lifecycle.wait(60.0)
        yield h
    finally:
        h.close()


def test_configure_fails_clearly_without_a_robot_description(node):
    h = node
    mark = len(h.log())
    assert not h.transition("configure", 60) and h.state() == "unconfigured"
    h.wait_log(rf"no robot description on {h.ns}/robot_description within 1.0 s", after=mark)


def test_model_from_robot_description_with_urdf_limits(node):
    from mechnode_interfaces.srv import GetModel
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    h = node
    # as robot_state_publisher does: latched, published before the node configures
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    h.description_pub = h.client.create_publisher(String, f"{h.ns}/robot_description", latched)
    h.description_pub.publish(String(data=URDF))
    assert h.transition("configure", 600), h.log()[-3000:]
    h.wait_log(rf"configured: model '{h.ns}/robot_description \({len(URDF)} characters\)'")
    m = h.call(GetModel, "get_model", GetModel.Request())
    assert m.success and list(m.config_names) == JOINTS and list(m.input_names) == JOINTS
    assert list(m.position_lower) == [-2.5, -2.0] and list(m.position_upper) == [2.5, 2.0]
    assert list(m.velocity_limit) == [4.0, 5.0]
    assert list(m.effort_limit) == [3.0, 0.0]
    # the smaller of the URDF effort and command_limit; effort="0" means none given
    assert list(m.command_limit) == [3.0, COMMAND_LIMIT]


def test_commands_saturate_at_the_urdf_effort_limit(node):
    from mechnode.ros.conversions import joint_state, joint_trajectory
    h = node
    assert h.transition("activate"), h.log()[-3000:]
    commands = []
    h.connect_io(lambda m: commands.append(np.asarray(m.data)))
    t = np.arange(0.0, 5.0 + 1e-9, 0.5)
    h.ref_pub.publish(joint_trajectory(JOINTS, t, np.zeros((t.size, 2))))      # hold q = 0
    h.wait(lambda: h.schedules, "the GainSchedule", timeout=60)
    clock = h.client.get_clock()
    # the law's commands here are far from zero; exact zeros are the watchdog's (no state for
    # state_timeout, when this loop is descheduled on a loaded machine): counted apart
    law = lambda: [c for c in commands if np.any(c)]  # noqa: E731
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and len(law()) < 20:
        # far from the reference: the law asks for much more than the limits
        h.state_pub.publish(joint_state(JOINTS, [1.2, -1.0], [2.0, -3.0], clock.now().nanoseconds))
        time.sleep(0.02)
    assert len(law()) >= 10, h.log()[-3000:]
    u = np.array(law()[-10:])
    assert np.all(np.abs(u[:, 0]) <= 3.0 + 1e-12) and np.allclose(np.abs(u[:, 0]), 3.0)
    assert np.all(np.abs(u[:, 1]) <= COMMAND_LIMIT + 1e-12)
    assert math.isclose(abs(u[-1, 1]), COMMAND_LIMIT) or abs(u[-1, 1]) < COMMAND_LIMIT


# ---------------------------------------------------------------------------------- Panda
def _panda_node(rclpy_mod, tmp_path, label, names, **params):
    """A node process configured with Panda's URDF from ``/robot_description`` (latched, as
    robot_state_publisher publishes it) and ``params``; its variables and inputs are ``names``
    (GetModel). The caller closes it."""
    from mechnode_interfaces.srv import GetModel
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from urdfref import robot_path
    with open(robot_path("panda_description/urdf/panda.urdf")) as fh:
        text = fh.read()
    h = NodeProcess(rclpy_mod, _params_file(tmp_path / "params.yaml", **params), f"/test_{label}_{os.getpid()}",
                    tmp_path / "mechnode.log")
    try:
        h.lifecycle.wait(60.0)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        pub = h.client.create_publisher(String, f"{h.ns}/robot_description", latched)
        pub.publish(String(data=text))
        assert h.transition("configure", 600), h.log()[-3000:]
        m = h.call(GetModel, "get_model", GetModel.Request())
        assert m.success and list(m.config_names) == names and list(m.input_names) == names
    except BaseException:
        h.close()
        raise
    return h


def test_panda_with_its_mimic_finger_from_robot_description(rclpy_mod, ifaces, tmp_path):
    """Panda's URDF on ``/robot_description`` (its second finger mimics the first): the node
    couples it (core's default), so the model has eight variables and inputs; joint_states that
    carry the mimic joint too are accepted without an unknown-joint warning, and the node
    commands efforts."""
    from mechnode.ros.conversions import joint_state, joint_trajectory
    names = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
    h = _panda_node(rclpy_mod, tmp_path, "panda", names, Q=[10.0] * 8 + [1.0] * 8, R=[0.1] * 8)
    try:
        assert h.transition("activate"), h.log()[-3000:]
        commands = []
        h.connect_io(lambda msg: commands.append(np.asarray(msg.data)))
        t = np.arange(0.0, 5.0 + 1e-9, 0.5)
        q_ref = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8, 0.02])
        h.ref_pub.publish(joint_trajectory(names, t, np.tile(q_ref, (t.size, 1))))
        h.wait(lambda: h.schedules, "the GainSchedule", timeout=120)
        clock = h.client.get_clock()
        all_joints = names + ["panda_finger_joint2"]
        q_msg = list(q_ref + 0.01) + [0.03]
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and len(commands) < 20:
            h.state_pub.publish(joint_state(all_joints, q_msg, [0.0] * 9, clock.now().nanoseconds))
            time.sleep(0.02)
        assert len(commands) >= 10, h.log()[-3000:]
        assert all(c.shape == (8,) and np.all(np.isfinite(c)) for c in commands)
        assert "unknown to the model" not in h.log()
    finally:
        h.close()


def test_panda_with_its_gripper_locked(rclpy_mod, ifaces, tmp_path):
    """``locked_joints: ["panda_finger_joint1=0.04"]`` (the gripper left to its own driver):
    the model has the arm's seven variables and inputs; JointStates without the fingers are
    taken, those with them too (the fingers ignored, not reported as unknown), and every command
    has seven efforts."""
    from mechnode.ros.conversions import joint_state, joint_trajectory
    arm = [f"panda_joint{i}" for i in range(1, 8)]
    h = _panda_node(rclpy_mod, tmp_path, "panda_locked", arm, Q=[10.0] * 7 + [1.0] * 7, R=[0.1] * 7,
                    locked_joints=["panda_finger_joint1=0.04"])
    try:
        h.wait_log(r"locked \{'panda_finger_joint1': 0.04, 'panda_finger_joint2': 0.04\}")
        assert h.transition("activate"), h.log()[-3000:]
        commands = []
        h.connect_io(lambda msg: commands.append(np.asarray(msg.data)))
        t = np.arange(0.0, 5.0 + 1e-9, 0.5)
        q_ref = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
        h.ref_pub.publish(joint_trajectory(arm, t, np.tile(q_ref, (t.size, 1))))
        h.wait(lambda: h.schedules, "the GainSchedule", timeout=120)
        clock = h.client.get_clock()
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and len(commands) < 40:
            with_fingers = len(commands) % 2 == 1
            names = arm + (["panda_finger_joint1", "panda_finger_joint2"] if with_fingers else [])
            q_msg = list(q_ref + 0.01) + ([0.02, 0.02] if with_fingers else [])
            h.state_pub.publish(joint_state(names, q_msg, [0.0] * len(names), clock.now().nanoseconds))
            time.sleep(0.02)
        assert len(commands) >= 20, h.log()[-3000:]
        assert all(c.shape == (7,) and np.all(np.isfinite(c)) for c in commands)
        assert "unknown to the model" not in h.log() and "lacks joint" not in h.log()
    finally:
        h.close()
