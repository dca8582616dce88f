"""Constant wrenches (``System.add_wrench``, trep's wrenches with constant components): the
same as an input wrench at that frame held at those values, in the continuous dynamics and in
the integrator's step and first- and second-order linearizations; their derivatives against
central finite differences; bad specifications refused with the element named."""
from __future__ import annotations

import numpy as np
import pytest

import core
from core.errors import ModelError

from randsys import assert_close, fd, random_system

SEEDS = [3, 8, 11, 200]


def _pair(seed):
    """(system with a constant wrench, twin with that wrench as six extra inputs, state, u, w)."""
    systems = []
    for twin in (False, True):
        s, q, dq, u = random_system(seed, n_frames=(15, 15) if seed >= 200 else (4, 12), com=True)
        model = s.model          # the frame below the deepest joint: moved by the most variables
        depth = [model.joint_depth[j] if j >= 0 else -1 for j in model.frame_joint]
        frame = s.frame_names[int(np.argmax(depth))]
        w = np.random.default_rng(seed + 5).normal(size=6)
        if twin:
            s.add_input("wrench", frame=frame, name="w")
        else:
            s.add_wrench(frame, w)
        systems.append(s)
    return systems[0], systems[1], q, dq, u, w


@pytest.mark.parametrize("seed", SEEDS)
def test_a_constant_wrench_is_an_input_wrench_held_fixed(seed):
    const, twin, q, dq, u, w = _pair(seed)
    uw = np.concatenate([u, w])
    m = u.shape[0]
    # (the wrench matters: the twin without it moves differently)
    assert np.abs(const.qdd(q, dq, u) - twin.qdd(q, dq, np.concatenate([u, np.zeros(6)]))).max() > 1e-6
    assert_close(const.qdd(q, dq, u), twin.qdd(q, dq, uw), "qdd", tol=1e-11)
    A, B = const.linearize(q, dq, u, residual_limit=None)
    At, Bt = twin.linearize(q, dq, uw, residual_limit=None)
    assert_close(A, At, "A", tol=1e-11)
    assert_close(B, Bt[:, :m], "B", tol=1e-11)
    vi, vt = core.MidpointVI(const, 0.01), core.MidpointVI(twin, 0.01)
    x = vi.discrete_state(q, dq)
    assert_close(vi.step(x, u), vt.step(x, uw), "step", tol=1e-11)
    A1, B1, H1 = vi.linearize2(x, u)
    At1, Bt1, Ht1 = vt.linearize2(x, uw)
    nz = x.shape[0] + m
    keep = np.r_[0:nz]
    assert_close(A1, At1, "VI A", tol=1e-10)
    assert_close(B1, Bt1[:, :m], "VI B", tol=1e-10)
    assert_close(H1, Ht1[:, keep][:, :, keep], "VI H", tol=1e-9)


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_constant_wrench_derivatives_match_finite_differences(seed):
    const, _, q, dq, u, _ = _pair(seed)
    n = const.nq
    A, _ = const.linearize(q, dq, u, residual_limit=None)
    x0 = np.concatenate([q, dq])
    f = lambda x: const.qdd(x[:n], x[n:], u)  # noqa: E731
    assert_close(A[n:], fd(f, x0), "continuous A")
    vi = core.MidpointVI(const, 0.01)
    x = vi.discrete_state(q, dq)
    Avi, _ = vi.linearize(x, u)
    assert_close(Avi, fd(lambda y: vi.step(y, u), x), "VI A")


def test_constant_wrench_from_yaml_and_refusals():
    spec = {"gravity": [0, 0, -9.8],
            "frames": [{"name": "a", "rz": "q0"}, {"name": "b", "parent": "a", "tx": 1.0, "mass": 1.0}],
            "wrenches": [{"frame": "b", "wrench": [0, 1.0, 0, 0, 0, 0], "name": "push"}]}
    s = core.load_system(spec)
    # a 1 N force along b's y axis at 1 m: 1 N m about z, with no gravity moment about z
    assert s.qdd([0.0], [0.0])[0] == pytest.approx(1.0, rel=1e-12)
    for wrench in ([1, 2, 3], [0, 0, 0, 0, 0, np.nan], "up"):
        with pytest.raises(ModelError, match="wrench 0 \\('push'\\): wrench must be six finite numbers"):
            core.load_system(dict(spec, wrenches=[{"frame": "b", "wrench": wrench, "name": "push"}]))
    with pytest.raises(ModelError, match="world frame"):
        core.load_system(dict(spec, wrenches=[{"frame": "world", "wrench": [0] * 6}]))
    with pytest.raises(ModelError, match="wrenches\\[0\\]: needs 'frame' and 'wrench'"):
        core.load_system(dict(spec, wrenches=[{"frame": "b"}]))
