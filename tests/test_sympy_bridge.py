"""core.sympy_bridge.from_sympy against SymPy's own Linearizer.

The systems are rebuilt here with the sympy.physics.mechanics API as in SymPy 1.14's
``sympy/physics/mechanics/tests/test_linearize.py`` (pendulum minimal/non-minimal with Kane's and
Lagrange's methods, rolling disc with both methods; the Kane rolling disc is
``core.examples.sympy_rolling_disc``, shared with bench/bench_linearizer.py), plus a double
pendulum and a cart-pole with an input (so that B is not empty) and a spherical pendulum (three
coordinates, for orderings).
At random operating points that satisfy the constraints, our M, A, B and state-space A, B must
equal SymPy's ``linearize`` with the same numeric op_point to 1e-10 relative.
"""
import functools
import math
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

sp = pytest.importorskip("sympy")
from sympy import Matrix, atan, cos, sin, symbols  # noqa: E402
from sympy.physics.mechanics import (  # noqa: E402
    KanesMethod,
    LagrangesMethod,
    Lagrangian,
    Particle,
    Point,
    ReferenceFrame,
    RigidBody,
    dynamicsymbols,
    inertia,
    msubs,
)

from core.examples import sympy_rolling_disc  # noqa: E402
from core.linearizer import LinearizerError  # noqa: E402
from core.sympy_bridge import SympyLinearizer, from_sympy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-10
System = namedtuple("System", "method kwargs random_point")
t = dynamicsymbols._t


# ---------------------------------------------------------------------- systems
@functools.lru_cache(maxsize=None)
def pendulum_kane_minimal():
    q1, u1 = dynamicsymbols("q1 u1")
    L, m = symbols("L m")
    N = ReferenceFrame("N")
    pN = Point("N*")
    pN.set_vel(N, 0)
    A = N.orientnew("A", "axis", [q1, N.z])
    A.set_ang_vel(N, u1 * N.z)
    P = pN.locatenew("P", L * A.x)
    P.v2pt_theory(pN, N, A)
    KM = KanesMethod(N, q_ind=[q1], u_ind=[u1], kd_eqs=[q1.diff(t) - u1])
    KM.kanes_equations([Particle("pP", P, m)], [(P, m * 9.8 * N.x)])

    def random_point(rng):
        return {L: rng.uniform(0.5, 2), m: rng.uniform(0.5, 2), q1: rng.uniform(-3, 3),
                u1: rng.uniform(-2, 2)}

    return System(KM, {}, random_point)


@functools.lru_cache(maxsize=None)
def pendulum_kane_nonminimal():
    q1, q2 = dynamicsymbols("q1:3")
    u1, u2 = dynamicsymbols("u1:3")
    L, m = symbols("L m")
    N = ReferenceFrame("N")
    pN = Point("N*")
    pN.set_vel(N, 0)
    A = N.orientnew("A", "axis", [atan(q2 / q1), N.z])
    P = pN.locatenew("P1", q1 * N.x + q2 * N.y)
    kde = Matrix([q1.diff(t) - u1, q2.diff(t) - u2])
    P.set_vel(N, P.pos_from(pN).dt(N).subs(sp.solve(kde, [q1.diff(t), q2.diff(t)])))
    f_c = Matrix([P.pos_from(pN).magnitude() - L])
    f_v = Matrix([P.vel(N).express(A).dot(A.x)])
    f_v.simplify()
    f_a = f_v.diff(t)
    f_a.simplify()
    KM = KanesMethod(N, q_ind=[q2], u_ind=[u2], q_dependent=[q1], u_dependent=[u1],
                     configuration_constraints=f_c, velocity_constraints=f_v,
                     acceleration_constraints=f_a, kd_eqs=kde)
    KM.kanes_equations([Particle("pP", P, m)], [(P, m * 9.8 * N.x)])

    def random_point(rng):
        length, angle = rng.uniform(0.5, 2), rng.uniform(-1, 1)
        return {L: length, m: rng.uniform(0.5, 2), q1: length * math.cos(angle),
                q2: length * math.sin(angle), u2: rng.uniform(-2, 2)}

    return System(KM, {}, random_point)


