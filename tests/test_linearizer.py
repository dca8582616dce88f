"""core.general.linearizer.Linearizer with hand-written numeric callables (no SymPy).

The main system is Crist's non-minimal pendulum (GSoC 2014 post): a particle of mass m at
(q1, q2) on a massless rod of length L, gravity g along +q1, written with Lagrange's method:

    f_c = q1^2 + q2^2 - L^2,   f_v = 2 q1 v1 + 2 q2 v2,   f_a = d/dt f_v,
    f_0 = qd, f_1 = -v,        f_2 = m vd,   f_3 = [-m g, 0],   f_4 = lam * [2 q1, 2 q2]

(optionally with a horizontal input force u on q2: f_3 = [-m g, -u]).
"""
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from numba import njit

from core.general.linearizer import Linearizer, LinearizerError, SingularMatrixError

L, MASS, G = 2.0, 3.0, 9.81
PARAMS = np.array([L, MASS, G])


# ---------------------------------------------------------------------- the pendulum, numpy
def pendulum_f_c(q, t, p):
    return np.array([q[0] ** 2 + q[1] ** 2 - p[0] ** 2]), np.array([[2 * q[0], 2 * q[1]]])


def pendulum_f_v(q, v, t, p):
    return (np.array([2 * q[0] * v[0] + 2 * q[1] * v[1]]), np.array([[2 * v[0], 2 * v[1]]]),
            np.array([[2 * q[0], 2 * q[1]]]))


def pendulum_f_a(q, qd, v, vd, t, p):
    value = np.array([2 * v[0] ** 2 + 2 * v[1] ** 2 + 2 * q[0] * vd[0] + 2 * q[1] * vd[1]])
    return (value, np.array([[2 * vd[0], 2 * vd[1]]]), np.zeros((1, 2)),
            np.array([[4 * v[0], 4 * v[1]]]), np.array([[2 * q[0], 2 * q[1]]]))


def pendulum_f_0(q, qd, t, p):
    return qd.copy(), np.zeros((2, 2)), np.eye(2)


def pendulum_f_1(q, v, t, p):
    return -v, np.zeros((2, 2)), -np.eye(2)


def pendulum_f_2(q, v, vd, t, p):
    return p[1] * vd, np.zeros((2, 2)), np.zeros((2, 2)), p[1] * np.eye(2)


def pendulum_f_3(q, qd, v, u, t, p):
    return (np.array([-p[1] * p[2], -u[0]]), np.zeros((2, 2)), np.zeros((2, 2)),
            np.zeros((2, 2)), np.array([[0.0], [-1.0]]))


def pendulum_f_4(q, lam, t, p):
    return (2 * lam[0] * q, 2 * lam[0] * np.eye(2), np.array([[2 * q[0]], [2 * q[1]]]))


PENDULUM_PARTS = dict(f_c=pendulum_f_c, f_v=pendulum_f_v, f_a=pendulum_f_a, f_0=pendulum_f_0,
                      f_1=pendulum_f_1, f_2=pendulum_f_2, f_3=pendulum_f_3, f_4=pendulum_f_4)


def pendulum(dependent=0, kernels="numba", **parts):
    """q_dep = v_dep = [dependent]; one input force u, one multiplier, parameters [L, m, g]."""
    return Linearizer(2, 2, **{**PENDULUM_PARTS, **parts}, q_dep=[dependent],
                      v_dep=[dependent], n_u=1, n_lam=1, n_p=3, kernels=kernels)


def hanging_at_rest():
    return {"q": [L, 0.0], "v": [0.0, 0.0], "u": [0.0], "p": PARAMS}


def swinging(angle, rate):
    """A point on the constraint manifold: angle from the q1 axis and angular rate."""
    q = L * np.array([math.cos(angle), math.sin(angle)])
    v = L * rate * np.array([-math.sin(angle), math.cos(angle)])
    return {"q": q, "v": v, "u": [0.0], "p": PARAMS}


