"""core's bad-input contract (issue 32, item 6 and the library halves of items 1 and 2): any
input gets a result or a library error with a message, never a crash, a silent reinterpretation
or a new compilation.

* Arrays of any writability, contiguity and integer dtype are converted once and never compile
  the kernels again (their signatures are counted); ``None`` is refused where it is not
  documented as zeros; complex values are refused, not cast.
* YAML model text: syntax errors, deep nesting and aliases are :class:`core.errors.ModelError` naming
  the line, checked before anything is built.
* Second-order work is bounded (:data:`core.validation.SECOND_ORDER_MEMORY_LIMIT`), checked before
  anything is allocated; the first order allocates no third-order scratch.
* Entries that are no real number inside a vector (``[None]``, ``["0.5"]``, an object, a list) are
  refused naming the argument, the entry and its value (numpy made ``None`` NaN and parsed strings).
* A time step outside :data:`core.validation.TIME_STEP_RANGE` (``1e308``, the subnormal ``1e-320``)
  is refused, when constructed and when assigned.
* A boolean where a model (dict or YAML) has a number is a ModelError naming the key and the value.
* A property-based fuzz (hypothesis, bounded examples) over the public API, and over each of the
  three classes above.
"""
from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core
import core.validation
from core.continuous.dynamics import continuous_dynamics, forward_dynamics, linearize_at, qdd_at
from core.discrete.entry import step_at
from core.tree.kinematics import create_data
from core.tree.lagrangian import create_derivs, prepare, third_order

CARTPOLE = core.load_system("cartpole.yaml")
VI = core.MidpointVI(CARTPOLE, 0.01)


def _readonly(a):
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def test_any_array_layout_is_converted_once_and_compiles_nothing():
    q, dq, u = np.array([0.1, 0.2]), np.array([0.3, -0.1]), np.array([0.5])
    want_qdd, want_A = CARTPOLE.qdd(q, dq, u), CARTPOLE.linearize(q, dq, u)[0]
    x = VI.discrete_state(q, dq)
    want_x1 = VI.step(x, u)
    kernels = (continuous_dynamics, forward_dynamics, qdd_at, linearize_at, step_at)
    signatures = [len(k.signatures) for k in kernels]
    variants = [_readonly(q), np.array([0.1, 0.0, 0.2, 0.0])[::2], np.asfortranarray(q), [0.1, 0.2],
                np.array([0.1, 0.2], np.float32).astype(np.float64)]
    for qv in variants:
        for args in ((qv, dq, u), (q, _readonly(dq), u), (q, dq, _readonly(u)), (qv, _readonly(dq), _readonly(u))):
            assert np.allclose(CARTPOLE.qdd(*args), want_qdd, rtol=1e-6)
            assert np.allclose(CARTPOLE.linearize(*args)[0], want_A, rtol=1e-6)
    ints = CARTPOLE.qdd(np.array([1, 0]), np.array([0, 0]), np.array([2]))
    assert np.allclose(ints, CARTPOLE.qdd([1.0, 0.0], [0.0, 0.0], [2.0]))
    assert np.array_equal(VI.step(_readonly(x), _readonly(u)), want_x1)
    assert [len(k.signatures) for k in kernels] == signatures


def test_none_complex_and_objects_are_refused_by_name():
    z = np.zeros(2)
    for call, pattern in ((lambda: CARTPOLE.qdd(None, z), r"q is missing \(None\): expected a vector of 2"),
                          (lambda: CARTPOLE.linearize(z, None), r"dq is missing \(None\)"),
                          (lambda: CARTPOLE.energy(None, z), r"q is missing"),
                          (lambda: VI.step(None), r"x is missing \(None\): expected a vector of 4"),
                          (lambda: VI.discrete_state(z, None), r"qdot is missing"),
                          (lambda: CARTPOLE.qdd(z + 0j, z), r"q must be real, got complex values"),
                          (lambda: VI.step(np.zeros(4, complex)), r"x must be real"),
                          (lambda: core.dlqr(np.eye(2) * (1 + 1j), np.ones((2, 1)), np.eye(2), np.eye(1)),
                           r"A must be real"),
                          (lambda: core.lqr(np.eye(2), np.ones((2, 1)) * 1j, np.eye(2), np.eye(1)),
                           r"B must be real"),
                          (lambda: CARTPOLE.qdd("ab", z), r"q must be a real numeric array, got str")):
        with pytest.raises(ValueError, match=pattern):
            call()
    # documented: an input u of None is zeros
    assert np.array_equal(CARTPOLE.qdd(z, z, None), CARTPOLE.qdd(z, z, [0.0]))
    assert np.array_equal(VI.step(VI.discrete_state(z, z)), VI.step(VI.discrete_state(z, z), [0.0]))