@functools.lru_cache(maxsize=None)
def pendulum_lagrange_minimal():
    q1 = dynamicsymbols("q1")
    L, m = symbols("L m")
    N = ReferenceFrame("N")
    pN = Point("N*")
    pN.set_vel(N, 0)
    A = N.orientnew("A", "axis", [q1, N.z])
    A.set_ang_vel(N, q1.diff(t) * N.z)
    P = pN.locatenew("P", L * A.x)
    P.v2pt_theory(pN, N, A)
    pP = Particle("pP", P, m)
    LM = LagrangesMethod(Lagrangian(N, pP), [q1], forcelist=[(P, m * 9.8 * N.x)], frame=N)
    LM.form_lagranges_equations()

    def random_point(rng):
        return {L: rng.uniform(0.5, 2), m: rng.uniform(0.5, 2), q1: rng.uniform(-3, 3),
                q1.diff(t): rng.uniform(-2, 2)}

    return System(LM, dict(q_ind=[q1], qd_ind=[q1.diff(t)]), random_point)


@functools.lru_cache(maxsize=None)
def pendulum_lagrange_nonminimal():
    """Crist's example: q2 independent, q1 dependent."""
    q1, q2 = dynamicsymbols("q1:3")
    q1d, q2d = dynamicsymbols("q1:3", level=1)
    L, m = symbols("L m")
    N = ReferenceFrame("N")
    pN = Point("N*")
    pN.set_vel(N, 0)
    P = pN.locatenew("P1", q1 * N.x + q2 * N.y)
    P.set_vel(N, P.pos_from(pN).dt(N))
    pP = Particle("pP", P, m)
    LM = LagrangesMethod(Lagrangian(N, pP), [q1, q2], hol_coneqs=[q1**2 + q2**2 - L**2],
                         forcelist=[(P, m * 9.8 * N.x)], frame=N)
    LM.form_lagranges_equations()

    def random_point(rng):
        length, angle = rng.uniform(0.5, 2), rng.uniform(-1, 1)
        return {L: length, m: rng.uniform(0.5, 2), q1: length * math.cos(angle),
                q2: length * math.sin(angle), q2d: rng.uniform(-2, 2)}

    return System(LM, dict(q_ind=[q2], qd_ind=[q2d], q_dep=[q1], qd_dep=[q1d]), random_point)


@functools.lru_cache(maxsize=None)
def rolling_disc_kane():
    """SymPy's rolling disc (core.examples.sympy_rolling_disc); random r, m and a random point."""
    KM = sympy_rolling_disc()
    q, u = list(KM.q), list(KM.u)
    q2, q6 = q[1], q[5]
    r, m, g = symbols("r m g")

    def random_point(rng):
        point = {r: rng.uniform(0.2, 1), m: rng.uniform(0.5, 2), g: 9.81}
        point.update(zip(q[:5], rng.uniform(-1, 1, 5), strict=True))
        point[q6] = -point[r] * math.cos(point[q2])
        point.update(zip(u[:3], rng.uniform(-2, 2, 3), strict=True))
        return point

    return System(KM, {}, random_point)


@functools.lru_cache(maxsize=None)
def rolling_disc_lagrange():
    q = dynamicsymbols("q1 q2 q3")
    q1, q2, q3 = q
    r, m, g = symbols("r m g")
    N = ReferenceFrame("N")
    Y = N.orientnew("Y", "Axis", [q1, N.z])
    L = Y.orientnew("L", "Axis", [q2, Y.x])
    R = L.orientnew("R", "Axis", [q3, L.y])
    C = Point("C")
    C.set_vel(N, 0)
    Dmc = C.locatenew("Dmc", r * L.z)
    Dmc.v2pt_theory(C, N, R)
    body = RigidBody("BodyD", Dmc, R, m,
                     (inertia(L, m / 4 * r**2, m / 2 * r**2, m / 4 * r**2), Dmc))
    body.potential_energy = -m * g * r * cos(q2)
    LM = LagrangesMethod(Lagrangian(N, body), q)
    LM.form_lagranges_equations()

    def random_point(rng):
        point = {r: rng.uniform(0.2, 1), m: rng.uniform(0.5, 2), g: 9.81}
        point.update(zip(q, rng.uniform(-1, 1, 3), strict=True))
        point.update(zip([x.diff(t) for x in q], rng.uniform(-2, 2, 3), strict=True))
        return point

    return System(LM, dict(q_ind=q, qd_ind=[x.diff(t) for x in q]), random_point)


