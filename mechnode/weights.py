"""LQR weights on the discrete state ``x = [q, p, v]`` (ROS-free).

A weight is given as a diagonal (``nx`` numbers) or a full row-major matrix (``nx * nx``
numbers) and must be symmetric positive semi-definite (``R``: definite). The terminal weight
``Q_N`` may be left out: the gain schedule then uses the solution of the discrete algebraic
Riccati equation at the last step (:func:`mechnode.gains.terminal_weight`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import core

from .errors import InputError


def weight_matrix(values, n: int, name: str, definite: bool = False) -> np.ndarray:
    """:func:`core.weight_matrix` (diagonal or full, symmetric, semi-definite or with
    ``definite`` definite), its errors raised as :class:`InputError`."""
    try:
        return core.weight_matrix(values, n, name, definite)
    except ValueError as exc:
        raise InputError(str(exc)) from None


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
