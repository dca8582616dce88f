"""URDF import (:mod:`core.io.urdf`): cross-checks against Pinocchio on real robot files and on
seeded random URDFs, the hand-built equivalent, limits and inputs, the floating base, mimic
joints, and a corpus of malformed files (``tests/urdf_corpus/``).

Pinocchio (``pin``) and ``example-robot-data`` are test-only dependencies (the ``test`` extras):
without them the cross-checks error, they are never skipped.
"""
from __future__ import annotations

import math
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from urdfref import ROBOTS, PinocchioRobot, hand_built, random_urdf, relative_error, robot_path

import core
from core.model.inertia import inertia_violations

from randsys import assert_close, fd

CORPUS = Path(__file__).resolve().parent / "urdf_corpus"
TOL = 1e-8
TWO_LINKS = """<?xml version="1.0"?>
<robot name="two">
  <link name="base"><inertial><mass value="5"/>
    <inertia ixx="0.2" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.3"/></inertial></link>
  <link name="upper"><inertial><origin xyz="0 0 0.2" rpy="0.1 0.2 0.3"/><mass value="2"/>
    <inertia ixx="0.05" ixy="0.001" ixz="0" iyy="0.04" iyz="0.002" izz="0.03"/></inertial></link>
  <link name="tool"><inertial><origin xyz="0.05 0 0"/><mass value="0.5"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>
  <link name="slider"><inertial><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 1" rpy="0 0.3 0"/><axis xyz="1 1 0"/>
    <limit lower="-1.5" upper="2.5" effort="40" velocity="2"/><dynamics damping="0.7"/></joint>
  <joint name="flange" type="fixed"><parent link="upper"/><child link="tool"/>
    <origin xyz="0 0 0.4" rpy="0.5 0 0"/></joint>
  <joint name="rail" type="prismatic"><parent link="tool"/><child link="slider"/>
    <axis xyz="0 0 -1"/><limit lower="0" upper="0.3" effort="100" velocity="0.5"/></joint>
</robot>
"""


def states(system, seed, count=3):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield (rng.uniform(-1.0, 1.0, system.nq), rng.normal(size=system.nq),
               rng.normal(size=system.nu) * 5.0)


def cross_check(system, pin_robot, seed):
    """Largest relative errors of qdd, A and B against Pinocchio over random states."""
    worst = np.zeros(3)
    for q, dq, u in states(system, seed):
        A, B = system.linearize(q, dq, u)
        Ap, Bp = pin_robot.linearize(q, dq, u)
        errors = (relative_error(system.qdd(q, dq, u), pin_robot.qdd(q, dq, u)),
                  relative_error(A, Ap), relative_error(B, Bp))
        worst = np.maximum(worst, errors)
    return worst


# ---------------------------------------------------------------------------------- Pinocchio
@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_robots_match_pinocchio(robot):
    relative, options = ROBOTS[robot]
    path = robot_path(relative)
    system = core.load_urdf(path, **options)
    pin_robot = PinocchioRobot(system, path, floating_base=options.get("floating_base", False))
    worst = cross_check(system, pin_robot, seed=len(robot))
    print(f"{robot}: nq={system.nq}, max relative error qdd {worst[0]:.1e}, A {worst[1]:.1e}, B {worst[2]:.1e}")
    assert worst.max() < TOL, (robot, worst)


@pytest.mark.parametrize("seed", range(6))
def test_random_urdfs_match_pinocchio(seed):
    """Arbitrary axes, rpy origins, rotated inertial frames, fixed-joint chains, continuous and
    prismatic joints, links without inertial, joints listed out of tree order."""
    xml = random_urdf(seed)
    system = core.load_urdf(xml)
    worst = cross_check(system, PinocchioRobot(system, xml), seed)
    assert worst.max() < TOL, worst
    floating = core.load_urdf(xml, floating_base="euler")
    worst = cross_check(floating, PinocchioRobot(floating, xml, floating_base="euler"), seed)
    assert worst.max() < TOL, worst


