"""Entry kernels of ``MidpointVI.step``, ``MidpointVI.linearize`` and ``linearize2`` with a
costate: one record, plain vectors straight in.

A call from Python costs numba a few hundred nanoseconds per argument to type and unbox; the
DEL kernels take 18 to 21. A :class:`StepCall` record holds everything but the state, the input
and the outputs, once per thread and integrator (the model, this thread's Data and Lagrangian
derivatives, the variable indices, the settings ``[dt, tolerance, max_iterations,
condition_limit]``, the solve's results and status), so the entries take four or five
arguments. The record also remembers its last solve, so ``linearize(x, u)`` after
``step(x, u)`` solves once (its state, input and settings compared entry by entry in compiled
code).

``status[0]`` is a code of :mod:`core.errors` (OK, BAD_SIZE, NONFINITE_INPUT, a solve's or a
linearization's failure); the front-end answers a failure by running its checked path, which
raises the same error as before.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from core.base.chunks import chunk
from core.base.jit import njit
from core.base.records import record_at, record_type, set_constructor
from core.discrete.first_order import del_linearize
from core.discrete.step import del_step
from core.errors import BAD_SIZE, NONFINITE_INPUT, OK
from core.tree.kinematics import copy_data
from core.tree.lagrangian import copy_derivs

STEP_CALL_FIELDS = ["model", "data", "der", "dyn", "kin", "settings", "q1", "p1", "lam", "Dh1", "status",
                    "info", "conds", "last", "solved"]
StepCallType, StepCall = record_type("StepCall", STEP_CALL_FIELDS, __name__)
#: The numba type of every StepCall, which :func:`step_at` and :func:`linearize_step_at` compile
#: with (set when the process makes its first one: :func:`core.base.records.typed_address`).
STEP_CALL = None


@njit(cache=True)
def _new_step_call(*fields):
    return StepCall(*fields)


set_constructor(StepCall, _new_step_call)


def create_step_call(model, data, der, dyn, kin, settings):
    """A :class:`StepCall` for ``model`` with this thread's ``data``, ``der`` and the
    integrator's ``settings`` array (shared: the integrator writes it when a setting changes)."""
    n, nh, nx = int(model.nq), int(model.nh), int(model.nq) + len(dyn) + len(kin)
    return StepCall(model, data, der, dyn, kin, settings, np.empty(n), np.empty(len(dyn)), np.zeros(nh),
                    np.empty((nh, n)), np.zeros(2, np.int64), np.zeros(4), np.zeros(2),
                    np.empty(nx + int(model.nu) + len(kin) + settings.shape[0]), np.zeros(1, np.int64))


@njit(cache=True, nogil=True, inline="always")
def _solve(rec, x, u):
    """The DEL solve from ``x = [q, p, v]`` with ``u = [u_force, rho]`` into the record (kept
    from the last call when ``x``, ``u`` and the settings are the same); whether it
    succeeded. Inlined into the entries (a layer of its own would optimize and emit the
    whole solve once more: about 6 s of compiling)."""
    model, dyn, kin, status = rec.model, rec.dyn, rec.kin, rec.status
    n, nd, nk, m = model.nq, dyn.shape[0], kin.shape[0], model.nu
    nx = n + nd + nk
    if x.shape[0] != nx or u.shape[0] != m + nk:
        status[0], status[1] = BAD_SIZE, -1
        return False
    for i in range(nx):
        if not np.isfinite(x[i]):
            status[0], status[1] = NONFINITE_INPUT, i
            return False
    for i in range(m + nk):
        if not np.isfinite(u[i]):
            status[0], status[1] = NONFINITE_INPUT, nx + i
            return False
    last, solved, s = rec.last, rec.solved, rec.settings
    nu = m + nk
    if solved[0] == 1:
        same = True
        for i in range(nx):
            if last[i] != x[i]:
                same = False
                break
        if same:
            for i in range(nu):
                if last[nx + i] != u[i]:
                    same = False
                    break
        if same:
            for i in range(s.shape[0]):
                if last[nx + nu + i] != s[i]:
                    same = False
                    break
        if same:
            status[0], status[1] = OK, -1
            return True
    solved[0] = 0
    del_step(model, rec.data, rec.der, s[0], dyn, kin, x[:n], x[n:n + nd], u[:m], u[m:], s[1], int(s[2]),
             rec.q1, rec.p1, rec.lam, rec.Dh1, status, rec.info)
    if status[0] != OK:
        return False
    for i in range(nx):
        last[i] = x[i]
    for i in range(nu):
        last[nx + i] = u[i]
    for i in range(s.shape[0]):
        last[nx + nu + i] = s[i]
    solved[0] = 1
    return True


@njit(cache=True, nogil=True, inline="always")
def step_entry(rec, x, u, x1):
    """``x1 = [q1, p1, v1]``, the step from ``x`` with ``u`` (``v1 = (rho - q_kin) / dt``).
    Inlined into its callers (:func:`step_at`, the closed loop, the stacks), like
    :func:`linearize_entry`: a kernel that only calls another compiled one makes numba optimize
    the callee's code once more (about 10 s of compiling)."""
    if x1.shape[0] != x.shape[0]:
        rec.status[0], rec.status[1] = BAD_SIZE, -1
        return
    if not _solve(rec, x, u):
        return
    model, kin, q1, p1 = rec.model, rec.kin, rec.q1, rec.p1
    n, nd, m = model.nq, rec.dyn.shape[0], model.nu
    dt = rec.settings[0]
    for i in range(n):
        x1[i] = q1[i]
    for i in range(nd):
        x1[n + i] = p1[i]
    for j in range(kin.shape[0]):
        x1[n + nd + j] = (u[m + j] - x[kin[j]]) / dt


