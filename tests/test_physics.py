"""Physics of the continuous dynamics: conservation laws along accurate integrations, constraint
preservation, power balance, closed-form cases, and agreement with the independent numpy
reference model of ``randsys.py``."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import core

from randsys import assert_close, fd_along, random_system

INTEGRATION = dict(method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True)

PAPER = """
gravity: [0, -9.8, 0]
frames:
  - {name: link1, parent: world, rz: theta1}
  - {name: A, parent: link1, ty: -1.0, mass: 1.0}
  - {name: link2, parent: A, rz: theta2}
  - {name: B, parent: link2, ty: -1.0, mass: 1.0}
  - {name: C, parent: world, tx: 2.0}
constraints:
  - {type: distance, frame1: B, frame2: C, distance: 1.0}
inputs:
  - {type: torque, config: theta1}
"""


def integrate(s, q0, dq0, u, T, samples=201):
    n = q0.size
    u = np.asarray(u, float)

    def rhs(t, x):
        return np.concatenate([x[n:], s.qdd(x[:n], x[n:], u)])

    sol = solve_ivp(rhs, (0.0, T), np.concatenate([q0, dq0]), **INTEGRATION)
    assert sol.success, sol.message
    X = sol.sol(np.linspace(0.0, T, samples)).T
    return X[:, :n], X[:, n:]


# ---------------------------------------------------------------------------------- energy
@pytest.mark.parametrize("seed", [0, 1, 3])
def test_energy_is_conserved_without_forces(seed):
    s, q0, dq0, _ = random_system(seed, forces=False, damping=False, constraints=0, velocity_constraints=0)
    assert s.nu == 0 and not s.model.damping.any() and s.model.nh == 0 and s.model.nv == 0
    Q, DQ = integrate(s, q0, dq0, [], T=3.0)
    E = np.array([s.energy(q, dq) for q, dq in zip(Q, DQ, strict=True)])
    KE0 = 0.5 * dq0 @ s.lagrangian_derivatives(q0, dq0).Lvv @ dq0
    # the motion is not trivial: the configuration moved and energy was exchanged
    assert np.abs(Q[-1] - q0).max() > 0.1
    KE = np.array([0.5 * dq @ s.lagrangian_derivatives(q, dq).Lvv @ dq for q, dq in zip(Q, DQ, strict=True)])
    assert KE.max() - KE.min() > 0.05 * KE0
    drift = np.abs(E - E[0]).max() / max(abs(E[0]), KE0)
    assert drift < 1e-8, drift


def test_energy_is_conserved_by_the_constrained_paper_system():
    """Workless constraint forces: the unforced closed-chain pendulum conserves energy."""
    s = core.load_system(PAPER)
    q0, dq0 = consistent_paper_state(s)
    Q, DQ = integrate(s, q0, dq0, [0.0], T=3.0)
    E = np.array([s.energy(q, dq) for q, dq in zip(Q, DQ, strict=True)])
    assert np.abs(E - E[0]).max() / abs(E[0]) < 1e-8


# ---------------------------------------------------------------------------------- constraints
def consistent_paper_state(s):
    """theta2 solving h = 0 near the paper's q0 (Newton), and dq0 in the null space of A."""
    q = np.array([0.5246, 1.0472])
    for _ in range(20):
        h, Dh = s.constraint(q, order=1)
        q[1] -= h[0] / Dh[0, 1]
    h, Dh = s.constraint(q, order=1)
    assert abs(h[0]) < 1e-14
    dq = np.array([1.0, -Dh[0, 0] / Dh[0, 1]])
    return q, dq


def test_paper_system_keeps_its_constraint():
    s = core.load_system(PAPER)
    q0, dq0 = consistent_paper_state(s)
    Q, DQ = integrate(s, q0, dq0, [2.0], T=3.0)
    h = np.array([s.constraint(q)[0] for q in Q])
    Adq = np.array([s.constraint(q, order=1)[1][0] @ dq for q, dq in zip(Q, DQ, strict=True)])
    assert np.abs(Q[-1] - q0).max() > 0.1
    assert np.abs(h).max() < 1e-6, np.abs(h).max()
    assert np.abs(Adq).max() < 1e-6, np.abs(Adq).max()


@pytest.mark.parametrize("seed", [104, 106, 109])
def test_random_constrained_system_keeps_its_constraints(seed):
    s, q0, dq0, u0 = random_system(seed, n_frames=(4, 15), constraints=1 + seed % 3,
                                   velocity_constraints=1 + seed % 2)
    assert s.model.nh >= 1 and s.model.nv >= 1
    ref = s.reference
    Q, DQ = integrate(s, q0, dq0, u0, T=2.0)
    h = np.array([s.constraint(q) for q in Q])
    Adq = np.array([np.vstack([s.constraint(q, order=1)[1], ref.velocity_rows(q)]) @ dq
                    for q, dq in zip(Q, DQ, strict=True)])
    assert np.abs(Q[-1] - q0).max() > 0.05
    assert np.abs(h).max() < 1e-6, np.abs(h).max()
    assert np.abs(Adq).max() < 1e-6, np.abs(Adq).max()


