"""Linear dampers between two frames (``System.add_damper``, trep's ``LinearDamper``): the force
``-c xdot`` along the line between the frame origins, ``x = |p1 - p2|``, i.e. the generalized
force ``F = -c xdot dx/dq``.

The force against the virtual-work reference of ``randsys`` and a hand-solved cart; the power
it takes from a conservative system against the rate of the energy along the motion; its exact
derivatives (``Fq, Fv, Fqq, Fqv``), the continuous first and second order (``linearize``,
``linearize2``) and the integrator's step and first and second order against central finite
differences, on random trees (free and constrained, a 15-frame tree whose DEL Newton matrix
would otherwise take the tree LU) and on a coupled (mimic) system; the YAML key and the
refusals, each naming the damper."""
from __future__ import annotations

import numpy as np
import pytest

import core
from core.discrete.step import sparse_newton
from core.errors import ModelError

from randsys import (
    Reference,
    assert_close,
    continuous_checks,
    coupled_two_links,
    discrete_checks,
    fd,
    fd_along,
    force_terms,
    random_system,
)

FREE = [3, 8, 11]
CONSTRAINED = [104, 115, 121]


def _damped(seed, *, constraints=0, velocity_constraints=0, n_frames=(4, 12), count=2, **kw):
    """A random system with ``count`` dampers between a moving frame and the world or another
    frame, at least 0.3 apart at ``q`` and moving apart or together at ``dq`` (``|xdot| > 0.1``);
    the reference knows them."""
    s, q, dq, u = random_system(seed, constraints=constraints, velocity_constraints=velocity_constraints,
                                n_frames=n_frames, com=True, **kw)
    ref = s.reference
    kin = ref.poses(q)
    p = kin[1]
    names = [f["name"] for f in s.spec["frames"]]
    moving = [f for f in names if ref.joints_above(f)]
    rng = np.random.default_rng(seed + 77)
    dampers = []
    for _ in range(500):
        if len(dampers) == count:
            break
        a, b = moving[int(rng.integers(len(moving)))], (["world"] + names)[int(rng.integers(len(names) + 1))]
        w = p[a] - p[b]
        if a == b or np.linalg.norm(w) < 0.3:
            continue
        xdot = w @ (ref.point_jacobian(q, a, kin=kin) - ref.point_jacobian(q, b, kin=kin)) @ dq / np.linalg.norm(w)
        if abs(xdot) > 0.1:
            dampers.append({"frame1": a, "frame2": b, "coefficient": float(rng.uniform(0.5, 3.0))})
    assert len(dampers) == count, f"seed {seed}: no pair of frames moving apart"
    for d in dampers:
        s.add_damper(d["frame1"], d["frame2"], d["coefficient"])
    s.spec = dict(s.spec, dampers=dampers)
    s.reference = Reference(s.spec)
    return s, q, dq, u


@pytest.mark.parametrize("seed", FREE + CONSTRAINED)
def test_force_is_the_virtual_work_reference(seed):
    s, q, dq, u = _damped(seed, constraints=0 if seed in FREE else 2)
    F = force_terms(s, q, dq, u, 0)[0]
    assert_close(F, s.reference.generalized_force(q, dq, u), "F vs virtual work", tol=1e-12)
    # (the dampers matter: the reference without them differs)
    bare = Reference(dict(s.spec, dampers=[]))
    assert np.abs(F - bare.generalized_force(q, dq, u)).max() > 1e-3


