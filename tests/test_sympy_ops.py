"""Every ``linearize`` call of SymPy 1.14's mechanics tests, through ``from_sympy``.

The calls of ``sympy/physics/mechanics/tests/test_linearize.py`` and the ``linearize`` uses of
``test_kane.py`` (``test_one_dof``, ``test_rolling_disc``) and ``test_kane3.py``
(``test_bicycle``) are repeated here with their operating points exactly as written there,
plus numbers for what those leave symbolic (parameters, and coordinates or rates the result is
a function of). Each is compared with SymPy's own ``linearize`` of the same call, substituted with
the same numbers, to 1e-10 relative (the bicycle, whose SymPy linearization takes minutes,
against the Meijaard et al. values SymPy's test checks its result with).

SymPy's rolling-disc operating point omits the contact-point coordinates ``q4, q5``, which no
part of the general form depends on; from_sympy accepts that and nothing else. The systems are
those of tests/sympy_systems.py, built as in SymPy's tests.
"""
import math

import numpy as np
import pytest

sp = pytest.importorskip("sympy")
from sympy import Matrix, cos, sin, symbols  # noqa: E402
from sympy.physics.mechanics import (  # noqa: E402
    KanesMethod,
    Particle,
    Point,
    ReferenceFrame,
    RigidBody,
    dot,
    dynamicsymbols,
    inertia,
)
from sympy_systems import (  # noqa: E402
    pendulum_kane_minimal,
    pendulum_kane_nonminimal,
    pendulum_lagrange_minimal,
    pendulum_lagrange_nonminimal,
    rolling_disc_lagrange,
)

import core.general.sympy_bridge as bridge  # noqa: E402
from core.examples import sympy_rolling_disc  # noqa: E402
from core.general.linearizer import LinearizerError  # noqa: E402
from core.general.sympy_bridge import from_sympy  # noqa: E402

RTOL = 1e-10
t = dynamicsymbols._t


def merged(op_point):
    result = {}
    for item in op_point if isinstance(op_point, list) else [op_point]:
        result.update(item)
    return result


def assert_matches_sympy(ours, theirs, op_point, numbers):
    """``ours``/``theirs``: the (A, B) of from_sympy and of SymPy for the same call; SymPy's are
    substituted with ``numbers`` and the op_point, then with the rates and multipliers our
    linearizer solved (SymPy leaves the ones not given symbolic)."""
    lin, (A, B) = ours
    completed = lin.complete_op_point(op_point + [numbers] if isinstance(op_point, list)
                                      else [op_point, numbers])
    values = {**completed, **merged(op_point), **numbers}
    for name, mine, expected in (("A", A, theirs[0]), ("B", B, theirs[1])):
        if expected.shape == (0, 0):  # SymPy's Matrix() without inputs
            assert mine.shape[1] == 0, name
            continue
        for _ in range(3):  # op_point values may be expressions of other entries
            expected = expected.xreplace(values)
        expected = np.array(expected.evalf(), dtype=float)
        assert mine.shape == expected.shape, name
        scale = max(1.0, np.abs(expected).max())
        assert np.abs(mine - expected).max() <= RTOL * scale, f"{name}: {mine} != {expected}"


# ---------------------------------------------------------------------- test_linearize.py
def rolling_disc_op_point(KM):
    """test_linearize_rolling_disc_kane's precomputed operating point, as written there."""
    q1, q2, q3, q4, q5, q6 = KM.q
    u1, u2, u3, u4, u5, u6 = KM.u
    q1d, q2d, q3d, q4d, q5d, q6d = [x.diff(t) for x in KM.q]
    u1d, u2d, u3d, u4d, u5d, u6d = [x.diff(t) for x in KM.u]
    r, g = symbols("r g")
    q_op = {q6: -r*cos(q2)}
    u_op = {u1: 0,
            u2: sin(q2)*q1d + q3d,
            u3: cos(q2)*q1d,
            u4: -r*(sin(q2)*q1d + q3d)*cos(q3),
            u5: 0,
            u6: -r*(sin(q2)*q1d + q3d)*sin(q3)}
    qd_op = {q2d: 0,
             q4d: -r*(sin(q2)*q1d + q3d)*cos(q1),
             q5d: -r*(sin(q2)*q1d + q3d)*sin(q1),
             q6d: 0}
    ud_op = {u1d: 4*g*sin(q2)/(5*r) + sin(2*q2)*q1d**2/2 + 6*cos(q2)*q1d*q3d/5,
             u2d: 0,
             u3d: 0,
             u4d: r*(sin(q2)*sin(q3)*q1d*q3d + sin(q3)*q3d**2),
             u5d: r*(4*g*sin(q2)/(5*r) + sin(2*q2)*q1d**2/2 + 6*cos(q2)*q1d*q3d/5),
             u6d: -r*(sin(q2)*cos(q3)*q1d*q3d + cos(q3)*q3d**2)}
    return [q_op, u_op, qd_op, ud_op]


