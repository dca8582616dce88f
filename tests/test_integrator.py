"""The midpoint variational integrator: the paper's numbers, exactness of the first- and
second-order linearizations against finite differences, long-run behaviour, singularities."""
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

import core

CARTPOLE = Path(__file__).resolve().parents[1] / "core" / "data" / "cartpole.yaml"
PENDULUM = {
    "gravity": [0, -9.8, 0],
    "frames": [{"name": "pendulum", "parent": "world", "rz": "theta"},
               {"name": "bob", "parent": "pendulum", "ty": -1.0, "mass": 1.0}],
    "inputs": [{"type": "torque", "config": "theta"}],
}


# ------------------------------------------------------------------------------ the paper
def test_pendulum_single_step_matches_paper():
    vi = core.MidpointVI(core.load_system(PENDULUM), 0.1)
    q1, p1, _ = vi.split_state(vi.step(vi.state([0.2], [0.5]), [0.8]))
    assert q1[0] == pytest.approx(0.2471, abs=5e-5)
    assert p1[0] == pytest.approx(0.3627, abs=5e-5)


def test_pendulum_first_order_matches_paper():
    vi = core.MidpointVI(core.load_system(PENDULUM), 0.1)
    A, B = vi.linearize([0.2, 0.5], [0.8])
    # the paper truncates rather than rounds some entries (0.09767 is printed 0.0976)
    np.testing.assert_allclose(A, [[0.9533, 0.0976], [-0.9333, 0.9533]], atol=1e-4)
    np.testing.assert_allclose(B, [[0.00976], [0.09533]], atol=1e-5)
    controllability = np.hstack([B, A @ B])
    np.testing.assert_allclose(controllability, [[0.00976, 0.0186], [0.09533, 0.0818]], atol=5e-5)


def test_pendulum_second_order_matches_paper():
    # The paper prints delta^2 x_i = dz^T [matrix] dz with the matrices below; they are exactly
    # our H[i] = d2 x_i / dz dz (no symmetric factor 1/2 between the two): e.g. H[0, 0, 0] =
    # d2 q_k+1/dq_k^2 = 1.0121e-2 against the printed 1.01e-2.
    vi = core.MidpointVI(core.load_system(PENDULUM), 0.1)
    _, _, H = vi.linearize2([0.2, 0.5], [0.8])
    printed_q = [[1.01e-2, 5.06e-4, 5.06e-5], [5.06e-4, 2.53e-5, 2.53e-6], [5.06e-5, 2.53e-6, 2.53e-7]]
    printed_p = [[2.02e-1, 1.01e-2, 1.01e-3], [1.01e-2, 5.06e-4, 5.06e-5], [1.01e-3, 5.06e-5, 5.06e-6]]
    np.testing.assert_allclose(H[0], printed_q, rtol=5e-3)
    np.testing.assert_allclose(H[1], printed_p, rtol=5e-3)


# ------------------------------------------------------------------------------ random systems
KINDS = ["tx", "ty", "tz", "rx", "ry", "rz"]


def add_random_frames(s, rng, count):
    """``count`` massive frames f0.. (every transform kind among the first six, variable q_i
    on frame f_i, full inertias) on a random tree: ``(["world", f0, ...], kinds)``."""
    frames, kinds = ["world"], []
    for i in range(count):
        parent = frames[-1] if rng.uniform() < 0.7 else frames[int(rng.integers(0, len(frames)))]
        kind = KINDS[i % 6] if i < 6 else KINDS[int(rng.integers(0, 6))]
        offset = {"translation": list(rng.normal(size=3) * 0.3), "rotation": list(rng.normal(size=3) * 0.5)}
        L = rng.normal(size=(3, 3))
        S = L @ L.T    # second moment of a mass distribution: tr(S) 1 - S is a physical inertia
        s.add_frame(f"f{i}", parent=parent, offset=offset, mass=float(rng.uniform(0.5, 2.0)),
                    inertia=((np.trace(S) * np.eye(3) - S) * 0.05 + 0.02 * np.eye(3)).tolist(), **{kind: f"q{i}"})
        frames.append(f"f{i}")
        kinds.append(kind)
    return frames, kinds


def random_vi_system(seed, wrench=True):
    """A random system (see :func:`_random_vi_system`) whose constraints are independent."""
    rng = np.random.default_rng(seed)
    while True:
        s, q = _random_vi_system(rng, wrench)
        Dh = s.constraint(q, order=1)[1]
        dyn = [i for i, nm in enumerate(s.config_names) if nm not in ("hand_y", "string")]
        if np.linalg.svd(Dh[:, dyn], compute_uv=False).min() > 0.05:
            return s, q, rng


