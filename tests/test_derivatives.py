"""Exact derivatives of core against central finite differences on seeded random systems.

Every check is norm-wise: ``||exact - fd|| <= 1e-6 * max(1, ||exact||)`` with the 4-point
central stencil (step 1e-5, truncation error O(h^4), round-off O(eps / h)). Two families of
systems (see ``randsys.py``):

* ``GENERAL``: everything random (0-3 holonomic constraints, sometimes a velocity constraint);
* ``CONSTRAINED``: always tries 3 holonomic constraint entries and one velocity constraint, so
  that every constraint-related test has rows to check.

The library's outputs are never differentiated by the library's own derivative code: FD is
always applied to a lower-order output (L, h, F, positions, qdd, lam).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from core.tree.constraints import holonomic
from core.tree.jets import joint_union, point_jet
from core.tree.kinematics import create_data, forward_kinematics
from core.tree.lagrangian import create_derivs, prepare, third_order

from randsys import KINDS, assert_close, fd, fd2_along, fd_along, force_terms, random_system

GENERAL = list(range(24)) + [200, 201]   # 200, 201: 15-frame trees
CONSTRAINED = list(range(100, 120))
TOL = 1e-6


@functools.lru_cache(maxsize=None)
def case(seed: int):
    if seed >= 200:
        return random_system(seed, n_frames=(15, 15))
    if seed >= 100:
        return random_system(seed, n_frames=(4, 15), constraints=1 + seed % 3, velocity_constraints=1 + seed % 2)
    return random_system(seed)


def off_manifold(seed: int):
    """A state near the case's q0 that violates the constraints (valid for all derivative
    identities: lam is eliminated as a function of the state)."""
    s, q0, dq0, u0 = case(seed)
    rng = np.random.default_rng(seed + 7)
    return s, q0 + 0.05 * rng.normal(size=q0.size), rng.normal(size=q0.size), u0 + rng.normal(size=u0.size)


# ---------------------------------------------------------------------------------- generator
def test_generator_covers_every_element():
    """The random systems really mix every transform kind, constraint kind, input kind, etc."""
    seen = set()
    for seed in GENERAL + CONSTRAINED:
        s, q0, dq0, u0 = case(seed)
        spec = s.spec
        assert 3 <= len([f for f in spec["frames"] if not f["name"].startswith("anchor")]) <= 15
        for f in spec["frames"]:
            for k in KINDS:
                if k in f:
                    seen.add((k, "variable" if isinstance(f[k], str) else "constant"))
            off = f.get("offset") or {}
            if "rotation" in off:
                seen.add("offset rpy" if np.shape(off["rotation"]) == (3,) else "offset matrix")
            if "translation" in off:
                seen.add("offset translation")
            if "inertia" in f:
                inertia = np.asarray(f["inertia"])
                assert np.allclose(inertia, inertia.T) and np.linalg.eigvalsh(inertia).min() > 0
                if np.abs(inertia - np.diag(np.diag(inertia))).max() > 1e-3:
                    seen.add("full inertia")
        seen.update("constraint " + c["type"] for c in spec["constraints"])
        seen.update("velocity constraint" for _ in spec["velocity_constraints"])
        seen.update("spring " + sp["type"] for sp in spec["springs"])
        seen.update("damping" for _ in spec["damping"])
        seen.update("input " + i["type"] for i in spec["inputs"])
        g = np.asarray(spec["gravity"])
        assert np.count_nonzero(g) == 3
        # consistency of the generated state, checked with the library
        h = s.constraint(q0)
        assert np.abs(h).max(initial=0.0) < 1e-10
        A = np.vstack([s.constraint(q0, 1)[1], s.reference.velocity_rows(q0)])
        assert np.abs(A @ dq0).max(initial=0.0) < 1e-10
        assert np.linalg.eigvalsh(s.lagrangian_derivatives(q0, dq0, 2).Lvv).min() > 0
    expected = {(k, how) for k in KINDS for how in ("variable", "constant")}
    expected |= {"offset rpy", "offset matrix", "offset translation", "full inertia",
                 "constraint distance", "constraint plane", "constraint coincide", "velocity constraint",
                 "spring config", "spring frames", "damping",
                 "input torque", "input force", "input moment", "input wrench"}
    assert expected <= seen, f"not covered: {sorted(map(str, expected - seen))}"


# ---------------------------------------------------------------------------------- Lagrangian
def _L(s, order):
    def at(q, dq):
        return s.lagrangian_derivatives(q, dq, order)
    return at


@pytest.mark.parametrize("seed", GENERAL)
def test_lagrangian_gradient(seed):
    s, q, dq, _ = off_manifold(seed)
    d = s.lagrangian_derivatives(q, dq, 1)
    def L(qq, vv):
        return s.lagrangian_derivatives(qq, vv, 0).L[0]
    assert_close(d.Lq, fd(lambda x: L(x, dq), q), "Lq")
    assert_close(d.Lv, fd(lambda x: L(q, x), dq), "Lv")


@pytest.mark.parametrize("seed", GENERAL)
def test_lagrangian_hessian(seed):
    s, q, dq, _ = off_manifold(seed)
    d = s.lagrangian_derivatives(q, dq, 2)
    D1 = _L(s, 1)
    assert_close(d.Lqq, fd(lambda x: D1(x, dq).Lq, q), "Lqq")
    # Lqv[a, i] = d2L / dq_a dv_i, two ways
    assert_close(d.Lqv, fd(lambda x: D1(q, x).Lq, dq), "Lqv (FD of Lq in v)")
    assert_close(d.Lqv, fd(lambda x: D1(x, dq).Lv, q).T, "Lqv (FD of Lv in q)")
    assert_close(d.Lvv, fd(lambda x: D1(q, x).Lv, dq), "Lvv")
    assert np.allclose(d.Lqq, d.Lqq.T, atol=1e-12) and np.allclose(d.Lvv, d.Lvv.T, atol=1e-12)


@pytest.mark.parametrize("seed", GENERAL)
def test_lagrangian_third_order(seed):
    s, q, dq, _ = off_manifold(seed)
    d = s.lagrangian_derivatives(q, dq, 3)
    d2 = s.lagrangian_derivatives(q, dq, 2)
    for name in ("L", "Lq", "Lv", "Lqq", "Lqv", "Lvv"):
        assert_close(getattr(d, name), getattr(d2, name), f"{name} at order 3 vs order 2", tol=1e-12)
    D2 = _L(s, 2)
    assert_close(d.Lqqq, fd(lambda x: D2(x, dq).Lqq, q), "Lqqq")
    assert_close(d.Lqqv, fd(lambda x: D2(q, x).Lqq, dq), "Lqqv (FD of Lqq in v)")
    # Lqqv[a, b, i] from Lqv[a, i] differentiated in q_b
    assert_close(d.Lqqv, np.moveaxis(fd(lambda x: D2(x, dq).Lqv, q), 2, 1), "Lqqv (FD of Lqv in q)")
    assert_close(d.Lqvv, fd(lambda x: D2(q, x).Lqv, dq), "Lqvv (FD of Lqv in v)")
    assert_close(d.Lqvv, np.moveaxis(fd(lambda x: D2(x, dq).Lvv, q), 2, 0), "Lqvv (FD of Lvv in q)")


@pytest.mark.parametrize("seed", GENERAL)
def test_lagrangian_directional_third_order(seed):
    """The tensor-free kernel used by the linearization: derivative of the Hessian blocks along
    a direction (wq, wv), from the rates of the Hessian's pair formulas (no pair tables), against
    differences of the Hessian and against the triples' tensors contracted (an independent
    exact computation)."""
    s, q, dq, _ = off_manifold(seed)
    rng = np.random.default_rng(seed + 11)
    wq, wv = rng.normal(size=q.size), rng.normal(size=q.size)
    model = s.model
    data, der = create_data(model, pairs=False), create_derivs(model.nq, False)
    prepare(model, data, q, dq)
    third_order(model, data, q, False, wq, wv, der)
    D2 = _L(s, 2)
    def along(name):
        return fd_along(lambda t: getattr(D2(q + t * wq, dq + t * wv), name))
    assert_close(der.dLqq, along("Lqq"), "dLqq")
    assert_close(der.dLqv, along("Lqv"), "dLqv")
    assert_close(der.dLvv, along("Lvv"), "dLvv")
    d = s.lagrangian_derivatives(q, dq, 3)
    assert_close(der.dLqq, d.Lqqq @ wq + d.Lqqv @ wv, "dLqq vs tensors", tol=1e-12)
    assert_close(der.dLqv, np.einsum("bai,b->ai", d.Lqqv, wq) + d.Lqvv @ wv, "dLqv vs tensors", tol=1e-12)
    assert_close(der.dLvv, np.einsum("aij,a->ij", d.Lqvv, wq), "dLvv vs tensors", tol=1e-12)


def test_lagrangian_derivatives_do_not_depend_on_call_history():
    """A call's result must be a function of its arguments only. Fields above the requested
    order must not carry values left over from an earlier evaluation at another state (core
    reuses a per-thread workspace and only overwrites the requested orders)."""
    s, q, dq, _ = case(2)
    q2, dq2 = q + 0.5, dq - 1.0
    fresh = {order: s.lagrangian_derivatives(q2, dq2, order) for order in (0, 1, 2)}
    s.lagrangian_derivatives(q, dq, 2)  # an unrelated evaluation
    for order in (0, 1, 2):
        again = s.lagrangian_derivatives(q2, dq2, order)
        for name in ("L", "Lq", "Lv", "Lqq", "Lqv", "Lvv"):
            np.testing.assert_array_equal(
                getattr(again, name), getattr(fresh[order], name),
                err_msg=f"lagrangian_derivatives(order={order}).{name} depends on the previous call")


# ---------------------------------------------------------------------------------- constraints
@pytest.mark.parametrize("seed", CONSTRAINED)
def test_constraint_derivatives(seed):
    s, q, _, _ = off_manifold(seed)
    assert s.model.nh >= 1
    h, Dh, D2h = s.constraint(q, order=2)
    assert_close(h, s.reference.holonomic(q), "h vs reference", tol=1e-12)
    assert_close(Dh, fd(lambda x: s.constraint(x), q), "Dh")
    assert_close(D2h, fd(lambda x: s.constraint(x, order=1)[1], q), "D2h")
    h1, Dh1 = s.constraint(q, order=1)
    assert_close(h1, h, "h at order 1", tol=1e-14)
    assert_close(Dh1, Dh, "Dh at order 1 vs order 2", tol=1e-14)


@pytest.mark.parametrize("seed", CONSTRAINED)
def test_constraint_third_order_contractions(seed):
    s, q, _, _ = off_manifold(seed)
    model = s.model
    n, nh = model.nq, model.nh
    rng = np.random.default_rng(seed + 3)
    lam, w = rng.normal(size=nh), rng.normal(size=n)
    data = create_data(model)
    prepare(model, data, q, np.zeros(n))
    h, H1, H2 = np.empty(nh), np.empty((nh, n)), np.empty((nh, n, n))
    H2lam, H3lam, H3ww = np.empty((n, n)), np.empty((n, n, n)), np.empty((nh, n))
    holonomic(model, data, q, 3, lam, w, h, H1, H2, H2lam, H3lam, H3ww)
    _, Dh, D2h = s.constraint(q, order=2)
    assert_close(H1, Dh, "H1 at order 3", tol=1e-14)
    assert_close(H2, D2h, "H2 at order 3", tol=1e-14)
    assert_close(H2lam, np.einsum("r,rab->ab", lam, D2h), "sum_r lam_r D2h_r", tol=1e-13)
    # the contraction alone (no per-row H2), as the first-order DEL linearization asks for it
    H2lam_only = np.full((n, n), np.nan)
    holonomic(model, data, q, 2, lam, w, h, H1, np.empty((0, n, n)), H2lam_only,
              np.empty((0, 0, 0)), np.empty((0, n)))
    assert_close(H2lam_only, H2lam, "sum_r lam_r D2h_r without rows", tol=1e-14)
    def D2(x):
        return s.constraint(x, order=2)[2]
    assert_close(H3lam, fd(lambda x: np.einsum("r,rab->ab", lam, D2(x)), q), "sum_r lam_r D3h_r")
    assert_close(H3ww, fd(lambda x: np.einsum("a,rab,b->r", w, D2(x), w), q), "D3h_r(w, w, .)")


def test_variable_length_distance_constraint():
    """A distance given as a variable (prescribed length) enters h as -d^2."""
    import core
    s = core.System(gravity=[0, 0, -9.81])
    s.add_frame("a", rz="th", offset={"translation": [0.3, 0, 0.1]})
    s.add_frame("b", parent="a", tx=0.8, mass=1.0)
    s.add_frame("c", tx=1.5)
    s.add_constraint("distance", frame1="b", frame2="c", distance="ell")
    assert s.config_names == ["th", "ell"]
    q = np.array([0.4, 0.9])
    h, Dh, D2h = s.constraint(q, order=2)
    pb = np.array([0.3 + 0.8 * np.cos(0.4), 0.8 * np.sin(0.4), 0.1])
    assert h[0] == pytest.approx(np.sum((pb - [1.5, 0, 0]) ** 2) - 0.81, abs=1e-12)
    assert_close(Dh, fd(lambda x: s.constraint(x), q), "Dh")
    assert_close(D2h, fd(lambda x: s.constraint(x, order=1)[1], q), "D2h")
    assert Dh[0, 1] == pytest.approx(-1.8) and D2h[0, 1, 1] == pytest.approx(-2.0)


# ---------------------------------------------------------------------------------- forces
@pytest.mark.parametrize("seed", GENERAL)
def test_generalized_force_derivatives(seed):
    s, q, dq, u = off_manifold(seed)
    assert s.nu >= 1
    F, Fq, Fv, Fu, Fqq, Fqv, Fqu = force_terms(s, q, dq, u, 2)
    assert_close(F, s.reference.generalized_force(q, dq, u), "F vs virtual-work reference", tol=1e-12)
    def F0(qq, vv, uu):
        return force_terms(s, qq, vv, uu, 0)[0]
    assert_close(F, F0(q, dq, u), "F at order 0 vs order 2", tol=1e-14)
    assert_close(Fq, fd(lambda x: F0(x, dq, u), q), "Fq")
    assert_close(Fv, fd(lambda x: F0(q, x, u), dq), "Fv")
    assert_close(Fu, fd(lambda x: F0(q, dq, x), u), "Fu")
    def Fq1(qq, uu):
        return force_terms(s, qq, dq, uu, 1)[1]
    assert_close(Fqq, fd(lambda x: Fq1(x, u), q), "Fqq")
    assert not Fqv.any(), "Fqv: only dampers between frames give it (tests/test_damper.py)"
    assert_close(Fqu, fd(lambda x: Fq1(q, x), u), "Fqu")


# ---------------------------------------------------------------------------------- dynamics
def _check_linearization(s, q, dq, u, residual_limit=1e-6):
    n = q.size
    A, B = s.linearize(q, dq, u, residual_limit=residual_limit)
    assert A.shape == (2 * n, 2 * n) and B.shape == (2 * n, s.nu)
    assert_close(A[:n], np.hstack([np.zeros((n, n)), np.eye(n)]), "dq rows of A", tol=0)
    assert_close(B[:n], np.zeros((n, s.nu)), "dq rows of B", tol=0)
    assert_close(A[n:, :n], fd(lambda x: s.qdd(x, dq, u), q), "d qdd / dq")
    assert_close(A[n:, n:], fd(lambda x: s.qdd(q, x, u), dq), "d qdd / d dq")
    assert_close(B[n:], fd(lambda x: s.qdd(q, dq, x), u), "d qdd / du")
    qdd = s.qdd(q, dq, u)
    assert_close(qdd, s.qdd(q, dq, u), "qdd repeatable", tol=0)


@pytest.mark.parametrize("seed", GENERAL + CONSTRAINED)
def test_linearization_at_consistent_state(seed):
    _check_linearization(*case(seed))


@pytest.mark.parametrize("seed", GENERAL + CONSTRAINED)
def test_linearization_off_the_constraint_manifold(seed):
    """(The check of the state is skipped: the identities hold off the manifold too.)"""
    _check_linearization(*off_manifold(seed), residual_limit=None)


@pytest.mark.parametrize("seed", CONSTRAINED)
def test_multiplier_derivatives(seed):
    s, q, dq, u = off_manifold(seed)
    n = q.size
    A, B, dlam_dx, dlam_du = s.linearize(q, dq, u, multipliers=True, residual_limit=None)
    A2, B2 = s.linearize(q, dq, u, residual_limit=None)
    assert_close(A, A2, "A with multipliers", tol=0)
    def lam(qq, vv, uu):
        return s.constraint_forces(qq, vv, uu)
    assert_close(dlam_dx[:, :n], fd(lambda x: lam(x, dq, u), q), "d lam / dq")
    assert_close(dlam_dx[:, n:], fd(lambda x: lam(q, x, u), dq), "d lam / d dq")
    assert_close(dlam_du, fd(lambda x: lam(q, dq, x), u), "d lam / du")


@pytest.mark.parametrize("state", ["consistent", "off-manifold"])
@pytest.mark.parametrize("seed", CONSTRAINED + GENERAL[:6])
def test_constraint_forces_satisfy_equations_of_motion(seed, state):
    """M qdd + L_vq dq - L_q = F + A^T lam and A qdd + b = 0, checked numerically."""
    s, q, dq, u = case(seed) if state == "consistent" else off_manifold(seed)
    ref = s.reference
    qdd, lam = s.qdd(q, dq, u), s.constraint_forces(q, dq, u)
    d = s.lagrangian_derivatives(q, dq, 2)
    F = force_terms(s, q, dq, u, 0)[0]
    _, Dh, D2h = s.constraint(q, order=2)
    Arows = np.vstack([Dh, ref.velocity_rows(q)])
    assert lam.shape == (Arows.shape[0],)
    lhs = d.Lvv @ qdd + d.Lqv.T @ dq - d.Lq
    scale = max(1.0, np.linalg.norm(d.Lvv @ qdd), np.linalg.norm(d.Lq), np.linalg.norm(Arows.T @ lam))
    assert_close(lhs, F + Arows.T @ lam, "M qdd + Lvq dq - Lq = F + A^T lam", tol=1e-9, scale=scale)
    # A qdd + b = 0, with b from D2h ...
    nh = Dh.shape[0]
    b_h = np.einsum("a,rab,b->r", dq, D2h, dq)
    assert_close(Dh @ qdd + b_h, np.zeros(nh), "A qdd + b (holonomic, from D2h)", tol=1e-9,
                 scale=max(1.0, np.linalg.norm(b_h)))
    # ... and independently of any library derivative: along q(t) = q + t dq + t^2/2 qdd,
    # d2/dt2 h(q(t)) = Dh qdd + dq^T D2h dq and d/dt [a(q(t)) . (dq + t qdd)] = a qdd + b
    def path(t):
        return q + t * dq + 0.5 * t * t * qdd
    assert_close(fd2_along(lambda t: s.constraint(path(t))), np.zeros(nh), "d2/dt2 h(q(t))",
                 tol=1e-6, scale=max(1.0, np.linalg.norm(b_h)))
    if ref.velocity_rows(q).shape[0]:
        vel = fd_along(lambda t: ref.velocity_rows(path(t)) @ (dq + t * qdd))
        assert_close(vel, np.zeros(vel.size), "d/dt [a(q) dq] for velocity constraints", tol=1e-6,
                     scale=max(1.0, np.linalg.norm(qdd)))
    # with no constraints the multipliers are empty and qdd = M^-1 (F + Lq - Lvq dq)
    if Arows.shape[0] == 0:
        assert_close(qdd, np.linalg.solve(d.Lvv, F + d.Lq - d.Lqv.T @ dq), "unconstrained qdd", tol=1e-9)


# ---------------------------------------------------------------------------------- kinematics
@pytest.mark.parametrize("seed", GENERAL)
def test_forward_kinematics_matches_reference(seed):
    s, q, dq, _ = off_manifold(seed)
    model = s.model
    data = create_data(model)
    forward_kinematics(model, q, dq, data)
    R, p, _ = s.reference.poses(q)
    for f, name in enumerate(s.frame_names):
        assert_close(data.R[f], R[name], f"R[{name}]", tol=1e-12)
        assert_close(data.p[f], p[name], f"p[{name}]", tol=1e-12)


@pytest.mark.parametrize("seed", GENERAL)
def test_point_jets_match_fd_of_positions(seed):
    s, q, dq, _ = off_manifold(seed)
    model = s.model
    n = model.nq
    data = create_data(model)
    rng = np.random.default_rng(seed + 5)

    def point(x, f, local):
        forward_kinematics(model, x, np.zeros(n), data)
        return data.R[f] @ local + data.p[f]

    def jet(x, f, local, order):
        forward_kinematics(model, x, np.zeros(n), data)
        pos, idx = -np.ones(n, np.int64), np.empty(n, np.int64)
        k = joint_union(model, np.array([f], np.int64), pos, idx)
        assert sorted(idx[:k]) == sorted(s.reference.joints_above(s.frame_names[f]))
        x0, X1, X2, X3 = np.zeros(3), np.zeros((k, 3)), np.zeros((k, k, 3)), np.zeros((k, k, k, 3))
        point_jet(model, data, f, local, order, pos, x0, X1, X2, X3)
        J = idx[:k]
        out1, out2, out3 = np.zeros((n, 3)), np.zeros((n, n, 3)), np.zeros((n, n, n, 3))
        out1[J] = X1
        out2[np.ix_(J, J)] = X2
        out3[np.ix_(J, J, J)] = X3
        return x0, out1, out2, out3

    def check_frame(f, local):
        x0, X1, X2, X3 = jet(q, f, local, 3)
        assert_close(x0, point(q, f, local), "point", tol=1e-14)
        name = s.frame_names[f]
        assert_close(X1, fd(lambda x: point(x, f, local), q).T, f"dx/dq of frame {name}")
        assert_close(X1.T, s.reference.point_jacobian(q, name, local), f"dx/dq of {name} vs reference", tol=1e-12)
        # X2[a, b] = d2x / dq_a dq_b: FD of X1[a] in q_b
        assert_close(X2, np.moveaxis(fd(lambda x: jet(x, f, local, 1)[1], q), 2, 1), f"d2x/dq2 of {name}")
        assert_close(X3, np.moveaxis(fd(lambda x: jet(x, f, local, 2)[2], q), 3, 2), f"d3x/dq3 of {name}")

    for f in range(model.nf):
        check_frame(f, rng.normal(size=3))


@pytest.mark.parametrize("seed", GENERAL)
def test_frame_velocities_match_fd_of_poses(seed):
    """V[f] = (v, w): d p_f/dt = w x p_f + v and dR_f/dt = [w]x R_f along q + t dq."""
    s, q, dq, _ = off_manifold(seed)
    model = s.model
    n = model.nq
    data = create_data(model)
    forward_kinematics(model, q, dq, data)
    V = data.V.copy()
    S = data.S.copy()

    def pose(t):
        forward_kinematics(model, q + t * dq, np.zeros(n), data)
        return np.concatenate([data.p.ravel(), data.R.ravel()])

    d = fd_along(pose)
    nf = model.nf
    pdot, Rdot = d[:3 * nf].reshape(nf, 3), d[3 * nf:].reshape(nf, 3, 3)
    forward_kinematics(model, q, dq, data)
    for f in range(nf):
        v, w = V[f, :3], V[f, 3:]
        assert_close(np.cross(w, data.p[f]) + v, pdot[f], f"velocity of frame {s.frame_names[f]}")
        W = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        assert_close(W @ data.R[f], Rdot[f], f"dR/dt of frame {s.frame_names[f]}")
    # the frame velocity is the sum of its joints' screws
    for f in range(nf):
        J = s.reference.joints_above(s.frame_names[f])
        assert_close(V[f], S[J].T @ dq[J] if J else np.zeros(6), "V = sum S_j dq_j", tol=1e-12)
