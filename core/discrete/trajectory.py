"""Kernels over whole trajectories of the midpoint variational integrator: simulation, the
steps re-solved from each knot of a given trajectory, and their linearizations (serial, or in
parallel over chunks of knots). The front-end is :class:`core.discrete.midpoint.MidpointVI`.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from core.base.chunks import chunk
from core.base.jit import njit
from core.discrete.first_order import del_linearize
from core.discrete.second_order import contracted_scratch, second_order_scratch
from core.discrete.step import del_step
from core.errors import OK
from core.tree.kinematics import copy_data
from core.tree.lagrangian import copy_derivs


@njit(cache=True, nogil=True)
def simulate_kernel(model, data, der, dt, dyn, kin, q0, p0, u_force, rho, tol, max_iter,
                    Q, P, LAM, status, info):
    """Steps k = 0..N-1 from (q0, p0); stops at the first failure (status[2] = step)."""
    N = u_force.shape[0]
    Q[0] = q0
    P[0] = p0
    Dh1 = np.empty((model.hc_kind.shape[0], q0.shape[0]))
    for k in range(N):
        del_step(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k], tol, max_iter,
                 Q[k + 1], P[k + 1], LAM[k], Dh1, status, info)
        if status[0] != OK:
            status[2] = k
            return
    status[2] = -1


@njit(cache=True, nogil=True)
def solve_each(model, data, der, dt, dyn, kin, Q, P, u_force, rho, tol, max_iter, Q1, LAM, DH1,
               status, info):
    """The step from each knot ``(Q[k], P[k])`` with ``u_force[k], rho[k]`` (not chained):
    ``Q1[k]``, ``LAM[k]`` and ``DH1[k] = Dh(Q1[k])``. Stops at the first failure (status[2] =
    the knot, else -1)."""
    p1 = np.empty(P.shape[1])
    for k in range(u_force.shape[0]):
        del_step(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k], tol, max_iter,
                 Q1[k], p1, LAM[k], DH1[k], status, info)
        if status[0] != OK:
            status[2] = k
            return
    status[2] = -1


@njit(cache=True, nogil=True, parallel=True)
def solve_parallel(model, data_proto, der_proto, dt, dyn, kin, Q, P, u_force, rho, tol, max_iter,
                   Q1, LAM, DH1, status, info, nchunks):
    """:func:`solve_each` over ``nchunks`` contiguous chunks in parallel
    (:func:`core.base.chunks.chunk`; the steps are independent; each chunk has its own
    scratch). Every knot is solved; ``status`` and ``info`` report the first knot that failed
    (``status[2]``, -1 if none), as the serial kernel does."""
    N = u_force.shape[0]
    stat = np.zeros((N, 2), np.int64)
    infos = np.zeros((N, 4))
    for c in prange(nchunks):
        data, der = copy_data(data_proto), copy_derivs(der_proto)
        p1 = np.empty(P.shape[1])
        start, stop = chunk(c, N, nchunks)
        for k in range(start, stop):
            del_step(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k], tol,
                     max_iter, Q1[k], p1, LAM[k], DH1[k], stat[k], infos[k])
    status[0], status[1], status[2] = OK, -1, -1
    for k in range(N):
        if stat[k, 0] != OK:
            status[0], status[1], status[2] = stat[k, 0], stat[k, 1], k
            info[:] = infos[k]
            return


@njit(cache=True, nogil=True)
def linearize_chunk(model, data, der, dt, dyn, kin, Q, Q1, P, LAM, DH1, u_force, rho, cond_limit,
                    As, Bs, Hs, contraction, stat, conds, start, stop):
    """Linearize the steps ``k = start, ..., stop - 1`` from ``(Q[k], P[k])`` to
    ``Q1[k]`` (solved by :func:`solve_each`); ``stat[k]`` receives each status code. ``Hs``:
    the second-order tensors' stack (N, nx, nz, nz) or None; ``contraction``: None or
    ``(costates, Ws)``, ``Ws[k] = sum_i costates[k, i] H_k[i]`` (N, nz, nz). What is None is
    not compiled in."""
    st = np.zeros(2, np.int64)
    n, nd, nc = model.nq, dyn.shape[0], model.hc_kind.shape[0]
    size = 0
    if Hs is not None:
        size = second_order_scratch(n, nd, nc)
    if contraction is not None:
        size = max(size, contracted_scratch(n, nc))
    scratch = np.empty(size)
    for k in range(start, stop):
        if contraction is None:
            if Hs is None:
                del_linearize(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k], Q1[k],
                              LAM[k], DH1[k], cond_limit, As[k], Bs[k], None, None, st, conds[k],
                              scratch)
            else:
                del_linearize(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k], Q1[k],
                              LAM[k], DH1[k], cond_limit, As[k], Bs[k], Hs[k], None, st, conds[k],
                              scratch)
        else:
            del_linearize(model, data, der, dt, dyn, kin, Q[k], P[k], u_force[k], rho[k], Q1[k],
                          LAM[k], DH1[k], cond_limit, As[k], Bs[k], None,
                          (contraction[0][k], contraction[1][k]), st, conds[k], scratch)
        stat[k] = st[0]


@njit(cache=True, nogil=True, parallel=True)
def linearize_parallel(model, data_proto, der_proto, dt, dyn, kin, Q, Q1, P, LAM, DH1, u_force,
                       rho, cond_limit, As, Bs, Hs, contraction, stat, conds, nchunks):
    """:func:`linearize_chunk` over ``nchunks`` contiguous chunks in parallel
    (:func:`core.base.chunks.chunk`; each with its own scratch)."""
    N = u_force.shape[0]
    for c in prange(nchunks):
        start, stop = chunk(c, N, nchunks)
        linearize_chunk(model, copy_data(data_proto), copy_derivs(der_proto), dt, dyn, kin, Q, Q1,
                        P, LAM, DH1, u_force, rho, cond_limit, As, Bs, Hs, contraction, stat, conds, start,
                        stop)