def test_random_urdfs_cover_every_feature():
    import re
    text = "".join(random_urdf(seed) for seed in range(6))
    for jtype in ("revolute", "continuous", "prismatic", "fixed"):
        assert f'type="{jtype}"' in text
    axes = [np.array(a.split(), float) for a in re.findall(r'<axis xyz="([^"]*)"', text)]
    assert any(np.count_nonzero(a) == 3 for a in axes) and any((a < 0).any() and np.count_nonzero(a) == 1
                                                                for a in axes)
    assert re.search(r'<link name="link\d+"/>', text)


# ---------------------------------------------------------------------------------- structure
@pytest.mark.parametrize("seed", range(3))
def test_merged_model_equals_hand_built_frames(seed):
    """Fixed joints merged, axes folded into offsets and centres of mass as ``com``: the same
    dynamics as the plain frame tree with all the extra frames, with one frame per joint."""
    xml = random_urdf(seed)
    system, plain = core.load_urdf(xml), hand_built(xml)
    assert system.model.nf == system.nq < plain.model.nf
    for q, dq, u in states(system, seed):
        assert_close(system.qdd(q, dq, u), plain.qdd(q, dq, u), "qdd", tol=1e-11)
        for ours, theirs in zip(system.linearize(q, dq, u), plain.linearize(q, dq, u), strict=True):
            assert_close(ours, theirs, "A, B", tol=1e-11)


def test_small_robot_by_hand():
    s = core.load_urdf(TWO_LINKS)
    assert s.config_names == ["shoulder", "rail"] and s.input_names == ["shoulder", "rail"]
    assert s.frame_names == ["upper", "slider"]
    assert s.name == "two"
    # the tool is merged into the upper arm: one body of 2.5 kg
    assert s.model.frame_mass.tolist() == [2.5, 1.0]
    frame, R, p = s.links["tool"]
    assert frame == "upper"
    frame, R, p = s.links["base"]
    assert frame == "world" and np.allclose(R, np.eye(3)) and np.allclose(p, 0)
    lim = s.joint_limits
    assert lim["shoulder"] == {"lower": -1.5, "upper": 2.5, "velocity": 2.0, "effort": 40.0,
                               "damping": 0.7, "friction": 0.0}
    lower, upper = s.position_limits
    assert lower.tolist() == [-1.5, 0.0] and upper.tolist() == [2.5, 0.3]
    assert s.velocity_limits.tolist() == [2.0, 0.5] and s.effort_limits.tolist() == [40.0, 100.0]
    # damping is data only (Pinocchio's aba ignores it too)
    assert s.model.damping.tolist() == [0.0, 0.0]
    # the axis (1, 1, 0) is normalized: q = angle in radians about it
    q = np.array([0.3, 0.1])
    R_upper = s.links["upper"][1]
    from core.tree.kinematics import create_data, forward_kinematics
    data = create_data(s.model)
    forward_kinematics(s.model, q, np.zeros(2), data)
    a = np.array([1.0, 1.0, 0.0]) / math.sqrt(2)
    Ry = np.array([[math.cos(0.3), 0, math.sin(0.3)], [0, 1, 0], [-math.sin(0.3), 0, math.cos(0.3)]])
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    rot = np.eye(3) + math.sin(0.3) * K + (1 - math.cos(0.3)) * K @ K
    assert np.allclose(data.R[0] @ R_upper, Ry @ rot, atol=1e-14)   # the upper link's orientation


def test_continuous_joint_has_no_position_limits():
    s = core.load_urdf(robot_path(ROBOTS["double_pendulum"][0]))
    lower, upper = s.position_limits
    assert np.all(np.isinf(lower)) and np.all(np.isinf(upper))


def test_actuated_selects_inputs_in_coordinate_order():
    s = core.load_urdf(TWO_LINKS, actuated=["rail"])
    assert s.input_names == ["rail"] and s.nu == 1 and s.effort_limits.tolist() == [100.0]
    s = core.load_urdf(TWO_LINKS, actuated=["rail", "shoulder"])
    assert s.input_names == ["shoulder", "rail"]
    assert core.load_urdf(TWO_LINKS, actuated=[]).nu == 0
    with pytest.raises(core.errors.ModelError, match="actuated: unknown joint 'elbow'"):
        core.load_urdf(TWO_LINKS, actuated=["elbow"])
    with pytest.raises(core.errors.ModelError, match="actuated: joint 'flange' is fixed"):
        core.load_urdf(TWO_LINKS, actuated=["flange"])