def test_a_cart_by_hand():
    """A cart on x (mass 2) tied by a damper (c = 0.7) to a world point 1 m off its line: the
    distance is sqrt(x^2 + 1), so F = -c x^2 / (x^2 + 1) dx/dt."""
    s = core.System(gravity=[0.0, 0.0, -9.81])
    s.add_frame("cart", tx="x", mass=2.0)
    s.add_frame("post", offset={"translation": [0.0, 1.0, 0.0]})
    s.add_damper("cart", "post", 0.7)
    for x, v in ((0.8, 1.3), (-2.0, 0.4), (0.0, 5.0)):
        assert s.qdd([x], [v])[0] == pytest.approx(-0.7 * x * x / (x * x + 1.0) * v / 2.0, rel=1e-14, abs=1e-15)
    # on the damper's line the force is -c dx/dt
    line = core.System(gravity=[0.0, 0.0, -9.81])
    line.add_frame("cart", tx="x", mass=2.0)
    line.add_damper("world", "cart", 0.7)
    assert line.qdd([1.5], [0.9])[0] == pytest.approx(-0.7 * 0.9 / 2.0, rel=1e-14)


@pytest.mark.parametrize("seed", FREE)
def test_power_taken_from_a_conservative_system(seed):
    """Without inputs and joint damping the energy changes only by the dampers' power:
    ``dE/dt = F . dq = -sum c xdot^2``, with ``dE/dt`` by finite differences of the energy along
    the motion and ``xdot`` by finite differences of the reference's distances."""
    s, q, dq, _ = _damped(seed, forces=False, damping=False)
    u = np.zeros(0)
    qdd = s.qdd(q, dq, u)
    dE = fd_along(lambda t: s.energy(q + t * dq + 0.5 * t * t * qdd, dq + t * qdd), 1e-4)
    ref = s.reference

    def distances(t):
        _, p, _ = ref.poses(q + t * dq)
        return np.array([np.linalg.norm(p[d["frame1"]] - p[d["frame2"]]) for d in s.spec["dampers"]])

    xdot = fd_along(distances, 1e-5)
    power = -sum(d["coefficient"] * xd ** 2 for d, xd in zip(s.spec["dampers"], xdot, strict=True))
    assert power < -1e-3
    assert dE == pytest.approx(power, rel=1e-7)


@pytest.mark.parametrize("seed", FREE + CONSTRAINED)
def test_force_derivatives_match_finite_differences(seed):
    s, q, dq, u = _damped(seed, constraints=0 if seed in FREE else 2)
    F, Fq, Fv, Fu, Fqq, Fqv, Fqu = force_terms(s, q, dq, u, 2)
    assert_close(F, force_terms(s, q, dq, u, 0)[0], "F at order 0 vs order 2", tol=1e-14)
    assert_close(Fq, fd(lambda x: force_terms(s, x, dq, u, 0)[0], q), "Fq")
    assert_close(Fv, fd(lambda x: force_terms(s, q, x, u, 0)[0], dq), "Fv")
    assert_close(Fqq, fd(lambda x: force_terms(s, x, dq, u, 1)[1], q), "Fqq")
    assert np.abs(Fqv).max() > 1e-2 and np.abs(Fqq).max() > 1e-2     # (the checks can fail)
    assert_close(Fqv, fd(lambda x: force_terms(s, q, x, u, 1)[1], dq), "Fqv")
    assert_close(Fqu, fd(lambda x: force_terms(s, q, dq, x, 1)[1], u), "Fqu")


@pytest.mark.parametrize("seed", FREE)
def test_continuous_first_and_second_order(seed):
    continuous_checks(*_damped(seed))


@pytest.mark.parametrize("seed", CONSTRAINED)
def test_continuous_first_and_second_order_constrained(seed):
    s, q, dq, u = _damped(seed, constraints=2, velocity_constraints=1)
    assert s.model.nh + s.model.nv >= 2
    continuous_checks(s, q, dq, u)


@pytest.mark.parametrize("seed", FREE + CONSTRAINED)
def test_integrator_first_and_second_order(seed):
    s, q, dq, u = _damped(seed, constraints=0 if seed in FREE else 2)
    vi, x = discrete_checks(s, q, dq, u)
    # the damper acts in the step: without it the step differs
    bare, *_ = random_system(seed, constraints=0 if seed in FREE else 2, velocity_constraints=0,
                             n_frames=(4, 12), com=True)
    assert np.abs(vi.step(x, u) - core.MidpointVI(bare, 0.01, tolerance=1e-13).step(x, u)).max() > 1e-6


