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
* A property-based fuzz (hypothesis, bounded examples) over the public API.
"""
from __future__ import annotations

import numpy as np
import pytest
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


# ---------------------------------------------------------------------------------- fuzz
ACCEPTED = (core.CoreError, ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError)
junk = st.one_of(
    st.none(), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=6),
    st.lists(st.lists(st.floats(-1e3, 1e3), max_size=4), max_size=4),
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
