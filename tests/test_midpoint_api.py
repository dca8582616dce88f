"""MidpointVI's public API beyond step and linearize: the exact state transforms, the discrete
Legendre transform, DEL inverse dynamics, one call that steps and linearizes, linearization
along a trajectory (serial and parallel) and the tracking law; each against an independent
route (finite differences, the integrator itself, the definitions)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import core
from core.examples import chain, marionette, marionette_rest_state

from randsys import fd

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "core", "data")


@pytest.fixture(scope="module")
def puppet():
    s = marionette()
    vi = core.MidpointVI(s, 0.01)
    return vi, marionette_rest_state(s)


@pytest.fixture(scope="module")
def arm():
    return core.MidpointVI(chain(4), 0.01)


def test_state_transforms_are_exact_inverses(puppet):
    vi, q = puppet
    rng = np.random.default_rng(0)
    dq = rng.standard_normal(vi.nq)
    x = vi.discrete_state(q, dq)
    q_, p, v = vi.split_state(x)
    np.testing.assert_array_equal(q_, q)
    np.testing.assert_allclose(p, vi.system.momentum(q, dq)[vi.dynamic_index], rtol=1e-14)
    np.testing.assert_array_equal(v, dq[vi.kinematic_index])
    q2, dq2 = vi.continuous_state(x)
    np.testing.assert_array_equal(q2, q)
    np.testing.assert_allclose(dq2, dq, rtol=1e-10, atol=1e-10)
    X = vi.discrete_states(np.stack([q, q]), np.stack([dq, 2 * dq]))
    np.testing.assert_array_equal(X[0], x)
    np.testing.assert_allclose(X[1], vi.discrete_state(q, 2 * dq), rtol=1e-15)


def test_state_jacobian_against_finite_differences(puppet):
    vi, q = puppet
    dq = np.random.default_rng(1).standard_normal(vi.nq)
    n = vi.nq
    J = vi.state_jacobian(q, dq)
    J_fd = fd(lambda z: vi.discrete_state(z[:n], z[n:]), np.concatenate([q, dq]))
    np.testing.assert_allclose(J, J_fd, rtol=1e-6, atol=1e-6 * np.abs(J).max())


def test_discrete_momenta_are_the_integrators_momenta(arm):
    vi = arm
    rng = np.random.default_rng(2)
    x = vi.discrete_state(0.3 * rng.standard_normal(vi.nq), rng.standard_normal(vi.nq))
    U = 0.5 * rng.standard_normal((5, vi.nu))
    q0, p0, _ = vi.split_state(x)
    Q, P, _ = vi.simulate(q0, p0, U)
    np.testing.assert_allclose(vi.discrete_momenta(Q, p0), P, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(vi.discrete_momentum(Q[2], Q[3]), P[3], rtol=1e-9, atol=1e-9)


def test_inverse_dynamics_recovers_the_inputs_of_a_simulation(arm):
    vi = arm
    rng = np.random.default_rng(3)
    U = rng.standard_normal((20, vi.nu))
    p0 = np.zeros(vi.nd)
    Q, P, _ = vi.simulate(np.zeros(vi.nq), p0, U)
    U2, P2, resid = vi.inverse_dynamics(Q, p0)
    np.testing.assert_allclose(U2, U, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(P2, P, rtol=1e-9, atol=1e-9)
    assert resid.max() < 1e-10
    with pytest.raises(ValueError, match="configurations must have shape"):
        vi.inverse_dynamics(Q[:, :2], p0)


@pytest.mark.parametrize("second_order", [False, True])
def test_step_linearize_is_step_and_linearize_from_one_solve(puppet, second_order):
    vi, q = puppet
    x = vi.state(q, np.zeros(vi.nd))
    u = np.concatenate([np.zeros(vi.system.nu), q[vi.kinematic_index] + 1e-3])
    got = vi.step_linearize(x, u, second_order=second_order)
    want = (vi.step(x, u),) + (vi.linearize2(x, u) if second_order else vi.linearize(x, u))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_linearize_trajectory_serial_equals_parallel(puppet):
    vi, q = puppet
    N = 6
    X = np.tile(vi.state(q, np.zeros(vi.nd)), (N + 1, 1))
    U = np.tile(np.concatenate([np.zeros(vi.system.nu), q[vi.kinematic_index]]), (N, 1))
    U[:, vi.system.nu:] += 1e-3 * np.arange(N)[:, None]
    serial = vi.linearize_trajectory(X, U, second_order=True, threads=1)
    parallel = vi.linearize_trajectory(X, U, second_order=True, threads=2)
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a, b)
    A3, B3 = vi.linearize(X[3], U[3])
    np.testing.assert_array_equal(serial[0][3], A3)
    np.testing.assert_array_equal(serial[1][3], B3)


def test_feedback_is_the_tracking_law_on_the_exact_state(arm):
    vi = arm
    rng = np.random.default_rng(4)
    q, dq = rng.standard_normal(vi.nq), rng.standard_normal(vi.nq)
    x_ref, u_ref = rng.standard_normal(vi.nx), rng.standard_normal(vi.nu)
    K = rng.standard_normal((vi.nu, vi.nx))
    u, x = vi.feedback(q, dq, x_ref, u_ref, K)
    np.testing.assert_allclose(x, vi.discrete_state(q, dq), rtol=1e-15)
    np.testing.assert_allclose(u, u_ref - K @ (x - x_ref), rtol=1e-12, atol=1e-12)
    u_bad, _ = vi.feedback(q, dq, x_ref, np.full(vi.nu, np.inf), K)
    assert u_bad is None
    # a gain schedule's read-only arrays: the same law, and the same compiled kernel (one
    # compilation less on a cold cache)
    from core.discrete.tracking import feedback
    compiled = len(feedback.signatures)
    frozen = [a.copy() for a in (x_ref, u_ref, K)]
    for a in frozen:
        a.setflags(write=False)
    u_frozen, _ = vi.feedback(q, dq, *frozen)
    np.testing.assert_array_equal(u_frozen, u)
    assert len(feedback.signatures) == compiled
    assert x_ref.flags.writeable and K.flags.writeable      # the caller's arrays are left as they were


def test_the_integrator_is_a_discrete_system(arm):
    """A MidpointVI is a core.datatypes.DiscreteSystem: ``step`` gives the DEL solution (its momentum is
    the discrete Legendre transform of the two configurations), the same with the
    multipliers asked for (none: no constraints), and ``linearize`` is ``step``'s derivative."""
    assert isinstance(arm, core.datatypes.DiscreteSystem) and not arm.constrained
    rng = np.random.default_rng(5)
    x0, u = arm.discrete_state(rng.uniform(-1, 1, arm.nq), rng.uniform(-1, 1, arm.nq)), rng.uniform(-1, 1, arm.nu)
    x, lam = arm.step(x0, u, multipliers=True)
    assert lam.shape == (0,)
    np.testing.assert_array_equal(x, arm.step(x0, u))
    free = arm.step(x0, np.zeros(arm.nu))          # unforced: p1 = D2 L_d(q0, q1)
    q0, q1, p1 = x0[:arm.nq], free[:arm.nq], free[arm.nq:arm.nq + arm.nd]
    np.testing.assert_allclose(p1, arm.discrete_momentum(q0, q1), rtol=1e-9, atol=1e-9)
    A, B = arm.linearize(x0, u)
    h = 1e-6
    for j in range(arm.nx):
        e = np.zeros(arm.nx)
        e[j] = h
        np.testing.assert_allclose((arm.step(x0 + e, u) - arm.step(x0 - e, u)) / (2 * h), A[:, j],
                                   rtol=1e-6, atol=1e-6)