def rolling_disc_numbers(KM):
    """What SymPy's result leaves symbolic: q1, q2, q3, q1', q3' and r, m, g (not q4, q5)."""
    q1, q2, q3 = KM.q[:3]
    q1d, q3d = KM.q[0].diff(t), KM.q[2].diff(t)
    r, m, g = symbols("r m g")
    return {q1: 0.3, q2: 0.2, q3: -0.4, q1d: 0.5, q3d: 0.7, r: 0.4, m: 1.3, g: 9.81}


@pytest.mark.parametrize("linear_solver", ["LU", "GJ"])
def test_linearize_rolling_disc_kane(linear_solver):
    KM = sympy_rolling_disc()
    op_point, numbers = rolling_disc_op_point(KM), rolling_disc_numbers(KM)
    q4, q5 = KM.q[3:5]
    assert not {q4, q5} & set().union(*map(set, op_point + [numbers]))  # as SymPy writes it
    lin = from_sympy(KM, linear_solver=linear_solver)
    theirs = KM.to_linearizer(linear_solver=linear_solver).linearize(op_point=op_point,
                                                                     A_and_B=True)
    ours = lin.linearize(op_point=op_point + [numbers], A_and_B=True, simplify=True)
    assert_matches_sympy((lin, ours), theirs, op_point, numbers)


def test_omitted_rolling_disc_contact_coordinates_are_inert(monkeypatch):
    """q4, q5 enter no part: leaving them out equals any value for them, and the placeholder
    used for them does not change the result."""
    KM = sympy_rolling_disc()
    lin = from_sympy(KM)
    q4, q5 = KM.q[3:5]
    assert q4 not in lin.needed_by and q5 not in lin.needed_by
    assert lin.needed_by[KM.q[1]]  # the lean is needed
    op_point = rolling_disc_op_point(KM) + [rolling_disc_numbers(KM)]
    omitted = lin.linearize(op_point=op_point)
    for values in ({q4: 12.5, q5: -3.25}, {q4: 0.0, q5: 1e6}):
        for a, b in zip(omitted, lin.linearize(op_point=op_point + [values]), strict=True):
            np.testing.assert_array_equal(a, b)
    monkeypatch.setattr(bridge, "UNUSED_PLACEHOLDER", 987.0)
    for a, b in zip(omitted, lin.linearize(op_point=op_point), strict=True):
        np.testing.assert_array_equal(a, b)
    completed = lin.complete_op_point(op_point)
    assert completed[q4] == 987.0  # the placeholder shows in the completed point, nowhere else


def test_omitting_a_value_a_part_depends_on_still_raises_naming_it_and_the_parts():
    KM = sympy_rolling_disc()
    lin = from_sympy(KM)
    q2, q4, q5 = KM.q[1], KM.q[3], KM.q[4]
    u1 = KM.u[0]
    g = symbols("g")
    # SymPy's operating point made numeric, without q4, q5 (and without rates)
    completed = lin.complete_op_point(rolling_disc_op_point(KM) + [rolling_disc_numbers(KM)])
    point = {k: v for k, v in completed.items() if k in set(KM.q) | set(KM.u) | set(lin.params)
             and k not in (q4, q5)}
    lin.linearize(op_point=point)
    with pytest.raises(LinearizerError, match=r"lacks values for q2\(t\) \(needed by f_c, "):
        lin.linearize(op_point={k: v for k, v in point.items() if k != q2})
    with pytest.raises(LinearizerError, match=r"lacks values for u1\(t\) \(needed by .*f_1"):
        lin.linearize(op_point={k: v for k, v in point.items() if k != u1})
    with pytest.raises(LinearizerError, match=r"lacks values for g \(needed by f_3\)"):
        lin.linearize(op_point={k: v for k, v in point.items() if k != g})


def test_linearize_pendulum_kane_minimal():
    KM = pendulum_kane_minimal().method
    q1, u1 = dynamicsymbols('q1 u1')
    numbers = {q1: 0.7, u1: -0.3, symbols('L'): 1.4, symbols('m'): 0.6}
    A, B, _ = KM.linearize(A_and_B=True, simplify=True)
    lin = from_sympy(KM)
    ours = lin.linearize(op_point=numbers, A_and_B=True, simplify=True)
    assert_matches_sympy((lin, ours), (A, B), {}, numbers)


