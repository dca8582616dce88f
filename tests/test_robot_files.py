"""Every URDF of ``example-robot-data``, as users have them: each file that Pinocchio's
``buildModelFromUrdf`` loads also loads here with the default options, and ``qdd``, ``A``, ``B``
agree with Pinocchio at random states (:func:`urdfref.compare_file` says how: fixed base, mimic
joints independent, inertias as written, the tolerance scaled by ``cond(M)``, and an armature on
both where ``M`` is singular). The walk covers the whole package, not a chosen list.

Also: armature (rotor inertia) and locked joints against Pinocchio's ``model.armature`` and
``buildReducedModel`` on real robots.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from urdfref import PinocchioRobot, compare_file, relative_error, robot_files, robot_path

import core

FILES = robot_files()


def test_the_package_is_all_there():
    """The walk sees every file (69 in example-robot-data 6.0), each robot's family."""
    assert len(FILES) >= 69
    for family in ("anymal", "go1", "b1", "hyq", "icub", "tiago", "pr2", "allegro", "romeo", "panda", "talos"):
        assert any(family in f for f in FILES), family


@pytest.mark.parametrize("relative", FILES)
def test_file_loads_where_pinocchio_does_and_agrees(relative):
    r = compare_file(relative)
    if r["pinocchio"] is not True:      # (ur3.urdf declares no link: both refuse it)
        assert not r["loaded"] and "error" in r, r
        return
    assert r["loaded"], r.get("error")
    if r["nq_independent"]:
        assert r["worst"] <= r["tolerance"], r


def test_defects_warn_once_per_link_and_round_off_is_silent():
    """The vendor defects of the issue, by file: a warning per link, naming it and the
    condition; round-off (iCub's point-mass head) and links welded to the world (ANYmal's base on
    a fixed base, TIAGo's antenna) load silently."""
    expected = {
        "pr2_description/urdf/pr2.urdf": {"sensor_mount_link", "double_stereo_link"},
        "allegro_hand_description/urdf/allegro_left_hand.urdf": {"link_3.0", "link_7.0", "link_11.0",
                                                                "link_15.0"},
        "icub_description/robots/icub.urdf": set(),
        "anymal_b_simple_description/robots/anymal.urdf": set(),
        "tiago_description/robots/tiago.urdf": set(),
    }
    for relative, links in expected.items():
        messages = compare_file(relative, states=0)["warnings"]
        named = {m.split("'")[1] for m in messages}
        assert named == links and len(messages) == len(links), (relative, messages)
        assert all("triangle inequality" in m and "loaded as written" in m for m in messages)


def test_massless_links_need_armature_or_locking():
    """Romeo's finger links carry no mass: M is singular, and the error names the variable and
    what to do; with an armature the robot linearizes (and matches Pinocchio's with the same
    armature, in the walk above)."""
    path = robot_path("romeo_description/urdf/romeo.urdf")
    s = core.load_urdf(path)
    q, dq = np.zeros(s.nq), np.zeros(s.nq)
    with pytest.raises(core.errors.SingularMatrixError,
                       match=r"singular at variable \d+ \('[LR](Finger|Thumb|Hand)[^']*'\).*armature.*lock"):
        s.linearize(q, dq, np.zeros(s.nu))
    A, _ = core.load_urdf(path, armature=0.01).linearize(q, dq, np.zeros(s.nu))
    assert np.all(np.isfinite(A))
    assert compare_file("romeo_description/urdf/romeo.urdf", states=1)["armature"] == 0.01


def _agree_with_pinocchio(s, robot, seed, states=3):
    """At ``states`` random states ``(q, dq, u)`` (yielded for further checks): qdd, A, B of
    ``s`` agree with ``robot`` (a :class:`urdfref.PinocchioRobot`) to 1e-10."""
    rng = np.random.default_rng(seed)
    for _ in range(states):
        q, dq, u = rng.uniform(-1, 1, s.nq), rng.normal(size=s.nq), rng.normal(size=s.nu)
        A, B = s.linearize(q, dq, u)
        Ap, Bp = robot.linearize(q, dq, u)
        for ours, theirs in ((s.qdd(q, dq, u), robot.qdd(q, dq, u)), (A, Ap), (B, Bp)):
            assert relative_error(ours, theirs) < 1e-10
        yield q, dq, u


@pytest.mark.parametrize("relative, armature", [
    ("panda_description/urdf/panda.urdf", {"panda_joint1": 0.3, "panda_joint4": 0.1, "panda_joint7": 0.02}),
    ("ur_description/urdf/ur5_robot.urdf", 0.05),
    ("talos_data/robots/talos_reduced.urdf", 0.02),
])
def test_armature_matches_pinocchio(relative, armature):
    path = robot_path(relative)
    s = core.load_urdf(path, mimic="independent", armature=armature)
    values = armature if isinstance(armature, dict) else {n: armature for n in s.config_names}
    assert s.armature == values
    bare = core.load_urdf(path, mimic="independent")
    for q, dq, u in _agree_with_pinocchio(s, PinocchioRobot(s, path, armature=values), seed=5):
        # the armature is on M's diagonal and nowhere else
        M, M0 = (x.lagrangian_derivatives(q, dq).Lvv for x in (s, bare))
        assert np.allclose(M - M0, np.diag([values.get(n, 0.0) for n in s.config_names]), atol=1e-14, rtol=0)
        assert relative_error(s.qdd(q, dq, u), bare.qdd(q, dq, u)) > 1e-4      # (and it matters)


