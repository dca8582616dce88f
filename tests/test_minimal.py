"""Minimal linearization (core.continuous.minimal, Peterson, Gede & Hubbard) against independent references.

What is checked, on the seed's constrained double pendulum, a four-bar linkage, a planar skate
(knife edge: a velocity constraint) and randomized constrained trees (tests/randsys.py):

* at equilibria (dq = 0, the input holding the configuration): the constraint-consistent subspace
  computed here from finite differences of the constraint rows (not from core.continuous.minimal) is
  invariant under the full-coordinate A; the minimal A is similar to the full A restricted to it
  (same eigenvalues), the full A has only the extra zero eigenvalues of the constraint residuals,
  and the two linear systems (scipy expm, with a constant input) have the same trajectories from
  consistent initial conditions mapped through T;
* at moving states (dq != 0 on the manifold): A and B are the Jacobians of the reduced nonlinear
  equations x_i' = S f(phi(x_i), u), with the dependent coordinates solved here by Newton and the
  dependent speeds from the constraint rows, by finite differences; T spans the tangent space;
* the paper's assembly (M~, A~, B~, C0, C1, C2, P') gives the same A and B;
* other choices of independent variables give similar matrices (at equilibria), poorly
  conditioned choices raise a ValueError naming better variables, bad inputs raise ValueError.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.linalg
from scipy.optimize import linear_sum_assignment

import core
from core.continuous.minimal import MinimalInfo, linearize_minimal, velocity_constraint

from randsys import assert_close, build_system, fd, random_system

FOURBAR = {
    "name": "fourbar",
    "gravity": [0.0, -9.81, 0.0],
    "frames": [
        {"name": "crank", "rz": "theta1"},
        {"name": "crank_tip", "parent": "crank", "tx": 1.0, "mass": 0.5, "inertia": [0.01, 0.01, 0.02]},
        {"name": "coupler", "parent": "crank_tip", "rz": "theta2"},
        {"name": "coupler_mid", "parent": "coupler", "tx": 1.75, "mass": 1.0, "inertia": [0.5, 0.5, 1.0]},
        {"name": "coupler_end", "parent": "coupler", "tx": 3.5},
        {"name": "rocker", "offset": {"translation": [4.0, 0.0, 0.0]}, "rz": "theta3"},
        {"name": "rocker_mid", "parent": "rocker", "tx": 1.25, "mass": 0.8, "inertia": [0.2, 0.2, 0.4]},
        {"name": "rocker_end", "parent": "rocker", "tx": 2.5},
    ],
    "constraints": [{"type": "coincide", "frame1": "coupler_end", "frame2": "rocker_end", "axes": ["x", "y"]}],
    "damping": [{"config": "theta3", "coefficient": 0.3}],
    "inputs": [{"type": "torque", "config": "theta1"}],
}

SKATE = {
    "name": "skate",
    "gravity": [0.0, 0.0, -9.81],
    "frames": [
        {"name": "base_x", "tx": "x"},
        {"name": "base_y", "parent": "base_x", "ty": "y"},
        {"name": "skate", "parent": "base_y", "rz": "theta", "mass": 1.0, "inertia": [0.1, 0.1, 0.2]},
        {"name": "rider", "parent": "skate", "offset": {"translation": [0.3, 0.1, 0.0]}, "mass": 0.5},
    ],
    "constraints": [{"type": "velocity", "frame": "skate", "axis": "y"}],
    "springs": [{"type": "config", "config": "x", "stiffness": 2.0, "rest": 0.4},
                {"type": "config", "config": "y", "stiffness": 3.0, "rest": -0.2},
                {"type": "config", "config": "theta", "stiffness": 1.5, "rest": 0.7}],
    "damping": [{"config": "theta", "coefficient": 0.2}],
    "inputs": [{"type": "torque", "config": "theta"}, {"type": "force", "frame": "skate", "axis": "x"}],
}

# (seed, holonomic entries, velocity constraints) of tests/randsys.py: all give constrained trees
# with more than one admissible choice of independent variables, except seed 12 (only one)
RANDOM_CASES = [(0, 3, 1), (2, 3, 1), (3, 3, 1), (5, 2, 0), (6, 1, 1), (7, 3, 1), (8, 1, 1),
                (12, 3, 1), (13, 0, 1), (15, 3, 1), (17, 3, 1), (18, 3, 1), (19, 1, 1)]


# ------------------------------------------------------------------------------ helpers
def skate_rows(q):
    """Velocity row of the skate, by hand: the origin of 'skate' is (x, y), its y axis
    (-sin theta, cos theta)."""
    th = q[2]
    return np.array([[-math.sin(th), math.cos(th), 0.0]])


def holonomic_rows(system):
    return lambda q: system.constraint(q, 1)[1]


def solve_dependent(system, q, dependent, iters=60):
    """Newton on h(q) = 0 for the coordinates ``dependent`` (indices), the others fixed."""
    q = np.array(q, float)
    if system.model.nh == 0:
        return q
    for _ in range(iters):
        h, Dh = system.constraint(q, 1)
        step = np.linalg.solve(Dh[:, dependent], h)
        q[dependent] -= step
        if np.linalg.norm(step) < 1e-15 * max(1.0, np.linalg.norm(q)):
            break
    assert np.linalg.norm(system.constraint(q)) < 1e-12, "Newton did not reach the constraint"
    return q


def tangent_speed(rows, rng):
    """A random dq in the null space of the velocity-level rows."""
    N = scipy.linalg.null_space(rows)
    return N @ rng.normal(size=N.shape[1])


def hold_input(system, q):
    """The input that makes (q, dq = 0) an equilibrium (qdd is affine in u)."""
    n, m = system.nq, system.nu
    z = np.zeros(n)
    a = system.qdd(q, z, np.zeros(m))
    G = np.column_stack([system.qdd(q, z, e) - a for e in np.eye(m)])
    u = np.linalg.lstsq(G, -a, rcond=None)[0]
    assert np.linalg.norm(system.qdd(q, z, u)) < 1e-9 * max(1.0, np.linalg.norm(a)), \
        "test setup: no input holds this configuration"
    return u


def constraint_derivative(rows_fn, nh, q, dq):
    """Dc (rows: h, Dh dq, A_v dq) by finite differences of the velocity-level rows."""
    J = rows_fn(q)
    Jq = fd(lambda x: rows_fn(x) @ dq, q)
    n = q.size
    Dc = np.zeros((nh + J.shape[0], 2 * n))
    Dc[:nh, :n] = J[:nh]
    Dc[nh:, :n] = Jq
    Dc[nh:, n:] = J
    return Dc


def indices(system, info):
    names = system.config_names
    return ([names.index(c) for c in info.independent_coordinates],
            [names.index(c) for c in info.dependent_coordinates],
            [names.index(s[1:]) for s in info.independent_speeds],
            [names.index(s[1:]) for s in info.dependent_speeds])


def matched_error(a, b):
    """Largest distance between the eigenvalues ``a`` and their best match in ``b``; also the
    indices of ``b`` not matched."""
    cost = np.abs(a[:, None] - b[None, :])
    r, c = linear_sum_assignment(cost)
    rest = np.setdiff1d(np.arange(b.size), c)
    return (float(cost[r, c].max()) if r.size else 0.0), rest


def flow(A, B, x0, u, t):
    """x(t) of x' = A x + B u with constant u (augmented matrix exponential)."""
    p, m = B.shape
    M = np.zeros((p + m, p + m))
    M[:p, :p], M[:p, p:] = A, B
    return (scipy.linalg.expm(M * t) @ np.concatenate([x0, u]))[:p]


