"""The directions of the trajectory optimizer (:mod:`core.control.optimal`): the
linear-quadratic subproblem of each iteration, its quadratic models, and the feedback that
projects trial trajectories.

Along the current trajectory with linearizations ``(A_k, B_k)``, the direction ``(z, v)``
(``z_{k+1} = A_k z_k + B_k v_k``, ``z_0 = 0``) minimizes ``Σ g_k·v_k`` plus a quadratic model:

* ``newton`` (the second-order model): the Hessian of the cost composed with the projection,
  ``diag(Q_k, R_k) + Σ_i λ_{k+1,i} H_k[i]`` with the closed-loop costate
  ``λ_k = wx_k − K_kᵀ wu_k + (A_k − B_k K_k)ᵀ λ_{k+1}`` (``newton_indefinite`` where it is not
  convex: LU instead of Cholesky solves, as trep);
* ``gauss_newton``: the cost's own ``diag(Q_k, R_k)``;
* ``identity``: steepest descent.

A direction whose slope is not negative falls back along :data:`FALLBACK`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from core.base.jit import njit
from core.control.costs import CostData
from core.control.riccati import lq_riccati, tvlqr_checked
from core.errors import RiccatiError


@njit(cache=True, nogil=True)
def closed_loop_costate(A, B, K, wx, wu, w_N):
    """Costate of the cost composed with the projection ``u = ū − K(x − x̄)``:
    ``λ_N = w_N``, ``λ_k = wx_k − K_kᵀ wu_k + (A_k − B_k K_k)ᵀ λ_{k+1}``."""
    N, nx, nu = B.shape
    lam = np.empty((N + 1, nx))
    lam[N] = w_N
    for k in range(N - 1, -1, -1):
        lam[k] = wx[k] - K[k].T @ wu[k] + (A[k] - B[k] @ K[k]).T @ lam[k + 1]
    return lam


@njit(cache=True, nogil=True)
def linear_response(A, B, K, kff):
    """Roll out ``z_0 = 0``, ``v_k = kff_k − K_k z_k``, ``z_{k+1} = A_k z_k + B_k v_k``."""
    N, nx, nu = B.shape
    z = np.zeros((N + 1, nx))
    v = np.empty((N, nu))
    for k in range(N):
        v[k] = kff[k] - K[k] @ z[k]
        z[k + 1] = A[k] @ z[k] + B[k] @ v[k]
    return z, v


class Direction(NamedTuple):
    K: np.ndarray        # (N, nu, nx) feedback used to project trial trajectories
    kff: np.ndarray      # (N, nu) feedforward of the projected update
    slope: float         # directional derivative Σ g_k · v_k of J along the direction
    model: str           # quadratic model that produced it: newton, gauss_newton or identity
                         # (newton_reversed: the Newton direction reversed, see descent_direction)
    alternative: "Direction | None" = None   # a second candidate, also line-searched
    dx0: np.ndarray | None = None   # (nx,) initial-state change z_0 (optimize_ic), else z_0 = 0


def newton_weights(pb: CostData, W: np.ndarray, nx: int):
    """Hessian blocks of the Lagrangian ``diag(Q_k, R_k) + W_k`` from the dynamics' curvature
    along the costate, ``W_k = Σ_i λ_{k+1,i} H_k[i]``."""
    W = 0.5 * (W + np.swapaxes(W, 1, 2))
    Wxx = np.ascontiguousarray(W[:, :nx, :nx] + pb.Qs)
    Wuu = np.ascontiguousarray(W[:, nx:, nx:] + pb.Rs)
    Wux = np.ascontiguousarray(W[:, nx:, :nx])
    return Wxx, Wuu, Wux


def _solve_lq(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N, indefinite=False):
    """Policy ``(K, kff)`` of the LQ subproblem and its value Hessian ``P_0``, or None where it
    is not convex. ``indefinite``: LU instead of Cholesky solves, as trep's ``solve_tv_lq``: the
    stationary point of a non-convex LQ subproblem (None if singular or not finite)."""
    N, nx, nu = B.shape
    K, kff, P = np.empty((N, nu, nx)), np.empty((N, nu)), np.empty((N + 1, nx, nx))
    status = lq_riccati(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N, K, kff, P, indefinite)
    if status >= 0 or (indefinite and not (np.all(np.isfinite(K)) and np.all(np.isfinite(kff)))):
        return None
    return K, kff, P[0]


def projection_gains(A, B, Qproj=None, Rproj=None) -> np.ndarray:
    """Feedback of the projection operator: time-varying LQR with weights ``Qproj`` (running
    and terminal) and ``Rproj`` (trep's defaults: identities) along the current linearization.
    The weights are :func:`core.control.optimal._projection_weights`' stacks, checked once for the whole run."""
    nx, nu = A.shape[1], B.shape[2]
    if Qproj is None:
        Qproj = np.eye(nx)[None]
    if Rproj is None:
        Rproj = np.eye(nu)[None]
    Q_run = Qproj if Qproj.shape[0] == 1 else Qproj[:-1]
    return tvlqr_checked(A, B, Q_run, Rproj, Qproj[-1])[0]


FALLBACK = {"second_order": "first_order", "first_order": "steepest_descent"}


def _value_gradient(A, W, wx, wu, w_N, z, v) -> np.ndarray:
    """``p_0 = ∇V_0(0)`` of the LQ subproblem's value function, along its solution ``(z, v)``
    from ``z_0 = 0``: ``μ_N = P_N z_N + p_N``, ``μ_k = wx_k + Wxx_k z_k + Wux_kᵀ v_k + A_kᵀ μ_{k+1}``
    (envelope theorem)."""
    Wxx, _, Wux, P_N = W
    N = A.shape[0]
    at = lambda M, k: M[k if M.shape[0] > 1 else 0]  # noqa: E731
    mu = P_N @ z[N] + w_N
    for k in range(N - 1, -1, -1):
        mu = at(wx, k) + at(Wxx, k) @ z[k] + at(Wux, k).T @ v[k] + A[k].T @ mu
    return mu


def model_direction(pb, method, A, B, curvature, lam_model, g, wx, wu, w_N, Kp, lam=None):
    """The LQ subproblem's direction for one model, or None if its Riccati pass is singular.
    ``curvature(λ)``: the dynamics' second order contracted with the costate ``λ`` (N+1, nx),
    ``Σ_i λ_{k+1,i} H_k[i]`` (the Newton model's).
    With ``lam`` (the open-loop costate; optimize_ic) the initial state is free too: trep's
    ``z_0 = −P_0⁻¹ p_0`` minimizes the LQ subproblem's value ``½ z_0ᵀP_0 z_0 + p_0ᵀz_0``."""
    nx, nu = A.shape[1], B.shape[2]
    no_cross = np.zeros((1, nu, nx))
    if method == "second_order":
        W, model = (*newton_weights(pb, curvature(lam_model), nx), pb.Q_N), "newton"
    elif method == "first_order":
        W, model = (pb.Qs, pb.Rs, no_cross, pb.Q_N), "gauss_newton"
    else:
        # trep's "steepest" model: identity weights on the whole tangent trajectory (z_k, v_k),
        # i.e. the gradient in the metric Σ |z_k|² + |v_k|².
        W, model = (np.eye(nx)[None], np.eye(nu)[None], no_cross, np.eye(nx)), "identity"
    policy = _solve_lq(A, B, W[0], W[1], W[2], wx, wu, W[3], w_N)
    if policy is None and method == "second_order":
        # not convex: trep solves it anyway (LU) and keeps the direction if it descends
        policy = _solve_lq(A, B, W[0], W[1], W[2], wx, wu, W[3], w_N, indefinite=True)
        model = "newton_indefinite"
    if policy is None:
        return None
    K, kff, P0 = policy
    z, v = linear_response(A, B, K, kff)
    dx0 = None
    if lam is not None:
        try:
            dx0 = -np.linalg.solve(P0, _value_gradient(A, W, wx, wu, w_N, z, v))
        except np.linalg.LinAlgError:
            return None
        zh = np.empty_like(z)          # response to z_0 = dx0 under v_k = −K_k z_k
        zh[0] = dx0
        for k in range(A.shape[0]):
            vh = -K[k] @ zh[k]
            v[k] += vh
            zh[k + 1] = A[k] @ zh[k] + B[k] @ vh
        z = z + zh
    slope = float(np.sum(g * v)) + (0.0 if dx0 is None else float(lam[0] @ dx0))
    if Kp is not None:
        # ũ_k = u_k + γ v_k − Kp_k (x̃_k − x_k − γ z_k): the same tangent (z, v) at γ = 0.
        kff = v + np.einsum("kij,kj->ki", Kp, z[:-1])
        K = Kp
    return Direction(K, kff, slope, model, dx0=dx0)


def descent_direction(pb, method, projection, A, B, curvature, lam, g, wx, wu, w_N,
                       negative_curvature=False, Qproj=None, Rproj=None,
                       optimize_ic=False) -> Direction:
    """The LQ subproblem's direction ``(z, v)`` and the feedback that projects trial trajectories.

    Models (weights of the LQ subproblem's quadratic part): ``newton`` (second_order; the
    Hessian of the cost composed with the projection; ``newton_indefinite`` where that is not
    convex and the Riccati pass uses LU solves, as trep's), ``gauss_newton`` (first_order: the
    cost's own ``Q, R``) and ``identity`` (steepest_descent). trep's fallback chain: where the
    directional derivative of a model's direction is not negative, the next model is used,
    newton → gauss_newton → identity. ``negative_curvature``: where the Newton model is not
    convex, the Gauss-Newton direction is returned with the Newton direction as its
    ``alternative`` (reversed, ``newton_reversed``, if it ascends: then it descends along
    negative model curvature); the caller line-searches both and keeps the lower cost.
    ``projection="lqr"``: trial trajectories follow the fixed gains ``Kp`` = LQR(Qproj, Rproj)
    and the Newton model uses the matching closed-loop costate; ``projection="direction"``:
    they follow the LQ policy's own gains (DDP's forward pass) and the open-loop costate.
    """
    Kp = projection_gains(A, B, Qproj, Rproj) if projection == "lqr" else None
    lam_model = lam
    if method == "second_order" and Kp is not None:
        lam_model = closed_loop_costate(A, B, Kp, wx, wu, w_N)
    alternative, d = None, None
    while True:
        d = model_direction(pb, method, A, B, curvature, lam_model, g, wx, wu, w_N, Kp,
                             lam if optimize_ic else None)
        if negative_curvature and d is not None and d.model == "newton_indefinite":
            if np.isfinite(d.slope) and d.slope != 0:
                alternative = d if d.slope < 0 else d._replace(
                    kff=-d.kff, slope=-d.slope, model="newton_reversed",
                    dx0=None if d.dx0 is None else -d.dx0)
            method = FALLBACK[method]
            continue
        if d is not None and np.isfinite(d.slope) and not d.slope > 0:
            break
        if method not in FALLBACK:
            break
        method = FALLBACK[method]
    if d is None:
        raise RiccatiError(0, "the LQ subproblem (Q, Q_N positive semi-definite and R positive "
                              "definite make it convex; are the linearizations finite?)")
    return d._replace(alternative=alternative)