def _random_vi_system(rng, wrench=True):
    """A random tree with every transform kind, full inertias, damping, springs, torque and
    wrench inputs, a closed loop (distance constraint), a kinematic 'hand' variable and a
    'string' (distance constraint whose length is a kinematic variable); consistent state.
    Without ``wrench`` the inputs are torques only (two on one rotation, one on the kinematic
    hand): the second order then takes its input-affine shortcut (u columns from p0 columns)."""
    s = core.System(gravity=list(rng.normal(size=3) * 3.0), name="random_vi")
    frames, _ = add_random_frames(s, rng, int(rng.integers(4, 8)))
    # a kinematic hand: a driven translation frame (massless) holding a string
    s.add_frame("hand", parent="world", offset={"translation": [0.3, 2.0, 0.1]}, ty="hand_y")
    s.add_damping("q0", 0.3)
    s.add_spring("config", config="q1", stiffness=2.0, rest=0.1)
    s.add_input("torque", config="q0")
    if wrench:
        s.add_input("wrench", frame=frames[2])
    else:
        s.add_input("torque", config="hand_y")
        s.add_input("torque", config="q3")   # rotations: q0..q2 are translations at the root,
        s.add_input("torque", config="q4")   # on which the dynamics depend linearly
        s.add_input("torque", config="q3", name="q3_second")
    # choose the configuration first, then close the loop and cut the string to fit it
    q = rng.normal(size=s.nq) * 0.4
    q[s.config_index("hand_y")] = 0.2
    from core.tree.kinematics import create_data, forward_kinematics
    data = create_data(s.model)
    forward_kinematics(s.model, q, np.zeros_like(q), data)

    def position(name):
        return data.p[s.frame_index(name)].copy()

    string = float(np.linalg.norm(position(frames[-1]) - position("hand")))
    s.add_constraint("distance", frame1="hand", frame2=frames[-1], distance="string")
    s.add_constraint("distance", frame1=frames[1], frame2="world", distance=float(np.linalg.norm(position(frames[1]))))
    s.set_kinematic(["hand_y", "string"])
    assert s.config_names[-1] == "string"  # variables that drive no frame come last
    return s, np.append(q, string)


def consistent_state(vi, q, rng, speed=0.5):
    s = vi.system
    h, Dh, _ = s.constraint(q, order=2)
    assert np.abs(h).max() < 1e-12
    # velocity tangent to the constraints with the kinematic velocities prescribed
    dq = rng.normal(size=s.nq) * speed
    kin = vi.kinematic_index
    dq[kin] = rng.normal(size=len(kin)) * 0.2
    dyn = vi.dynamic_index
    rhs = -Dh[:, kin] @ dq[kin]
    dq[dyn] += np.linalg.lstsq(Dh[:, dyn], rhs - Dh[:, dyn] @ dq[dyn], rcond=None)[0]
    assert np.abs(Dh @ dq).max() < 1e-10
    x = vi.state(q, vi.momentum(q, dq), dq[kin])
    u = np.concatenate([rng.normal(size=s.nu), q[kin] + vi.dt * dq[kin]])
    return x, u


def fd_jacobian(fun, z, eps):
    """Five-point central differences of a vector function (columns = derivatives)."""
    cols = []
    for a in range(z.size):
        e = np.zeros_like(z)
        e[a] = eps
        cols.append((-fun(z + 2 * e) + 8 * fun(z + e) - 8 * fun(z - e) + fun(z - 2 * e)) / (12 * eps))
    return np.stack(cols, axis=-1)


def rel_err(exact, approx):
    return np.linalg.norm(exact - approx) / max(1.0, np.linalg.norm(exact))


@pytest.mark.parametrize("seed, wrench", [(seed, True) for seed in range(6)]
                         + [(seed, False) for seed in range(6, 9)])
def test_first_and_second_order_match_finite_differences(seed, wrench):
    s, q, rng = random_vi_system(seed, wrench)
    vi = core.MidpointVI(s, 0.01, tolerance=1e-13)
    x, u = consistent_state(vi, q, rng)
    check_against_finite_differences(vi, x, u)


def random_open_system(seed, inputs):
    """A random tree with every transform kind, full inertias, damping and a spring, without
    constraints or kinematic variables; ``inputs``: "torques" (one on every rotation: the
    second order's input shortcut and its path for z' = [q, p]), "none" (that path writing H
    directly) or "wrench" (a forcing cross term: the general path)."""
    rng = np.random.default_rng(seed)
    s = core.System(gravity=list(rng.normal(size=3) * 3.0), name="random_open")
    frames, kinds = add_random_frames(s, rng, int(rng.integers(6, 10)))
    for i, kind in enumerate(kinds):
        if inputs == "torques" and kind[0] == "r":
            s.add_input("torque", config=f"q{i}")
    s.add_damping("q0", 0.3)
    s.add_spring("config", config="q1", stiffness=2.0, rest=0.1)
    if inputs == "wrench":
        s.add_input("wrench", frame=frames[3])
    vi = core.MidpointVI(s, 0.01, tolerance=1e-13)
    q, dq = rng.normal(size=s.nq) * 0.4, rng.normal(size=s.nq) * 0.5
    return vi, vi.state(q, vi.momentum(q, dq)), rng.normal(size=s.nu)