# ---------------------------------------------------------------------------------- momentum
def _cyclic_system(seed, kind):
    """A random unforced subtree hung below one extra frame driven by a cyclic variable: a
    rotation about the vertical with gravity along it, or a translation across gravity."""
    s, q0, dq0, _ = random_system(seed, forces=False, damping=False, constraints=0, velocity_constraints=0)
    spec = s.spec
    top = ({"name": "hub", "rz": "psi", "mass": 1.0, "inertia": [[0.3, 0.05, 0.0], [0.05, 0.2, 0.0], [0, 0, 0.4]]}
           if kind == "rotation" else {"name": "hub", "tx": "xi", "mass": 1.0})
    frames = [top] + [dict(f, parent="hub") if f.get("parent", "world") == "world" else f for f in spec["frames"]]
    gravity = [0.0, 0.0, -9.81] if kind == "rotation" else [0.0, -9.81, 0.0]
    springs = [sp for sp in spec["springs"] if sp["type"] == "config"]
    springs += [dict(sp, frame2="hub") if sp["frame2"] == "world" else sp
                for sp in spec["springs"] if sp["type"] == "frames"]
    new = core.load_system({"gravity": gravity, "frames": frames, "springs": springs})
    rng = np.random.default_rng(seed)
    return new, np.concatenate([[0.3], q0]), np.concatenate([[rng.normal()], dq0])


@pytest.mark.parametrize("kind", ["rotation", "translation"])
@pytest.mark.parametrize("seed", [2, 5])
def test_momentum_of_a_cyclic_variable_is_conserved(seed, kind):
    s, q0, dq0 = _cyclic_system(seed, kind)
    assert s.config_names[0] in ("psi", "xi")
    p0 = s.momentum(q0, dq0)
    # cyclic: L does not depend on the variable (checked on the exact gradient), but other
    # momenta are not conserved
    assert abs(s.lagrangian_derivatives(q0, dq0, 1).Lq[0]) < 1e-10
    Q, DQ = integrate(s, q0, dq0, [], T=2.0)
    P = np.array([s.momentum(q, dq) for q, dq in zip(Q, DQ, strict=True)])
    scale = np.abs(P).max()
    assert np.abs(P[:, 0] - p0[0]).max() < 1e-8 * scale, np.abs(P[:, 0] - p0[0]).max()
    assert np.abs(P[:, 1:] - p0[1:]).max() > 1e-3 * scale
    # momentum is the mass matrix times the velocity
    assert_close(p0, s.lagrangian_derivatives(q0, dq0).Lvv @ dq0, "p = M dq", tol=1e-12)


# ---------------------------------------------------------------------------------- power balance
@pytest.mark.parametrize("seed", list(range(100, 110)) + [0, 2, 4, 6])
def test_power_balance(seed):
    """dE/dt = dq . F along the motion: constraint forces do no work, damping and inputs do."""
    if seed >= 100:
        s, q, dq, u = random_system(seed, n_frames=(4, 15), constraints=1 + seed % 3,
                                    velocity_constraints=1 + seed % 2)
    else:
        s, q, dq, u = random_system(seed)
    qdd = s.qdd(q, dq, u)
    dE = fd_along(lambda t: s.energy(q + t * dq + 0.5 * t * t * qdd, dq + t * qdd))
    power = dq @ s.reference.generalized_force(q, dq, u)
    scale = max(1.0, abs(dq @ s.lagrangian_derivatives(q, dq).Lq))
    assert abs(dE - power) < 1e-7 * scale, (dE, power)
    # with the constraint forces removed from the balance, it fails unless they are workless
    lam = s.constraint_forces(q, dq, u)
    A = np.vstack([s.constraint(q, order=1)[1], s.reference.velocity_rows(q)])
    assert abs(dq @ A.T @ lam) < 1e-8 * max(1.0, np.linalg.norm(lam))