@pytest.mark.parametrize("linear_solver", ["LU", "GJ", "function"])
def test_linearize_pendulum_kane_nonminimal(linear_solver):
    KM = pendulum_kane_nonminimal().method
    q1, q2 = dynamicsymbols('q1:3')
    u1, u2 = dynamicsymbols('u1:3')
    u1d, u2d = dynamicsymbols('u1:3', level=1)
    L, m = symbols('L, m')
    q_op = {q1: L, q2: 0}
    u_op = {u1: 0, u2: 0}
    ud_op = {u1d: 0, u2d: 0}
    solver = (lambda A, b: A.LUsolve(b)) if linear_solver == "function" else linear_solver
    A, B, _ = KM.linearize(op_point=[q_op, u_op, ud_op], A_and_B=True, simplify=True,
                           linear_solver=solver)
    numbers = {L: 1.3, m: 0.7}
    lin = from_sympy(KM, linear_solver=solver)
    ours = lin.linearize(op_point=[q_op, u_op, ud_op, numbers], A_and_B=True, simplify=True)
    assert_matches_sympy((lin, ours), (A, B), [q_op, u_op, ud_op], numbers)


@pytest.mark.parametrize("linear_solver", ["LU", "GJ"])
def test_linearize_pendulum_lagrange_minimal(linear_solver):
    LM = pendulum_lagrange_minimal().method
    q1, q1d = dynamicsymbols('q1'), dynamicsymbols('q1', 1)
    A, B, _ = LM.linearize([q1], [q1d], A_and_B=True, linear_solver=linear_solver)
    numbers = {q1: -0.4, q1d: 1.1, symbols('L'): 0.8, symbols('m'): 2.0}
    lin = from_sympy(LM, [q1], [q1d], linear_solver=linear_solver)
    assert_matches_sympy((lin, lin.linearize(op_point=numbers, A_and_B=True)), (A, B), {},
                         numbers)


@pytest.mark.parametrize("linear_solver", ["LU", "function"])
def test_linearize_pendulum_lagrange_nonminimal(linear_solver):
    LM = pendulum_lagrange_nonminimal().method
    q1, q2 = dynamicsymbols('q1:3')
    q1d, q2d = dynamicsymbols('q1:3', level=1)
    L, m = symbols('L, m')
    op_point = {q1: L, q2: 0, q1d: 0, q2d: 0, q1d.diff(t): 0, q2d.diff(t): 0}
    lam_op = LM.solve_multipliers(op_point=op_point)
    op_point.update(lam_op)
    solver = (lambda A, b: A.LUsolve(b)) if linear_solver == "function" else linear_solver
    A, B, _ = LM.linearize([q2], [q2d], [q1], [q1d], op_point=op_point, A_and_B=True,
                           linear_solver=solver)
    numbers = {L: 1.7, m: 0.9}
    lin = from_sympy(LM, [q2], [q2d], [q1], [q1d], linear_solver=solver)
    ours = lin.linearize(op_point=[op_point, numbers], A_and_B=True)
    assert_matches_sympy((lin, ours), (A, B), op_point, numbers)


def test_linearize_rolling_disc_lagrange():
    q1, q2, q3 = q = dynamicsymbols('q1 q2 q3')
    q1d, q2d, q3d = qd = dynamicsymbols('q1 q2 q3', 1)
    r, m, g = symbols('r m g')
    lag = rolling_disc_lagrange().method
    op_point = {q1: 0, q2: 0, q3: 0,
                q1d: 0, q2d: 0,
                q1d.diff(): 0, q2d.diff(): 0, q3d.diff(): 0}
    A = lag.linearize(q_ind=q, qd_ind=qd, op_point=op_point, A_and_B=True)[0]
    numbers = {q3d: 0.8, r: 0.4, m: 1.3, g: 9.81}  # the result depends on q3' (not given)
    lin = from_sympy(lag, q_ind=q, qd_ind=qd)
    ours = lin.linearize(op_point=[op_point, numbers], A_and_B=True)
    assert_matches_sympy((lin, ours), (A, Matrix()), op_point, numbers)


# ---------------------------------------------------------------------- test_kane.py
def test_kane_one_dof():
    q, u = dynamicsymbols('q u')
    qd = dynamicsymbols('q', 1)
    m, c, k = symbols('m c k')
    N = ReferenceFrame('N')
    P = Point('P')
    P.set_vel(N, u * N.x)
    kd = [qd - u]
    FL = [(P, (-k * q - c * u) * N.x)]
    KM = KanesMethod(N, [q], [u], kd)
    KM.kanes_equations([Particle('pa', P, m)], FL)
    A, B, _ = KM.linearize(A_and_B=True, )
    numbers = {q: 0.2, u: -0.5, m: 1.5, c: 0.3, k: 4.0}
    lin = from_sympy(KM)
    assert_matches_sympy((lin, lin.linearize(op_point=numbers, A_and_B=True)), (A, B), {},
                         numbers)


