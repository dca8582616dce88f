"""Many states in one call: ``System.qdd`` and ``System.linearize`` on stacks of states.

``q``, ``dq`` of shape ``(N, n)`` and ``u`` of shape ``(N, nu)`` (or ``None``: zero inputs) give
``ddq`` of shape ``(N, n)``, or ``A`` of shape ``(N, 2n, 2n)`` and ``B`` of shape ``(N, 2n, nu)``:
row ``k`` is exactly what the single call at ``(q[k], dq[k], u[k])`` returns (the same kernel
runs on it). For a system without constraints, kinematic variables or a quaternion base, the
states are split into contiguous chunks evaluated in parallel threads (numba's thread count,
``numba.set_num_threads``) in one compiled call without the GIL; otherwise the points are
evaluated one after the other through the single call. The first point that fails raises the
single call's error, prefixed with its index.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from core.base.chunks import chunk
from core.base.jit import njit
from core.continuous.dynamics import forward_dynamics, linearize_plain
from core.errors import OK
from core.tree.kinematics import copy_data
from core.tree.workspace import Evaluation, Work
from core.validation import check_memory, float_stack, ndim


@njit(cache=True, nogil=True)
def _own_evaluation(ev):
    """A copy of ``ev`` with its own Data, Work and status (for one parallel chunk)."""
    w = ev.work
    work = Work(w.Ib.copy(), w.has_mass.copy(), w.M.copy(), w.L.copy(), w.Vs_q.copy(), w.Ks.copy(),
                w.Ap.copy(), w.Ff.copy(), w.tau.copy(), w.F.copy(), w.Fq.copy(), w.Fv.copy(), w.Fu.copy(),
                w.dtau_dq.copy(), w.dtau_dv.copy(), w.X.copy(), w.ddq.copy(), np.zeros(w.zeros.shape[0]),
                w.IA.copy(), w.pA.copy(), w.Af.copy(), w.live.copy(), w.U.copy(), w.cj.copy(), w.Dj.copy(),
                w.uj.copy(), w.v6.copy(), w.e2, w.e3)
    return Evaluation(ev.model, copy_data(ev.data), work, ev.dyn, ev.kin, np.zeros(2, np.int64))


@njit(cache=True, nogil=True, parallel=True)
def _qdd_stack(ev, Q, DQ, U, DDQ, status, nchunks):
    """``DDQ[k]`` = :func:`core.continuous.dynamics.forward_dynamics` at ``(Q[k], DQ[k], U[k])`` for every
    ``k``, in ``nchunks`` contiguous chunks in parallel (:func:`core.base.chunks.chunk`);
    ``status[k]`` its status."""
    N = Q.shape[0]
    for c in prange(nchunks):
        own = _own_evaluation(ev)
        start, stop = chunk(c, N, nchunks)
        for k in range(start, stop):
            forward_dynamics(own, Q[k], DQ[k], U[k], DDQ[k])
            status[k, 0], status[k, 1] = own.status[0], own.status[1]


@njit(cache=True, nogil=True, parallel=True)
def _linearize_stack(ev, Q, DQ, U, A, B, status, nchunks):
    """``(A[k], B[k])`` = :func:`core.continuous.dynamics.linearize_plain` at ``(Q[k], DQ[k], U[k])`` for
    every ``k``, in ``nchunks`` contiguous chunks in parallel (:func:`core.base.chunks.chunk`);
    ``status[k]`` its status."""
    N = Q.shape[0]
    for c in prange(nchunks):
        own = _own_evaluation(ev)
        start, stop = chunk(c, N, nchunks)
        for k in range(start, stop):
            linearize_plain(own, Q[k], DQ[k], U[k], A[k], B[k])
            status[k, 0], status[k, 1] = own.status[0], own.status[1]


def is_stack(q) -> bool:
    """Whether ``q`` is a stack of states (two-dimensional) rather than one state."""
    return ndim(q) == 2


def _stacks(system, q, dq, u, nu: int):
    """``(Q, DQ, U)`` checked: finite float64 stacks of one length ``N``."""
    n = system.nq
    Q = float_stack("q", q, (None, n))
    N = Q.shape[0]
    DQ = float_stack("dq", dq, (N, system.nv))
    U = np.zeros((N, nu)) if u is None else float_stack("u", u, (N, nu))
    return Q, DQ, U


def _chunks(system, N: int) -> int:
    """Parallel chunks for ``N`` points, 0 where the single call must run point by point."""
    ws = system.workspace
    if not ws.plain or ws.kin.shape[0] or system._free_flyer:
        return 0
    return max(1, min(N, numba.get_num_threads()))


def raise_at_point(k: int, single, *point, where: str = "point {k} of the stack") -> None:
    """Re-run the single call at point ``k`` to raise its own error, naming the point
    (``where``, formatted with ``k``)."""
    where = where.format(k=k)
    try:
        single(*point)
    except Exception as e:      # the same error (type and attributes), its message prefixed
        if e.args and isinstance(e.args[0], str):
            e.args = (f"{where}: {e.args[0]}",) + e.args[1:]
        raise
    raise RuntimeError(f"{where} failed, but not as a single call")  # pragma: no cover


def qdd(system, q, dq, u=None) -> np.ndarray:
    """``ddq`` (N x n) of each state of a stack (see the module docstring)."""
    Q, DQ, U = _stacks(system, q, dq, u, len(system.continuous_input_names))
    N, nv = Q.shape[0], system.nv
    check_memory("qdd on a stack", 8 * N * nv, f"ddq is {N} x {nv} doubles")
    DDQ = np.empty((N, nv))
    nchunks = _chunks(system, N)
    if nchunks == 0 or N == 0:
        for k in range(N):
            DDQ[k] = system.qdd(Q[k], DQ[k], U[k])
        return DDQ
    status = np.zeros((N, 2), np.int64)
    _qdd_stack(system.workspace.evaluation(), Q, DQ, U, DDQ, status, nchunks)
    bad = np.flatnonzero(status[:, 0] != OK)
    if bad.size:
        k = int(bad[0])
        raise_at_point(k, system.qdd, Q[k], DQ[k], U[k])
    return DDQ


def linearize(system, q, dq, u=None, residual_limit: float | None = 1e-6):
    """``(A, B)`` (N x 2n x 2n, N x 2n x nu) at each state of a stack (see the module
    docstring); ``residual_limit`` as for the single call."""
    nu = len(system.continuous_input_names)
    Q, DQ, U = _stacks(system, q, dq, u, nu)
    N, nx = Q.shape[0], 2 * system.nv
    check_memory("linearize on a stack", 8 * N * nx * (nx + nu),
                 f"A and B are {N} x {nx} x {nx} and {N} x {nx} x {nu} doubles")
    A, B = np.empty((N, nx, nx)), np.empty((N, nx, nu))
    nchunks = _chunks(system, N)
    if nchunks == 0 or N == 0:
        for k in range(N):
            A[k], B[k] = system.linearize(Q[k], DQ[k], U[k], residual_limit=residual_limit)
        return A, B
    status = np.zeros((N, 2), np.int64)
    _linearize_stack(system.workspace.evaluation(), Q, DQ, U, A, B, status, nchunks)
    bad = np.flatnonzero(status[:, 0] != OK)
    if bad.size:
        k = int(bad[0])
        raise_at_point(k, system.linearize, Q[k], DQ[k], U[k])
    return A, B
