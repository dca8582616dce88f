"""core.general.sympy_bridge.from_sympy against SymPy's own Linearizer.

The systems (tests/sympy_systems.py) are SymPy 1.14's test_linearize.py systems, plus a double
pendulum and a cart-pole with an input (so that B is not empty) and a spherical pendulum (three
coordinates, for orderings).
At random operating points that satisfy the constraints, our M, A, B and state-space A, B must
equal SymPy's ``linearize`` with the same numeric op_point to 1e-10 relative.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sp = pytest.importorskip("sympy")
from sympy import Matrix, cos, sin, symbols  # noqa: E402
from sympy.physics.mechanics import (  # noqa: E402
    dynamicsymbols,
    msubs,
)
from sympy_systems import (  # noqa: E402
    System,
    cart_pole_kane,
    double_pendulum_lagrange,
    pendulum_kane_minimal,
    pendulum_kane_nonminimal,
    pendulum_lagrange_minimal,
    pendulum_lagrange_nonminimal,
    rolling_disc_kane,
    rolling_disc_lagrange,
    spherical_pendulum,
)

from core.general.linearizer import LinearizerError  # noqa: E402
from core.general.sympy_bridge import SympyLinearizer, from_sympy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-10
t = dynamicsymbols._t


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
        "from sympy_systems import cart_pole_kane\n"
        "from test_sympy_bridge import compare_with_sympy\n"
        "compare_with_sympy(cart_pole_kane(), n_points=1)\n"
        "compiled = [f'{m}.{n}' for m, mod in list(sys.modules.items()) if m.startswith('core')\n"
        "            for n, f in vars(mod).items() if isinstance(f, Dispatcher) and f.signatures]\n"
        "assert not compiled, compiled\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env)


def test_a_sympy_linearizer_can_be_passed_directly():
    system = cart_pole_kane()
    lin = from_sympy(system.method.to_linearizer())
    assert isinstance(lin, SympyLinearizer)
    point = system.random_point(np.random.default_rng(0))
    # the same linearization as from the method itself (every array the call returns)
    direct, from_method = lin.linearize(op_point=point), from_sympy(system.method).linearize(op_point=point)
    assert len(direct) == len(from_method) and direct[0].shape == (4, 4)
    for ours, theirs in zip(direct, from_method, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


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