@pytest.mark.parametrize("seed, inputs", [(10, "torques"), (11, "torques"), (12, "none"),
                                          (13, "wrench")])
def test_unconstrained_first_and_second_order_match_finite_differences(seed, inputs):
    vi, x, u = random_open_system(seed, inputs)
    assert vi.nk == 0 and vi.system.model.nh == 0
    check_against_finite_differences(vi, x, u)


def check_against_finite_differences(vi, x, u):
    """A, B (relative error < 1e-6) and H (< 1e-4, whole and block by block) against central
    differences of the step and of the exact first order."""
    nx = vi.nx
    A, B, H = vi.linearize2(x, u)
    np.testing.assert_allclose(vi.linearize(x, u)[0], A, rtol=1e-12, atol=1e-12)
    z = np.concatenate([x, u])

    def f(zz):
        return vi.step(zz[:nx], zz[nx:])

    J = fd_jacobian(f, z, 1e-4)
    assert rel_err(np.hstack([A, B]), J) < 1e-6

    def AB(zz):
        return np.hstack(vi.linearize(zz[:nx], zz[nx:]))

    H_fd = fd_jacobian(AB, z, 1e-4)  # [i, a, b] = d(dx_i/dz_a)/dz_b
    assert rel_err(H, H_fd) < 1e-4
    assert np.allclose(H, H.transpose(0, 2, 1), atol=1e-10 * max(1.0, np.abs(H).max()))
    # block by block too (q_k; p_k and v_k; force inputs; rho_k+1): the input blocks are
    # O(dt^2) and a wrong one would hide in the error of the whole tensor. H being symmetric,
    # block (a, b) is checked against the better of its two difference quotients (d/dz_b of
    # column a, d/dz_a of column b): one of them can be all rounding noise (the step's
    # tolerance over eps) where the block is tiny, e.g. q_k x force inputs.
    n, m = vi.nq, vi.system.nu
    edges = sorted(set([0, n, nx, nx + m, z.size]))
    scale = np.linalg.norm(H)
    for a0, a1 in itertools.pairwise(edges):
        for b0, b1 in itertools.pairwise(edges):
            exact = H[:, a0:a1, b0:b1]
            err = min(np.linalg.norm(exact - H_fd[:, a0:a1, b0:b1]),
                      np.linalg.norm(exact - H_fd[:, b0:b1, a0:a1].transpose(0, 2, 1)))
            assert err < 1e-4 * max(np.linalg.norm(exact), 1e-6 * scale), (a0, b0, err)
    check_contracted(vi, x, u, H, H_fd)


def check_contracted(vi, x, u, H, H_fd=None):
    """The contracted second order ``W = Σ_i λ_i H[i]`` (computed without the tensor) against
    the tensor contracted (round-off of the 1/dt² terms: 1e-9 of the scale), against the
    difference quotients of ``λᵀ [A B]`` contracted alike, and the first order it returns."""
    rng = np.random.default_rng(7)
    for lam in (rng.normal(size=vi.nx), np.eye(vi.nx)[vi.nq]):
        A, B, W = vi.linearize2(x, u, costate=lam)
        np.testing.assert_array_equal(np.hstack([A, B]), np.hstack(vi.linearize(x, u)))
        ref = np.tensordot(lam, H, axes=1)
        scale = np.abs(lam) @ np.abs(H).reshape(vi.nx, -1).max(axis=1)
        assert np.abs(W - ref).max() <= 1e-9 * max(1.0, scale)
        if H_fd is not None:
            assert rel_err(W, np.tensordot(lam, H_fd, axes=1)) < 1e-4


