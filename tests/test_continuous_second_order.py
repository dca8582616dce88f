"""Second derivatives of the continuous dynamics (``System.linearize2``, trep's ``f_dqdq`` ...
``f_dudu``): ``H[i, a, b] = d2 xdot_i / dz_a dz_b``, ``z = [q, dq, u]``, against central finite
differences of the exact first-order ``linearize`` on random systems (springs, damping, frame
wrench inputs, gravity, off-origin centres of mass, holonomic and velocity constraints),
coupled (mimic) and
kinematic variables; the fourth-order terms (Lagrangian, constraints) against finite
differences of the exact third-order ones; a pendulum by hand."""
from __future__ import annotations

import numpy as np
import pytest

import core
from core.tree import lagrangian as lg

from randsys import assert_close, fd, fd2_along, fd_along, random_system

SEEDS = [1, 2, 3, 5, 8, 13, 21, 34]


def _free(seed, **kw):
    return random_system(seed, constraints=0, velocity_constraints=0, com=seed % 2 == 0, **kw)


def _first_order(s, n):
    """``z -> [A, B]`` (2n x nz): the exact first order as a function of ``z = [q, dq, u]``."""
    def AB(z):
        A, B = s.linearize(z[:n], z[n:2 * n], z[2 * n:], residual_limit=None)
        return np.hstack([A, B])
    return AB


def _check_against_fd(s, q, dq, u, tol=1e-7):
    n = s.nq
    A, B, H = s.linearize2(q, dq, u)
    A1, B1 = s.linearize(q, dq, u, residual_limit=None)
    assert np.array_equal(A, A1) and np.array_equal(B, B1)
    nz = 2 * n + len(u)
    assert H.shape == (2 * n, nz, nz)
    assert np.array_equal(H, H.transpose(0, 2, 1)), "H is symmetric in its last two indices"
    assert not H[:n].any(), "the rows d/dt q = dq are linear"
    Hfd = fd(_first_order(s, n), np.concatenate([q, dq, u]), 1e-4)
    assert np.abs(Hfd).max() > 1e-3       # (a nonlinear system: the check can fail)
    assert_close(H, Hfd, "H", tol=tol)
    return H


@pytest.mark.parametrize("seed", SEEDS)
def test_second_derivatives_match_finite_differences(seed):
    s, q, dq, u = _free(seed)
    _check_against_fd(s, q, dq, u)


@pytest.mark.parametrize("seed", [4, 9])
def test_deep_trees_and_fast_motion(seed):
    s, q, dq, u = _free(seed, n_frames=(15, 15), dq_scale=3.0)
    _check_against_fd(s, q, dq, u, tol=2e-7)


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_fourth_order_terms_are_rates_of_the_third_order(seed):
    """``T4 = D_v Lqqv`` and ``W = D_v Lqvv`` (``D_v`` the derivative along ``q + t dq`` at
    fixed ``dq``) against finite differences of the exact third-order tensors."""
    s, q, dq, _ = _free(seed)
    n = s.nq
    data, der = s.workspace.get(third_order=True)
    lg.prepare(s.model, data, q, dq)
    lg.gradient_hessian(s.model, data, q, 2, der, True)
    lg.third_order(s.model, data, q, True, dq, dq, der)
    T4, W = np.empty((n, n, n)), np.empty((n, n, n))
    lg.fourth_order(s.model, data, dq, T4, W)

    def third(t):
        d = s.lagrangian_derivatives(q + t * dq, dq, 3)
        return np.stack([d.Lqqv, d.Lqvv])

    rates = fd_along(third, 1e-4)
    assert np.abs(rates[0]).max() > 1e-3 and np.abs(rates[1]).max() > 1e-3
    assert_close(T4, rates[0], "T4 = D_v Lqqv", tol=1e-8)
    assert_close(W, rates[1], "W = D_v Lqvv", tol=1e-8)


def test_pendulum_by_hand():
    """A point mass m on a massless rod of length l about z, gravity -y, torque u, damping c:
    ``ddq = (u - c w - m g l sin q) / (m l^2)``, so the only nonzero second derivative is
    ``d2 ddq / dq2 = g sin(q) / l``."""
    m, l, g, c = 2.0, 0.7, 9.81, 0.3
    s = core.System(gravity=[0.0, -g, 0.0])
    s.add_frame("arm", rz="q")
    s.add_frame("bob", parent="arm", ty=-l, mass=m)
    s.add_input("torque", config="q")
    s.add_damping("q", c)
    q, w, u = 0.4, -1.3, 0.25
    A, B, H = s.linearize2([q], [w], [u])
    expected = np.zeros((2, 3, 3))
    expected[1, 0, 0] = g * np.sin(q) / l
    assert_close(H, expected, "pendulum H", tol=1e-13)
    assert_close(A, [[0, 1], [-g * np.cos(q) / l, -c / (m * l * l)]], "pendulum A", tol=1e-13)


