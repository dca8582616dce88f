"""Model building: YAML / dict / path loading, ordering rules, and named errors."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

import core
from core.errors import ModelError, SingularMatrixError

from randsys import Reference, assert_close, build_system, random_system

Q = np.array([0.5, 1.0])
DQ = np.array([1.0, -2.0])
U = np.array([2.0])


def body(name, parent="world", **kw):
    """A frame with a full body, so that its variable moves mass."""
    return dict(name=name, parent=parent, mass=1.0, inertia=[0.1, 0.2, 0.3], **kw)


# ---------------------------------------------------------------------------------- loading
def _same(s1, s2):
    A1, B1 = s1.linearize(Q, DQ, U, residual_limit=None)     # (Q is off the constraint)
    A2, B2 = s2.linearize(Q, DQ, U, residual_limit=None)
    np.testing.assert_array_equal(A1, A2)
    np.testing.assert_array_equal(B1, B2)


def test_minimal_example_builds_with_documented_order(double_pendulum_yaml):
    s = core.load_system(double_pendulum_yaml)
    assert isinstance(s, core.System)
    assert s.config_names == ["theta1", "theta2"]
    assert s.input_names == ["theta1"]
    assert s.state_names == ["theta1", "theta2", "dtheta1", "dtheta2"]
    assert s.nq == 2 and s.nu == 1 and s.model.nh == 1
    assert s.frame_names == ["link1", "A", "link2", "B", "C"]
    np.testing.assert_array_equal(s.model.gravity, [0, -9.8, 0])


def test_yaml_string_dict_and_path_agree(double_pendulum_yaml, double_pendulum_spec, double_pendulum_path):
    path = double_pendulum_path
    from_yaml = core.load_system(double_pendulum_yaml)
    for other in (core.load_system(double_pendulum_spec), core.load_system(str(path)), core.load_system(path)):
        assert other.config_names == ["theta1", "theta2"]
        assert other.input_names == ["theta1"]
        _same(from_yaml, other)


def test_read_model_is_the_one_resolver_of_model_arguments(tmp_path, monkeypatch):
    """core.read_model: text as it is, else a file (as given, then packaged with core), bounded
    before anything is read; URDF by extension or a leading '<'. load_system, the CLI and the
    node resolve through it."""
    import os

    from core.io.loader import MAX_MODEL_BYTES
    packaged = core.read_model("cartpole.yaml")
    assert (packaged.path, packaged.origin, packaged.urdf) == (core.data.model_file("cartpole.yaml"),) * 2 + (False,)
    assert core.read_model("arm7.urdf").urdf
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cartpole.yaml").write_text("name: mine\nframes: [{name: a, rz: t, mass: 1.0}]\n")
    mine = core.read_model("cartpole.yaml")           # the working directory's file first
    assert mine.path == str(tmp_path / "cartpole.yaml") and core.load_system("cartpole.yaml").name == "mine"
    text = core.read_model(mine.text)
    assert (text.text, text.path, text.urdf) == (mine.text, None, False)
    assert text.origin == f"YAML text ({len(mine.text)} characters)"
    urdf = core.read_model(open(core.data.model_file("arm7.urdf")).read())
    assert urdf.urdf and urdf.origin.startswith("URDF text (")
    for bad in ("no_such.yaml", "python:os.system('true')", "just words"):
        with pytest.raises(ModelError, match=r"neither a model file \(looked in .*\) nor model text"):
            core.read_model(bad)
    for bad in ("", "   ", None, 3):
        with pytest.raises(ModelError, match="a model is a file name or model text"):
            core.read_model(bad)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:                       # a sparse file: refused by its size, unread
        fh.truncate(MAX_MODEL_BYTES + 1)
    with pytest.raises(ModelError, match=f"model file {big} has {MAX_MODEL_BYTES + 1} bytes, more than"):
        core.read_model(str(big))
    with pytest.raises(ModelError, match="the model text has"):
        core.read_model("a: 1\n" + " " * MAX_MODEL_BYTES)
    assert os.path.getsize(big) == MAX_MODEL_BYTES + 1


def test_load_system_locks_and_keeps_urdf_options_to_urdf(double_pendulum_yaml):
    s = core.load_system(double_pendulum_yaml)
    locked = core.load_system(double_pendulum_yaml, locked={s.config_names[1]: 0.2})
    assert locked.config_names == s.config_names[:1]
    own = double_pendulum_yaml + f"locked: {{{s.config_names[1]}: 0.3}}\n"
    assert core.load_system(own, locked={s.config_names[1]: 0.3}).config_names == s.config_names[:1]
    with pytest.raises(ModelError, match=r"^model YAML text .*locked at other values than the model's own"):
        core.load_system(own, locked={s.config_names[1]: 0.2})
    with pytest.raises(ModelError, match="floating_base: options of a URDF model"):
        core.load_system(double_pendulum_yaml, floating_base=True)
    arm = core.load_system("arm7.urdf", floating_base="euler")
    assert arm.nq == core.load_system("arm7.urdf").nq + 6


def test_load_system_does_not_modify_the_dict(double_pendulum_spec):
    import copy
    spec = copy.deepcopy(double_pendulum_spec)
    core.load_system(spec)
    assert spec == double_pendulum_spec


def test_python_api_and_dict_agree_on_random_systems():
    for seed in range(4):
        s, q, dq, u = random_system(seed)
        other = build_system(s.spec, use_api=not (seed % 2 == 1))
        assert other.config_names == s.config_names and other.input_names == s.input_names
        np.testing.assert_array_equal(s.qdd(q, dq, u), other.qdd(q, dq, u))


def test_yaml_damping_as_mapping_and_springs():
    s = core.load_system("""