def test_an_overflowing_step_raises_instead_of_returning_nan():
    # the cart-pole with a pole momentum of 1e200: the solve's iterate overflows to NaN momenta
    vi = core.MidpointVI(core.load_system(os.path.join(CONFIG, "cartpole.yaml")), 0.01)
    x = np.array([0.0, 0.0, 1e200, 0.0])
    with pytest.raises(core.errors.IntegratorError, match="overflowed"):
        vi.step(x, np.zeros(vi.nu))
    X = np.zeros((3, vi.nx))
    X[1] = x
    with pytest.raises(core.errors.IntegratorError, match="at step 1"):
        vi.linearize_trajectory(X, np.zeros((2, vi.nu)))


def test_warm_up_parts_and_the_second_process():
    """``warm_up`` runs its parts; ``processes=2`` hands the integrator's kernels to ``python -m
    core.warmup discrete`` only while the cache is cold (here it is warm: nothing is started)."""
    import subprocess
    import sys

    from core.cache import is_cached
    from core.discrete.second_order import second_order

    vi = core.MidpointVI(chain(2), 0.01)
    vi.warm_up(part="continuous")
    vi.warm_up(processes=2)
    assert is_cached(second_order)
    with pytest.raises(ValueError, match="part must be"):
        vi.warm_up(part="everything")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = [sys.executable, "-m", "core.warmup"]
    ok = subprocess.run(run + ["discrete"], cwd=root, capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(run + ["nothing"], cwd=root, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "usage: python -m core.warmup [--work DIR | --team N] PART" in bad.stderr


def test_warm_up_parts_shared_by_a_team(tmp_path):
    """``core.warmup``: every part names kernels that exist; a warm cache has none pending;
    ``work`` takes each part once whatever the number of members, and ``run_shared`` on a warm
    cache runs everything here (no other process)."""
    from core import warmup

    for part, names in warmup.PARTS.items():
        assert names and all(callable(warmup.kernel(n)) for n in names), part
    warmup.run(warmup.CONTROL_PARTS)                        # (compiles what no test before did)
    assert warmup.pending(warmup.CONTROL_PARTS) == []
    parts = ["lqr", "state"]
    assert warmup.work(str(tmp_path), parts) == parts
    assert warmup.work(str(tmp_path), parts) == []          # all taken (and done): nothing left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lqr.done", "lqr.taken", "state.done", "state.taken"]
    assert warmup.run_shared(warmup.CONTROL_PARTS) < 60.0
    from mechnode.logic.plant import CONTROL_PARTS, REST_PARTS  # (the node names them: core's public API only)
    assert CONTROL_PARTS == warmup.CONTROL_PARTS and set(REST_PARTS) <= set(warmup.PARTS)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    team = subprocess.run([sys.executable, "-m", "core.warmup", "--team", "2", *CONTROL_PARTS], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert team.returncode == 0 and team.stdout.split() == ["0"] and team.stderr == "", team.stderr


def _marionette_points(vi, q, count=3):
    rng = np.random.default_rng(7)
    xs = [vi.state(q, 1e-3 * rng.standard_normal(vi.nd)) for _ in range(count)]
    us = [np.concatenate([0.1 * rng.standard_normal(vi.system.nu), q[vi.kinematic_index] + 1e-3 * rng.random()])
          for _ in range(count)]
    return xs, us


def test_the_direct_entries_equal_the_checked_path(puppet):
    """step, linearize, step_linearize and linearize2 with a costate run the entry kernels
    (core.discrete.entry); lists and read-only arrays are converted once and run them too:
    the same numbers as the checked path."""
    vi, q = puppet
    xs, us = _marionette_points(vi, q)
    for x, u in zip(xs, us, strict=True):
        x1, A, B = vi.step_linearize(x, u)
        np.testing.assert_array_equal(vi.step(x, u), x1)
        np.testing.assert_array_equal(vi.step(x.tolist(), u.tolist()), x1)
        A2, B2 = vi.linearize(x, u)
        np.testing.assert_array_equal(A2, A)
        np.testing.assert_array_equal(B2, B)
        ro = x.copy()
        ro.flags.writeable = False
        np.testing.assert_array_equal(vi.linearize(ro, u)[0], A)
        np.testing.assert_array_equal(vi.step_linearize(x.tolist(), u.tolist())[1], A)
        lam = np.linspace(-1.0, 1.0, vi.nx)
        W = vi.linearize2(x, u, costate=lam)[2]
        np.testing.assert_array_equal(vi.linearize2(x.tolist(), u.tolist(), costate=lam)[2], W)
        np.testing.assert_array_equal(vi.linearize2(ro, u, costate=lam)[2], W)
        np.testing.assert_allclose(W, np.einsum("i,iab->ab", lam, vi.linearize2(x, u)[2]), rtol=1e-9, atol=1e-9)
    # the record remembers its last solve: linearize after step at the same point, no re-solve
    rec = vi._call()[0]
    x1 = vi.step(xs[0], us[0])
    rec.q1[:] = 99.0        # seen only if the next call at the same point does not solve again
    assert np.all(vi.step(xs[0], us[0])[:vi.nq] == 99.0)
    np.testing.assert_array_equal(vi.step(xs[1], us[1]), vi.step_linearize(xs[1], us[1])[0])
    np.testing.assert_array_equal(vi.step(xs[0], us[0]), x1)


def test_settings_are_checked_and_take_effect_at_once():
    s = chain(3)
    vi, fresh = core.MidpointVI(s, 0.01), core.MidpointVI(s, 0.02, tolerance=1e-12)
    x = vi.discrete_state(np.array([0.3, -0.2, 0.1]), np.array([0.1, 0.0, -0.2]))
    u = np.array([0.1, 0.2, 0.3])
    vi.step(x, u)
    vi.step_linearize(x, u)         # (both remember the solve: neither may reuse it below)
    vi.dt, vi.tolerance = 0.02, 1e-12
    np.testing.assert_array_equal(vi.step(x, u), fresh.step(x, u))
    np.testing.assert_array_equal(vi.step_linearize(x, u)[0], fresh.step(x, u))
    np.testing.assert_array_equal(vi.linearize(x, u)[0], fresh.linearize(x, u)[0])
    for name, bad in (("dt", -0.01), ("tolerance", float("nan")), ("max_iterations", 2.5),
                      ("condition_limit", 0.0)):
        with pytest.raises(ValueError, match=name):
            setattr(vi, name, bad)
    assert vi.dt == 0.02 and vi.max_iterations == 50