def test_load_system_dispatches_urdf(tmp_path):
    path = tmp_path / "two.urdf"
    path.write_text(TWO_LINKS)
    for source in (path, str(path), TWO_LINKS, "\n  " + TWO_LINKS):
        s = core.load_system(source)
        assert s.config_names == ["shoulder", "rail"]


def test_real_robots_have_expected_sizes():
    sizes = {"panda": 9, "solo12": 12, "a1": 12, "double_pendulum": 2, "baxter": 19,
             "talos_reduced": 32, "solo12_floating": 18}
    for robot, (relative, options) in ROBOTS.items():
        s = core.load_urdf(robot_path(relative), **options)
        assert s.nq == sizes[robot] and s.model.nf == s.nq     # one frame per coordinate
        assert s.input_names == [n for n in s.config_names if not n.startswith("root_")]
    panda = core.load_urdf(robot_path(ROBOTS["panda"][0]), mimic="independent")
    lim = panda.joint_limits["panda_joint1"]
    assert (lim["lower"], lim["upper"], lim["velocity"], lim["effort"]) == (-2.8973, 2.8973, 2.175, 87.0)


# ---------------------------------------------------------------------------------- floating base
def test_floating_base_coordinates_and_singular_orientation():
    s = core.load_urdf(TWO_LINKS, floating_base="euler")
    assert s.config_names[:6] == ["root_x", "root_y", "root_z", "root_yaw", "root_pitch", "root_roll"]
    assert s.input_names == ["shoulder", "rail"]
    from core.io.urdf import rpy_rotation
    from core.tree.kinematics import create_data, forward_kinematics
    q = np.array([0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.0, 0.0])
    data = create_data(s.model)
    forward_kinematics(s.model, q, np.zeros(8), data)
    base = s.frame_index("base")
    assert np.allclose(data.R[base], rpy_rotation(0.6, -0.5, 0.4), atol=1e-14)   # rpy = (roll, pitch, yaw)
    assert np.allclose(data.p[base], [0.1, -0.2, 0.3], atol=1e-14)
    for pitch in (math.pi / 2, -math.pi / 2):
        q[4] = pitch
        with pytest.raises(core.errors.SingularMatrixError, match="mass matrix"):
            s.qdd(q, np.zeros(8), np.zeros(2))
    q[4] = math.pi / 2 - 0.1
    s.qdd(q, np.zeros(8), np.zeros(2))


def test_floating_base_name_collision():
    xml = TWO_LINKS.replace('"tool"', '"root_pitch"')
    with pytest.raises(core.errors.ModelError, match="root_pitch"):
        core.load_urdf(xml, floating_base="euler")


# ---------------------------------------------------------------------------------- mimic
def test_mimic_independent_and_couple():
    path = robot_path(ROBOTS["panda"][0])
    s = core.load_urdf(path, mimic="independent")
    assert s.config_names[-2:] == ["panda_finger_joint1", "panda_finger_joint2"]
    coupled = core.load_urdf(path)              # mimic="couple", the default (tests/test_mimic.py)
    assert coupled.config_names == s.config_names[:-1]
    assert coupled.mimic_joints == {"panda_finger_joint2": ("panda_finger_joint1", 1.0, 0.0)}
    with pytest.raises(core.errors.ModelError, match="mimic must be"):
        core.load_urdf(path, mimic="ignore")
    core.load_urdf(TWO_LINKS)                   # no mimic joint: couple loads


