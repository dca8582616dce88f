"""Discrete-time LQR, controllability and trajectory optimization for discrete dynamics.

Everything here works on a discrete dynamic system ``x_{k+1} = f(x_k, u_k)`` (for mechnode's
variational integrator the state is ``x = [q, p]``; this module never looks inside ``x``, the state
ordering is whatever the system uses).

Conventions (the same everywhere in this module):

* Horizon: ``k = 0 .. N-1`` for inputs and linearizations, ``k = 0 .. N`` for states.
* Linearizations are stacked: ``A`` has shape ``(N, nx, nx)``, ``B`` has shape ``(N, nx, nu)``,
  with ``A_k = ∂f/∂x (x_k, u_k)`` and ``B_k = ∂f/∂u (x_k, u_k)``.
* Feedback gains have shape ``(N, nu, nx)`` and act as ``u_k = u_ref,k − K_k (x_k − x_ref,k)``.
* Riccati matrices have shape ``(N+1, nx, nx)``; ``P[N]`` is the terminal weight.
* Second-order linearization: ``H`` has shape ``(nx, nz, nz)`` with ``z = [x, u]``, ``nz = nx + nu``
  and ``H[i, a, b] = ∂²x_next_i / ∂z_a ∂z_b`` (symmetric in ``a, b``).
* Weights ``Q`` and ``R`` are a single matrix (used at every step) or a stack with one matrix per
  step; see :func:`tvlqr` for the accepted shapes and how the terminal weight ``Q_N`` is chosen.

Public API: :func:`tvlqr`, :func:`dlqr`, :func:`controllability`, :func:`simulate_open_loop`,
:func:`simulate_closed_loop`, :func:`linearize_trajectory`, :func:`trajectory_cost`,
:func:`cost_and_gradient`, :func:`optimize_trajectory` and the :class:`DiscreteSystem` protocol.
The Riccati recursions, the costate (adjoint) pass, the controllability Gramian and the linear
rollouts are ``@njit`` kernels; the optimizer's orchestration is Python because it calls the
system's ``step``/``linearize`` methods, which are arbitrary Python callables.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np
import scipy.linalg
from numba import njit

from .linalg import cholesky_checked, cholesky_solve

__all__ = [
    "RiccatiError", "Controllability", "DiscreteSystem", "TrajectoryOptimizationResult",
    "tvlqr", "dlqr", "controllability", "simulate_open_loop", "simulate_closed_loop",
    "linearize_trajectory", "trajectory_cost", "cost_and_gradient", "optimize_trajectory",
]

logger = logging.getLogger(__name__)

METHODS = ("second_order", "first_order", "steepest_descent")
STOP_RULES = ("gradient", "slope")
PROJECTIONS = ("direction", "lqr")


class RiccatiError(np.linalg.LinAlgError):
    """``R_k + B_kᵀ P_{k+1} B_k`` is singular or not positive definite at some step ``k``."""

    def __init__(self, step: int, what: str = "R_k + B_kᵀ P_(k+1) B_k"):
        self.step = step
        super().__init__(f"{what} is singular or not positive definite at step k={step}; "
                         f"check that R is positive definite and Q, Q_N are positive semi-definite")


# ================================================================================ njit kernels
@njit(cache=True, nogil=True)
def _lq_riccati(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N, K, kff, P):
    """Backward Riccati pass of the linear-quadratic problem

        min  Σ_k [ wx_kᵀ z_k + wu_kᵀ v_k + ½ z_kᵀ Wxx_k z_k + ½ v_kᵀ Wuu_k v_k
                   + v_kᵀ Wux_k z_k ] + p_Nᵀ z_N + ½ z_Nᵀ P_N z_N
        s.t. z_{k+1} = A_k z_k + B_k v_k.

    Stacks ``Wxx, Wuu, Wux, wx, wu`` have length 1 (same at every step) or N. Fills the optimal
    policy ``v_k = kff_k − K_k z_k`` and the value Hessians ``P`` (symmetrized every step).
    Returns -1 on success, else the step k where ``Wuu_k + B_kᵀ P_{k+1} B_k`` is not
    positive definite (the outputs are then only valid for steps after k).
    """
    N, nx, nu = B.shape
    P[N] = P_N
    p = p_N.copy()
    Lu = np.empty((nu, nu))
    for k in range(N - 1, -1, -1):
        Ak, Bk, Pn = A[k], B[k], P[k + 1]
        PA = Pn @ Ak
        PB = Pn @ Bk
        Quu = Wuu[k if Wuu.shape[0] > 1 else 0] + Bk.T @ PB
        Qux = Wux[k if Wux.shape[0] > 1 else 0] + Bk.T @ PA
        Qxx = Wxx[k if Wxx.shape[0] > 1 else 0] + Ak.T @ PA
        Qu = wu[k if wu.shape[0] > 1 else 0] + Bk.T @ p
        Qx = wx[k if wx.shape[0] > 1 else 0] + Ak.T @ p
        Quu = 0.5 * (Quu + Quu.T)
        if cholesky_checked(Quu, Lu) >= 0:     # not (numerically) positive definite
            return k
        sol = np.empty((nu, nx + 1))
        sol[:, :nx] = Qux
        sol[:, nx] = -Qu
        cholesky_solve(Lu, sol)
        K[k] = sol[:, :nx]
        kff[k] = sol[:, nx]
        Pk = Qxx - Qux.T @ K[k]
        P[k] = 0.5 * (Pk + Pk.T)
        p = Qx + Qux.T @ kff[k]
    return -1


@njit(cache=True, nogil=True)
def _costate_and_gradient(A, B, wx, wu, w_N):
    """Adjoint pass: ``λ_N = w_N``, ``λ_k = wx_k + A_kᵀ λ_{k+1}`` and the reduced gradient
    ``g_k = ∂J/∂u_k = wu_k + B_kᵀ λ_{k+1}`` (with ``wx_k = Q_k δx_k``, ``wu_k = R_k δu_k``)."""
    N, nx, nu = B.shape
    lam = np.empty((N + 1, nx))
    g = np.empty((N, nu))
    lam[N] = w_N
    for k in range(N - 1, -1, -1):
        g[k] = wu[k] + B[k].T @ lam[k + 1]
        lam[k] = wx[k] + A[k].T @ lam[k + 1]
    return lam, g


@njit(cache=True, nogil=True)
def _closed_loop_costate(A, B, K, wx, wu, w_N):
    """Costate of the cost composed with the projection ``u = ū − K(x − x̄)``:
    ``λ_N = w_N``, ``λ_k = wx_k − K_kᵀ wu_k + (A_k − B_k K_k)ᵀ λ_{k+1}``."""
    N, nx, nu = B.shape
    lam = np.empty((N + 1, nx))
    lam[N] = w_N
    for k in range(N - 1, -1, -1):
        lam[k] = wx[k] - K[k].T @ wu[k] + (A[k] - B[k] @ K[k]).T @ lam[k + 1]
    return lam


@njit(cache=True, nogil=True)
def _linear_response(A, B, K, kff):
    """Roll out ``z_0 = 0``, ``v_k = kff_k − K_k z_k``, ``z_{k+1} = A_k z_k + B_k v_k``."""
    N, nx, nu = B.shape
    z = np.zeros((N + 1, nx))
    v = np.empty((N, nu))
    for k in range(N):
        v[k] = kff[k] - K[k] @ z[k]
        z[k + 1] = A[k] @ z[k] + B[k] @ v[k]
    return z, v


@njit(cache=True, nogil=True)
def _reachability_gramian(A, B):
    """``W = Σ_k Φ(N,k+1) B_k B_kᵀ Φ(N,k+1)ᵀ`` with ``Φ(N,k+1) = A_{N-1} ⋯ A_{k+1}``."""
    N, nx, nu = B.shape
    W = np.zeros((nx, nx))
    Phi = np.eye(nx)
    for k in range(N - 1, -1, -1):
        PhiB = Phi @ B[k]
        W += PhiB @ PhiB.T
        Phi = Phi @ A[k]
    return 0.5 * (W + W.T)


# ============================================================================ input validation
def _float_array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real numeric array, "
                         f"got {type(value).__name__}") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return np.ascontiguousarray(arr)


def _dynamics_stack(A, B) -> tuple[np.ndarray, np.ndarray]:
    A = _float_array("A", A)
    B = _float_array("B", B)
    if A.ndim != 3 or A.shape[1] != A.shape[2] or A.shape[0] < 1:
        raise ValueError(f"A must have shape (N, nx, nx) with N >= 1, got {A.shape}")
    N, nx = A.shape[0], A.shape[1]
    if B.ndim != 3 or B.shape[:2] != (N, nx):
        raise ValueError(f"B must have shape ({N}, {nx}, nu) to match A {A.shape}, got {B.shape}")
    if B.shape[2] < 1:
        raise ValueError(f"B must have at least one input column, got {B.shape}")
    return A, B


def _check_symmetric(name: str, M: np.ndarray) -> None:
    scale = max(1.0, float(np.max(np.abs(M)))) if M.size else 1.0
    if not np.allclose(M, np.swapaxes(M, -1, -2), rtol=0.0, atol=1e-10 * scale):
        raise ValueError(f"{name} must be symmetric")


def _square_matrix(name: str, M, n: int) -> np.ndarray:
    M = _float_array(name, M)
    if M.shape != (n, n):
        raise ValueError(f"{name} must have shape ({n}, {n}), got {M.shape}")
    _check_symmetric(name, M)
    return M


def _weight_stack(name: str, M, n: int, N: int, lengths: tuple[int, ...]) -> np.ndarray:
    """A weight as a C-contiguous stack of shape (L, n, n), L = 1 for a single matrix."""
    M = _float_array(name, M)
    if M.shape == (n, n):
        M = M[None]
    elif not (M.ndim == 3 and M.shape[1:] == (n, n) and M.shape[0] in lengths):
        allowed = " or ".join(f"({L}, {n}, {n})" for L in lengths)
        raise ValueError(f"{name} must have shape ({n}, {n}) or {allowed}, got {M.shape}")
    _check_symmetric(name, M)
    return np.ascontiguousarray(M)


def _state_weights(Q, Q_N, N: int, nx: int) -> tuple[np.ndarray, np.ndarray]:
    """Running stack (1 or N entries) and terminal weight from ``Q`` and ``Q_N`` (see tvlqr)."""
    Qs = _weight_stack("Q", Q, nx, N, (N, N + 1))
    if Qs.shape[0] == N + 1 and N + 1 > 1:
        if Q_N is not None:
            raise ValueError(f"Q has N+1 = {N + 1} entries, so Q[N] is the terminal weight; "
                             "pass Q_N=None")
        return np.ascontiguousarray(Qs[:N]), Qs[N].copy()
    if Q_N is None:
        if Qs.shape[0] != 1:
            raise ValueError(f"Q_N (shape ({nx}, {nx})) is required when Q has one entry per step")
        return Qs, Qs[0].copy()
    return Qs, _square_matrix("Q_N", Q_N, nx)


# ====================================================================================== LQR
def tvlqr(A, B, Q, R, Q_N=None) -> tuple[np.ndarray, np.ndarray]:
    """Finite-horizon, time-varying discrete LQR by the backward Riccati recursion.

    Minimizes ``Σ_{k<N} (z_kᵀ Q_k z_k + v_kᵀ R_k v_k) + z_Nᵀ Q_N z_N`` subject to
    ``z_{k+1} = A_k z_k + B_k v_k``; the optimal law is ``v_k = −K_k z_k`` with

        K_k = (R_k + B_kᵀ P_{k+1} B_k)⁻¹ B_kᵀ P_{k+1} A_k,
        P_k = Q_k + A_kᵀ P_{k+1} A_k − A_kᵀ P_{k+1} B_k K_k,     P_N = Q_N.

    (The paper prints ``… B_kᵀ P_{k+1} B_k`` as the last factor of K_k; it must be ``A_k``.)
    About a reference trajectory apply it as ``u_k = u_ref,k − K_k (x_k − x_ref,k)``.

    Args:
        A: ``(N, nx, nx)`` state Jacobians.
        B: ``(N, nx, nu)`` input Jacobians.
        Q: ``(nx, nx)`` for every step, ``(N, nx, nx)`` one per step ``k < N``, or
            ``(N+1, nx, nx)`` where ``Q[N]`` is the terminal weight (then ``Q_N`` must be None).
        R: ``(nu, nu)`` or ``(N, nu, nu)``, symmetric positive definite.
        Q_N: ``(nx, nx)`` terminal weight. If None: ``Q[N]`` when Q has N+1 entries, ``Q`` when Q
            is a single matrix; required when Q has exactly N entries.

    Returns:
        ``(K, P)``: gains ``(N, nu, nx)`` and Riccati matrices ``(N+1, nx, nx)``.

    Raises:
        ValueError: a wrong shape, non-finite or non-symmetric argument (named in the message).
        RiccatiError: ``R_k + B_kᵀ P_{k+1} B_k`` is singular/not positive definite (names step k).
    """
    A, B = _dynamics_stack(A, B)
    N, nx, nu = B.shape
    Qs, Q_N = _state_weights(Q, Q_N, N, nx)
    Rs = _weight_stack("R", R, nu, N, (N,))
    K = np.empty((N, nu, nx))
    P = np.empty((N + 1, nx, nx))
    status = _lq_riccati(A, B, Qs, Rs, np.zeros((1, nu, nx)), np.zeros((1, nx)),
                         np.zeros((1, nu)), Q_N, np.zeros(nx), K, np.empty((N, nu)), P)
    if status >= 0:
        raise RiccatiError(status)
    return K, P


def dlqr(A, B, Q, R) -> tuple[np.ndarray, np.ndarray]:
    """Infinite-horizon discrete LQR about a fixed point (``scipy.linalg.solve_discrete_are``).

    Returns ``(K, P)`` with ``K = (R + BᵀPB)⁻¹ BᵀPA`` of shape ``(nu, nx)`` for ``u = −K x`` and
    ``P`` the stabilizing solution of the discrete algebraic Riccati equation.
    """
    A = _float_array("A", A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must have shape (nx, nx), got {A.shape}")
    nx = A.shape[0]
    B = _float_array("B", B)
    if B.ndim != 2 or B.shape[0] != nx or B.shape[1] < 1:
        raise ValueError(f"B must have shape ({nx}, nu), got {B.shape}")
    nu = B.shape[1]
    Q = _square_matrix("Q", Q, nx)
    R = _square_matrix("R", R, nu)
    try:
        P = scipy.linalg.solve_discrete_are(A, B, Q, R)
    except (np.linalg.LinAlgError, ValueError) as err:
        raise np.linalg.LinAlgError(f"dlqr: no stabilizing DARE solution ({err}); "
                                    "is (A, B) stabilizable and R positive definite?") from err
    K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
    return K, 0.5 * (P + P.T)


class Controllability(NamedTuple):
    """Result of :func:`controllability`. ``matrix`` is the controllability matrix
    ``[B, AB, …, A^{n-1}B]`` (single pair) or the reachability Gramian (stacks)."""
    rank: int
    smallest_singular_value: float
    controllable: bool
    matrix: np.ndarray


def controllability(A, B, rtol: float | None = None) -> Controllability:
    """Controllability of ``x_{k+1} = A x_k + B u_k`` (2-D A, B) or reachability over a horizon of
    ``x_{k+1} = A_k x_k + B_k u_k`` (stacks ``(N, nx, nx)``, ``(N, nx, nu)``).

    Single pair: rank and smallest (the nx-th) singular value of ``C = [B, AB, …, A^{nx-1}B]``.
    Stacks: the reachability Gramian ``W = Σ_k Φ(N,k+1) B_k B_kᵀ Φ(N,k+1)ᵀ`` with
    ``Φ(N,k+1) = A_{N-1}⋯A_{k+1}`` (every state reachable at k=N from x_0 = 0 iff W > 0).
    The rank counts singular values above ``rtol · σ_max`` (default ``rtol = max(shape) · eps``,
    as ``numpy.linalg.matrix_rank``); ``controllable`` is ``rank == nx``.
    """
    A = _float_array("A", A)
    B = _float_array("B", B)
    if A.ndim == 3:
        A, B = _dynamics_stack(A, B)
        M = _reachability_gramian(A, B)
    elif A.ndim == 2:
        if A.shape[0] != A.shape[1]:
            raise ValueError(f"A must have shape (nx, nx) or (N, nx, nx), got {A.shape}")
        if B.ndim != 2 or B.shape[0] != A.shape[0] or B.shape[1] < 1:
            raise ValueError(f"B must have shape ({A.shape[0]}, nu) to match A, got {B.shape}")
        blocks = [B]
        for _ in range(A.shape[0] - 1):
            blocks.append(A @ blocks[-1])
        M = np.hstack(blocks)
    else:
        raise ValueError(f"A must have shape (nx, nx) or (N, nx, nx), got {A.shape}")
    nx = M.shape[0]
    s = np.linalg.svd(M, compute_uv=False)
    tol = (max(M.shape) * np.finfo(float).eps if rtol is None else rtol) * (s[0] if s.size else 0)
    rank = int(np.sum(s > tol))
    return Controllability(rank, float(s[nx - 1]), rank == nx, M)


# =============================================================================== simulation
def _initial_state(x0) -> np.ndarray:
    x0 = _float_array("x0", x0)
    if x0.ndim != 1:
        raise ValueError(f"x0 must have shape (nx,), got {x0.shape}")
    return x0


def _next_state(step: Callable, x: np.ndarray, u: np.ndarray, k: int) -> np.ndarray:
    x_next = np.asarray(step(x, u), dtype=np.float64)
    if x_next.shape != x.shape:
        raise ValueError(f"step(x, u) must return shape {x.shape}, got {x_next.shape} at k={k}")
    return x_next


def simulate_open_loop(step: Callable, x0, u) -> np.ndarray:
    """States ``x`` of shape ``(N+1, nx)`` from ``x_{k+1} = step(x_k, u_k)`` for ``u`` of shape
    ``(N, nu)``. Non-finite states are propagated, not raised."""
    x0 = _initial_state(x0)
    u = _float_array("u", u)
    if u.ndim != 2:
        raise ValueError(f"u must have shape (N, nu), got {u.shape}")
    x = np.empty((u.shape[0] + 1, x0.size))
    x[0] = x0
    for k in range(u.shape[0]):
        x[k + 1] = _next_state(step, x[k], u[k], k)
    return x


def simulate_closed_loop(step: Callable, x0, x_ref, u_ref, K) -> tuple[np.ndarray, np.ndarray]:
    """Simulate ``x_{k+1} = step(x_k, ū_k)`` with ``ū_k = u_ref[k] − K[k] (x_k − x_ref[k])``.

    Args:
        step: any callable ``step(x, u) -> x_next`` (e.g. the variational integrator's step).
        x0: ``(nx,)`` initial state.
        x_ref: ``(N+1, nx)`` or ``(N, nx)`` reference states (only ``x_ref[:N]`` is used).
        u_ref: ``(N, nu)`` reference inputs.
        K: ``(N, nu, nx)`` gains, e.g. from :func:`tvlqr` on the linearization about the reference.

    Returns:
        ``(x, u)``: states ``(N+1, nx)`` and applied inputs ``(N, nu)``.
    """
    x0 = _initial_state(x0)
    nx = x0.size
    K = _float_array("K", K)
    if K.ndim != 3 or K.shape[2] != nx:
        raise ValueError(f"K must have shape (N, nu, {nx}), got {K.shape}")
    N, nu = K.shape[0], K.shape[1]
    u_ref = _float_array("u_ref", u_ref)
    if u_ref.shape != (N, nu):
        raise ValueError(f"u_ref must have shape ({N}, {nu}) to match K {K.shape}, "
                         f"got {u_ref.shape}")
    x_ref = _float_array("x_ref", x_ref)
    if x_ref.ndim != 2 or x_ref.shape[1] != nx or x_ref.shape[0] not in (N, N + 1):
        raise ValueError(f"x_ref must have shape ({N + 1}, {nx}) or ({N}, {nx}), got {x_ref.shape}")
    x = np.empty((N + 1, nx))
    u = np.empty((N, nu))
    x[0] = x0
    for k in range(N):
        u[k] = u_ref[k] - K[k] @ (x[k] - x_ref[k])
        x[k + 1] = _next_state(step, x[k], u[k], k)
    return x, u


# ===================================================================== trajectory optimization
@runtime_checkable
class DiscreteSystem(Protocol):
    """What :func:`optimize_trajectory` needs from a discrete dynamic system (duck-typed).

    Attributes:
        nx: state dimension; nu: input dimension.

    Methods:
        step(x, u) -> x_next, shape ``(nx,)``.
        linearize(x, u) -> ``(A, B)`` with shapes ``(nx, nx)``, ``(nx, nu)``.
        linearize2(x, u) -> ``(A, B, H)`` with ``H`` of shape ``(nx, nz, nz)``, ``z = [x, u]``,
            ``H[i, a, b] = ∂²x_next_i / ∂z_a ∂z_b`` (only the second-order method calls it).

    ``step`` may signal failure (e.g. a diverging implicit solve) by raising ``ArithmeticError``
    or ``numpy.linalg.LinAlgError`` or by returning non-finite values; during a line search
    that just rejects the trial step.
    """
    nx: int
    nu: int

    def step(self, x: np.ndarray, u: np.ndarray) -> np.ndarray: ...

    def linearize(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def linearize2(self, x: np.ndarray,
                   u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


@dataclass
class TrajectoryOptimizationResult:
    """Result of :func:`optimize_trajectory`.

    ``history`` holds one dict per iterate ``i = 0 .. iterations``: ``iteration``, ``cost``
    (J at iterate i), ``gradient_norm`` (‖∂J/∂u‖ at iterate i), ``step`` (line-search step length
    that produced iterate i; 0 for i = 0), ``model`` (quadratic model of the direction that
    produced iterate i: ``newton``, ``gauss_newton`` or ``identity``), ``backtracks`` and
    ``slope`` (directional derivative of J along the direction computed at iterate i; NaN if none
    was computed).
    """
    x: np.ndarray
    u: np.ndarray
    cost: float
    gradient_norm: float
    iterations: int
    converged: bool
    message: str
    method: str
    history: list = field(default_factory=list)


class _Problem(NamedTuple):
    system: object
    x0: np.ndarray
    x_ref: np.ndarray
    u_ref: np.ndarray
    Qs: np.ndarray
    Rs: np.ndarray
    Q_N: np.ndarray


def _problem(system, x0, x_ref, u_ref, Q, R, Q_N) -> _Problem:
    for attr in ("nx", "nu", "step", "linearize"):
        if not hasattr(system, attr):
            raise TypeError(f"system has no attribute {attr!r}; see core.control.DiscreteSystem")
    nx, nu = int(system.nx), int(system.nu)
    x0 = _initial_state(x0)
    if x0.shape != (nx,):
        raise ValueError(f"x0 must have shape ({nx},), got {x0.shape}")
    u_ref = _float_array("u_ref", u_ref)
    if u_ref.ndim != 2 or u_ref.shape[1] != nu or u_ref.shape[0] < 1:
        raise ValueError(f"u_ref must have shape (N, {nu}) with N >= 1, got {u_ref.shape}")
    N = u_ref.shape[0]
    x_ref = _float_array("x_ref", x_ref)
    if x_ref.shape != (N + 1, nx):
        raise ValueError(f"x_ref must have shape ({N + 1}, {nx}) (N = {N} from u_ref), "
                         f"got {x_ref.shape}")
    Qs, Q_N = _state_weights(Q, Q_N, N, nx)
    Rs = _weight_stack("R", R, nu, N, (N,))
    return _Problem(system, x0, x_ref, u_ref, Qs, Rs, Q_N)


def _apply_weight(Ws: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``W_k d_k`` for every row of ``d`` (Ws has 1 or len(d) entries)."""
    return np.ascontiguousarray((Ws @ d[:, :, None])[:, :, 0])


def _weighted_errors(pb: _Problem, x, u):
    """Errors and the cost's linear terms ``wx_k = Q_k δx_k``, ``wu_k = R_k δu_k``, ``w_N``."""
    N = u.shape[0]
    dx, du = x - pb.x_ref, u - pb.u_ref
    wx, wu = _apply_weight(pb.Qs, dx[:N]), _apply_weight(pb.Rs, du)
    return dx, du, wx, wu, pb.Q_N @ dx[N]


def _cost(pb: _Problem, x, u) -> float:
    dx, du, wx, wu, w_N = _weighted_errors(pb, x, u)
    N = u.shape[0]
    return 0.5 * float(np.sum(dx[:N] * wx) + np.sum(du * wu) + dx[N] @ w_N)


def _check_linearization(parts, k: int, shapes: tuple, second_order: bool) -> None:
    name = "system.linearize2" if second_order else "system.linearize"
    if len(parts) != len(shapes):
        raise ValueError(f"{name} must return {'(A, B, H)' if second_order else '(A, B)'}, "
                         f"got {len(parts)} items")
    for label, part, shape in zip("ABH", parts, shapes):
        if np.shape(part) != shape:
            raise ValueError(f"{name} returned {label} of shape {np.shape(part)} at k={k}, "
                             f"expected {shape}")
        if not np.all(np.isfinite(part)):
            raise ValueError(f"{name} returned a non-finite {label} at k={k}")


def linearize_trajectory(system, x, u, second_order: bool = False):
    """Stack ``system.linearize(x[k], u[k])`` (or ``linearize2``) for ``k < N``.

    ``x`` has shape ``(N+1, nx)`` or ``(N, nx)`` and ``u`` shape ``(N, nu)``. Returns ``(A, B)`` of
    shapes ``(N, nx, nx)``, ``(N, nx, nu)``, plus ``H`` of shape ``(N, nx, nz, nz)`` if
    ``second_order``; feed ``(A, B)`` to :func:`tvlqr` for a tracking controller.
    """
    x, u = _float_array("x", x), _float_array("u", u)
    if u.ndim != 2 or x.ndim != 2 or x.shape[0] not in (u.shape[0], u.shape[0] + 1):
        raise ValueError(f"x must have shape (N+1, nx) and u shape (N, nu), "
                         f"got {x.shape}, {u.shape}")
    (N, nu), nx = u.shape, x.shape[1]
    shapes = ((nx, nx), (nx, nu), (nx, nx + nu, nx + nu))[:3 if second_order else 2]
    stacks = [np.empty((N,) + shape) for shape in shapes]
    for k in range(N):
        parts = system.linearize2(x[k], u[k]) if second_order else system.linearize(x[k], u[k])
        _check_linearization(parts, k, shapes, second_order)
        for stack, part in zip(stacks, parts):
            stack[k] = part
    return tuple(stacks)


def _rollout(pb: _Problem, u: np.ndarray) -> np.ndarray:
    return simulate_open_loop(pb.system.step, pb.x0, u)


def _checked_controls(pb: _Problem, u, name: str = "u_init") -> np.ndarray:
    if u is None:
        return pb.u_ref.copy()
    u = _float_array(name, u)
    if u.shape != pb.u_ref.shape:
        raise ValueError(f"{name} must have shape {pb.u_ref.shape} (that of u_ref), got {u.shape}")
    return u.copy()


def trajectory_cost(x, u, x_ref, u_ref, Q, R, Q_N=None) -> float:
    """``½Σ_{k<N}[δx_kᵀQ_kδx_k + δu_kᵀR_kδu_k] + ½δx_NᵀQ_Nδx_N`` with ``δx = x − x_ref``,
    ``δu = u − u_ref``; shapes ``x, x_ref (N+1, nx)``, ``u, u_ref (N, nu)``; Q, R as in tvlqr."""
    u_ref = _float_array("u_ref", u_ref)
    x_ref = _float_array("x_ref", x_ref)
    u = _float_array("u", u)
    x = _float_array("x", x)
    if u.shape != u_ref.shape or u.ndim != 2:
        raise ValueError(f"u must have shape {u_ref.shape} (that of u_ref), got {u.shape}")
    if x.shape != x_ref.shape or x.shape != (u.shape[0] + 1, x.shape[-1]):
        raise ValueError(f"x and x_ref must have shape (N+1, nx) = ({u.shape[0] + 1}, nx), "
                         f"got {x.shape} and {x_ref.shape}")
    N, nx, nu = u.shape[0], x.shape[1], u.shape[1]
    Qs, Q_N = _state_weights(Q, Q_N, N, nx)
    pb = _Problem(None, x[0], x_ref, u_ref, Qs, _weight_stack("R", R, nu, N, (N,)), Q_N)
    return _cost(pb, x, u)


def cost_and_gradient(system, x0, u, x_ref, u_ref, Q, R, Q_N=None) -> tuple[float, np.ndarray]:
    """Cost ``J(u)`` of :func:`optimize_trajectory` (states from rolling out ``u`` from ``x0``) and
    its exact gradient ``∂J/∂u`` of shape ``(N, nu)`` by the adjoint (costate) pass."""
    pb = _problem(system, x0, x_ref, u_ref, Q, R, Q_N)
    u = _checked_controls(pb, u, "u")
    x = _rollout(pb, u)
    A, B = linearize_trajectory(system, x, u)
    _, _, wx, wu, w_N = _weighted_errors(pb, x, u)
    _, g = _costate_and_gradient(A, B, wx, wu, w_N)
    return _cost(pb, x, u), g


class _Direction(NamedTuple):
    K: np.ndarray        # (N, nu, nx) feedback used to project trial trajectories
    kff: np.ndarray      # (N, nu) feedforward of the projected update
    slope: float         # directional derivative Σ g_k · v_k of J along the direction
    model: str           # quadratic model that produced it: newton, gauss_newton or identity


def _newton_weights(pb: _Problem, lam: np.ndarray, H: np.ndarray, nx: int):
    """Hessian blocks of the Lagrangian: ``W_k = diag(Q_k, R_k) + Σ_i λ_{k+1,i} H_k[i]``."""
    W = np.einsum("ki,kiab->kab", lam[1:], H)
    W = 0.5 * (W + np.swapaxes(W, 1, 2))
    Wxx = np.ascontiguousarray(W[:, :nx, :nx] + pb.Qs)
    Wuu = np.ascontiguousarray(W[:, nx:, nx:] + pb.Rs)
    Wux = np.ascontiguousarray(W[:, nx:, :nx])
    return Wxx, Wuu, Wux


def _solve_lq(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N):
    """Policy ``(K, kff)`` of the LQ subproblem, or None where it is not convex."""
    N, nx, nu = B.shape
    K, kff, P = np.empty((N, nu, nx)), np.empty((N, nu)), np.empty((N + 1, nx, nx))
    status = _lq_riccati(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N, K, kff, P)
    return (K, kff) if status < 0 else None


def _projection_gains(A, B) -> np.ndarray:
    """Feedback of the projection operator: time-varying LQR with identity weights (trep's
    default ``Qproj = I``, ``Rproj = I``) along the current linearization."""
    nx, nu = A.shape[1], B.shape[2]
    return tvlqr(A, B, np.eye(nx), np.eye(nu), np.eye(nx))[0]


def _descent_direction(pb, method, projection, A, B, H, lam, g, wx, wu, w_N) -> _Direction:
    """The LQ subproblem's direction ``(z, v)`` and the feedback that projects trial trajectories.

    Models (weights of the LQ subproblem's quadratic part): ``newton`` (second_order; the
    Hessian of the cost composed with the projection), ``gauss_newton`` (first_order: the cost's
    own ``Q, R``; also what second_order falls back to where the Newton model is not convex, as
    trep falls back from "newton" to "quasi") and ``identity`` (steepest_descent).
    ``projection="lqr"``: trial trajectories follow the fixed gains ``Kp`` = LQR(I, I) and the
    Newton model uses the matching closed-loop costate; ``projection="direction"``: they follow
    the LQ policy's own gains (DDP's forward pass) and the open-loop costate.
    """
    nx, nu = A.shape[1], B.shape[2]
    Kp = _projection_gains(A, B) if projection == "lqr" else None
    no_cross = np.zeros((1, nu, nx))
    policy = None
    if method == "second_order":
        lam_model = lam if Kp is None else _closed_loop_costate(A, B, Kp, wx, wu, w_N)
        Wxx, Wuu, Wux = _newton_weights(pb, lam_model, H, nx)
        policy, model = _solve_lq(A, B, Wxx, Wuu, Wux, wx, wu, pb.Q_N, w_N), "newton"
    if method == "steepest_descent":
        # trep's "steepest" model: identity weights on the whole tangent trajectory (z_k, v_k),
        # i.e. the gradient in the metric Σ |z_k|² + |v_k|².
        policy = _solve_lq(A, B, np.eye(nx)[None], np.eye(nu)[None], no_cross, wx, wu,
                           np.eye(nx), w_N)
        model = "identity"
    elif policy is None:     # first_order, or the Newton model is not convex here
        policy = _solve_lq(A, B, pb.Qs, pb.Rs, no_cross, wx, wu, pb.Q_N, w_N)
        model = "gauss_newton"
    if policy is None:
        raise RiccatiError(0, "the LQ subproblem (Q, Q_N positive semi-definite and R positive "
                              "definite make it convex; are the linearizations finite?)")
    K, kff = policy
    z, v = _linear_response(A, B, K, kff)
    slope = float(np.sum(g * v))
    if Kp is not None:
        # ũ_k = u_k + γ v_k − Kp_k (x̃_k − x_k − γ z_k): the same tangent (z, v) at γ = 0.
        kff = v + np.einsum("kij,kj->ki", Kp, z[:-1])
        K = Kp
    return _Direction(K, kff, slope, model)


def _projected_rollout(pb: _Problem, x, u, d: _Direction, gamma: float):
    """Trial trajectory ``ũ_k = u_k + γ kff_k − K_k (x̃_k − x_k)``, ``x̃_{k+1} = step(x̃_k, ũ_k)``
    (Hauser's projection operator; the DDP forward pass). Returns None if the rollout fails."""
    N = u.shape[0]
    xt, ut = np.empty_like(x), np.empty_like(u)
    xt[0] = pb.x0
    step = pb.system.step
    with np.errstate(all="ignore"):
        try:
            for k in range(N):
                ut[k] = u[k] + gamma * d.kff[k] - d.K[k] @ (xt[k] - x[k])
                xt[k + 1] = _next_state(step, xt[k], ut[k], k)
        except (ArithmeticError, np.linalg.LinAlgError):
            return None
        if not (np.all(np.isfinite(xt)) and np.all(np.isfinite(ut))):
            return None
        return xt, ut


def _cost_change(pb: _Problem, x, u, xt, ut) -> float:
    """``J(xt, ut) − J(x, u)`` as ``½Σ Δᵀ W (Δ + 2δ)`` (Δ = trial − current, δ = current − ref):
    no cancellation between two large sums, so small decreases stay resolvable."""
    N = u.shape[0]
    dx, du, wx, wu, w_N = _weighted_errors(pb, x, u)
    Dx, Du = xt - x, ut - u
    WDx, WDu = _apply_weight(pb.Qs, Dx[:N]), _apply_weight(pb.Rs, Du)
    return (float(np.sum(Dx[:N] * (0.5 * WDx + wx)) + np.sum(Du * (0.5 * WDu + wu)))
            + float(Dx[N] @ (0.5 * pb.Q_N @ Dx[N] + w_N)))


def _line_search(pb, x, u, J, d: _Direction, armijo, backtrack, max_backtracks):
    """Armijo backtracking on the projected trajectory: accept the first γ = backtrack^j with
    ``ΔJ(γ) ≤ armijo·γ·slope + 8·eps·(J + J(γ))`` (the last term absorbs round-off in J)."""
    gamma = 1.0
    for j in range(max_backtracks + 1):
        trial = _projected_rollout(pb, x, u, d, gamma)
        if trial is not None:
            J_trial = _cost(pb, *trial)
            slack = 8 * np.finfo(float).eps * (abs(J) + abs(J_trial))
            if (np.isfinite(J_trial)
                    and _cost_change(pb, x, u, *trial) <= armijo * gamma * d.slope + slack):
                return trial[0], trial[1], J_trial, gamma, j
        gamma *= backtrack
    return None


def optimize_trajectory(system, x0, x_ref, u_ref, Q, R, Q_N=None, method: str = "second_order",
                        u_init=None, tol: float = 1e-6, max_iterations: int = 1000,
                        armijo: float = 1e-4, backtrack: float = 0.5, max_backtracks: int = 50,
                        stop: str = "slope", projection: str = "lqr", callback: Callable[[dict], object] | None = None,
                        verbose: bool = False) -> TrajectoryOptimizationResult:
    """Optimize the inputs of a discrete system to track a (possibly infeasible) reference.

    Minimizes over ``u_0..u_{N-1}``, with ``x_0 = x0`` fixed and
    ``x_{k+1} = system.step(x_k, u_k)``,

        J = ½ Σ_{k<N} [(x_k − x_ref,k)ᵀ Q_k (x_k − x_ref,k) + (u_k − u_ref,k)ᵀ R_k (u_k − u_ref,k)]
            + ½ (x_N − x_ref,N)ᵀ Q_N (x_N − x_ref,N).

    Every iteration linearizes along the current feasible trajectory, computes the costate
    ``λ`` and the reduced gradient ``g_k = ∂J/∂u_k = R_k δu_k + B_kᵀ λ_{k+1}``, solves a
    linear-quadratic subproblem by a Riccati pass for a tangent direction ``(z, v)``
    (``z_{k+1} = A_k z_k + B_k v_k``, ``z_0 = 0``) and backtracks (Armijo) on the projected trial
    trajectory (Hauser's projection operator, as trep's ``DOptimizer``)

        ũ_k = u_k + γ v_k − K_k (x̃_k − x_k − γ z_k),   x̃_{k+1} = step(x̃_k, ũ_k),

    whose derivative at γ = 0 is the tangent ``(z, v)``, so ``slope = Σ g_k·v_k``.

    Methods (the quadratic part of the LQ subproblem):
        ``"second_order"``: Newton: the Hessian of the cost composed with the projection,
            ``diag(Q_k, R_k) + Σ_i λ_{k+1,i} H_k[i]`` with the projection's closed-loop costate
            (needs ``system.linearize2``); quadratic convergence near a minimum. Where that model
            is not convex the iteration uses the Gauss-Newton model instead (trep's fallback from
            "newton" to "quasi"); ``history[i]["model"]`` says which.
        ``"first_order"``: Gauss-Newton, the cost's own ``diag(Q_k, R_k)`` (trep's "quasi"):
            first derivatives only, linear convergence, exact in one step for linear systems.
        ``"steepest_descent"``: identity weights (trep's "steepest"): the gradient direction in
            the metric ``Σ |z_k|² + |v_k|²``; the slowest.

    Projection (``projection``): ``"lqr"`` (default) uses fixed gains ``K`` = time-varying LQR
    with ``Q = I, R = I`` along the current trajectory (trep's ``Qproj, Rproj``); this keeps
    trial trajectories of unstable systems near the current one; the Newton model above is
    the Hessian of the cost composed with this projection. ``"direction"`` uses the LQ policy's own gains (DDP's forward pass) with the
    open-loop costate in the Newton model.

    Convergence (``stop``): ``"slope"`` (default, trep's ``descent_tolerance``) stops when the
    directional derivative along the method's direction satisfies ``|Σ g_k·v_k| < tol``, i.e.
    the decrease the model predicts for a full step is negligible; it is insensitive to the
    round-off that an unstable system's costate amplifies. ``"gradient"`` stops when
    ``‖∂J/∂u‖₂ < tol`` (Euclidean norm over all inputs; absolute, in units of J per unit
    input), meaningful for well-conditioned problems. ``iterations`` counts accepted steps.

    Args:
        system: a :class:`DiscreteSystem`.
        x0: ``(nx,)`` fixed initial state.
        x_ref: ``(N+1, nx)``; u_ref: ``(N, nu)`` (they need not satisfy the dynamics).
        Q, R, Q_N: weights, shapes as in :func:`tvlqr`.
        u_init: ``(N, nu)`` initial inputs (default ``u_ref``).
        tol, max_iterations: convergence tolerance (see ``stop``) and iteration cap.
        armijo, backtrack, max_backtracks: sufficient-decrease constant, step shrink factor and
            maximum number of shrinks per line search.
        stop: ``"slope"`` or ``"gradient"`` (see Convergence).
        projection: ``"lqr"`` or ``"direction"`` (see Projection).
        callback: called with each history entry (dict) as it is produced.
        verbose: also print one line per iteration (the module logger logs them at DEBUG).

    Returns:
        :class:`TrajectoryOptimizationResult`; ``converged`` is False (with a ``message``) when the
        iteration cap is reached or the line search finds no decrease.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "second_order" and not hasattr(system, "linearize2"):
        raise TypeError("method='second_order' needs system.linearize2(x, u) -> (A, B, H)")
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {projection!r}")
    if stop not in STOP_RULES:
        raise ValueError(f"stop must be one of {STOP_RULES}, got {stop!r}")
    if not tol > 0 or max_iterations < 0 or not 0 < armijo < 0.5 or not 0 < backtrack < 1:
        raise ValueError("need tol > 0, max_iterations >= 0, 0 < armijo < 0.5, 0 < backtrack < 1")
    pb = _problem(system, x0, x_ref, u_ref, Q, R, Q_N)
    u = _checked_controls(pb, u_init)
    x = _rollout(pb, u)
    if not np.all(np.isfinite(x)):
        raise ValueError("rolling out u_init from x0 gives non-finite states")
    J = _cost(pb, x, u)
    history: list[dict] = []
    entry = {"iteration": 0, "cost": J, "step": 0.0, "model": "", "backtracks": 0}
    converged, message = False, f"reached max_iterations={max_iterations}"
    for it in range(max_iterations + 1):
        A, B, *H = linearize_trajectory(system, x, u, second_order=(method == "second_order"))
        H = H[0] if H else None
        _, _, wx, wu, w_N = _weighted_errors(pb, x, u)
        lam, g = _costate_and_gradient(A, B, wx, wu, w_N)
        entry["gradient_norm"] = float(np.linalg.norm(g))
        d = None
        if stop == "slope" or (entry["gradient_norm"] >= tol and it < max_iterations):
            d = _descent_direction(pb, method, projection, A, B, H, lam, g, wx, wu, w_N)
        entry["slope"] = d.slope if d is not None else float("nan")
        _record(history, entry, callback, verbose)
        if stop == "gradient" and entry["gradient_norm"] < tol:
            converged, message = True, f"gradient norm < tol={tol:g}"
            break
        if stop == "slope" and abs(d.slope) < tol:
            converged, message = True, f"|slope| < tol={tol:g}"
            break
        if it == max_iterations:
            break
        if not d.slope < 0:
            message = "no descent direction (gradient at round-off level?)"
            break
        found = _line_search(pb, x, u, J, d, armijo, backtrack, max_backtracks)
        if found is None:
            message = "line search found no decrease (tol below the cost's round-off level?)"
            break
        x, u, J, gamma, backtracks = found
        entry = {"iteration": it + 1, "cost": J, "step": gamma, "model": d.model,
                 "backtracks": backtracks}
    last = history[-1]
    return TrajectoryOptimizationResult(x, u, J, last["gradient_norm"], last["iteration"],
                                        converged, message, method, history)


def _record(history: list, entry: dict, callback, verbose: bool) -> None:
    history.append(entry)
    line = (f"iter {entry['iteration']:4d}  cost {entry['cost']:.10e}  step {entry['step']:.3e}  "
            f"|grad| {entry['gradient_norm']:.3e}  slope {entry['slope']:.3e}  {entry['model']}")
    logger.debug(line)
    if verbose:
        print(line)
    if callback is not None:
        callback(dict(entry))
