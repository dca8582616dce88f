"""LQR weights on the discrete state ``x = [q, p, v]`` (ROS-free).

A weight is given as a diagonal (``nx`` numbers) or a full row-major matrix (``nx * nx``
numbers) and must be symmetric positive semi-definite (``R``: definite). The terminal weight
``Q_N`` may be left out: the gain schedule then uses the solution of the discrete algebraic
Riccati equation at the last step (:func:`mechnode.gains.terminal_weight`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InputError


def weight_matrix(values, n: int, name: str, definite: bool = False) -> np.ndarray:
    """A symmetric ``n x n`` weight from ``n`` diagonal entries or ``n*n`` row-major entries;
    positive semi-definite (``definite``: positive definite). Raises InputError."""
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float).ravel()
    if v.size == n:
        W = np.diag(v)
    elif v.size == n * n:
        W = v.reshape(n, n)
    else:
        raise InputError(f"{name} needs {n} (diagonal) or {n * n} (full) numbers, got {v.size}")
    if not np.all(np.isfinite(W)):
        raise InputError(f"{name} has non-finite entries")
    if not np.allclose(W, W.T, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(W).max())):
        raise InputError(f"{name} is not symmetric")
    W = 0.5 * (W + W.T)
    eig = np.linalg.eigvalsh(W) if n else np.zeros(0)
    scale = max(1.0, float(np.abs(eig).max())) if n else 1.0
    if definite and not np.all(eig > 1e-12 * scale):
        raise InputError(f"{name} must be positive definite (smallest eigenvalue {eig.min():.3g})")
    if not definite and not np.all(eig >= -1e-12 * scale):
        raise InputError(f"{name} must be positive semi-definite (smallest eigenvalue {eig.min():.3g})")
    return W


@dataclass(frozen=True)
class Weights:
    """LQR weights on the discrete state ``[q, p, v]``; ``Q_N`` None = DARE at the last step."""
    Q: np.ndarray
    R: np.ndarray
    Q_N: np.ndarray | None = None

    @classmethod
    def from_values(cls, plant, Q, R, Q_N=()) -> "Weights":
        return cls(weight_matrix(Q, plant.nx, "Q"), weight_matrix(R, plant.nu, "R", definite=True),
                   weight_matrix(Q_N, plant.nx, "Q_N") if len(Q_N) else None)


def check_weight_values(values, name: str, allow_empty: bool = False) -> None:
    """Size-independent checks of a weight parameter (before the model is known)."""
    v = list(values)
    if not v:
        if allow_empty:
            return
        raise InputError(f"{name} must not be empty")
    a = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} has non-finite entries")
    n = int(round(np.sqrt(a.size)))
    if n * n != a.size and np.any(a < 0):
        raise InputError(f"{name}: diagonal weights must be >= 0")