# ------------------------------------------------------------------------------ checks
def check_equilibrium(system, q, rows_fn, seed=0):
    """Minimal A, B at the equilibrium (q, 0, hold_input) against the full ones restricted to the
    independently computed consistent subspace; returns (A, B, info, u)."""
    rng = np.random.default_rng(seed)
    n, nh = system.nq, system.model.nh
    u = hold_input(system, q)
    dq = np.zeros(n)
    A, B, info = linearize_minimal(system, q, dq, u)
    Af, Bf = system.linearize(q, dq, u)
    p = A.shape[0]
    assert A.shape == (p, p) and B.shape == (p, system.nu)
    assert p == 2 * (n - nh) - system.model.nv

    Q = scipy.linalg.null_space(constraint_derivative(rows_fn, nh, q, dq), rcond=1e-9)
    assert Q.shape[1] == p, "consistent subspace has the wrong dimension"
    scale = max(1.0, np.linalg.norm(Af))
    # T spans the consistent subspace, the subspace is invariant, B acts inside it
    assert np.linalg.norm(info.T - Q @ (Q.T @ info.T)) <= 1e-7 * np.linalg.norm(info.T)
    R = Q.T @ Af @ Q
    assert np.linalg.norm(Af @ Q - Q @ R) <= 1e-7 * scale, "consistent subspace not invariant"
    assert np.linalg.norm(Bf - Q @ (Q.T @ Bf)) <= 1e-7 * max(1.0, np.linalg.norm(Bf))

    # similarity: Q^T A_full T = (Q^T T) A, Q^T B_full = (Q^T T) B
    W = Q.T @ info.T
    assert np.linalg.cond(W) < 1e8
    assert_close(R @ W, W @ A, "restricted full A vs minimal A", tol=1e-8, scale=scale * np.linalg.norm(W))
    assert_close(Q.T @ Bf, W @ B, "restricted full B vs minimal B", tol=1e-8,
                 scale=max(1.0, np.linalg.norm(Bf)) * np.linalg.norm(W))

    # spectra: minimal = restricted; full = minimal + (2 nh + nv) zeros of the residual dynamics.
    # In the basis [Q, Q_perp] A_full is block triangular [[R, X], [0, Y]] (invariance above);
    # Y is similar to the residual dynamics h' = Dh dq, (Dh dq)' = 0, (A_v dq)' = 0, so Y^2 = 0.
    Qp = scipy.linalg.null_space(Q.T)
    Y = Qp.T @ Af @ Qp
    assert np.linalg.norm(Y @ Y) <= 1e-7 * scale ** 2, "extra eigenvalues of A_full are not zeros"
    ev_min, ev_res, ev_full = (np.linalg.eigvals(M) for M in (A, R, Af))
    lam = max(1.0, np.abs(ev_min).max(initial=0.0))
    err, _ = matched_error(ev_min, ev_res)
    assert err <= 1e-6 * lam, f"minimal vs restricted eigenvalues differ by {err:.3e}"
    # eigenvalues away from the (possibly defective) zero cluster appear in the full spectrum
    far = ev_min[np.abs(ev_min) > 1e-3 * lam]
    err, _ = matched_error(far, ev_full)
    assert err <= 1e-6 * lam, f"minimal eigenvalues not in the full spectrum ({err:.3e})"

    # trajectories from consistent initial conditions, with a constant input
    xi0 = rng.normal(size=p)
    r0 = rng.normal(size=system.nu)
    for c in (0.3, 1.0, 2.0):
        t = c / lam
        x_min = info.T @ flow(A, B, xi0, r0, t)
        x_full = flow(Af, Bf, info.T @ xi0, r0, t)
        assert_close(x_full, x_min, f"trajectories at t = {t:.3g}", tol=1e-8,
                     scale=max(1.0, np.linalg.norm(x_full)))
    return A, B, info, u