@pytest.mark.parametrize("seed", range(6))
def test_step_solves_the_del_equations(seed):
    """The chord-Newton DEL solve, checked against the equations rebuilt from the public
    Lagrangian derivatives at the midpoint: the momentum rows up to a constraint force
    (D2 L_d + D1 L_d' + dt F = Dh(q0)^T lam), h(q1) = 0 and p1 = D2 L_d. Large steps and fast
    motion, so the solve needs several iterations."""
    s, q, rng = random_vi_system(seed)
    dyn_names = [nm for nm in s.config_names if nm not in ("hand_y", "string")]
    for nm in dyn_names:
        s.add_damping(nm, 0.4)
    dt = 0.05
    vi = core.MidpointVI(s, dt, tolerance=1e-12)
    x, u = consistent_state(vi, q, rng, speed=3.0)
    u[:s.nu] = 0.0                     # no inputs: the only generalized force is the damping
    n, dyn = s.nq, vi.dynamic_index
    x1 = vi.step(x, u)
    q0, p0, q1, p1 = x[:n], x[n:n + vi.nd], x1[:n], x1[n:n + vi.nd]
    assert np.abs(q1 - q0).max() > 0.01
    qm, v = 0.5 * (q0 + q1), (q1 - q0) / dt
    d = s.lagrangian_derivatives(qm, v, 1)
    F = np.zeros(n)
    for nm in dyn_names:
        F[s.config_index(nm)] = -0.4 * v[s.config_index(nm)]
    residual = p0 + (0.5 * dt * d.Lq - d.Lv + dt * F)[dyn]
    Dh0 = s.constraint(q0, order=1)[1][:, dyn]
    lam = np.linalg.lstsq(Dh0.T, residual, rcond=None)[0]
    scale = max(1.0, np.abs(d.Lv).max())
    assert np.abs(residual - Dh0.T @ lam).max() < 1e-10 * scale
    assert np.abs(s.constraint(q1)).max() < 1e-10
    np.testing.assert_allclose(p1, (0.5 * dt * d.Lq + d.Lv)[dyn], rtol=1e-10, atol=1e-10 * scale)


