"""LQR weights on the discrete state ``x = [q, p, v]`` (ROS-free).

A weight is given as a diagonal (``nx`` numbers) or a full row-major matrix (``nx * nx``
numbers) and must be symmetric positive semi-definite (``R``: definite). The terminal weight
``Q_N`` may be left out: the gain schedule then uses the solution of the discrete algebraic
Riccati equation at the last step (:func:`mechnode.logic.gains.terminal_weight`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import core
from mechnode.errors import InputError


def weight_matrix(values, n: int, name: str, definite: bool = False) -> np.ndarray:
    """:func:`core.validation.weight_matrix` (diagonal or full, symmetric, semi-definite or with
    ``definite`` definite), its errors raised as :class:`InputError`."""
    try:
        return core.validation.weight_matrix(values, n, name, definite)
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


def check_weight_values(values, name: str, allow_empty: bool = False, definite: bool = False) -> None:
    """Size-independent checks of a weight parameter (before the model is known): finite, and
    valid as a diagonal (entries >= 0; ``definite``: > 0) or, when the count is a square k*k,
    as a full symmetric positive (semi-)definite k x k matrix."""
    v = list(values)
    if not v:
        if allow_empty:
            return
        raise InputError(f"{name} must not be empty")
    a = np.asarray(v, dtype=float)
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise InputError(f"{name} has non-finite entries: {name}[{bad[0]}] = {a[bad[0]]}")
    bad = np.flatnonzero(a <= 0 if definite else a < 0)
    if not bad.size:
        return                                  # a valid diagonal
    k = int(round(np.sqrt(a.size)))
    if k > 1 and k * k == a.size:
        try:
            core.validation.weight_matrix(a, k, name, definite)
            return                              # a valid full matrix
        except ValueError as exc:
            full = f"; as a full {k} x {k} matrix: {exc}"
    else:
        full = ""
    i = int(bad[0])
    raise InputError(f"{name}[{i}] = {float(a[i])!r}: diagonal weights must be {'> 0' if definite else '>= 0'}"
                     + full)