@functools.lru_cache(maxsize=None)
def double_pendulum_lagrange():
    """Planar double pendulum with a torque input T(t) at the elbow."""
    q1, q2, T = dynamicsymbols("q1 q2 T")
    l1, l2, m1, m2, g = symbols("l1 l2 m1 m2 g")
    N = ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q1, N.z])
    B = A.orientnew("B", "Axis", [q2, A.z])
    origin = Point("O")
    origin.set_vel(N, 0)
    P1 = origin.locatenew("P1", l1 * A.x)
    P2 = P1.locatenew("P2", l2 * B.x)
    P1.v2pt_theory(origin, N, A)
    P2.v2pt_theory(P1, N, B)
    particles = [Particle("p1", P1, m1), Particle("p2", P2, m2)]
    loads = [(P1, m1 * g * N.x), (P2, m2 * g * N.x), (B, T * N.z), (A, -T * N.z)]
    LM = LagrangesMethod(Lagrangian(N, *particles), [q1, q2], forcelist=loads, frame=N)
    LM.form_lagranges_equations()

    def random_point(rng):
        point = {l1: 1.0, l2: 0.7, m1: 1.5, m2: 0.8, g: 9.81, T: rng.uniform(-1, 1)}
        point.update(zip([q1, q2, q1.diff(t), q2.diff(t)], rng.uniform(-2, 2, 4), strict=True))
        return point

    return System(LM, dict(q_ind=[q1, q2], qd_ind=[q1.diff(t), q2.diff(t)]), random_point)


@functools.lru_cache(maxsize=None)
def cart_pole_kane():
    """Cart (x) with a pendulum (angle th), force F(t) on the cart; Kane's method."""
    x, th, v, w, F = dynamicsymbols("x th v w F")
    mc, mp, length, g = symbols("m_c m_p l g")
    N = ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [th, N.z])
    A.set_ang_vel(N, w * N.z)
    origin = Point("O")
    origin.set_vel(N, 0)
    cart = origin.locatenew("cart", x * N.x)
    cart.set_vel(N, v * N.x)
    bob = cart.locatenew("bob", length * A.y)
    bob.v2pt_theory(cart, N, A)
    KM = KanesMethod(N, q_ind=[x, th], u_ind=[v, w], kd_eqs=[x.diff(t) - v, th.diff(t) - w])
    KM.kanes_equations([Particle("c", cart, mc), Particle("b", bob, mp)],
                       [(cart, F * N.x - mc * g * N.y), (bob, -mp * g * N.y)])

    def random_point(rng):
        point = {mc: 2.0, mp: 0.5, length: 0.8, g: 9.81, F: rng.uniform(-1, 1)}
        point.update(zip([x, th, v, w], rng.uniform(-2, 2, 4), strict=True))
        return point

    return System(KM, {}, random_point)


@functools.lru_cache(maxsize=None)
def spherical_pendulum():
    """Particle at (x, y, z) on a sphere of radius L: three coordinates, one constraint."""
    q = dynamicsymbols("x y z")
    L, m, g = symbols("L m g")
    N = ReferenceFrame("N")
    origin = Point("O")
    origin.set_vel(N, 0)
    P = origin.locatenew("P", q[0] * N.x + q[1] * N.y + q[2] * N.z)
    P.set_vel(N, P.pos_from(origin).dt(N))
    LM = LagrangesMethod(Lagrangian(N, Particle("p", P, m)), q,
                         hol_coneqs=[q[0]**2 + q[1]**2 + q[2]**2 - L**2],
                         forcelist=[(P, -m * g * N.z)], frame=N)
    LM.form_lagranges_equations()

    def random_point(rng):
        position = rng.uniform(0.2, 1, 3) * rng.choice([-1, 1], 3)
        position *= 1.5 / np.linalg.norm(position)
        velocity = np.cross(position, rng.uniform(-1, 1, 3))
        point = {L: 1.5, m: 0.7, g: 9.81}
        point.update(zip(q, position, strict=True))
        point.update(zip([x.diff(t) for x in q], velocity, strict=True))
        return point

    return LM, q, random_point


