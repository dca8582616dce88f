"""The SymPy test systems, built with the sympy.physics.mechanics API as in SymPy 1.14's
``sympy/physics/mechanics/tests/test_linearize.py`` (pendulum minimal/non-minimal with Kane's and
Lagrange's methods, rolling disc with both; the Kane rolling disc is
``core.examples.sympy_rolling_disc``, shared with bench/bench_linearizer.py), plus a double
pendulum and a cart-pole with an input and a spherical pendulum. Each builder (cached) returns
``System(method, kwargs for to_linearizer, random_point(rng))``: used by test_sympy_bridge.py
(random operating points) and test_sympy_ops.py (SymPy's own operating points)."""
import functools
import math
from collections import namedtuple

import numpy as np
import sympy as sp
from sympy import Matrix, atan, cos, symbols
from sympy.physics.mechanics import (
    KanesMethod,
    LagrangesMethod,
    Lagrangian,
    Particle,
    Point,
    ReferenceFrame,
    RigidBody,
    dynamicsymbols,
    inertia,
)

from core.examples import sympy_rolling_disc

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


