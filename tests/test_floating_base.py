"""The quaternion floating base (``load_urdf(floating_base="quaternion")``,
``System.set_free_flyer``; :mod:`core.continuous.floating`).

* Against Pinocchio's free-flyer models (``JointModelFreeFlyer`` root) on every robot of
  ``example-robot-data`` that can float (the legged robots and humanoids among them): ``qdd``,
  ``A``, ``B`` in the tangent space, ``integrate`` and ``difference``.
* Against central finite differences, independent of Pinocchio: ``A``, ``B`` and the second
  order ``H`` of ``linearize2`` (the acceleration ``a(q ⊕ δ, v, u)`` in the chart centred at
  ``q``, and the error rate ``dδ/dt`` about a moving reference), on a quadruped, a random URDF
  and a robot with coupled (mimic) joints; the chart's Taylor coefficients against the product of
  exponentials they expand.
* A body tumbling through pitch 90°: linearized without a singularity where the Euler chart
  raises its clear error. Energy conservation along the motion. Refusals.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
from urdfref import (
    PinocchioFreeFlyer,
    compare_file,
    random_base_state,
    random_urdf,
    relative_error,
    robot_files,
    robot_path,
)

import core
from core.continuous import floating

from randsys import assert_close, fd

FILES = robot_files()
CORPUS_SINGLE = """<robot name="brick"><link name="body"><inertial><origin xyz="0.01 0.02 -0.03"/>
  <mass value="2"/><inertia ixx="0.05" ixy="0.004" ixz="-0.002" iyy="0.08" iyz="0.003" izz="0.11"/></inertial></link>
  </robot>"""


@pytest.mark.parametrize("relative", FILES)
def test_free_flyer_matches_pinocchio(relative):
    """Every file that can float (its root link is not 'world') agrees with Pinocchio's
    free-flyer model: qdd, A (with -ad(v) on the base block), B."""
    r = compare_file(relative, free_flyer=True)
    if "error" in r:
        assert r["pinocchio"] is not True or "the root link is 'world'" in r["error"], r
        return
    assert r["worst"] <= r["tolerance"], r


def test_legged_robots_and_humanoids_are_covered():
    floated = {f for f in FILES if "error" not in compare_file(f, states=0, free_flyer=True)}
    for family in ("a1", "anymal", "b1", "bolt", "go1", "go2", "hyq", "laikago", "solo", "quadruped",
                   "centauro", "alexander", "talos", "romeo", "icub", "g1", "simple_humanoid", "human"):
        assert any(f"{family}" in f for f in floated), family


# ---------------------------------------------------------------------------------- exactness
def _cases():
    solo = core.load_urdf(robot_path("solo_description/robots/solo12.urdf"), floating_base=True)
    rand = core.load_urdf(random_urdf(3, n_links=8), floating_base=True)
    panda = core.load_urdf(robot_path("panda_description/urdf/panda.urdf"), floating_base=True)   # coupled
    return {"solo12": solo, "random": rand, "panda": panda}


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_first_order_against_finite_differences(name):
    s = CASES[name]
    q, v, u = random_base_state(s, np.random.default_rng(7))
    n = s.nv
    A, B = s.linearize(q, v, u)
    z0 = np.concatenate([np.zeros(n), v, u])
    # the acceleration along q ⊕ δ, v, u
    J = fd(lambda z: s.qdd(s.integrate(q, z[:n]), z[n:2 * n], z[2 * n:]), z0)
    assert_close(np.hstack([A[n:], B[n:]]), J, "da/d[δ, v, u]")
    # the error rate dδ/dt about the reference moving with v (A's top rows; B's are zero)
    assert_close(A[:n], fd(lambda z: _error_rate(s, q, v, z[:n], z[n:2 * n]), z0[:2 * n], 1e-4)[:, :2 * n],
                 "dδ/dt")
    assert np.abs(A[:6, :6]).max() > 0.1          # (-ad(v) is there: the base turns)


def _error_rate(s, q, v_ref, delta, v, h=1e-5):
    """d/dt (x(t) ⊖ x̄(t)) at t = 0 for x̄(t) = q ⊕ t v_ref and x(t) = (q ⊕ δ) ⊕ t v."""
    start = s.integrate(q, delta)

    def error(t):
        return s.difference(s.integrate(q, t * v_ref), s.integrate(start, t * v))

    return (-error(2 * h) + 8 * error(h) - 8 * error(-h) + error(-2 * h)) / (12 * h)


@pytest.mark.parametrize("name", ["solo12", "panda"])
def test_second_order_against_finite_differences(name):
    """H's acceleration rows: the v and u columns by differences of the exact A, B at q; the
    (δ, δ) block by nested differences of qdd along q ⊕ δ (the chart centred at q). Its error
    rows: nested differences of the error rate."""
    s = CASES[name]
    q, v, u = random_base_state(s, np.random.default_rng(9))
    n, m = s.nv, s.nu
    A, B, H = s.linearize2(q, v, u)
    A1, B1 = s.linearize(q, v, u)
    assert_close(A, A1, "A of linearize2", tol=1e-13)
    assert_close(B, B1, "B of linearize2", tol=1e-13)
    assert H.shape == (2 * n, 2 * n + m, 2 * n + m)
    assert_close(H, H.transpose(0, 2, 1), "H symmetric", tol=1e-14)
    vu = np.concatenate([v, u])

    def grad_vu(y):
        Ay, By = s.linearize(q, y[:n], y[n:])
        return np.hstack([Ay[n:], By[n:]])

    Hvu = fd(grad_vu, vu, 1e-4)                                   # [i, a, (v, u)]
    assert_close(H[n:, :, n:], Hvu, "d²a/dz d[v, u]", tol=1e-6)
    Hdd = fd(lambda d: fd(lambda e: s.qdd(s.integrate(q, e), v, u), d, 1e-3), np.zeros(n), 1e-3)
    assert_close(H[n:, :n, :n], Hdd, "d²a/dδ²", tol=1e-5)
    Htop = fd(lambda z: fd(lambda y: _error_rate(s, q, v, y[:n], y[n:], 1e-3), z, 1e-2),
              np.concatenate([np.zeros(n), v]), 1e-2)
    assert_close(H[:n, :2 * n, :2 * n], Htop, "d²(dδ/dt)", tol=1e-7)
    assert np.abs(H[:n, 2 * n:]).max() == 0.0


def test_chart_coefficients_expand_the_product_of_exponentials():
    """The constants of :class:`core.continuous.floating._Chart` (jets over the base's (δ, v)) against the
    chart g(ξ) = Π exp(ξ_i ê_i) they expand, by differences: ξ(δ) with exp(δ^) = g(ξ(δ)), the body
    Jacobian J(ξ(δ)) and dJ/dt ξ̇ with ξ̇ = J⁻¹ v, at δ ~ 1e-2 (their errors must be third order)."""
    c = floating.chart()
    E = np.eye(6)

    def hat(V):
        M = np.zeros((4, 4))
        M[:3, :3], M[:3, 3] = floating.skew(V[3:]), V[:3]
        return M

    def vee(M):
        return np.array([M[0, 3], M[1, 3], M[2, 3], M[2, 1], M[0, 2], M[1, 0]])

    def g(xi):
        out = np.eye(4)
        for i in range(6):
            out = out @ scipy.linalg.expm(xi[i] * hat(E[i]))
        return out

    def body_jacobian(xi, h=1e-6):
        Ginv = np.linalg.inv(g(xi))
        return np.column_stack([vee(Ginv @ (g(xi + h * E[i]) - g(xi - h * E[i])) / (2 * h)) for i in range(6)])

    def taylor(jet, z):
        return jet[0] + jet[1] @ z + 0.5 * np.einsum("...kl,k,l->...", jet[2], z, z)

    rng = np.random.default_rng(4)
    for scale in (1e-2, 5e-3):
        delta, vb = scale * rng.normal(size=6), rng.normal(size=6)
        xi = delta.copy()
        for _ in range(30):                 # Newton on g(ξ) = exp(δ^)
            r = vee(scipy.linalg.logm(np.linalg.inv(g(xi)) @ scipy.linalg.expm(hat(delta))).real)
            xi = xi + np.linalg.solve(body_jacobian(xi), r)
        z = np.concatenate([delta, np.zeros(6)])
        assert np.abs(xi - taylor(c.xi, z)).max() < 20 * scale ** 3
        J = body_jacobian(xi)
        assert np.abs(J - taylor(c.J, z)).max() < 20 * scale ** 3
        xd, G = floating._velocity_jets(vb, True)
        xd_true = np.linalg.solve(J, vb)
        h = 1e-5
        G_true = (body_jacobian(xi + h * xd_true) - body_jacobian(xi - h * xd_true)) / (2 * h) @ xd_true
        assert np.abs(xd_true - taylor(xd, z)).max() < 20 * scale ** 3
        assert np.abs(G_true - taylor(G, z)).max() < 50 * scale ** 3 + 1e-7


# ---------------------------------------------------------------------------------- tumbling
def _pitch(angle):
    """The unit quaternion of a rotation by ``angle`` about y."""
    return np.array([0.0, math.sin(angle / 2), 0.0, math.cos(angle / 2)])


def test_a_body_tumbling_through_pitch_90_degrees():
    """A free brick turning about its y axis passes pitch 90°: the quaternion base linearizes
    there (finite, Pinocchio's values); the Euler chart's mass matrix is singular there and says
    so, naming the chart."""
    s = core.load_urdf(CORPUS_SINGLE, floating_base=True)
    euler = core.load_urdf(CORPUS_SINGLE, floating_base="euler")
    pin = PinocchioFreeFlyer(s, CORPUS_SINGLE)
    v = np.array([0.3, -0.1, 0.2, 0.05, 2.0, -0.1])
    for angle in np.linspace(math.pi / 2 - 0.2, math.pi / 2 + 0.2, 9):
        q = np.concatenate([[0.1, 0.2, 1.5], _pitch(angle)])
        A, B = s.linearize(q, v, np.zeros(0))
        Ap, _ = pin.linearize(q, v, np.zeros(0))
        assert np.all(np.isfinite(A)) and relative_error(A, Ap) < 1e-12
    # the Euler chart at exactly 90°: root_yaw and root_roll turn about the same axis
    with pytest.raises(core.errors.SingularMatrixError, match=r"mass matrix is singular at variable \d \('root_"
                       r"(yaw|pitch|roll)'\).*singular coordinate chart"):
        euler.linearize([0.1, 0.2, 1.5, 0.0, math.pi / 2, 0.0], np.zeros(6))
    # along the motion (explicit midpoint in the tangent space, 2 ms steps) the quaternion stays unit
    q = np.concatenate([[0.0, 0.0, 0.0], _pitch(math.pi / 2 - 0.1)])
    for _ in range(100):
        a = s.qdd(q, v)
        vm = v + 0.001 * a
        q, v = s.integrate(q, 0.002 * vm), v + 0.002 * s.qdd(s.integrate(q, 0.001 * v), vm)
        assert np.all(np.isfinite(s.linearize(q, v)[0]))
    assert abs(np.linalg.norm(q[3:7]) - 1.0) < 1e-14


def test_energy_is_conserved_and_momentum_is_M_v():
    """Without inputs or damping, dE/dt = dE/dδ . v + dE/dv . a = 0 (differences along the
    motion); the momentum is M v with Pinocchio's M."""
    s = CASES["solo12"]
    q, v, _ = random_base_state(s, np.random.default_rng(3))
    u = np.zeros(s.nu)
    a = s.qdd(q, v, u)
    dE = fd(lambda t: np.array([s.energy(s.integrate(q, t[0] * v), v + t[0] * a)]), np.zeros(1))[0, 0]
    assert abs(dE) < 1e-7 * max(1.0, abs(s.energy(q, v)))
    # the potential knows the base's height: lifting it 1 m adds m g
    lifted = q.copy()
    lifted[2] += 1.0
    mass = float(np.sum(s.model.frame_mass))
    assert s.energy(lifted, v) - s.energy(q, v) == pytest.approx(9.81 * mass, rel=1e-12)
    pin = PinocchioFreeFlyer(s, robot_path("solo_description/robots/solo12.urdf"))
    assert_close(s.momentum(q, v), pin.mass_matrix(q) @ v, "momentum", tol=1e-12)
    assert_close(s.input_matrix(q), np.eye(s.nv)[:, 6:], "input matrix", tol=0.0)


# ---------------------------------------------------------------------------------- configurations
def test_integrate_and_difference_match_pinocchio():
    import pinocchio
    s = CASES["solo12"]
    pin = PinocchioFreeFlyer(s, robot_path("solo_description/robots/solo12.urdf"))
    rng = np.random.default_rng(12)
    for _ in range(5):
        q0, v, _ = random_base_state(s, rng)
        q1, _, _ = random_base_state(s, rng)
        ours = s.integrate(q0, v)
        theirs = pinocchio.integrate(pin.model, pin.configuration(q0), pin.state(q0, v, np.zeros(s.nu))[1])
        assert_close(pin.configuration(ours), theirs, "integrate", tol=1e-14)
        d = s.difference(q0, q1)
        dp = pinocchio.difference(pin.model, pin.configuration(q0), pin.configuration(q1))
        assert_close(d, dp[pin.iv], "difference", tol=1e-12)
        back = s.integrate(q0, d)                  # q1, its quaternion up to the sign (the same rotation)
        back[3:7] *= np.sign(back[3:7] @ q1[3:7])
        assert_close(back, q1, "q0 ⊕ (q1 ⊖ q0) = q1", tol=1e-12)
    # a half turn: the difference takes the shorter way, angle π
    q0, q1 = s.neutral(), s.neutral()
    q1[3:7] = [0.0, 0.0, 1.0, 0.0]
    assert np.linalg.norm(s.difference(q0, q1)[3:6]) == pytest.approx(math.pi, rel=1e-14)
    assert s.config_names[:7] == [f"root_{x}" for x in ("x", "y", "z", "qx", "qy", "qz", "qw")]
    assert s.velocity_names[:6] == [f"root_{x}" for x in ("vx", "vy", "vz", "wx", "wy", "wz")]
    assert (s.nq, s.nv) == (19, 18) and len(s.state_names) == 36 and s.state_names[3] == "root_rx"
    assert s.velocity_limits.shape == (18,) and np.isinf(s.velocity_limits[:6]).all()


def test_refusals():
    s = CASES["solo12"]
    q, v, u = random_base_state(s, np.random.default_rng(0))
    bad = q.copy()
    bad[3:7] *= 1.01
    with pytest.raises(ValueError, match=r"the base quaternion \(root_qx, root_qy, root_qz, root_qw\).*not a "
                       r"unit quaternion \(norm 1.01"):
        s.qdd(bad, v, u)
    with pytest.raises(ValueError, match=r"v must be a vector of 18 entries"):
        s.qdd(q, np.zeros(19), u)
    with pytest.raises(ValueError, match=r"q\[8\] \(FL_HFE\) is not finite"):
        s.qdd(np.where(np.arange(s.nq) == 8, np.nan, q), v, u)
    for call in (lambda: core.MidpointVI(s, 0.01), lambda: core.holding_inputs(s, q),
                 lambda: s.lagrangian_derivatives(q, v)):
        with pytest.raises(core.errors.ModelError, match=r"not available with a quaternion floating base.*"
                           r"floating_base='euler'"):
            call()
    # without contacts the minimal linearization is the tangent-space one (nothing is dependent)
    A_m, B_m, info = s.linearize_minimal(q, v, u, residual_limit=None)
    A_t, B_t = s.linearize(q, v, u)
    assert info.state_names == s.velocity_names + ["d" + n for n in s.velocity_names]
    assert np.array_equal(A_m, A_t) and np.array_equal(B_m, B_t)
    built = core.System()
    built.add_frame("body", mass=1.0, inertia=[0.1, 0.2, 0.25])
    built.add_frame("post", offset={"translation": [1, 0, 0]})
    built.set_free_flyer("body")
    with pytest.raises(core.errors.ModelError, match=r"free flyer 'body': frame\(s\) \['post'\] hang from the world"):
        built.compile()
    built = core.System()
    built.add_frame("body", mass=1.0, inertia=[0.1, 0.2, 0.25])
    built.add_frame("arm", parent="body", rz="elbow", mass=0.5, com=[0.3, 0, 0])
    built.add_constraint("plane", frame="arm", normal="z", offset=0.0)
    built.set_free_flyer("body", prefix="torso")
    with pytest.raises(core.errors.ModelError, match=r"constraints other than contacts \(System.add_contact\) are not "
                                                     r"supported with a quaternion "):
        built.compile()
    built._constraints.clear()
    assert built.config_names == ["torso_x", "torso_y", "torso_z", "torso_qx", "torso_qy", "torso_qz", "torso_qw",
                                  "elbow"]
    assert built.qdd(built.neutral(), np.zeros(7)).shape == (7,)