@pytest.mark.parametrize("text, pattern", [
    ("{frames: [{name: a, tx: x, mass: 1, children: " + "[" * 5000 + "]" * 5000 + "}]}",
     r"line 1: nested more than 32 levels deep"),
    ("frames:\n  - &f {name: a, rz: q}\n  - *f\n", r"line 3: YAML aliases \(\*f\) are not accepted"),
    ("frames:\n  - {name: a, rz: q\n", r"not valid YAML: line 3, column 1: expected ',' or '}'"),
    ("frames: [1, 2\n", r"not valid YAML: line 2, column 1"),
    ("a: b: c\n", r"not valid YAML: line 1, column 5: mapping values are not allowed here"),
    ("!!python/object/apply:os.system ['true']\n", r"not valid YAML: .*could not determine a constructor"),
    ("\x00frames: []\n", r"not valid YAML"),
])
def test_yaml_model_errors_name_the_line(text, pattern):
    with pytest.raises(core.errors.ModelError, match=rf"^model YAML text \({len(text)} characters\): .*{pattern}"):
        core.load_system(text)
    with pytest.raises(core.errors.ModelError, match=f"^here: .*{pattern}"):
        core.validation.read_yaml(text, "here")


def test_second_order_work_is_bounded_before_it_is_allocated(monkeypatch):
    chain = core.load_system({"frames": [{"name": f"l{i}", "parent": f"l{i - 1}" if i else "world",
                                          "rz": f"q{i}", "mass": 1.0, "com": [0.5, 0, 0],
                                          "offset": {"translation": [1, 0, 0]}}
                                         for i in range(30)],
                              "inputs": [{"type": "torque", "config": f"q{i}"} for i in range(30)]})
    vi = core.MidpointVI(chain, 0.01)
    z = np.zeros(30)
    x = vi.discrete_state(z, z)
    monkeypatch.setattr(core.validation, "SECOND_ORDER_MEMORY_LIMIT", 1_000_000)
    for call, what in ((lambda: chain.linearize2(z, z, z), r"linearize2 would allocate about 0.00778 GB \(H is 60 x "
                                                           r"90 x 90 doubles"),
                       (lambda: vi.linearize2(x, z), r"MidpointVI.linearize2 would allocate about 0.00778 GB"),
                       (lambda: vi.linearize_trajectory(np.tile(x, (11, 1)), np.zeros((10, 30)), second_order=True),
                        r"H is 10 x 60 x 90 x 90 doubles"),
                       (lambda: core.linearize_trajectory(vi, np.tile(x, (10, 1)), np.zeros((10, 30)), True),
                        r"linearize_trajectory\(second_order=True\) would allocate about 0.0778 GB")):
        with pytest.raises(core.errors.ResourceLimitError, match=what + r".*above the limit of 0.001 GB"):
            call()
    vi.linearize(x, z)                                  # the first order is not limited
    # nor the contracted second order: O(nz²) memory, no tensor
    lam = np.ones(60)
    assert vi.linearize2(x, z, costate=lam)[2].shape == (90, 90)
    W = vi.linearize_trajectory(np.tile(x, (11, 1)), np.zeros((10, 30)), True, costates=np.ones((10, 60)))[2]
    assert W.shape == (10, 90, 90)
    monkeypatch.setattr(core.validation, "SECOND_ORDER_MEMORY_LIMIT", 2 * 1024 ** 3)
    assert vi.linearize2(x, z)[2].shape == (60, 90, 90)