# ---------------------------------------------------------------------------------- reference model
@pytest.mark.parametrize("seed", list(range(12)) + list(range(100, 106)))
def test_values_match_the_reference_model(seed):
    if seed >= 100:
        s, q0, dq0, u = random_system(seed, n_frames=(4, 15), constraints=1 + seed % 3,
                                      velocity_constraints=1 + seed % 2)
    else:
        s, q0, dq0, u = random_system(seed)
    ref = s.reference
    rng = np.random.default_rng(seed)
    for q, dq in ((q0, dq0), (rng.uniform(-3, 3, q0.size), rng.normal(size=q0.size))):
        d = s.lagrangian_derivatives(q, dq, 1)
        assert_close(d.L[0], ref.lagrangian(q, dq), "L", tol=1e-12)
        assert_close(s.energy(q, dq), ref.energy(q, dq), "energy", tol=1e-12)
        M = ref.mass_matrix(q)
        assert_close(s.lagrangian_derivatives(q, dq, 2).Lvv, M, "mass matrix", tol=1e-12)
        assert_close(s.momentum(q, dq), M @ dq, "momentum", tol=1e-12)
        h, Dh = s.constraint(q, order=1)
        assert_close(h, ref.holonomic(q), "h", tol=1e-12)
        assert_close(Dh, ref.holonomic_jacobian(q), "Dh", tol=1e-12)
        # the accelerations solve the reference equations of motion with some multipliers
        qdd, lam = s.qdd(q, dq, u), s.constraint_forces(q, dq, u)
        A = ref.constraint_rows(q)
        F = ref.generalized_force(q, dq, u)
        Lq = d.Lq
        Lqv = s.lagrangian_derivatives(q, dq, 2).Lqv
        resid = M @ qdd + Lqv.T @ dq - Lq - F - A.T @ lam
        assert np.linalg.norm(resid) < 1e-9 * max(1.0, np.linalg.norm(M @ qdd), np.linalg.norm(F), np.linalg.norm(Lq))


# ---------------------------------------------------------------------------------- closed forms
def test_simple_pendulum():
    s = core.load_system({"gravity": [0, -9.81, 0], "frames": [
        {"name": "pivot", "rz": "th"}, {"name": "bob", "parent": "pivot", "ty": -0.7, "mass": 2.0}]})
    for th, w in ((0.3, 0.0), (-1.2, 2.0), (2.5, -1.0)):
        assert s.qdd([th], [w])[0] == pytest.approx(-9.81 / 0.7 * np.sin(th), rel=1e-12)
        A, _ = s.linearize([th], [w])
        np.testing.assert_allclose(A, [[0, 1], [-9.81 / 0.7 * np.cos(th), 0]], atol=1e-12)
        assert s.energy([th], [w]) == pytest.approx(0.5 * 2 * 0.49 * w * w - 2 * 9.81 * 0.7 * np.cos(th), rel=1e-12)


def test_rigid_body_spinning_about_a_body_axis():
    """Free rotation about a body axis tilted by a constant offset: KE = 1/2 (a^T I a) w^2."""
    inertia = np.array([[0.4, 0.1, -0.05], [0.1, 0.3, 0.02], [-0.05, 0.02, 0.5]])
    s = core.load_system({"gravity": [0, 0, 0], "frames": [
        {"name": "axle", "rx": "phi", "offset": {"rotation": [0.2, -0.4, 0.9]}},
        {"name": "body", "parent": "axle", "mass": 3.0, "inertia": inertia.tolist(),
         "offset": {"rotation": [0.5, 0.1, -0.3]}}]})
    from randsys import rpy_matrix
    a = rpy_matrix(0.5, 0.1, -0.3).T @ np.array([1.0, 0, 0])  # spin axis in body coordinates
    assert s.energy([0.7], [2.0]) == pytest.approx(0.5 * (a @ inertia @ a) * 4.0, rel=1e-12)
    assert s.qdd([0.7], [2.0])[0] == pytest.approx(0.0, abs=1e-12)


def test_mass_spring_damper_with_force_input():
    """m x'' = -k (x - r) - c x' + f: A and B in closed form."""
    m, k, r, c = 2.0, 8.0, 0.25, 0.6
    s = core.load_system({"gravity": [0, 0, -9.81], "frames": [
        {"name": "cart", "ty": "x", "mass": m, "inertia": [0.1, 0.1, 0.1]}],
        "springs": [{"type": "config", "config": "x", "stiffness": k, "rest": r}],
        "damping": [{"config": "x", "coefficient": c}],
        "inputs": [{"type": "force", "frame": "cart", "axis": "y"}]})
    assert s.qdd([1.0], [0.5], [3.0])[0] == pytest.approx((-k * 0.75 - c * 0.5 + 3.0) / m, rel=1e-12)
    A, B = s.linearize([1.0], [0.5], [3.0])
    np.testing.assert_allclose(A, [[0, 1], [-k / m, -c / m]], atol=1e-12)
    np.testing.assert_allclose(B, [[0], [1 / m]], atol=1e-12)


def test_frame_spring_between_two_sliders():
    """V = k/2 (|p1 - p2| - L0)^2 for two masses sliding on orthogonal rails."""
    k, L0 = 5.0, 0.5
    s = core.load_system({"gravity": [0, 0, 0], "frames": [
        {"name": "a", "tx": "x", "mass": 1.0}, {"name": "b", "ty": "y", "mass": 2.0}],
        "springs": [{"type": "frames", "frame1": "a", "frame2": "b", "stiffness": k, "rest_length": L0}]})
    x, y = 0.6, 0.8
    r = np.hypot(x, y)
    f = k * (r - L0)
    np.testing.assert_allclose(s.qdd([x, y], [0, 0]), [-f * x / r / 1.0, -f * y / r / 2.0], rtol=1e-12)
    assert s.energy([x, y], [0, 0]) == pytest.approx(0.5 * k * (r - L0) ** 2, rel=1e-12)