def check_moving(system, q, dq, u, rows_fn, independent=None):
    """A, B are the Jacobians of the reduced equations; T spans the tangent space."""
    n, nh = system.nq, system.model.nh
    A, B, info = linearize_minimal(system, q, dq, u, independent=independent)
    q_ind, q_dep, v_ind, v_dep = indices(system, info)
    p = len(q_ind) + len(v_ind)
    assert list(info.state_index) == q_ind + [n + i for i in v_ind]

    Dc = constraint_derivative(rows_fn, nh, q, dq)
    assert np.linalg.norm(Dc @ info.T) <= 1e-7 * max(1.0, np.linalg.norm(Dc)) * np.linalg.norm(info.T)
    # T is built from the paper's maps and selects the independent variables
    assert_close(info.T, np.block([[info.C0, np.zeros((n, len(v_ind)))], [info.C1 @ info.C0, info.C2]]),
                 "T from C0, C1, C2", tol=1e-14)
    assert_close(info.T[info.state_index], np.eye(p), "S T = I", tol=1e-12)

    def reduced(z):
        xi, inputs = z[:p], z[p:]
        qq = q.copy()
        qq[q_ind] = xi[:len(q_ind)]
        qq = solve_dependent(system, qq, q_dep)
        J = rows_fn(qq)
        v = np.zeros(n)
        v[v_ind] = xi[len(q_ind):]
        if v_dep:
            v[v_dep] = -np.linalg.solve(J[:, v_dep], J[:, v_ind] @ v[v_ind])
        return np.concatenate([v[q_ind], system.qdd(qq, v, inputs)[v_ind]])

    z0 = np.concatenate([q[q_ind], dq[v_ind], u])
    assert_close(reduced(z0)[:len(q_ind)], dq[q_ind], "reduced parameterization reproduces dq", tol=1e-10)
    D = fd(reduced, z0, h=1e-5)
    assert_close(A, D[:, :p], "minimal A vs finite differences of the reduced dynamics", tol=1e-6)
    assert_close(B, D[:, p:], "minimal B vs finite differences of the reduced dynamics", tol=1e-6)
    return A, B, info


