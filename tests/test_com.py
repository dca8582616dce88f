"""Bodies whose centre of mass is off their frame's origin (``com``): exact values against the
independent numpy reference, exact derivatives against central finite differences.

The seeded random systems of ``randsys.py`` with ``com=True``: every massive frame (and some
massless ones) gets a random centre of mass; the inertia is about it. Checked: the mass matrix
and potential (values), the Lagrangian's derivatives to third order, the continuous ``A, B``
of ``System.linearize`` (finite differences of ``qdd``), and the variational integrator's first
and second order (finite differences of ``step`` and of ``linearize``).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from test_integrator import check_against_finite_differences

import core

from randsys import assert_close, fd, random_system

SEEDS = [300, 301, 302, 303, 304, 305]
CONSTRAINED = [310, 311, 312]


@functools.lru_cache(maxsize=None)
def case(seed: int):
    if seed in CONSTRAINED:
        return random_system(seed, com=True, n_frames=(5, 12), constraints=1 + seed % 2,
                             velocity_constraints=seed % 2)
    return random_system(seed, com=True, n_frames=(4, 12))


def off_manifold(seed: int):
    s, q0, dq0, u0 = case(seed)
    rng = np.random.default_rng(seed + 7)
    return s, q0 + 0.05 * rng.normal(size=q0.size), rng.normal(size=q0.size), u0 + rng.normal(size=u0.size)


def test_generator_offsets_the_centres_of_mass():
    for seed in SEEDS + CONSTRAINED:
        s = case(seed)[0]
        offsets = [f["com"] for f in s.spec["frames"] if "com" in f and f.get("mass", 0.0) > 0]
        assert offsets and min(np.linalg.norm(c) for c in offsets) > 0
        assert np.abs(s.model.frame_com).max() > 0.1


@pytest.mark.parametrize("seed", SEEDS + CONSTRAINED)
def test_values_match_reference(seed):
    s, q, dq, _ = off_manifold(seed)
    ref = s.reference
    d = s.lagrangian_derivatives(q, dq, 2)
    assert_close(d.Lvv, ref.mass_matrix(q), "M vs reference", tol=1e-12)
    assert_close(d.L[0], ref.lagrangian(q, dq), "L vs reference", tol=1e-12)
    assert_close(s.energy(q, dq), ref.energy(q, dq), "energy vs reference", tol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_lagrangian_derivatives(seed):
    s, q, dq, _ = off_manifold(seed)
    d = s.lagrangian_derivatives(q, dq, 3)

    def at(order):
        return lambda qq, vv: s.lagrangian_derivatives(qq, vv, order)

    L0, D1, D2 = at(0), at(1), at(2)
    assert_close(d.Lq, fd(lambda x: L0(x, dq).L[0], q), "Lq")
    assert_close(d.Lv, fd(lambda x: L0(q, x).L[0], dq), "Lv")
    assert_close(d.Lqq, fd(lambda x: D1(x, dq).Lq, q), "Lqq")
    assert_close(d.Lqv, fd(lambda x: D1(q, x).Lq, dq), "Lqv")
    assert_close(d.Lvv, fd(lambda x: D1(q, x).Lv, dq), "Lvv")
    assert_close(d.Lqqq, fd(lambda x: D2(x, dq).Lqq, q), "Lqqq")
    assert_close(d.Lqqv, fd(lambda x: D2(q, x).Lqq, dq), "Lqqv")
    assert_close(d.Lqvv, fd(lambda x: D2(q, x).Lqv, dq), "Lqvv")


def _check_linearization(s, q, dq, u):
    n = q.size
    A, B = s.linearize(q, dq, u, residual_limit=None)      # off the manifold too: the formula's derivative
    assert_close(A[n:, :n], fd(lambda x: s.qdd(x, dq, u), q), "d qdd / dq")
    assert_close(A[n:, n:], fd(lambda x: s.qdd(q, x, u), dq), "d qdd / d dq")
    assert_close(B[n:], fd(lambda x: s.qdd(q, dq, x), u), "d qdd / du")


@pytest.mark.parametrize("seed", SEEDS + CONSTRAINED)
def test_continuous_linearization(seed):
    _check_linearization(*case(seed))
    _check_linearization(*off_manifold(seed))


@pytest.mark.parametrize("seed", SEEDS[:3] + CONSTRAINED[:1])
def test_integrator_first_and_second_order(seed):
    s, q, dq, u = case(seed)
    if s.model.nv:
        pytest.fail("generator: the integrator case must have no velocity constraints")
    vi = core.MidpointVI(s, 0.01, tolerance=1e-13)
    x = vi.state(q, vi.momentum(q, dq))
    check_against_finite_differences(vi, x, u)


def test_com_key_equals_an_offset_point_mass_frame():
    """A body with ``com`` is the same system as a constant child frame at that point carrying
    the mass (the model a user had to write before)."""
    inertia = [[0.3, 0.02, -0.01], [0.02, 0.25, 0.03], [-0.01, 0.03, 0.2]]
    com = [0.1, -0.3, 0.2]
    a = core.load_system({"gravity": [0, -9.8, 1.0], "frames": [
        {"name": "l1", "rx": "q1", "offset": {"rotation": [0.3, 0.2, 0.1]}},
        {"name": "l2", "parent": "l1", "ry": "q2", "offset": {"translation": [0, 0.5, 0]},
         "mass": 2.0, "inertia": inertia, "com": com}]})
    b = core.load_system({"gravity": [0, -9.8, 1.0], "frames": [
        {"name": "l1", "rx": "q1", "offset": {"rotation": [0.3, 0.2, 0.1]}},
        {"name": "l2", "parent": "l1", "ry": "q2", "offset": {"translation": [0, 0.5, 0]}},
        {"name": "c2", "parent": "l2", "offset": {"translation": com}, "mass": 2.0, "inertia": inertia}]})
    q, dq, u = np.array([0.4, -0.7]), np.array([1.1, 0.3]), np.zeros(0)
    assert_close(a.qdd(q, dq, u), b.qdd(q, dq, u), "qdd", tol=1e-13)
    for x, y in zip(a.linearize(q, dq, u), b.linearize(q, dq, u), strict=True):
        assert_close(x, y, "A, B", tol=1e-13)


@pytest.mark.parametrize("com", [[0.0, 1.0], [float("nan"), 0, 0], "x"])
def test_bad_com_is_refused(com):
    s = core.System()
    with pytest.raises(core.errors.ModelError, match="'a'.*com"):
        s.add_frame("a", rz="q", mass=1.0, com=com)


def test_impossible_inertia_is_refused():
    """Issue 19, item 5: principal moments must satisfy the triangle inequality (refused under
    the strict inertia policy; the default loads it with a warning, see test_model.py)."""
    s = core.System(inertia="strict")
    with pytest.raises(core.errors.ModelError, match=r"frame 'link'.*triangle inequality"):
        s.add_frame("link", rz="q", mass=1.0, inertia=[0.1, 0.1, 5.0])
    R = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    with pytest.raises(core.errors.ModelError, match=r"frame 'rotated'.*triangle inequality"):
        s.add_frame("rotated", rz="q2", mass=1.0, inertia=(R @ np.diag([0.1, 0.1, 5.0]) @ R.T).tolist())
    s.add_frame("rod", rz="q3", mass=1.0, inertia=[0.0, 1.0, 1.0])     # a thin rod: the limit case
    s.add_frame("plate", rz="q4", mass=1.0, inertia=[1.0, 2.0, 3.0])   # a thin plate
    with pytest.raises(core.errors.ModelError, match="frames\\[0\\]|'link'"):
        core.load_system({"frames": [{"name": "link", "rz": "q", "mass": 1.0, "inertia": [0.1, 0.1, 5.0]}]},
                         inertia="strict")
    with pytest.warns(core.errors.InertiaWarning, match=r"frame 'link'.*triangle inequality"):
        core.load_system({"frames": [{"name": "link", "rz": "q", "mass": 1.0, "inertia": [0.1, 0.1, 5.0]}]})