def test_a_damper_across_branches_keeps_the_dense_newton_matrix():
    """On a 15-frame tree the DEL Newton matrix is factored along the tree (no fill-in); a
    damper between two branches couples them, so the dense LU is used, and the step and its
    derivatives stay exact."""
    bare, q, dq, u = random_system(204, constraints=0, velocity_constraints=0, n_frames=(15, 15), com=True)
    assert sparse_newton(bare.model, 0)
    s, q, dq, u = _damped(204, n_frames=(15, 15), count=1)
    assert not sparse_newton(s.model, 0)
    discrete_checks(s, q, dq, u)


def _coupled():
    """Two links whose second joint mimics the first (-0.7 q + 0.2), a tip, and a damper from
    the tip to a world post."""
    s = coupled_two_links()
    s.add_frame("tip", parent="l2", offset={"translation": [0.6, 0.1, 0.2]}, mass=0.3)
    s.add_frame("post", offset={"translation": [0.5, -1.0, 0.4]})
    s.add_damper("tip", "post", 1.3)
    return s


def test_a_damper_on_a_coupled_system():
    s = _coupled()
    assert s.config_names == ["a"]
    q, dq, u = np.array([0.4]), np.array([1.1]), np.array([0.3])
    continuous_checks(s, q, dq, u)
    discrete_checks(s, q, dq, u)


def test_yaml_key_and_refusals():
    spec = {"gravity": [0, 0, -9.8],
            "frames": [{"name": "cart", "tx": "x", "mass": 2.0},
                       {"name": "post", "offset": {"translation": [0.0, 1.0, 0.0]}}],
            "dampers": [{"frame1": "cart", "frame2": "post", "coefficient": 0.7, "name": "shock"}]}
    s = core.load_system(spec)
    assert s.qdd([0.8], [1.3])[0] == pytest.approx(-0.7 * 0.64 / 1.64 * 1.3 / 2.0, rel=1e-14)
    with pytest.raises(ModelError, match=r"damper 0 \('shock'\)\.coefficient: must be non-negative, got -1"):
        core.load_system(dict(spec, dampers=[dict(spec["dampers"][0], coefficient=-1.0)]))
    with pytest.raises(ModelError, match=r"damper 0 \('shock'\)\.coefficient: must be finite"):
        core.load_system(dict(spec, dampers=[dict(spec["dampers"][0], coefficient=float("nan"))]))
    with pytest.raises(ModelError, match=r"damper 0 \('shock'\): unknown frame 'pole'"):
        core.load_system(dict(spec, dampers=[dict(spec["dampers"][0], frame2="pole")]))
    with pytest.raises(ModelError, match=r"damper 0 \('shock'\): frame1 and frame2 are both 'cart'"):
        core.load_system(dict(spec, dampers=[dict(spec["dampers"][0], frame2="cart")]))
    with pytest.raises(ModelError, match=r"dampers\[0\]: needs 'frame1', 'frame2' and 'coefficient'"):
        core.load_system(dict(spec, dampers=[{"frame1": "cart", "coefficient": 1.0}]))
    with pytest.raises(ModelError, match=r"dampers\[0\]: needs .* got \{.*'stiffness'"):
        core.load_system(dict(spec, dampers=[dict(spec["dampers"][0], stiffness=1.0)]))
    # coincident origins: the direction is undefined, and the evaluation says so
    s = core.System(gravity=[0.0, 0.0, -9.81])
    s.add_frame("cart", tx="x", mass=2.0)
    s.add_damper("cart", "world", 0.7)
    with pytest.raises(ValueError, match="damper with coincident endpoints"):
        s.qdd([0.0], [1.0])