def peterson_assembly(system, q, dq, u, info, rows_fn):
    """The paper's A = P'^T M~^-1 A~, B = P'^T M~^-1 B~ with its block definitions.

    Rows of M~ and A~: kinematic (qd - v = 0: M~_qq = I, A~_qq = 0, A~_qv = I), acceleration
    constraints f_a = d/dt f_v (M~_vvc = D_v f_v, A~_vqc = -D_q f_a, A~_vvc = -D_v f_a, by finite
    differences of the constraint rows here) and o - m dynamic rows C2^T (M dv' - M ddq_lin) = 0,
    the full dynamics projected on the independent speeds (the constraint forces drop out).
    """
    n = system.nq
    Af, Bf = system.linearize(q, dq, u)
    ddq = system.qdd(q, dq, u)
    M = system.lagrangian_derivatives(q, dq, 2).Lvv
    J = rows_fn(q)
    m = J.shape[0]

    def f_a(qq, vv):  # J(q) v' + (d(J(q) v)/dq) v at the nominal v', exact second derivatives
        H2 = system.constraint(qq, 2)[2]
        Jq = np.vstack([np.einsum("rij,j->ri", H2, vv), velocity_constraint(system, qq, vv)[1]])
        return rows_fn(qq) @ ddq + Jq @ vv

    Faq = fd(lambda x: f_a(x, dq), q)
    Fav = fd(lambda v: f_a(q, v), dq)
    C0, C1, C2 = info.C0, info.C1, info.C2
    Mt = np.block([[np.eye(n), np.zeros((n, n))],
                   [np.zeros((m, n)), J],
                   [np.zeros((n - m, n)), C2.T @ M]])
    A_qq, A_qv = np.zeros((n, n)), np.eye(n)
    A_vqc, A_vvc = -Faq, -Fav
    A_vqd, A_vvd = C2.T @ M @ Af[n:, :n], C2.T @ M @ Af[n:, n:]
    # the paper's "state space constrained" right-hand side
    At = np.block([[(A_qq + A_qv @ C1) @ C0, A_qv @ C2],
                   [(A_vqc + A_vvc @ C1) @ C0, A_vvc @ C2],
                   [(A_vqd + A_vvd @ C1) @ C0, A_vvd @ C2]])
    Bt = np.vstack([np.zeros((n + m, system.nu)), C2.T @ M @ Bf[n:]])
    q_ind, _, v_ind, _ = indices(system, info)
    P = np.zeros((2 * n, len(q_ind) + len(v_ind)))
    P[q_ind, np.arange(len(q_ind))] = 1.0
    P[[n + i for i in v_ind], len(q_ind) + np.arange(len(v_ind))] = 1.0
    return P.T @ np.linalg.solve(Mt, At), P.T @ np.linalg.solve(Mt, Bt)


# ------------------------------------------------------------------------------ systems
@pytest.fixture(scope="module")
def fourbar():
    return core.load_system(FOURBAR)


@pytest.fixture(scope="module")
def skate():
    return core.load_system(SKATE)


def pendulum_state(system, theta1):
    return solve_dependent(system, np.array([theta1, 0.3]), [1])


def fourbar_state(system, theta1):
    return solve_dependent(system, np.array([theta1, -0.5, 1.6]), [1, 2])


