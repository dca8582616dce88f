"""The trajectory calls of a :class:`core.MidpointVI`: many steps in one compiled call.

:class:`TrajectoryCalls` holds ``step`` and ``linearize`` on stacks of states (parallel chunks),
``closed_loop`` (a time-varying feedback law stepped and linearized from a measured state: what a
re-plan needs), ``simulate``, ``inverse_dynamics`` and ``linearize_trajectory`` (every knot of
a trajectory solved, then linearized to first or second order, contracted with costates or not).
The kernels are :mod:`core.discrete.trajectory` and :mod:`core.discrete.entry`; a failure raises
the single call's error naming the step (:func:`core.continuous.stacked.raise_at_point`, or the
integrator's ``_raise_solve`` and ``_raise_singular``).
"""
from __future__ import annotations

from typing import Any

import numba
import numpy as np

from core.continuous.stacked import raise_at_point
from core.discrete.entry import closed_loop_entry, step_at, step_stack
from core.discrete.inverse import del_inverse_dynamics
from core.discrete.trajectory import (
    linearize_chunk,
    linearize_parallel,
    simulate_kernel,
    solve_each,
    solve_parallel,
)
from core.errors import OK
from core.progress import progress_reporter
from core.validation import (
    check_memory,
    check_second_order_memory,
    check_vector,
    float_stack,
)