# ---------------------------------------------------------------------- helpers
def with_dependent_speeds(sympy_linearizer, point):
    """Solve the velocity constraints (linear in u) for the dependent speeds."""
    u_d = list(sympy_linearizer.u_d)
    if not u_d:
        return point
    known = {k: v for k, v in point.items() if k not in set(u_d)}
    f_v = msubs(sympy_linearizer.f_v, known)
    jacobian = np.array(f_v.jacobian(u_d), dtype=float)
    rest = np.array(f_v.xreplace(dict.fromkeys(u_d, 0)), dtype=float).ravel()
    return {**point, **dict(zip(u_d, np.linalg.solve(jacobian, -rest), strict=True))}


def sympy_residuals(sympy_linearizer, point):
    lin = sympy_linearizer
    equations = [lin.f_c, lin.f_v, lin.f_a, lin.f_0 + lin.f_1, lin.f_2 + lin.f_3 + lin.f_4]
    return [np.array(msubs(e, point), dtype=float) for e in equations if e.rows]


def assert_close(ours, theirs, what):
    theirs = np.array(theirs, dtype=float).reshape(ours.shape) if ours.size else theirs
    if ours.size == 0:
        assert np.array(theirs).size == 0, what
        return
    scale = max(1.0, np.abs(theirs).max())
    error = np.abs(ours - theirs).max() / scale
    assert error <= RTOL, f"{what}: relative error {error:.2e}"


def compare_with_sympy(system, n_points=2, seed=0):
    ours = from_sympy(system.method, **system.kwargs)
    theirs = system.method.to_linearizer(**system.kwargs)
    rng = np.random.default_rng(seed)
    for _ in range(n_points):
        point = ours.complete_op_point(with_dependent_speeds(theirs, system.random_point(rng)))
        for residual in sympy_residuals(theirs, point):  # the solved q', u', lam are right
            np.testing.assert_allclose(residual, 0.0, atol=1e-9)
        for A_and_B in (False, True):
            expected = theirs.linearize(op_point=point, A_and_B=A_and_B)
            result = ours.linearize(op_point=point, A_and_B=A_and_B)
            assert len(result) == len(expected)
            for name, a, b in zip("MAB"[-len(result):], result, expected, strict=True):
                assert_close(a, b, f"{name} (A_and_B={A_and_B})")
    return ours


SYSTEMS = [pendulum_kane_minimal, pendulum_kane_nonminimal, pendulum_lagrange_minimal,
           pendulum_lagrange_nonminimal, rolling_disc_kane, rolling_disc_lagrange,
           double_pendulum_lagrange, cart_pole_kane]


# ---------------------------------------------------------------------- against SymPy
@pytest.mark.parametrize("builder", SYSTEMS, ids=lambda b: b.__name__)
def test_matches_sympy_linearize_at_random_operating_points(builder):
    compare_with_sympy(builder())


def test_input_matrix_is_filled_for_systems_with_inputs():
    system = cart_pole_kane()
    lin = from_sympy(system.method)
    assert [str(x) for x in lin.r] == ["F(t)"]
    point = system.random_point(np.random.default_rng(3))
    _, B = lin.linearize(op_point=point, A_and_B=True)
    assert B.shape == (4, 1) and np.abs(B[2:]).max() > 0.1


