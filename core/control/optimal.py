"""Trajectory optimization for discrete systems: the projection-operator method of the
discrete paper's authors (trep's ``DOptimizer``) with first-order (Gauss-Newton), second-order
(Newton, with ``linearize2``) and steepest-descent directions, plus the cost, its gradient and
linearization along a trajectory.

Works on any discrete system in state form (the :class:`DiscreteSystem` protocol; a
:class:`core.MidpointVI` is one); it never looks inside ``x``. Conventions:
:mod:`core.conventions`. The costate pass and the linear rollouts are ``@njit`` kernels; the
orchestration is Python because it calls the system's ``step``/``linearize`` methods.
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping, NamedTuple, Protocol, runtime_checkable

import numpy as np

from core.base.jit import njit
from core.control.riccati import lq_riccati, state_weights, tvlqr_checked, weight_stack
from core.control.simulation import initial_state, next_state, simulate_open_loop
from core.errors import RiccatiError
from core.progress import progress_reporter
from core.validation import check_second_order_memory, float_array

logger = logging.getLogger(__name__)

METHODS = ("second_order", "first_order", "steepest_descent")
STOP_RULES = ("gradient", "slope")
PROJECTIONS = ("direction", "lqr")


# ================================================================================ njit kernels
@njit(cache=True, nogil=True)
def _costate_and_gradient(A, B, wx, wu, w_N):
    """Adjoint pass: ``λ_N = w_N``, ``λ_k = wx_k + A_kᵀ λ_{k+1}`` and the reduced gradient
    ``g_k = ∂J/∂u_k = wu_k + B_kᵀ λ_{k+1}`` (with ``wx_k = Q_k δx_k``, ``wu_k = R_k δu_k``)."""
    N, nx, nu = B.shape
    lam = np.empty((N + 1, nx))
    g = np.empty((N, nu))
    lam[N] = w_N
    for k in range(N - 1, -1, -1):
        g[k] = wu[k] + B[k].T @ lam[k + 1]
        lam[k] = wx[k] + A[k].T @ lam[k + 1]
    return lam, g


@njit(cache=True, nogil=True)
def _closed_loop_costate(A, B, K, wx, wu, w_N):
    """Costate of the cost composed with the projection ``u = ū − K(x − x̄)``:
    ``λ_N = w_N``, ``λ_k = wx_k − K_kᵀ wu_k + (A_k − B_k K_k)ᵀ λ_{k+1}``."""
    N, nx, nu = B.shape
    lam = np.empty((N + 1, nx))
    lam[N] = w_N
    for k in range(N - 1, -1, -1):
        lam[k] = wx[k] - K[k].T @ wu[k] + (A[k] - B[k] @ K[k]).T @ lam[k + 1]
    return lam


@njit(cache=True, nogil=True)
def _linear_response(A, B, K, kff):
    """Roll out ``z_0 = 0``, ``v_k = kff_k − K_k z_k``, ``z_{k+1} = A_k z_k + B_k v_k``."""
    N, nx, nu = B.shape
    z = np.zeros((N + 1, nx))
    v = np.empty((N, nu))
    for k in range(N):
        v[k] = kff[k] - K[k] @ z[k]
        z[k + 1] = A[k] @ z[k] + B[k] @ v[k]
    return z, v


# ===================================================================== trajectory optimization
@runtime_checkable
class DiscreteSystem(Protocol):
    """What :func:`optimize_trajectory` needs from a discrete dynamic system (duck-typed).

    ``step`` may signal failure (e.g. a diverging implicit solve) by raising ``ArithmeticError``
    or ``numpy.linalg.LinAlgError`` or by returning non-finite values; during a line search
    that just rejects the trial step. A :class:`core.MidpointVI` has both optional members.

    Attributes
    ----------
    nx : int
        State dimension.
    nu : int
        Input dimension.
    constrained : bool, optional
        True when not every state is admissible (then ``optimize_ic`` is refused).

    Methods
    -------
    step(x, u)
        ``x_next``, shape ``(nx,)``.
    linearize(x, u)
        ``(A, B)`` with shapes ``(nx, nx)``, ``(nx, nu)``.
    linearize2(x, u)
        ``(A, B, H)`` with ``H`` of shape ``(nx, nz, nz)``, ``z = [x, u]``,
        ``H[i, a, b] = ∂²x_next_i / ∂z_a ∂z_b`` (only the second-order method calls it).
    linearize_trajectory(X, U, second_order, costates, *, threads, progress)
        Optional: the stacks of :func:`linearize_trajectory` computed by the system itself
        (that function uses it when present).
    """
    nx: int
    nu: int

    def step(self, x: np.ndarray, u: np.ndarray) -> np.ndarray: ...

    def linearize(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def linearize2(self, x: np.ndarray,
                   u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


@dataclass
class TrajectoryOptimizationResult:
    """Result of :func:`optimize_trajectory`.

    Attributes
    ----------
    x : ndarray, shape (N+1, nx)
        The last iterate's states (a rollout of the system; with ``optimize_ic``, ``x[0]`` is
        the optimized initial state).
    u : ndarray, shape (N, nu)
        The last iterate's inputs.
    cost : float
        ``J`` at the last iterate.
    gradient_norm : float
        ``‖∂J/∂u‖`` at the last iterate (with ``optimize_ic``, ``∂J/∂x_0`` included).
    iterations : int
        The number of accepted steps.
    converged : bool
        The stopping rule ``stop`` was met (else ``message`` says why the iteration stopped).
    message : str
        Why the iteration stopped.
    method : str
        The ``method`` option.
    history : list of dict
        One dict per iterate ``i = 0 .. iterations``: ``iteration``, ``cost`` (J at iterate i),
        ``gradient_norm`` (‖∂J/∂u‖ at iterate i), ``step`` (line-search step length that
        produced iterate i; 0 for i = 0), ``model`` (quadratic model of the direction that
        produced iterate i: ``newton``, ``newton_indefinite``, ``newton_reversed``,
        ``gauss_newton`` or ``identity``, see :func:`optimize_trajectory`; ``""`` for i = 0),
        ``backtracks`` (step shrinks of the line search that produced iterate i; 0 for i = 0)
        and ``slope`` (directional derivative of J along the direction computed at iterate i;
        NaN if none was computed).
    """
    x: np.ndarray
    u: np.ndarray
    cost: float
    gradient_norm: float
    iterations: int
    converged: bool
    message: str
    method: str
    history: list = field(default_factory=list)


class _Weights(NamedTuple):
    """The quadratic tracking cost's data: what :func:`_cost` reads (a :class:`TrackingProblem`
    carries the same attributes)."""
    x_ref: np.ndarray
    u_ref: np.ndarray
    Qs: np.ndarray
    Rs: np.ndarray
    Q_N: np.ndarray


@dataclass(frozen=True)
class OptimizerOptions:
    """How :meth:`TrackingProblem.solve` iterates: the model of each step, the line search, the
    projection and when to stop (python-control keeps such options apart from the problem too).
    Validated when made; every field is described in :func:`optimize_trajectory`.

    Parameters
    ----------
    method : {"second_order", "first_order", "steepest_descent"}
        The quadratic model of the LQ subproblem: Newton, Gauss-Newton, identity.
    tol, max_iterations : float, int
        Convergence tolerance (see ``stop``) and iteration cap.
    armijo, backtrack, max_backtracks : float, float, int
        Sufficient-decrease constant ``0 < armijo < 0.5``, step shrink factor
        ``0 < backtrack < 1`` and the most shrinks per line search (trep's:
        ``OptimizerOptions.TREP_ARMIJO``, to pass as ``**OptimizerOptions.TREP_ARMIJO``).
    stop : {"slope", "gradient"}
        ``|Σ g_k·v_k| < tol`` or ``‖∂J/∂u‖₂ < tol``.
    projection : {"lqr", "direction"}
        Trial trajectories follow LQR gains with weights ``Qproj``, ``Rproj`` (default
        identities) or the LQ policy's own gains.
    time_limit : float or None
        Seconds of wall time after which no further iteration starts.
    first_method, first_method_iterations : str, int
        A warm-up method for the first iterations (trep's: ``"first_order"``, 10).
    Qproj, Rproj : array_like or None
        Projection weights, ``(nx, nx)`` or ``(N+1, nx, nx)``; ``(nu, nu)`` or ``(N, nu, nu)``.
    negative_curvature : bool
        Also line-search the Newton direction where its model is not convex.
    optimize_ic : bool
        Optimize the initial state too (systems whose every state is admissible).

    Raises
    ------
    ValueError
        Naming the first option out of its range.
    """
    #: trep's Armijo constants (``armijo_alpha``, ``armijo_beta``, 30 tries ``γ = β^0 .. β^29``).
    TREP_ARMIJO: ClassVar[Mapping[str, float]] = MappingProxyType(
        {"armijo": 1e-5, "backtrack": 0.7, "max_backtracks": 29})

    method: str = "second_order"
    tol: float = 1e-6
    max_iterations: int = 1000
    armijo: float = 1e-4
    backtrack: float = 0.5
    max_backtracks: int = 50
    stop: str = "slope"
    projection: str = "lqr"
    time_limit: float | None = None
    first_method: str = "first_order"
    first_method_iterations: int = 0
    Qproj: object = None
    Rproj: object = None
    negative_curvature: bool = True
    optimize_ic: bool = False

    def __post_init__(self) -> None:
        for name, value in (("method", self.method), ("first_method", self.first_method)):
            if value not in METHODS:
                raise ValueError(f"{name} must be one of {METHODS}, got {value!r}")
        if not _is_count(self.first_method_iterations):
            raise ValueError("first_method_iterations must be an integer >= 0, got "
                             f"{self.first_method_iterations!r}")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"projection must be one of {PROJECTIONS}, got {self.projection!r}")
        if self.stop not in STOP_RULES:
            raise ValueError(f"stop must be one of {STOP_RULES}, got {self.stop!r}")
        if (not self.tol > 0 or self.max_iterations < 0 or not 0 < self.armijo < 0.5
                or not 0 < self.backtrack < 1):
            raise ValueError("need tol > 0, max_iterations >= 0, 0 < armijo < 0.5, 0 < backtrack < 1")
        if not _is_count(self.max_backtracks):
            raise ValueError(f"max_backtracks must be an integer >= 0, got {self.max_backtracks!r}")
        if self.time_limit is not None and not self.time_limit >= 0:
            raise ValueError(f"time_limit must be None or >= 0 seconds, got {self.time_limit}")
        if not isinstance(self.optimize_ic, (bool, np.bool_)):
            raise ValueError(f"optimize_ic must be True or False, got {self.optimize_ic!r}")
        if self.projection != "lqr" and (self.Qproj is not None or self.Rproj is not None):
            raise ValueError(f"Qproj and Rproj apply to projection='lqr', got projection="
                             f"{self.projection!r}")

    def methods_used(self) -> set[str]:
        """The methods that iterations will use (the warm-up's, then ``method``)."""
        uses = {self.first_method} if self.first_method_iterations > 0 else set()
        if self.max_iterations > self.first_method_iterations:
            uses.add(self.method)
        return uses


def _is_count(value) -> bool:
    return bool(not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= 0)


class TrackingProblem:
    r"""A discrete system's inputs ``u_0..u_{N-1}`` chosen to track a reference from a fixed
    initial state: minimize, with ``x_0 = x0`` and ``x_{k+1} = system.step(x_k, u_k)``,

    .. math::

        J = ½ Σ_{k<N} [δx_kᵀ Q_k δx_k + δu_kᵀ R_k δu_k] + ½ δx_Nᵀ Q_N δx_N,
        \quad δx = x − x_{ref},\ δu = u − u_{ref}.

    The problem holds the validated data; :meth:`solve` runs the optimizer with an
    :class:`OptimizerOptions` (:func:`optimize_trajectory` is both in one call).

    Parameters
    ----------
    system : DiscreteSystem
        ``nx``, ``nu``, ``step``, ``linearize`` (and ``linearize2`` for Newton steps).
    x0 : array_like, shape (nx,)
        The initial state (the initial guess with ``optimize_ic``).
    x_ref, u_ref : array_like, shapes (N+1, nx), (N, nu)
        The reference; it need not satisfy the dynamics.
    Q, R, Q_N : array_like
        Weights, shapes as in :func:`core.tvlqr` (``Q_N`` defaults to the last ``Q``).

    Raises
    ------
    TypeError
        ``system`` lacks one of ``nx``, ``nu``, ``step``, ``linearize``.
    ValueError
        A shape or a weight that is not symmetric positive (semi-)definite, named.
    """

    def __init__(self, system, x0, x_ref, u_ref, Q, R, Q_N=None) -> None:
        for attr in ("nx", "nu", "step", "linearize"):
            if not hasattr(system, attr):
                raise TypeError(f"system has no attribute {attr!r}; see core.datatypes.DiscreteSystem")
        nx, nu = int(system.nx), int(system.nu)
        x0 = initial_state(x0)
        if x0.shape != (nx,):
            raise ValueError(f"x0 must have shape ({nx},), got {x0.shape}")
        u_ref = float_array("u_ref", u_ref)
        if u_ref.ndim != 2 or u_ref.shape[1] != nu or u_ref.shape[0] < 1:
            raise ValueError(f"u_ref must have shape (N, {nu}) with N >= 1, got {u_ref.shape}")
        N = u_ref.shape[0]
        x_ref = float_array("x_ref", x_ref)
        if x_ref.shape != (N + 1, nx):
            raise ValueError(f"x_ref must have shape ({N + 1}, {nx}) (N = {N} from u_ref), "
                             f"got {x_ref.shape}")
        self.system = system
        self.x0, self.x_ref, self.u_ref = x0, x_ref, u_ref
        self.Qs, self.Q_N = state_weights(Q, Q_N, N, nx)
        self.Rs = weight_stack("R", R, nu, N, (N,))
        self.N, self.nx, self.nu = N, nx, nu

    def rollout(self, u) -> np.ndarray:
        """The states ``x`` (N+1, nx) of ``u`` (N, nu) from ``x0``."""
        return simulate_open_loop(self.system.step, self.x0, self.controls(u, "u"))

    def controls(self, u, name: str = "u_init") -> np.ndarray:
        """A copy of ``u`` checked for the shape of ``u_ref`` (``u_ref`` itself for None)."""
        if u is None:
            return self.u_ref.copy()
        u = float_array(name, u)
        if u.shape != self.u_ref.shape:
            raise ValueError(f"{name} must have shape {self.u_ref.shape} (that of u_ref), got {u.shape}")
        return u.copy()

    def cost(self, x, u) -> float:
        """``J`` of the trajectory ``(x, u)`` (``x`` need not be a rollout)."""
        return _cost(self, x, u)

    def cost_and_gradient(self, u) -> tuple[float, np.ndarray]:
        """``J(u)`` of the rollout of ``u`` and its exact gradient ``∂J/∂u`` (N, nu), by the
        adjoint (costate) pass ``λ_N = Q_N δx_N``, ``λ_k = Q_k δx_k + A_kᵀ λ_{k+1}``,
        ``∂J/∂u_k = R_k δu_k + B_kᵀ λ_{k+1}``."""
        u = self.controls(u, "u")
        x = simulate_open_loop(self.system.step, self.x0, u)
        A, B = linearize_trajectory(self.system, x, u, threads=1)
        _, _, wx, wu, w_N = _weighted_errors(self, x, u)
        _, g = _costate_and_gradient(A, B, wx, wu, w_N)
        return _cost(self, x, u), g

    def solve(self, options: OptimizerOptions | None = None, u_init=None,
              callback: Callable[[dict], object] | None = None,
              verbose: bool = False) -> TrajectoryOptimizationResult:
        """Optimize from ``u_init`` (default ``u_ref``) with ``options`` (default
        :class:`OptimizerOptions`); the method is described in :func:`optimize_trajectory`.

        Parameters
        ----------
        options : OptimizerOptions, optional
        u_init : array_like, shape (N, nu), optional
        callback : callable, optional
            Called with each history entry (a dict) as it is produced.
        verbose : bool
            Also print one line per iteration (the module logger logs them at DEBUG).

        Returns
        -------
        TrajectoryOptimizationResult

        Raises
        ------
        ValueError
            ``optimize_ic`` for a constrained system, a bad ``u_init``, a rollout of ``u_init``
            that is not finite.
        TypeError
            A Newton method for a system without ``linearize2``.
        """
        return _solve(self, OptimizerOptions() if options is None else options, u_init, callback,
                      verbose)


def _apply_weight(Ws: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``W_k d_k`` for every row of ``d`` (Ws has 1 or len(d) entries)."""
    return np.ascontiguousarray((Ws @ d[:, :, None])[:, :, 0])


def _weighted_errors(pb: TrackingProblem | _Weights, x, u):
    """Errors and the cost's linear terms ``wx_k = Q_k δx_k``, ``wu_k = R_k δu_k``, ``w_N``."""
    N = u.shape[0]
    dx, du = x - pb.x_ref, u - pb.u_ref
    wx, wu = _apply_weight(pb.Qs, dx[:N]), _apply_weight(pb.Rs, du)
    return dx, du, wx, wu, pb.Q_N @ dx[N]


def _cost(pb: TrackingProblem | _Weights, x, u) -> float:
    dx, du, wx, wu, w_N = _weighted_errors(pb, x, u)
    N = u.shape[0]
    return 0.5 * float(np.sum(dx[:N] * wx) + np.sum(du * wu) + dx[N] @ w_N)


def _check_linearization(parts, k: int, shapes: tuple, second_order: bool) -> None:
    name = "system.linearize2" if second_order else "system.linearize"
    if len(parts) != len(shapes):
        raise ValueError(f"{name} must return {'(A, B, H)' if second_order else '(A, B)'}, "
                         f"got {len(parts)} items")
    for label, part, shape in zip("ABH"[:len(shapes)], parts, shapes, strict=True):
        if np.shape(part) != shape:
            raise ValueError(f"{name} returned {label} of shape {np.shape(part)} at k={k}, "
                             f"expected {shape}")
        if not np.all(np.isfinite(part)):
            raise ValueError(f"{name} returned a non-finite {label} at k={k}")


def linearize_trajectory(system, x, u, second_order: bool = False, costates=None, *,
                         threads: int | None = None, progress=None):
    """Linearizations along a trajectory: ``system.linearize(x[k], u[k])`` (or ``linearize2``)
    for ``k < N``, stacked.

    Parameters
    ----------
    system : DiscreteSystem
        A system that has its own ``linearize_trajectory`` (a :class:`~core.MidpointVI`: every
        knot solved and linearized in compiled code, ``threads`` in parallel) is handed the
        stacks when ``x`` has ``N + 1`` rows; another is linearized knot by knot.
    x, u : array_like, shapes (N+1, nx) or (N, nx), and (N, nu)
    second_order : bool
        Also ``H`` (N, nx, nz, nz), ``H[k, i, a, b] = ∂²x_{k+1,i} / ∂z_a ∂z_b``, ``z = [x, u]``.
    costates : array_like, shape (N, nx), optional
        With ``second_order``: ``W[k] = Σ_i costates[k, i] H_k[i]`` (N, nz, nz) in place of
        ``H``, what a Newton step needs (``costates[k]`` weighs the entries of ``x[k + 1]``; a
        :class:`~core.MidpointVI` computes it without the tensors).
    threads : int, optional
        For a system with its own stacks: chunks in parallel (default numba's thread count;
        ``threads=1``: one serial compiled call, for callers that are themselves
        multi-threaded, as a ROS node's executor).
    progress : True or callable, optional
        A progress bar on stderr (True) or ``progress(done, N)`` after each block.

    Returns
    -------
    (A, B) or (A, B, H) or (A, B, W)
        Shapes (N, nx, nx), (N, nx, nu), then ``H`` or ``W``; feed ``(A, B)`` to
        :func:`core.tvlqr` for a tracking controller.

    Raises
    ------
    ValueError
        A shape, ``costates`` without ``second_order``, or a linearization that is not finite
        (naming the knot ``k``).
    """
    x, u = float_array("x", x), float_array("u", u)
    if u.ndim != 2 or x.ndim != 2 or x.shape[0] not in (u.shape[0], u.shape[0] + 1):
        raise ValueError(f"x must have shape (N+1, nx) and u shape (N, nu), "
                         f"got {x.shape}, {u.shape}")
    (N, nu), nx = u.shape, x.shape[1]
    if costates is not None:
        if not second_order:
            raise ValueError("costates weigh the second order: pass second_order=True with them")
        costates = float_array("costates", costates)
        if costates.shape != (N, nx):
            raise ValueError(f"costates must have shape (N, nx) = ({N}, {nx}), got {costates.shape}")
    own = getattr(system, "linearize_trajectory", None)
    if own is not None and x.shape[0] == N + 1:
        return own(x, u, second_order, costates, threads=threads, progress=progress)
    if second_order and costates is None:
        check_second_order_memory("linearize_trajectory(second_order=True)", nx, nx + nu, N)
    nz = nx + nu
    shapes = ((nx, nx), (nx, nu), (nx, nz, nz))[:3 if second_order else 2]   # what linearize2 returns
    stacks = [np.empty((N,) + shape) for shape in (shapes if costates is None else shapes[:2] + ((nz, nz),))]
    report = progress_reporter(progress)
    if report is not None:
        report(0, N)
    for k in range(N):
        parts = system.linearize2(x[k], u[k]) if second_order else system.linearize(x[k], u[k])
        _check_linearization(parts, k, shapes, second_order)
        if costates is not None:
            parts = (*parts[:2], np.tensordot(costates[k], parts[2], axes=1))
        for stack, part in zip(stacks, parts, strict=True):
            stack[k] = part
        if report is not None:
            report(k + 1, N)
    return tuple(stacks)


def trajectory_cost(x, u, x_ref, u_ref, Q, R, Q_N=None) -> float:
    """The tracking cost of a trajectory,
    ``½Σ_{k<N}[δx_kᵀQ_kδx_k + δu_kᵀR_kδu_k] + ½δx_NᵀQ_Nδx_N`` with ``δx = x − x_ref``,
    ``δu = u − u_ref``.

    Parameters
    ----------
    x, x_ref : array_like, shape (N+1, nx)
        States and reference states.
    u, u_ref : array_like, shape (N, nu)
        Inputs and reference inputs.
    Q, R, Q_N : array_like
        Weights, shapes as in :func:`tvlqr`; here ``R`` need only be positive semi-definite.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        A shape, a non-finite entry, a weight that is not symmetric positive semi-definite, or
        a ``Q_N`` given or missing as :func:`tvlqr` refuses it.
    """
    u_ref = float_array("u_ref", u_ref)
    x_ref = float_array("x_ref", x_ref)
    u = float_array("u", u)
    x = float_array("x", x)
    if u.shape != u_ref.shape or u.ndim != 2:
        raise ValueError(f"u must have shape {u_ref.shape} (that of u_ref), got {u.shape}")
    if x.shape != x_ref.shape or x.shape != (u.shape[0] + 1, x.shape[-1]):
        raise ValueError(f"x and x_ref must have shape (N+1, nx) = ({u.shape[0] + 1}, nx), "
                         f"got {x.shape} and {x_ref.shape}")
    N, nx, nu = u.shape[0], x.shape[1], u.shape[1]
    Qs, Q_N = state_weights(Q, Q_N, N, nx)
    pb = _Weights(x_ref, u_ref, Qs, weight_stack("R", R, nu, N, (N,)), Q_N)
    return _cost(pb, x, u)


def cost_and_gradient(system, x0, u, x_ref, u_ref, Q, R, Q_N=None) -> tuple[float, np.ndarray]:
    """Cost ``J(u)`` of :func:`optimize_trajectory` (states from rolling out ``u`` from ``x0``) and
    its exact gradient ``∂J/∂u`` by the adjoint (costate) pass
    (:meth:`TrackingProblem.cost_and_gradient`): ``λ_N = Q_N δx_N``,
    ``λ_k = Q_k δx_k + A_kᵀ λ_{k+1}``, ``∂J/∂u_k = R_k δu_k + B_kᵀ λ_{k+1}``.

    Parameters
    ----------
    system : DiscreteSystem
        ``nx``, ``nu``, ``step``, ``linearize``.
    x0 : array_like, shape (nx,)
        The initial state.
    u : array_like, shape (N, nu)
        The inputs (None: ``u_ref``).
    x_ref, u_ref : array_like, shapes (N+1, nx), (N, nu)
        The reference.
    Q, R, Q_N : array_like
        Weights, as for :func:`trajectory_cost`.

    Returns
    -------
    J : float
        The cost.
    g : ndarray, shape (N, nu)
        ``∂J/∂u``.

    Raises
    ------
    TypeError
        ``system`` lacks one of ``nx``, ``nu``, ``step``, ``linearize``.
    ValueError
        A shape, a non-finite entry, a weight (as :class:`TrackingProblem`), or a linearization
        that is not finite (:func:`linearize_trajectory`).
    """
    return TrackingProblem(system, x0, x_ref, u_ref, Q, R, Q_N).cost_and_gradient(u)


class _Direction(NamedTuple):
    K: np.ndarray        # (N, nu, nx) feedback used to project trial trajectories
    kff: np.ndarray      # (N, nu) feedforward of the projected update
    slope: float         # directional derivative Σ g_k · v_k of J along the direction
    model: str           # quadratic model that produced it: newton, gauss_newton or identity
                         # (newton_reversed: the Newton direction reversed, see _descent_direction)
    alternative: "_Direction | None" = None   # a second candidate, also line-searched
    dx0: np.ndarray | None = None   # (nx,) initial-state change z_0 (optimize_ic), else z_0 = 0


def _newton_weights(pb: TrackingProblem, W: np.ndarray, nx: int):
    """Hessian blocks of the Lagrangian ``diag(Q_k, R_k) + W_k`` from the dynamics' curvature
    along the costate, ``W_k = Σ_i λ_{k+1,i} H_k[i]``."""
    W = 0.5 * (W + np.swapaxes(W, 1, 2))
    Wxx = np.ascontiguousarray(W[:, :nx, :nx] + pb.Qs)
    Wuu = np.ascontiguousarray(W[:, nx:, nx:] + pb.Rs)
    Wux = np.ascontiguousarray(W[:, nx:, :nx])
    return Wxx, Wuu, Wux


def _solve_lq(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N):
    """Policy ``(K, kff)`` of the LQ subproblem and its value Hessian ``P_0``, or None where it
    is not convex."""
    N, nx, nu = B.shape
    K, kff, P = np.empty((N, nu, nx)), np.empty((N, nu)), np.empty((N + 1, nx, nx))
    status = lq_riccati(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N, K, kff, P)
    return (K, kff, P[0]) if status < 0 else None


def _solve_lq_indefinite(A, B, Wxx, Wuu, Wux, wx, wu, P_N, p_N):
    """The same Riccati pass as :func:`_solve_lq` with LU instead of Cholesky solves, as trep's
    ``solve_tv_lq``: the stationary point of a non-convex LQ subproblem (None if singular)."""
    N, nx, nu = B.shape
    K, kff = np.empty((N, nu, nx)), np.empty((N, nu))
    P, p = P_N.copy(), p_N.copy()
    at = lambda W, k: W[k if W.shape[0] > 1 else 0]  # noqa: E731
    for k in range(N - 1, -1, -1):
        PA, PB = P @ A[k], P @ B[k]
        Quu = at(Wuu, k) + B[k].T @ PB
        Qux = at(Wux, k) + B[k].T @ PA
        try:
            sol = np.linalg.solve(0.5 * (Quu + Quu.T),
                                  np.column_stack([Qux, -(at(wu, k) + B[k].T @ p)]))
        except np.linalg.LinAlgError:
            return None
        K[k], kff[k] = sol[:, :nx], sol[:, nx]
        Pk = at(Wxx, k) + A[k].T @ PA - Qux.T @ K[k]
        P = 0.5 * (Pk + Pk.T)
        p = at(wx, k) + A[k].T @ p + Qux.T @ kff[k]
    return (K, kff, P) if np.all(np.isfinite(K)) and np.all(np.isfinite(kff)) else None


def _projection_gains(A, B, Qproj=None, Rproj=None) -> np.ndarray:
    """Feedback of the projection operator: time-varying LQR with weights ``Qproj`` (running
    and terminal) and ``Rproj`` (trep's defaults: identities) along the current linearization.
    The weights are :func:`_projection_weights`' stacks, checked once for the whole run."""
    nx, nu = A.shape[1], B.shape[2]
    if Qproj is None:
        Qproj = np.eye(nx)[None]
    if Rproj is None:
        Rproj = np.eye(nu)[None]
    Q_run = Qproj if Qproj.shape[0] == 1 else Qproj[:-1]
    return tvlqr_checked(A, B, Q_run, Rproj, Qproj[-1])[0]


FALLBACK = {"second_order": "first_order", "first_order": "steepest_descent"}


def _value_gradient(A, W, wx, wu, w_N, z, v) -> np.ndarray:
    """``p_0 = ∇V_0(0)`` of the LQ subproblem's value function, along its solution ``(z, v)``
    from ``z_0 = 0``: ``μ_N = P_N z_N + p_N``, ``μ_k = wx_k + Wxx_k z_k + Wux_kᵀ v_k + A_kᵀ μ_{k+1}``
    (envelope theorem)."""
    Wxx, _, Wux, P_N = W
    N = A.shape[0]
    at = lambda M, k: M[k if M.shape[0] > 1 else 0]  # noqa: E731
    mu = P_N @ z[N] + w_N
    for k in range(N - 1, -1, -1):
        mu = at(wx, k) + at(Wxx, k) @ z[k] + at(Wux, k).T @ v[k] + A[k].T @ mu
    return mu


def _model_direction(pb, method, A, B, curvature, lam_model, g, wx, wu, w_N, Kp, lam=None):
    """The LQ subproblem's direction for one model, or None if its Riccati pass is singular.
    ``curvature(λ)``: the dynamics' second order contracted with the costate ``λ`` (N+1, nx),
    ``Σ_i λ_{k+1,i} H_k[i]`` (the Newton model's).
    With ``lam`` (the open-loop costate; optimize_ic) the initial state is free too: trep's
    ``z_0 = −P_0⁻¹ p_0`` minimizes the LQ subproblem's value ``½ z_0ᵀP_0 z_0 + p_0ᵀz_0``."""
    nx, nu = A.shape[1], B.shape[2]
    no_cross = np.zeros((1, nu, nx))
    if method == "second_order":
        W, model = (*_newton_weights(pb, curvature(lam_model), nx), pb.Q_N), "newton"
    elif method == "first_order":
        W, model = (pb.Qs, pb.Rs, no_cross, pb.Q_N), "gauss_newton"
    else:
        # trep's "steepest" model: identity weights on the whole tangent trajectory (z_k, v_k),
        # i.e. the gradient in the metric Σ |z_k|² + |v_k|².
        W, model = (np.eye(nx)[None], np.eye(nu)[None], no_cross, np.eye(nx)), "identity"
    policy = _solve_lq(A, B, W[0], W[1], W[2], wx, wu, W[3], w_N)
    if policy is None and method == "second_order":
        # not convex: trep solves it anyway (LU) and keeps the direction if it descends
        policy = _solve_lq_indefinite(A, B, W[0], W[1], W[2], wx, wu, W[3], w_N)
        model = "newton_indefinite"
    if policy is None:
        return None
    K, kff, P0 = policy
    z, v = _linear_response(A, B, K, kff)
    dx0 = None
    if lam is not None:
        try:
            dx0 = -np.linalg.solve(P0, _value_gradient(A, W, wx, wu, w_N, z, v))
        except np.linalg.LinAlgError:
            return None
        zh = np.empty_like(z)          # response to z_0 = dx0 under v_k = −K_k z_k
        zh[0] = dx0
        for k in range(A.shape[0]):
            vh = -K[k] @ zh[k]
            v[k] += vh
            zh[k + 1] = A[k] @ zh[k] + B[k] @ vh
        z = z + zh
    slope = float(np.sum(g * v)) + (0.0 if dx0 is None else float(lam[0] @ dx0))
    if Kp is not None:
        # ũ_k = u_k + γ v_k − Kp_k (x̃_k − x_k − γ z_k): the same tangent (z, v) at γ = 0.
        kff = v + np.einsum("kij,kj->ki", Kp, z[:-1])
        K = Kp
    return _Direction(K, kff, slope, model, dx0=dx0)


def _descent_direction(pb, method, projection, A, B, curvature, lam, g, wx, wu, w_N,
                       negative_curvature=False, Qproj=None, Rproj=None,
                       optimize_ic=False) -> _Direction:
    """The LQ subproblem's direction ``(z, v)`` and the feedback that projects trial trajectories.

    Models (weights of the LQ subproblem's quadratic part): ``newton`` (second_order; the
    Hessian of the cost composed with the projection; ``newton_indefinite`` where that is not
    convex and the Riccati pass uses LU solves, as trep's), ``gauss_newton`` (first_order: the
    cost's own ``Q, R``) and ``identity`` (steepest_descent). trep's fallback chain: where the
    directional derivative of a model's direction is not negative, the next model is used,
    newton → gauss_newton → identity. ``negative_curvature``: where the Newton model is not
    convex, the Gauss-Newton direction is returned with the Newton direction as its
    ``alternative`` (reversed, ``newton_reversed``, if it ascends: then it descends along
    negative model curvature); the caller line-searches both and keeps the lower cost.
    ``projection="lqr"``: trial trajectories follow the fixed gains ``Kp`` = LQR(Qproj, Rproj)
    and the Newton model uses the matching closed-loop costate; ``projection="direction"``:
    they follow the LQ policy's own gains (DDP's forward pass) and the open-loop costate.
    """
    Kp = _projection_gains(A, B, Qproj, Rproj) if projection == "lqr" else None
    lam_model = lam
    if method == "second_order" and Kp is not None:
        lam_model = _closed_loop_costate(A, B, Kp, wx, wu, w_N)
    alternative, d = None, None
    while True:
        d = _model_direction(pb, method, A, B, curvature, lam_model, g, wx, wu, w_N, Kp,
                             lam if optimize_ic else None)
        if negative_curvature and d is not None and d.model == "newton_indefinite":
            if np.isfinite(d.slope) and d.slope != 0:
                alternative = d if d.slope < 0 else d._replace(
                    kff=-d.kff, slope=-d.slope, model="newton_reversed",
                    dx0=None if d.dx0 is None else -d.dx0)
            method = FALLBACK[method]
            continue
        if d is not None and np.isfinite(d.slope) and not d.slope > 0:
            break
        if method not in FALLBACK:
            break
        method = FALLBACK[method]
    if d is None:
        raise RiccatiError(0, "the LQ subproblem (Q, Q_N positive semi-definite and R positive "
                              "definite make it convex; are the linearizations finite?)")
    return d._replace(alternative=alternative)


def _projected_rollout(pb: TrackingProblem, x, u, d: _Direction, gamma: float):
    """Trial trajectory ``ũ_k = u_k + γ kff_k − K_k (x̃_k − x_k)``, ``x̃_{k+1} = step(x̃_k, ũ_k)``
    (Hauser's projection operator; the DDP forward pass). Returns None if the rollout fails."""
    N = u.shape[0]
    xt, ut = np.empty_like(x), np.empty_like(u)
    xt[0] = pb.x0 if d.dx0 is None else x[0] + gamma * d.dx0
    step = pb.system.step
    with np.errstate(all="ignore"):
        try:
            for k in range(N):
                ut[k] = u[k] + gamma * d.kff[k] - d.K[k] @ (xt[k] - x[k])
                xt[k + 1] = next_state(step, xt[k], ut[k], k)
        except (ArithmeticError, np.linalg.LinAlgError):
            return None
        if not (np.all(np.isfinite(xt)) and np.all(np.isfinite(ut))):
            return None
        return xt, ut


def _cost_change(pb: TrackingProblem, x, u, xt, ut) -> float:
    """``J(xt, ut) − J(x, u)`` as ``½Σ Δᵀ W (Δ + 2δ)`` (Δ = trial − current, δ = current − ref):
    no cancellation between two large sums, so small decreases stay resolvable."""
    N = u.shape[0]
    dx, du, wx, wu, w_N = _weighted_errors(pb, x, u)
    Dx, Du = xt - x, ut - u
    WDx, WDu = _apply_weight(pb.Qs, Dx[:N]), _apply_weight(pb.Rs, Du)
    return (float(np.sum(Dx[:N] * (0.5 * WDx + wx)) + np.sum(Du * (0.5 * WDu + wu)))
            + float(Dx[N] @ (0.5 * pb.Q_N @ Dx[N] + w_N)))


def _line_search(pb, x, u, J, d: _Direction, armijo, backtrack, max_backtracks):
    """Armijo backtracking on the projected trajectory: accept the first γ = backtrack^j with
    ``ΔJ(γ) ≤ armijo·γ·slope + 8·eps·(J + J(γ))`` (the last term absorbs round-off in J)."""
    gamma = 1.0
    for j in range(max_backtracks + 1):
        trial = _projected_rollout(pb, x, u, d, gamma)
        if trial is not None:
            J_trial = _cost(pb, *trial)
            slack = 8 * np.finfo(float).eps * (abs(J) + abs(J_trial))
            if (np.isfinite(J_trial)
                    and _cost_change(pb, x, u, *trial) <= armijo * gamma * d.slope + slack):
                return trial[0], trial[1], J_trial, gamma, j
        gamma *= backtrack
    return None


TREP_ARMIJO = OptimizerOptions.TREP_ARMIJO


def optimize_trajectory(system, x0, x_ref, u_ref, Q, R, Q_N=None, method: str = "second_order",
                        u_init=None, tol: float = 1e-6, max_iterations: int = 1000,
                        armijo: float = 1e-4, backtrack: float = 0.5, max_backtracks: int = 50,
                        stop: str = "slope", projection: str = "lqr",
                        callback: Callable[[dict], object] | None = None, verbose: bool = False,
                        time_limit: float | None = None, first_method: str = "first_order",
                        first_method_iterations: int = 0, Qproj=None, Rproj=None,
                        negative_curvature: bool = True,
                        optimize_ic: bool = False) -> TrajectoryOptimizationResult:
    """Optimize the inputs of a discrete system to track a (possibly infeasible) reference.

    Minimizes over ``u_0..u_{N-1}``, with ``x_0 = x0`` fixed and
    ``x_{k+1} = system.step(x_k, u_k)``,

        J = ½ Σ_{k<N} [(x_k − x_ref,k)ᵀ Q_k (x_k − x_ref,k) + (u_k − u_ref,k)ᵀ R_k (u_k − u_ref,k)]
            + ½ (x_N − x_ref,N)ᵀ Q_N (x_N − x_ref,N).

    Every iteration linearizes along the current feasible trajectory, computes the costate
    ``λ`` and the reduced gradient ``g_k = ∂J/∂u_k = R_k δu_k + B_kᵀ λ_{k+1}``, solves a
    linear-quadratic subproblem by a Riccati pass for a tangent direction ``(z, v)``
    (``z_{k+1} = A_k z_k + B_k v_k``, ``z_0 = 0``) and backtracks (Armijo) on the projected trial
    trajectory (Hauser's projection operator, as trep's ``DOptimizer``)

        ũ_k = u_k + γ v_k − K_k (x̃_k − x_k − γ z_k),   x̃_{k+1} = step(x̃_k, ũ_k),

    whose derivative at γ = 0 is the tangent ``(z, v)``, so ``slope = Σ g_k·v_k``.

    Methods (the quadratic part of the LQ subproblem):
        ``"second_order"``: Newton: the Hessian of the cost composed with the projection,
            ``diag(Q_k, R_k) + Σ_i λ_{k+1,i} H_k[i]`` with the projection's closed-loop costate
            (needs ``system.linearize2``); quadratic convergence near a minimum.
        ``"first_order"``: Gauss-Newton, the cost's own ``diag(Q_k, R_k)`` (trep's "quasi"):
            first derivatives only, linear convergence, exact in one step for linear systems.
        ``"steepest_descent"``: identity weights (trep's "steepest"): the gradient direction in
            the metric ``Σ |z_k|² + |v_k|²``; the slowest.
    The first ``first_method_iterations`` iterations use ``first_method`` (trep's warm-up:
    ``first_method="first_order"``, ``first_method_iterations=10``; the default 0 skips it);
    they count in ``iterations``. Fallback (trep's): where a direction's slope is not negative
    the iteration uses the next model, newton → gauss_newton → identity; a Newton model that
    is not convex is solved anyway (``newton_indefinite``) and may ascend.
    ``history[i]["model"]`` says which model made each step. ``negative_curvature`` (default
    True; False is trep's rule exactly): where the Newton model is not convex, both the
    Gauss-Newton direction and the Newton direction (reversed if it ascends,
    ``newton_reversed``: it then descends along negative model curvature) are line-searched and
    the lower cost is kept. Near a saddle point of J the fallback alone creeps: its positive
    definite model hardly sees the negative curvature (the pendulum of Sec. VIII-A after ten
    Gauss-Newton iterations: J decreases by ~4e-3 per iteration at J ≈ 95,633).

    Projection (``projection``): ``"lqr"`` (default) uses fixed gains ``K`` = time-varying LQR
    with weights ``Qproj`` (running and terminal) and ``Rproj`` (default identities, as trep)
    along the current trajectory; this keeps trial trajectories of unstable systems near the
    current one; the Newton model above is the Hessian of the cost composed with this
    projection. ``"direction"`` uses the LQ policy's own gains (DDP's forward pass) with the
    open-loop costate in the Newton model.

    Convergence (``stop``): ``"slope"`` (default, trep's ``descent_tolerance``) stops when the
    directional derivative along the iteration's direction satisfies ``|Σ g_k·v_k| < tol``, i.e.
    the decrease the model predicts for a full step is negligible; it is insensitive to the
    round-off that an unstable system's costate amplifies. ``"gradient"`` stops when
    ``‖∂J/∂u‖₂ < tol`` (Euclidean norm over all inputs; absolute, in units of J per unit
    input), meaningful for well-conditioned problems. ``iterations`` counts accepted steps.

    Line search: the first ``γ = backtrack^j``, ``j = 0..max_backtracks``, with
    ``ΔJ(γ) ≤ armijo·γ·slope`` (plus round-off slack). trep's constants are
    :data:`TREP_ARMIJO` (``armijo=1e-5, backtrack=0.7, max_backtracks=29``).

    ``TrackingProblem(system, x0, x_ref, u_ref, Q, R, Q_N).solve(OptimizerOptions(...), u_init,
    callback, verbose)`` in one call: the problem is :class:`TrackingProblem`, the remaining
    keywords are the fields of :class:`OptimizerOptions`.

    Parameters
    ----------
    system : DiscreteSystem
    x0 : array_like, shape (nx,)
        The fixed initial state.
    x_ref, u_ref : array_like, shapes (N+1, nx), (N, nu)
        The reference (it need not satisfy the dynamics).
    Q, R, Q_N : array_like
        Weights, shapes as in :func:`tvlqr`.
    method : {"second_order", "first_order", "steepest_descent"}
    u_init : array_like, shape (N, nu), optional
        Initial inputs (default ``u_ref``).
    tol, max_iterations : float, int
        Convergence tolerance (see ``stop``) and iteration cap.
    armijo, backtrack, max_backtracks : float, float, int
        Sufficient-decrease constant, step shrink factor and the most shrinks per line search.
    stop : {"slope", "gradient"}
        See Convergence.
    projection : {"lqr", "direction"}
        See Projection.
    callback : callable, optional
        Called with each history entry (a dict) as it is produced.
    verbose : bool
        Also print one line per iteration (the module logger logs them at DEBUG).
    time_limit : float, optional
        Seconds of wall time (``time.monotonic``) after which no further iteration starts; the
        result is then the last iterate (a rollout of ``system``, so feasible), with
        ``converged`` False and a message saying so.
    first_method, first_method_iterations : str, int
        Warm-up method (one of the methods) and its number of iterations (>= 0).
    Qproj, Rproj : array_like, optional
        Projection weights, ``(nx, nx)`` or ``(N+1, nx, nx)`` (the last is the terminal weight),
        positive semi-definite; ``(nu, nu)`` or ``(N, nu, nu)``, positive definite. Default
        identities. Only with ``projection="lqr"``.
    negative_curvature : bool
        See Fallback above.
    optimize_ic : bool
        Also optimize the initial state (trep's ``optimize_ic``; ``x0`` is then the initial
        guess and ``result.x[0]`` the optimized initial state): the LQ subproblem's initial
        tangent is ``z_0 = −P_0⁻¹ p_0`` (its value function's minimizer), the slope gains
        ``λ_0·z_0`` and ``gradient_norm`` includes ``∂J/∂x_0 = λ_0``. Only for systems whose
        every state is admissible (a system whose ``constrained`` is True is refused).

    Returns
    -------
    TrajectoryOptimizationResult
        ``converged`` is False (with a ``message``) when the iteration cap is reached or the line
        search finds no decrease.

    Raises
    ------
    ValueError
        An option out of range, a shape, a weight, ``optimize_ic`` on a constrained system.
    TypeError
        A system without ``nx``, ``nu``, ``step``, ``linearize`` (or ``linearize2`` for Newton).
    """
    options = OptimizerOptions(method=method, tol=tol, max_iterations=max_iterations, armijo=armijo,
                               backtrack=backtrack, max_backtracks=max_backtracks, stop=stop,
                               projection=projection, time_limit=time_limit,
                               first_method=first_method,
                               first_method_iterations=first_method_iterations, Qproj=Qproj,
                               Rproj=Rproj, negative_curvature=negative_curvature,
                               optimize_ic=optimize_ic)
    return TrackingProblem(system, x0, x_ref, u_ref, Q, R, Q_N).solve(options, u_init, callback, verbose)


def _solve(pb: TrackingProblem, opts: OptimizerOptions, u_init, callback, verbose) -> TrajectoryOptimizationResult:
    """The iteration of :func:`optimize_trajectory` on a problem, with its options."""
    system = pb.system
    if opts.optimize_ic and getattr(system, "constrained", False):
        raise ValueError("optimize_ic=True needs an unconstrained system; this one has constraints "
                         "(system.constrained): not every initial state is admissible")
    if "second_order" in opts.methods_used() and not hasattr(system, "linearize2"):
        raise TypeError("method='second_order' needs system.linearize2(x, u) -> (A, B, H)")
    deadline = None if opts.time_limit is None else time.monotonic() + opts.time_limit
    Qproj, Rproj = _projection_weights(pb, opts.Qproj, opts.Rproj)
    u = pb.controls(u_init)
    x = simulate_open_loop(system.step, pb.x0, u)
    if not np.all(np.isfinite(x)):
        raise ValueError("rolling out u_init from x0 gives non-finite states")
    J = _cost(pb, x, u)
    history: list[dict] = []
    entry: dict[str, Any] = {"iteration": 0, "cost": J, "step": 0.0, "model": "", "backtracks": 0}
    tol, max_iterations, stop = opts.tol, opts.max_iterations, opts.stop
    converged, message = False, f"reached max_iterations={max_iterations}"
    for it in range(max_iterations + 1):
        it_method = opts.first_method if it < opts.first_method_iterations else opts.method
        A, B = linearize_trajectory(system, x, u, threads=1)
        # the Newton model's curvature, contracted with the costate it is given (open or
        # closed loop), computed only if that model is tried
        curvature = functools.partial(_curvature, system, x, u)
        _, _, wx, wu, w_N = _weighted_errors(pb, x, u)
        lam, g = _costate_and_gradient(A, B, wx, wu, w_N)
        entry["gradient_norm"] = float(np.sqrt(np.sum(g * g)
                                               + (lam[0] @ lam[0] if opts.optimize_ic else 0.0)))
        d: _Direction | None = None
        if stop == "slope" or (entry["gradient_norm"] >= tol and it < max_iterations):
            d = _descent_direction(pb, it_method, opts.projection, A, B, curvature, lam, g, wx, wu,
                                   w_N, opts.negative_curvature, Qproj, Rproj, opts.optimize_ic)
        entry["slope"] = d.slope if d is not None else float("nan")
        _record(history, entry, callback, verbose)
        if stop == "gradient" and entry["gradient_norm"] < tol:
            converged, message = True, f"gradient norm < tol={tol:g}"
            break
        if it == max_iterations and d is None:
            break
        assert d is not None     # (stop == "slope", or a gradient above tol before the last iteration)
        if stop == "slope" and abs(d.slope) < tol:
            converged, message = True, f"|slope| < tol={tol:g}"
            break
        if it == max_iterations:
            break
        if deadline is not None and time.monotonic() > deadline:
            message = f"time_limit={opts.time_limit:g} s reached after {it} iterations"
            break
        if not d.slope < 0:
            message = "no descent direction (gradient at round-off level?)"
            break
        found = None
        for cand in (d, d.alternative):
            if cand is None:
                continue
            trial = _line_search(pb, x, u, J, cand, opts.armijo, opts.backtrack, opts.max_backtracks)
            if trial is not None and (found is None or trial[2] < found[0][2]):
                found = (trial, cand)
        if found is None:
            message = "line search found no decrease (tol below the cost's round-off level?)"
            break
        (x, u, J, gamma, backtracks), used = found
        entry = {"iteration": it + 1, "cost": J, "step": gamma, "model": used.model,
                 "backtracks": backtracks}
    last = history[-1]
    return TrajectoryOptimizationResult(x, u, J, last["gradient_norm"], last["iteration"],
                                        converged, message, opts.method, history)


def _curvature(system, x, u, lam):
    """``Σ_i λ_{k+1,i} H_k[i]`` (N, nz, nz) along ``(x, u)`` for the costate ``λ`` (N+1, nx)."""
    return linearize_trajectory(system, x, u, second_order=True, costates=lam[1:], threads=1)[2]


def _projection_weights(pb: TrackingProblem, Qproj, Rproj):
    """Validated stacks of the projection weights (None: identities)."""
    N, nx, nu = pb.N, pb.nx, pb.nu
    if Qproj is not None:
        Qproj = weight_stack("Qproj", Qproj, nx, N, (N + 1,))
    if Rproj is not None:
        Rproj = weight_stack("Rproj", Rproj, nu, N, (N,), definite=True)
    return Qproj, Rproj


def _record(history: list, entry: dict, callback, verbose: bool) -> None:
    history.append(entry)
    line = (f"iter {entry['iteration']:4d}  cost {entry['cost']:.10e}  step {entry['step']:.3e}  "
            f"|grad| {entry['gradient_norm']:.3e}  slope {entry['slope']:.3e}  {entry['model']}")
    logger.debug(line)
    if verbose:
        print(line)
    if callback is not None:
        callback(dict(entry))
