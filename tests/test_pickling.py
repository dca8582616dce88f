"""Everything a user holds pickles, by its description, and gives the same results to the last bit
after the trip: in this process and in a ``multiprocessing`` pool with the ``spawn`` start method
(a fresh interpreter, as Dask, Ray and joblib workers are), where the kernels load from numba's
on-disk cache instead of compiling.

Objects: a :class:`core.System` from YAML, one from a URDF (the Panda), a quaternion-based one
with contacts (Solo12 on two feet); a :class:`core.MidpointVI`; a :class:`core.TrackingProblem`
and its result; a :class:`core.Linearizer` of module-level functions and a ``from_sympy`` one.
"""
from __future__ import annotations

import multiprocessing
import pickle
import sys

import numpy as np
import pytest
from test_linearizer import hanging_at_rest, pendulum
from urdfref import robot_path

import core

PANDA = "panda_description/urdf/panda.urdf"
SOLO = "solo_description/robots/solo12.urdf"


def _systems():
    cartpole = core.load_system("cartpole.yaml")
    panda = core.load_urdf(robot_path(PANDA), locked={"panda_finger_joint1": 0.04})
    solo = core.load_urdf(robot_path(SOLO), floating_base="quaternion", contacts=["FL_FOOT", "HR_FOOT"])
    return {"cartpole": cartpole, "panda": panda, "solo": solo}


def _point(system, seed):
    rng = np.random.default_rng(seed)
    q = system.integrate(system.neutral(), 0.3 * rng.standard_normal(system.nv))
    return q, 0.5 * rng.standard_normal(system.nv), rng.standard_normal(system.nu)


def _evaluate(systems, vi, problem, linearizer):
    """Every output compared across the trip, as a flat dict of arrays."""
    out = {}
    for name, s in systems.items():
        q, v, u = _point(s, 1)
        out[f"{name}.qdd"] = s.qdd(q, v, u)
        A, B = s.linearize(q, v, u, residual_limit=None)     # (Solo's random state is off its contacts)
        out[f"{name}.A"], out[f"{name}.B"] = A, B
    x0 = problem.x0
    out["vi.step"] = vi.step(x0, problem.u_ref[0])
    A, B = vi.linearize(x0, problem.u_ref[0])
    out["vi.A"], out["vi.B"] = A, B
    X = problem.rollout(problem.u_ref)
    lin = vi.linearize_trajectory(X, problem.u_ref)
    out["vi.linearize_trajectory.A"], out["vi.linearize_trajectory.B"] = lin[0], lin[1]
    out["problem.cost"] = np.array(problem.cost(X, problem.u_ref))
    M, A, B = linearizer.linearize(hanging_at_rest())
    out["linearizer.M"], out["linearizer.A"] = M, A
    return out


def _problem(vi):
    x0 = vi.discrete_state(np.array([0.0, 0.3]), np.zeros(2))
    N = 20
    u_ref = np.zeros((N, vi.nu))
    x_ref = np.tile(vi.discrete_state(np.zeros(2), np.zeros(2)), (N + 1, 1))
    return core.TrackingProblem(vi, x0, x_ref, u_ref, np.eye(vi.nx), 0.1 * np.eye(vi.nu))


def _worker(payload: bytes):
    """In a spawned interpreter: unpickle, evaluate; the kernels numba compiled here (none when
    its on-disk cache is warm)."""
    from numba.core.registry import CPUDispatcher
    objects = pickle.loads(payload)
    out = _evaluate(*objects)
    misses = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "core":
            continue
        for attr, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value._cache.__class__.__name__ != "NullCache":
                if value.stats.cache_misses:
                    misses.append(f"{name}.{attr}")
    return out, sorted(set(misses))


def _assert_same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key], b[key]), f"{key} differs after the trip: {np.max(np.abs(a[key] - b[key]))}"


def test_what_a_user_holds_pickles_and_gives_the_same_results_in_a_spawned_worker():
    systems = _systems()
    vi = core.MidpointVI(core.load_system("cartpole.yaml"), 0.01)
    problem = _problem(vi)
    linearizer = pendulum()
    before = _evaluate(systems, vi, problem, linearizer)
    payload = pickle.dumps((systems, vi, problem, linearizer))
    assert len(payload) < 2_000_000, len(payload)       # a description, not compiled arrays
    # in this process
    _assert_same(before, _evaluate(*pickle.loads(payload)))
    # in a fresh interpreter (spawn), the kernels from the on-disk cache
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        after, compiled = pool.apply(_worker, (payload,))
    _assert_same(before, after)
    assert compiled == [], f"compiled in the worker despite a warm cache: {compiled}"


def test_a_system_pickled_before_compiling_and_after_a_change():
    s = core.load_system("cartpole.yaml")
    fresh = pickle.loads(pickle.dumps(s))                    # never compiled
    q, v, u = _point(s, 2)
    assert np.array_equal(fresh.qdd(q, v, u), s.qdd(q, v, u))
    s.add_damping(s.config_names[0], 0.3)                   # a change after compiling: pickled as changed
    back = pickle.loads(pickle.dumps(s))
    assert np.array_equal(back.qdd(q, v, u), s.qdd(q, v, u))
    assert not np.array_equal(back.qdd(q, v, u), fresh.qdd(q, v, u))
    assert back.config_names == s.config_names and back.input_names == s.input_names


def test_settings_and_results_survive_the_trip():
    vi = core.MidpointVI(core.load_system("cartpole.yaml"), 0.02, tolerance=1e-10, max_iterations=30,
                         condition_limit=1e10)
    back = pickle.loads(pickle.dumps(vi))
    assert (back.dt, back.tolerance, back.max_iterations, back.condition_limit) == (0.02, 1e-10, 30, 1e10)
    problem = _problem(vi)
    result = problem.solve(core.OptimizerOptions(max_iterations=3))
    again = pickle.loads(pickle.dumps(result))
    assert np.array_equal(again.x, result.x) and repr(again.history) == repr(result.history)  # (NaN slopes)
    solved = pickle.loads(pickle.dumps(problem)).solve(core.OptimizerOptions(max_iterations=3))
    assert np.array_equal(solved.u, result.u) and solved.cost == result.cost


def test_a_linearizer_of_a_lambda_says_what_does_not_pickle():
    lin = pendulum(f_0=lambda q, qd, t, p: (qd, np.zeros((2, 2)), np.eye(2)))
    with pytest.raises((pickle.PicklingError, AttributeError), match="lambda"):
        pickle.dumps(lin)


def test_a_sympy_linearizer_pickles_by_its_sympy_description():
    from sympy_systems import cart_pole_kane

    from core.general.sympy_bridge import from_sympy
    system = cart_pole_kane()
    lin = from_sympy(system.method, **system.kwargs)
    back = pickle.loads(pickle.dumps(lin))
    point = system.random_point(np.random.default_rng(3))
    for a, b in zip(lin.linearize(point, A_and_B=True), back.linearize(point, A_and_B=True), strict=True):
        assert np.array_equal(a, b)
    assert back.sources == lin.sources and back.sympy_linearizer is None
    assert back.complete_op_point(point).keys() == lin.complete_op_point(point).keys()
    numba_lin = from_sympy(system.method, backend="numba", **system.kwargs)
    again = pickle.loads(pickle.dumps(numba_lin))
    for a, b in zip(numba_lin.linearize(point), again.linearize(point), strict=True):
        assert np.array_equal(a, b)