def test_sympy_speeds_feed_v_and_sympy_inputs_feed_u():
    """SymPy's lin.u (speeds) are the numeric Linearizer's v, SymPy's lin.r (inputs) its u."""
    system = cart_pole_kane()
    lin = from_sympy(system.method)
    x, th, v, w, F = dynamicsymbols("x th v w F")
    assert list(lin.u) == [v, w] and list(lin.r) == [F]  # SymPy's notation on the SymPy side
    assert (lin.linearizer.dims.o, lin.linearizer.dims.s) == (2, 1)
    assert lin.sources["f_3"].startswith("def f_3(q, qd, v, u, t, p):")
    point = system.random_point(np.random.default_rng(4))
    arrays = {"q": [point[s] for s in lin.q], "v": [point[s] for s in lin.u],
              "u": [point[s] for s in lin.r], "p": [point[s] for s in lin.params]}
    for ours, by_symbol in zip(lin.linearizer.linearize(arrays, A_and_B=True),
                               lin.linearize(op_point=point, A_and_B=True), strict=True):
        np.testing.assert_array_equal(ours, by_symbol)
    completed, by_symbol = lin.linearizer.complete_op_point(arrays), lin.complete_op_point(point)
    np.testing.assert_array_equal(completed["vd"], [by_symbol[s.diff(t)] for s in lin.u])
    np.testing.assert_array_equal(completed["u"], [point[F]])


def test_crist_nonminimal_pendulum_hanging_at_rest_with_multiplier_solved():
    q1, q2 = dynamicsymbols("q1:3")
    q1d, q2d = dynamicsymbols("q1:3", level=1)
    system = pendulum_lagrange_nonminimal()
    LM = system.method
    L, m = symbols("L m")
    # Crist's call: positional q_i, u_i, q_d, u_d as Matrices, op point without multipliers.
    lin = from_sympy(LM, Matrix([q2]), Matrix([q2d]), Matrix([q1]), Matrix([q1d]))
    q_op, u_op = {q1: 1.7, q2: 0}, {q1d: 0, q2d: 0}
    ud_op = {q1d.diff(t): 0, q2d.diff(t): 0}
    A, B = lin.linearize(op_point=[q_op, u_op, ud_op, {L: 1.7, m: 0.9}], A_and_B=True)
    np.testing.assert_allclose(A, [[0, 1], [-9.8 / 1.7, 0]], rtol=0, atol=1e-12)
    assert B.size == 0
    # the multiplier equals SymPy's solve_multipliers at that point
    point = lin.complete_op_point([q_op, u_op, {L: 1.7, m: 0.9}])
    expected = LM.solve_multipliers(op_point={**q_op, **u_op, **ud_op, L: 1.7, m: 0.9})
    for lam, value in expected.items():
        assert point[lam] == pytest.approx(float(value), rel=1e-12)


# ---------------------------------------------------------------------- published solutions
def test_rolling_disc_kane_matches_sympys_published_upright_solution():
    system = rolling_disc_kane()
    KM = system.method
    q1, q2, q3, q4, q5, q6 = KM.q
    u1, u2, u3, u4, u5, u6 = KM.u
    q1d, q2d, q3d, q4d, q5d, q6d = [x.diff(t) for x in KM.q]
    u1d, u2d, u3d, u4d, u5d, u6d = [x.diff(t) for x in KM.u]
    r, m, g = symbols("r m g")
    # SymPy's own (symbolic) operating point from test_linearize_rolling_disc_kane
    q_op = {q6: -r * cos(q2)}
    u_op = {u1: 0, u2: sin(q2) * q1d + q3d, u3: cos(q2) * q1d,
            u4: -r * (sin(q2) * q1d + q3d) * cos(q3), u5: 0,
            u6: -r * (sin(q2) * q1d + q3d) * sin(q3)}
    qd_op = {q2d: 0, q4d: -r * (sin(q2) * q1d + q3d) * cos(q1),
             q5d: -r * (sin(q2) * q1d + q3d) * sin(q1), q6d: 0}
    lean_accel = 4 * g * sin(q2) / (5 * r) + sin(2 * q2) * q1d**2 / 2 + 6 * cos(q2) * q1d * q3d / 5
    ud_op = {u1d: lean_accel,
             u2d: 0, u3d: 0, u4d: r * (sin(q2) * sin(q3) * q1d * q3d + sin(q3) * q3d**2),
             u5d: r * lean_accel,
             u6d: -r * (sin(q2) * cos(q3) * q1d * q3d + cos(q3) * q3d**2)}
    upright_nominal = {q1d: 0, q2: 0, m: 1, r: 1, g: 1}
    lin = from_sympy(KM)
    for q1_value, q3d_value in [(0.3, 0.7), (-1.2, 1 / math.sqrt(3))]:
        numbers = {**upright_nominal, q1: q1_value, q3d: q3d_value, q3: 0.4, q4: 1.0, q5: -2.0}
        A, B = lin.linearize(op_point=[q_op, u_op, qd_op, ud_op, numbers], A_and_B=True)
        s1, c1, w = math.sin(q1_value), math.cos(q1_value), q3d_value
        A_sol = np.array([[0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 0, 0],
                          [0, 0, 0, 0, 0, 0, 1, 0], [s1 * w, 0, 0, 0, 0, -s1, -c1, 0],
                          [-c1 * w, 0, 0, 0, 0, c1, -s1, 0], [0, 4 / 5, 0, 0, 0, 0, 0, 6 * w / 5],
                          [0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, -2 * w, 0, 0]])
        np.testing.assert_allclose(A, A_sol, rtol=0, atol=1e-12)
        assert B.size == 0
    # at the critical speed q3' = 1/sqrt(3) all eigenvalues are zero: A is nilpotent
    np.testing.assert_allclose(np.linalg.matrix_power(A, 8), 0.0, atol=1e-10)