# ------------------------------------------------------------------------------ tests
def test_velocity_constraint_rows_and_derivative(skate):
    q, dq = np.array([0.1, -0.3, 0.9]), np.array([0.4, -0.7, 1.3])
    fv, Gq, Gu = velocity_constraint(skate, q, dq)
    assert_close(Gu, skate_rows(q), "A_v of the skate", tol=1e-14)
    assert_close(Gq, fd(lambda x: skate_rows(x) @ dq, q), "d(A_v dq)/dq of the skate", tol=1e-9)
    assert_close(fv, skate_rows(q) @ dq, "f_v", tol=1e-14)
    for seed in (0, 3, 8, 13):
        system, q0, dq0, _ = random_system(seed, constraints=1, velocity_constraints=1)
        assert system.model.nv == 1
        ref = system.reference
        v = np.random.default_rng(seed).normal(size=system.nq)  # any dq, not only tangent ones
        fv, Gq, Gu = velocity_constraint(system, q0, v)
        assert_close(Gu, ref.velocity_rows(q0), f"seed {seed}: A_v", tol=1e-10)
        assert_close(Gq, fd(lambda x, ref=ref, v=v: ref.velocity_rows(x) @ v, q0), f"seed {seed}: d(A_v dq)/dq",
                     tol=1e-7)


def test_double_pendulum_equilibrium(double_pendulum):
    q = pendulum_state(double_pendulum, 0.6)
    A, B, info, _ = check_equilibrium(double_pendulum, q, holonomic_rows(double_pendulum))
    assert A.shape == (2, 2) and B.shape == (2, 1)
    assert len(info.independent_coordinates) == 1 and len(info.independent_speeds) == 1
    assert info.independent_speeds[0] == "d" + info.independent_coordinates[0]
    assert info.condition_coordinates == pytest.approx(np.linalg.norm(info.C0, 2), rel=1e-12)
    # the other choice of independent coordinate: a similar system
    other = [c for c in double_pendulum.config_names if c not in info.independent_coordinates]
    A2, B2, info2 = linearize_minimal(double_pendulum, q, np.zeros(2), hold_input(double_pendulum, q),
                                      independent=other)
    assert info2.independent_coordinates == tuple(other)
    W = info.T[info2.state_index]
    assert_close(A2 @ W, W @ A, "other choice: similar A", tol=1e-9)
    assert_close(B2, W @ B, "other choice: transformed B", tol=1e-9)


def test_double_pendulum_moving(double_pendulum):
    q = pendulum_state(double_pendulum, 0.5246)
    dq = 1.7 * tangent_speed(double_pendulum.constraint(q, 1)[1], np.random.default_rng(1))
    for independent in (None, ["theta1"], ["theta2", "dtheta2"]):
        A, B, info = check_moving(double_pendulum, q, dq, np.array([2.0]), holonomic_rows(double_pendulum), independent)
        assert np.linalg.norm(info.C1) > 1e-3  # the velocity map depends on the configuration
        Ap, Bp = peterson_assembly(double_pendulum, q, dq, np.array([2.0]), info, holonomic_rows(double_pendulum))
        assert_close(A, Ap, "paper's P'^T M~^-1 A~", tol=1e-7)
        assert_close(B, Bp, "paper's P'^T M~^-1 B~", tol=1e-7)


def test_fourbar(fourbar):
    rows = holonomic_rows(fourbar)
    q = fourbar_state(fourbar, 1.0)
    A, B, info, u = check_equilibrium(fourbar, q, rows)
    assert A.shape == (2, 2) and len(info.dependent_coordinates) == 2
    # every coordinate can serve as the independent one here: similar systems
    for name in fourbar.config_names:
        A2, B2, info2 = linearize_minimal(fourbar, q, np.zeros(3), u, independent=[name])
        W = info.T[info2.state_index]
        assert_close(A2 @ W, W @ A, f"independent {name}: similar A", tol=1e-9)
        assert_close(B2, W @ B, f"independent {name}: transformed B", tol=1e-9)
        assert np.allclose(np.sort_complex(np.linalg.eigvals(A2)), np.sort_complex(np.linalg.eigvals(A)),
                           rtol=1e-8, atol=1e-8)
    # moving through another configuration
    q = fourbar_state(fourbar, 2.3)
    dq = tangent_speed(fourbar.constraint(q, 1)[1], np.random.default_rng(2)) * 3.0
    A, B, info = check_moving(fourbar, q, dq, np.array([0.7]), rows)
    Ap, Bp = peterson_assembly(fourbar, q, dq, np.array([0.7]), info, rows)
    assert_close(A, Ap, "four-bar: paper's assembly", tol=1e-7)
    assert_close(B, Bp, "four-bar: paper's assembly B", tol=1e-7)