def test_first_order_scratch_has_no_pair_tables_and_the_third_order_refuses_it():
    model = CARTPOLE.model
    lean, full = create_data(model, pairs=False), create_data(model)
    assert lean.DD.shape == (0, 0, 6) and full.DD.shape == (2, 2, 6)
    data, _ = CARTPOLE.workspace.get()
    assert data.DD.shape[0] == 0 and CARTPOLE.workspace.get(third_order=True)[0].DD.shape[0] == 2
    q = np.array([0.1, 0.2])
    prepare(model, lean, q, q)
    with pytest.raises(ValueError, match="no joint-pair tables"):
        third_order(model, lean, q, True, q, q, create_derivs(2, True))


def test_none_objects_and_strings_inside_vectors_are_refused_by_name(tmp_path):
    # [None] once became NaN (reported as "not finite: nan"), ["0.5"] was parsed
    z, x = np.zeros(2), VI.discrete_state(np.zeros(2), np.zeros(2))
    VI.step(x, [0.0])           # (the entry kernels frozen: the fast path refuses, the checked path names)
    got_none = r"u\[0\] \(cart_force\) must be a real number, got None"
    for call in (lambda u: VI.step(x, u), lambda u: VI.linearize(x, u), lambda u: VI.linearize2(x, u),
                 lambda u: VI.step_linearize(x, u), lambda u: VI.linearize2(x, u, costate=np.ones(4)),
                 lambda u: CARTPOLE.qdd(z, z, u), lambda u: CARTPOLE.linearize(z, z, u),
                 lambda u: CARTPOLE.linearize2(z, z, u)):
        for u in ([None], (None,), np.array([None])):
            with pytest.raises(ValueError, match=got_none):
                call(u)
        with pytest.raises(ValueError, match=r"u\[0\] \(cart_force\) must be a real number, got str '0.5'"):
            call(["0.5"])
        with pytest.raises(ValueError, match=r"u\[0\] \(cart_force\) must be a real number, got object <object"):
            call([object()])
    for call, pattern in (
            (lambda: VI.step([0.0, None, 0.0, 0.0], [0.0]), r"x\[1\] \(theta\) must be a real number, got None"),
            (lambda: VI.linearize2(x, [0.0], costate=[0, 0, None, 0]), r"costate\[2\] \(p_x\) .* got None"),
            (lambda: CARTPOLE.qdd(["1", "2"], z), r"q\[0\] \(x\) must be a real number, got str '1'"),
            (lambda: CARTPOLE.qdd(np.array(["1", "2"]), z), r"q\[0\] \(x\) must be a real number, got str_"),
            (lambda: CARTPOLE.linearize(z, [0.0, [1.0]]), r"dq\[1\] \(theta\) must be a real number, got list \[1.0\]"),
            (lambda: CARTPOLE.energy([[1.0], 2.0], z), r"q\[0\] \(x\) must be a real number, got list"),
            (lambda: VI.step(np.zeros((2, 4)), [[0.0], [None]]), r"u\[1, 0\] must be a real number, got None"),
            (lambda: CARTPOLE.qdd(np.zeros((2, 2)), np.zeros((2, 2)), [[0.0], [None]]), r"u\[1, 0\] .* got None"),
            (lambda: core.simulate_open_loop(VI.step, x, [[0.0], [None]]), r"u\[1, 0\] must be a real number"),
            (lambda: core.dlqr([[1.0, None], [0.0, 1.0]], np.ones((2, 1)), np.eye(2), np.eye(1)),
             r"A\[0, 1\] must be a real number, got None"),
            (lambda: core.save_trajectory(tmp_path / "t.npz", VI, [[0.0] * 4, [0.0, None, 0.0, 0.0]]),
             r"x\[1, 1\] must be a real number, got None")):
        with pytest.raises(ValueError, match=pattern):
            call()
    # numbers of every kind are still converted (booleans and Python integers beyond int64 included)
    assert np.array_equal(CARTPOLE.qdd([True, False], z), CARTPOLE.qdd([1.0, 0.0], z))
    assert np.array_equal(CARTPOLE.energy(np.array([1, 0.0], dtype=object), z), CARTPOLE.energy([1.0, 0.0], z))


