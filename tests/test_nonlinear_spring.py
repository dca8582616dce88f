"""Polynomial springs on a variable (``add_spring("config", polynomial=[c0, c1, ...])``, trep's
``NonlinearConfigSpring``): force ``-sum_k c_k d^k``, potential ``sum_k c_k d^(k+1)/(k+1)``,
``d = q - rest``. The polynomial [0, k] is the linear spring of stiffness k, in the continuous
dynamics and in the integrator's step and first- and second-order linearizations; a cubic and
quartic one against central finite differences (also on a coupled coordinate) and a hand value;
bad specifications refused with the spring named; the YAML key. The continuous second order
(``System.linearize2``) on unconstrained systems too."""
from __future__ import annotations

import numpy as np
import pytest

import core
from core.errors import ModelError
from core.tree.kinematics import create_data
from core.tree.lagrangian import create_derivs, prepare, third_order

from randsys import Reference, assert_close, fd, random_system

SEEDS = [3, 8, 11, 200]
QUARTIC = [0.3, 2.0, -1.5, 4.0, 0.7]      # c0..c4: a force polynomial of degree 4


def _system(seed, **spring):
    """A random system with a spring on the deepest variable (moved by the most joints above
    it); returns ``(system, q, dq, u, name)``."""
    s, q, dq, u = random_system(seed, n_frames=(15, 15) if seed >= 200 else (4, 12), com=True)
    name = s.config_names[int(np.argmax(s.model.joint_depth))]
    if spring:
        s.add_spring("config", config=name, rest=0.2, **spring)
    return s, q, dq, u, name


