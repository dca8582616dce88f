"""Dynamically feasible discrete trajectories near a reference (ROS-free).

Along configurations ``Q`` the discrete state follows from the exact Legendre transform
``p_0 = M(q_0) qdot_0`` and ``p_k = D2 L_d(q_k-1, q_k)``; the inputs from DEL inverse dynamics
(least squares, exact where the system is fully actuated). If the DEL residual stays above the
tolerance (underactuated, constrained) ``core.optimize_trajectory`` tracks the reference from
``x_0`` instead, seeded with a closed-loop TV-LQR rollout (every iterate of it is a rollout of
the integrator, hence feasible).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

import core
from mechnode.errors import InputError
from mechnode.logic.gains import tvlqr_gains
from mechnode.logic.weights import Weights


@dataclass
class Feasible:
    """A dynamically feasible discrete trajectory: states X (N+1, nx), inputs U (N, nu)."""
    X: np.ndarray
    U: np.ndarray
    method: str                 # "inverse_dynamics", "optimizer" or "as_given"
    residual: float             # largest relative DEL residual of the inverse-dynamics pass
    message: str = ""
    iterations: int = 0
    converged: bool = True
    cost: float = 0.0
    seconds: float = 0.0


def discrete_reference(plant, Q, dq0):
    """``(X, U_ls, residual)``: the discrete state along configurations ``Q`` (N+1, n) —
    ``p_0`` by the Legendre transform of ``dq0``, ``p_k = D2 L_d(q_k-1, q_k)``, ``v_k`` by
    differences — the least-squares DEL inputs and the per-step DEL residual."""
    Q = np.ascontiguousarray(Q, dtype=float)
    p0 = plant.vi.discrete_state(Q[0], dq0)[plant.n:plant.n + plant.nd]
    U, P, resid = plant.vi.inverse_dynamics(Q, p0)
    V = np.empty((Q.shape[0], plant.nk))
    if plant.nk:
        V[0] = np.asarray(dq0, dtype=float)[plant.kin]
        V[1:] = np.diff(Q[:, plant.kin], axis=0) / plant.dt
    return np.hstack([Q, P, V]), U, resid


def make_feasible(plant, Q, dq0, weights: "Weights", mode: str = "auto",
                  optimizer_method: str = "first_order", tolerance: float = 1e-6,
                  max_iterations: int = 30, feasibility_tolerance: float = 1e-9,
                  time_limit: float | None = None) -> Feasible:
    """A feasible (X, U) near the configurations ``Q`` (see the module docstring).

    ``mode``: ``"auto"`` (inverse dynamics when its residual is below ``feasibility_tolerance``,
    otherwise the optimizer), ``"inverse_dynamics"`` (fails if the residual is too large),
    ``"optimizer"`` (always optimize) or ``"none"`` (use the discrete reference and the
    least-squares inputs as they are). ``time_limit``: seconds after which the optimizer starts
    no further iteration (its last iterate is feasible).
    """
    t0 = time.perf_counter()
    X, U, resid = discrete_reference(plant, Q, dq0)
    worst = float(resid.max()) if resid.size else 0.0
    if mode == "none":
        return Feasible(X, U, "as_given", worst, "used as given (feasibility: none)",
                        seconds=time.perf_counter() - t0)
    if mode in ("auto", "inverse_dynamics") and worst <= feasibility_tolerance:
        return Feasible(X, U, "inverse_dynamics", worst, "", seconds=time.perf_counter() - t0)
    if mode == "inverse_dynamics":
        k = int(np.argmax(resid))
        raise InputError(f"the reference is not dynamically feasible for this {plant.actuation} "
                         f"system: DEL residual {worst:.3e} at step {k} (feasibility "
                         "'inverse_dynamics' needs a fully actuated, unconstrained system)")
    if mode not in ("auto", "optimizer"):
        raise InputError(f"unknown feasibility mode {mode!r}")
    # Initial guess: a closed-loop rollout of the integrator under TV-LQR tracking of the
    # (infeasible) reference — feasible and close to it even for unstable systems, where an
    # open-loop rollout of the least-squares inputs would diverge.
    K, _ = tvlqr_gains(plant, X, U, weights)
    Xc, Uc = core.simulate_closed_loop(plant.vi.step, X[0], X, U, K)
    if not (np.all(np.isfinite(Xc)) and np.all(np.isfinite(Uc))):
        raise InputError("the reference cannot be tracked: the closed-loop rollout that seeds the "
                         "trajectory optimizer failed (DEL solve diverged)")
    if max_iterations == 0:
        return Feasible(Xc, Uc, "optimizer", worst, "closed-loop rollout (0 optimizer iterations)",
                        0, False, float("nan"), time.perf_counter() - t0)
    QN = weights.Q_N if weights.Q_N is not None else weights.Q
    result = core.optimize_trajectory(plant.vi, X[0], X, U, weights.Q, weights.R,
                                      QN, method=optimizer_method, u_init=Uc, tol=tolerance,
                                      max_iterations=max_iterations, time_limit=time_limit)
    msg = (f"optimizer ({optimizer_method}) from a closed-loop rollout: {result.iterations} "
           f"iterations, cost {result.cost:.4g}, {result.message}")
    return Feasible(result.x, result.u, "optimizer", worst, msg, result.iterations,
                    result.converged, float(result.cost), time.perf_counter() - t0)