# ---------------------------------------------------------------------------------- bad files
CORPUS_CASES = {       # malformed files: refused with a message naming the element
    "two_roots": r"more than one root link \['a', 'b'\]",
    "cycle": r"links \['a', 'b'\] are not reachable from the root 'base'.*cycle",
    "cycle_without_root": r"no root link.*cycle",
    "unknown_parent": r"joint 'j1': unknown parent link 'ghost'",
    "unknown_child": r"joint 'j1': unknown child link 'ghost'",
    "duplicate_link": r"duplicate link name 'arm'",
    "duplicate_joint": r"duplicate joint name 'j1'",
    "two_parents": r"joint 'j2': link 'arm' already has parent joint 'j1'",
    "negative_mass": r"link 'arm': mass must be non-negative, got -2.0",
    "nan_origin": r"joint 'j1' origin xyz: must be finite",
    "short_origin": r"joint 'j1' origin xyz: expected 3 numbers",
    "unknown_joint_type": r"joint 'j1': unknown joint type 'hinge'",
    "planar_joint": r"joint 'j1': planar joints inside the tree are not supported",
    "zero_axis": r"joint 'j1': axis must be a non-zero vector",
    "limits_reversed": r"joint 'j1': limit lower 1.0 exceeds upper -1.0",
    "not_a_robot": r"root element must be <robot>, got <model>",
    "not_well_formed": r"not well-formed XML",
    "billion_laughs": r"entity declarations are refused",
    "external_entity": r"entity declarations are refused",
    "transmission_unknown_joint": (r"transmission 't1': unknown joint 'ghost'", {"actuated": "transmissions"}),
}
CORPUS_LOADS = {       # files that load with default options: (coordinates, warning or None)
    "triangle_inertia": (1, r"link 'arm': inertia is not physical: principal moments \[0.1, 0.1, 5\] violate "
                            r"the triangle inequality"),
    "non_pd_inertia": (1, r"link 'arm': inertia is not physical: principal moments \[-0.4, 0.1, 0.6\] are "
                          r"not all non-negative"),
    "mimic_unknown_joint": (2, r"joint 'j2': mimics unknown joint 'ghost'; the mimic is ignored"),
    "roundoff_inertia": (2, None),
    "world_undeclared": (1, None),
    "world_welded_inertia": (1, None),
    "single_link": (0, None),
    "transmissions": (3, None),
    "tool_tags": (1, None),
    "massless_link": (2, None),
}


def test_corpus_is_complete():
    assert sorted(p.stem for p in CORPUS.glob("*.urdf")) == sorted(CORPUS_CASES | CORPUS_LOADS)
    assert len(CORPUS_CASES) + 1 >= 15      # + the 10 MB file, made by test_size_limit


