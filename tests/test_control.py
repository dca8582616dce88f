"""Tests for core.control.riccati, core.control.simulation and core.control.optimal: TV-LQR, DARE,
controllability, simulation and trajectory optimization.

The optimizer tests use :class:`RK4Pendulum`, a damped torque-driven pendulum discretized by the
classical Runge-Kutta 4 scheme with a zero-order-hold input. Its exact first and second
derivatives come from propagating Jacobians and Hessians through the four stages by the chain
rule; they are checked against central finite differences before anything relies on them.
"""
import dataclasses
import itertools
import math
import time

import numpy as np
import pytest
import scipy.linalg

import core
from core import (
    controllability,
    dlqr,
    linearize_trajectory,
    load_system,
    lqr,
    optimize_trajectory,
    simulate_closed_loop,
    simulate_open_loop,
    tracking_step,
    tvlqr,
)
from core.control import costs as tracking_costs
from core.control import directions, line_search, optimal
from core.control.optimal import METHODS, PROJECTIONS, cost_and_gradient, trajectory_cost
from core.errors import RiccatiError


# ================================================================================ test system
class RK4Pendulum:
    """θ'' = −a sin θ − b θ' + c u as x = [θ, ω]; one RK4 step of length dt per input sample."""
    nx, nu = 2, 1

    def __init__(self, dt=0.1, a=9.81, b=0.2, c=1.0):
        self.dt, self.a, self.b, self.c = dt, a, b, c

    def _f(self, y, u):
        return np.array([y[1], -self.a * math.sin(y[0]) - self.b * y[1] + self.c * u[0]])

    def _f_jacobian(self, y):
        """∂f/∂w for w = [θ, ω, u]."""
        return np.array([[0.0, 1.0, 0.0], [-self.a * math.cos(y[0]), -self.b, self.c]])

    def _f_hessian(self, y):
        """∂²f_i/∂w_a∂w_b for w = [θ, ω, u]."""
        H = np.zeros((2, 3, 3))
        H[1, 0, 0] = self.a * math.sin(y[0])
        return H

    def step(self, x, u):
        h = self.dt
        k1 = self._f(x, u)
        k2 = self._f(x + 0.5 * h * k1, u)
        k3 = self._f(x + 0.5 * h * k2, u)
        k4 = self._f(x + h * k3, u)
        return x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)

    def _stage(self, y, Dy, D2y, u):
        """k = f(y, u) and its first (and, if D2y is given, second) derivatives w.r.t.
        z = [x, u], given y(z) and its derivatives."""
        Dw = np.vstack([Dy, [[0.0, 0.0, 1.0]]])            # ∂[y, u]/∂z
        J = self._f_jacobian(y)
        if D2y is None:
            return self._f(y, u), J @ Dw, None
        D2w = np.concatenate([D2y, np.zeros((1, 3, 3))])  # ∂²[y, u]/∂z²
        D2k = (np.einsum("ij,jab->iab", J, D2w)
               + np.einsum("ca,icd,db->iab", Dw, self._f_hessian(y), Dw))
        return self._f(y, u), J @ Dw, D2k

    def _derivatives(self, x, u, second_order):
        """Chain rule through the RK4 stages Y1 = x, Y2 = x + h/2 k1, Y3 = x + h/2 k2,
        Y4 = x + h k3, x_next = x + h/6 (k1 + 2 k2 + 2 k3 + k4), with k_i = f(Y_i, u)."""
        h = self.dt
        I = np.hstack([np.eye(2), np.zeros((2, 1))])      # ∂x/∂z
        y, Dy, D2y = x, I, (np.zeros((2, 3, 3)) if second_order else None)
        D, H = I.copy(), np.zeros((2, 3, 3))
        for coef, weight in ((0.5, 1.0), (0.5, 2.0), (1.0, 2.0), (None, 1.0)):
            k, Dk, D2k = self._stage(y, Dy, D2y, u)
            D += h / 6 * weight * Dk
            if second_order:
                H += h / 6 * weight * D2k
            if coef is not None:
                y, Dy = x + coef * h * k, I + coef * h * Dk
                D2y = coef * h * D2k if second_order else None
        return D[:, :2], D[:, 2:], H

    def linearize(self, x, u):
        A, B, _ = self._derivatives(x, u, second_order=False)
        return A, B

    def linearize2(self, x, u):
        return self._derivatives(x, u, second_order=True)


class LinearSystem:
    """x_{k+1} = A x_k + B u_k; second derivatives are zero."""

    def __init__(self, A, B):
        self.A, self.B = np.asarray(A, float), np.asarray(B, float)
        self.nx, self.nu = self.B.shape

    def step(self, x, u):
        return self.A @ x + self.B @ u

    def linearize(self, x, u):
        return self.A, self.B

    def linearize2(self, x, u):
        nz = self.nx + self.nu
        return self.A, self.B, np.zeros((self.nx, nz, nz))


