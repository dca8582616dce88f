"""The model the node serves: a :class:`core.System` and its :class:`core.MidpointVI` at the
node's ``dt``, under the names the node uses. A thin adapter over core's public API (every
computation is core's); never imports rclpy.

Conventions: :data:`core.CONVENTIONS` (continuous state ``[q, qdot]``; discrete state
``x = [q, p, v]``; input ``u = [force inputs, next values of the kinematic variables]``).
"""
from __future__ import annotations

import ast
import importlib
import os
import re

import numpy as np

import core

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Relative model paths are looked up in the working directory, then here.
CONFIG_DIR = os.path.join(REPO_DIR, "config")
#: The default model of the node (in CONFIG_DIR).
DEFAULT_MODEL = "cartpole.yaml"


class ModelSpecError(ValueError):
    """The model parameter names no loadable model."""


# ================================================================================ model loading
_PYTHON_SPEC = re.compile(r"^python:([A-Za-z_][\w.]*)\.([A-Za-z_]\w*)(?:\((.*)\))?$")


def resolve_model_path(spec: str) -> str:
    """An existing file for ``spec``: absolute, relative to the working directory, or relative to
    the repository's ``config/`` directory (in that order). Raises :class:`ModelSpecError`."""
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError("the model parameter is empty")
    candidates = [spec] if os.path.isabs(spec) else [os.path.abspath(spec), os.path.join(CONFIG_DIR, spec)]
    for c in candidates:
        if os.path.isfile(c):
            return c
    raise ModelSpecError(f"model file {spec!r} not found (looked in {', '.join(candidates)})")


def check_model_spec(spec: str) -> None:
    """Cheap validation of a model parameter value (no loading); raises ModelSpecError."""
    if isinstance(spec, str) and spec.startswith("python:"):
        if not _PYTHON_SPEC.match(spec):
            raise ModelSpecError(f"{spec!r}: expected python:package.module.function or "
                                 "python:package.module.function(args)")
        return
    resolve_model_path(spec)


def load_model(spec: str) -> core.System:
    """A :class:`core.System` from a YAML path (see :func:`resolve_model_path`) or from
    ``python:package.module.function(literal args)`` (e.g. ``python:core.examples.chain(2)``)."""
    if isinstance(spec, str) and spec.startswith("python:"):
        match = _PYTHON_SPEC.match(spec)
        if not match:
            check_model_spec(spec)
        module, func, args = match.groups()
        try:
            fn = getattr(importlib.import_module(module), func)
            values = ast.literal_eval(f"({args},)") if args and args.strip() else ()
        except (ImportError, AttributeError, ValueError, SyntaxError) as exc:
            raise ModelSpecError(f"{spec!r}: {exc}") from exc
        system = fn(*values)
        if not isinstance(system, core.System):
            raise ModelSpecError(f"{spec!r} returned {type(system).__name__}, not core.System")
        system.compile()  # a malformed model fails here
        return system
    return core.load_system(resolve_model_path(spec))