# ---------------------------------------------------------------------- Crist's example
def test_crist_pendulum_hanging_at_rest_gives_the_pendulum_with_multiplier_solved():
    lin = pendulum(dependent=0)
    A, B = lin.linearize(hanging_at_rest(), A_and_B=True)
    np.testing.assert_allclose(A, [[0.0, 1.0], [-G / L, 0.0]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(B, [[0.0], [1.0 / MASS]], rtol=0, atol=1e-12)
    point = lin.complete_op_point(hanging_at_rest())
    assert point["lam"] == pytest.approx([MASS * G / (2 * L)], rel=1e-12)
    np.testing.assert_allclose(point["vd"], 0.0, atol=1e-12)


def test_given_multiplier_is_used_as_given():
    # Crist's post: with lam1 left free the entry is -2 lam1/m; giving lam shows that dependence.
    lam = 5.0
    A, _ = pendulum().linearize({**hanging_at_rest(), "lam": [lam], "vd": [0.0, 0.0]},
                                A_and_B=True)
    assert A[1, 0] == pytest.approx(-2 * lam / MASS, rel=1e-12)


@pytest.mark.slow   # about 5 s, every run: njit compiles the eight callables (not cached)
def test_numba_compiled_callables_give_the_same_result():
    parts = {name: njit(function) for name, function in PENDULUM_PARTS.items()}
    point = swinging(0.4, -0.7)
    expected = pendulum().linearize(point, A_and_B=True)
    result = pendulum(**parts).linearize(point, A_and_B=True)
    for ours, reference in zip(result, expected, strict=True):
        np.testing.assert_allclose(ours, reference, rtol=1e-13, atol=1e-13)


def test_parts_given_as_separate_value_and_jacobian_callables():
    def split(function, index):
        return lambda *args: function(*args)[index]

    n_outputs = {"f_c": 2, "f_v": 3, "f_a": 5, "f_0": 3, "f_1": 3, "f_2": 4, "f_3": 5, "f_4": 3}
    parts = {name: [split(PENDULUM_PARTS[name], i) for i in range(count)]
             for name, count in n_outputs.items()}
    point = swinging(-0.3, 1.1)
    for ours, reference in zip(pendulum(**parts).linearize(point), pendulum().linearize(point), strict=True):
        np.testing.assert_array_equal(ours, reference)


# ---------------------------------------------------------------------- against the reduced ODE
def reduced_pendulum_rhs(x, force=0.0):
    """[q2', v2'] of the pendulum written in its independent q2, v2 (q1 > 0 branch)."""
    q2, v2 = x
    angle = math.asin(q2 / L)
    rate = v2 / (L * math.cos(angle))
    # m L angle'' = -m g sin(angle) + force cos(angle)   (force along q2)
    angle_dd = (-MASS * G * math.sin(angle) + force * math.cos(angle)) / (MASS * L)
    return np.array([v2, L * math.cos(angle) * angle_dd - L * math.sin(angle) * rate ** 2])


@pytest.mark.parametrize("angle, rate", [(0.0, 0.0), (0.5, 0.0), (-0.8, 1.3), (1.1, -0.6)])
def test_state_space_equals_finite_differences_of_the_reduced_dynamics(angle, rate):
    point = swinging(angle, rate)
    A, B = pendulum(dependent=0).linearize(point, A_and_B=True)
    x0 = np.array([point["q"][1], point["v"][1]])
    h = 1e-6
    A_fd = np.column_stack([(reduced_pendulum_rhs(x0 + h * e) - reduced_pendulum_rhs(x0 - h * e))
                            / (2 * h) for e in np.eye(2)])
    B_fd = (reduced_pendulum_rhs(x0, h) - reduced_pendulum_rhs(x0, -h)) / (2 * h)
    np.testing.assert_allclose(A, A_fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(B[:, 0], B_fd, rtol=1e-6, atol=1e-6)


def test_completed_point_satisfies_all_equations():
    lin = pendulum()
    residuals = lin.residuals(swinging(0.9, 2.0))
    for name, value in residuals.items():
        np.testing.assert_allclose(value, 0.0, atol=1e-10, err_msg=name)


def test_implicit_form_layout_and_state_space_relation():
    lin = pendulum(dependent=0)
    point = swinging(0.7, 0.5)
    M, A, B = lin.linearize(point)
    # n + o + k = 5 rows; columns [q2, v2]; rows [kinematic 2; f_a 1; dynamics 2].
    assert (M.shape, A.shape, B.shape) == ((5, 5), (5, 2), (5, 1))
    np.testing.assert_array_equal(M[:2, :2], np.eye(2))
    np.testing.assert_array_equal(B[:3], 0.0)
    assert lin.perm_mat.shape == (5, 2)
    full = np.linalg.solve(M, np.hstack([A, B]))
    A_ss, B_ss = lin.linearize(point, A_and_B=True)
    np.testing.assert_allclose(lin.perm_mat.T @ full, np.hstack([A_ss, B_ss]), atol=1e-12)
    # at rest the dependent rate follows the independent one: dq1' = -q2 dq2' / q1
    at_rest = swinging(0.7, 0.0)
    M, A, B = lin.linearize(at_rest)
    rates = np.linalg.solve(M, A @ np.array([1e-3, -2e-3]))
    q1, q2 = at_rest["q"]
    assert rates[0] == pytest.approx(-q2 / q1 * rates[1], rel=1e-9)


# ---------------------------------------------------------------------- orderings
def coupled_oscillators(q_ind=None, v_ind=None):
    mass = np.diag([1.0, 2.0, 4.0])
    stiffness = np.array([[3.0, -1.0, 0.0], [-1.0, 2.0, -0.5], [0.0, -0.5, 1.0]])
    parts = dict(
        f_0=lambda q, qd, t, p: (qd.copy(), np.zeros((3, 3)), np.eye(3)),
        f_1=lambda q, v, t, p: (-v, np.zeros((3, 3)), -np.eye(3)),
        f_2=lambda q, v, vd, t, p: (mass @ vd, np.zeros((3, 3)), np.zeros((3, 3)), mass),
        f_3=lambda q, qd, v, u, t, p: (stiffness @ q, stiffness, np.zeros((3, 3)),
                                       np.zeros((3, 3)), np.zeros((3, 0))))
    lin = Linearizer(3, 3, **parts, q_ind=q_ind, v_ind=v_ind)
    exact = np.block([[np.zeros((3, 3)), np.eye(3)],
                      [-np.linalg.solve(mass, stiffness), np.zeros((3, 3))]])
    return lin, exact


def test_unconstrained_linear_system_is_exact_and_follows_the_chosen_order():
    point = {"q": [0.1, -0.2, 0.3], "v": [0.0, 1.0, -1.0]}
    lin, exact = coupled_oscillators()
    A, B = lin.linearize(point, A_and_B=True)
    np.testing.assert_allclose(A, exact, atol=1e-14)
    assert B.shape == (6, 0)
    order = [2, 0, 1]  # a cyclic reordering of q_ind and v_ind
    lin, _ = coupled_oscillators(q_ind=order, v_ind=order)
    A, _ = lin.linearize(point, A_and_B=True)
    rows = order + [3 + i for i in order]
    np.testing.assert_allclose(A, exact[np.ix_(rows, rows)], atol=1e-14)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize("op_point, message", [
    ({"q": [L, 0.0, 1.0], "v": [0.0, 0.0], "u": [0.0], "p": PARAMS},
     "'q' has 3 values; expected 2"),
    ({"q": [L, 0.0], "v": [0.0], "u": [0.0], "p": PARAMS}, "'v' has 1 values; expected 2"),
    ({"q": [L, 0.0], "v": [0.0, 0.0], "u": [0.0], "p": PARAMS[:2]}, "'p' has 2 values; expected 3"),
    ({"q": [L, 0.0], "v": [0.0, 0.0], "u": [0.0], "p": PARAMS, "lam": [1.0, 2.0]},
     "'lam' has 2 values; expected 1"),
    ({"q": [L, 0.0], "u": [0.0], "p": PARAMS}, "lacks 'v'"),
    ({"q": [L, 0.0], "v": [0.0, 0.0], "p": PARAMS}, "lacks 'u'"),
    ({"q": [L, 0.0], "v": [0.0, 0.0], "u": [0.0], "p": PARAMS, "udot": [0, 0]}, "unknown op_point"),
    ({"q": [L, math.nan], "v": [0.0, 0.0], "u": [0.0], "p": PARAMS}, "must be finite"),
])
def test_wrong_op_points_raise_clear_errors(op_point, message):
    with pytest.raises(LinearizerError, match=message):
        pendulum().linearize(op_point)


@pytest.mark.parametrize("old_key, value, message", [
    ("r", [0.0], r"op_point key 'r' \(value \[0\.0\]\) is not known: inputs are 'u' and generalized "
                 r"speeds are 'v' \(SymPy's r and u\)"),
    ("ud", [0.0, 0.0], r"op_point key 'ud' \(value \[0\.0, 0\.0\]\) is not known: rates of the "
                       r"generalized speeds are 'vd' and generalized speeds are 'v'"),
])
def test_sympy_keys_r_and_ud_are_refused_with_the_new_names(old_key, value, message):
    # the pre-rename op_point of the same state: speeds under "u", inputs under "r"
    old_style = {"q": [L, 0.0], "u": [0.0, 0.0], "p": PARAMS, old_key: value}
    with pytest.raises(LinearizerError, match=message):
        pendulum().linearize(old_style)
    with pytest.raises(LinearizerError, match=message):
        pendulum().complete_op_point({**hanging_at_rest(), old_key: value})


def test_missing_speeds_and_inputs_are_named_with_their_meaning():
    with pytest.raises(LinearizerError, match=r"lacks 'v' \(2 values\): the generalized speeds"):
        pendulum().linearize({"q": [L, 0.0], "u": [0.0], "p": PARAMS})
    with pytest.raises(LinearizerError, match=r"lacks 'u' \(1 values\): the inputs"):
        pendulum().linearize({"q": [L, 0.0], "v": [0.0, 0.0], "p": PARAMS})


@pytest.mark.parametrize("kernels", ["numba", "numpy"])
def test_singular_dependent_coordinate_choice_names_the_matrix(kernels):
    # q2 dependent while hanging (q2 = 0): df_c/dq2 = 2 q2 = 0.
    with pytest.raises(SingularMatrixError, match=r"df_c/dq_dep") as error:
        pendulum(dependent=1, kernels=kernels).linearize(hanging_at_rest())
    assert error.value.matrix.startswith("df_c/dq_dep")
    # numerically (not exactly) singular: q2 = L cos(pi/2) ~ 1e-16 relative to q1 = L
    point = {**hanging_at_rest(), "q": [L, L * math.cos(math.pi / 2)]}
    with pytest.raises(SingularMatrixError, match=r"df_c/dq_dep"):
        pendulum(dependent=1, kernels=kernels).linearize(point)


@pytest.mark.parametrize("kernels", ["numba", "numpy"])
def test_singular_mass_matrix_is_named(kernels):
    massless = dict(f_2=lambda q, v, vd, t, p: (0 * vd, np.zeros((2, 2)), np.zeros((2, 2)),
                                                np.zeros((2, 2))))
    point = {**hanging_at_rest(), "qd": [0.0, 0.0], "vd": [0.0, 0.0], "lam": [1.0]}
    with pytest.raises(SingularMatrixError, match="mass matrix M"):
        pendulum(kernels=kernels, **massless).linearize(point, A_and_B=True)
    with pytest.raises(SingularMatrixError, match=r"solving the missing vd, lam"):
        pendulum(kernels=kernels, **massless).linearize({**hanging_at_rest(), "qd": [0.0, 0.0]})


@pytest.mark.parametrize("dependent", [0, 1])
def test_numpy_kernels_equal_the_compiled_kernels(dependent):
    compiled, plain = pendulum(dependent), pendulum(dependent, kernels="numpy")
    for angle, rate in [(0.4, -0.7), (1.3, 2.0), (-2.5, 0.1)]:
        point = swinging(angle, rate)
        assert compiled.complete_op_point(point)["lam"] == pytest.approx(
            plain.complete_op_point(point)["lam"], rel=1e-13)
        for A_and_B in (False, True):
            for a, b in zip(plain.linearize(point, A_and_B=A_and_B),
                            compiled.linearize(point, A_and_B=A_and_B), strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
    with pytest.raises(LinearizerError, match="kernels must be one of"):
        pendulum(kernels="fortran")


def test_wrong_callable_outputs_raise_clear_errors():
    def bad_jacobian(q, t, p):
        return np.array([0.0]), np.zeros((1, 3))

    with pytest.raises(LinearizerError, match=r"f_c returned df_c/dq of shape \(1, 3\); "
                                              r"expected \(1, 2\)"):
        pendulum(f_c=bad_jacobian).linearize(hanging_at_rest())

    def missing_jacobian(q, v, t, p):
        return pendulum_f_v(q, v, t, p)[:2]

    with pytest.raises(LinearizerError, match="f_v returned 2 arrays; expected 3"):
        pendulum(f_v=missing_jacobian).linearize(hanging_at_rest())


@pytest.mark.parametrize("kwargs, message", [
    (dict(q_dep=[2], v_dep=[0]), "must partition the 2 indices of q"),
    (dict(q_dep=[0], v_dep=[0], q_ind=[0]), "must partition the 2 indices of q"),
    (dict(q_dep=[0], v_dep=[0], f_c=None), "f_c is required"),
    (dict(q_dep=[0], v_dep=[0], f_v=[pendulum_f_v]), "sequence of 3 callables"),
])
def test_wrong_construction_raises_clear_errors(kwargs, message):
    arguments = {**PENDULUM_PARTS, "n_u": 1, "n_lam": 1, **kwargs}
    with pytest.raises(LinearizerError, match=message):
        Linearizer(2, 2, **arguments)


# ---------------------------------------------------------------------- property: linear systems
def constrained_linear_system(seed, n, nc):
    """Mass matrix, stiffness and nc linear constraints G q = 0 (Lagrange form, k = m = nc)."""
    rng = np.random.default_rng(seed)
    root = rng.standard_normal((n, n))
    mass = root @ root.T + n * np.eye(n)
    stiffness = rng.standard_normal((n, n))
    stiffness = stiffness + stiffness.T
    G = rng.standard_normal((nc, n))
    return rng, mass, stiffness, G


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5), data=st.data())
def test_linear_constrained_systems_match_the_null_space_reduction(seed, n, data):
    nc = data.draw(st.integers(0, n - 1))
    rng, mass, stiffness, G = constrained_linear_system(seed, n, nc)
    q_order, v_order = rng.permutation(n), rng.permutation(n)  # any dependent sets and orders
    q_ind, q_dep, v_ind, v_dep = q_order[nc:], q_order[:nc], v_order[nc:], v_order[:nc]
    if nc:
        assume(np.linalg.cond(G[:, q_dep]) < 1e6 and np.linalg.cond(G[:, v_dep]) < 1e6)
    zeros = np.zeros
    lin = Linearizer(
        n, n, q_ind=q_ind, q_dep=q_dep, v_ind=v_ind, v_dep=v_dep, n_lam=nc,
        f_c=lambda q, t, p: (G @ q, G),
        f_v=lambda q, v, t, p: (G @ v, zeros((nc, n)), G),
        f_a=lambda q, qd, v, vd, t, p: (G @ vd, zeros((nc, n)), zeros((nc, n)), zeros((nc, n)), G),
        f_0=lambda q, qd, t, p: (qd.copy(), zeros((n, n)), np.eye(n)),
        f_1=lambda q, v, t, p: (-v, zeros((n, n)), -np.eye(n)),
        f_2=lambda q, v, vd, t, p: (mass @ vd, zeros((n, n)), zeros((n, n)), mass),
        f_3=lambda q, qd, v, u, t, p: (stiffness @ q, stiffness, zeros((n, n)), zeros((n, n)),
                                       zeros((n, 0))),
        f_4=lambda q, lam, t, p: (G.T @ lam, zeros((n, n)), G.T.copy()))
    Z = np.linalg.svd(G)[2][nc:].T if nc else np.eye(n)  # q = Z y on the constraint manifold
    y, y_rate = rng.standard_normal(n - nc), rng.standard_normal(n - nc)
    A, B = lin.linearize({"q": Z @ y, "v": Z @ y_rate}, A_and_B=True)
    # x = [q_ind, v_ind] = [S_q Z y, S_v Z y']  and  y'' = -W y
    W = np.linalg.solve(Z.T @ mass @ Z, Z.T @ stiffness @ Z)
    to_y_from_q = np.linalg.inv(Z[q_ind])
    to_y_rate_from_v = np.linalg.inv(Z[v_ind])
    expected = np.block([
        [zeros((n - nc, n - nc)), Z[q_ind] @ to_y_rate_from_v],
        [-Z[v_ind] @ W @ to_y_from_q, zeros((n - nc, n - nc))]])
    np.testing.assert_allclose(A, expected, rtol=1e-8, atol=1e-8 * np.abs(expected).max())
    assert B.shape == (2 * (n - nc), 0)
    residuals = lin.residuals({"q": Z @ y, "v": Z @ y_rate})
    np.testing.assert_allclose(residuals["dynamic"], 0.0, atol=1e-9)


def test_the_core_linearizer_and_the_bridge_module_do_not_import_sympy():
    import subprocess
    import sys

    code = ("import sys, core.general.linearizer, core.general.sympy_bridge; "
            "assert 'sympy' not in sys.modules, 'sympy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