def test_skate_knife_edge(skate):
    q = np.array([0.4, -0.2, 0.7])   # springs at rest: an equilibrium with u = 0
    A, B, info, u = check_equilibrium(skate, q, skate_rows)
    assert np.linalg.norm(u) < 1e-12
    assert A.shape == (5, 5) and info.independent_coordinates == ("x", "y", "theta")
    assert len(info.independent_speeds) == 2 and len(info.dependent_speeds) == 1
    # the other admissible speed choices give similar systems
    for speeds in (["dx", "dtheta"], ["dy", "dtheta"]):
        A2, B2, info2 = linearize_minimal(skate, q, np.zeros(3), u, independent=speeds)
        W = info.T[info2.state_index]
        assert_close(A2 @ W, W @ A, f"speeds {speeds}: similar A", tol=1e-9)
        assert_close(B2, W @ B, f"speeds {speeds}: transformed B", tol=1e-9)
    # rolling and turning: exact Jacobian of the reduced nonholonomic dynamics
    q = np.array([0.1, 0.5, -0.4])
    dq = 1.5 * tangent_speed(skate_rows(q), np.random.default_rng(3))
    A, B, info = check_moving(skate, q, dq, np.array([0.3, -0.2]), skate_rows)
    assert np.linalg.norm(info.C1) > 1e-3
    Ap, Bp = peterson_assembly(skate, q, dq, np.array([0.3, -0.2]), info, skate_rows)
    assert_close(A, Ap, "skate: paper's assembly", tol=1e-7)
    assert_close(B, Bp, "skate: paper's assembly B", tol=1e-7)


def with_hold_inputs(system):
    """The random system with a torque on every coordinate (so every configuration can be held)."""
    spec = dict(system.spec)
    spec["inputs"] = list(spec.get("inputs", [])) + [
        {"type": "torque", "config": c, "name": f"hold_{c}"} for c in system.config_names]
    held = build_system(spec)
    held.spec, held.reference = spec, system.reference
    return held


@pytest.mark.parametrize("seed,nc,nv", RANDOM_CASES)
def test_random_systems(seed, nc, nv):
    system, q0, dq0, u0 = random_system(seed, constraints=nc, velocity_constraints=nv)
    m = system.model
    assert m.nh + m.nv >= 1, "test case must be constrained"
    rows = system.reference.constraint_rows
    # moving state of the generator (dq0 tangent, random input)
    A, B, info = check_moving(system, q0, dq0, u0, rows)
    assert A.shape == (2 * (m.nq - m.nh) - m.nv,) * 2
    assert info.condition_coordinates >= 1.0 and info.condition_speeds >= 1.0
    Ap, Bp = peterson_assembly(system, q0, dq0, u0, info, rows)
    assert_close(A, Ap, f"seed {seed}: paper's assembly A", tol=1e-6)
    assert_close(B, Bp, f"seed {seed}: paper's assembly B", tol=1e-6)

    # equilibrium with holding torques
    held = with_hold_inputs(system)
    A, B, info, u = check_equilibrium(held, q0, rows, seed=seed)
    # another well-conditioned choice of independent coordinates and speeds: a similar system
    names, n = held.config_names, held.nq
    Jv = rows(q0)
    involved_q = np.flatnonzero(np.abs(Jv[:m.nh]).max(axis=0, initial=0.0) > 1e-8)
    involved_v = np.flatnonzero(np.abs(Jv).max(axis=0) > 1e-8)
    # dependent variables drawn among those the constraints involve (all such choices)
    choices = itertools.product(itertools.combinations(involved_q, m.nh),
                                itertools.combinations(involved_v, m.nh + m.nv))
    found, tried = False, 0
    for q_dep, v_dep in itertools.islice(choices, 300):
        tried += 1
        choice = ([names[i] for i in range(n) if i not in q_dep]
                  + ["d" + names[i] for i in range(n) if i not in v_dep])
        if choice == info.state_names:
            continue
        try:
            A2, B2, info2 = linearize_minimal(held, q0, np.zeros(n), u, independent=choice,
                                              condition_limit=1e3)
        except ValueError as exc:
            assert "better independent" in str(exc)
            continue
        assert info2.state_names == choice
        W = info.T[info2.state_index]
        assert np.linalg.cond(W) < 1e8
        assert_close(A2 @ W, W @ A, f"seed {seed}: choice {choice}: similar A", tol=1e-8,
                     scale=max(1.0, np.linalg.norm(A)) * np.linalg.norm(W))
        assert_close(B2, W @ B, f"seed {seed}: choice {choice}: transformed B", tol=1e-8,
                     scale=max(1.0, np.linalg.norm(B)) * np.linalg.norm(W))
        found = True
        break
    n_choices = math.comb(involved_q.size, m.nh) * math.comb(involved_v.size, m.nh + m.nv)
    # either a second choice was compared, or the automatic one is the only admissible choice
    assert found or tried == n_choices