@pytest.mark.parametrize("seed", SEEDS)
def test_polynomial_0_k_is_the_linear_spring(seed):
    lin, q, dq, u, _ = _system(seed, stiffness=3.5)
    poly, *_ = _system(seed, polynomial=[0.0, 3.5])
    free, *_ = _system(seed)
    assert np.abs(lin.qdd(q, dq, u) - free.qdd(q, dq, u)).max() > 1e-6     # (the spring matters)
    assert_close(poly.qdd(q, dq, u), lin.qdd(q, dq, u), "qdd", tol=1e-12)
    for a, b, what in zip(poly.linearize(q, dq, u, residual_limit=None),
                          lin.linearize(q, dq, u, residual_limit=None), "AB", strict=True):
        assert_close(a, b, f"continuous {what}", tol=1e-12)
    d3p, d3l = poly.lagrangian_derivatives(q, dq, 3), lin.lagrangian_derivatives(q, dq, 3)
    for name in ("L", "Lq", "Lqq", "Lqqq"):
        assert_close(getattr(d3p, name), getattr(d3l, name), name, tol=1e-12)
    vp, vl = core.MidpointVI(poly, 0.01), core.MidpointVI(lin, 0.01)
    x = vp.discrete_state(q, dq)
    assert_close(vp.step(x, u), vl.step(x, u), "VI step", tol=1e-12)
    for a, b, what in zip(vp.linearize(x, u), vl.linearize(x, u), "AB", strict=True):
        assert_close(a, b, f"VI {what}", tol=1e-12)
    for a, b, what in zip(vp.linearize2(x, u), vl.linearize2(x, u), "ABH", strict=True):
        assert_close(a, b, f"VI second order {what}", tol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_quartic_spring_derivatives_match_finite_differences(seed):
    s, q, dq, u, name = _system(seed, polynomial=QUARTIC)
    linear, *_ = _system(seed, polynomial=QUARTIC[:2])
    n = s.nq
    # the terms of degree >= 2 matter
    assert np.abs(s.qdd(q, dq, u) - linear.qdd(q, dq, u)).max() > 1e-6
    # the Lagrangian against the reference model's, written independently
    spec = dict(s.spec, springs=s.spec["springs"] + [
        {"type": "config", "config": name, "polynomial": QUARTIC, "rest": 0.2}])
    assert abs(s.lagrangian_derivatives(q, dq, 0).L[0] - Reference(spec).lagrangian(q, dq)) < 1e-10
    # L and its q-derivatives up to third order
    d = s.lagrangian_derivatives(q, dq, 3)
    d2 = lambda x: s.lagrangian_derivatives(x, dq, 2)   # noqa: E731
    assert_close(d.Lq, fd(lambda x: d2(x).L[0], q), "Lq")
    assert_close(d.Lqq, fd(lambda x: d2(x).Lq, q), "Lqq")
    assert_close(d.Lqqq, fd(lambda x: d2(x).Lqq, q), "Lqqq")
    i = s.config_index(name)
    assert abs(d.Lqqq[i, i, i] - linear.lagrangian_derivatives(q, dq, 3).Lqqq[i, i, i]) > 1e-3
    # the directional third order (no tensors) is the tensors contracted
    rng = np.random.default_rng(seed + 11)
    wq, wv = rng.normal(size=n), rng.normal(size=n)
    model = s.model
    data, der = create_data(model), create_derivs(n, False)
    prepare(model, data, q, dq)
    third_order(model, data, q, False, wq, wv, der)
    assert_close(der.dLqq, d.Lqqq @ wq + d.Lqqv @ wv, "dLqq", tol=1e-10)
    # the continuous dynamics
    A, B = s.linearize(q, dq, u, residual_limit=None)
    x0 = np.concatenate([q, dq])
    assert_close(A[n:], fd(lambda x: s.qdd(x[:n], x[n:], u), x0), "continuous A")
    assert_close(B[n:], fd(lambda v: s.qdd(q, dq, v), u), "continuous B")
    # the integrator: first order against the step, second order against the first
    vi = core.MidpointVI(s, 0.01)
    x = vi.discrete_state(q, dq)
    nx = x.size
    A1, B1, H = vi.linearize2(x, u)
    assert_close(A1, fd(lambda y: vi.step(y, u), x), "VI A")
    assert_close(B1, fd(lambda v: vi.step(x, v), u), "VI B")
    z = np.concatenate([x, u])
    assert_close(H[:, :nx, :], fd(lambda z_: vi.linearize(z_[:nx], z_[nx:])[0], z), "VI H (dA)", tol=1e-6)
    assert_close(H[:, nx:, :], fd(lambda z_: vi.linearize(z_[:nx], z_[nx:])[1], z), "VI H (dB)", tol=1e-6)


def _free(seed, **spring):
    """:func:`_system` without constraints (the continuous second order's plain case)."""
    s, q, dq, u = random_system(seed, n_frames=(4, 12), constraints=0, velocity_constraints=0, com=True)
    name = s.config_names[int(np.argmax(s.model.joint_depth))]
    s.add_spring("config", config=name, rest=0.2, **spring)
    return s, q, dq, u


@pytest.mark.parametrize("seed", [1, 2, 8])
def test_continuous_second_order_with_a_quartic_spring(seed):
    s, q, dq, u = _free(seed, polynomial=QUARTIC)
    n = s.nq
    A, B, H = s.linearize2(q, dq, u)
    _, _, H_lin = _free(seed, polynomial=QUARTIC[:2])[0].linearize2(q, dq, u)
    assert np.abs(H - H_lin).max() > 1e-6            # (the spring's third derivative matters)

    def first_order(z):
        A_, B_ = s.linearize(z[:n], z[n:2 * n], z[2 * n:], residual_limit=None)
        return np.hstack([A_, B_])
    assert_close(H, fd(first_order, np.concatenate([q, dq, u]), 1e-4), "continuous H", tol=1e-7)
    # [0, k] is the linear spring here too
    for a, b, what in zip(_free(seed, polynomial=[0.0, 3.5])[0].linearize2(q, dq, u),
                          _free(seed, stiffness=3.5)[0].linearize2(q, dq, u), "ABH", strict=True):
        assert_close(a, b, f"continuous second order {what}", tol=1e-12)


def _coupled(polynomial):
    """Two pendulums, the second turning -2 times the first plus 0.1, the spring on the coupled
    coordinate phi (its potential is a function of th through phi = -2 th + 0.1)."""
    s = core.System(gravity=[0.0, -9.81, 0.0])
    s.add_frame("a", rz="th")
    s.add_frame("A", parent="a", ty=-1.0, mass=1.0)
    s.add_frame("b", offset={"translation": [2.0, 0.0, 0.0]}, rz="phi")
    s.add_frame("B", parent="b", ty=-0.5, mass=3.0)
    s.add_mimic("phi", "th", -2.0, 0.1)
    s.add_input("torque", config="th")
    s.add_spring("config", config="phi", polynomial=polynomial, rest=-0.3)
    return s


def test_spring_on_a_coupled_coordinate():
    s = _coupled(QUARTIC)
    q, dq, u = np.array([0.3]), np.array([-0.7]), np.array([0.4])
    free = _coupled([0.0])
    # the spring's force on th: -dV/dphi * dphi/dth = 2 sum_k c_k d^k, d = phi - rest
    d = -2.0 * 0.3 + 0.1 + 0.3
    force = 2.0 * sum(c * d ** k for k, c in enumerate(QUARTIC))
    M = s.lagrangian_derivatives(q, dq).Lvv[0, 0]
    assert_close((s.qdd(q, dq, u) - free.qdd(q, dq, u)) * M, [force], "spring force on th", tol=1e-12)
    d3 = s.lagrangian_derivatives(q, dq, 3)
    assert_close(d3.Lqqq, fd(lambda x: s.lagrangian_derivatives(x, dq, 2).Lqq, q), "Lqqq")
    vi = core.MidpointVI(s, 0.01)
    x = vi.discrete_state(q, dq)
    nx = x.size
    z = np.concatenate([x, u])
    _, _, H = vi.linearize2(x, u)
    assert_close(H[:, :nx, :], fd(lambda z_: vi.linearize(z_[:nx], z_[nx:])[0], z), "VI H (dA)", tol=1e-6)
    _, _, Hc = s.linearize2(q, dq, u)
    first = lambda z_: np.hstack(s.linearize(z_[:1], z_[1:2], z_[2:]))   # noqa: E731
    assert_close(Hc, fd(first, np.concatenate([q, dq, u]), 1e-4), "continuous H", tol=1e-7)


def test_force_and_potential_by_hand():
    """One rotor (moment of inertia 0.1 about its axis), no gravity: M qdd = -sum c_k d^k."""
    c, rest = [0.5, 2.0, -1.0, 3.0], 0.2
    s = core.System(gravity=[0.0, 0.0, 0.0])
    s.add_frame("a", rz="th", mass=1.0, inertia=[0.1, 0.1, 0.1])
    s.add_spring("config", config="th", polynomial=c, rest=rest)
    # d = 0.5: F = -(0.5 + 1.0 - 0.25 + 0.375) = -1.625; V = 0.25 + 0.25 - 0.125/3 + 0.046875
    assert s.qdd([0.7], [0.0])[0] * 0.1 == pytest.approx(-1.625, rel=1e-12, abs=1e-12)
    assert s.energy([0.7], [0.0]) == pytest.approx(0.25 + 0.25 - 0.125 / 3 + 0.046875, rel=1e-12)
    # below rest (d = -0.5): F = -(0.5 - 1.0 - 0.25 - 0.375) = 1.125
    assert s.qdd([-0.3], [0.0])[0] * 0.1 == pytest.approx(1.125, rel=1e-12)
    # a positive c1 pulls back toward rest from either side
    s2 = core.System(gravity=[0.0, 0.0, 0.0])
    s2.add_frame("a", rz="th", mass=1.0, inertia=[0.1, 0.1, 0.1])
    s2.add_spring("config", config="th", polynomial=[0.0, 2.0], rest=rest)
    assert s2.qdd([rest + 0.1], [0.0])[0] < 0.0 < s2.qdd([rest - 0.1], [0.0])[0]
    assert s2.qdd([rest + 0.1], [0.0])[0] == pytest.approx(-2.0, rel=1e-12)


_SPEC = {"gravity": [0, 0, -9.8],
         "frames": [{"name": "a", "rz": "th"}, {"name": "b", "parent": "a", "tx": 1.0, "mass": 1.0}]}


@pytest.mark.parametrize("spring, message", [
    ({"stiffness": 1.0, "polynomial": [0, 1]}, r"spring 0 \(config\): give either stiffness .*not both "
                                               r"\(stiffness=1.0, polynomial=\[0, 1\]\)"),
    ({}, r"spring 0 \(config\): missing required key 'stiffness' \(linear\) or 'polynomial'"),
    ({"polynomial": []}, r"spring 0 \(config\): polynomial must be a non-empty list .*got \[\]"),
    ({"polynomial": [1.0, float("nan")]}, r"spring 0 \(config\)\.polynomial\[1\]: must be finite, got nan"),
    ({"polynomial": [float("inf")]}, r"spring 0 \(config\)\.polynomial\[0\]: must be finite, got inf"),
    ({"polynomial": "1, 2"}, r"spring 0 \(config\): polynomial must be .*got '1, 2'"),
    ({"polynomial": [[0, 1]]}, r"spring 0 \(config\): polynomial must be .*got \[\[0, 1\]\]"),
    ({"polynomial": [0, "k"]}, r"spring 0 \(config\)\.polynomial\[1\]: expected a number, got 'k'"),
    ({"polynomial": [0, True]}, r"spring 0 \(config\)\.polynomial\[1\]: expected a number, got True \(a boolean"),
    ({"stiffness": -1.0}, r"spring 0 \(config\)\.stiffness: must be non-negative"),
])
def test_bad_polynomial_springs_are_refused(spring, message):
    with pytest.raises(ModelError, match=message):
        core.load_system(dict(_SPEC, springs=[dict(type="config", config="th", **spring)]))
    s = core.load_system(_SPEC)
    s.add_spring("config", config="th", stiffness=1.0)
    with pytest.raises(ModelError, match=message.replace("spring 0", "spring 1")):
        s.add_spring("config", config="th", **spring)          # checked when added
    assert s.model.spring_coef.shape[0] == 1                  # and not added


def test_polynomial_on_a_frame_spring_is_refused():
    with pytest.raises(ModelError, match=r"spring 0 \(frames\): unknown key\(s\) \['polynomial'\]"):
        core.load_system(dict(_SPEC, springs=[{"type": "frames", "frame1": "b", "frame2": "world",
                                               "polynomial": [0, 1]}]))


def test_polynomial_spring_from_yaml():
    s = core.load_system("""
gravity: [0, 0, 0]
frames:
  - {name: cart, tx: x, mass: 2.0}
  - {name: pole, parent: cart, rz: th, mass: 0.5, inertia: [0.01, 0.01, 0.01]}
springs:
  - {type: config, config: x, polynomial: [0.0, 1.0, 0.0, 2.0], rest: 0.1}
  - {config: th, stiffness: 3.0}
""")
    np.testing.assert_array_equal(s.model.spring_coef, [[0.0, 1.0, 0.0, 2.0], [0.0, 3.0, 0.0, 0.0]])
    np.testing.assert_array_equal(s.model.spring_rest, [0.1, 0.0])
    # the cart (mass 2.5 with the pole, which sits on the axis) at x = 0.6: F = -(0.5 + 2 * 0.125)
    qdd = s.qdd([0.6, 0.0], [0.0, 0.0])
    assert qdd[0] == pytest.approx(-0.75 / 2.5, rel=1e-12)
    assert qdd[1] == 0.0
