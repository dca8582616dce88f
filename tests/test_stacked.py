"""Many states in one call (``System.qdd`` / ``System.linearize`` on ``(N, n)`` stacks,
:mod:`core.continuous.stacked`): every row equals the single call at that state, on plain trees (the
parallel kernel), constrained and coupled systems and the quaternion base (point by point);
bad stacks are refused naming what is wrong."""
import numba
import numpy as np
import pytest
from urdfref import robot_path

import core
from core import validation
from core.errors import ResourceLimitError

from randsys import random_system


def _states(s, N, seed=0, q0=None, dq0=None):
    rng = np.random.default_rng(seed)
    n, nv = s.nq, s.nv
    if q0 is None:
        Q = rng.uniform(-1, 1, (N, n))
    else:       # (constrained systems: the consistent state repeated)
        Q = np.tile(q0, (N, 1))
    if s.nq != s.nv:        # a quaternion base: unit quaternions
        Q = np.array([s.integrate(s.neutral(), rng.uniform(-1, 1, nv)) for _ in range(N)])
    DQ = rng.uniform(-1, 1, (N, nv)) if dq0 is None else np.tile(dq0, (N, 1))
    U = rng.uniform(-1, 1, (N, len(s.continuous_input_names)))
    return Q, DQ, U


def _equal_to_single_calls(s, Q, DQ, U):
    A, B = s.linearize(Q, DQ, U)
    ddq = s.qdd(Q, DQ, U)
    N = Q.shape[0]
    assert A.shape == (N, 2 * s.nv, 2 * s.nv) and B.shape == (N, 2 * s.nv, U.shape[1])
    assert ddq.shape == (N, s.nv)
    for k in range(N):
        a, b = s.linearize(Q[k], DQ[k], U[k])
        np.testing.assert_allclose(A[k], a, rtol=0, atol=1e-12)
        np.testing.assert_allclose(B[k], b, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ddq[k], s.qdd(Q[k], DQ[k], U[k]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_plain_trees_in_parallel_equal_single_calls(seed):
    s, *_ = random_system(seed, constraints=0, velocity_constraints=0)
    assert s.workspace.plain
    _equal_to_single_calls(s, *_states(s, 37, seed))


@pytest.mark.parametrize("threads", [1, 2])
def test_any_thread_count_gives_the_same_rows(threads):
    s = core.load_urdf(robot_path("panda_description/urdf/panda.urdf"), mimic="independent")
    Q, DQ, U = _states(s, 101)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        _equal_to_single_calls(s, Q, DQ, U)
    finally:
        numba.set_num_threads(before)


def test_constrained_coupled_and_floating_systems_point_by_point():
    s, q0, dq0, _ = random_system(3, n_frames=(4, 15), constraints=2, velocity_constraints=1)
    assert not s.workspace.plain
    _equal_to_single_calls(s, *_states(s, 5, q0=q0, dq0=dq0))
    panda = core.load_urdf(robot_path("panda_description/urdf/panda.urdf"))      # mimic finger
    _equal_to_single_calls(panda, *_states(panda, 7))
    solo = core.load_urdf(robot_path("solo_description/robots/solo12.urdf"), floating_base=True)
    _equal_to_single_calls(solo, *_states(solo, 4))


def test_kinematic_variables_take_their_accelerations_in_a_stack():
    """With kinematic (prescribed) variables ``u`` is [force inputs, their accelerations] for one
    state (core.conventions) and for a stack alike: ``qdd`` and ``linearize`` on a stack take the
    same ``u`` as the single calls, row for row."""
    s = core.System(gravity=[0.0, -9.81, 0.0])
    s.add_frame("cart", tx="x", mass=1.0)
    s.add_frame("pole", parent="cart", rz="th", mass=0.0)
    s.add_frame("tip", parent="pole", ty=-1.0, mass=0.5)
    s.add_input("torque", config="th")
    s.set_kinematic(["x"])
    assert s.continuous_input_names == ["th", "x_ddot"] and s.input_names == ["th"]
    Q, DQ, U = _states(s, 6, seed=2)
    assert U.shape == (6, 2)
    _equal_to_single_calls(s, Q, DQ, U)


def test_zero_inputs_default_and_an_empty_stack():
    s, *_ = random_system(1, constraints=0, velocity_constraints=0)
    Q, DQ, U = _states(s, 4)
    np.testing.assert_array_equal(s.qdd(Q, DQ), s.qdd(Q, DQ, np.zeros_like(U)))
    A, B = s.linearize(Q[:0], DQ[:0], U[:0])
    assert A.shape == (0, 2 * s.nq, 2 * s.nq) and B.shape == (0, 2 * s.nq, U.shape[1])
    # plain nested lists are stacks too
    np.testing.assert_array_equal(s.qdd(Q.tolist(), DQ.tolist(), U.tolist()), s.qdd(Q, DQ, U))


def test_bad_stacks_are_refused_by_name():
    s, *_ = random_system(2, constraints=0, velocity_constraints=0)
    Q, DQ, U = _states(s, 5)
    with pytest.raises(ValueError, match=r"dq must have shape \(5, "):
        s.qdd(Q, DQ[:4], U)
    with pytest.raises(ValueError, match=r"q must have shape \(N, "):
        s.linearize(Q[:, :-1], DQ, U)
    bad = DQ.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"dq\[3, 1\] = nan"):
        s.linearize(Q, bad, U)
    with pytest.raises(ValueError, match="multipliers"):
        s.linearize(Q, DQ, U, multipliers=True)


def test_a_failing_point_is_named_with_the_single_calls_error():
    s = core.System()
    s.add_frame("a", "world", rz="q0", mass=1.0, inertia=[0.1, 0.1, 0.1], com=[1.0, 0, 0])
    s.add_frame("b", "a", rz="q1")        # q1 moves no mass: M is singular
    s.add_input("torque", config="q0")
    s.add_input("torque", config="q1")
    Q, DQ, U = np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2))
    with pytest.raises(core.errors.SingularMatrixError, match=r"point 0 of the stack: .*mass matrix is singular.*'q1'"):
        s.linearize(Q, DQ, U)
    with pytest.raises(ValueError, match="point 0 of the stack"):
        s.qdd(Q, DQ, U)