def test_rolling_disc_lagrange_matches_sympys_published_upright_solution():
    LM = rolling_disc_lagrange().method
    q1, q2, q3 = LM.q
    q1d, q2d, q3d = [x.diff(t) for x in LM.q]
    r, m, g = symbols("r m g")
    lin = from_sympy(LM, q_ind=LM.q, qd_ind=[q1d, q2d, q3d])
    op_point = {q1: 0, q2: 0, q3: 0, q1d: 0, q2d: 0, q1d.diff(): 0, q2d.diff(): 0,
                q3d.diff(): 0, q3d: 0.8, r: 0.4, m: 1.3, g: 9.81}
    A, _ = lin.linearize(op_point=op_point, A_and_B=True)
    w, r_, g_ = 0.8, 0.4, 9.81
    sol = np.array([[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1],
                    [0, 0, 0, 0, -6 * w, 0], [0, -4 * g_ / (5 * r_), 0, 6 * w / 5, 0, 0],
                    [0, 0, 0, 0, 0, 0]])
    np.testing.assert_allclose(A, sol, rtol=0, atol=1e-12)


@pytest.mark.parametrize("builder", [pendulum_kane_minimal, pendulum_lagrange_minimal],
                         ids=lambda b: b.__name__)
def test_minimal_pendulum_matches_sympys_published_solution(builder):
    system = builder()
    lin = from_sympy(system.method, **system.kwargs)
    for point in map(system.random_point, [np.random.default_rng(s) for s in range(3)]):
        A, B = lin.linearize(op_point=point, A_and_B=True)
        q1, L = dynamicsymbols("q1"), symbols("L")
        np.testing.assert_allclose(A, [[0, 1], [-9.8 * math.cos(point[q1]) / point[L], 0]],
                                   rtol=0, atol=1e-12)


def test_kane_nonminimal_pendulum_matches_sympys_published_solution():
    KM = pendulum_kane_nonminimal().method
    q1, q2 = dynamicsymbols("q1:3")
    u1, u2 = dynamicsymbols("u1:3")
    L, m = symbols("L m")
    op_point = [{q1: 1.3, q2: 0}, {u1: 0, u2: 0}, {u1.diff(t): 0, u2.diff(t): 0}, {L: 1.3, m: 2}]
    A, B = from_sympy(KM).linearize(op_point=op_point, A_and_B=True)
    np.testing.assert_allclose(A, [[0, 1], [-9.8 / 1.3, 0]], rtol=0, atol=1e-12)