@njit(cache=True, nogil=True, inline="always")
def linearize_entry(rec, x, u, A, B, contraction, scratch):
    """``(A, B)`` of the step from ``x`` with ``u``, in place (first order). With
    ``contraction = (w, W)`` (None: not compiled in) also the second order contracted with
    ``w`` (a vector over x_k+1), ``W = sum_i w_i H[i]`` (nz x nz), in ``scratch``
    (:func:`core.discrete.second_order.contracted_scratch` doubles)."""
    nx, nu = x.shape[0], u.shape[0]
    if A.shape[0] != nx or A.shape[1] != nx or B.shape[0] != nx or B.shape[1] != nu:
        rec.status[0], rec.status[1] = BAD_SIZE, -1
        return
    if contraction is not None:
        w, W = contraction
        if w.shape[0] != nx or W.shape[0] != nx + nu or W.shape[1] != nx + nu:
            rec.status[0], rec.status[1] = BAD_SIZE, -1
            return
    if not _solve(rec, x, u):
        return
    model = rec.model
    n, nd, m = model.nq, rec.dyn.shape[0], model.nu
    s = rec.settings
    del_linearize(model, rec.data, rec.der, s[0], rec.dyn, rec.kin, x[:n], x[n:n + nd], u[:m], u[m:],
                  rec.q1, rec.lam, rec.Dh1, s[3], A, B, None, contraction, rec.status, rec.conds, scratch)


@njit(cache=True, nogil=True)
def step_at(address, x, u, x1):
    """:func:`step_entry` on the StepCall at ``address``; returns the status code (the entry
    of ``MidpointVI.step``: an address costs numba less to dispatch than a record)."""
    rec = record_at(address, STEP_CALL)
    step_entry(rec, x, u, x1)
    return rec.status[0]


@njit(cache=True, nogil=True)
def linearize_step_at(address, x, u, A, B):
    """:func:`linearize_entry` on the StepCall at ``address``; returns the status code (the
    entry of ``MidpointVI.linearize``)."""
    rec = record_at(address, STEP_CALL)
    linearize_entry(rec, x, u, A, B, None, np.empty(0))
    return rec.status[0]


@njit(cache=True, nogil=True)
def contracted_step_at(address, x, u, w, A, B, W, scratch):
    """:func:`linearize_entry` with the second order contracted with ``w`` into ``W`` on the
    StepCall at ``address``; returns the status code (the entry of
    ``MidpointVI.linearize2(x, u, costate=w)``)."""
    rec = record_at(address, STEP_CALL)
    linearize_entry(rec, x, u, A, B, (w, W), scratch)
    return rec.status[0]

@njit(cache=True, nogil=True)
def closed_loop_entry(rec, x0, X_ref, U_ref, K, X, U, A, B):
    """The closed loop from ``x0`` under the law ``u_k = U_ref[k] - K[k] (x_k - X_ref[k])``:
    ``X`` (N+1, nx), ``U`` (N, nu) and each step's linearization ``(A[k], B[k])``, from the
    step's own solve (none with ``A`` and ``B`` of length 0). Returns the first step that
    failed (its status in ``rec.status``), else -1."""
    N, nx, nu = U.shape[0], x0.shape[0], U.shape[1]
    for i in range(nx):
        X[0, i] = x0[i]
    for k in range(N):
        for r in range(nu):
            s = U_ref[k, r]
            for j in range(nx):
                s -= K[k, r, j] * (X[k, j] - X_ref[k, j])
            U[k, r] = s
        step_entry(rec, X[k], U[k], X[k + 1])
        if rec.status[0] != OK:
            return k
        if A.shape[0] == 0:
            continue
        linearize_entry(rec, X[k], U[k], A[k], B[k], None, np.empty(0))
        if rec.status[0] != OK:
            return k
    return -1


@njit(cache=True, nogil=True)
def _own_step_call(rec):
    """A copy of ``rec`` with its own scratch, results and status (for one parallel chunk)."""
    return StepCall(rec.model, copy_data(rec.data), copy_derivs(rec.der), rec.dyn, rec.kin, rec.settings,
                    rec.q1.copy(), rec.p1.copy(), rec.lam.copy(), rec.Dh1.copy(), np.zeros(2, np.int64),
                    np.zeros(4), np.zeros(2), rec.last.copy(), np.zeros(1, np.int64))


@njit(cache=True, nogil=True, parallel=True)
def step_stack(rec, X, U, X1, status, nchunks):
    """``X1[k]`` = :func:`step_entry` from ``X[k]`` with ``U[k]`` for every ``k``, in ``nchunks``
    contiguous chunks in parallel (:func:`core.base.chunks.chunk`); ``status[k]`` its status."""
    N = X.shape[0]
    for c in prange(nchunks):
        own = _own_step_call(rec)
        start, stop = chunk(c, N, nchunks)
        for k in range(start, stop):
            step_entry(own, X[k], U[k], X1[k])
            status[k, 0], status[k, 1] = own.status[0], own.status[1]