def test_linearize_trajectory_matches_pointwise():
    s, q, rng = random_vi_system(11)
    vi = core.MidpointVI(s, 0.01, tolerance=1e-13)
    x, u = consistent_state(vi, q, rng)
    N = 5
    U = np.tile(u, (N, 1))
    U[:, -2:] = q[vi.kinematic_index] + vi.dt * np.arange(1, N + 1)[:, None] * (u[-2:] - q[vi.kinematic_index]) / vi.dt
    X = [x]
    for k in range(N):
        X.append(vi.step(X[-1], U[k]))
    X = np.array(X)
    As, Bs, Hs = vi.linearize_trajectory(X, U, second_order=True)
    costates = rng.normal(size=(N, vi.nx))
    contracted = [vi.linearize_trajectory(X, U, True, threads=t, costates=costates) for t in (1, 2)]
    for k in (0, N - 1):
        A, B, H = vi.linearize2(X[k], U[k])
        np.testing.assert_allclose(As[k], A, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(Bs[k], B, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(Hs[k], H, rtol=1e-10, atol=1e-9)
        W = vi.linearize2(X[k], U[k], costate=costates[k])[2]
        for As_c, Bs_c, Ws in contracted:     # serial and parallel: the single call's numbers
            np.testing.assert_array_equal(As_c[k], As[k])
            np.testing.assert_array_equal(Bs_c[k], Bs[k])
            np.testing.assert_array_equal(Ws[k], W)
        check_contracted(vi, X[k], U[k], H)
    with pytest.raises(ValueError, match="second_order=True"):
        vi.linearize_trajectory(X, U, costates=costates)
    with pytest.raises(ValueError, match="costates"):
        vi.linearize_trajectory(X, U, True, costates=costates[:-1])
    with pytest.raises(ValueError, match="costate"):
        vi.linearize2(X[0], U[0], costate=np.ones(vi.nx + 1))
    with pytest.raises(ValueError, match="costate"):
        vi.linearize2(X[0], U[0], costate=np.full(vi.nx, np.nan))


def test_first_order_with_and_without_the_solves_constraint_jacobian():
    """del_linearize takes Dh(q_k+1) from the DEL solve (linearize does) or evaluates it
    itself (given an empty array): the same A and B either way."""
    from core.discrete.first_order import del_linearize
    from core.discrete.step import del_step
    s, q, rng = random_vi_system(3)
    vi = core.MidpointVI(s, 0.01, tolerance=1e-13)
    x, u = consistent_state(vi, q, rng)
    q0, p0, _ = vi.split_state(x)
    u_force, rho = vi.split_input(u)
    model, (data, der) = s.model, s.workspace.get()
    n, nh = vi.nq, model.nh
    q1, p1, lam, Dh1 = np.empty(n), np.empty(vi.nd), np.zeros(nh), np.full((nh, n), np.nan)
    status, info = np.zeros(2, np.int64), np.zeros(4)
    del_step(model, data, der, vi.dt, vi.dynamic_index, vi.kinematic_index, q0, p0, u_force, rho,
             1e-13, 50, q1, p1, lam, Dh1, status, info)
    assert status[0] == 0 and nh == 2
    np.testing.assert_allclose(Dh1, s.constraint(q1, order=1)[1], rtol=0, atol=1e-14)
    results = []
    for given in (Dh1, np.empty((0, n))):
        A, B = np.empty((vi.nx, vi.nx)), np.empty((vi.nx, vi.nu))
        del_linearize(model, data, der, vi.dt, vi.dynamic_index, vi.kinematic_index, q0, p0,
                      u_force, rho, q1, lam, given, 1e12, A, B, None, None, status, np.zeros(2),
                      np.empty(0))
        assert status[0] == 0
        results.append((A, B))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


# ------------------------------------------------------------------------------ long runs
def test_long_run_energy_bounded_and_constraint_held(double_pendulum_spec):
    # an unforced closed loop: the paper's constrained double pendulum without its input
    del double_pendulum_spec["inputs"]
    s = core.load_system(double_pendulum_spec)
    dt, N = 0.01, 100_000
    vi = core.MidpointVI(s, dt)
    # a configuration on the constraint: solve theta2 for theta1 = 0.5 with Newton
    q = np.array([0.5, 1.0])
    for _ in range(30):
        h, Dh = s.constraint(q, order=1)
        q[1] -= h[0] / Dh[0, 1]
    Dh = s.constraint(q, order=1)[1]
    dq = np.array([1.0, -Dh[0, 0] / Dh[0, 1]])
    Q, P, _ = vi.simulate(q, vi.momentum(q, dq), np.zeros((N, 0)))
    h_max = max(abs(s.constraint(Q[k])[0]) for k in range(0, N + 1, 97))
    assert h_max < 1e-10
    E = np.array([s.energy(0.5 * (Q[k] + Q[k + 1]), (Q[k + 1] - Q[k]) / dt) for k in range(0, N, 50)])
    spread = E.max() - E.min()
    assert spread < 1e-2 * abs(E).max()  # bounded oscillation
    tenth = len(E) // 10
    assert abs(E[-tenth:].mean() - E[:tenth].mean()) < 0.2 * spread + 1e-12  # no drift


def test_momentum_of_cyclic_variable_is_conserved():
    s = core.load_system({
        "gravity": [0, 0, -9.8],
        "frames": [{"name": "turn", "parent": "world", "rz": "phi"},
                   {"name": "swing", "parent": "turn", "rx": "theta"},
                   {"name": "bob", "parent": "swing", "tz": -1.0, "mass": 1.0, "inertia": [0.1, 0.2, 0.3]}],
    })
    # The DEL equations conserve p_phi exactly (L does not depend on phi: D1 Ld + D2 Ld = 0 on
    # its row), so each step changes it by the Newton residual alone: at most the solve's
    # tolerance times the row's largest term (about |p_phi|). 2000 such steps add up to a random
    # walk; a tolerance of 1e-12 keeps it well inside 1e-10 (the default 1e-11 puts it at 1e-10).
    tol = 1e-12
    vi = core.MidpointVI(s, 0.01, tolerance=tol)
    q, dq = np.array([0.0, 0.7]), np.array([2.0, 0.0])
    Q, P, _ = vi.simulate(q, vi.momentum(q, dq), np.zeros((2000, 0)))
    assert np.abs(np.diff(P[:, 0])).max() <= 2 * tol * np.abs(P[:, 0]).max()
    assert np.abs(P[:, 0] - P[0, 0]).max() < 1e-10
    assert np.ptp(Q[:, 1]) > 0.05  # it really swings


# ------------------------------------------------------------------------------ errors
def spherical_pendulum():
    # q = (theta, phi): theta the polar angle from the downward vertical, phi the azimuth
    return core.load_system({
        "gravity": [0, 0, -9.8],
        "frames": [{"name": "azimuth", "parent": "world", "rz": "phi"},
                   {"name": "polar", "parent": "azimuth", "rx": "theta"},
                   {"name": "bob", "parent": "polar", "tz": -1.0, "mass": 1.0}],
    })


def test_spherical_pendulum_singularity_is_reported():
    # Sec. VII-A: M_k+1 is singular when theta_k + theta_k+1 = 0 (symmetric about the pole).
    s = spherical_pendulum()
    dt = 0.05
    vi = core.MidpointVI(s, dt)
    names = s.config_names  # [phi, theta]
    q0 = np.zeros(2)
    q1 = np.zeros(2)
    q0[names.index("theta")], q1[names.index("theta")] = 0.2, -0.2
    q1[names.index("phi")] = 0.1
    d = s.lagrangian_derivatives(0.5 * (q0 + q1), (q1 - q0) / dt, 1)
    p0 = -(0.5 * dt * d.Lq - d.Lv)  # p_k = -D1 L_d(q_k, q_k+1)
    with pytest.raises(core.errors.SingularStepError) as err:
        vi.linearize(vi.state(q0, p0), [])
    assert "M_k+1" in str(err.value) and "Sec. VII-A" in str(err.value)
    for call in (lambda x: vi.step_linearize(x, []), lambda x: vi.linearize2(x, [], costate=np.ones(4))):
        with pytest.raises(core.errors.SingularStepError) as again:   # (the same, from each entry)
            call(vi.state(q0, p0))
        assert str(again.value) == str(err.value) and again.value.measure == err.value.measure
    # away from the pole the same construction is regular
    q1[names.index("theta")] = 0.25
    d = s.lagrangian_derivatives(0.5 * (q0 + q1), (q1 - q0) / dt, 1)
    A, _ = vi.linearize(vi.state(q0, -(0.5 * dt * d.Lq - d.Lv)), [])
    assert np.all(np.isfinite(A))


# Sec. VII-B: the gravity-free Cartesian pendulum on the unit circle (q = (x, y), h = x^2 + y^2 - 1
# up to scale), dt = 0.1, S = Dh(q_k+1) M_k+1^-1 Dh(q_k)^T = -4 dt^2/m (x_k x_k+1 + y_k y_k+1)
CIRCLE = {
    "gravity": [0, 0, 0],
    "frames": [{"name": "px", "parent": "world", "tx": "x"},
               {"name": "bob", "parent": "px", "ty": "y", "mass": 1.0}],
    "constraints": [{"type": "distance", "frame1": "world", "frame2": "bob", "distance": 1.0}],
}


def step_fd(vi, x, h):
    """Central differences of ``vi.step(x, [])`` with the step ``h[j]`` in ``x[j]``."""
    cols = []
    for j, hj in enumerate(h):
        e = np.zeros(x.size)
        e[j] = hj
        cols.append((vi.step(x + e, []) - vi.step(x - e, [])) / (2 * hj))
    return np.column_stack(cols)


def circle_step(turn, mass=1.0, dt=0.1):
    """The integrator and the state x_k from which the step turns ``turn`` rad from (1, 0):
    p_k = m (q_k+1 - q_k)/dt solves the DEL equations with lam_k = 0."""
    spec = {**CIRCLE, "frames": [CIRCLE["frames"][0], {**CIRCLE["frames"][1], "mass": mass}]}
    vi = core.MidpointVI(core.load_system(spec), dt)
    q0, q1 = np.array([1.0, 0.0]), np.array([np.cos(turn), np.sin(turn)])
    x = vi.state(q0, mass * (q1 - q0) / dt)
    np.testing.assert_allclose(vi.step(x, [])[:2], q1, atol=1e-9)
    return vi, x


def test_sec7b_singular_constraint_step_is_reported():
    # the paper's example: a quarter turn in one step makes Dh(q_k+1) orthogonal to Dh(q_k)
    # (S = -4.4e-18 with 1 x 1 condition number 1: the old check let A = 9e16 through)
    vi, x = circle_step(np.pi / 2)
    with pytest.raises(core.errors.SingularMatrixError, match=r"Sec. VII-B") as err:
        vi.linearize(x, [])
    assert isinstance(err.value, core.errors.IntegratorError) and err.value.matrix == "Dh M^-1 Dh^T"
    assert err.value.measure > 1e15           # 1/|cos(pi/2)| = 1.6e16
    with pytest.raises(core.errors.SingularStepError):
        vi.linearize2(x, [])
    with pytest.raises(core.errors.SingularStepError, match=r"Sec. VII-B") as err:
        vi.linearize2(x, [], costate=[1.0, 2.0, 3.0, 4.0])
    assert err.value.matrix == "Dh M^-1 Dh^T" and err.value.measure > 1e15
    with pytest.raises(core.errors.SingularStepError, match="at step 0"):
        X = np.vstack([x, vi.step(x, [])])
        vi.linearize_trajectory(X, np.zeros((1, 0)))
    # nearby regular steps, at any mass scale: exact (finite differences) and no false alarm
    for turn, mass in [(np.pi / 2 - 0.05, 1.0), (np.pi / 2 + 0.05, 1e-6), (0.3, 1e6), (1.0, 1.0)]:
        vi, x = circle_step(turn, mass)
        A, _ = vi.linearize(x, [])
        np.testing.assert_allclose(A, step_fd(vi, x, [1e-7, 1e-7, 1e-7 * mass, 1e-7 * mass]),
                                   rtol=1e-5, atol=1e-6 * np.abs(A).max())


def sec7a_pendulum(dt, theta0, theta1, mass=1.0):
    """The one-variable pendulum (r = 1, g = 9.8; theta from the downward vertical) and the
    state whose step goes from theta0 to theta1: p_k = -D1 L_d(q_k, q_k+1)."""
    s = core.load_system({"gravity": [0, 0, -9.8],
                          "frames": [{"name": "arm", "parent": "world", "rx": "theta"},
                                     {"name": "bob", "parent": "arm", "tz": -1.0, "mass": mass}]})
    vi = core.MidpointVI(s, dt)
    q0, q1 = np.array([theta0]), np.array([theta1])
    d = s.lagrangian_derivatives(0.5 * (q0 + q1), (q1 - q0) / dt, 1)
    return vi, vi.state(q0, -(0.5 * dt * d.Lq - d.Lv))


def test_sec7a_one_variable_singularity_is_reported_and_never_falsely():
    # Sec. VII-A, pure pendular motion: M_k+1 = -m r^2/dt - dt m g r cos(theta_m)/4 ... vanishes
    # when dt^2 g cos(theta_m) + 4 r = 0, i.e. dt = sqrt(4 r/g) about the upright theta_m = pi
    # (a 1 x 1 matrix: its condition number is 1 and the old check could not see it)
    dt = np.sqrt(4 / 9.8)
    vi, x = sec7a_pendulum(dt, np.pi - 0.3, np.pi + 0.3)
    with pytest.raises(core.errors.SingularMatrixError, match=r"M_k\+1 .*\(Sec\. VII-A\)") as err:
        vi.linearize(x, [])
    assert err.value.matrix == "M_k+1" and err.value.measure > 1e12
    # regular steps of the same one-variable system, light or heavy, large or small steps
    for dt_, th0, th1, mass in [(0.9 * dt, np.pi - 0.3, np.pi + 0.3, 1.0),
                                (0.05, np.pi - 0.6, np.pi - 0.2, 1e-8),
                                (0.01, 0.2, 0.25, 1e8), (0.5, -1.0, 2.0, 1.0), (0.01, 0.0, 0.0, 1.0)]:
        vi, x = sec7a_pendulum(dt_, th0, th1, mass)
        A, _ = vi.linearize(x, [])
        np.testing.assert_allclose(A, step_fd(vi, x, [1e-6, 1e-6 * mass]), rtol=1e-4,
                                   atol=1e-6 * np.abs(A).max())


def test_newton_failure_reports_residual_and_iterations():
    vi = core.MidpointVI(core.load_system(PENDULUM), 0.1, max_iterations=1, tolerance=1e-15)
    with pytest.raises(core.errors.IntegratorError) as err:
        vi.step(vi.state([0.2], [50.0]), [0.8])
    assert err.value.iterations == 1 and err.value.residual > 0
    assert "did not converge" in str(err.value)


def test_simulate_names_failing_step():
    vi = core.MidpointVI(core.load_system(PENDULUM), 0.1, max_iterations=3, tolerance=1e-14)
    U = np.zeros((10, 1))
    U[4] = 1e6
    with pytest.raises(core.errors.IntegratorError) as err:
        vi.simulate([0.0], [0.0], U)
    assert err.value.step == 4


def test_bad_inputs_are_refused():
    vi = core.MidpointVI(core.load_system(PENDULUM), 0.1)
    with pytest.raises(ValueError, match="q must be a vector of 1"):
        vi.step(vi.state([0.2, 0.1], [0.5]), [0.8])
    with pytest.raises(ValueError, match="x must be a vector of 2"):
        vi.step([0.2, 0.1, 0.5], [0.8])
    with pytest.raises(ValueError, match="not finite"):
        vi.step(vi.state([np.nan], [0.5]), [0.8])
    with pytest.raises(ValueError, match=r"x\[0\] \(theta\) is not finite"):
        vi.step([np.nan, 0.5], [0.8])
    with pytest.raises(ValueError, match="dt must be"):
        core.MidpointVI(core.load_system(PENDULUM), -1.0)


@pytest.mark.parametrize("second", [False, True])
def test_linearize_refuses_non_finite_state_and_input_after_a_cached_solve(second):
    # the linearization checks finiteness with the solve (a cache hit was checked when it was
    # solved); v_k, which the solve does not see, and every other entry must still be refused
    s, q, rng = random_vi_system(0)
    vi = core.MidpointVI(s, 0.01)
    x, u = consistent_state(vi, q, rng)
    linearize = vi.linearize2 if second else vi.linearize
    vi.step(x, u)
    linearize(x, u)
    n, nd = vi.nq, vi.nd
    for i in (0, n, n + nd):  # a q, a p and a v entry
        bad = x.copy()
        bad[i] = np.nan
        with pytest.raises(ValueError, match=rf"x\[{i}\] \({vi.state_names[i]}\) is not finite"):
            linearize(bad, u)
    for i in (0, u.size - 1):
        bad = u.copy()
        bad[i] = np.inf
        with pytest.raises(ValueError, match=rf"u\[{i}\] .* is not finite"):
            linearize(x, bad)
    with pytest.raises(ValueError, match="x must be a vector"):
        linearize(x[:-1], u)
    A, B = linearize(x, u)[:2]  # and it still works
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(B))


# ------------------------------------------------------------------------------ messages
def test_too_large_inputs_are_reported_as_such_not_as_singular_matrices():
    # a 1e12 N force on the cart-pole used to report "M_k+1 or the constraint Jacobian lost rank"
    vi = core.MidpointVI(core.load_system(CARTPOLE), 0.01)
    x = vi.state(np.zeros(2), np.zeros(2))
    for force in (1e11, 1e12, 1e200):
        with pytest.raises(core.errors.IntegratorError, match=re.escape(
                "too large for this system and dt (largest entry: u[0] (cart_force) = "
                f"{force:.6g})")) as err:
            vi.step(x, [force])
        assert "lost rank" not in str(err.value).split(";")[0]
    with pytest.raises(core.errors.IntegratorError, match=r"at step 3: .*u\[0\] \(cart_force\) = 1e\+12"):
        vi.simulate(np.zeros(2), np.zeros(2), np.array([[0.0]] * 3 + [[1e12]]))
    with pytest.raises(core.errors.IntegratorError, match=r"largest entry: q\[0\] \(x\) = 1e\+300"):
        vi.step(vi.state([1e300, 0.0], [0.0, 0.0]), [0.0])
    # a genuinely singular Newton matrix keeps its own message (a model whose mass matrix is
    # singular at q = 0: a variable that moves nothing)
    still = core.MidpointVI(core.load_system({"gravity": [0, 0, 0], "frames": [
        {"name": "a", "parent": "world", "rx": "idle"}]}), 0.01)
    with pytest.raises(core.errors.IntegratorError, match="DEL Newton Jacobian is singular"):
        still.step(still.state([0.0], [1.0]), [])


def test_wrong_types_name_the_argument():
    s = core.load_system(PENDULUM)
    for kw, pattern in [({"dt": "0.01"}, r"dt must be a number, got str '0.01'"),
                        ({"dt": 0.0}, r"dt must be a finite positive number, got 0.0"),
                        ({"dt": 0.01, "tolerance": None}, r"tolerance must be a number, got NoneType"),
                        ({"dt": 0.01, "max_iterations": 2.5}, r"max_iterations must be a finite "
                                                              r"positive whole number, got 2.5")]:
        with pytest.raises(ValueError, match=pattern):
            core.MidpointVI(s, **kw)


def bushy_system(seed, frame_spring):
    """A random bushy tree (12 variables, each frame's parent drawn from all frames before it)
    with damping, a spring, torques and a wrench input; with ``frame_spring`` also a spring of
    zero stiffness between two frames: the same dynamics, but a Newton matrix without the
    tree's pattern as far as the solver can tell."""
    rng = np.random.default_rng(seed)
    s = core.System(gravity=list(rng.normal(size=3) * 3.0), name="bushy")
    frames = ["world"]
    for i in range(12):
        parent = frames[int(rng.integers(0, len(frames)))]
        offset = {"translation": list(rng.normal(size=3) * 0.3), "rotation": list(rng.normal(size=3) * 0.5)}
        s.add_frame(f"f{i}", parent=parent, offset=offset, mass=float(rng.uniform(0.5, 2.0)),
                    inertia=[0.05, 0.06, 0.07], **{KINDS[i % 6]: f"q{i}"})
        s.add_input("torque", config=f"q{i}")
        frames.append(f"f{i}")
    s.add_damping("q4", 0.3)
    s.add_spring("config", config="q5", stiffness=2.0, rest=0.1)
    s.add_input("wrench", frame="f9")
    if frame_spring:
        s.add_spring("frames", frame1="f10", frame2="world", stiffness=0.0, rest_length=0.0)
    q, dq = rng.normal(size=s.nq) * 0.4, rng.normal(size=s.nq) * 0.5
    return s, q, dq, rng.normal(size=s.nu)


@pytest.mark.parametrize("seed", range(3))
def test_tree_newton_path_matches_the_dense_path(seed):
    """The DEL solve with the tree-patterned Newton matrix (tree LU, more Newton steps) and
    the dense one (pivoted LU, chord steps) reach the same step, and the first order from it
    (tree LU inverse of M_k+1 or the dense one) agrees to round-off."""
    from core.discrete.step import sparse_newton
    out = []
    for frame_spring in (False, True):
        s, q, dq, u = bushy_system(seed, frame_spring)
        vi = core.MidpointVI(s, 0.01, tolerance=1e-13)
        assert sparse_newton(s.model, 0) == (not frame_spring)
        x = vi.state(q, vi.momentum(q, dq))
        out.append(vi.step_linearize(x, u))
    for sparse, dense in zip(*out, strict=True):
        assert np.abs(sparse - dense).max() <= 1e-12 * max(1.0, np.abs(dense).max())