def test_time_steps_outside_the_documented_range_are_refused():
    lo, hi = core.validation.TIME_STEP_RANGE
    assert (lo, hi) == (1e-9, 1e3)
    for dt in (1e308, 1e-320, np.nextafter(hi, np.inf), np.nextafter(lo, 0.0), 5e3, np.float32(1e-12)):
        with pytest.raises(ValueError, match=rf"^dt must be a time step from 1e-09 s to 1000 s "
                                             rf"\(core.validation.TIME_STEP_RANGE\), got {re.escape(repr(dt))}$"):
            core.MidpointVI(CARTPOLE, dt)
    for dt, pattern in ((0.0, "dt must be a finite positive number, got 0.0"), (float("inf"), "got inf"),
                        (True, "dt must be a number, got bool True"), ("0.01", "got str '0.01'")):
        with pytest.raises(ValueError, match=pattern):
            core.MidpointVI(CARTPOLE, dt)
    vi = core.MidpointVI(CARTPOLE, lo)
    assert vi.dt == lo and core.MidpointVI(CARTPOLE, hi).dt == hi
    vi.dt = 0.01
    with pytest.raises(ValueError, match=r"^dt must be a time step .* got 1e\+308$"):
        vi.dt = 1e308
    assert vi.dt == 0.01 and vi._settings[0] == 0.01          # unchanged by the refusal
    assert "1e-09 s to 1000 s" in core.MidpointVI.dt.__doc__
    with pytest.raises(ValueError, match=r"dt must be a time step .* got 1e-12"):
        core.balance_lqr(CARTPOLE, np.zeros(2), [0.0], dt=1e-12)


#: A model using every kind of number of the YAML/dict schema (it loads).
RICH = {
    "name": "rich", "gravity": [0.0, -9.81, 0.0],
    "frames": [
        {"name": "cart", "parent": "world", "tx": "x", "mass": 1.0, "inertia": [0.01, 0.01, 0.01],
         "com": [0.0, 0.01, 0.0], "offset": {"translation": [0.0, 0.1, 0.0], "rotation": [0.0, 0.0, 0.1]}},
        {"name": "pole", "parent": "cart", "rz": "theta"},
        {"name": "pole_mass", "parent": "pole", "ty": 0.5, "mass": 0.2,
         "inertia": [[0.004, 0.0, 0.0], [0.0, 0.004, 0.0], [0.0, 0.0, 0.004]]},
        {"name": "wheel", "parent": "cart", "rz": "phi", "mass": 0.1, "inertia": [0.001, 0.001, 0.002]},
        {"name": "twin", "parent": "cart", "rz": "psi", "mass": 0.1, "inertia": [0.001, 0.001, 0.002]},
        {"name": "flap", "parent": "cart", "rx": "held", "mass": 0.1, "inertia": [0.001, 0.001, 0.002]},
        {"name": "anchor", "parent": "world", "ty": 2.0},
    ],
    "constraints": [{"type": "plane", "frame": "wheel", "normal": [0.0, 0.0, 1.0], "offset": 0.0}],
    "springs": [{"type": "config", "config": "theta", "stiffness": 1.0, "rest": 0.1},
                {"type": "config", "config": "phi", "polynomial": [0.0, 1.0, 0.5]},
                {"type": "frames", "frame1": "pole_mass", "frame2": "anchor", "stiffness": 2.0, "rest_length": 0.5}],
    "damping": [{"config": "x", "coefficient": 0.05}],
    "dampers": [{"frame1": "cart", "frame2": "anchor", "coefficient": 0.1}],
    "wrenches": [{"frame": "pole_mass", "wrench": [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]}],
    "mimic": [{"config": "psi", "leader": "theta", "multiplier": 2.0, "offset": 0.1}],
    "armature": {"theta": 0.01},
    "locked": {"held": 0.2},
    "inputs": [{"type": "torque", "config": "x", "name": "cart_force"}],
}


