"""The midpoint variational integrator and its exact first- and second-order linearizations
(Johnson, Schultz & Murphey, "Structured linearization of discrete mechanical systems"): the
one Python front-end to the DEL kernels (:mod:`core.discrete.step`, :mod:`core.discrete.first_order`,
:mod:`core.discrete.second_order`, :mod:`core.discrete.trajectory`, :mod:`core.discrete.inverse`) and to the
exact state transforms (:mod:`core.discrete.legendre`).

A :class:`MidpointVI` is a discrete system in state form (``nx``, ``nu``, ``step``,
``linearize``, ``linearize2``), so it goes straight into :func:`core.optimize_trajectory` and
the simulators. State and input layouts, tensor index order: :mod:`core.conventions`::

    x_k = [q_k (all n variables), p_k (dynamic variables), v_k (kinematic velocities)]
    u_k = [force inputs, rho_k+1 (next values of the kinematic variables)]
    H[i, a, b] = d2 x_k+1,i / dz_a dz_b,  z = [x_k, u_k]

Errors: a DEL solve that does not converge, or a singular one-step map (Sec. VII), raises
:class:`core.errors.IntegratorError` naming the step, the matrix, the residual and the iterations; bad
numeric input raises ``ValueError`` naming the entry.
"""
from __future__ import annotations

import math
import threading

import numba
import numpy as np

from core.base.records import typed_address
from core.cache import call_and_freeze, compile_in_background, is_cached
from core.continuous.floating import refuse
from core.continuous.stacked import raise_at_point
from core.discrete import entry
from core.discrete.entry import (
    closed_loop_entry,
    contracted_step_at,
    create_step_call,
    linearize_step_at,
    step_at,
    step_stack,
)
from core.discrete.first_order import del_linearize
from core.discrete.inverse import del_inverse_dynamics, discrete_momenta
from core.discrete.legendre import (
    inverse_legendre,
    legendre,
    legendre_jacobian,
    legendre_many,
)
from core.discrete.second_order import contracted_scratch, second_order_scratch
from core.discrete.step import del_step
from core.discrete.tracking import feedback
from core.discrete.trajectory import (
    linearize_chunk,
    linearize_parallel,
    simulate_kernel,
    solve_each,
    solve_parallel,
)
from core.errors import (
    NEWTON_FAILED,
    OK,
    OVERFLOW,
    SINGULAR_CONSTRAINT_STEP,
    SINGULAR_JACOBIAN,
    SINGULAR_M_NEXT,
    IntegratorError,
    SingularMatrixError,
    SingularStepError,
)
from core.progress import progress_reporter
from core.validation import (
    check_memory,
    check_second_order_memory,
    check_vector,
    float_stack,
    is_plain_vector,
    largest_entry,
    number,
)

#: A DEL solve that fails at an iterate moving more than this times max(1, |q_k|) in one step
#: is reported as an overflow (inputs too large for the system and dt), not a singular matrix.
RUNAWAY = 1e6

#: Entry kernels called the checked way once (:meth:`MidpointVI._direct`): they compile
#: nothing more, so plain float64 vectors may go to them directly.
_DIRECT: set = set()

_NO_SCRATCH = np.empty(0)


class _Setting:
    """A checked, positive setting of :class:`MidpointVI`, kept in ``_<name>`` and mirrored at
    ``index`` of ``_settings`` (the array the compiled entry kernels read and key their last
    solve on)."""

    def __init__(self, index: int, doc: str, integer: bool = False):
        self.index, self.integer, self.__doc__ = index, integer, doc

    def __set_name__(self, owner, name):
        self.name, self.attr = name, "_" + name

    def __get__(self, vi, owner=None):
        return self if vi is None else getattr(vi, self.attr)

    def __set__(self, vi, value):
        value = number(self.name, value, positive=True, integer=self.integer)
        setattr(vi, self.attr, value)
        vi._settings[self.index] = value


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a`` if it is read-only, else a read-only view of it."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view