gravity: [0, 0, -9.81]
frames:
  - {name: cart, tx: x, mass: 2.0}
  - {name: pole, parent: cart, ry: th, mass: 0.5, inertia: [0.01, 0.01, 0.01]}
damping: {x: 0.3, th: 0.1}
springs:
  - {type: config, config: x, stiffness: 4.0, rest: 0.5}
inputs:
  - {type: torque, config: x}
""")
    np.testing.assert_array_equal(s.model.damping, [0.3, 0.1])
    np.testing.assert_array_equal(s.model.spring_coef, [[0.0, 4.0]])
    # damping enters the accelerations: d qdd / d dq changes with it
    A, _ = s.linearize([0.1, 0.2], [0.0, 0.0], [0.0])
    M = s.lagrangian_derivatives([0.1, 0.2], [0.0, 0.0]).Lvv
    np.testing.assert_allclose(A[2:, 2:], -np.linalg.solve(M, np.diag([0.3, 0.1])), atol=1e-12)


def test_changes_after_compilation_recompile(double_pendulum_spec):
    s = core.load_system(double_pendulum_spec)
    assert s.nq == 2
    s.add_frame("D", parent="B", rx="theta3", mass=1.0, inertia=[1, 1, 1])
    assert s.config_names == ["theta1", "theta2", "theta3"]
    assert s.linearize(np.zeros(3), np.zeros(3), U, residual_limit=None)[0].shape == (6, 6)
    assert not s.model.frame_mass.flags.writeable


# ---------------------------------------------------------------------------------- ordering
def test_config_order_is_first_appearance_in_frames_not_tree_order():
    s = core.load_system({"frames": [
        body("b", parent="a", rx="beta"),
        body("c", parent="world", tz="gamma"),
        body("a", parent="world", rz="alpha"),
    ]})
    assert s.config_names == ["beta", "gamma", "alpha"]
    # the tree is still evaluated parents first
    names = s.frame_names
    assert names.index("a") < names.index("b")


def test_declaration_order_only_permutes_variables():
    """Shuffling the frame list of a random system permutes q and nothing else."""
    for seed in (3, 5, 8):
        s, q, dq, u = random_system(seed, constraints=0, velocity_constraints=0)
        spec = dict(s.spec)
        frames = list(spec["frames"])
        random.Random(seed).shuffle(frames)
        spec["frames"] = frames
        t = build_system(spec)
        ref = Reference(spec)
        assert t.config_names == ref.config_names
        assert sorted(t.config_names) == sorted(s.config_names)
        perm = [s.config_names.index(n) for n in t.config_names]
        assert perm != list(range(len(perm))) or len(perm) == 1
        np.testing.assert_allclose(t.qdd(q[perm], dq[perm], u), s.qdd(q, dq, u)[perm], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(t.energy(q[perm], dq[perm]), s.energy(q, dq), rtol=1e-12)
        # the linearization too (the tree Cholesky of M walks the variables parents-first)
        At, Bt = t.linearize(q[perm], dq[perm], u)
        As, Bs = s.linearize(q, dq, u)
        xperm = perm + [len(perm) + i for i in perm]
        np.testing.assert_allclose(At, As[np.ix_(xperm, xperm)], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(Bt, Bs[xperm], rtol=1e-9, atol=1e-9)


def test_input_order_and_wrench_expansion():
    s = core.load_system({"frames": [body("a", rz="th"), body("b", parent="a", tx="x")],
                          "inputs": [{"type": "force", "frame": "b", "axis": "y"},
                                     {"type": "wrench", "frame": "a"},
                                     {"type": "torque", "config": "x"},
                                     {"type": "moment", "frame": "b", "axis": "z", "name": "spin"},
                                     {"type": "wrench", "frame": "b", "name": "tool"}]})
    assert s.input_names == ["b.fy", "a.fx", "a.fy", "a.fz", "a.mx", "a.my", "a.mz", "x", "spin",
                             "tool.fx", "tool.fy", "tool.fz", "tool.mx", "tool.my", "tool.mz"]
    assert s.nu == 15
    # each input acts where it says: compare B with the virtual-work reference
    q, dq = np.array([0.3, 0.7]), np.zeros(2)
    _, B = s.linearize(q, dq, np.zeros(15))
    M = s.lagrangian_derivatives(q, dq).Lvv
    ref = Reference({"frames": [body("a", rz="th"), body("b", parent="a", tx="x")],
                     "inputs": [{"type": "force", "frame": "b", "axis": "y"},
                                {"type": "wrench", "frame": "a"}, {"type": "torque", "config": "x"},
                                {"type": "moment", "frame": "b", "axis": "z"}, {"type": "wrench", "frame": "b"}]})
    Fu = np.column_stack([ref.generalized_force(q, dq, e) for e in np.eye(15)])
    np.testing.assert_allclose(B[2:], np.linalg.solve(M, Fu), atol=1e-12)


def test_constraint_row_order():
    """Rows as listed; coincide expands per axis in the given order; velocity rows come after all
    holonomic rows even when listed between them."""
    s = core.load_system({"gravity": [1.0, 2.0, -9.81], "frames": [
        body("a", tx="x"), body("b", parent="a", ty="y"), body("c", parent="b", tz="z"),
        body("d", parent="c", rz="w"), {"name": "e", "parent": "d", "tx": 0.5},
        {"name": "anchor", "offset": {"translation": [1, 2, 3]}}],
        "constraints": [{"type": "coincide", "frame1": "c", "frame2": "anchor", "axes": ["z", "x"]},
                        {"type": "velocity", "frame": "e", "axis": "y"},
                        {"type": "plane", "frame": "c", "normal": "y", "offset": 0.5}]})
    q = np.array([0.1, 0.2, 0.3, 0.0])
    h, Dh = s.constraint(q, order=1)
    np.testing.assert_allclose(h, [0.3 - 3, 0.1 - 1, 0.2 - 0.5], atol=1e-14)
    np.testing.assert_allclose(Dh, [[0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]], atol=1e-14)
    assert s.model.nh == 3 and s.model.nv == 1
    # at rest the four rows A = [ez; ex; ey; (0, 1, 0, 0.5)] hold the gravity load
    # Lq = (4 gx, 3 gy, 2 gz, 0) (masses a..d): A^T lam = -Lq
    lam = s.constraint_forces(q, np.zeros(4))
    np.testing.assert_allclose(lam, [2 * 9.81, -4.0, -6.0, 0.0], atol=1e-10)
    np.testing.assert_allclose(s.qdd(q, np.zeros(4)), np.zeros(4), atol=1e-10)


def test_constraint_defaults():
    """coincide without axes: x, y, z; plane: world plane frame, normal z, offset 0."""
    s = core.load_system({"frames": [body("a", tx="x"), body("b", parent="a", ty="y"),
                                     body("c", parent="b", tz="z", offset={"translation": [0.5, 0, 0]}),
                                     {"name": "post", "tx": 1.0}],
                          "constraints": [{"type": "coincide", "frame1": "c", "frame2": "post"},
                                          {"type": "plane", "frame": "b"}]})
    q = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(s.constraint(q), [0.6 - 1.0, 0.2, 0.3, 0.0], atol=1e-14)
    assert s.model.nh == 4


# ---------------------------------------------------------------------------------- model errors
def _frames(*extra):
    return [body("a", rz="th"), body("b", parent="a", ty=-1.0)] + list(extra)


MODEL_ERRORS = {
    "unknown parent": ({"frames": _frames(body("c", parent="nowhere", rx="phi"))}, ["'c'", "nowhere"]),
    "cycle": ({"frames": [body("pA", parent="rB", rz="x"), body("rB", parent="pA")]}, ["cycle", "pA", "rB"]),
    "long cycle": ({"frames": [body("root", rz="x"), body("pA", parent="sC"), body("rB", parent="pA"),
                               body("sC", parent="rB")]}, ["cycle", "pA", "rB", "sC"]),
    "duplicate name": ({"frames": _frames(body("b", parent="a", tx=1.0))}, ["'b'", "duplicate"]),
    "world name": ({"frames": _frames(body("world", parent="a"))}, ["world"]),
    "two transforms": ({"frames": _frames(body("c", parent="b", rz="phi", tx=0.5))}, ["'c'", "rz", "tx"]),
    "unknown transform key": ({"frames": _frames(body("c", parent="b", rw="phi"))}, ["'c'", "rw"]),
    "constraint on unknown frame": ({"frames": _frames(), "constraints": [
        {"type": "distance", "frame1": "b", "frame2": "ghost", "distance": 1.0}]}, ["ghost", "constraint 0"]),
    "plane on unknown frame": ({"frames": _frames(), "constraints": [
        {"type": "distance", "frame1": "b", "frame2": "world", "distance": 1.0},
        {"type": "plane", "frame": "b", "plane_frame": "floor"}]}, ["floor", "constraint 1"]),
    "velocity constraint on unknown frame": ({"frames": _frames(), "constraints": [
        {"type": "velocity", "frame": "skate", "axis": "x"}]}, ["skate"]),
    "unknown constraint type": ({"frames": _frames(), "constraints": [{"type": "weld", "frame1": "b"}]},
                                ["weld"]),
    "unknown constraint key": ({"frames": _frames(), "constraints": [
        {"type": "distance", "frame1": "b", "frame2": "world", "distance": 1.0, "lenght": 2}]}, ["lenght"]),
    "bad axis": ({"frames": _frames(), "constraints": [
        {"type": "coincide", "frame1": "b", "frame2": "world", "axes": ["x", "w"]}]}, ["'w'"]),
    "torque on unknown variable": ({"frames": _frames(), "inputs": [{"type": "torque", "config": "psi"}]},
                                   ["psi", "input 0"]),
    "force on unknown frame": ({"frames": _frames(), "inputs": [
        {"type": "torque", "config": "th"}, {"type": "force", "frame": "hand", "axis": "x"}]}, ["hand", "input 1"]),
    "config spring on unknown variable": ({"frames": _frames(), "springs": [
        {"type": "config", "config": "psi", "stiffness": 1.0}]}, ["psi", "spring 0"]),
    "frame spring on unknown frame": ({"frames": _frames(), "springs": [
        {"type": "frames", "frame1": "b", "frame2": "hook", "stiffness": 1.0}]}, ["hook", "spring 0"]),
    "damping on unknown variable": ({"frames": _frames(), "damping": [{"config": "psi", "coefficient": 0.1}]},
                                    ["psi", "damping"]),
    "variable drives two frames": ({"frames": _frames(body("c", parent="b", rx="th"))}, ["'th'", "'c'", "'a'"]),
    "negative mass": ({"frames": _frames(dict(name="c", parent="b", rx="phi", mass=-0.5))}, ["'c'", "mass"]),
    "non-symmetric inertia": ({"frames": _frames(dict(name="c", parent="b", rx="phi", mass=1.0,
                                                      inertia=[[1, 0.2, 0], [0, 1, 0], [0, 0, 1]]))},
                              ["'c'", "symmetric"]),
    "rotation of wrong shape": ({"frames": _frames(dict(name="c", parent="b", rx="phi", mass=1.0,
                                                        offset={"rotation": [0.1, 0.2]}))}, ["'c'", "rotation"]),
    "non-orthogonal rotation": ({"frames": _frames(dict(name="c", parent="b", rx="phi", mass=1.0, offset={
        "rotation": [[1, 0.1, 0], [0, 1, 0], [0, 0, 1]]}))}, ["'c'", "rotation"]),
    "reflection": ({"frames": _frames(dict(name="c", parent="b", rx="phi", mass=1.0, offset={
        "rotation": [[1, 0, 0], [0, 1, 0], [0, 0, -1]]}))}, ["'c'", "rotation"]),
    "offset with unknown key": ({"frames": _frames(dict(name="c", parent="b", rx="phi", mass=1.0,
                                                        offset={"translaton": [0, 0, 1]}))}, ["'c'", "offset"]),
    "bad offset translation": ({"frames": _frames(dict(name="c", parent="b", rx="phi", mass=1.0,
                                                       offset={"translation": [0, 1]}))}, ["'c'", "translation"]),
    "non-numeric transform": ({"frames": _frames(body("c", parent="b", tx=[1, 2]))}, ["'c'"]),
    "duplicate input names": ({"frames": _frames(), "inputs": [{"type": "torque", "config": "th"},
                                                               {"type": "torque", "config": "th"}]}, ["th"]),
    "unknown top-level key": ({"frames": _frames(), "joints": []}, ["joints"]),
    "bad gravity": ({"frames": _frames(), "gravity": [0, -9.8]}, ["gravity"]),
    "missing distance": ({"frames": _frames(), "constraints": [
        {"type": "distance", "frame1": "b", "frame2": "world"}]}, ["distance"]),
}


def test_inertia_policy_for_yaml_and_python():
    """The policy of :mod:`core.model.inertia` for YAML/dict and Python models: round-off loads
    silently, a defect warns (default), is refused (strict) or repaired (repair)."""
    from core.model.inertia import inertia_violations, nearest_physical
    bad = {"frames": _frames(dict(name="c", parent="b", rx="phi", mass=1.0, inertia=[1.0, -1.0, 1.0]))}
    with pytest.warns(core.errors.InertiaWarning, match=r"frame 'c'.inertia: inertia is not physical: principal "
                      r"moments \[-1, 1, 1\] are not all non-negative.*loaded as written"):
        s = core.load_system(bad)
    assert_close(s.model.frame_inertia[s.frame_index("c")], np.diag([1.0, -1.0, 1.0]), "as written", 0.0)
    with pytest.raises(ModelError, match=r"frame 'c'.inertia: inertia is not physical.*triangle"):
        core.load_system(bad, inertia="strict")
    with pytest.warns(core.errors.InertiaWarning, match=r"repaired .* principal moments \[0, 1, 1\]"):
        s = core.load_system(bad, inertia="repair")
    assert_close(s.model.frame_inertia[s.frame_index("c")], np.diag([1.0, 0.0, 1.0]), "repaired", 1e-15)
    # Python, the same policy; round-off is silent whatever the policy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        built = core.System(inertia="strict")
        built.add_frame("rod", rz="q", mass=1.0, inertia=[1.0, 1.0, 2.0 + 1e-7])      # 5e-8 of 2: round-off
        built.add_frame("point", parent="rod", mass=2.0, inertia=[[0, 0, 2.4e-35], [0, 0, 0], [2.4e-35, 0, 0]])
    with pytest.raises(ModelError, match=r"frame 'plate'.inertia.*triangle inequality"):
        built.add_frame("plate", parent="rod", rx="r", mass=1.0, inertia=[1.0, 1.0, 2.01])
    with pytest.raises(ModelError, match="the policy must be one of"):
        core.System(inertia="ignore")
    # the repair is the nearest physical inertia: no physical inertia on a grid around it is nearer
    rng = np.random.default_rng(3)
    for _ in range(20):
        X = rng.normal(size=(3, 3))
        I = X + X.T
        J = nearest_physical(I)
        assert inertia_violations(J) == []
        Q = np.linalg.eigh(I)[1]
        for _ in range(200):
            m = np.sort(rng.uniform(0, 3, 3))
            if m[2] <= m[0] + m[1]:
                other = (Q * m) @ Q.T
                assert np.linalg.norm(I - J) <= np.linalg.norm(I - other) + 1e-12


@pytest.mark.parametrize("label", list(MODEL_ERRORS))
def test_model_errors_name_the_offending_element(label):
    spec, words = MODEL_ERRORS[label]
    with pytest.raises(ModelError) as info:
        core.load_system(spec)
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{label}: {w!r} not in message {msg!r}"


def test_errors_through_the_python_api():
    s = core.System()
    s.add_frame("a", rz="th", mass=1.0, inertia=[1, 1, 1])
    with pytest.raises(ModelError, match="'a'.*duplicate|duplicate.*'a'"):
        s.add_frame("a", parent="world")
    with pytest.raises(ModelError, match="'th'"):
        s.add_frame("b", parent="a", ry="th")
    with pytest.raises(ModelError, match="'c'.*mass"):
        s.add_frame("c", parent="a", mass=-1.0)
    with pytest.raises(ModelError, match="'c'"):
        s.add_frame("c", parent="a", rx="phi", ty=1.0)
    with pytest.raises(ModelError, match="bogus"):
        s.add_frame("c", parent="a", bogus="phi")
    # unknown parent and unknown references are found when the model is compiled
    s.add_frame("d", parent="nowhere", tx="x", mass=1.0)
    with pytest.raises(ModelError, match="nowhere"):
        s.qdd([0, 0], [0, 0])
    s2 = core.System()
    s2.add_frame("a", rz="th", mass=1.0, inertia=[1, 1, 1])
    s2.add_input("torque", config="psi")
    with pytest.raises(ModelError, match="psi"):
        s2.linearize([0.0], [0.0], [0.0])
    s3 = core.System()
    s3.add_frame("a", rz="th", mass=1.0, inertia=[1, 1, 1])
    s3.add_damping("psi", 0.1)
    with pytest.raises(ModelError, match="psi"):
        _ = s3.model
    with pytest.raises(ModelError):
        s3.add_damping("th", -1.0)
    with pytest.raises(ModelError, match="hinge"):
        s3.add_constraint("hinge", frame1="a")
    with pytest.raises(ModelError, match="pulley"):
        s3.add_input("pulley", config="th")
    with pytest.raises(ModelError):
        core.System(gravity=[0.0, float("nan"), -9.8])


def test_unreadable_sources():
    with pytest.raises(ModelError, match="no_such_file"):
        core.load_system("no_such_file.yaml")
    with pytest.raises(ModelError):
        core.load_system("- just\n- a list\n")
    with pytest.raises(ModelError, match="frames"):
        core.load_system({"frames": {"name": "a"}})


# ---------------------------------------------------------------------------------- numeric inputs
@pytest.mark.parametrize("method", ["qdd", "linearize", "constraint_forces"])
def test_wrong_sizes_and_non_finite_entries(double_pendulum, method):
    f = getattr(double_pendulum, method)
    with pytest.raises(ValueError, match=r"\bq\b.*2"):
        f(np.zeros(3), DQ, U)
    with pytest.raises(ValueError, match=r"\bdq\b.*2"):
        f(Q, np.zeros(1), U)
    with pytest.raises(ValueError, match=r"\bu\b.*1"):
        f(Q, DQ, np.zeros(2))
    with pytest.raises(ValueError, match=r"\bq\b"):
        f(np.zeros((2, 1)), DQ, U)
    with pytest.raises(ValueError, match=r"q\[1\].*theta2"):
        f([0.5, np.nan], DQ, U)
    with pytest.raises(ValueError, match=r"dq\[1\].*theta2"):   # float64 arrays: found in the kernel
        f(Q, np.array([0.0, -np.inf]), U)
    with pytest.raises(ValueError, match=r"dq\[0\].*theta1"):
        f(Q, [np.inf, 0.0], U)
    with pytest.raises(ValueError, match=r"u\[0\].*theta1"):
        f(Q, DQ, [np.nan])
    # None means zero input
    np.testing.assert_array_equal(double_pendulum.qdd(Q, DQ), double_pendulum.qdd(Q, DQ, [0.0]))


def test_other_numeric_entry_points_check_their_vectors(double_pendulum):
    with pytest.raises(ValueError, match=r"\bq\b"):
        double_pendulum.constraint([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"dq\[1\]"):
        double_pendulum.energy(Q, [0.0, np.nan])
    with pytest.raises(ValueError):
        double_pendulum.momentum(Q, [0.0])
    with pytest.raises(ValueError):
        double_pendulum.lagrangian_derivatives(Q, DQ, order=4)


@pytest.mark.parametrize("order", [-1, 3, 4])
def test_constraint_rejects_an_invalid_order(double_pendulum, order):
    """Like ``lagrangian_derivatives`` (which raises ValueError for order 4), ``constraint``
    documents orders 0, 1, 2 only; it silently returns ``()`` for -1 and a 3-tuple for 3 or 4."""
    with pytest.raises(ValueError, match="order"):
        double_pendulum.constraint(Q, order=order)


# ---------------------------------------------------------------------------------- singular matrices
def test_variable_that_moves_no_mass_is_named():
    s = core.load_system({"frames": [body("a", rz="th"), {"name": "arm", "parent": "a", "ty": 1.0},
                                     {"name": "wrist", "parent": "arm", "rx": "idle"},
                                     {"name": "tip", "parent": "wrist", "tz": 0.0}]})
    assert s.config_names == ["th", "idle"]
    for call in (lambda: s.qdd([0.1, 0.2], [0.0, 0.0]), lambda: s.linearize([0.1, 0.2], [0.0, 0.0])):
        with pytest.raises(SingularMatrixError, match="idle") as info:
            call()
        assert info.value.matrix == "mass matrix" and info.value.index == 1
        assert isinstance(info.value, np.linalg.LinAlgError)


def test_point_mass_on_its_own_rotation_axis_is_singular():
    """The first variable rotates a point mass about an axis through it: no kinetic energy."""
    s = core.load_system({"frames": [{"name": "spin", "rz": "psi", "mass": 1.0},
                                     body("slider", parent="world", tx="x")]})
    with pytest.raises(SingularMatrixError, match="psi") as info:
        s.qdd([0.3, 0.0], [0.0, 0.0])
    assert info.value.index == 0


def test_redundant_constraints_are_reported(double_pendulum_spec):
    spec = double_pendulum_spec
    spec["constraints"] = spec["constraints"] * 2
    s = core.load_system(spec)
    for call in (lambda: s.qdd(Q, DQ, U), lambda: s.linearize(Q, DQ, U), lambda: s.constraint_forces(Q, DQ, U)):
        with pytest.raises(SingularMatrixError, match="constraint") as info:
            call()
        assert info.value.matrix == "constraint Jacobian"
        assert info.value.index == 1


def test_bodies_of_rigidly_attached_frames_are_merged_exactly():
    """The compiler folds the body of a frame fixed to its parent (a constant offset) into the
    parent's body; the dynamics equal those of the same body written by hand in the parent's
    coordinates (centre of mass ``p + R c``, inertia ``R I Rᵀ``), through a chain of two fixed
    frames."""
    from randsys import random_inertia, random_rotation
    rng = np.random.default_rng(7)
    R1, R2 = random_rotation(rng), random_rotation(rng)
    p1, p2, c = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    inertia = random_inertia(rng, 0.5)

    def robot(by_hand):
        R, p = R1 @ R2, p1 + R1 @ p2
        link = dict(mass=1.5, com=list(p + R @ c), inertia=(R @ inertia @ R.T).tolist()) if by_hand else {}
        tip = {} if by_hand else dict(mass=1.5, com=list(c), inertia=inertia.tolist())
        s = core.System(gravity=[0.1, -0.4, -9.8])
        s.add_frame("base", rz="q0", mass=2.0, inertia=[0.1, 0.2, 0.3], com=[0.1, 0, 0])
        s.add_frame("link", parent="base", offset={"translation": [0.5, 0.1, 0.0]}, rx="q1", **link)
        s.add_frame("mid", parent="link", offset={"translation": list(p1), "rotation": R1})
        s.add_frame("tip", parent="mid", offset={"translation": list(p2), "rotation": R2}, **tip)
        for q in ("q0", "q1"):
            s.add_input("torque", config=q)
        return s

    merged, by_hand = robot(False), robot(True)
    assert merged.model.frame_mass[merged.frame_index("tip")] == 0.0       # folded into "link"
    assert merged.model.frame_mass[merged.frame_index("link")] == 1.5
    q, dq, u = np.array([0.4, -0.7]), np.array([0.3, 0.9]), np.array([0.2, -0.1])
    np.testing.assert_allclose(merged.qdd(q, dq, u), by_hand.qdd(q, dq, u), rtol=1e-12, atol=1e-12)
    for x, y in zip(merged.linearize(q, dq, u), by_hand.linearize(q, dq, u), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    assert merged.energy(q, dq) == pytest.approx(by_hand.energy(q, dq), rel=1e-13)


@pytest.mark.parametrize("add, message", [
    (lambda s: s.add_spring("config", config="th", stiffness=-1.0),
     r"spring 1 \(config\)\.stiffness: must be non-negative"),
    (lambda s: s.add_spring("config", config="th"), r"spring 1 \(config\): missing required key 'stiffness'"),
    (lambda s: s.add_spring("frames", frame1="a", frame2="world", stiffness=1.0, rest=2.0),
     r"spring 1 \(frames\): unknown key\(s\) \['rest'\]"),
    (lambda s: s.add_damper("a", "a", 1.0, name="shock"), r"damper 1 \('shock'\): frame1 and frame2 are both 'a'"),
    (lambda s: s.add_damper("a", "world", float("nan")), r"damper 1\.coefficient: must be finite"),
    (lambda s: s.add_wrench("a", [1, 2, 3], name="push"), r"wrench 1 \('push'\): wrench must be six finite numbers"),
    (lambda s: s.add_wrench("world", [0] * 6), r"wrench 1: a wrench on the world frame does nothing"),
    (lambda s: s.add_input("force", frame="a", axis="w"), r"input 2 \(force\)\.axis: axis must be one of x, y, z"),
    (lambda s: s.add_input("torque", joint="th"), r"input 2 \(torque\): unknown key\(s\) \['joint'\]"),
    (lambda s: s.add_constraint("distance", frame1="a", frame2="world", distance=-1.0),
     r"constraint 1 \(distance\)\.distance: must be non-negative"),
    (lambda s: s.add_constraint("plane", frame="a", normal=[0, 0, 0]),
     r"constraint 1 \(plane\)\.normal: must be x, y, z or a nonzero vector"),
    (lambda s: s.add_constraint("coincide", frame1="a", frame2="world", axes="xy"),
     r"constraint 1 \(coincide\): axes must be a non-empty list"),
    (lambda s: s.add_constraint("velocity", frame="world", axis="x"),
     r"velocity constraint 1: the world frame cannot move"),
])
def test_every_element_is_checked_when_added_and_the_system_keeps_the_rest(add, message):
    """What an element says by itself (keys, numbers, axes) is checked by ``add_*``, with the
    message the compiler gives (core.model.compile): the bad element is not added, the system
    keeps what it had and still compiles to the same model. References (frames, variables) are
    resolved when compiling (test_errors_through_the_python_api)."""
    def system():
        s = core.System(gravity=[0.0, 0.0, -9.81])
        s.add_frame("a", rz="th", mass=1.0, inertia=[1, 1, 1], com=[0.1, 0.0, 0.0])
        s.add_frame("b", parent="a", tx=1.0, mass=0.5)
        s.add_input("torque", config="th")
        s.add_spring("config", config="th", stiffness=2.0)
        s.add_damper("a", "b", 0.3)
        s.add_wrench("b", [0, 1, 0, 0, 0, 0])
        s.add_input("force", frame="b", axis="x")
        s.add_constraint("distance", frame1="b", frame2="world", distance=1.2)
        s.add_constraint("velocity", frame="b", axis="y")
        return s
    s, before = system(), system()
    with pytest.raises(ModelError, match=message):
        add(s)
    for kind in ("_springs", "_dampers", "_wrenches", "_inputs", "_constraints", "_velocity_constraints"):
        assert len(getattr(s, kind)) == len(getattr(before, kind)), kind
    for field in ("spring_coef", "damper_c", "cwrench_value", "input_kind", "hc_kind", "vc_axis"):
        np.testing.assert_array_equal(getattr(s.model, field), getattr(before.model, field))