def swing_up_problem(N=60, dt=0.1):
    """The paper's Sec. VIII-A problem on the RK4 pendulum (shorter horizon): infeasible step
    reference from θ = 0 to θ = π at N/2, zero velocity and input references, x0 = 0."""
    x_ref = np.zeros((N + 1, 2))
    x_ref[N // 2:, 0] = np.pi
    return dict(system=RK4Pendulum(dt=dt), x0=np.zeros(2), x_ref=x_ref, u_ref=np.zeros((N, 1)),
                Q=np.diag([1000.0, 1.0]), R=np.array([[50.0]]), Q_N=np.diag([1000.0, 1.0]))


def random_spd(rng, n, shift=0.5):
    M = rng.normal(size=(n, n))
    return M @ M.T / n + shift * np.eye(n)


def random_stack(rng, N, nx, nu, scale=0.6):
    A = np.eye(nx) + scale * rng.normal(size=(N, nx, nx)) / np.sqrt(nx)
    B = rng.normal(size=(N, nx, nu))
    return A, B


# ===================================================================================== LQR
def test_riccati_converges_to_dare_gain_on_long_horizon():
    rng = np.random.default_rng(1)
    nx, nu, N = 4, 2, 400
    A = rng.normal(size=(nx, nx))
    A *= 1.3 / max(abs(np.linalg.eigvals(A)))          # open-loop unstable
    B = rng.normal(size=(nx, nu))
    Q, R = random_spd(rng, nx), random_spd(rng, nu)
    K, P = tvlqr(np.repeat(A[None], N, 0), np.repeat(B[None], N, 0), Q, R, Q)
    K_inf, P_inf = dlqr(A, B, Q, R)
    P_scipy = scipy.linalg.solve_discrete_are(A, B, Q, R)
    np.testing.assert_allclose(K[0], K_inf, rtol=0, atol=1e-8)
    np.testing.assert_allclose(P[0], P_scipy, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(P_inf, P_scipy, rtol=1e-12, atol=1e-10)
    assert max(abs(np.linalg.eigvals(A - B @ K_inf))) < 1.0
    assert np.abs(K[-1] - K_inf).max() > 1e-3   # the finite horizon matters near the end


def dense_lq_solution(A, B, Q, R, Q_N, x0s):
    """Optimal states/inputs of Σ x_kᵀQ_k x_k + u_kᵀR_k u_k + x_NᵀQ_N x_N subject to the dynamics,
    by solving the KKT system of the stacked problem in w = [x_0..x_N, u_0..u_{N-1}]."""
    N, nx, nu = B.shape
    nX, nU = (N + 1) * nx, N * nu
    G = scipy.linalg.block_diag(*Q, Q_N, *R)
    E = np.zeros((nX, nX + nU))
    E[:nx, :nx] = np.eye(nx)
    for k in range(N):
        rows = slice((k + 1) * nx, (k + 2) * nx)
        E[rows, (k + 1) * nx:(k + 2) * nx] = np.eye(nx)
        E[rows, k * nx:(k + 1) * nx] = -A[k]
        E[rows, nX + k * nu:nX + (k + 1) * nu] = -B[k]
    kkt = np.block([[2 * G, E.T], [E, np.zeros((nX, nX))]])
    rhs = np.zeros((nX + nX + nU, x0s.shape[0]))
    rhs[nX + nU:nX + nU + nx] = x0s.T
    w = np.linalg.solve(kkt, rhs)[:nX + nU]
    xs = w[:nX].T.reshape(-1, N + 1, nx)
    us = w[nX:].T.reshape(-1, N, nu)
    costs = np.einsum("si,ij,sj->s", w.T, G, w.T)
    return xs, us, costs


def random_lq_problem(rng, N, nx, nu):
    """``(A, B, Q, R, Q_N)``: random dynamics and per-step weights of an LQ problem."""
    A, B = random_stack(rng, N, nx, nu)
    Q = np.stack([random_spd(rng, nx, 0.1) for _ in range(N)])
    R = np.stack([random_spd(rng, nu, 0.3) for _ in range(N)])
    return A, B, Q, R, random_spd(rng, nx, 1.0)


def test_tvlqr_matches_dense_kkt_solution():
    rng = np.random.default_rng(2)
    N, nx, nu = 7, 3, 2
    A, B, Q, R, Q_N = random_lq_problem(rng, N, nx, nu)
    x0s = rng.normal(size=(5, nx))
    K, P = tvlqr(A, B, Q, R, Q_N)
    assert K.shape == (N, nu, nx) and P.shape == (N + 1, nx, nx)
    xs, us, costs = dense_lq_solution(A, B, Q, R, Q_N, x0s)
    for x0, x_opt, u_opt, cost in zip(x0s, xs, us, costs, strict=True):
        u_law = -np.einsum("kij,kj->ki", K, x_opt[:-1])
        np.testing.assert_allclose(u_law, u_opt, rtol=0, atol=1e-10)
        x_cl, u_cl = simulate_closed_loop(ltv_step(A, B), x0, np.zeros((N + 1, nx)),
                                          np.zeros((N, nu)), K)
        np.testing.assert_allclose(u_cl, u_opt, rtol=0, atol=1e-10)
        np.testing.assert_allclose(x0 @ P[0] @ x0, cost, rtol=1e-10)


def ltv_step(A, B):
    """A step(x, u) callable for x_{k+1} = A_k x_k + B_k u_k that counts its calls as k."""
    calls = iter(range(len(A)))

    def step(x, u):
        k = next(calls)
        return A[k] @ x + B[k] @ u
    return step


def test_tracking_step_is_the_least_squares_step_with_tvlqr_gains():
    """The Gauss-Newton step of the tracking cost equals the dense least-squares solution over
    ``dU`` (``dX = G dU``, ``dX_0 = 0``), its law ``dU_k = kff_k - K_k dX_k`` reproduces it, and
    ``K`` is tvlqr's; at the reference itself the step is zero."""
    rng = np.random.default_rng(7)
    N, nx, nu = 6, 3, 2
    A, B, Q, R, Q_N = random_lq_problem(rng, N, nx, nu)
    X, X_ref = rng.normal(size=(N + 1, nx)), rng.normal(size=(N + 1, nx))
    U, U_ref = rng.normal(size=(N, nu)), rng.normal(size=(N, nu))
    K, kff, dX, dU = tracking_step(A, B, X, U, X_ref, U_ref, Q, R, Q_N)
    np.testing.assert_allclose(K, tvlqr(A, B, Q, R, Q_N)[0], rtol=1e-12, atol=1e-12)
    G = np.zeros((N + 1, nx, N, nu))               # dX_k = sum_j G[k, :, j, :] dU_j
    for k in range(N):
        G[k + 1] = np.einsum("ij,jbc->ibc", A[k], G[k])
        G[k + 1][:, k, :] += B[k]
    Gm = G.reshape((N + 1) * nx, N * nu)
    Qbig = scipy.linalg.block_diag(*Q, Q_N)
    Rbig = scipy.linalg.block_diag(*R)
    ex, eu = (X - X_ref).ravel(), (U - U_ref).ravel()
    dU_ls = np.linalg.solve(Gm.T @ Qbig @ Gm + Rbig, -(Gm.T @ Qbig @ ex + Rbig @ eu)).reshape(N, nu)
    np.testing.assert_allclose(dU, dU_ls, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(dX, (Gm @ dU_ls.ravel()).reshape(N + 1, nx), rtol=1e-9, atol=1e-10)
    assert np.all(dX[0] == 0.0)
    np.testing.assert_allclose(dU, kff - np.einsum("kij,kj->ki", K, dX[:N]), rtol=1e-12, atol=1e-12)
    _, kff0, dX0, dU0 = tracking_step(A, B, X_ref, U_ref, X_ref, U_ref, Q, R, Q_N)
    assert np.abs(kff0).max() < 1e-14 and np.abs(dX0).max() < 1e-14 and np.abs(dU0).max() < 1e-14
    with pytest.raises(ValueError, match=r"X_ref must have shape \(7, 3\)"):
        tracking_step(A, B, X, U, X_ref[:N], U_ref, Q, R, Q_N)
    with pytest.raises(ValueError, match=r"U must have shape \(6, 2\)"):
        tracking_step(A, B, X, U[:, :1], X_ref, U_ref, Q, R, Q_N)
    with pytest.raises(ValueError, match="R must be symmetric"):
        tracking_step(A, B, X, U, X_ref, U_ref, Q, R + np.triu(np.ones((nu, nu)), 1), Q_N)

def test_tvlqr_weight_shapes_are_equivalent():
    rng = np.random.default_rng(3)
    N, nx, nu = 6, 3, 2
    A, B = random_stack(rng, N, nx, nu)
    Q, R, Q_N = random_spd(rng, nx), random_spd(rng, nu), random_spd(rng, nx, 2.0)
    K1, P1 = tvlqr(A, B, Q, R, Q_N)
    K2, P2 = tvlqr(A, B, np.repeat(Q[None], N, 0), np.repeat(R[None], N, 0), Q_N)
    K3, P3 = tvlqr(A, B, np.concatenate([np.repeat(Q[None], N, 0), Q_N[None]]), R)
    K4, _ = tvlqr(A, B, Q, R)                        # Q_N defaults to Q
    K5, _ = tvlqr(A, B, Q, R, Q)
    for K, P in ((K2, P2), (K3, P3)):
        np.testing.assert_allclose(K, K1, rtol=0, atol=1e-13)
        np.testing.assert_allclose(P, P1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(K4, K5, rtol=0, atol=1e-13)
    assert np.abs(K4 - K1).max() > 1e-3
    np.testing.assert_allclose(P1, np.swapaxes(P1, 1, 2), rtol=0, atol=0)


def _shapes(N=5, nx=3, nu=2):
    rng = np.random.default_rng(4)
    A, B = random_stack(rng, N, nx, nu)
    return dict(A=A, B=B, Q=np.eye(nx), R=np.eye(nu), Q_N=np.eye(nx))


def _with(**changes):
    args = _shapes()
    for key, value in changes.items():
        args[key] = value(args[key]) if callable(value) else value
    return args


def _nan_at(M, index):
    M = M.copy()
    M[index] = np.nan
    return M


@pytest.mark.parametrize("args, message", [
    (_with(A=lambda A: A[0]), r"A must have shape \(N, nx, nx\)"),
    (_with(A=lambda A: A[:, :, :2]), r"A must have shape \(N, nx, nx\)"),
    (_with(B=lambda B: B[:, :2]), r"B must have shape \(5, 3, nu\)"),
    (_with(B=lambda B: B[:4]), r"B must have shape \(5, 3, nu\)"),
    (_with(Q=np.eye(2)), r"Q must have shape \(3, 3\) or \(5, 3, 3\) or \(6, 3, 3\)"),
    (_with(Q=np.zeros((4, 3, 3))), r"Q must have shape \(3, 3\) or \(5, 3, 3\) or \(6, 3, 3\)"),
    (_with(R=np.eye(3)), r"R must have shape \(2, 2\) or \(5, 2, 2\)"),
    (_with(Q_N=np.eye(2)), r"Q_N must have shape \(3, 3\)"),
    (_with(A=lambda A: _nan_at(A, (2, 1, 1))), "A contains non-finite values"),
    (_with(B=lambda B: _nan_at(B, (0, 0, 0)) * np.inf), "B contains non-finite values"),
    (_with(Q_N=np.diag([1.0, np.inf, 1.0])), "Q_N contains non-finite values"),
    (_with(R=np.array([[1.0, 0.5], [0.0, 1.0]])), "R must be symmetric"),
    (_with(Q=np.stack([np.eye(3)] * 6)), r"pass Q_N=None"),
    (_with(Q=np.stack([np.eye(3)] * 5), Q_N=None), "Q_N .* is required"),
    (_with(A="abc"), "A must be a real numeric array"),
])
def test_tvlqr_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        tvlqr(**args)


def _riccati(A, B, Q, R, Q_N):
    """The backward pass itself (what tvlqr runs after validating the weights)."""
    from core.control.riccati import lq_riccati
    N, nx, nu = B.shape
    K, P = np.empty((N, nu, nx)), np.empty((N + 1, nx, nx))
    status = lq_riccati(A, B, Q[None], R[None], np.zeros((1, nu, nx)), np.zeros((1, nx)),
                        np.zeros((1, nu)), Q_N, np.zeros(nx), K, np.empty((N, nu)), P, False)
    if status >= 0:
        raise RiccatiError(status)
    return K


def test_riccati_pass_names_the_step_of_a_singular_input_hessian():
    # with R positive definite (as tvlqr requires) R + Bᵀ P B cannot be singular; the pass
    # itself, used by the optimizer's Newton models, still names the step where it is
    N, nx, nu = 8, 2, 2
    A = np.repeat(np.eye(nx)[None], N, 0)
    B = np.repeat(np.array([[1.0, 0.0], [0.5, 1.0]])[None], N, 0)
    B[3] = [[1.0, 1.0], [2.0, 2.0]]   # equal columns: R + Bᵀ P B = Bᵀ P B has rank 1 at k = 3
    with pytest.raises(RiccatiError, match="at step k=3") as err:
        _riccati(A, B, np.eye(nx), np.zeros((nu, nu)), np.eye(nx))
    assert err.value.step == 3
    assert isinstance(err.value, np.linalg.LinAlgError)
    with pytest.raises(RiccatiError, match="at step k=7"):
        _riccati(A, B, np.eye(nx), np.zeros((nu, nu)), np.zeros((nx, nx)))      # S = 0 at k = N-1
    B[3] = B[2]
    assert np.all(np.isfinite(_riccati(A, B, np.eye(nx), np.zeros((nu, nu)), np.eye(nx))))


def test_lqr_weights_must_be_definite_and_may_be_scalars():
    """Q, Q_N positive semi-definite, R positive definite; named with the smallest eigenvalue."""
    N, nx = 5, 2
    A = np.repeat(np.array([[1.0, 0.1], [0.0, 1.0]])[None], N, 0)
    B = np.repeat(np.array([[0.0], [0.1]])[None], N, 0)
    indefinite = np.array([[1.0, 0.0], [0.0, -10.2]])
    for call in (lambda Q, R, Q_N: tvlqr(A, B, Q, R, Q_N), lambda Q, R, Q_N: dlqr(A[0], B[0], Q, R)):
        with pytest.raises(ValueError, match=r"Q must be positive semi-definite \(smallest eigenvalue -10.2\)"):
            call(indefinite, np.eye(1), np.eye(nx))
        with pytest.raises(ValueError, match=r"R must be positive definite \(smallest eigenvalue 0\)"):
            call(np.eye(nx), 0.0, np.eye(nx))
        with pytest.raises(ValueError, match=r"R must be positive definite \(smallest eigenvalue -1\)"):
            call(np.eye(nx), [[-1.0]], np.eye(nx))
        K_scalar = call(np.eye(nx), 1.0, np.eye(nx))[0]            # a scalar R for one input
        np.testing.assert_array_equal(K_scalar, call(np.eye(nx), np.eye(1), np.eye(nx))[0])
    with pytest.raises(ValueError, match=r"Q_N must be positive semi-definite \(smallest eigenvalue -10.2\)"):
        tvlqr(A, B, np.eye(nx), 1.0, indefinite)
    R = np.ones((N, 1, 1))
    R[3] = 0.0
    with pytest.raises(ValueError, match=r"R\[3\] must be positive definite"):
        tvlqr(A, B, np.eye(nx), R, np.eye(nx))
    Q = np.repeat(np.eye(nx)[None], N, 0)
    Q[2] = indefinite
    with pytest.raises(ValueError, match=r"Q\[2\] must be positive semi-definite"):
        tvlqr(A, B, Q, 1.0, np.eye(nx))
    # positive semi-definite Q (a zero block) is fine
    K, P = tvlqr(A, B, np.diag([1.0, 0.0]), 1.0, np.zeros((nx, nx)))
    assert np.all(np.isfinite(K)) and np.linalg.eigvalsh(P[0]).min() >= -1e-12


def test_dlqr_validates_and_reports_unstabilizable_pairs():
    with pytest.raises(ValueError, match=r"B must have shape \(2, nu\)"):
        dlqr(np.eye(2), np.ones((3, 1)), np.eye(2), np.eye(1))
    with pytest.raises(np.linalg.LinAlgError, match="stabiliz"):
        dlqr(np.diag([2.0, 0.5]), np.array([[0.0], [1.0]]), np.eye(2), np.eye(1))


def _random_pair(rng, nx, nu):
    """A random (A, B) with unstable modes (controllable with probability 1), Q >= 0, R > 0."""
    A = rng.standard_normal((nx, nx)) + 0.5 * np.eye(nx)
    B = rng.standard_normal((nx, nu))
    G = rng.standard_normal((nx, nx))
    H = rng.standard_normal((nu, nu))
    return A, B, G @ G.T + 0.1 * np.eye(nx), H @ H.T + 0.5 * np.eye(nu)


def _care_by_schur(A, B, Q, R):
    """Reference: the stabilizing CARE solution from the stable invariant subspace of the
    Hamiltonian [[A, -B R^-1 B^T], [-Q, -A^T]] (ordered real Schur form; Laub 1979), which is
    not how scipy's solver (a balanced generalized Schur form of the extended pencil) gets it."""
    n = A.shape[0]
    Hm = np.block([[A, -B @ np.linalg.solve(R, B.T)], [-Q, -A.T]])
    _, Z, stable = scipy.linalg.schur(Hm, sort="lhp")
    assert stable == n
    return np.linalg.solve(Z[:n, :n].T, Z[n:, :n].T).T          # U21 U11^-1


def test_lqr_solves_the_care_and_stabilizes():
    rng = np.random.default_rng(11)
    cases = [_random_pair(rng, nx, nu) for nx, nu in ((1, 1), (2, 1), (4, 2), (6, 3), (9, 2))]
    cartpole = load_system("cartpole.yaml")                 # upright: unstable, continuous [q, dq]
    A_up, B_up = cartpole.linearize(np.zeros(2), np.zeros(2), np.zeros(1))
    cases.append((A_up, B_up, np.diag([10.0, 10.0, 1.0, 1.0]), np.array([[0.1]])))
    for A, B, Q, R in cases:
        K, P = lqr(A, B, Q, R)
        nx, nu = B.shape
        assert K.shape == (nu, nx) and P.shape == (nx, nx)
        residual = A.T @ P + P @ A - P @ B @ np.linalg.solve(R, B.T) @ P + Q
        scale = np.abs(A.T @ P).max() + np.abs(Q).max()
        assert np.abs(residual).max() <= 1e-10 * scale
        assert np.array_equal(P, P.T) and np.linalg.eigvalsh(P).min() > 0.0
        assert np.linalg.eigvals(A - B @ K).real.max() < 0.0
        np.testing.assert_allclose(K, np.linalg.solve(R, B.T @ P), rtol=1e-12, atol=1e-12)
        reference = _care_by_schur(A, B, Q, R)
        np.testing.assert_allclose(P, reference, rtol=1e-8, atol=1e-10 * np.abs(reference).max())
        np.testing.assert_allclose(P, scipy.linalg.solve_continuous_are(A, B, Q, R), rtol=1e-12,
                                   atol=1e-12 * np.abs(P).max())


def test_lqr_is_the_limit_of_dlqr_as_dt_goes_to_zero():
    """The Euler discretization A_d = I + A dt, B_d = B dt with weights Q dt, R dt: dlqr's gain
    and Riccati matrix tend to lqr's, the error falling as dt."""
    rng = np.random.default_rng(3)
    A, B, Q, R = _random_pair(rng, 4, 2)
    K, P = lqr(A, B, Q, R)
    errors = []
    for dt in (1e-2, 1e-3, 1e-4):
        K_d, P_d = dlqr(np.eye(4) + A * dt, B * dt, Q * dt, R * dt)
        errors.append((np.abs(K_d - K).max() / np.abs(K).max(), np.abs(P_d - P).max() / np.abs(P).max()))
    for (k0, p0), (k1, p1) in itertools.pairwise(errors):
        assert 5.0 < k0 / k1 < 20.0 and 5.0 < p0 / p1 < 20.0, errors     # first order in dt
    assert max(errors[-1]) < 1e-3, errors


def test_lqr_validates_and_reports_unstabilizable_pairs():
    with pytest.raises(ValueError, match=r"B must have shape \(2, nu\)"):
        lqr(np.eye(2), np.ones((3, 1)), np.eye(2), np.eye(1))
    with pytest.raises(ValueError, match="R"):
        lqr(np.eye(2), np.ones((2, 1)), np.eye(2), -np.eye(1))
    with pytest.raises(ValueError, match="Q"):
        lqr(np.eye(2), np.ones((2, 1)), np.ones((2, 3)), np.eye(1))
    # the unstable mode 2.0 is not driven by B
    with pytest.raises(np.linalg.LinAlgError, match="stabiliz"):
        lqr(np.diag([2.0, -1.0]), np.array([[0.0], [1.0]]), np.eye(2), np.eye(1))
    # a stable undriven mode is fine (stabilizable), and so is Q = 0 on a stable system (K = 0)
    K, _ = lqr(np.diag([-2.0, 1.0]), np.array([[0.0], [1.0]]), np.eye(2), np.eye(1))
    assert np.linalg.eigvals(np.diag([-2.0, 1.0]) - np.array([[0.0], [1.0]]) @ K).real.max() < 0.0
    K, P = lqr(-np.eye(2), np.ones((2, 1)), np.zeros((2, 2)), np.eye(1))
    assert np.abs(K).max() < 1e-12 and np.abs(P).max() < 1e-12


# ========================================================================= controllability
def test_controllability_of_single_pairs():
    dt = 0.1
    A = np.array([[1.0, dt], [0.0, 1.0]])
    B = np.array([[0.5 * dt ** 2], [dt]])
    c = controllability(A, B)
    assert c.controllable and c.rank == 2
    np.testing.assert_allclose(c.matrix, np.hstack([B, A @ B]))
    np.testing.assert_allclose(c.smallest_singular_value,
                               np.linalg.svd(np.hstack([B, A @ B]), compute_uv=False)[-1])
    assert c.smallest_singular_value > 1e-3
    c = controllability(np.diag([0.5, 2.0, 1.0]), np.array([[1.0], [0.0], [1.0]]))
    assert not c.controllable and c.rank == 2        # the modes 0.5 and 1.0 are driven, 2.0 is not
    assert c.smallest_singular_value < 1e-12


def test_reachability_gramian_over_a_horizon():
    rng = np.random.default_rng(5)
    N, nx, nu = 6, 3, 2
    A, B = random_stack(rng, N, nx, nu)
    W = np.zeros((nx, nx))
    for k in range(N):
        Phi = np.eye(nx)
        for j in range(k + 1, N):
            Phi = A[j] @ Phi
        W += Phi @ B[k] @ B[k].T @ Phi.T
    c = controllability(A, B)
    np.testing.assert_allclose(c.matrix, W, rtol=1e-12, atol=1e-12)
    assert c.controllable and c.rank == nx
    np.testing.assert_allclose(c.smallest_singular_value, np.linalg.eigvalsh(W)[0], rtol=1e-9)

    # each B_k alone reaches one axis; alternating over two steps reaches the plane
    A2 = np.repeat(np.eye(2)[None], 2, 0)
    B2 = np.array([[[1.0], [0.0]], [[0.0], [1.0]]])
    assert controllability(A2, B2).controllable
    assert controllability(A2[:1], B2[:1]).rank == 1
    assert not controllability(A2[0], B2[0]).controllable
    # a mode the inputs never touch stays unreachable over any horizon
    A3 = np.repeat(np.diag([0.9, 1.1])[None], 10, 0)
    B3 = np.repeat(np.array([[1.0], [0.0]])[None], 10, 0)
    c3 = controllability(A3, B3)
    assert c3.rank == 1 and not c3.controllable and c3.smallest_singular_value == 0.0


def test_controllability_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"B must have shape \(2, nu\)"):
        controllability(np.eye(2), np.ones((3, 1)))
    with pytest.raises(ValueError, match=r"A must have shape \(nx, nx\) or \(N, nx, nx\)"):
        controllability(np.ones(3), np.ones((3, 1)))


# ============================================================================== test system
def test_pendulum_derivatives_match_central_differences():
    system = RK4Pendulum()
    rng = np.random.default_rng(6)
    for _ in range(5):
        x, u = rng.normal(size=2) * 2, rng.normal(size=1) * 3
        A, B, H = system.linearize2(x, u)
        z = np.concatenate([x, u])
        def step(z):
            return system.step(z[:2], z[2:])

        def jac(z):
            return np.hstack(system.linearize(z[:2], z[2:]))

        eps = 1e-6
        fd_J = np.column_stack([(step(z + eps * e) - step(z - eps * e)) / (2 * eps)
                                for e in np.eye(3)])
        np.testing.assert_allclose(np.hstack([A, B]), fd_J, rtol=0, atol=1e-8)
        eps = 1e-5
        fd_H = np.stack([(jac(z + eps * e) - jac(z - eps * e)) / (2 * eps)
                         for e in np.eye(3)], axis=2)
        np.testing.assert_allclose(H, fd_H, rtol=0, atol=1e-8)
        np.testing.assert_allclose(H, np.swapaxes(H, 1, 2), rtol=0, atol=1e-15)
        assert np.abs(H[:, :2, 2]).max() > 1e-6    # state-input cross terms are exercised


# ============================================================================== simulation
def test_simulation_open_and_closed_loop_agree_for_zero_gain():
    system = RK4Pendulum()
    N = 20
    u = np.sin(np.arange(N))[:, None]
    x_open = simulate_open_loop(system.step, [0.1, 0.0], u)
    x_ref = np.zeros((N + 1, 2)) + 7.0                     # ignored when K = 0
    x_cl, u_cl = simulate_closed_loop(system.step, [0.1, 0.0], x_ref, u, np.zeros((N, 1, 2)))
    assert x_open.shape == (N + 1, 2)
    np.testing.assert_array_equal(x_cl, x_open)
    np.testing.assert_array_equal(u_cl, u)
    with pytest.raises(ValueError, match=r"u_ref must have shape \(20, 1\)"):
        simulate_closed_loop(system.step, [0.1, 0.0], x_ref, u[:-1], np.zeros((N, 1, 2)))
    with pytest.raises(ValueError, match=r"K must have shape \(N, nu, 2\)"):
        simulate_closed_loop(system.step, [0.1, 0.0], x_ref, u, np.zeros((N, 1, 3)))
    with pytest.raises(ValueError, match=r"step\(x, u\) must return shape \(2,\)"):
        simulate_open_loop(lambda x, u: x[:1], [0.1, 0.0], u)


# ================================================================ trajectory optimization
def test_cost_gradient_matches_finite_differences():
    problem = swing_up_problem(N=25)
    problem["Q"] = np.diag([10.0, 1.0])
    rng = np.random.default_rng(7)
    u = rng.normal(size=(25, 1)) * 2
    args = {k: problem[k] for k in ("system", "x0", "x_ref", "u_ref", "Q", "R", "Q_N")}
    J, g = cost_and_gradient(u=u, **args)

    def cost(u):
        x = simulate_open_loop(problem["system"].step, problem["x0"], u)
        return trajectory_cost(x, u, problem["x_ref"], problem["u_ref"], problem["Q"], problem["R"],
                               problem["Q_N"])

    assert J == pytest.approx(cost(u), rel=1e-14)
    eps = 1e-5
    fd = np.zeros_like(u)
    for k in range(u.shape[0]):
        du = np.zeros_like(u)
        du[k, 0] = eps
        fd[k, 0] = (cost(u + du) - cost(u - du)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
    result = optimize_trajectory(**args, u_init=u, max_iterations=0)
    assert result.history[0]["gradient_norm"] == pytest.approx(np.linalg.norm(fd), rel=1e-6)
    assert not result.converged and result.iterations == 0


@pytest.fixture(scope="module")
def swing_up_results():
    problem = swing_up_problem(N=60)
    entries = []
    # stop="gradient": this N = 60 swing-up is well conditioned enough for ‖∂J/∂u‖ < 1e-6
    second = optimize_trajectory(**problem, method="second_order", tol=1e-6, max_iterations=200,
                                 stop="gradient", callback=entries.append)
    first = optimize_trajectory(**problem, method="first_order", tol=1e-6, max_iterations=2000,
                                stop="gradient")
    return problem, second, first, entries


def test_both_methods_converge_to_the_same_trajectory(swing_up_results):
    problem, second, first, entries = swing_up_results
    for result in (second, first):
        assert result.converged, result.message
        assert result.gradient_norm < 1e-6
        assert result.x.shape == (61, 2) and result.u.shape == (60, 1)
        np.testing.assert_allclose(result.x, simulate_open_loop(problem["system"].step,
                                                                problem["x0"], result.u))
        costs = [h["cost"] for h in result.history]
        assert all(b <= a + 1e-9 * abs(a) for a, b in itertools.pairwise(costs))
        assert [h["iteration"] for h in result.history] == list(range(result.iterations + 1))
        assert set(result.history[0]) >= {"iteration", "cost", "step", "gradient_norm"}
    np.testing.assert_allclose(second.u, first.u, rtol=0, atol=1e-5)
    np.testing.assert_allclose(second.x, first.x, rtol=0, atol=1e-5)
    assert second.cost == pytest.approx(first.cost, rel=1e-12)
    assert second.x[-1, 0] == pytest.approx(np.pi, abs=0.1)      # it actually swings up
    assert second.history[0]["cost"] > 5 * second.cost
    assert second.iterations < first.iterations
    assert entries == second.history


def _final_phase_pairs(history, count=3):
    """The last ``count`` consecutive gradient norms (g_i, g_i+1)."""
    g = [h["gradient_norm"] for h in history]
    return list(itertools.pairwise(g))[-count:]


def test_second_order_method_converges_quadratically(swing_up_results):
    """Quadratic convergence: g_(i+1) <= C g_i² in the final phase (C = 1e-3 here)."""
    _, second, first, _ = swing_up_results
    pairs = _final_phase_pairs(second.history)
    assert all(b <= 1e-3 * a * a for a, b in pairs), pairs
    assert pairs[-1][1] < 1e-7
    assert [h["model"] for h in second.history[-len(pairs):]] == ["newton"] * len(pairs)
    # the Gauss-Newton method converges only linearly: it fails the same test
    assert not all(b <= 1e-3 * a * a for a, b in _final_phase_pairs(first.history))


def _linearized_swing_up(system, problem):
    """The swing-up problem on ``system`` at a fixed input guess, linearized to second order:
    ``(pb, x, u, A, B, H, wx, wu, w_N, lam, g)`` for the optimizer's direction functions."""
    pb = optimal.TrackingProblem(system, *(problem[k] for k in ("x0", "x_ref", "u_ref", "Q", "R", "Q_N")))
    u = 2.0 * np.sin(np.linspace(0, 3, 30))[:, None]
    x = pb.rollout(u)
    A, B, H = linearize_trajectory(system, x, u, second_order=True)
    _, _, wx, wu, w_N = tracking_costs.weighted_errors(pb, x, u)
    lam, g = tracking_costs.costate_and_gradient(A, B, wx, wu, w_N)
    return pb, x, u, A, B, _contract(H), wx, wu, w_N, lam, g


def _contract(H):
    """The optimizer's ``curvature(λ)`` from full tensors (independent of the contracted path)."""
    return lambda lam: np.einsum("ki,kiab->kab", lam[1:], H)


@pytest.mark.parametrize("projection", PROJECTIONS)
def test_direction_slope_and_newton_curvature_match_the_trial_path(projection):
    """For every method, ``slope`` is the derivative at γ = 0 of J along the projected trial
    path; the Newton model's curvature along the tangent (z, v) is the second derivative of J
    along the path it models (the projected path for ``lqr``: closed-loop costate; the
    open-loop path u + γv for ``direction``: open-loop costate). Central differences."""
    problem = swing_up_problem(N=30)
    pb, x, u, A, B, H, wx, wu, w_N, lam, g = _linearized_swing_up(problem["system"], problem)
    J = lambda xu: tracking_costs.tracking_cost(pb, *xu)  # noqa: E731
    for method in METHODS:
        d = directions.descent_direction(pb, method, projection, A, B, H, lam, g, wx, wu, w_N)
        h = 1e-5
        fd = (J(line_search.projected_rollout(pb, x, u, d, h))
              - J(line_search.projected_rollout(pb, x, u, d, -h))) / (2 * h)
        assert d.slope < 0
        assert fd == pytest.approx(d.slope, rel=1e-6), (method, d.model)
    z, v = directions.linear_response(A, B, d.K, d.kff)      # tangent of the last direction
    if projection == "lqr":
        lam_model = directions.closed_loop_costate(A, B, d.K, wx, wu, w_N)
        path = lambda gam: line_search.projected_rollout(pb, x, u, d, gam)  # noqa: E731
    else:
        lam_model = lam
        path = lambda gam: (pb.rollout(u + gam * v), u + gam * v)  # noqa: E731
    Wxx, Wuu, Wux = directions.newton_weights(pb, H(lam_model), 2)
    curvature = (np.einsum("ki,kij,kj->", z[:-1], Wxx, z[:-1])
                 + np.einsum("ki,kij,kj->", v, Wuu, v)
                 + 2 * np.einsum("ki,kij,kj->", v, Wux, z[:-1]) + z[-1] @ pb.Q_N @ z[-1])
    h = 1e-3 / max(np.abs(z).max(), np.abs(v).max())       # a step of 1e-3 in (x, u)
    fd2 = (J(path(h)) - 2 * J(path(0.0)) + J(path(-h))) / h ** 2
    assert fd2 == pytest.approx(curvature, rel=1e-5)
    # and the other costate does not fit this path (the test can tell the two apart)
    other = lam if projection == "lqr" else directions.closed_loop_costate(
        A, B, directions.projection_gains(A, B), wx, wu, w_N)
    Wxx2, _, _ = directions.newton_weights(pb, H(other), 2)
    wrong = curvature + np.einsum("ki,kij,kj->", z[:-1], Wxx2 - Wxx, z[:-1])
    assert fd2 != pytest.approx(wrong, rel=1e-3)


def test_stop_rules_and_projections_reach_the_same_optimum(swing_up_results):
    problem, second, _, _ = swing_up_results
    for projection in PROJECTIONS:
        r = optimize_trajectory(**problem, method="second_order", projection=projection,
                                tol=1e-10, max_iterations=200)
        assert r.converged and "slope" in r.message
        assert abs(r.history[-1]["slope"]) < 1e-10
        assert r.cost == pytest.approx(second.cost, rel=1e-12)
        np.testing.assert_allclose(r.u, second.u, atol=1e-6)
    with pytest.raises(ValueError, match="stop must be one of"):
        optimize_trajectory(**problem, stop="cost")
    with pytest.raises(ValueError, match="projection must be one of"):
        optimize_trajectory(**problem, projection="none")


def test_tvlqr_about_the_optimum_stabilizes_a_perturbed_start(swing_up_results):
    problem, second, _, _ = swing_up_results
    system, x_d, u_d = problem["system"], second.x, second.u
    A, B = linearize_trajectory(system, x_d, u_d)
    K, _ = tvlqr(A, B, np.diag([100.0, 1.0]), np.eye(1), np.diag([100.0, 1.0]))
    x0 = np.array([1.0, 1.0])
    x_cl, u_cl = simulate_closed_loop(system.step, x0, x_d, u_d, K)
    x_ol = simulate_open_loop(system.step, x0, u_d)
    err_cl = np.linalg.norm(x_cl - x_d, axis=1)
    err_ol = np.linalg.norm(x_ol - x_d, axis=1)
    assert err_cl[-1] < 1e-3 * err_cl[0]
    assert np.all(err_cl[40:] < 1e-2)
    assert err_ol[-1] > 0.5
    np.testing.assert_allclose(u_cl[0], u_d[0] - K[0] @ (x0 - x_d[0]))


def _random_linear_problem(rng, nx, nu, spectral_radius):
    """A random LinearSystem whose A has the given spectral radius, and random SPD Q, R, Q_N."""
    A = rng.normal(size=(nx, nx))
    A *= spectral_radius / max(abs(np.linalg.eigvals(A)))
    system = LinearSystem(A, rng.normal(size=(nx, nu)))
    return system, random_spd(rng, nx), random_spd(rng, nu), random_spd(rng, nx)


def test_linear_quadratic_problem_is_solved_in_one_step_and_matches_tvlqr():
    rng = np.random.default_rng(8)
    nx, nu, N = 3, 2, 15
    system, Q, R, Q_N = _random_linear_problem(rng, nx, nu, 1.1)
    A = system.A
    x0 = rng.normal(size=nx)
    K, _ = tvlqr(np.repeat(A[None], N, 0), np.repeat(system.B[None], N, 0), Q, R, Q_N)
    zeros_x, zeros_u = np.zeros((N + 1, nx)), np.zeros((N, nu))
    x_lqr, u_lqr = simulate_closed_loop(system.step, x0, zeros_x, zeros_u, K)
    for method in ("second_order", "first_order"):
        result = optimize_trajectory(system, x0, zeros_x, zeros_u, Q, R, Q_N, method=method,
                                     tol=1e-9)
        assert result.converged and result.iterations == 1, result.history
        assert result.history[1]["step"] == 1.0
        np.testing.assert_allclose(result.u, u_lqr, rtol=0, atol=1e-10)


def test_steepest_descent_reaches_the_lqr_solution():
    """Identity-weight model on a cost with other weights: many iterations, same LQR optimum."""
    rng = np.random.default_rng(9)
    nx, nu, N = 3, 2, 8
    A = rng.normal(size=(nx, nx))
    A *= 0.8 / max(abs(np.linalg.eigvals(A)))
    system = LinearSystem(A, rng.normal(size=(nx, nu)))
    Q, R = np.diag([10.0, 1.0, 0.1]), 5.0 * np.eye(nu)
    x0, zeros_x, zeros_u = rng.normal(size=nx), np.zeros((N + 1, nx)), np.zeros((N, nu))
    K, _ = tvlqr(np.repeat(A[None], N, 0), np.repeat(system.B[None], N, 0), Q, R)
    _, u_lqr = simulate_closed_loop(system.step, x0, zeros_x, zeros_u, K)
    result = optimize_trajectory(system, x0, zeros_x, zeros_u, Q, R, method="steepest_descent",
                                 tol=1e-14, max_iterations=2000)
    assert result.converged and result.iterations > 5, result.message
    assert {h["model"] for h in result.history[1:]} == {"identity"}
    np.testing.assert_allclose(result.u, u_lqr, rtol=0, atol=1e-6)


def test_warm_up_iterations_use_the_first_method_and_count(swing_up_results):
    """``first_method_iterations`` iterations of ``first_method`` first (counted in
    ``iterations``), then ``method``; the same optimum. A system without ``linearize2`` may run
    second_order as the method when only the warm-up runs."""
    problem, second, _, _ = swing_up_results
    r = optimize_trajectory(**problem, method="second_order", first_method="steepest_descent",
                            first_method_iterations=3, tol=1e-10, max_iterations=200)
    assert r.converged, r.message
    models = [h["model"] for h in r.history]
    assert models[1:4] == ["identity"] * 3 and "identity" not in models[4:]
    assert models[-1] == "newton" and r.iterations == len(models) - 1
    assert r.cost == pytest.approx(second.cost, rel=1e-12)
    np.testing.assert_allclose(r.u, second.u, atol=1e-6)
    only = optimize_trajectory(**dict(problem, system=_FirstOrderOnly()), method="second_order",
                               first_method="first_order", first_method_iterations=5,
                               max_iterations=5)
    assert only.converged and only.iterations == 0
    with pytest.raises(TypeError, match="linearize2"):
        optimize_trajectory(**dict(problem, system=_FirstOrderOnly()), method="first_order",
                            first_method="second_order", first_method_iterations=1)


def test_projection_weights_set_the_projection_gains(swing_up_results):
    """``Qproj``, ``Rproj`` are the weights of the projection's TV-LQR (running and terminal
    ``Qproj``); the slope stays the derivative along the projected path; same optimum."""
    problem, second, _, _ = swing_up_results
    N = 60
    Qproj, Rproj = np.diag([10.0, 0.5]), np.array([[3.0]])
    pb = optimal.TrackingProblem(*(problem[k] for k in ("system", "x0", "x_ref", "u_ref", "Q", "R",
                                                  "Q_N")))
    u = 2.0 * np.sin(np.linspace(0, 3, N))[:, None]
    x = pb.rollout(u)
    A, B = linearize_trajectory(problem["system"], x, u)
    _, _, wx, wu, w_N = tracking_costs.weighted_errors(pb, x, u)
    lam, g = tracking_costs.costate_and_gradient(A, B, wx, wu, w_N)
    d = directions.descent_direction(pb, "first_order", "lqr", A, B, None, lam, g, wx, wu, w_N,
                                   Qproj=Qproj[None], Rproj=Rproj[None])
    np.testing.assert_allclose(d.K, tvlqr(A, B, Qproj, Rproj, Qproj)[0], rtol=1e-12)
    assert not np.allclose(d.K, directions.projection_gains(A, B))
    h = 1e-5
    J = lambda xu: tracking_costs.tracking_cost(pb, *xu)  # noqa: E731
    fd = (J(line_search.projected_rollout(pb, x, u, d, h))
          - J(line_search.projected_rollout(pb, x, u, d, -h))) / (2 * h)
    assert fd == pytest.approx(d.slope, rel=1e-6)
    stack = np.repeat(Qproj[None], N + 1, axis=0)
    stack[-1] = np.eye(2)
    for Qp in (Qproj, stack):
        r = optimize_trajectory(**problem, Qproj=Qp, Rproj=Rproj, tol=1e-10, max_iterations=200)
        assert r.converged and r.cost == pytest.approx(second.cost, rel=1e-12)


class _StrongCurvature(RK4Pendulum):
    """RK4Pendulum with its second derivatives scaled: a Newton model that is not convex."""

    def linearize2(self, x, u):
        A, B, H = super().linearize2(x, u)
        return A, B, -200.0 * H


def test_newton_model_that_is_not_convex_falls_back_or_is_reversed(monkeypatch):
    """Where the Newton model is not convex its direction (LU Riccati pass, as trep) may ascend:
    trep's rule falls back to Gauss-Newton; with ``negative_curvature`` the Gauss-Newton
    direction comes with the Newton direction (reversed if it ascended) as an alternative, a
    descent direction whose slope is the derivative along its projected path."""
    problem, system = swing_up_problem(N=30), _StrongCurvature(dt=0.1)
    pb, x, u, A, B, H, wx, wu, w_N, lam, g = _linearized_swing_up(system, problem)
    args = (pb, "second_order", "lqr", A, B, H, lam, g, wx, wu, w_N)
    Kp = directions.projection_gains(A, B)
    lam_cl = directions.closed_loop_costate(A, B, Kp, wx, wu, w_N)
    raw = directions.model_direction(pb, "second_order", A, B, H, lam_cl, g, wx, wu, w_N, Kp)
    assert raw.model == "newton_indefinite"
    trep = directions.descent_direction(*args, negative_curvature=False)
    assert trep.alternative is None and trep.slope < 0
    assert trep.model == ("newton_indefinite" if raw.slope < 0 else "gauss_newton")
    d = directions.descent_direction(*args, negative_curvature=True)
    assert d.model == "gauss_newton" and d.slope < 0
    alt = d.alternative
    assert alt.model == ("newton_indefinite" if raw.slope < 0 else "newton_reversed")
    assert alt.slope == pytest.approx(-abs(raw.slope), rel=1e-12)
    J = lambda xu: tracking_costs.tracking_cost(pb, *xu)  # noqa: E731
    h = 1e-6
    fd = (J(line_search.projected_rollout(pb, x, u, alt, h))
          - J(line_search.projected_rollout(pb, x, u, alt, -h))) / (2 * h)
    assert fd == pytest.approx(alt.slope, rel=1e-5)
    # a second candidate is searched only while its model can beat the first one's decrease
    J0 = tracking_costs.tracking_cost(pb, x, u)
    full = line_search.line_search(pb, x, u, J0, alt, 1e-4, 0.5, 50)
    assert full is not None and full[2] < J0
    gamma, decrease = full[3], J0 - full[2]
    bar = 0.99 * min(decrease, abs(alt.slope) * (gamma + 0.5 * gamma ** 2))
    assert line_search.line_search(pb, x, u, J0, alt, 1e-4, 0.5, 50, beat=bar)[3] == gamma
    rollouts = []
    real = line_search.projected_rollout
    with monkeypatch.context() as m:
        m.setattr(line_search, "projected_rollout", lambda *a: rollouts.append(a) or real(*a))
        assert line_search.line_search(pb, x, u, J0, alt, 1e-4, 0.5, 50, beat=1.51 * abs(alt.slope)) is None
    assert not rollouts                 # (not even γ = 1: its model decrease is 1.5 |slope|)
    r = optimize_trajectory(system, **{k: problem[k] for k in ("x0", "x_ref", "u_ref", "Q", "R",
                                                               "Q_N")},
                            u_init=u, tol=1e-6, max_iterations=300)
    assert r.converged, r.message
    costs = [e["cost"] for e in r.history]
    assert all(b <= a for a, b in itertools.pairwise(costs))


def test_optimize_ic_solves_a_linear_problem_over_initial_state_and_inputs():
    """``optimize_ic``: the initial state is optimized too (trep's z_0 = −P_0⁻¹p_0); on a linear
    system one iteration reaches the least-squares optimum over (x_0, u), for every method that
    is exact on linear systems; the slope is the derivative along the projected path."""
    rng = np.random.default_rng(11)
    nx, nu, N = 3, 2, 12
    system, Q, R, Q_N = _random_linear_problem(rng, nx, nu, 1.05)
    A = system.A
    x_ref, u_ref = rng.normal(size=(N + 1, nx)), rng.normal(size=(N, nu))
    # x = M w with w = [x_0, u_0 .. u_{N-1}]
    M = np.zeros((N + 1, nx, nx + N * nu))
    M[0, :, :nx] = np.eye(nx)
    for k in range(N):
        M[k + 1] = A @ M[k]
        M[k + 1, :, nx + k * nu:nx + (k + 1) * nu] += system.B
    Su = np.zeros((N, nu, nx + N * nu))
    for k in range(N):
        Su[k, :, nx + k * nu:nx + (k + 1) * nu] = np.eye(nu)
    H = sum(M[k].T @ Q @ M[k] + Su[k].T @ R @ Su[k] for k in range(N)) + M[N].T @ Q_N @ M[N]
    b = sum(M[k].T @ Q @ x_ref[k] + Su[k].T @ R @ u_ref[k] for k in range(N)) \
        + M[N].T @ Q_N @ x_ref[N]
    w = np.linalg.solve(H, b)
    for method in ("second_order", "first_order"):
        r = optimize_trajectory(system, np.zeros(nx), x_ref, u_ref, Q, R, Q_N, method=method,
                                tol=1e-9, optimize_ic=True)
        assert r.converged and r.iterations == 1, r.history
        np.testing.assert_allclose(r.x[0], w[:nx], atol=1e-9)
        np.testing.assert_allclose(r.u.ravel(), w[nx:], atol=1e-9)
    fixed = optimize_trajectory(system, np.zeros(nx), x_ref, u_ref, Q, R, Q_N, tol=1e-9)
    assert fixed.x[0] == pytest.approx(np.zeros(nx)) and fixed.cost > r.cost
    # the slope with a free initial state, on a nonlinear system
    problem = swing_up_problem(N=30)
    pb = optimal.TrackingProblem(*(problem[k] for k in ("system", "x0", "x_ref", "u_ref", "Q", "R",
                                                  "Q_N")))
    u = 2.0 * np.sin(np.linspace(0, 3, 30))[:, None]
    x = pb.rollout(u)
    A_, B_, H_ = linearize_trajectory(problem["system"], x, u, second_order=True)
    _, _, wx, wu, w_N = tracking_costs.weighted_errors(pb, x, u)
    lam, g = tracking_costs.costate_and_gradient(A_, B_, wx, wu, w_N)
    J = lambda xu: tracking_costs.tracking_cost(pb, *xu)  # noqa: E731
    for method in METHODS:
        d = directions.descent_direction(pb, method, "lqr", A_, B_, _contract(H_), lam, g, wx, wu, w_N,
                                       optimize_ic=True)
        assert d.dx0 is not None and np.any(d.dx0 != 0) and d.slope < 0
        h = 1e-6
        fd = (J(line_search.projected_rollout(pb, x, u, d, h))
              - J(line_search.projected_rollout(pb, x, u, d, -h))) / (2 * h)
        assert fd == pytest.approx(d.slope, rel=1e-5), method
    r = optimize_trajectory(**problem, optimize_ic=True, stop="gradient", tol=1e-6,
                            max_iterations=200)
    assert r.converged and r.gradient_norm < 1e-6, r.message
    np.testing.assert_allclose(r.x, simulate_open_loop(problem["system"].step, r.x[0], r.u))


def test_optimizer_rejects_bad_arguments():
    problem = swing_up_problem(N=10)
    with pytest.raises(ValueError, match="method must be one of"):
        optimize_trajectory(**problem, method="newton")
    bad = dict(problem, x_ref=problem["x_ref"][:-1])
    with pytest.raises(ValueError, match=r"x_ref must have shape \(11, 2\)"):
        optimize_trajectory(**bad)
    with pytest.raises(ValueError, match=r"u_init must have shape \(10, 1\)"):
        optimize_trajectory(**problem, u_init=np.zeros((9, 1)))
    with pytest.raises(TypeError, match="linearize2"):
        optimize_trajectory(**dict(problem, system=_FirstOrderOnly()))
    result = optimize_trajectory(**dict(problem, system=_FirstOrderOnly()), method="first_order")
    assert result.converged and result.iterations == 0       # u_ref is optimal for x' = x
    with pytest.raises(ValueError, match="first_method must be one of .* got 'quasi'"):
        optimize_trajectory(**problem, first_method="quasi")
    for bad_count in (-1, 2.5, True):
        with pytest.raises(ValueError, match=f"first_method_iterations must be an integer >= 0, "
                                             f"got {bad_count}"):
            optimize_trajectory(**problem, first_method_iterations=bad_count)
    with pytest.raises(ValueError, match="max_backtracks must be an integer >= 0, got -1"):
        optimize_trajectory(**problem, max_backtracks=-1)
    with pytest.raises(ValueError, match=r"Qproj must have shape \(2, 2\) or \(11, 2, 2\)"):
        optimize_trajectory(**problem, Qproj=np.eye(3))
    with pytest.raises(ValueError, match="Rproj"):
        optimize_trajectory(**problem, Rproj=np.zeros((1, 1)))
    with pytest.raises(ValueError, match="Qproj and Rproj apply to projection='lqr'"):
        optimize_trajectory(**problem, projection="direction", Qproj=np.eye(2))
    with pytest.raises(ValueError, match="optimize_ic must be True or False, got 'yes'"):
        optimize_trajectory(**problem, optimize_ic="yes")
    constrained = _ConstrainedPendulum()
    with pytest.raises(ValueError, match="optimize_ic=True needs an unconstrained system"):
        optimize_trajectory(**dict(problem, system=constrained), optimize_ic=True)
    optimize_trajectory(**dict(problem, system=constrained), max_iterations=1)   # (only optimize_ic)


class _ConstrainedPendulum(RK4Pendulum):
    """A system that says not every state is admissible (``DiscreteSystem.constrained``)."""
    constrained = True


def test_optimizer_time_limit_stops_with_a_feasible_iterate():
    problem = swing_up_problem(N=60)
    optimize_trajectory(**problem, method="first_order", max_iterations=2)    # compiled, warm
    seen = []

    def slow(entry):            # every iteration takes at least 50 ms
        seen.append(entry["iteration"])
        time.sleep(0.05)

    result = optimize_trajectory(**problem, method="first_order", tol=1e-300, max_iterations=10_000,
                                 callback=slow, time_limit=0.2)
    assert not result.converged and "time_limit=0.2 s reached" in result.message
    assert 1 <= result.iterations <= 5 and seen[-1] == result.iterations
    np.testing.assert_allclose(result.x, simulate_open_loop(problem["system"].step, problem["x0"],
                                                            result.u))
    assert result.cost <= result.history[0]["cost"]
    with pytest.raises(ValueError, match="time_limit"):
        optimize_trajectory(**problem, time_limit=-1.0)


class _FirstOrderOnly:
    nx, nu = 2, 1

    def step(self, x, u):
        return x

    def linearize(self, x, u):
        return np.eye(2), np.zeros((2, 1))


# ============================================================ the problem object, one linearize_trajectory
def test_tracking_problem_solved_with_options_is_optimize_trajectory():
    """``TrackingProblem(...).solve(OptimizerOptions(...))`` is the call ``optimize_trajectory``
    makes: the same iterates, bit for bit; the problem's cost and gradient are the functions'."""
    problem = swing_up_problem(N=25)
    options = core.OptimizerOptions(method="second_order", max_iterations=6, first_method_iterations=2)
    pb = core.TrackingProblem(*(problem[k] for k in ("system", "x0", "x_ref", "u_ref", "Q", "R", "Q_N")))
    solved = pb.solve(options)
    called = optimize_trajectory(**problem, method="second_order", max_iterations=6,
                                 first_method_iterations=2)
    assert solved.iterations == called.iterations == 6
    np.testing.assert_array_equal(solved.x, called.x)
    np.testing.assert_array_equal(solved.u, called.u)
    assert solved.history == called.history
    assert [h["model"] for h in solved.history[1:3]] == ["gauss_newton"] * 2
    assert pb.cost(solved.x, solved.u) == solved.cost
    np.testing.assert_array_equal(pb.rollout(solved.u), solved.x)
    J, g = pb.cost_and_gradient(solved.u)
    J2, g2 = cost_and_gradient(problem["system"], problem["x0"], solved.u, problem["x_ref"],
                               problem["u_ref"], problem["Q"], problem["R"], problem["Q_N"])
    assert J == J2 == solved.cost
    np.testing.assert_array_equal(g, g2)
    assert np.sqrt(np.sum(g * g)) == pytest.approx(solved.gradient_norm, rel=1e-12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.method = "first_order"
    with pytest.raises(ValueError, match="stop must be one of .* got 'never'"):
        core.OptimizerOptions(stop="never")
    with pytest.raises(ValueError, match=r"x_ref must have shape \(26, 2\)"):
        core.TrackingProblem(problem["system"], problem["x0"], problem["x_ref"][:-1], problem["u_ref"],
                             problem["Q"], problem["R"])


class _OwnStacks(RK4Pendulum):
    """A system with its own ``linearize_trajectory``: the function hands it the stacks."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def linearize_trajectory(self, X, U, second_order=False, costates=None, *, threads=None,
                             progress=None):
        self.calls.append((X.shape, U.shape, second_order, threads))
        return linearize_trajectory(RK4Pendulum(), X, U, second_order, costates)


def test_one_linearize_trajectory_for_every_system():
    """``core.linearize_trajectory`` is the one function: a MidpointVI's stacks come from its
    compiled method (the same signature, threads and progress), other systems are linearized
    knot by knot (progress reported after each), a system's own stacks are used when it has
    them, and ``x`` with N rows is linearized knot by knot on any system."""
    vi = core.MidpointVI(load_system("cartpole.yaml"), 0.01)
    assert vi.constrained is False and core.MidpointVI(load_system("marionette.yaml"), 0.01).constrained
    rng = np.random.default_rng(3)
    N = 12
    U = 0.5 * rng.standard_normal((N, vi.nu))
    X = simulate_open_loop(vi.step, vi.discrete_state(np.array([0.1, 0.2]), np.array([0.0, -0.3])), U)
    serial = linearize_trajectory(vi, X, U, threads=1)
    for other in (linearize_trajectory(vi, X, U, threads=2), vi.linearize_trajectory(X, U),
                  linearize_trajectory(vi, X, U, progress=lambda done, total: None)):
        for a, b in zip(serial, other, strict=True):
            np.testing.assert_array_equal(a, b)
    knotwise = linearize_trajectory(vi, X[:N], U)              # N rows: vi.linearize per knot
    for a, b in zip(serial, knotwise, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    pendulum = RK4Pendulum()
    reports = []
    x = simulate_open_loop(pendulum.step, np.array([0.3, 0.0]), U[:, :1])
    A, B = linearize_trajectory(pendulum, x, U[:, :1], progress=lambda done, total: reports.append((done, total)))
    assert reports == [(k, N) for k in range(N + 1)]
    np.testing.assert_array_equal(A[4], pendulum.linearize(x[4], U[4, :1])[0])
    with pytest.raises(TypeError, match="progress must be None, True or a callable"):
        linearize_trajectory(pendulum, x, U[:, :1], progress="yes")
    own = _OwnStacks()
    A2, B2, H2 = linearize_trajectory(own, x, U[:, :1], True, threads=3)
    assert own.calls == [((N + 1, 2), (N, 1), True, 3)]
    np.testing.assert_array_equal(A2, A)
    np.testing.assert_array_equal(H2[4], pendulum.linearize2(x[4], U[4, :1])[2])
