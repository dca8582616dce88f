"""The line search of the trajectory optimizer (:mod:`core.control.optimal`): Armijo
backtracking on projected trial trajectories (Hauser's projection operator, the DDP forward
pass)::

    ũ_k = u_k + γ kff_k − K_k (x̃_k − x_k),   x̃_{k+1} = step(x̃_k, ũ_k),

accepting the first ``γ = backtrack^j`` with ``ΔJ(γ) ≤ armijo·γ·slope`` plus round-off slack.
"""
from __future__ import annotations

import numpy as np

from core.control.costs import apply_weight, tracking_cost, weighted_errors
from core.control.directions import Direction
from core.control.simulation import next_state


def projected_rollout(pb, x, u, d: Direction, gamma: float):
    """Trial trajectory ``ũ_k = u_k + γ kff_k − K_k (x̃_k − x_k)``, ``x̃_{k+1} = step(x̃_k, ũ_k)``
    (Hauser's projection operator; the DDP forward pass). Returns None if the rollout fails."""
    N = u.shape[0]
    xt, ut = np.empty_like(x), np.empty_like(u)
    xt[0] = pb.x0 if d.dx0 is None else x[0] + gamma * d.dx0
    step = pb.system.step
    closed_loop = getattr(pb.system, "closed_loop", None)       # MidpointVI: the loop compiled
    with np.errstate(all="ignore"):
        try:
            if closed_loop is not None:     # the law u_k = (u_k + γ kff_k) − K_k (x̃_k − x_k)
                xt, ut, _, _ = closed_loop(xt[0], x, u + gamma * d.kff, d.K, linearize=False)
            else:
                for k in range(N):
                    ut[k] = u[k] + gamma * d.kff[k] - d.K[k] @ (xt[k] - x[k])
                    xt[k + 1] = next_state(step, xt[k], ut[k], k)
        except (ArithmeticError, np.linalg.LinAlgError):
            return None
        if not (np.all(np.isfinite(xt)) and np.all(np.isfinite(ut))):
            return None
        return xt, ut


def _cost_change(pb, x, u, xt, ut) -> float:
    """``J(xt, ut) − J(x, u)`` as ``½Σ Δᵀ W (Δ + 2δ)`` (Δ = trial − current, δ = current − ref):
    no cancellation between two large sums, so small decreases stay resolvable."""
    N = u.shape[0]
    dx, du, wx, wu, w_N = weighted_errors(pb, x, u)
    Dx, Du = xt - x, ut - u
    WDx, WDu = apply_weight(pb.Qs, Dx[:N]), apply_weight(pb.Rs, Du)
    return (float(np.sum(Dx[:N] * (0.5 * WDx + wx)) + np.sum(Du * (0.5 * WDu + wu)))
            + float(Dx[N] @ (0.5 * pb.Q_N @ Dx[N] + w_N)))


def line_search(pb, x, u, J, d: Direction, armijo, backtrack, max_backtracks, beat: float = 0.0):
    """Armijo backtracking on the projected trajectory: accept the first γ = backtrack^j with
    ``ΔJ(γ) ≤ armijo·γ·slope + 8·eps·(J + J(γ))`` (the last term absorbs round-off in J).

    ``beat > 0`` (a second candidate, to be kept only if it decreases the cost by more than
    ``beat``): the search stops at the first γ where the direction's quadratic model cannot
    decrease it that much, ``|slope| (γ + γ²/2) < beat``. (The LQ model of a direction ``d``
    that solves it has curvature ``dᵀHd = −slope``, so the model's decrease
    ``−(γ slope + ½ γ² dᵀHd)`` is at most ``|slope| (γ + γ²/2)``, for the Newton direction or its
    reverse; it shrinks with γ, and backtracking only shrinks γ.)"""
    gamma = 1.0
    for j in range(max_backtracks + 1):
        if beat > 0 and abs(d.slope) * (gamma + 0.5 * gamma * gamma) < beat:
            return None
        trial = projected_rollout(pb, x, u, d, gamma)
        if trial is not None:
            J_trial = tracking_cost(pb, *trial)
            slack = 8 * np.finfo(float).eps * (abs(J) + abs(J_trial))
            if (np.isfinite(J_trial)
                    and _cost_change(pb, x, u, *trial) <= armijo * gamma * d.slope + slack):
                return trial[0], trial[1], J_trial, gamma, j
        gamma *= backtrack
    return None
