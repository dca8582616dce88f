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

:class:`MidpointVI` is a façade over three rooms: its settings, its one step and its
linearizations are here (the DEL solve remembered per thread, the entry kernels called
directly); its state transforms and tracking law are :class:`core.discrete.states.DiscreteStates`
(``discrete_state``, ``rest_state``, ``feedback``, ...); its trajectory calls are
:class:`core.discrete.rollouts.TrajectoryCalls` (``closed_loop``, ``simulate``,
``inverse_dynamics``, ``linearize_trajectory``, stacks of states).

Errors: a DEL solve that does not converge, or a singular one-step map (Sec. VII), raises
:class:`core.errors.IntegratorError` naming the step, the matrix, the residual and the iterations; bad
numeric input raises ``ValueError`` naming the entry.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from core.base.records import typed_address
from core.cache import call_and_freeze, compile_in_background, is_cached
from core.continuous.floating import refuse
from core.discrete import entry
from core.discrete.entry import (
    contracted_step_at,
    create_step_call,
    linearize_step_at,
    step_at,
)
from core.discrete.first_order import del_linearize
from core.discrete.rollouts import TrajectoryCalls
from core.discrete.second_order import contracted_scratch, second_order_scratch
from core.discrete.states import DiscreteStates
from core.discrete.step import del_step
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
from core.validation import (
    TIME_STEP_RANGE,
    check_second_order_memory,
    check_vector,
    largest_entry,
    ndim,
    number,
    time_step,
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
    solve on). ``check(name, value)`` checks and converts a value (default: a finite positive
    number, ``integer``: a whole one)."""

    def __init__(self, index: int, doc: str, integer: bool = False, check=None):
        self.index, self.integer, self.__doc__ = index, integer, doc
        self.check = check or (lambda name, value: number(name, value, positive=True, integer=integer))

    def __set_name__(self, owner, name):
        self.name, self.attr = name, "_" + name

    def __get__(self, vi, owner=None):
        return self if vi is None else getattr(vi, self.attr)

    def __set__(self, vi, value):
        value = self.check(self.name, value)
        setattr(vi, self.attr, value)
        vi._settings[self.index] = value


class MidpointVI(DiscreteStates, TrajectoryCalls):
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
        The time step (s), within :data:`core.validation.TIME_STEP_RANGE`: 1e-9 s to 1e3 s.
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
        A setting that is not a finite positive number (``max_iterations``: a whole one), or a
        ``dt`` outside :data:`core.validation.TIME_STEP_RANGE`: naming the setting, its value
        (and the range).
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

    def __reduce__(self):
        """An integrator pickles as its system (by description: :meth:`core.System.__getstate__`)
        and its four settings, and is built anew on unpickling."""
        return (type(self), (self.system, self.dt, self.tolerance, self.max_iterations, self.condition_limit))

    # ---------------------------------------------------------------- settings
    dt = _Setting(0, f"The time step (s), from {TIME_STEP_RANGE[0]:g} s to {TIME_STEP_RANGE[1]:g} s "
                     "(core.validation.TIME_STEP_RANGE).", check=time_step)
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
        if (type(x) is not np.ndarray or x.ndim == 2) and ndim(x) == 2:
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
        if (type(x) is not np.ndarray or x.ndim == 2) and ndim(x) == 2:
            return self._linearize_states(x, u)
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
