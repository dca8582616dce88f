"""The model the node serves: a :class:`core.System` and its :class:`core.MidpointVI` at the
node's ``dt``, under the names the node uses. A thin adapter over core's public API (every
computation is core's); never imports rclpy.

Conventions: :data:`core.CONVENTIONS` (continuous state ``[q, qdot]``; discrete state
``x = [q, p, v]``; input ``u = [force inputs, next values of the kinematic variables]``).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import time

import numpy as np

import core
from mechnode.errors import InputError

#: The default model of the node (a model packaged with core: core.data).
DEFAULT_MODEL = "cartpole.yaml"
#: The parts of core's warm-up (``python -m core.warmup``, core/warmup.py) the node needs before
#: it may activate: its command path, schedules (optimizer included) and idle hold; and the rest
#: (the continuous and second-order linearizations, for the services), compiled in the
#: background after a cold start.
CONTROL_PARTS = ("step", "state", "closed_loop", "linearize", "inverse", "lqr", "hold", "optimize")
REST_PARTS = ("continuous", "discrete", "all")
#: Niceness of the background compilation (the command path and the robot go first).
REST_NICE = 19
#: The small packaged model the kernels are loaded on (a kernel's types do not depend on the model).
WARM_UP_MODEL = "double_pendulum.yaml"


def start_compiling(parts, processes: int = 2, nice: int = 0, tag: str = "", stderr=None):
    """``python -m core.warmup --team N PARTS``: a process that compiles the kernels of core's
    warm-up ``parts`` missing from numba's cache, in ``processes`` processes, naming and counting
    each on ``stderr`` (default this process's); on a warm cache it exits at once, silent. Its
    stdout says how many kernels were missing (:func:`missing_kernels`). None if it cannot start."""
    env = dict(os.environ)
    if tag:
        env["MECHNODE_COMPILE_TAG"] = tag
    try:
        return subprocess.Popen([sys.executable, "-m", "core.warmup", "--team", str(processes), *parts],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env,
                                preexec_fn=(lambda: os.nice(nice)) if nice else None)
    except OSError:
        return None


def missing_kernels(proc) -> int:
    """Wait for a :func:`start_compiling` process; the number of kernels it found missing (and
    compiled), 0 if it cannot tell."""
    out, _ = proc.communicate()
    try:
        return int(out.split()[0])
    except (IndexError, ValueError):
        return 0


def load_kernels(vi, hold: bool = True, replan: bool = False) -> None:
    """Run what the node runs before and after activation once on ``vi`` (loads its kernels
    from the cache; compiles what is missing): the command path's feedback law, the Legendre
    transforms, a step, DEL inverse dynamics, the linearization along a trajectory, the Riccati
    pass, the first-order optimizer, (``hold``) the idle hold's computations and (``replan``) a
    re-plan's closed loop and Gauss-Newton step (:mod:`mechnode.ros.replanner`). A model singular at
    ``q = 0`` is loaded all the same."""
    n, nx, nu = vi.nq, vi.nx, vi.nu
    z = np.zeros(n)

    def attempt(call):
        try:
            call()
        except (core.CoreError, ArithmeticError, np.linalg.LinAlgError, ValueError):
            pass
    x, u, K = vi.discrete_state(z, z), np.zeros(nu), np.zeros((nu, nx))
    u[vi.system.nu:] = z[vi.kinematic_index]
    attempt(lambda: vi.continuous_state(x))
    vi.system.lagrangian_derivatives(z, z, 2)
    vi.feedback(z, z, x, u, K)
    attempt(lambda: vi.step(np.zeros(nx), np.zeros(nu)))
    Q = np.zeros((3, n))

    def trajectory():
        U, P, _ = vi.inverse_dynamics(Q, np.zeros(vi.nd))
        vi.discrete_momenta(Q, np.zeros(vi.nd))
        X = np.hstack([Q, P, np.zeros((3, vi.nk))])
        A, B = vi.linearize_trajectory(X, U, threads=1)
        core.tvlqr(A, B, np.eye(nx), np.eye(nu), np.eye(nx))
        core.optimize_trajectory(vi, X[0], X, U, np.eye(nx), np.eye(nu), np.eye(nx), method="first_order",
                                 max_iterations=1)
    attempt(trajectory)
    if hold:
        def hold_kernels():
            q = core.satisfy_constraints(vi.system, np.full(n, 0.3))
            x, u = vi.rest_state(q), vi.rest_input(q, core.holding_inputs(vi.system, q)[0])
            vi.linearize(x[None], u[None])      # (as the hold does: a stack of one)
        attempt(hold_kernels)
    if replan:
        def replan_kernels():
            X, U = np.tile(x, (3, 1)), np.tile(u, (2, 1))
            Ks = np.zeros((2, nu, nx))
            Xc, Uc, A, B = vi.closed_loop(x, X[:2], U, Ks)
            vi.closed_loop(x, X[:2], U, Ks, linearize=False)
            core.tracking_step(A, B, Xc, Uc, X, U, np.eye(nx), np.eye(nu), np.eye(nx))
            vi.linearize(x, u)          # (the terminal weight's linearization: mechnode.logic.replan.terminal_for)
        attempt(replan_kernels)
#: Most entries of the ``locked_joints`` parameter, and longest entry (characters).
MAX_LOCKED_JOINTS, MAX_LOCKED_ENTRY = 1000, 256


class ModelSpecError(ValueError):
    """The model parameter names no loadable model."""


# ================================================================================ model loading
#: Largest accepted model (file, YAML or URDF text), checked before anything is parsed: core's
#: limit (:func:`core.read_model`).
MAX_MODEL_BYTES = core.validation.MAX_MODEL_BYTES


def read_model_text(spec: str) -> tuple[str, str]:
    """``(text, source)`` for a model parameter value (:func:`core.read_model`: a YAML or URDF
    file, absolute, relative to the working directory or packaged with core, or model text, at
    most :data:`MAX_MODEL_BYTES`): the model's text and where it came from (the file's path,
    or ``YAML text (N characters)``). Raises :class:`ModelSpecError`."""
    model = _read(spec)
    return model.text, model.origin


def _read(spec: str) -> core.datatypes.ModelText:
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError("the model parameter is empty")
    try:
        return core.read_model(spec)
    except core.errors.ModelError as exc:
        raise ModelSpecError(str(exc)) from None


def check_model_spec(spec: str) -> None:
    """Validation of a model parameter value when it is set: read and, for YAML, parsed
    (:func:`core.validation.read_yaml`: plain data only, depth, size and aliases bounded), not built;
    raises ModelSpecError."""
    model = _read(spec)
    try:
        data = {} if model.urdf else core.validation.read_yaml(model.text, f"model {model.origin}")
    except core.errors.ModelError as exc:
        raise ModelSpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise ModelSpecError(f"model {model.origin}: expected a YAML mapping (frames, inputs, ...), got "
                             f"{type(data).__name__}")


def parse_locked_joints(entries) -> dict:
    """``["joint=value", ...]`` (the ``locked_joints`` parameter) -> ``{joint: value}``; an
    :class:`InputError` naming a malformed entry (bounded: :data:`MAX_LOCKED_JOINTS` entries of
    at most :data:`MAX_LOCKED_ENTRY` characters, checked before anything is parsed)."""
    entries = list(entries or ())
    if len(entries) > MAX_LOCKED_JOINTS:
        raise InputError(f"locked_joints has {len(entries)} entries, more than {MAX_LOCKED_JOINTS}")
    out = {}
    for e in entries:
        if not isinstance(e, str) or len(e) > MAX_LOCKED_ENTRY or e.count("=") != 1:
            shown = e if not isinstance(e, str) or len(e) <= 60 else e[:60] + "..."
            raise InputError(f"locked_joints entry {shown!r} must be 'joint=value' (a joint name and a "
                             f"number, at most {MAX_LOCKED_ENTRY} characters)")
        name, text = (x.strip() for x in e.split("="))
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not name or not np.isfinite(value):
            raise InputError(f"locked_joints entry {e!r}: expected 'joint=value' with a finite number")
        if name in out:
            raise InputError(f"locked_joints names joint {name!r} twice")
        out[name] = value
    return out


def system_from_text(text: str, source: str, locked=None, **urdf_options) -> core.System:
    """A :class:`core.System` from a model's text read from ``source``
    (:func:`read_model_text`): URDF (``core.load_urdf`` with its default ``mimic="couple"``: a
    mimic joint follows its leader, with no coordinate or input of its own; ``urdf_options``
    such as ``floating_base`` and ``contacts`` passed on) or YAML (``core.load_system``);
    ``locked`` (``{joint: value}``) freezes joints (they leave the state and the inputs). Raises
    :class:`ModelSpecError` naming ``source``."""
    try:
        model = dataclasses.replace(core.read_model(text), origin=source)
        if urdf_options and not model.urdf:
            raise ModelSpecError(f"model {source}: {', '.join(sorted(urdf_options))} need a URDF model, "
                                 "not YAML")
        return core.load_system(model, locked=dict(locked or {}), **urdf_options)
    except core.errors.ModelError as exc:
        message = str(exc)
        raise ModelSpecError(message if message.startswith(f"model {source}") else f"model {source}: {message}") \
            from None


def load_model(spec: str, locked=None) -> core.System:
    """A :class:`core.System` from a YAML or URDF file or model text (see :func:`read_model_text`)."""
    return system_from_text(*read_model_text(spec), locked)


# ================================================================================ the plant
class Plant:
    """A system and its variational integrator at ``dt``, under the names the node uses.

    Every computation is the integrator's own public method, reached as ``plant.vi``:
    ``step``, ``linearize``, ``linearize2``, ``linearize_trajectory``, ``discrete_state(s)``,
    ``continuous_state``, ``state_jacobian``, ``discrete_momenta``, ``inverse_dynamics``,
    ``feedback`` (see :class:`core.MidpointVI`). What the Plant adds: where the model came from,
    short names for the sizes, and whether the reference can be tracked by inverse dynamics
    (:attr:`fully_actuated`).

    Thread safety: core's kernels use the calling thread's scratch, so one Plant serves several
    threads at once.
    """

    def __init__(self, system: core.System, dt: float, source: str = "", text: str | None = None,
                 locked=None):
        self.system = system
        self.source = source
        #: the model text the system was built from (None if built otherwise) and the joints
        #: locked in it (the locked_joints parameter): what another process builds the same
        #: plant from (:meth:`from_text`)
        self.text = text
        self.locked = dict(locked or {})
        self.vi = core.MidpointVI(system, dt)

    @functools.cached_property
    def _input_rank(self) -> int:
        # (on first use, not when built: the kernel compiles with the others on a cold cache)
        nd, m = self.vi.nd, self.system.nu
        Fu = self.system.input_matrix(np.zeros(self.system.nq))
        return int(np.linalg.matrix_rank(Fu[self.vi.dynamic_index])) if nd and m else 0

    @property
    def fully_actuated(self) -> bool:
        """No constraints and the force inputs span every dynamic variable."""
        return (not self.has_constraints) and self._input_rank == self.nd

    @property
    def actuation(self) -> str:
        """``fully actuated``, ``constrained`` or ``underactuated (...)``, for messages."""
        return ("fully actuated" if self.fully_actuated else "constrained" if self.has_constraints else
                f"underactuated ({self._input_rank} independent force inputs for {self.nd} dynamic variables)")

    @classmethod
    def load(cls, spec: str, dt: float, locked=None) -> "Plant":
        """The plant of a model parameter value (a file or model text) at ``dt``, ``locked``
        joints frozen (``{joint: value}``)."""
        model = _read(spec)
        # named as the parameter names it (a file), or "YAML text (N characters)"
        return cls.from_text(model.text, dt, spec if model.path else model.origin, locked)

    @classmethod
    def from_text(cls, text: str, dt: float, source: str = "model text", locked=None) -> "Plant":
        """The plant of a model's text (as in :attr:`text`) at ``dt``, ``locked`` joints frozen."""
        return cls(system_from_text(text, source, locked), dt, source, text, locked)

    def with_dt(self, dt: float) -> "Plant":
        """The same system with another time step (shares the compiled model)."""
        return self if float(dt) == self.dt else Plant(self.system, dt, self.source, self.text, self.locked)

    # ------------------------------------------------------------------ sizes and names
    dt = property(lambda self: self.vi.dt, doc="time step [s]")
    model = property(lambda self: self.system.model, doc="the compiled core.datatypes.Model")
    n = property(lambda self: self.system.nq, doc="number of configuration variables q")
    nd = property(lambda self: self.vi.nd, doc="number of dynamic variables")
    nk = property(lambda self: self.vi.nk, doc="number of kinematic variables")
    m = property(lambda self: self.system.nu, doc="number of force inputs")
    nx = property(lambda self: self.vi.nx, doc="discrete state size (n + nd + nk)")
    nu = property(lambda self: self.vi.nu, doc="integrator input size (m + nk)")
    dyn = property(lambda self: self.vi.dynamic_index, doc="indices of the dynamic variables in q")
    kin = property(lambda self: self.vi.kinematic_index, doc="indices of the kinematic variables in q")
    config_names = property(lambda self: self.system.config_names)
    mimic_names = property(lambda self: list(self.system.mimic_joints),
                           doc="joints that follow a variable (mimic joints): no state of their own")
    locked_names = property(lambda self: list(self.system.locked_joints),
                            doc="joints frozen by locked_joints (and their mimics): no state or input")
    follower_names = property(lambda self: self.mimic_names + self.locked_names,
                              doc="joints a JointState may carry that have no variable: ignored")
    dynamic_names = property(lambda self: self.vi.dynamic_names)
    kinematic_names = property(lambda self: self.vi.kinematic_names)
    force_input_names = property(lambda self: self.system.input_names)
    input_names = property(lambda self: self.vi.input_names, doc="integrator inputs")
    state_names = property(lambda self: self.vi.state_names, doc="discrete state [q, p, v]")
    continuous_state_names = property(lambda self: self.system.state_names, doc="[q, qdot]")
    has_constraints = property(lambda self: self.system.model.nh > 0)

    # ------------------------------------------------------------------ checks and warm-up
    def check_size(self, max_variables: int) -> None:
        """A :class:`ModelSpecError` if the model has more than ``max_variables`` configuration
        variables (checked before anything that grows with its size is allocated)."""
        if self.n > max_variables:
            raise ModelSpecError(f"model {self.source}: {self.n} configuration variables, more than "
                                 f"max_model_variables = {max_variables} (the integrator's second order "
                                 f"alone would take about {300 * self.n ** 3 / 1e9:.1f} GB)")

    def check_regular(self) -> None:
        """A :class:`ModelSpecError` with core's message if the mass matrix is singular at two
        generic states (a variable that moves no mass: then it is singular everywhere and no
        linearization will ever succeed). A model singular only at special configurations
        passes. The mass matrix of the dynamic variables is checked first (core's Lagrangian
        derivatives: no kernel of its own to compile); only if that looks singular does core's
        continuous linearization say so, in its words."""
        for q in self._generic_states():
            if self._mass_matrix_regular(q):
                return
        errors = []
        for q in self._generic_states():
            try:
                self.system.linearize(q, np.zeros(self.n), np.zeros(len(self.system.continuous_input_names)),
                                      residual_limit=None)
                return
            except core.errors.SingularMatrixError as exc:
                if exc.matrix != "mass matrix":
                    return          # (constraints degenerate at this state: not the model's fault)
                errors.append(exc)
        raise ModelSpecError(f"model {self.source}: {errors[-1]}")

    def _generic_states(self):
        for k in (1, 2):
            q = np.array([0.1 * k * np.sin(1.0 + i) for i in range(self.n)])
            yield np.clip(q, *self.system.position_limits)      # (infinite where unlimited)

    #: Smallest Cholesky pivot of the dynamic variables' mass matrix, relative to its largest
    #: diagonal entry, taken as regular without asking core (core's own threshold: 1e-12).
    REGULAR_PIVOT = 1e-9

    def _mass_matrix_regular(self, q) -> bool:
        try:
            M = self.system.lagrangian_derivatives(q, np.zeros(self.n), 2).Lvv
        except core.CoreError:
            return False
        dyn = self.dyn
        if not dyn.size:
            return True
        Mdd = M[np.ix_(dyn, dyn)]
        scale = float(np.abs(np.diag(Mdd)).max()) if np.all(np.isfinite(Mdd)) else 0.0
        if not scale > 0.0:
            return False
        try:
            L = np.linalg.cholesky(Mdd)
        except np.linalg.LinAlgError:
            return False
        return bool(np.min(np.diag(L)) ** 2 > self.REGULAR_PIVOT * scale)

    @staticmethod
    def start_warm_up(stderr=None):
        """Start compiling the kernels of :data:`CONTROL_PARTS` that numba's cache lacks, in two
        processes (:func:`start_compiling`; on a warm cache it ends at once), for a later
        :meth:`warm_up`."""
        return start_compiling(CONTROL_PARTS, 2, stderr=stderr)

    def warm_up(self, processes: int = 2, stderr=None, team=None, replan: bool = False) -> float:
        """Load or compile the kernels the node needs before it may activate
        (:data:`CONTROL_PARTS`: command path, schedules, idle hold): what numba's cache lacks
        compiles first on a small model (a kernel's types do not depend on the model) in
        ``processes`` processes (:func:`start_compiling`; their messages on ``stderr``), or
        ``team``, such a process started earlier (:meth:`start_warm_up`), is waited for. Then
        it runs them on a small model and on this model once (loaded; this model's scratch
        made, its first steps as fast as the next): nothing here allocates more than ``O(n²)``
        with the size of the node's model. The continuous and second-order linearizations are
        not among them (:meth:`warm_up_rest`); a re-plan's closed loop is, with ``replan``
        (compiled here on a cold cache). Returns the seconds it took;
        :attr:`compiled_kernels` is how many were missing."""
        t0 = time.perf_counter()
        if team is None and processes > 1:
            team = start_compiling(CONTROL_PARTS, processes, stderr=stderr)
        #: kernels the cache lacked at warm-up (compiled then)
        self.compiled_kernels = missing_kernels(team) if team is not None else 0
        load_kernels(core.MidpointVI(core.load_system(WARM_UP_MODEL), self.dt), replan=replan)
        load_kernels(self.vi, hold=False, replan=replan)
        return time.perf_counter() - t0

    @staticmethod
    def warm_up_rest(stderr=None):
        """Compile the kernels :meth:`warm_up` leaves out (:data:`REST_PARTS`: continuous and
        second-order linearizations, for the services) in a background process at niceness
        :data:`REST_NICE`, its lines tagged ``core[background]`` (it ends at once if the cache
        has them all). None if it cannot start. What it has not compiled yet when a service
        needs it compiles there and then."""
        return start_compiling(REST_PARTS, 1, nice=REST_NICE, tag="background", stderr=stderr)