# ---------------------------------------------------------------------- orderings
def test_cyclic_orderings_of_independent_coordinates_are_consistent():
    LM, (x, y, z), random_point = spherical_pendulum()
    xd, yd, zd = [c.diff(t) for c in (x, y, z)]
    point = random_point(np.random.default_rng(5))
    # a transposition of q (x, z | y): SymPy's Linearizer agrees with us
    reference = compare_with_sympy(System(LM, dict(q_ind=[x, z], qd_ind=[xd, zd], q_dep=[y],
                                                   qd_dep=[yd]), random_point), n_points=1)
    A_ref, _ = reference.linearize(op_point=point, A_and_B=True)
    # a cyclic order (z, x | y): the same linearization with the state reordered. (SymPy 1.14
    # builds its permutation matrix transposed, which only matters for such orders.)
    cyclic = from_sympy(LM, q_ind=[z, x], qd_ind=[zd, xd], q_dep=[y], qd_dep=[yd])
    A_cyc, _ = cyclic.linearize(op_point=point, A_and_B=True)
    order = [1, 0, 3, 2]
    np.testing.assert_allclose(A_cyc, A_ref[np.ix_(order, order)], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------- backends and build
def test_numba_backend_equals_python_backend():
    system = pendulum_lagrange_nonminimal()
    python = from_sympy(system.method, **system.kwargs)
    compiled = from_sympy(system.method, backend="numba", **system.kwargs)
    point = system.random_point(np.random.default_rng(7))
    point = with_dependent_speeds(system.method.to_linearizer(**system.kwargs), point)
    for a, b in zip(python.linearize(op_point=point), compiled.linearize(op_point=point), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_python_backend_compiles_nothing():
    """No numba function of core is compiled (or loaded from numba's cache) by a build and a
    first linearize with the python backend, in a fresh process."""
    import subprocess

    code = (
        "import sys\n"
        "from numba.core.dispatcher import Dispatcher\n"
        "from tests.test_sympy_bridge import cart_pole_kane, compare_with_sympy\n"
        "compare_with_sympy(cart_pole_kane(), n_points=1)\n"
        "compiled = [f'{m}.{n}' for m, mod in list(sys.modules.items()) if m.startswith('core')\n"
        "            for n, f in vars(mod).items() if isinstance(f, Dispatcher) and f.signatures]\n"
        "assert not compiled, compiled\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_sympy_linearizer_can_be_passed_directly():
    system = cart_pole_kane()
    lin = from_sympy(system.method.to_linearizer())
    assert isinstance(lin, SympyLinearizer)
    assert lin.linearize(op_point=system.random_point(np.random.default_rng(0)))[0].shape == (4, 4)


# ---------------------------------------------------------------------- errors
def test_missing_symbols_in_op_point_are_named():
    system = pendulum_lagrange_nonminimal()
    lin = from_sympy(system.method, **system.kwargs)
    q1, q2 = dynamicsymbols("q1:3")
    q1d, q2d = dynamicsymbols("q1:3", level=1)
    with pytest.raises(LinearizerError, match=r"lacks values for L \(needed by [^)]*\), m \(needed by "):
        lin.linearize(op_point={q1: 1, q2: 0, q1d: 0, q2d: 0})
    with pytest.raises(LinearizerError, match=r"lacks values for q2\(t\)"):
        lin.linearize(op_point={q1: 1, q1d: 0, q2d: 0, symbols("L"): 1, symbols("m"): 1})
    with pytest.raises(LinearizerError, match="not evaluable to numbers"):
        lin.linearize(op_point={q1: 1, q2: 0, q1d: 0, q2d: sin(dynamicsymbols("q9")),
                                symbols("L"): 1, symbols("m"): 1})


def test_wrong_arguments_raise_clear_errors():
    system = pendulum_lagrange_nonminimal()
    with pytest.raises(TypeError, match="KanesMethod, LagrangesMethod or SymPy Linearizer"):
        from_sympy(object())
    with pytest.raises(TypeError, match="used as it is"):
        from_sympy(system.method.to_linearizer(**system.kwargs), q_ind=[])
    with pytest.raises(ValueError, match="backend"):
        from_sympy(system.method, backend="fortran", **system.kwargs)
    with pytest.raises(ValueError, match="dependent coordinates"):  # SymPy's own check
        from_sympy(system.method, q_ind=dynamicsymbols("q1:3"),
                   qd_ind=dynamicsymbols("q1:3", level=1))


def test_missing_sympy_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "sympy", None)
    with pytest.raises(ImportError, match=r"mechnode\[sympy\]"):
        from_sympy(object())
