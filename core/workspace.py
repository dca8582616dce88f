"""Per-evaluation scratch, made from a model (Pinocchio's ``model.createData()``).

A :class:`Workspace` belongs to one compiled :class:`core.model.Model` and hands each thread its
own scratch, so evaluations of one model from several threads never share arrays::

    ws = system.workspace            # made when the system is compiled
    data, der = ws.get()             # this thread's kinematics Data and Lagrangian derivatives
    data, der = ws.get(third_order=True)   # with the (n, n, n) third-derivative arrays
    buf = ws.buffer("second_order", size)  # this thread's named work array of that size

Kernels write into these arrays and callers copy what they hand out; nothing in a workspace is
ever returned to a user.
"""
from __future__ import annotations

import threading

import numpy as np

from .kinematics import create_data
from .lagrangian import create_derivs
from .model import Model


class Workspace:
    """Thread-local scratch for evaluations of ``model``."""

    def __init__(self, model: Model):
        self.model = model
        self._local = threading.local()

    def get(self, third_order: bool = False):
        """``(data, der)`` of the calling thread: kinematics scratch and Lagrangian derivative
        arrays (with ``third_order``, also the third derivatives and the joint-pair tables they
        need: ``O(n³)`` and ``O(n²)`` memory that first-order work does not allocate)."""
        local = self._local.__dict__
        key = "third" if third_order else "second"
        pair = local.get(key)
        if pair is None:
            pair = local[key] = (create_data(self.model, third_order), create_derivs(self.model.nq, third_order))
        return pair

    def buffer(self, name: str, shape, dtype=np.float64) -> np.ndarray:
        """The calling thread's work array ``name`` with this shape (reallocated only when the
        shape or type changes; its contents are whatever the last user left)."""
        local = self._local.__dict__
        arr = local.get(name)
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        if arr is None or arr.shape != shape or arr.dtype != dtype:
            arr = local[name] = np.empty(shape, dtype)
        return arr