def collinear_pendulum_state():
    """A, B and the anchor C = (2, 0) on one line: h does not depend on theta2 here."""
    a = np.array([0.25, -math.sqrt(15.0) / 4.0])     # |OA| = 1 and |AC| = 2
    theta1 = math.atan2(a[0], -a[1])
    d = (np.array([2.0, 0.0]) - a) / 2.0              # A -> B, unit length
    return np.array([theta1, math.atan2(d[0], -d[1]) - theta1])


def test_poor_choices_name_better_variables(double_pendulum, skate):
    q = collinear_pendulum_state()
    h, Dh = double_pendulum.constraint(q, 1)
    assert abs(h[0]) < 1e-12 and abs(Dh[0, 1]) < 1e-12 < abs(Dh[0, 0])
    A, B, info = linearize_minimal(double_pendulum, q, np.zeros(2), [0.0])   # automatic: fine
    assert info.independent_coordinates == ("theta2",) and info.independent_speeds == ("dtheta2",)
    with pytest.raises(ValueError, match=r"independent coordinates \['theta1'\].*better independent "
                                         r"coordinates: \['theta2'\]"):
        linearize_minimal(double_pendulum, q, np.zeros(2), [0.0], independent=["theta1"])
    with pytest.raises(ValueError, match=r"better independent speeds: \['dtheta2'\]"):
        linearize_minimal(double_pendulum, q, np.zeros(2), [0.0], independent=["theta2", "dtheta1"])
    # nearly singular: a condition limit between the automatic and the named choice
    q = pendulum_state(double_pendulum, 0.6)
    kappas = {}
    for name in double_pendulum.config_names:
        kappas[name] = linearize_minimal(double_pendulum, q, np.zeros(2), [0.0],
                                         independent=[name])[2].condition_coordinates
    worse, better = sorted(kappas, key=kappas.get, reverse=True)
    assert kappas[worse] > kappas[better]
    limit = math.sqrt(kappas[worse] * kappas[better])
    linearize_minimal(double_pendulum, q, np.zeros(2), [0.0], independent=[better], condition_limit=limit)
    with pytest.raises(ValueError, match=rf"better independent coordinates: \['{better}'\]"):
        linearize_minimal(double_pendulum, q, np.zeros(2), [0.0], independent=[worse], condition_limit=limit)
    # skate heading along x: the lateral speed is dy, which cannot be dependent on dx
    q = np.array([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"better independent speeds: \['dx', 'dtheta'\]"):
        linearize_minimal(skate, q, np.zeros(3), [0.0, 0.0], independent=["dy", "dtheta"])
    A, B, info = linearize_minimal(skate, q, np.zeros(3), [0.0, 0.0])
    assert info.dependent_speeds == ("dy",) and info.condition_speeds == pytest.approx(1.0)


def test_bad_inputs(double_pendulum, skate):
    q = pendulum_state(double_pendulum, 0.6)
    z = np.zeros(2)
    with pytest.raises(ValueError, match="q must be a vector of 2"):
        linearize_minimal(double_pendulum, q[:1], z, [0.0])
    with pytest.raises(ValueError, match="dq must be a vector of 2"):
        linearize_minimal(double_pendulum, q, np.zeros(3), [0.0])
    with pytest.raises(ValueError, match="u must be a vector of 1"):
        linearize_minimal(double_pendulum, q, z, [0.0, 1.0])
    with pytest.raises(ValueError, match=r"unknown variable name\(s\) \['phi'\]"):
        linearize_minimal(double_pendulum, q, z, [0.0], independent=["phi"])
    with pytest.raises(ValueError, match="exactly 1 independent coordinates"):
        linearize_minimal(double_pendulum, q, z, [0.0], independent=["theta1", "theta2"])
    with pytest.raises(ValueError, match="exactly 1 independent speeds"):
        linearize_minimal(double_pendulum, q, z, [0.0], independent=["dtheta1", "dtheta2"])
    with pytest.raises(ValueError, match="named more than once"):
        linearize_minimal(skate, np.zeros(3), np.zeros(3), [0.0, 0.0], independent=["dx", "dx"])
    with pytest.raises(ValueError, match="condition_limit"):
        linearize_minimal(double_pendulum, q, z, [0.0], condition_limit=float("nan"))
    # states off the constraint manifold
    with pytest.raises(ValueError, match="violates holonomic constraint row 0"):
        linearize_minimal(double_pendulum, q + np.array([0.0, 0.01]), z, [0.0])
    with pytest.raises(ValueError, match="dq violates holonomic constraint row 0"):
        linearize_minimal(double_pendulum, q, np.array([1.0, 0.0]), [0.0])
    with pytest.raises(ValueError, match="dq violates velocity constraint 0"):
        linearize_minimal(skate, np.zeros(3), np.array([0.0, 1.0, 0.0]), [0.0, 0.0])
    # ... unless asked not to check (the linearization on the level set through q)
    A, B, info = linearize_minimal(double_pendulum, q + np.array([0.0, 1e-3]), z, [0.0], residual_limit=None)
    assert isinstance(info, MinimalInfo) and len(info.state_names) == 2


def test_unconstrained_and_degenerate():
    """No constraints: the minimal linearization is the full one. Redundant constraints: error."""
    spec = {"gravity": [0, -9.8, 0],
            "frames": [{"name": "l1", "rz": "a"}, {"name": "m1", "parent": "l1", "ty": -1.0, "mass": 1.0},
                       {"name": "l2", "parent": "m1", "rz": "b"},
                       {"name": "m2", "parent": "l2", "ty": -1.0, "mass": 1.0}],
            "inputs": [{"type": "torque", "config": "a"}]}
    free = core.load_system(spec)
    q, dq = np.array([0.3, -0.2]), np.array([0.5, 1.0])
    A, B, info = linearize_minimal(free, q, dq, [0.4])
    Af, Bf = free.linearize(q, dq, [0.4])
    assert_close(A, Af, "unconstrained A", tol=1e-14)
    assert_close(B, Bf, "unconstrained B", tol=1e-14)
    assert info.state_names == free.state_names and info.condition_coordinates == 1.0
    # the same constraint twice: rank deficient rows
    spec = dict(spec, constraints=[{"type": "plane", "frame": "m2", "normal": "x", "offset": 0.0}] * 2)
    twice = core.load_system(spec)
    q = solve_dependent(core.load_system(dict(spec, constraints=spec["constraints"][:1])), [0.3, 0.1], [1])
    with pytest.raises(ValueError, match="linearly dependent"):
        linearize_minimal(twice, q, np.zeros(2), [0.0])


def test_kinematic_variable_accelerations_are_inputs(fourbar):
    """A prescribed (kinematic) crank: its acceleration is an input of the minimal dynamics as of
    System.linearize (continuous_input_names), checked by finite differences."""
    driven = core.load_system(FOURBAR)
    driven.set_kinematic([driven.config_names[0]])
    names = driven.continuous_input_names
    assert len(names) == driven.nu + 1 and names[-1].endswith("_ddot")
    q = fourbar_state(driven, 2.3)
    dq = tangent_speed(driven.constraint(q, 1)[1], np.random.default_rng(5)) * 2.0
    u = np.linspace(0.4, -0.3, len(names))
    A, B, info = check_moving(driven, q, dq, u, holonomic_rows(driven))
    assert B.shape == (2, len(names))
    with pytest.raises(ValueError, match=rf"u must be a vector of {len(names)} entries"):
        linearize_minimal(driven, q, dq, np.zeros(driven.nu))