class MidpointVI:
    """Midpoint variational integrator for a :class:`core.System` with time step ``dt``.

    A discrete system in state form: ``x_k = [q_k, p_k, v_k]``, ``u_k = [force inputs, rho_k+1]``
    (the module docstring, :mod:`core.conventions`). ``step`` raises :class:`IntegratorError` when
    Newton's method does not converge (with the residual and iteration count) and ``linearize``
    raises :class:`SingularStepError` (an ``IntegratorError`` and a ``SingularMatrixError``) when
    ``M_k+1`` or ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T`` is singular: its scale-aware measure (see
    :mod:`core.discrete.first_order`) is not below ``condition_limit``.

    The last DEL solve is remembered per thread, so ``step(x, u)`` followed by ``linearize(x, u)``
    (the usual pattern along a trajectory) solves once. Every method is thread-safe: kernels use the
    calling thread's scratch (``system.workspace``).

    Parameters
    ----------
    system : System
        The system (not one with a quaternion floating base: use the Euler chart).
    dt : float
        The time step (> 0).
    tolerance : float
        Newton's convergence tolerance of the DEL solve (> 0).
    max_iterations : int
        Newton iterations allowed per step (a positive integer).
    condition_limit : float
        A step whose singularity measure reaches this is singular (Sec. VII; > 0).

    The four settings are attributes of the same names, checked again when assigned.

    Raises
    ------
    ModelError
        ``system`` has a quaternion floating base, or its description does not compile.
    ValueError
        A setting that is not a finite positive number (``max_iterations``: a whole one).
    """

    def __init__(self, system, dt: float, tolerance: float = 1e-11, max_iterations: int = 50,
                 condition_limit: float = 1e12):
        refuse(system, "MidpointVI (the variational integrator)")
        self.system = system
        #: [dt, tolerance, max_iterations, condition_limit], read by the entry kernels
        #: (:mod:`core.discrete.entry`); the properties below check and write them
        self._settings = np.zeros(4)
        self.dt, self.tolerance = dt, tolerance
        self.max_iterations, self.condition_limit = max_iterations, condition_limit
        kin_names = set(system.kinematic_names)
        names = system.config_names
        self._last = threading.local()      # per thread: the last solve
        self.kinematic_index = np.array([i for i, nm in enumerate(names) if nm in kin_names], np.int64)
        self.dynamic_index = np.array([i for i, nm in enumerate(names) if nm not in kin_names], np.int64)
        # dimensions are fixed with the index arrays (plain attributes: read on every call)
        self._nq, self._nd, self._nk = len(names), len(self.dynamic_index), len(self.kinematic_index)
        self._m = system.nu
        self._nu = self._m + self._nk
        self._nx = nx = self._nq + self._nd + self._nk
        #: the shapes of ``linearize``'s ``A`` and ``B``, made once (building the tuples per call
        #: costs about half a microsecond)
        self._shape_A, self._shape_B = (nx, nx), (nx, self._nu)

    # ---------------------------------------------------------------- settings
    dt = _Setting(0, "The time step (> 0).")
    tolerance = _Setting(1, "Newton's convergence tolerance of the DEL solve (> 0).")
    max_iterations = _Setting(2, "Newton iterations allowed per step (a positive integer).", integer=True)
    condition_limit = _Setting(3, "A step whose singularity measure reaches this is singular (Sec. VII; > 0).")

    # ---------------------------------------------------------------- dimensions and names
    @property
    def nq(self):
        return self._nq

    @property
    def nd(self):
        return self._nd

    @property
    def nk(self):
        return self._nk

    @property
    def nx(self):
        return self._nx

    @property
    def nu(self):
        return self._nu

    @property
    def constrained(self) -> bool:
        """Whether the system has holonomic or velocity constraints: then not every state
        ``[q, p, ...]`` is admissible (:func:`core.optimize_trajectory` refuses
        ``optimize_ic`` for it)."""
        model = self.system.model
        return bool(model.nh or model.nv)

    @property
    def state_names(self):
        """``[q..., p_<dynamic>..., v_<kinematic>...]``."""
        return list(self._names()[0])

    @property
    def input_names(self):
        """``[force inputs..., <kinematic>_next...]``."""
        return list(self._names()[1])

    @property
    def dynamic_names(self):
        return [self.system.config_names[i] for i in self.dynamic_index]

    @property
    def kinematic_names(self):
        return [self.system.config_names[i] for i in self.kinematic_index]

    def _names(self):
        """(state names, input names) as tuples, built once per model compilation: the
        vector checks on every call take them, and building 100 strings costs microseconds."""
        model = self.system.model
        cached = self.__dict__.get("_names_cache")
        if cached is None or cached[0] is not model:
            names = self.system.config_names
            state = (names + ["p_" + names[i] for i in self.dynamic_index]
                     + ["v_" + names[i] for i in self.kinematic_index])
            inputs = self.system.input_names + [names[i] + "_next" for i in self.kinematic_index]
            cached = self.__dict__["_names_cache"] = (model, tuple(state), tuple(inputs))
        return cached[1], cached[2]

    # ---------------------------------------------------------------- packing
    # (called on every step and linearization: the names for the error message are only
    # looked up when the check fails)
    def split_state(self, x, finite: bool = True):
        """``(q, p, v)`` views of ``x = [q, p, v]``.

        Parameters
        ----------
        x : array_like, shape (nx,)
            A discrete state (converted to float64 once if it is not a plain float64 vector).
        finite : bool
            Also refuse non-finite entries.

        Returns
        -------
        q, p, v : ndarray, shapes (n,), (nd,), (nk,)
            Views of ``x`` (or of its conversion).

        Raises
        ------
        ValueError
            A wrong size or, with ``finite``, the first non-finite entry (named).
        """
        n, nd = self._nq, self._nd
        if not is_plain_vector(x, n + nd + self._nk, finite):
            x = check_vector("x", x, n + nd + self._nk, self._names()[0], finite)
        return x[:n], x[n:n + nd], x[n + nd:]

    def split_input(self, u, finite: bool = True, copy: bool = True):
        """``(u_force, rho)`` of ``u = [force inputs, rho_k+1]``.

        Parameters
        ----------
        u : array_like, shape (nu,) or None
            A discrete input (None: zeros).
        finite : bool
            Also refuse non-finite entries.
        copy : bool
            Copies (default) or views.

        Returns
        -------
        u_force, rho : ndarray, shapes (m,), (nk,)

        Raises
        ------
        ValueError
            As :meth:`split_state`.
        """
        if not is_plain_vector(u, self._nu, finite):
            u = check_vector("u", u, self._nu, self._names()[1], finite, optional=True)
        m = self._m
        return (u[:m].copy(), u[m:].copy()) if copy else (u[:m], u[m:])

    def state(self, q, p, v=None):
        """Pack ``x = [q, p_dyn, v_kin]``.

        Parameters
        ----------
        q : array_like, shape (n,)
        p : array_like, shape (nd,)
        v : array_like, shape (nk,), optional
            Default zeros.

        Returns
        -------
        x : ndarray, shape (nx,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        v = np.zeros(self.nk) if v is None else v
        return np.concatenate([check_vector("q", q, self.nq), check_vector("p", p, self.nd),
                               check_vector("v", v, self.nk)])

    # ---------------------------------------------------------------- exact state transforms
    def momentum(self, q, dq):
        """Discrete-state momentum from a continuous state: ``p = dL/d dq`` on dynamic rows.

        Parameters
        ----------
        q, dq : array_like, shape (n,)

        Returns
        -------
        p : ndarray, shape (nd,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        return self.system.momentum(q, dq)[self.dynamic_index]

    def discrete_state(self, q, dq) -> np.ndarray:
        """The exact Legendre transform ``[q, qdot] -> x = [q, p, v]``: ``p = dL/dqdot`` on the
        dynamic rows, ``v = qdot`` on the kinematic rows.

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The continuous state.

        Returns
        -------
        x : ndarray, shape (nx,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        names = self.system.config_names
        q = check_vector("q", q, self.nq, names)
        dq = check_vector("qdot", dq, self.nq, names)
        x = np.empty(self.nx)
        data, der = self.system.workspace.get()
        legendre(self.system.model, data, der, self.dynamic_index, self.kinematic_index, q, dq, x)
        return x

    def discrete_states(self, Q, dQ) -> np.ndarray:
        """:meth:`discrete_state` of each row of ``Q`` and ``dQ``.

        Parameters
        ----------
        Q, dQ : array_like, shape (knots, n)
            Positions and velocities.

        Returns
        -------
        X : ndarray, shape (knots, nx)

        Raises
        ------
        ValueError
            Shapes that differ or are wrong; a non-finite entry (named).
        """
        Q = float_stack("positions", Q, (None, self.nq))
        dQ = float_stack("velocities", dQ, Q.shape)
        X = np.empty((Q.shape[0], self.nx))
        data, der = self.system.workspace.get()
        legendre_many(self.system.model, data, der, self.dynamic_index, self.kinematic_index, Q, dQ, X)
        return X

    def continuous_state(self, x):
        """The inverse transform ``x = [q, p, v] -> (q, qdot)``: ``M_dd qdot_dyn = p - M_dk v``.

        Parameters
        ----------
        x : array_like, shape (nx,)

        Returns
        -------
        q, dq : ndarray, shape (n,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        SingularMatrixError
            ``M_dd`` is singular at ``q``.
        """
        q, p, v = self.split_state(x)
        dq = np.empty(self.nq)
        data, der = self.system.workspace.get()
        if not inverse_legendre(self.system.model, data, der, self.dynamic_index,
                                self.kinematic_index, q.copy(), p.copy(), v.copy(), dq):
            raise SingularMatrixError("inverse Legendre transform: the mass matrix of the dynamic "
                                      "variables is singular at this q", "mass matrix", -1)
        return q.copy(), dq

    def state_jacobian(self, q, dq) -> np.ndarray:
        """``d[q, p, v] / d[q, qdot]`` at ``(q, qdot)``: maps a continuous-state perturbation (or
        weight) to the discrete state.

        Parameters
        ----------
        q, dq : array_like, shape (n,)

        Returns
        -------
        ndarray, shape (2n, 2n)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        names = self.system.config_names
        q = check_vector("q", q, self.nq, names)
        dq = check_vector("qdot", dq, self.nq, names)
        J = np.empty((2 * self.nq, 2 * self.nq))
        data, der = self.system.workspace.get()
        legendre_jacobian(self.system.model, data, der, self.dynamic_index, self.kinematic_index,
                          q, dq, J)
        return J

    def discrete_momentum(self, q_prev, q):
        """The discrete Legendre transform ``p_k = D2 L_d(q_k-1, q_k)`` (dynamic rows).

        ``discrete_momentum(q, q)`` is the momentum of the discrete rest state (see
        :meth:`rest_state`): ``dt/2 L_q(q, 0)``, not the continuous ``dL/d dq (q, 0) = 0``.

        Parameters
        ----------
        q_prev, q : array_like, shape (n,)
            ``q_k-1`` and ``q_k``.

        Returns
        -------
        p : ndarray, shape (nd,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        Q = np.stack([check_vector("q_prev", q_prev, self.nq), check_vector("q", q, self.nq)])
        return self.discrete_momenta(Q, np.zeros(self.nd))[1]

    def rest_state(self, q) -> np.ndarray:
        """The discrete state at rest at ``q``: ``x = [q, D2 L_d(q, q), 0]``, the fixed point of the
        one-step map under :meth:`rest_input` (when :func:`core.holding_inputs` reports a zero
        residual).

        With ``q_k = q_k+1 = q`` the DEL equations give ``p_k+1 = D2 L_d(q, q) = dt/2 L_q(q, 0)``
        and ``D1 L_d + D2 L_d = dt L_q(q, 0)``, so ``p_k = p_k+1`` exactly when
        ``L_q + B u = Dh^T lam / dt``: the continuous static balance.
        ``vi.state(q, vi.momentum(q, 0))`` (``p = 0``) is *not* at rest: it starts a step late by
        half a step of gravity and drifts. Stepping reproduces the fixed point to the DEL solve's
        ``tolerance`` (its Newton iteration starts from ``q + dt M^-1 p``).

        Parameters
        ----------
        q : array_like, shape (n,)
            A configuration on the holonomic constraints.

        Returns
        -------
        x : ndarray, shape (nx,)

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; ``q`` off the holonomic constraints
            (:meth:`core.System.check_configuration`).
        """
        q = check_vector("q", q, self.nq, self.system.config_names)
        self.system.check_configuration(q, what="the rest state")
        return self.state(q, self.discrete_momentum(q, q))

    def rest_input(self, q, u=None) -> np.ndarray:
        """The discrete input that keeps :meth:`rest_state` fixed: ``[u, q_kinematic]``.

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration.
        u : array_like, shape (m,), optional
            The force inputs (None: :func:`core.holding_inputs`, whose residual is then not checked:
            call it yourself to know whether the system can hold ``q``).

        Returns
        -------
        ndarray, shape (nu,)

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; with ``u`` None, ``q`` off the holonomic constraints.
        """
        q = check_vector("q", q, self.nq, self.system.config_names)
        if u is None:
            from core.continuous.equilibrium import holding_inputs
            u = holding_inputs(self.system, q)[0]
        u = check_vector("u", u, self._m, self.system.input_names, optional=True)
        return np.concatenate([u, q[self.kinematic_index]])

    def discrete_momenta(self, Q, p0) -> np.ndarray:
        """Momenta along configurations: ``p_0`` given, then ``p_k = D2 L_d(q_k-1, q_k)``.

        Parameters
        ----------
        Q : array_like, shape (knots, n)
            The configurations.
        p0 : array_like, shape (nd,)
            The first momentum.

        Returns
        -------
        P : ndarray, shape (knots, nd)

        Raises
        ------
        ValueError
            A wrong shape or a non-finite entry (named).
        """
        Q = float_stack("configurations", Q, (None, self.nq))
        P = np.empty((Q.shape[0], self.nd))
        P[0] = check_vector("p0", p0, self.nd)
        data, der = self.system.workspace.get()
        discrete_momenta(self.system.model, data, der, self.dt, self.dynamic_index, Q, P)
        return P

    # ---------------------------------------------------------------- the tracking law
    def feedback(self, q, dq, x_ref, u_ref, K, x_out=None, u_out=None):
        """``u = u_ref - K (x - x_ref)`` with ``x = discrete_state(q, dq)``, in one compiled call
        (the 1 kHz path of a controller).

        The arguments are not checked: pass float64 arrays of the right sizes. ``x_ref``, ``u_ref``,
        ``K`` reach the kernel read-only (a gain schedule's are; numba types read-only arrays apart,
        so one compiled law serves both kinds).

        Parameters
        ----------
        q, dq : ndarray, shape (n,)
            The measured continuous state.
        x_ref : ndarray, shape (nx,)
        u_ref : ndarray, shape (nu,)
        K : ndarray, shape (nu, nx)
        x_out, u_out : ndarray, shapes (nx,), (nu,), optional
            Receive the results if given.

        Returns
        -------
        u : ndarray, shape (nu,), or None
            None if an entry of ``u`` is not finite.
        x : ndarray, shape (nx,)
        """
        x = np.empty(self.nx) if x_out is None else x_out
        u = np.empty(self.nu) if u_out is None else u_out
        data, der = self.system.workspace.get()
        ok = feedback(self.system.model, data, der, self.dynamic_index, self.kinematic_index, q, dq,
                      _read_only(x_ref), _read_only(u_ref), _read_only(K), x, u)
        return (u if ok else None), x

    # ---------------------------------------------------------------- stepping
    def _solve(self, q, p, u_force, rho, check=None):
        """DEL solve, remembered per thread. The arrays returned are the cache's own: copy them
        before handing them out. ``check`` (raising for bad input) runs before a solve, not on
        a hit: the inputs were checked then."""
        key = (q.tobytes(), p.tobytes(), u_force.tobytes(), rho.tobytes(), self._settings.tobytes())
        cache = self._last.__dict__
        if cache.get("key") == key and cache.get("model") is self.system.model:
            return cache["value"]
        if check is not None:
            check()
        value = self._solve_uncached(q, p, u_force, rho)
        cache.update(key=key, model=self.system.model, value=value)
        return value

    def _solve_uncached(self, q, p, u_force, rho):
        model = self.system.model
        data, der = self.system.workspace.get()
        n = model.nq
        q1, p1, lam = np.empty(n), np.empty(self.nd), np.zeros(model.nh)
        Dh1 = np.empty((model.nh, n))
        status, info = np.zeros(2, np.int64), np.zeros(4)
        del_step(model, data, der, self.dt, self.dynamic_index, self.kinematic_index, q, p,
                 u_force, rho, self.tolerance, self.max_iterations, q1, p1, lam, Dh1, status, info)
        if status[0] != OK:
            self._raise_solve(status, info, None, self._step_inputs(q, p, u_force, rho))
        # Shared through the cache: callers copy them or only pass them to kernels. (Kept
        # writable: numba types read-only arrays apart and types them slowly, ~9 us a call.)
        # Dh(q_k+1) goes to the linearization, which then need not evaluate it again.
        return q1, p1, lam, Dh1

    def _raise_solve(self, status, info, step, inputs):
        """The DEL solve's failure as an :class:`IntegratorError`. A failure at an iterate that
        moved more than ``RUNAWAY`` times the size of ``q_k`` (at least 1) in one step, or with
        non-finite numbers, is reported as an overflow naming the largest entry of ``inputs``
        (``(name, array, labels)``, ``q_k`` first), not as a singular matrix."""
        code = int(status[0])
        at = f" at step {step}" if step is not None else ""
        moved, var = float(info[2]), int(info[3])
        scale = max(1.0, float(np.max(np.abs(inputs[0][1]), initial=0.0)))
        extra = dict(step=step, residual=float(info[0]), iterations=int(info[1]))
        if code == OVERFLOW or (code != OK and not moved <= RUNAWAY * scale):
            what = {NEWTON_FAILED: "Newton's method diverged",
                    SINGULAR_JACOBIAN: "the DEL Newton matrix lost rank",
                    OVERFLOW: ("the DEL Newton matrix overflowed (non-finite entries)"
                               if int(status[1]) == 1 else "the next state overflowed (not finite)")
                    }[code]
            name = self.system.config_names[var] if 0 <= var < self.nq else "q"
            raise IntegratorError(
                f"DEL solve failed{at}: the state or inputs are too large for this system and dt "
                f"(largest entry: {largest_entry(inputs)}); {what} after {int(info[1])} "
                f"iteration(s), at an iterate that moves {name} by {moved:.3g} in one step of "
                f"dt = {self.dt:g}; reduce them or dt", matrix=None, **extra)
        if code == NEWTON_FAILED:
            raise IntegratorError(
                f"DEL solve did not converge{at}: residual {info[0]:.3e} after {int(info[1])} "
                f"Newton iterations (tolerance {self.tolerance:.1e}); reduce dt or check the inputs",
                matrix=None, **extra)
        if code == SINGULAR_JACOBIAN:
            raise IntegratorError(
                f"DEL Newton Jacobian is singular{at} (row {int(status[1])}): M_k+1 or the "
                "constraint Jacobian lost rank (a variable that moves no mass: give it an armature "
                "or lock it)", matrix="DEL Jacobian", **extra)

    def _step_inputs(self, q, p, u_force, rho):
        """``(name, array, labels)`` of a step's inputs, for :meth:`_raise_solve`."""
        state, inputs = self._names()
        n, nd = self.nq, self.nd
        return (("q", q, state[:n]), ("p", p, state[n:n + nd]), ("u", np.concatenate([u_force, rho]),
                                                                  inputs))

    def _call(self):
        """This thread's :class:`~core.discrete.entry.StepCall` record, its status array and its
        address (made once per thread and compiled model)."""
        local = self._last.__dict__
        model = self.system.model
        if local.get("call_model") is not model:
            data, der = self.system.workspace.get()
            rec = create_step_call(model, data, der, self.dynamic_index, self.kinematic_index, self._settings)
            address = typed_address(rec, entry, "STEP_CALL")
            local.update(call=(rec, rec._values["status"], address), call_model=model, zero_u=np.zeros(self._nu))
        return local["call"]

    def _direct(self, entry, x, u, out):
        """``entry(address, x, u, *out)``; whether it succeeded. Its first call compiles (or
        loads) the kernel on checked vectors, which then compiles nothing more
        (``disable_compile``): anything but plain float64 vectors is a ``TypeError``, and is
        converted once and passed again. Inputs that do not convert (a wrong size, a non-finite
        entry) answer False, and the caller's checked path then names what is wrong."""
        _, status, address = self._call()
        if u is None:
            u = self._last.zero_u
        if entry not in _DIRECT:
            x = check_vector("x", x, self.nx, self._names()[0])
            u = check_vector("u", u, self._nu, self._names()[1], optional=True)
            call_and_freeze(entry, _DIRECT, address, x, u, *out)
            return status[0] == OK
        try:
            return entry(address, x, u, *out) == OK
        except (TypeError, ValueError):     # (numba: an unsupported type; an empty list)
            try:
                x, u = check_vector("x", x, self.nx), check_vector("u", u, self._nu)
            except ValueError:
                return False
            return entry(address, x, u, *out) == OK

    def step(self, x, u=None, multipliers: bool = False):
        """The one-step map ``x_k+1 = f(x_k, u_k)``: the forced, constrained DEL equations
        (:mod:`core.discrete.step`), on the dynamic variables::

            p_k + D1 L_d(q_k, q_k+1) + F_d^- - Dh(q_k)^T lam_k = 0,    h(q_k+1) = 0,
            p_k+1 = D2 L_d(q_k, q_k+1),

        solved for ``q_k+1`` by Newton's method; the kinematic variables move to ``rho_k+1`` with
        ``v_k+1 = (rho_k+1 - q_k,kin) / dt``.

        Parameters
        ----------
        x : array_like, shape (nx,) or (N, nx)
            ``[q_k, p_k, v_k]``. A stack of states with ``u`` of shape ``(N, nu)`` gives the
            ``(N, nx)`` next states, each the single call's, computed in parallel chunks.
        u : array_like, shape (nu,) or (N, nu), optional
            ``[force inputs, rho_k+1]`` (None: zeros).
        multipliers : bool
            Also return ``lam_k`` (one state only).

        Returns
        -------
        x_next : ndarray, shape (nx,) or (N, nx)
        lam : ndarray, shape (nh,)
            With ``multipliers``: the holonomic constraint multipliers of the step.

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); ``multipliers`` with a stack.
        IntegratorError
            The DEL solve failed: Newton's method did not converge (``residual``, ``iterations``),
            its Jacobian is singular, or the state or inputs are too large for the system and ``dt``
            (an overflow, naming the largest entry). The first failing state of a stack raises the
            single call's error, naming it.
        ResourceLimitError
            A stack whose states would pass :data:`core.validation.STACK_MEMORY_LIMIT`.
        """
        if (type(x) is not np.ndarray or x.ndim == 2) and np.ndim(x) == 2:
            if multipliers:
                raise ValueError("step(multipliers=True) takes one state, not a stack")
            return self._step_stack(x, u)
        if not multipliers:
            x1 = np.empty(self._nx)
            if self._direct(step_at, x, u, (x1,)):
                return x1
        q, p, _ = self.split_state(x)
        u_force, rho = self.split_input(np.zeros(self.nu) if u is None else u)
        q1, p1, lam, _ = self._solve(q, p, u_force, rho)
        v1 = (rho - q[self.kinematic_index]) / self.dt
        x1 = np.concatenate([q1, p1, v1])
        return (x1, lam.copy()) if multipliers else x1

    def _step_stack(self, x, u):
        """:meth:`step` from each state of a stack ``x`` (N, nx) with ``u`` (N, nu): (N, nx),
        in parallel chunks (each with its own record); the first failing point raises the
        single call's error, naming it."""
        X = float_stack("x", x, (None, self.nx))
        N = X.shape[0]
        U = np.zeros((N, self.nu)) if u is None else float_stack("u", u, (N, self.nu))
        check_memory("MidpointVI.step on a stack", 8 * N * self.nx, f"the states are {N} x {self.nx} doubles")
        X1 = np.empty((N, self.nx))
        if N == 0:
            return X1
        self._direct(step_at, X[0], U[0], (np.empty(self.nx),))   # (compiles or loads it)
        status = np.zeros((N, 2), np.int64)
        step_stack(self._call()[0], X, U, X1, status, max(1, min(N, numba.get_num_threads())))
        bad = np.flatnonzero(status[:, 0] != OK)
        if bad.size:
            k = int(bad[0])
            raise_at_point(k, self.step, X[k], U[k])
        return X1

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
        U_ref = float_stack("U_ref", U_ref, (None, self.nu))
        N = U_ref.shape[0]
        X_ref = float_stack("X_ref", X_ref, (None, self.nx))
        if X_ref.shape[0] not in (N, N + 1):
            raise ValueError(f"X_ref must have N = {N} or N + 1 rows (U_ref has {N}), got {X_ref.shape[0]}")
        K = float_stack("K", K, (N, self.nu, self.nx))
        x0 = check_vector("x0", x0, self.nx, self.state_names)
        # (C-contiguous and writable: the kernel's one signature)
        X_ref, U_ref, K = (np.require(a, np.float64, ("C", "W")) for a in (X_ref, U_ref, K))
        X, U = np.empty((N + 1, self.nx)), np.empty((N, self.nu))
        L = N if linearize else 0
        A, B = np.empty((L, self.nx, self.nx)), np.empty((L, self.nx, self.nu))
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
        U = float_stack("u_sequence", u_sequence, (None, self.nu))
        q0 = check_vector("q0", q0, self.nq, self.system.config_names)
        p0 = check_vector("p0", p0, self.nd)
        N, m = U.shape[0], self._m
        Q, P, LAM = np.empty((N + 1, self.nq)), np.empty((N + 1, self.nd)), np.zeros((N, model.nh))
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
        Q = float_stack("configurations", Q, (None, self.nq))
        if Q.shape[0] < 2:
            raise ValueError(f"configurations must have at least 2 knots, got {Q.shape[0]}")
        N = Q.shape[0] - 1
        U, P, resid = np.empty((N, self.nu)), np.empty((N + 1, self.nd)), np.empty(N)
        data, der = self.system.workspace.get()
        del_inverse_dynamics(self.system.model, data, der, self.dt, self.dynamic_index,
                             self.kinematic_index, Q, check_vector("p0", p0, self.nd), U, P, resid)
        return U, P, resid

    # ---------------------------------------------------------------- linearization
    def _linearize(self, x, u, second):
        """The checked path of :meth:`linearize`, :meth:`step_linearize` and :meth:`linearize2`
        (its tensor ``H`` with ``second``): ``(q, q1, p1, rho, A, B, H or None)``."""
        u = np.zeros(self.nu) if u is None else u
        # sizes now; finiteness with the solve (a step solved before had its inputs checked)
        # and for v_k, which the solve does not see
        if second:
            check_second_order_memory("MidpointVI.linearize2", self.nx, self.nx + self.nu)
        q, p, v = self.split_state(x, finite=False)
        u_force, rho = self.split_input(u, finite=False, copy=False)  # the kernels only read
        check = lambda: (self.split_state(x), self.split_input(u))  # noqa: E731
        if v.shape[0] and not math.isfinite(np.dot(v, v)):   # (an overflow: the full check)
            check()
        q1, p1, lam, Dh1 = self._solve(q, p, u_force, rho, check)
        model = self.system.model
        data, der = self.system.workspace.get(third_order=second)
        A, B = np.empty((self.nx, self.nx)), np.empty((self.nx, self.nu))
        nz = self.nx + self.nu
        status, conds = self._status()
        H = np.empty((self.nx, nz, nz)) if second else None    # (None: not compiled in)
        del_linearize(model, data, der, self.dt, self.dynamic_index, self.kinematic_index, q, p,
                      u_force, rho, q1, lam, Dh1, self.condition_limit, A, B, H, None, status,
                      conds, self._scratch(second))
        self._raise_singular(int(status[0]), conds, None)
        return q, q1, p1, rho, A, B, H

    def _status(self):
        """This thread's status and condition-number arrays of the linearization kernel (read
        right after each call)."""
        ws = self.system.workspace
        return ws.buffer("vi_status", 2, np.int64), ws.buffer("vi_conditions", 2)

    def _scratch(self, second, contracted=False):
        """Per-thread work space of the second-order linearization (kept: allocating megabytes
        per call made glibc return them to the OS and fault them back in)."""
        if not second:
            return _NO_SCRATCH
        nh = self.system.model.nh
        if contracted:
            return self.system.workspace.buffer("contracted", contracted_scratch(self.nq, nh))
        return self.system.workspace.buffer("second_order", second_order_scratch(self.nq, self.nd, nh))

    def _raise_singular(self, code, conds, step):
        """Sec. VII: a singular one-step map raises :class:`SingularStepError` with the
        scale-aware measure (:mod:`core.discrete.first_order`)."""
        at = f" at step {step}" if step is not None else ""
        if code == SINGULAR_M_NEXT:
            raise SingularStepError(
                f"M_k+1 = D2 D1 L_d + D2 F_d^- is singular{at}: |M_k+1^-1| times the size of its "
                f"terms is {conds[0]:.3e} >= condition_limit {self.condition_limit:.1e}; singular "
                "coordinates or too large a time step (Sec. VII-A)",
                step=step, matrix="M_k+1", measure=float(conds[0]))
        if code == SINGULAR_CONSTRAINT_STEP:
            raise SingularStepError(
                f"S = Dh(q_k+1) M_k+1^-1 Dh(q_k)^T is singular{at}: |S^-1| relative to its factors "
                f"is {conds[1]:.3e} >= condition_limit {self.condition_limit:.1e} (for one "
                "constraint 1/|cos| of the angle between Dh(q_k+1) and M_k+1^-1 Dh(q_k)^T); the "
                "constraint moved too far in one step or is degenerate (Sec. VII-B)",
                step=step, matrix="Dh M^-1 Dh^T", measure=float(conds[1]))

    def linearize(self, x, u=None):
        """Exact first-order linearization ``(A, B)`` of the one-step map at ``(x, u)``:
        ``A = dx_k+1/dx_k``, ``B = dx_k+1/du_k``.

        Parameters
        ----------
        x : array_like, shape (nx,) or (N, nx)
            A stack of states with ``u`` of shape ``(N, nu)`` gives stacks, each row the single
            call's, computed in parallel chunks (the kernels of :meth:`linearize_trajectory`).
        u : array_like, shape (nu,) or (N, nu), optional
            None: zeros.

        Returns
        -------
        A : ndarray, shape (nx, nx) or (N, nx, nx)
        B : ndarray, shape (nx, nu) or (N, nx, nu)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        IntegratorError
            The DEL solve failed (as in :meth:`step`); for stacks, naming the step.
        SingularStepError
            The one-step map is singular: the scale-aware measure of ``M_k+1`` or of
            ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T`` reaches ``condition_limit`` (Sec. VII); for stacks,
            naming the step.
        """
        if (type(x) is not np.ndarray or x.ndim == 2) and np.ndim(x) == 2:
            X = float_stack("x", x, (None, self.nx))
            U = (np.zeros((X.shape[0], self.nu)) if u is None
                 else float_stack("u", u, (X.shape[0], self.nu)))
            return self._linearize_stack(X, U, False, None, 0)
        A, B = np.empty(self._shape_A), np.empty(self._shape_B)
        if self._direct(linearize_step_at, x, u, (A, B)):
            return A, B
        A, B = self._linearize(x, u, False)[4:6]
        return A, B

    def linearize2(self, x, u=None, costate=None):
        """Exact second-order linearization: ``(A, B, H)`` with
        ``H[i, a, b] = d2 x_k+1,i / dz_a dz_b``, ``z = [x, u]``.

        With ``costate`` (a vector ``λ`` over ``x_k+1``'s entries): ``(A, B, W)`` with
        ``W[a, b] = Σ_i λ_i H[i, a, b]``, the second-order term of ``λᵀ f(z)`` that a Newton or DDP
        step needs, computed without forming ``H`` (one contraction instead of ``nx``, and the
        Lagrangian's third derivatives only along one direction): memory ``O(nz²)``.

        Parameters
        ----------
        x : array_like, shape (nx,)
        u : array_like, shape (nu,), optional
            None: zeros.
        costate : array_like, shape (nx,), optional
            ``λ``.

        Returns
        -------
        A : ndarray, shape (nx, nx)
        B : ndarray, shape (nx, nu)
        H or W : ndarray, shape (nx, nz, nz) or (nz, nz)
            ``nz = nx + nu``.

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        IntegratorError
            The DEL solve failed (as in :meth:`step`).
        SingularStepError
            The one-step map is singular: the scale-aware measure of ``M_k+1`` or of
            ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T`` reaches ``condition_limit`` (Sec. VII).
        ResourceLimitError
            Without ``costate``: ``H`` and its work arrays would pass
            :data:`core.validation.SECOND_ORDER_MEMORY_LIMIT`.
        """
        if costate is not None:
            return self._contracted(x, u, costate)
        return self._linearize(x, u, True)[4:]

    def _contracted(self, x, u, costate):
        """:meth:`linearize2` with a costate, in one call of its entry kernel
        (:func:`core.discrete.entry.contracted_step_at`). Its failures are the first order's
        (the inputs, the solve, Sec. VII), so the checked first-order path raises them."""
        w = check_vector("costate", costate, self.nx, self.state_names)
        nz = self.nx + self.nu
        A, B, W = np.empty(self._shape_A), np.empty(self._shape_B), np.empty((nz, nz))
        if self._direct(contracted_step_at, x, u, (w, A, B, W, self._scratch(True, True))):
            return A, B, W
        self._linearize(x, u, False)
        code = int(self._call()[1][0])
        raise RuntimeError(f"linearize2 failed with status {code}, but not on the checked path")  # pragma: no cover

    def step_linearize(self, x, u=None, second_order: bool = False):
        """One step and its exact linearization from the same solve.

        Parameters
        ----------
        x : array_like, shape (nx,)
        u : array_like, shape (nu,), optional
            None: zeros.
        second_order : bool
            Also ``H`` (as :meth:`linearize2`).

        Returns
        -------
        (x_next, A, B) or (x_next, A, B, H) : tuple of ndarray
            Shapes (nx,), (nx, nx), (nx, nu), (nx, nz, nz).

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        IntegratorError
            The DEL solve failed (as in :meth:`step`).
        SingularStepError
            The one-step map is singular: the scale-aware measure of ``M_k+1`` or of
            ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T`` reaches ``condition_limit`` (Sec. VII).
        ResourceLimitError
            With ``second_order``, as :meth:`linearize2`.
        """
        if not second_order:    # (the entries: the linearization reuses the step's solve)
            x1, A, B = np.empty(self.nx), np.empty(self._shape_A), np.empty(self._shape_B)
            if self._direct(step_at, x, u, (x1,)) and self._direct(linearize_step_at, x, u, (A, B)):
                return x1, A, B
        q, q1, p1, rho, A, B, H = self._linearize(x, u, second_order)
        x1 = np.concatenate([q1, p1, (rho - q[self.kinematic_index]) / self.dt])
        return (x1, A, B, H) if second_order else (x1, A, B)

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
        X = float_stack("X", X, (None, self.nx))
        U = float_stack("U", U, (X.shape[0] - 1, self.nu))
        N, nz = U.shape[0], self.nx + self.nu
        if costates is not None:
            if not second_order:
                raise ValueError("costates weigh the second order: pass second_order=True with them")
            costates = float_stack("costates", costates, (N, self.nx))
        report = progress_reporter(progress)
        if report is None:
            return self._linearize_stack(X, U, second_order, threads, 0, costates)
        As, Bs = np.empty((N, self.nx, self.nx)), np.empty((N, self.nx, self.nu))
        shape = (N, 0, 0) if not second_order else (N, nz, nz) if costates is not None else (N, self.nx, nz, nz)
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
        nz, N = self.nx + self.nu, U.shape[0]
        if costates is not None:
            check_memory("linearize_trajectory(costates=...)", 8 * N * nz * nz,
                         f"the contractions are {N} x {nz} x {nz} doubles")
        elif second_order:
            check_second_order_memory("linearize_trajectory(second_order=True)", self.nx, nz, N)
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
        N, n, nd, m = U.shape[0], self.nq, self.nd, self._m
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
        N, nz = Uf.shape[0], self.nx + self.nu
        model = self.system.model
        dyn, kin = self.dynamic_index, self.kinematic_index
        data, der = self.system.workspace.get(third_order=second_order and costates is None)
        As, Bs = np.empty((N, self.nx, self.nx)), np.empty((N, self.nx, self.nu))
        Hs, contraction = None, None
        if costates is not None:
            contraction = (costates, np.empty((N, nz, nz)))
        elif second_order:
            Hs = np.empty((N, self.nx, nz, nz))
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

    # ---------------------------------------------------------------- compilation
    def warm_up(self, processes: int = 1, part: str = "all", second_order: bool = True) -> None:
        """Compile (or load from numba's cache) every kernel this integrator and its system use, by
        running each once at ``q = 0``. Without it the first call of each compiles (seconds to
        minutes on a cold cache); a controller calls it before it starts.

        Parameters
        ----------
        processes : int
            ``processes=2`` (any value > 1): the integrator's kernels compile in a second process
            (``python -m core.warmup``, on a small model of its own: a kernel's types do not depend
            on the model) while this one compiles the continuous ones, then load from the cache here
            (only with ``part="all"`` and when the cache is cold: a warm one just loads).
        part : {"all", "continuous", "discrete"}
            The kernels to warm up.
        second_order : bool
            False leaves the second-order linearization out (its memory grows as ``n³``: warm it up
            on a small model, whose kernels are the same).

        Raises
        ------
        ValueError
            An unknown ``part``.
        """
        if part not in ("all", "continuous", "discrete"):
            raise ValueError(f"warm_up: part must be 'all', 'continuous' or 'discrete', got {part!r}")
        cold = processes > 1 and part == "all" and not is_cached(second_order)
        helper = compile_in_background("discrete") if cold else None
        if part in ("all", "continuous"):
            self._warm_up_continuous()
        if helper is not None:
            helper.wait()
        if part in ("all", "discrete"):
            self._warm_up_discrete(second_order)

    def _warm_up_continuous(self) -> None:
        """The system's continuous dynamics, the Legendre transforms and the feedback law."""
        n = self.nq
        q, dq = np.zeros(n), np.zeros(n)
        x = self.discrete_state(q, dq)
        self.state_jacobian(q, dq)
        for call in (lambda: self.system.linearize(q, dq, residual_limit=None),
                     lambda: self.system.qdd(q, dq),
                     lambda: self.continuous_state(x)):
            try:
                call()
            except SingularMatrixError:
                pass       # singular at q = 0 for this model: compiled all the same
        self.system.input_matrix(q)
        u = np.zeros(self.nu)
        u[self._m:] = q[self.kinematic_index]
        K = np.zeros((self.nu, self.nx))
        self.feedback(q, dq, x, u, K)
        self.system.lagrangian_derivatives(q, dq, 3)     # (last: no controller or service needs it)

    def _warm_up_discrete(self, second_order: bool = True) -> None:
        """DEL inverse dynamics, steps, first- and second-order linearizations, simulation (a
        re-plan's closed loop is loaded by mechnode's configure when re-planning is set)."""
        n = self.nq
        Q = np.zeros((3, n))
        U, P, _ = self.inverse_dynamics(Q, np.zeros(self.nd))
        X = np.hstack([Q, P, np.zeros((3, self.nk))])
        for second in (False, True) if second_order else (False,):
            try:
                self.linearize_trajectory(X, U, second_order=second, threads=1)
                self.step_linearize(X[0], U[0], second_order=second)
                if second:      # (the contracted second order: the optimizer's)
                    self.linearize_trajectory(X, U, True, threads=1, costates=np.zeros((2, self.nx)))
                    self.linearize2(X[0], U[0], costate=np.zeros(self.nx))
            except (IntegratorError, SingularMatrixError):
                pass
        # the entry kernels of step and linearize (core.discrete.entry); they report, never raise
        self._direct(step_at, X[0], U[0], (np.empty(self.nx),))
        self._direct(linearize_step_at, X[0], U[0], (np.empty((self.nx, self.nx)), np.empty((self.nx, self.nu))))
        try:
            self.simulate(Q[0], P[0], U)
        except IntegratorError:
            pass