def test_kane_rolling_disc():
    q1, q2, q3, u1, u2, u3 = dynamicsymbols('q1 q2 q3 u1 u2 u3')
    r, m, g = symbols('r m g')
    N = ReferenceFrame('N')
    Y = N.orientnew('Y', 'Axis', [q1, N.z])
    L = Y.orientnew('L', 'Axis', [q2, Y.x])
    R = L.orientnew('R', 'Axis', [q3, L.y])
    w_R_N_qd = R.ang_vel_in(N)
    R.set_ang_vel(N, u1 * L.x + u2 * L.y + u3 * L.z)
    C = Point('C')
    C.set_vel(N, 0)
    Dmc = C.locatenew('Dmc', r * L.z)
    Dmc.v2pt_theory(C, N, R)
    I = inertia(L, m / 4 * r**2, m / 2 * r**2, m / 4 * r**2)  # noqa: E741
    kd = [dot(R.ang_vel_in(N) - w_R_N_qd, uv) for uv in L]
    ForceList = [(Dmc, - m * g * Y.z)]
    BodyD = RigidBody('BodyD', Dmc, R, m, (I, Dmc))
    KM = KanesMethod(N, q_ind=[q1, q2, q3], u_ind=[u1, u2, u3], kd_eqs=kd)
    KM.kanes_equations([BodyD], ForceList)
    A, B, _ = KM.linearize(A_and_B=True)
    lin = from_sympy(KM)
    for numbers in ({r: 1, g: 1, m: 1, q1: 0, q2: 0, q3: 0, u1: 0, u3: 0, u2: 1 / math.sqrt(3)},
                    {r: 0.3, g: 9.81, m: 2, q1: 0.1, q2: 0.2, q3: 0.3, u1: 0.4, u2: 0.5, u3: 0.6}):
        ours = lin.linearize(op_point=numbers, A_and_B=True)
        assert_matches_sympy((lin, ours), (A, B), {}, numbers)
    # SymPy's check: all eigenvalues zero at the critical speed (A is nilpotent)
    A_upright, _ = lin.linearize(op_point={r: 1, g: 1, m: 1, q1: 0, q2: 0, q3: 0, u1: 0, u3: 0,
                                           u2: 1 / math.sqrt(3)}, A_and_B=True)
    np.testing.assert_allclose(np.linalg.matrix_power(A_upright, 6), 0.0, atol=1e-10)


# ---------------------------------------------------------------------- test_kane3.py
def _bench_bicycle():
    """The bicycle of test_kane3 as built by bench/bench_linearizer.py: (KM, parameter values)."""
    from benchref import load

    module = load("bench_linearizer")
    KM, random_point = module.bicycle()
    return KM, random_point(np.random.default_rng(0))


@pytest.mark.slow  # ~20 s: the bicycle's kanes_equations and from_sympy's build
def test_kane3_bicycle():
    """test_bicycle's linearize call, op_point as written (symbolic speed v), CRAMER; SymPy's
    own linearization takes minutes, so the result is checked as SymPy's test checks its own:
    against the Meijaard et al. lean/steer values to 1e-12 for v = 0..5."""
    KM, values = _bench_bicycle()
    q1, q2, q4, q5 = dynamicsymbols('q1 q2 q4 q5')
    u1, u2, u3, u4, u5, u6 = dynamicsymbols('u1 u2 u3 u4 u5 u6')
    v = symbols('v')
    PaperRadRear = 0.3
    PaperRadFront = 0.35
    op_point = {
        u1.diff(): 0, u2.diff(): 0, u3.diff(): 0, u4.diff(): 0, u5.diff(): 0, u6.diff(): 0,
        u1: 0, u2: 0, u3: v / PaperRadRear, u4: 0, u5: 0, u6: v / PaperRadFront,
        q1: 0, q2: 0, q4: 0, q5: 0,
    }
    lin = from_sympy(KM, linear_solver="CRAMER")
    parameters = {p: values[p] for p in lin.params}
    for speed in range(6):
        A, _ = lin.linearize(op_point=[op_point, parameters, {v: speed}], A_and_B=True)
        Res = np.array([
            [0, 0, 1.0, 0],
            [0, 0, 0, 1.0],
            [9.48977444677355, -0.891197738059089*speed**2 - 0.571523173729245,
             -0.105522449805691*speed, -0.330515398992311*speed],
            [11.7194768719633, -1.97171508499972*speed**2 + 30.9087533932407,
             3.67680523332152*speed, -3.08486552743311*speed]])
        np.testing.assert_allclose(A[np.ix_([1, 2, 3, 5], [1, 2, 3, 5])], Res, rtol=0,
                                   atol=1e-12)
