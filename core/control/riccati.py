"""LQR and controllability (a la python-control's ``statefbk``): the backward Riccati recursion
for time-varying gains along a trajectory, the infinite-horizon gain about a fixed point
(discrete, :func:`dlqr`, and continuous, :func:`lqr`), one Gauss-Newton step of the tracking
cost along a trajectory (:func:`tracking_step`), and the controllability Gramian.

Conventions (:mod:`core.conventions`): horizon ``k = 0 .. N-1`` for inputs and linearizations,
``k = 0 .. N`` for states; ``A`` (N, nx, nx), ``B`` (N, nx, nu) with ``A_k = df/dx (x_k, u_k)``;
gains ``K`` (N, nu, nx) act as ``u_k = u_ref,k - K_k (x_k - x_ref,k)``; Riccati matrices ``P``
(N+1, nx, nx), ``P[N]`` the terminal weight. Weights ``Q`` and ``R`` are one matrix (used at every
step) or one per step (see :func:`tvlqr`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg

from core.base.jit import njit
from core.base.linalg import cholesky_checked, cholesky_solve, lu_checked, lu_solve
from core.errors import RiccatiError
from core.validation import check_definite, check_symmetric, float_array, float_stack, square_matrix


# ================================================================================ njit kernels
@njit(cache=True, nogil=True)
def lq_riccati(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N, K, kff, P, indefinite):
    """Backward Riccati pass of the linear-quadratic problem

        min  Σ_k [ wx_kᵀ z_k + wu_kᵀ v_k + ½ z_kᵀ Wxx_k z_k + ½ v_kᵀ Wuu_k v_k
                   + v_kᵀ Wux_k z_k ] + p_Nᵀ z_N + ½ z_Nᵀ P_N z_N
        s.t. z_{k+1} = A_k z_k + B_k v_k.

    Stacks ``Wxx, Wuu, Wux, wx, wu`` have length 1 (same at every step) or N. Fills the optimal
    policy ``v_k = kff_k − K_k z_k`` and the value Hessians ``P`` (symmetrized every step).
    Returns -1 on success, else the step k where ``Wuu_k + B_kᵀ P_{k+1} B_k`` is not
    positive definite (the outputs are then only valid for steps after k). With ``indefinite``
    that matrix is solved by LU with partial pivoting instead (trep's ``solve_tv_lq``: the
    stationary point of a non-convex problem), and k is where it is singular.
    """
    N, nx, nu = B.shape
    nz = nx + nu
    P[N] = P_N
    p = p_N.copy()
    # work arrays, allocated once: the Q-function's Hessian H = [A B]^T P [A B] and gradient
    # g = [A B]^T p in two products and a matrix-vector product per step (Qxx, Qux, Quu blocks)
    AB, PAB, H, g = np.empty((nx, nz)), np.empty((nx, nz)), np.empty((nz, nz)), np.empty(nz)
    Quu, Lu, Qux = np.empty((nu, nu)), np.empty((nu, nu)), np.empty((nu, nx))
    piv = np.empty(nu, np.int64)
    sol, M = np.empty((nu, nx + 1)), np.empty((nx, nx))
    for k in range(N - 1, -1, -1):
        AB[:, :nx] = A[k]
        AB[:, nx:] = B[k]
        np.dot(P[k + 1], AB, PAB)
        np.dot(AB.T, PAB, H)
        np.dot(AB.T, p, g)
        Wxx_k, Wuu_k = Wxx[k if Wxx.shape[0] > 1 else 0], Wuu[k if Wuu.shape[0] > 1 else 0]
        Wux_k = Wux[k if Wux.shape[0] > 1 else 0]
        wx_k, wu_k = wx[k if wx.shape[0] > 1 else 0], wu[k if wu.shape[0] > 1 else 0]
        for i in range(nu):
            for j in range(nu):
                Quu[i, j] = Wuu_k[i, j] + 0.5 * (H[nx + i, nx + j] + H[nx + j, nx + i])
        if (lu_checked(Quu, Lu, piv) if indefinite else cholesky_checked(Quu, Lu)) >= 0:
            return k                # singular, or (Cholesky) not numerically positive definite
        for i in range(nu):
            for j in range(nx):
                Qux[i, j] = sol[i, j] = Wux_k[i, j] + H[nx + i, j]
            sol[i, nx] = -(wu_k[i] + g[nx + i])
        if indefinite:
            lu_solve(Lu, piv, sol)
        else:
            cholesky_solve(Lu, sol)
        K[k] = sol[:, :nx]
        kff[k] = sol[:, nx]
        np.dot(Qux.T, K[k], M)
        Pk = P[k]
        for i in range(nx):         # P_k = Qxx - Qux^T K_k, symmetrized
            for j in range(i, nx):
                Pk[i, j] = Pk[j, i] = Wxx_k[i, j] + 0.5 * (H[i, j] + H[j, i] - M[i, j] - M[j, i])
        p = wx_k + g[:nx] + Qux.T @ kff[k]
    return -1


@njit(cache=True, nogil=True)
def _affine_rollout(A, B, K, kff, dX, dU):
    """``dU_k = kff_k − K_k dX_k``, ``dX_{k+1} = A_k dX_k + B_k dU_k`` from ``dX[0] = 0``."""
    dX[0] = 0.0
    for k in range(B.shape[0]):
        dU[k] = kff[k] - K[k] @ dX[k]
        dX[k + 1] = A[k] @ dX[k] + B[k] @ dU[k]


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


# ================================================================================ arguments
def dynamics_stack(A, B) -> tuple[np.ndarray, np.ndarray]:
    A = float_array("A", A)
    B = float_array("B", B)
    if A.ndim != 3 or A.shape[1] != A.shape[2] or A.shape[0] < 1:
        raise ValueError(f"A must have shape (N, nx, nx) with N >= 1, got {A.shape}")
    N, nx = A.shape[0], A.shape[1]
    if B.ndim != 3 or B.shape[:2] != (N, nx):
        raise ValueError(f"B must have shape ({N}, {nx}, nu) to match A {A.shape}, got {B.shape}")
    if B.shape[2] < 1:
        raise ValueError(f"B must have at least one input column, got {B.shape}")
    return A, B


def weight_stack(name: str, M, n: int, N: int, lengths: tuple[int, ...],
                 definite: bool = False) -> np.ndarray:
    """A weight as a C-contiguous stack of shape (L, n, n), L = 1 for a single matrix (a scalar
    when ``n == 1``); symmetric and positive semi-definite (``definite``: positive definite)."""
    M = float_array(name, M)
    if n == 1 and M.size == 1 and M.ndim <= 2:
        M = M.reshape(1, 1)
    if M.shape == (n, n):
        M = M[None]
    elif not (M.ndim == 3 and M.shape[1:] == (n, n) and M.shape[0] in lengths):
        allowed = " or ".join(f"({L}, {n}, {n})" for L in lengths)
        raise ValueError(f"{name} must have shape ({n}, {n}) or {allowed}, got {M.shape}")
    check_symmetric(name, M)
    check_definite(name, M if M.shape[0] > 1 else M[0], definite)
    return np.ascontiguousarray(M)


def state_weights(Q, Q_N, N: int, nx: int) -> tuple[np.ndarray, np.ndarray]:
    """Running stack (1 or N entries) and terminal weight from ``Q`` and ``Q_N`` (see tvlqr)."""
    Qs = weight_stack("Q", Q, nx, N, (N, N + 1))
    if Qs.shape[0] == N + 1 and N + 1 > 1:
        if Q_N is not None:
            raise ValueError(f"Q has N+1 = {N + 1} entries, so Q[N] is the terminal weight; "
                             "pass Q_N=None")
        return np.ascontiguousarray(Qs[:N]), Qs[N].copy()
    if Q_N is None:
        if Qs.shape[0] != 1:
            raise ValueError(f"Q_N (shape ({nx}, {nx})) is required when Q has one entry per step")
        return Qs, Qs[0].copy()
    return Qs, square_matrix("Q_N", Q_N, nx, definite=False)


# ====================================================================================== LQR
def tvlqr(A, B, Q, R, Q_N=None) -> tuple[np.ndarray, np.ndarray]:
    """Finite-horizon, time-varying discrete LQR by the backward Riccati recursion.

    Minimizes ``Σ_{k<N} (z_kᵀ Q_k z_k + v_kᵀ R_k v_k) + z_Nᵀ Q_N z_N`` subject to
    ``z_{k+1} = A_k z_k + B_k v_k``; the optimal law is ``v_k = −K_k z_k`` with

        K_k = (R_k + B_kᵀ P_{k+1} B_k)⁻¹ B_kᵀ P_{k+1} A_k,
        P_k = Q_k + A_kᵀ P_{k+1} A_k − A_kᵀ P_{k+1} B_k K_k,     P_N = Q_N.

    (The paper prints ``… B_kᵀ P_{k+1} B_k`` as the last factor of K_k; it must be ``A_k``.)
    About a reference trajectory apply it as ``u_k = u_ref,k − K_k (x_k − x_ref,k)``.

    Parameters
    ----------
    A : array_like, shape (N, nx, nx)
        State Jacobians (``N >= 1``).
    B : array_like, shape (N, nx, nu)
        Input Jacobians (``nu >= 1``).
    Q : array_like, shape (nx, nx), (N, nx, nx) or (N+1, nx, nx)
        Symmetric positive semi-definite state weights: one for every step, one per step
        ``k < N``, or one per step with ``Q[N]`` the terminal weight (then ``Q_N`` must be None).
        A scalar when ``nx = 1``.
    R : array_like, shape (nu, nu) or (N, nu, nu)
        Symmetric positive definite input weights (a scalar when ``nu = 1``).
    Q_N : array_like, shape (nx, nx), optional
        Symmetric positive semi-definite terminal weight. If None: ``Q[N]`` when ``Q`` has N+1
        entries, ``Q`` when it is a single matrix; required when ``Q`` has exactly N entries.

    Returns
    -------
    K : ndarray, shape (N, nu, nx)
        The gains.
    P : ndarray, shape (N+1, nx, nx)
        The Riccati matrices (``P[N] = Q_N``).

    Raises
    ------
    ValueError
        A wrong shape, a non-finite or non-symmetric argument, a ``Q`` or ``Q_N`` that is not
        positive semi-definite or an ``R`` that is not positive definite (named in the message
        with its smallest eigenvalue); ``Q_N`` given with a ``Q`` of N+1 entries, or missing
        with a ``Q`` of N entries.
    RiccatiError
        ``R_k + B_kᵀ P_{k+1} B_k`` is singular or not positive definite (names the step ``k``).
    """
    A, B = dynamics_stack(A, B)
    N, nx, nu = B.shape
    Qs, Q_N = state_weights(Q, Q_N, N, nx)
    return tvlqr_checked(A, B, Qs, weight_stack("R", R, nu, N, (N,), definite=True), Q_N)


def tvlqr_checked(A, B, Qs, Rs, Q_N) -> tuple[np.ndarray, np.ndarray]:
    """:func:`tvlqr` on arguments it has checked already: float64 stacks ``A`` (N, nx, nx),
    ``B`` (N, nx, nu), ``Qs`` (1 or N, nx, nx), ``Rs`` (1 or N, nu, nu), C-contiguous, and
    ``Q_N`` (nx, nx), the weights symmetric and (semi-)definite. For callers that run the
    recursion again and again with the same weights (the trajectory optimizer's projection):
    the checks cost a third of the recursion at nx = 80, nu = 34, N = 20 (an eigenvalue
    decomposition per weight).

    Returns ``(K, P)`` as :func:`tvlqr`; raises :class:`RiccatiError` naming the step."""
    N, nx, nu = B.shape
    K = np.empty((N, nu, nx))
    P = np.empty((N + 1, nx, nx))
    status = lq_riccati(A, B, Qs, Rs, np.zeros((1, nu, nx)), np.zeros((1, nx)),
                         np.zeros((1, nu)), Q_N, np.zeros(nx), K, np.empty((N, nu)), P, False)
    if status >= 0:
        raise RiccatiError(status)
    return K, P


def tracking_step(A, B, X, U, X_ref, U_ref, Q, R, Q_N=None):
    """One Gauss-Newton step of the tracking cost along a trajectory, and its affine law.

    Along ``(X, U)`` (``N+1`` states from the given ``X[0]``, ``N`` inputs) with the
    linearization ``(A_k, B_k)`` of ``x_{k+1} = f(x_k, u_k)``, the step ``(dX, dU)`` with
    ``dX_0 = 0`` and ``dX_{k+1} = A_k dX_k + B_k dU_k`` that minimizes

        ½ Σ_{k<N} [e_kᵀ Q_k e_k + d_kᵀ R_k d_k] + ½ e_Nᵀ Q_N e_N,
        e_k = X_k + dX_k − X_ref,k,   d_k = U_k + dU_k − U_ref,k.

    Its minimizer is the affine law ``dU_k = kff_k − K_k dX_k`` of the backward Riccati pass
    with the linear terms ``Q_k (X_k − X_ref,k)``, ``R_k (U_k − U_ref,k)``; ``K`` is
    :func:`tvlqr`'s along ``(A, B)``. Applied as ``u_k = U_k + kff_k − K_k (x_k − X_k)`` from
    the state ``X[0]`` it is the feedback of a real-time iteration: the gains of where the
    trajectory is, the feed-forward moved towards the reference (with the nonlinear step
    instead of the linearization, the trajectory then followed is not ``X + dX`` exactly).

    Parameters
    ----------
    A, B : array_like, shapes (N, nx, nx), (N, nx, nu)
        The linearization along ``(X, U)``.
    X, X_ref : array_like, shape (N+1, nx)
        The trajectory's states and the reference states.
    U, U_ref : array_like, shape (N, nu)
        The trajectory's inputs and the reference inputs.
    Q, R, Q_N : array_like
        Weights, as for :func:`tvlqr`.

    Returns
    -------
    K : ndarray, shape (N, nu, nx)
        The gains.
    kff : ndarray, shape (N, nu)
        The feed-forward.
    dX : ndarray, shape (N+1, nx)
        The step's states (``dX[0] = 0``).
    dU : ndarray, shape (N, nu)
        The step's inputs.

    Raises
    ------
    ValueError, RiccatiError
        As :func:`tvlqr`; ``ValueError`` also for a shape or a non-finite entry of ``X``, ``U``,
        ``X_ref``, ``U_ref``.
    """
    A, B = dynamics_stack(A, B)
    N, nx, nu = B.shape
    X, X_ref = (float_stack(name, v, (N + 1, nx)) for name, v in (("X", X), ("X_ref", X_ref)))
    U, U_ref = (float_stack(name, v, (N, nu)) for name, v in (("U", U), ("U_ref", U_ref)))
    Qs, Q_N = state_weights(Q, Q_N, N, nx)
    Rs = weight_stack("R", R, nu, N, (N,), definite=True)
    ex, eu = X - X_ref, U - U_ref
    wx = np.einsum("kij,kj->ki", np.broadcast_to(Qs, (N, nx, nx)), ex[:N])
    wu = np.einsum("kij,kj->ki", np.broadcast_to(Rs, (N, nu, nu)), eu)
    K, kff, P = np.empty((N, nu, nx)), np.empty((N, nu)), np.empty((N + 1, nx, nx))
    status = lq_riccati(A, B, Qs, Rs, np.zeros((1, nu, nx)), wx, wu, Q_N, Q_N @ ex[N], K, kff, P, False)
    if status >= 0:
        raise RiccatiError(status)
    dX, dU = np.empty((N + 1, nx)), np.empty((N, nu))
    _affine_rollout(A, B, K, kff, dX, dU)
    return K, kff, dX, dU

def _fixed_point_problem(A, B, Q, R):
    """``A`` (nx, nx), ``B`` (nx, nu), ``Q`` symmetric positive semidefinite (nx, nx) and ``R``
    symmetric positive definite (nu, nu), checked and converted (the errors name the matrix)."""
    A = float_array("A", A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must have shape (nx, nx), got {A.shape}")
    nx = A.shape[0]
    B = float_array("B", B)
    if B.ndim != 2 or B.shape[0] != nx or B.shape[1] < 1:
        raise ValueError(f"B must have shape ({nx}, nu), got {B.shape}")
    nu = B.shape[1]
    return A, B, square_matrix("Q", Q, nx, definite=False), square_matrix("R", R, nu, definite=True)


def _stabilizing_solution(solve, who: str, equation: str, A, B, Q, R) -> np.ndarray:
    """``solve(A, B, Q, R)`` (scipy's ``solve_discrete_are`` or ``solve_continuous_are``);
    its failure as ``numpy.linalg.LinAlgError`` naming ``who`` and the ``equation``."""
    try:
        return solve(A, B, Q, R)
    except (np.linalg.LinAlgError, ValueError) as err:
        raise np.linalg.LinAlgError(f"{who}: no stabilizing {equation} solution ({err}); "
                                    "is (A, B) stabilizable and R positive definite?") from err


def dlqr(A, B, Q, R) -> tuple[np.ndarray, np.ndarray]:
    """Infinite-horizon discrete LQR about a fixed point (``scipy.linalg.solve_discrete_are``).

    Parameters
    ----------
    A : array_like, shape (nx, nx)
    B : array_like, shape (nx, nu)
        With ``nu >= 1``.
    Q : array_like, shape (nx, nx)
        Symmetric positive semi-definite (a scalar when ``nx = 1``).
    R : array_like, shape (nu, nu)
        Symmetric positive definite (a scalar when ``nu = 1``).

    Returns
    -------
    K : ndarray, shape (nu, nx)
        ``K = (R + BᵀPB)⁻¹ BᵀPA``, for ``u = −K x``.
    P : ndarray, shape (nx, nx)
        The stabilizing solution of the discrete algebraic Riccati equation (symmetrized).

    Raises
    ------
    ValueError
        A wrong shape, a non-finite or non-symmetric argument, a ``Q`` that is not positive
        semi-definite or an ``R`` that is not positive definite (named in the message).
    numpy.linalg.LinAlgError
        SciPy finds no stabilizing DARE solution (is ``(A, B)`` stabilizable?).
    """
    A, B, Q, R = _fixed_point_problem(A, B, Q, R)
    P = _stabilizing_solution(scipy.linalg.solve_discrete_are, "dlqr", "DARE", A, B, Q, R)
    K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
    return K, 0.5 * (P + P.T)


def lqr(A, B, Q, R) -> tuple[np.ndarray, np.ndarray]:
    """Infinite-horizon continuous LQR about a fixed point of ``ẋ = A x + B u``
    (``scipy.linalg.solve_continuous_are``; python-control's ``lqr``, Drake's
    ``LinearQuadraticRegulator``), e.g. for :meth:`core.System.linearize`'s ``(A, B)``.

    Minimizes ``∫ xᵀQx + uᵀRu dt``; ``P`` is the stabilizing solution of the continuous
    algebraic Riccati equation ``AᵀP + PA − PBR⁻¹BᵀP + Q = 0`` (every eigenvalue of ``A − BK``
    has a negative real part).

    Parameters
    ----------
    A, B, Q, R : array_like
        As for :func:`dlqr` (the same checks).

    Returns
    -------
    K : ndarray, shape (nu, nx)
        ``K = R⁻¹ BᵀP``, for ``u = −K x``.
    P : ndarray, shape (nx, nx)
        The stabilizing CARE solution (symmetrized).

    Raises
    ------
    ValueError
        As :func:`dlqr`.
    numpy.linalg.LinAlgError
        No stabilizing solution: SciPy's solve fails, its solution is not finite, or ``A − BK``
        has an eigenvalue with a non-negative real part (the pair is not stabilizable, or has
        modes on the imaginary axis that ``Q`` does not see).
    """
    A, B, Q, R = _fixed_point_problem(A, B, Q, R)
    P = _stabilizing_solution(scipy.linalg.solve_continuous_are, "lqr", "CARE", A, B, Q, R)
    if not np.all(np.isfinite(P)):
        raise np.linalg.LinAlgError("lqr: the CARE solution is not finite; is (A, B) stabilizable and "
                                    "R positive definite?")
    P = 0.5 * (P + P.T)
    K = np.linalg.solve(R, B.T @ P)
    closed = np.linalg.eigvals(A - B @ K)
    if not np.all(closed.real < 0.0):
        raise np.linalg.LinAlgError(f"lqr: no stabilizing CARE solution (A - B K has the eigenvalue "
                                    f"{closed[np.argmax(closed.real)]:.3g}); is (A, B) stabilizable and "
                                    "every mode on the imaginary axis seen by Q?")
    return K, P


class Controllability(NamedTuple):
    """Result of :func:`controllability`.

    Attributes
    ----------
    rank : int
        The numerical rank of ``matrix`` (the tolerance is :func:`controllability`'s ``rtol``).
    smallest_singular_value : float
        The smallest (the nx-th) singular value of ``matrix``.
    controllable : bool
        ``rank == nx``.
    matrix : ndarray, shape (nx, nx·nu) or (nx, nx)
        The controllability matrix ``[B, AB, …, A^{nx-1}B]`` (single pair) or the reachability
        Gramian (stacks).
    uncontrollable : tuple of str
        Single pair: each direction the inputs cannot move (Popov-Belevitch-Hautus: a left null
        vector ``w`` of ``[A - λI, B]``), as its eigenvalue and the state names (``names``) that
        make up most of ``w``; empty for stacks. Better conditioned than ``rank`` for large
        ``nx`` (``A^{nx-1}`` spans many orders of magnitude).
    """
    rank: int
    smallest_singular_value: float
    controllable: bool
    matrix: np.ndarray
    uncontrollable: tuple = ()


def _uncontrollable_modes(A, B, names, rtol) -> tuple:
    """The PBH directions of :class:`Controllability` (eigenvalues within ``1e-6`` of one another
    taken together: a repeated eigenvalue's modes)."""
    nx = A.shape[0]
    names = [f"x{i}" for i in range(nx)] if names is None else list(names)
    scale = max(float(np.linalg.norm(np.hstack([A, B]), 2)), 1e-300)
    out: list[str] = []
    seen: list = []
    for lam in np.linalg.eigvals(A):
        if any(abs(lam - m) <= 1e-6 * max(1.0, abs(m)) for m in seen):
            continue
        seen.append(lam)
        U, sv, _ = np.linalg.svd(np.hstack([A - lam * np.eye(nx), B]))
        rank = int(np.sum(sv > (rtol if rtol is not None else 1e-9) * scale))
        for w in U[:, rank:].T:
            weight = np.abs(w) ** 2
            top = np.argsort(weight)[::-1][:4]
            parts = ", ".join(f"{names[i]} {weight[i]:.2f}" for i in top if weight[i] >= 0.01)
            value = f"{lam.real:.4g}" if abs(lam.imag) < 1e-12 else f"{lam:.4g}"
            out.append(f"eigenvalue {value}: {parts}")
    return tuple(out)


def controllability(A, B, rtol: float | None = None, names=None) -> Controllability:
    """Controllability of ``x_{k+1} = A x_k + B u_k`` (2-D A, B) or reachability over a horizon of
    ``x_{k+1} = A_k x_k + B_k u_k`` (stacks).

    Single pair: rank and smallest (the nx-th) singular value of ``C = [B, AB, …, A^{nx-1}B]``.
    Stacks: the reachability Gramian ``W = Σ_k Φ(N,k+1) B_k B_kᵀ Φ(N,k+1)ᵀ`` with
    ``Φ(N,k+1) = A_{N-1}⋯A_{k+1}`` (every state reachable at k=N from x_0 = 0 iff W > 0).

    Parameters
    ----------
    A : array_like, shape (nx, nx) or (N, nx, nx)
    B : array_like, shape (nx, nu) or (N, nx, nu)
        With ``nu >= 1``.
    rtol : float, optional
        The rank counts singular values above ``rtol · σ_max`` (default
        ``rtol = max(shape) · eps``, as ``numpy.linalg.matrix_rank``; the PBH directions count
        those of ``[A - λI, B]`` below ``rtol · ||[A, B]||``, default ``1e-9``).
    names : sequence of str, optional
        The states' names, to name the uncontrollable directions (default ``x0, x1, …``).

    Returns
    -------
    Controllability
        ``controllable`` is ``rank == nx``.

    Raises
    ------
    ValueError
        A wrong shape (``A`` neither ``(nx, nx)`` nor ``(N, nx, nx)``, ``B`` not matching it) or
        a non-finite entry.
    """
    A = float_array("A", A)
    B = float_array("B", B)
    if A.ndim == 3:
        A, B = dynamics_stack(A, B)
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
    modes = _uncontrollable_modes(A, B, names, rtol) if A.ndim == 2 else ()
    return Controllability(rank, float(s[nx - 1]), rank == nx, M, modes)