@pytest.mark.parametrize("name", sorted(CORPUS_CASES))
def test_malformed_urdf_is_refused(name):
    path = CORPUS / f"{name}.urdf"
    match, options = CORPUS_CASES[name] if isinstance(CORPUS_CASES[name], tuple) else (CORPUS_CASES[name], {})
    start = time.perf_counter()
    for source in (path, path.read_text()):             # a file and /robot_description text
        with pytest.raises(core.errors.ModelError, match=match):
            core.load_urdf(source, mimic="independent", **options)
    if not options:
        with pytest.raises(core.errors.ModelError, match=match):
            core.load_system(path)
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("name", sorted(CORPUS_LOADS))
def test_corpus_file_loads_with_its_outcome(name):
    """Every file of the second kind loads with the default options, warning exactly when the
    file has a defect beyond round-off (one warning per defect), and evaluates."""
    path = CORPUS / f"{name}.urdf"
    nq, warning = CORPUS_LOADS[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = core.load_urdf(path)
    messages = [str(w.message) for w in caught if issubclass(w.category, core.errors.ModelWarning)]
    if warning is None:
        assert messages == []
    else:
        assert len(messages) == 1 and re.search(warning, messages[0]), messages
    assert s.nq == nq
    if name != "massless_link":
        assert np.all(np.isfinite(s.linearize(np.full(nq, 0.3), np.full(nq, 0.2), np.ones(s.nu))[0]))


def test_inertia_policy_strict_refuses_and_repair_fixes():
    for name in ("triangle_inertia", "non_pd_inertia"):
        path = CORPUS / f"{name}.urdf"
        with pytest.raises(core.errors.ModelError, match=r"link 'arm': inertia is not physical.*inertia='strict'"):
            core.load_urdf(path, inertia="strict")
        with pytest.warns(core.errors.InertiaWarning, match=r"repaired to the nearest physical inertia"):
            s = core.load_urdf(path, inertia="repair")
        I = s.model.frame_inertia[s.frame_index("arm")]
        assert inertia_violations(I) == []
    # the silent classes stay silent under 'strict': round-off, a link welded to the world
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("roundoff_inertia", "world_welded_inertia"):
            core.load_urdf(CORPUS / f"{name}.urdf", inertia="strict")
    with pytest.raises(core.errors.ModelError, match="inertia: the policy must be one of 'warn', 'strict', 'repair'"):
        core.load_urdf(CORPUS / "single_link.urdf", inertia="lenient")


def test_world_conventions():
    """An undeclared 'world' parent is the world frame: the same robot as with <link
    name="world"/> declared; a link welded to the world contributes nothing."""
    text = (CORPUS / "world_undeclared.urdf").read_text()
    declared = core.load_urdf(text.replace('<link name="base">', '<link name="world"/><link name="base">'))
    undeclared = core.load_urdf(text)
    welded = core.load_urdf(CORPUS / "world_welded_inertia.urdf")
    q, dq, u = np.array([0.4]), np.array([-0.3]), np.array([1.5])
    for s in (undeclared, welded):
        assert s.config_names == ["shoulder"]
        assert_close(s.linearize(q, dq, u)[0], declared.linearize(q, dq, u)[0], "A", 1e-14)
    assert undeclared.links["base"][0] == "world"
    with pytest.raises(core.errors.ModelError, match="the root link is 'world'"):
        core.load_urdf(text, floating_base="euler")


def test_single_link_is_a_fixed_or_floating_body():
    s = core.load_urdf(CORPUS / "single_link.urdf")
    assert (s.nq, s.nu, s.config_names) == (0, 0, [])
    A, B = s.linearize(np.zeros(0), np.zeros(0))
    assert A.shape == (0, 0) and B.shape == (0, 0) and s.qdd(np.zeros(0), np.zeros(0)).shape == (0,)
    floating = core.load_urdf(CORPUS / "single_link.urdf", floating_base="euler")
    assert floating.nq == 6
    ddq = floating.qdd(np.zeros(6), np.zeros(6))
    assert_close(ddq, [0, 0, -9.81, 0, 0, 0], "free fall", 1e-14)       # it falls


def test_transmissions_select_the_actuated_joints():
    path = CORPUS / "transmissions.urdf"
    s = core.load_urdf(path, actuated="transmissions")
    assert s.config_names == ["shoulder", "elbow", "wrist"]
    assert s.input_names == ["shoulder", "elbow"]               # coordinate order
    assert core.load_urdf(path).input_names == ["shoulder", "elbow", "wrist"]
    with pytest.raises(core.errors.ModelError, match="the file has no <transmission> element"):
        core.load_urdf(CORPUS / "single_link.urdf", actuated="transmissions")
    with pytest.raises(core.errors.ModelError, match="expected a list of joint names or 'transmissions'"):
        core.load_urdf(path, actuated="all")


def test_other_tools_tags_change_nothing():
    tagged = (CORPUS / "tool_tags.urdf").read_text()
    plain = re.sub(r"<(gazebo|ros2_control|drake:collision_filter_group)\b.*?</\1>", "", tagged, flags=re.S)
    plain = re.sub(r"<(safety_controller|calibration|drake:rotor_inertia|drake:proximity_properties)\b[^>]*/>",
                   "", plain)
    assert "<gazebo" not in plain and "<safety" not in plain and "<drake:rotor" not in plain
    a, b = core.load_urdf(tagged), core.load_urdf(plain)
    q, dq, u = np.array([0.7]), np.array([0.2]), np.array([-3.0])
    assert a.config_names == b.config_names and a.input_names == b.input_names
    assert_close(a.linearize(q, dq, u)[1], b.linearize(q, dq, u)[1], "B", 0.0)


def test_massless_link_names_the_variable_and_loads_with_armature_or_lock():
    path = CORPUS / "massless_link.urdf"
    s = core.load_urdf(path)
    q, dq, u = np.array([0.3, 0.2]), np.array([0.1, -0.4]), np.array([1.0, 0.05])
    for call in (s.qdd, s.linearize):
        with pytest.raises(core.errors.SingularMatrixError,
                           match=r"singular at variable 1 \('finger'\).*armature.*lock"):
            call(q, dq, u)
    with_armature = core.load_urdf(path, armature={"finger": 0.01})
    assert np.all(np.isfinite(with_armature.linearize(q, dq, u)[0]))
    # the finger's own equation: 0.01 ddq = u (nothing else acts on a massless link)
    assert_close(with_armature.qdd(q, dq, u)[1], 0.05 / 0.01, "finger", 1e-12)
    locked = core.load_urdf(path, locked={"finger": 0.5})
    assert locked.config_names == ["shoulder"] and locked.input_names == ["shoulder"]
    assert np.all(np.isfinite(locked.qdd(q[:1], dq[:1], u[:1])))


def test_size_limit(tmp_path):
    """A 10 MB document is refused before it is parsed (file and text)."""
    path = tmp_path / "huge.urdf"
    filler = "<!-- " + "x" * 1000 + " -->\n"
    text = '<?xml version="1.0"?>\n<robot name="huge">\n' + filler * 10_000 + '<link name="base"/>\n</robot>\n'
    path.write_text(text)
    assert path.stat().st_size > 10_000_000
    with pytest.raises(core.errors.ModelError, match="exceeds the size limit of 5000000 bytes"):
        core.load_urdf(path)
    with pytest.raises(core.errors.ModelError, match="exceeds the size limit"):
        core.load_urdf(text)
    assert core.load_urdf(path, max_bytes=20_000_000).nq == 0     # parsed: a robot without joints


def test_not_a_source():
    with pytest.raises(core.errors.ModelError, match="cannot read"):
        core.load_urdf("/nonexistent/robot.urdf")
    with pytest.raises(core.errors.ModelError, match="expected a file path or URDF XML text"):
        core.load_urdf(42)


# ---------------------------------------------------------------------------------- derivatives
def test_linearization_matches_finite_differences():
    """On a URDF robot with offset centres of mass, fixed joints and arbitrary axes, independent
    of Pinocchio."""
    s = core.load_urdf(random_urdf(7), floating_base="euler")
    q, dq, u = next(states(s, 7))
    n = s.nq
    A, B = s.linearize(q, dq, u)
    assert_close(A[n:, :n], fd(lambda x: s.qdd(x, dq, u), q), "d qdd / dq")
    assert_close(A[n:, n:], fd(lambda x: s.qdd(q, x, u), dq), "d qdd / d dq")
    assert_close(B[n:], fd(lambda x: s.qdd(q, dq, x), u), "d qdd / du")


def test_mutated_files_load_or_fail_clearly():
    """Seeded random damage to real and random robots (garbage or missing attributes, removed or
    renamed elements): each file loads or raises ModelError, nothing else."""
    import random
    from xml.etree import ElementTree as ET
    sources = [robot_path(ROBOTS["panda"][0]), robot_path(ROBOTS["a1"][0])]
    texts = [Path(p).read_text() for p in sources] + [random_urdf(0), TWO_LINKS]
    garbage = ["", "abc", "1e999", "-1e999", "nan", "-1", "0", "1 2", "1 2 3 4", "inf inf inf",
               "0 0 0", "world", "1,2,3"]
    rng = random.Random(0)
    outcomes = {"loaded": 0, "refused": 0}
    for trial in range(400):
        root = ET.fromstring(texts[trial % len(texts)])
        elements = list(root.iter())
        for _ in range(rng.randint(1, 3)):
            el = rng.choice(elements)
            op = rng.random()
            if op < 0.4 and el.attrib:
                el.set(rng.choice(sorted(el.attrib)), rng.choice(garbage))
            elif op < 0.6 and el.attrib:
                del el.attrib[rng.choice(sorted(el.attrib))]
            elif op < 0.8:
                for parent in root.iter():
                    if el in list(parent):
                        parent.remove(el)
                        break
            else:
                el.tag = rng.choice(["link", "joint", "foo", "inertial", "origin"])
        try:
            core.load_urdf(ET.tostring(root, encoding="unicode"), mimic="independent")
            outcomes["loaded"] += 1
        except core.errors.ModelError:
            outcomes["refused"] += 1
    assert min(outcomes.values()) > 50, outcomes