@pytest.mark.parametrize("relative, locked", [
    ("panda_description/urdf/panda.urdf", {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.03}),
    ("talos_data/robots/talos_reduced.urdf", {"arm_left_4_joint": -0.8, "head_1_joint": 0.2,
                                              "leg_right_3_joint": -0.4}),
    ("ur_description/urdf/ur5_robot.urdf", {"wrist_3_joint": 1.0}),
])
def test_locked_joints_match_pinocchio_reduced_model(relative, locked):
    path = robot_path(relative)
    s = core.load_urdf(path, mimic="independent", locked=locked)
    full = core.load_urdf(path, mimic="independent")
    assert s.locked_joints == locked
    assert s.config_names == [n for n in full.config_names if n not in locked]
    assert s.input_names == [n for n in full.input_names if n not in locked]
    assert not set(s.joint_limits) & set(locked)
    for _ in _agree_with_pinocchio(s, PinocchioRobot(s, path, locked=locked), seed=11):
        pass
    # the locked bodies are folded into their parents: no frame of the model carries them
    frames = [s.frame_index(n) for n in s.frame_names if s.model.frame_qindex[s.frame_index(n)] < 0
              and s.model.frame_parent[s.frame_index(n)] >= 0]
    assert all(s.model.frame_mass[f] == 0.0 for f in frames)


def test_locked_panda_gripper_by_default_options():
    """The gripper of the Panda, locked as a user leaves it to its own driver: mimic joints are
    coupled by default, so locking the leader freezes its mimic too; the arm keeps 7
    coordinates and 7 inputs."""
    path = robot_path("panda_description/urdf/panda.urdf")
    s = core.load_urdf(path, locked={"panda_finger_joint1": 0.04})
    assert s.nq == s.nu == 7
    assert s.locked_joints == {"panda_finger_joint1": 0.04, "panda_finger_joint2": 0.04}
    with pytest.raises(core.errors.ModelError, match=r"locked joint 'panda_finger_joint2': it mimics "
                       r"'panda_finger_joint1' \(mimic='couple'\); lock 'panda_finger_joint1'"):
        core.load_urdf(path, locked={"panda_finger_joint2": 0.04})
    with pytest.raises(core.errors.ModelError, match=r"locked joint 'panda_finger_joint1': value 0.5 is outside "
                       r"its limits \[0.0, 0.04\]"):
        core.load_urdf(path, locked={"panda_finger_joint1": 0.5})
    with pytest.raises(core.errors.ModelError, match=r"locked joint 'gripper': unknown joint"):
        core.load_urdf(path, locked={"gripper": 0.0})
    with pytest.raises(core.errors.ModelError, match=r"actuated: joint 'panda_finger_joint1' is locked"):
        core.load_urdf(path, locked={"panda_finger_joint1": 0.0}, actuated=["panda_joint1", "panda_finger_joint1"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert core.load_urdf(path, locked={"panda_finger_joint1": 0.0}, armature=0.1).armature == {
            f"panda_joint{i}": 0.1 for i in range(1, 8)}


def test_urdf_joint_damping_on_request():
    """``joint_damping=True`` applies the files' ``<dynamics damping>`` (viscous, ``-c dq``);
    by default it is kept as data only, as Pinocchio's aba does."""
    path = robot_path("talos_data/robots/talos_reduced.urdf")      # damping on 20 of its 32 joints
    plain = core.load_urdf(path, mimic="independent")
    damped = core.load_urdf(path, mimic="independent", joint_damping=True)
    c = np.array([plain.joint_limits[n]["damping"] for n in plain.config_names])
    assert (c > 0).sum() >= 10
    by_hand = core.load_urdf(path, mimic="independent")
    for name, value in zip(plain.config_names, c, strict=True):
        if value > 0:
            by_hand.add_damping(name, value)
    rng = np.random.default_rng(2)
    q, dq, u = rng.uniform(-1, 1, plain.nq), rng.normal(size=plain.nq), rng.normal(size=plain.nu)
    M = plain.lagrangian_derivatives(q, dq).Lvv
    # M (ddq_damped - ddq_plain) = -c dq, and the same as damping added by hand
    assert np.allclose(M @ (damped.qdd(q, dq, u) - plain.qdd(q, dq, u)), -c * dq, atol=1e-9)
    assert np.array_equal(damped.linearize(q, dq, u)[0], by_hand.linearize(q, dq, u)[0])