class TrajectoryCalls:
    """The trajectory calls of :class:`core.MidpointVI` (the module docstring). Reads the
    integrator's system, settings, dimensions and per-thread cache, and raises through its
    ``_raise_solve`` and ``_raise_singular``."""

    system: Any
    dt: float
    tolerance: float
    max_iterations: int
    condition_limit: float
    dynamic_index: np.ndarray
    kinematic_index: np.ndarray
    _nq: int
    _nd: int
    _nx: int
    _nu: int
    _m: int
    _settings: np.ndarray
    _last: Any
    # (the integrator's own methods, called from here)
    state_names: Any
    step: Any
    step_linearize: Any
    _call: Any
    _raise_solve: Any
    _raise_singular: Any
    _step_inputs: Any

    def _step_stack(self, x, u):
        """:meth:`step` from each state of a stack ``x`` (N, nx) with ``u`` (N, nu): (N, nx),
        in parallel chunks (each with its own record); the first failing point raises the
        single call's error, naming it."""
        X = float_stack("x", x, (None, self._nx))
        N = X.shape[0]
        U = np.zeros((N, self._nu)) if u is None else float_stack("u", u, (N, self._nu))
        check_memory("MidpointVI.step on a stack", 8 * N * self._nx, f"the states are {N} x {self._nx} doubles")
        X1 = np.empty((N, self._nx))
        if N == 0:
            return X1
        self._direct(step_at, X[0], U[0], (np.empty(self._nx),))   # (compiles or loads it)
        status = np.zeros((N, 2), np.int64)
        step_stack(self._call()[0], X, U, X1, status, max(1, min(N, numba.get_num_threads())))
        bad = np.flatnonzero(status[:, 0] != OK)
        if bad.size:
            k = int(bad[0])
            raise_at_point(k, self.step, X[k], U[k])
        return X1

    def _linearize_states(self, x, u):
        """:meth:`linearize` at each state of a stack ``x`` (N, nx) with ``u`` (N, nu) or None:
        ``(A, B)`` stacks, by the kernels of :meth:`linearize_trajectory`."""
        X = float_stack("x", x, (None, self._nx))
        U = np.zeros((X.shape[0], self._nu)) if u is None else float_stack("u", u, (X.shape[0], self._nu))
        return self._linearize_stack(X, U, False, None, 0)

    def closed_loop(self, x0, X_ref, U_ref, K, linearize: bool = True):
        """The closed loop from ``x0`` under the time-varying law
        ``u_k = U_ref[k] - K[k] (x_k - X_ref[k])`` and its exact linearization, each step linearized
        from its own solve, in one compiled call. What a re-plan needs: the trajectory the robot is
        predicted to follow from its measured state, and the linearization along it.

        Parameters
        ----------
        x0 : array_like, shape (nx,)
            The measured state.
        X_ref : array_like, shape (N, nx) or (N+1, nx)
            The reference states (the first N rows are used).
        U_ref : array_like, shape (N, nu)
            The reference inputs.
        K : array_like, shape (N, nu, nx)
            The gains.
        linearize : bool
            Also linearize (False: ``A`` and ``B`` are None).

        Returns
        -------
        X : ndarray, shape (N+1, nx)
        U : ndarray, shape (N, nu)
        A : ndarray, shape (N, nx, nx), or None
        B : ndarray, shape (N, nx, nu), or None

        Raises
        ------
        ValueError
            A wrong shape or a non-finite entry (named), of the arguments or of an input the law
            computed (naming the step).
        IntegratorError
            A failed step raises the single call's error (:meth:`step_linearize`'s, or
            :meth:`step`'s without ``linearize``; a :class:`SingularStepError` for a singular step),
            naming the step.
        """
        U_ref = float_stack("U_ref", U_ref, (None, self._nu))
        N = U_ref.shape[0]
        X_ref = float_stack("X_ref", X_ref, (None, self._nx))
        if X_ref.shape[0] not in (N, N + 1):
            raise ValueError(f"X_ref must have N = {N} or N + 1 rows (U_ref has {N}), got {X_ref.shape[0]}")
        K = float_stack("K", K, (N, self._nu, self._nx))
        x0 = check_vector("x0", x0, self._nx, self.state_names)
        # (C-contiguous and writable: the kernel's one signature)
        X_ref, U_ref, K = (np.require(a, np.float64, ("C", "W")) for a in (X_ref, U_ref, K))
        X, U = np.empty((N + 1, self._nx)), np.empty((N, self._nu))
        L = N if linearize else 0
        A, B = np.empty((L, self._nx, self._nx)), np.empty((L, self._nx, self._nu))
        rec = self._call()[0]
        k = closed_loop_entry(rec, x0, X_ref, U_ref, K, X, U, A, B)
        if k >= 0:
            raise_at_point(k, self.step_linearize if linearize else self.step, X[k], U[k],
                           where="step {k} of the closed loop")
        return (X, U, A, B) if linearize else (X, U, None, None)

    def simulate(self, q0, p0, u_sequence):
        """Simulate ``N = len(u_sequence)`` steps of :meth:`step` from ``(q0, p0)``.

        Parameters
        ----------
        q0 : array_like, shape (n,)
        p0 : array_like, shape (nd,)
        u_sequence : array_like, shape (N, nu)

        Returns
        -------
        Q : ndarray, shape (N+1, n)
        P : ndarray, shape (N+1, nd)
        LAM : ndarray, shape (N, nh)
            The holonomic constraint multipliers of each step.

        Raises
        ------
        ValueError
            A wrong shape or a non-finite entry (named).
        IntegratorError
            Naming the failing step.
        """
        model = self.system.model
        U = float_stack("u_sequence", u_sequence, (None, self._nu))
        q0 = check_vector("q0", q0, self._nq, self.system.config_names)
        p0 = check_vector("p0", p0, self._nd)
        N, m = U.shape[0], self._m
        Q, P, LAM = np.empty((N + 1, self._nq)), np.empty((N + 1, self._nd)), np.zeros((N, model.nh))
        data, der = self.system.workspace.get()
        status, info = np.zeros(3, np.int64), np.zeros(4)
        simulate_kernel(model, data, der, self.dt, self.dynamic_index, self.kinematic_index, q0, p0,
                        np.ascontiguousarray(U[:, :m]), np.ascontiguousarray(U[:, m:]),
                        self.tolerance, self.max_iterations, Q, P, LAM, status, info)
        if status[0] != OK:
            k = int(status[2])
            self._raise_solve(status, info, k, self._step_inputs(Q[k], P[k], U[k, :m], U[k, m:]))
        return Q, P, LAM

    def inverse_dynamics(self, Q, p0):
        """The least-squares inputs that make the forced DEL equations hold along configurations
        ``Q``.

        The kinematic columns of ``U`` are the next configurations; the momenta ``P`` follow from
        ``p0`` by the discrete Legendre transform. Holonomic constraint forces are not modelled:
        constrained systems leave a residual.

        Parameters
        ----------
        Q : array_like, shape (N+1, n)
            At least 2 knots.
        p0 : array_like, shape (nd,)

        Returns
        -------
        U : ndarray, shape (N, nu)
        P : ndarray, shape (N+1, nd)
        residual : ndarray, shape (N,)
            The DEL residual of each step relative to its terms (0 where exactly feasible).

        Raises
        ------
        ValueError
            A wrong shape, fewer than 2 knots, a non-finite entry (named).
        """
        Q = float_stack("configurations", Q, (None, self._nq))
        if Q.shape[0] < 2:
            raise ValueError(f"configurations must have at least 2 knots, got {Q.shape[0]}")
        N = Q.shape[0] - 1
        U, P, resid = np.empty((N, self._nu)), np.empty((N + 1, self._nd)), np.empty(N)
        data, der = self.system.workspace.get()
        del_inverse_dynamics(self.system.model, data, der, self.dt, self.dynamic_index,
                             self.kinematic_index, Q, check_vector("p0", p0, self._nd), U, P, resid)
        return U, P, resid

    def linearize_trajectory(self, X, U, second_order: bool = False, costates=None, *,
                             threads: int | None = None, progress=None):
        """:func:`core.linearize_trajectory` of this integrator (the same signature without the
        system; that function hands a MidpointVI's stacks here): every knot ``X[k]`` solved and
        linearized in compiled code.

        Parameters
        ----------
        X : array_like, shape (N+1, nx)
        U : array_like, shape (N, nu)
        second_order : bool
            Also ``H`` (N, nx, nz, nz), as :meth:`linearize2`.
        costates : array_like, shape (N, nx), optional
            With ``second_order``: ``W[k] = Σ_i costates[k, i] H_k[i]`` (N, nz, nz) in place of
            ``H`` (see :meth:`linearize2`).
        threads : int, optional
            Chunks in parallel (default numba's thread count; ``threads=1``: one serial call without
            the GIL and numba's threading layer).
        progress : True or callable, optional
            A bar on stderr (True) or ``progress(done, N)``: the work in about 50 blocks, the same
            kernels and results, reported after each.

        Returns
        -------
        (A, B) or (A, B, H) or (A, B, W) : tuple of ndarray
            Shapes (N, nx, nx), (N, nx, nu), then ``H`` or ``W``; ``nz = nx + nu``.

        Raises
        ------
        ValueError
            A wrong shape or a non-finite entry (named); ``costates`` without ``second_order``.
        IntegratorError
            The DEL solve failed (as in :meth:`step`); for stacks, naming the step.
        SingularStepError
            The one-step map is singular: the scale-aware measure of ``M_k+1`` or of
            ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T`` reaches ``condition_limit`` (Sec. VII); for stacks,
            naming the step.
        ResourceLimitError
            The ``H`` stack would pass :data:`core.validation.SECOND_ORDER_MEMORY_LIMIT`, or the
            ``W`` stack :data:`core.validation.STACK_MEMORY_LIMIT`.
        """
        X = float_stack("X", X, (None, self._nx))
        U = float_stack("U", U, (X.shape[0] - 1, self._nu))
        N, nz = U.shape[0], self._nx + self._nu
        if costates is not None:
            if not second_order:
                raise ValueError("costates weigh the second order: pass second_order=True with them")
            costates = float_stack("costates", costates, (N, self._nx))
        report = progress_reporter(progress)
        if report is None:
            return self._linearize_stack(X, U, second_order, threads, 0, costates)
        As, Bs = np.empty((N, self._nx, self._nx)), np.empty((N, self._nx, self._nu))
        shape = (N, 0, 0) if not second_order else (N, nz, nz) if costates is not None else (N, self._nx, nz, nz)
        Hs = np.empty(shape)
        block = max(1, -(-N // 50))
        report(0, N)
        for start in range(0, N, block):
            end = min(N, start + block)
            out = self._linearize_stack(X[start:end + 1], U[start:end], second_order, threads, start,
                                        None if costates is None else costates[start:end])
            As[start:end], Bs[start:end] = out[0], out[1]
            if second_order:
                Hs[start:end] = out[2]
            report(end, N)
        return (As, Bs, Hs) if second_order else (As, Bs)

    def _linearize_stack(self, X, U, second_order, threads, offset, costates=None):
        """:meth:`linearize_trajectory` of checked stacks; errors name step ``k + offset``."""
        nz, N = self._nx + self._nu, U.shape[0]
        if costates is not None:
            check_memory("linearize_trajectory(costates=...)", 8 * N * nz * nz,
                         f"the contractions are {N} x {nz} x {nz} doubles")
        elif second_order:
            check_second_order_memory("linearize_trajectory(second_order=True)", self._nx, nz, N)
        # the solves are remembered per thread (as the single step's): a Newton step's curvature
        # pass along the trajectory that its first-order pass just linearized solves nothing again
        key = (X.tobytes(), U.tobytes(), self._settings.tobytes())
        cache = self._last.__dict__
        if cache.get("knots_key") == key and cache.get("knots_model") is self.system.model:
            knots = cache["knots"]
        else:
            knots = self._solve_knots(X, U, threads, offset)
            cache.update(knots_key=key, knots_model=self.system.model, knots=knots)
        return self._linearize_knots(knots, second_order, threads, offset, costates)

    def _chunks(self, N, threads):
        return max(1, min(N, threads or numba.get_num_threads()))

    def _solve_knots(self, X, U, threads, offset):
        """The step from each knot of the stacks (:func:`core.discrete.trajectory.solve_each`):
        ``(Q, P, Uf, rho, Q1, LAM, DH1)``; a failed solve raises, naming step ``k + offset``."""
        N, n, nd, m = U.shape[0], self._nq, self._nd, self._m
        model = self.system.model
        dyn, kin = self.dynamic_index, self.kinematic_index
        Q = np.ascontiguousarray(X[:, :n])
        P = np.ascontiguousarray(X[:, n:n + nd])
        Uf, rho = np.ascontiguousarray(U[:, :m]), np.ascontiguousarray(U[:, m:])
        Q1, LAM, DH1 = np.empty((N, n)), np.zeros((N, model.nh)), np.empty((N, model.nh, n))
        data, der = self.system.workspace.get()
        status, info = np.zeros(3, np.int64), np.zeros(4)
        nchunks = self._chunks(N, threads)
        if nchunks == 1:
            solve_each(model, data, der, self.dt, dyn, kin, Q, P, Uf, rho, self.tolerance,
                       self.max_iterations, Q1, LAM, DH1, status, info)
        else:   # (the steps from the knots are independent)
            solve_parallel(model, data, der, self.dt, dyn, kin, Q, P, Uf, rho, self.tolerance,
                           self.max_iterations, Q1, LAM, DH1, status, info, nchunks)
        if status[0] != OK:
            k = int(status[2])
            self._raise_solve(status, info, k + offset, self._step_inputs(Q[k], P[k], Uf[k], rho[k]))
        return Q, P, Uf, rho, Q1, LAM, DH1

    def _linearize_knots(self, knots, second_order, threads, offset, costates=None):
        """``(As, Bs[, Hs])`` of the solved steps ``knots`` (:meth:`_solve_knots`); a singular
        step raises, naming step ``k + offset``."""
        Q, P, Uf, rho, Q1, LAM, DH1 = knots
        N, nz = Uf.shape[0], self._nx + self._nu
        model = self.system.model
        dyn, kin = self.dynamic_index, self.kinematic_index
        data, der = self.system.workspace.get(third_order=second_order and costates is None)
        As, Bs = np.empty((N, self._nx, self._nx)), np.empty((N, self._nx, self._nu))
        Hs, contraction = None, None
        if costates is not None:
            contraction = (costates, np.empty((N, nz, nz)))
        elif second_order:
            Hs = np.empty((N, self._nx, nz, nz))
        stat, conds = np.zeros(N, np.int64), np.zeros((N, 2))
        nchunks = self._chunks(N, threads)
        if nchunks == 1:
            linearize_chunk(model, data, der, self.dt, dyn, kin, Q, Q1, P, LAM, DH1, Uf, rho,
                            self.condition_limit, As, Bs, Hs, contraction, stat, conds, 0, N)
        else:
            linearize_parallel(model, data, der, self.dt, dyn, kin, Q, Q1, P, LAM, DH1, Uf, rho,
                               self.condition_limit, As, Bs, Hs, contraction, stat, conds, nchunks)
        bad = np.flatnonzero(stat != OK)
        if bad.size:
            k = int(bad[0])
            self._raise_singular(int(stat[k]), conds[k], k + offset)
        if contraction is not None:
            return As, Bs, contraction[1]
        return (As, Bs, Hs) if second_order else (As, Bs)

