"""Simulation of a discrete system ``x_k+1 = step(x_k, u_k)``, open loop or under a
time-varying LQR law ``u_k = u_ref,k - K_k (x_k - x_ref,k)`` (:mod:`core.conventions`)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from core.validation import float_array


def initial_state(x0) -> np.ndarray:
    x0 = float_array("x0", x0)
    if x0.ndim != 1:
        raise ValueError(f"x0 must have shape (nx,), got {x0.shape}")
    return x0


def next_state(step: Callable, x: np.ndarray, u: np.ndarray, k: int) -> np.ndarray:
    x_next = np.asarray(step(x, u), dtype=np.float64)
    if x_next.shape != x.shape:
        raise ValueError(f"step(x, u) must return shape {x.shape}, got {x_next.shape} at k={k}")
    return x_next


def simulate_open_loop(step: Callable, x0, u) -> np.ndarray:
    """Simulate ``x_{k+1} = step(x_k, u_k)`` open loop.

    Parameters
    ----------
    step : callable
        ``step(x, u) -> x_next``, of the shape of ``x``.
    x0 : array_like, shape (nx,)
        The initial state.
    u : array_like, shape (N, nu)
        The inputs.

    Returns
    -------
    x : ndarray, shape (N+1, nx)
        The states. Non-finite states are propagated, not raised.

    Raises
    ------
    ValueError
        ``x0`` not a vector or ``u`` not 2-D, a non-finite entry of ``x0`` or ``u``, or ``step``
        returning another shape than the state's (naming the step ``k``).
    """
    x0 = initial_state(x0)
    u = float_array("u", u)
    if u.ndim != 2:
        raise ValueError(f"u must have shape (N, nu), got {u.shape}")
    x = np.empty((u.shape[0] + 1, x0.size))
    x[0] = x0
    for k in range(u.shape[0]):
        x[k + 1] = next_state(step, x[k], u[k], k)
    return x


def simulate_closed_loop(step: Callable, x0, x_ref, u_ref, K) -> tuple[np.ndarray, np.ndarray]:
    """Simulate ``x_{k+1} = step(x_k, ū_k)`` with ``ū_k = u_ref[k] − K[k] (x_k − x_ref[k])``.

    Parameters
    ----------
    step : callable
        Any ``step(x, u) -> x_next`` (e.g. the variational integrator's step).
    x0 : array_like, shape (nx,)
        The initial state.
    x_ref : array_like, shape (N+1, nx) or (N, nx)
        Reference states (only ``x_ref[:N]`` is used).
    u_ref : array_like, shape (N, nu)
        Reference inputs.
    K : array_like, shape (N, nu, nx)
        Gains, e.g. from :func:`tvlqr` on the linearization about the reference.

    Returns
    -------
    x : ndarray, shape (N+1, nx)
        The states.
    u : ndarray, shape (N, nu)
        The applied inputs.

    Raises
    ------
    ValueError
        A shape that does not match (``N``, ``nu`` are taken from ``K``, ``nx`` from ``x0``), a
        non-finite entry of an argument, or ``step`` returning another shape than the state's
        (naming the step ``k``).
    """
    x0 = initial_state(x0)
    nx = x0.size
    K = float_array("K", K)
    if K.ndim != 3 or K.shape[2] != nx:
        raise ValueError(f"K must have shape (N, nu, {nx}), got {K.shape}")
    N, nu = K.shape[0], K.shape[1]
    u_ref = float_array("u_ref", u_ref)
    if u_ref.shape != (N, nu):
        raise ValueError(f"u_ref must have shape ({N}, {nu}) to match K {K.shape}, "
                         f"got {u_ref.shape}")
    x_ref = float_array("x_ref", x_ref)
    if x_ref.ndim != 2 or x_ref.shape[1] != nx or x_ref.shape[0] not in (N, N + 1):
        raise ValueError(f"x_ref must have shape ({N + 1}, {nx}) or ({N}, {nx}), got {x_ref.shape}")
    x = np.empty((N + 1, nx))
    u = np.empty((N, nu))
    x[0] = x0
    for k in range(N):
        u[k] = u_ref[k] - K[k] @ (x[k] - x_ref[k])
        x[k + 1] = next_state(step, x[k], u[k], k)
    return x, u