def test_coupled_variables():
    """Mimic-coupled joints: the same check on a model whose tree has more joints than variables."""
    s = core.System(gravity=[0.0, -9.81, 0.0])
    s.add_frame("a", rz="th")
    s.add_frame("A", parent="a", ty=-1.0, mass=1.0, inertia=[0.1, 0.2, 0.3])
    s.add_frame("b", parent="A", rx="phi")
    s.add_frame("B", parent="b", offset={"translation": [0.1, -0.5, 0.2]}, mass=3.0, inertia=[0.2, 0.1, 0.25])
    s.add_frame("c", parent="B", ry="psi")
    s.add_frame("C", parent="c", offset={"translation": [0.0, -0.4, 0.1]}, mass=0.5)
    s.add_mimic("phi", "th", -2.0, 0.1)
    s.add_input("torque", config="th")
    s.add_input("torque", config="psi")
    assert s.config_names == ["th", "psi"]
    _check_against_fd(s, np.array([0.3, -0.4]), np.array([-0.7, 1.1]), np.array([0.4, -0.2]))


def test_kinematic_variables():
    """A prescribed (kinematic) variable: its acceleration is an input, its row is linear."""
    s, q, dq, u = _free(13)
    kin = s.config_names[0]
    s.set_kinematic([kin])
    nk = 1
    u = np.concatenate([u, np.full(nk, 0.7)])
    assert s.continuous_input_names[-1] == f"{kin}_ddot"
    n = s.nq
    H = _check_against_fd(s, q, dq, u)
    k = s.config_index(kin)
    assert not H[n + k].any()


def _constrained(count, seeds):
    """Random systems with holonomic constraints (the state consistent with them)."""
    found = []
    for seed in range(200):
        s, q, dq, u = random_system(seed, constraints=count, velocity_constraints=0, com=seed % 2 == 0)
        if s.model.nh > 0:
            found.append((s, q, dq, u))
        if len(found) == seeds:
            return found
    raise AssertionError("no constrained random systems")


@pytest.mark.parametrize("case", range(6))
def test_holonomic_constraints_included(case):
    s, q, dq, u = _constrained(3, 6)[case]
    _check_against_fd(s, q, dq, u)


def test_constraint_fourth_derivatives():
    """``Q4[r] = D4h_r(v, v, ., .)`` and ``T3[r] = D3h_r`` against finite differences of the exact
    ``D2h`` (distance, plane and coincide rows)."""
    from core.tree import constraints
    kinds = set()
    for s, q, dq, _ in _constrained(3, 6):
        model, n, nh = s.model, s.nq, s.model.nh
        kinds |= set(int(k) for k in model.hc_kind)
        data, _ = s.workspace.get()
        lg.prepare(model, data, q, dq)
        T3, Q4 = np.empty((nh, n, n, n)), np.empty((nh, n, n))
        constraints.holonomic_fourth(model, data, dq, T3, Q4)
        Q4fd = fd2_along(lambda t, s=s, q=q, dq=dq: s.constraint(q + t * dq, 2)[2], 1e-3)
        T3fd = fd(lambda x, s=s: s.constraint(x, 2)[2], q)
        assert_close(Q4, Q4fd, "D4h(v, v)", tol=1e-6)
        assert_close(T3, T3fd, "D3h", tol=1e-8)
    assert kinds == {0, 1, 2}


def test_off_the_constraints_refused():
    s, q, dq, u = _constrained(3, 1)[0]
    with pytest.raises(ValueError, match="holonomic constraint row"):
        s.linearize2(q + 0.01, dq, u)
    s.linearize2(q + 0.01, dq, u, residual_limit=None)


@pytest.mark.parametrize("case", range(4))
def test_velocity_constraints_included(case):
    """Velocity constraints (with or without holonomic ones) against finite differences."""
    found = []
    for seed in range(100):
        s, q, dq, u = random_system(seed, velocity_constraints=1, com=seed % 2 == 1)
        if s.model.nv > 0:
            found.append((s, q, dq, u))
        if len(found) > case:
            break
    s, q, dq, u = found[case]
    _check_against_fd(s, q, dq, u)


def test_bad_input_is_named():
    s, q, dq, u = _free(3)
    dq = dq.copy()
    dq[1] = np.nan
    with pytest.raises(ValueError, match=f"dq.*{s.config_names[1]}"):
        s.linearize2(q, dq, u)
    with pytest.raises(ValueError, match="u"):
        s.linearize2(q, dq[:0], u[:-1] if len(u) else [1.0])