# ================================================================================ the plant
class Plant:
    """A system, its variational integrator at ``dt`` and what the node asks of them.

    Thread safety: core's kernels use the calling thread's scratch, so one Plant serves several
    threads at once.
    """

    def __init__(self, system: core.System, dt: float, source: str = ""):
        self.system = system
        self.source = source
        self.vi = core.MidpointVI(system, dt)
        self.dt = self.vi.dt
        self.model = system.model
        self.n, self.nd, self.nk = system.nq, self.vi.nd, self.vi.nk
        self.dyn, self.kin = self.vi.dynamic_index, self.vi.kinematic_index
        self.m = system.nu
        self.nx, self.nu = self.vi.nx, self.vi.nu
        self.config_names = system.config_names
        self.dynamic_names = self.vi.dynamic_names
        self.kinematic_names = self.vi.kinematic_names
        self.force_input_names = system.input_names
        self.input_names = self.vi.input_names
        self.state_names = self.vi.state_names
        self.continuous_state_names = system.state_names
        self.has_constraints = self.model.nh > 0
        Fu = system.input_matrix(np.zeros(self.n))
        rank = np.linalg.matrix_rank(Fu[self.dyn]) if self.nd and self.m else 0
        self.fully_actuated = (not self.has_constraints) and rank == self.nd
        self.actuation = ("fully actuated" if self.fully_actuated else
                          "constrained" if self.has_constraints else
                          f"underactuated ({rank} independent force inputs for {self.nd} dynamic variables)")

    @classmethod
    def load(cls, spec: str, dt: float) -> "Plant":
        return cls(load_model(spec), dt, source=spec)

    def with_dt(self, dt: float) -> "Plant":
        """The same system with another time step (shares the compiled model)."""
        return self if float(dt) == self.dt else Plant(self.system, dt, self.source)

    # ------------------------------------------------------------------ conversions
    def to_discrete(self, q, dq) -> np.ndarray:
        """Exact Legendre transform ``[q, qdot] -> x = [q, p, v]``."""
        return self.vi.discrete_state(q, dq)

    def to_discrete_many(self, Q, dQ) -> np.ndarray:
        return self.vi.discrete_states(Q, dQ)

    def to_continuous(self, x):
        """Inverse Legendre transform ``x = [q, p, v] -> (q, qdot)``."""
        return self.vi.continuous_state(x)

    def legendre_jacobian(self, q, dq) -> np.ndarray:
        """``d[q, p, v] / d[q, qdot]`` (2n x 2n) at ``(q, qdot)``."""
        return self.vi.state_jacobian(q, dq)

    def discrete_momenta(self, Q, p0) -> np.ndarray:
        """Momenta along configurations Q (knots, n): ``p_0`` given, ``p_k = D2 L_d(q_k-1, q_k)``."""
        return self.vi.discrete_momenta(Q, p0)

    def input_matrix(self, q) -> np.ndarray:
        """``dF/du`` (n x m) at q: how each force input enters the generalized forces."""
        return self.system.input_matrix(q)

    # ------------------------------------------------------------------ control law
    def control(self, q, dq, x_ref, u_ref, K, x_out=None, u_out=None):
        """``u = u_ref - K (Legendre(q, qdot) - x_ref)``; returns ``(u, x)`` or ``(None, x)`` if
        u is not finite. Arguments must already be float64 arrays of the right sizes."""
        return self.vi.feedback(q, dq, x_ref, u_ref, K, x_out, u_out)

    # ------------------------------------------------------------------ integrator
    def step(self, x, u) -> np.ndarray:
        """``x_k+1 = f(x_k, u_k)`` (raises IntegratorError)."""
        return self.vi.step(x, u)

    def linearize(self, x, u, second: bool = False):
        """``(A, B)`` or ``(A, B, H)`` of one step at ``(x, u)``."""
        return self.vi.linearize2(x, u) if second else self.vi.linearize(x, u)

    def linearize_along(self, X, U, second: bool = False):
        """Stacks ``(A, B[, H])`` along ``X`` (N+1, nx), ``U`` (N, nu), each step re-solved from
        ``X[k]``; serial (``threads=1``): the node calls it from its executor's threads."""
        return self.vi.linearize_trajectory(X, U, second_order=second, threads=1)

    def inverse_dynamics(self, Q, p0):
        """``(U, P, residual)``: see :meth:`core.MidpointVI.inverse_dynamics`."""
        return self.vi.inverse_dynamics(Q, p0)

    def discrete_system(self) -> core.MidpointVI:
        """The integrator in the state-form protocol of :func:`core.optimize_trajectory`."""
        return self.vi

    # ------------------------------------------------------------------ warm-up
    def warm_up(self) -> None:
        """Load or compile every kernel the node uses (see :meth:`core.MidpointVI.warm_up`)."""
        self.vi.warm_up()
        A, B = np.tile(np.eye(self.nx), (2, 1, 1)), np.tile(np.eye(self.nx, self.nu), (2, 1, 1))
        core.tvlqr(A, B, np.eye(self.nx), np.eye(self.nu), np.eye(self.nx))