def numeric_leaves(node, path=()):
    """The key paths of every number in a model dict."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in numeric_leaves(v, path + (k,))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in numeric_leaves(v, path + (i,))]
    return [path] if isinstance(node, (int, float)) and not isinstance(node, bool) else []


def expected_where(spec, path) -> str:
    """What a ModelError names for the number at ``path`` of ``spec`` (the element, its key, the
    index of a vector's entry)."""
    top, rest = path[0], path[1:]
    entry = spec[top][rest[0]] if rest and isinstance(spec[top], list) else None
    if top == "gravity":
        return f"gravity[{rest[0]}]"
    if top in ("armature", "locked"):
        return f"{'armature of' if top == 'armature' else 'lock of'} {rest[0]!r}"
    keys, index = [k for k in rest[1:] if isinstance(k, str)], [k for k in rest[1:] if isinstance(k, int)]
    key = ".".join(keys) + (f"{index}" if index else "")
    if top == "frames" and keys[0] == "inertia" and len(index) == 2:
        key = f"inertia[{index[0]}, {index[1]}]"
    element = {"frames": lambda: f"frame {entry['name']!r}",
               "constraints": lambda: f"constraint {rest[0]} ({entry['type']})",
               "springs": lambda: f"spring {rest[0]} ({entry['type']})",
               "damping": lambda: f"damping on {entry['config']!r}",
               "dampers": lambda: f"damper {rest[0]}", "wrenches": lambda: f"wrench {rest[0]}",
               "mimic": lambda: f"mimic {entry['config']!r}"}[top]()
    return f"{element}.{key}"


def with_value(spec, path, value):
    spec = copy.deepcopy(spec)
    node = spec
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return spec


def test_the_rich_model_loads_and_covers_the_schema():
    core.load_system(RICH)
    tops = {p[0] for p in numeric_leaves(RICH)}
    assert tops == set(RICH) - {"name", "inputs"}, tops


@pytest.mark.parametrize("path", numeric_leaves(RICH), ids=lambda p: ".".join(map(str, p)))
def test_a_boolean_for_a_number_is_refused_naming_the_key(path):
    where = re.escape(expected_where(RICH, path))
    with pytest.raises(core.errors.ModelError, match=rf"^{where}: expected a number, got True \(a boolean"):
        core.load_system(with_value(RICH, path, True))
    text = yaml.safe_dump(with_value(RICH, path, False))
    with pytest.raises(core.errors.ModelError, match=rf"^model YAML text .*: {where}: expected a number, got False"):
        core.load_system(text)


def test_yaml_booleans_in_the_packaged_cartpole_are_refused():
    with open(core.data.model_file("cartpole.yaml"), encoding="utf-8") as fh:
        text = fh.read()
    for old, new, where in (("mass: 1.0", "mass: yes", "frame 'cart'.mass: expected a number, got True"),
                            ("ty: 0.5", "ty: off", "frame 'pole_mass'.ty: expected a number, got False"),
                            ("[0.01, 0.01, 0.01]", "[0.01, true, 0.01]", "frame 'cart'.inertia[1]: expected a number"),
                            ("[0, -9.81, 0]", "[0, -9.81, on]", "gravity[2]: expected a number, got True"),
                            ("coefficient: 0.05", "coefficient: no", "damping on 'x'.coefficient: expected a number")):
        assert old in text
        with pytest.raises(core.errors.ModelError, match=re.escape(where)):
            core.load_system(text.replace(old, new, 1))
    # the Python API refuses them the same way (a dict goes through it)
    with pytest.raises(core.errors.ModelError, match=r"frame 'a'.mass: expected a number, got True"):
        core.System().add_frame("a", rz="q", mass=True)
    with pytest.raises(core.errors.ModelError, match=r"limits of 'q'.effort: expected a number, got np.True_"):
        core.System().set_joint_limits("q", effort=np.True_)
    with pytest.raises(core.errors.ModelError, match=r"gravity: expected a number, got True"):
        core.System(gravity=True)
    # numbers YAML leaves as strings still load (1e-3 is no YAML 1.1 float)
    assert core.load_system(text.replace("mass: 0.2", "mass: 2e-1")).model.frame_mass.max() == 1.0


# ---------------------------------------------------------------------------------- fuzz
ACCEPTED = (core.CoreError, ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError)
junk = st.one_of(
    st.none(), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=6),
    st.lists(st.lists(st.floats(-1e3, 1e3), max_size=4), max_size=4),
    st.lists(st.one_of(st.floats(-1e3, 1e3), st.none(), st.sampled_from([object(), "1", [0.5], True])),
             min_size=1, max_size=4),
    st.sampled_from([np.zeros(2), np.zeros(4), np.zeros(1), np.zeros((2, 2)), np.zeros(2, complex),
                     np.array([1, 2]), np.array([True, False]), np.array(["a", "b"]), np.array([1e308, -1e308]),
                     _readonly(np.zeros(2)), np.zeros(4)[::2], np.full(2, np.nan), np.zeros((4, 4)),
                     np.zeros((4, 1)), np.zeros((1, 1)), np.eye(4), {}, object()]))