def test_memory_is_bounded_before_allocating(monkeypatch):
    s, *_ = random_system(4, constraints=0, velocity_constraints=0)
    Q, DQ, U = _states(s, 10)
    monkeypatch.setattr(validation, "STACK_MEMORY_LIMIT", 1000)
    with pytest.raises(ResourceLimitError, match="STACK_MEMORY_LIMIT"):
        s.linearize(Q, DQ, U)


def _panda_stack(seed, N):
    """The Panda's integrator and N random states and inputs."""
    s = core.load_urdf(robot_path("panda_description/urdf/panda.urdf"), mimic="independent")
    vi = core.MidpointVI(s, 0.01)
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.uniform(-1, 1, (N, s.nq)), rng.uniform(-0.1, 0.1, (N, vi.nx - s.nq))])
    return s, vi, X, rng.uniform(-1, 1, (N, vi.nu))


def test_integrator_linearize_on_a_stack_equals_single_calls():
    s, vi, X, U = _panda_stack(5, 6)
    A, B = vi.linearize(X, U)
    assert A.shape == (6, vi.nx, vi.nx) and B.shape == (6, vi.nx, vi.nu)
    for k in range(6):
        a, b = vi.linearize(X[k], U[k])
        np.testing.assert_allclose(A[k], a, rtol=0, atol=1e-12)
        np.testing.assert_allclose(B[k], b, rtol=0, atol=1e-12)
    A0, _ = vi.linearize(X)
    np.testing.assert_allclose(A0[2], vi.linearize(X[2], np.zeros(vi.nu))[0], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"u must have shape \(6, "):
        vi.linearize(X, U[:5])


def test_integrator_step_on_a_stack_equals_single_calls():
    s, vi, X, U = _panda_stack(6, 9)
    X1 = vi.step(X, U)
    assert X1.shape == (9, vi.nx)
    for k in range(9):
        np.testing.assert_array_equal(X1[k], vi.step(X[k], U[k]))
    np.testing.assert_array_equal(vi.step(X)[4], vi.step(X[4], np.zeros(vi.nu)))
    assert vi.step(X[:0]).shape == (0, vi.nx)
    with pytest.raises(ValueError, match="multipliers"):
        vi.step(X, U, multipliers=True)
    X[5, s.nq:] = 1e12          # far too large a momentum for dt: the solve overflows
    with pytest.raises(core.errors.IntegratorError, match="point 5 of the stack: DEL solve failed"):
        vi.step(X, U)