CALLS = {
    "System.qdd": lambda a, b, c: CARTPOLE.qdd(a, b, c),
    "System.linearize": lambda a, b, c: CARTPOLE.linearize(a, b, c),
    "System.linearize2": lambda a, b, c: CARTPOLE.linearize2(a, b, c),
    "System.energy": lambda a, b, c: CARTPOLE.energy(a, b),
    "System.momentum": lambda a, b, c: CARTPOLE.momentum(a, b),
    "System.input_matrix": lambda a, b, c: CARTPOLE.input_matrix(a),
    "MidpointVI.step": lambda a, b, c: VI.step(a, b),
    "MidpointVI.linearize": lambda a, b, c: VI.linearize(a, b),
    "MidpointVI.step_linearize": lambda a, b, c: VI.step_linearize(a, b),
    "MidpointVI.linearize2 (costate)": lambda a, b, c: VI.linearize2(a, b, costate=c),
    "MidpointVI.discrete_state": lambda a, b, c: VI.discrete_state(a, b),
    "MidpointVI.continuous_state": lambda a, b, c: VI.continuous_state(a),
    "dlqr": lambda a, b, c: core.dlqr(a, b, c, np.eye(1)),
    "lqr": lambda a, b, c: core.lqr(a, b, c, np.eye(1)),
    "tvlqr": lambda a, b, c: core.tvlqr(a, b, c, np.eye(1), np.eye(4)),
    "controllability": lambda a, b, c: core.controllability(a, b),
    "simulate_open_loop": lambda a, b, c: core.simulate_open_loop(VI.step, a, b),
    "holding_inputs": lambda a, b, c: core.holding_inputs(CARTPOLE, a),
    "load_system": lambda a, b, c: core.load_system(a if isinstance(a, (str, dict)) else {"frames": a}),
    "MidpointVI(dt)": lambda a, b, c: core.MidpointVI(CARTPOLE, a),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(a=junk, b=junk, c=junk)
def test_fuzzed_public_api_answers_or_refuses_with_a_message(name, a, b, c):
    try:
        CALLS[name](a, b, c)
    except ACCEPTED as exc:
        assert str(exc).strip(), f"{name}: {type(exc).__name__} without a message"
        assert type(exc).__module__.split(".")[0] in ("core", "builtins", "numpy"), type(exc)


#: Entries that are no real number, as the fuzz puts them into otherwise valid vectors (a
#: sequence as the one entry of a vector of one is a matrix of the wrong shape instead: refused as such).
SCALAR_NOT_NUMBERS = [None, object(), "0.5", "x", b"1", {}, {"a": 1}, np.datetime64("2020-01-01")]
NOT_NUMBERS = st.sampled_from(SCALAR_NOT_NUMBERS + [[0.5], (), [None, 1.0]])
#: ``(argument names, lengths, call)`` of the public calls taking state and input vectors.
VECTOR_CALLS = {
    "System.qdd": (("q", "dq", "u"), (2, 2, 1), CARTPOLE.qdd),
    "System.linearize": (("q", "dq", "u"), (2, 2, 1), CARTPOLE.linearize),
    "System.linearize2": (("q", "dq", "u"), (2, 2, 1), CARTPOLE.linearize2),
    "System.energy": (("q", "dq"), (2, 2), CARTPOLE.energy),
    "MidpointVI.step": (("x", "u"), (4, 1), VI.step),
    "MidpointVI.linearize": (("x", "u"), (4, 1), VI.linearize),
    "MidpointVI.step_linearize": (("x", "u"), (4, 1), VI.step_linearize),
    "MidpointVI.linearize2": (("x", "u", "costate"), (4, 1, 4), lambda x, u, c: VI.linearize2(x, u, costate=c)),
    "MidpointVI.discrete_state": (("q", "qdot"), (2, 2), VI.discrete_state),
}


@pytest.mark.parametrize("name", sorted(VECTOR_CALLS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(data=st.data())
def test_fuzzed_non_numbers_inside_vectors_are_refused_naming_the_entry(name, data):
    names, lengths, call = VECTOR_CALLS[name]
    args = [data.draw(st.lists(st.floats(-1.0, 1.0), min_size=n, max_size=n)) for n in lengths]
    k = data.draw(st.integers(0, len(args) - 1), label="bad argument")
    i = data.draw(st.integers(0, lengths[k] - 1), label="bad entry")
    bad = data.draw(NOT_NUMBERS if lengths[k] > 1 else st.sampled_from(SCALAR_NOT_NUMBERS), label="entry")
    args[k][i] = bad
    args[k] = data.draw(st.sampled_from([list, tuple, lambda v: np.array(v + [0.0], dtype=object)[:-1]]))(args[k])
    with pytest.raises(ValueError, match=rf"^{names[k]}\[{i}\]( \(\w+\))? must be a real number, got "
                                         rf"{'None' if bad is None else type(bad).__name__ + ' '}"):
        call(*args)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(dt=st.one_of(st.floats(), st.floats(0.0, 2e-9), st.floats(900.0, 2e3), st.integers(-10, 10 ** 4),
                    st.booleans(), st.none(), st.text(max_size=3),
                    st.sampled_from([1e-320, 5e-324, 1e308, 1e-9, 1e3, np.float64(1e-10), np.int64(2)])))
def test_fuzzed_time_steps_are_taken_in_range_and_refused_by_name_outside(dt):
    lo, hi = core.validation.TIME_STEP_RANGE
    number = isinstance(dt, (int, float, np.number)) and not isinstance(dt, bool)
    valid = number and lo <= float(dt) <= hi
    vi = core.MidpointVI(CARTPOLE, 0.01)
    for make in (lambda: core.MidpointVI(CARTPOLE, dt), lambda: setattr(vi, "dt", dt) or vi):
        if valid:
            assert make().dt == float(dt)
        else:
            with pytest.raises(ValueError, match=rf"^dt must be .*, got .*{re.escape(repr(dt)) if number else ''}"):
                make()
            assert vi.dt == 0.01            # (a refused assignment changes nothing)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(path=st.sampled_from(numeric_leaves(RICH)), value=st.sampled_from([True, False, np.True_, np.False_]),
       as_yaml=st.booleans())
def test_fuzzed_booleans_for_numbers_in_models_are_refused_naming_the_key(path, value, as_yaml):
    spec = with_value(RICH, path, bool(value) if as_yaml else value)
    source = yaml.safe_dump(spec) if as_yaml else spec
    where, shown = re.escape(expected_where(RICH, path)), re.escape(repr(bool(value) if as_yaml else value))
    with pytest.raises(core.errors.ModelError, match=rf"{where}: expected a number, got {shown} \(a boolean"):
        core.load_system(source)
