"""Trajectory optimization for discrete systems: the projection-operator method of the
discrete paper's authors (trep's ``DOptimizer``) with first-order (Gauss-Newton), second-order
(Newton, with ``linearize2``) and steepest-descent directions.

The problem (:class:`TrackingProblem`), the options (:class:`OptimizerOptions`) and the
iteration live here; the cost, its gradient and the linearizations along a trajectory in
:mod:`core.control.costs`, each iteration's direction (the LQ subproblem and its models) in
:mod:`core.control.directions`, the backtracking on projected trajectories in
:mod:`core.control.line_search`.

Works on any discrete system in state form (the :class:`DiscreteSystem` protocol; a
:class:`core.MidpointVI` is one); it never looks inside ``x``. Conventions:
:mod:`core.conventions`. The costate passes and the linear rollouts are ``@njit`` kernels; the
orchestration is Python because it calls the system's ``step``/``linearize`` methods.
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from core.control.costs import (
    DiscreteSystem,
    costate_and_gradient,
    linearize_trajectory,
    tracking_cost,
    trajectory_cost,
    weighted_errors,
)
from core.control.directions import FALLBACK, Direction, descent_direction
from core.control.line_search import line_search
from core.control.riccati import state_weights, weight_stack
from core.control.simulation import initial_state, simulate_open_loop
from core.validation import float_array

__all__ = ["METHODS", "STOP_RULES", "PROJECTIONS", "FALLBACK", "TREP_ARMIJO", "DiscreteSystem",
           "TrajectoryOptimizationResult", "OptimizerOptions", "TrackingProblem", "optimize_trajectory",
           "linearize_trajectory", "trajectory_cost", "cost_and_gradient"]

logger = logging.getLogger(__name__)

METHODS = ("second_order", "first_order", "steepest_descent")
STOP_RULES = ("gradient", "slope")
PROJECTIONS = ("direction", "lqr")


# ================================================================================ njit kernels

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
        return tracking_cost(self, x, u)

    def cost_and_gradient(self, u) -> tuple[float, np.ndarray]:
        """``J(u)`` of the rollout of ``u`` and its exact gradient ``∂J/∂u`` (N, nu), by the
        adjoint (costate) pass ``λ_N = Q_N δx_N``, ``λ_k = Q_k δx_k + A_kᵀ λ_{k+1}``,
        ``∂J/∂u_k = R_k δu_k + B_kᵀ λ_{k+1}``."""
        u = self.controls(u, "u")
        x = simulate_open_loop(self.system.step, self.x0, u)
        A, B = linearize_trajectory(self.system, x, u, threads=1)
        _, _, wx, wu, w_N = weighted_errors(self, x, u)
        _, g = costate_and_gradient(A, B, wx, wu, w_N)
        return tracking_cost(self, x, u), g

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
    the lower cost is kept; the second search stops where the Newton direction's quadratic
    model can no longer beat the first's decrease (:func:`core.control.line_search.line_search`),
    so that it costs a rollout or two where it cannot win. Near a saddle point of J the
    fallback alone creeps: its positive definite model hardly sees the negative curvature (the
    pendulum of Sec. VIII-A after ten Gauss-Newton iterations: J decreases by ~4e-3 per
    iteration at J ≈ 95,633).

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
    J = tracking_cost(pb, x, u)
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
        _, _, wx, wu, w_N = weighted_errors(pb, x, u)
        lam, g = costate_and_gradient(A, B, wx, wu, w_N)
        entry["gradient_norm"] = float(np.sqrt(np.sum(g * g)
                                               + (lam[0] @ lam[0] if opts.optimize_ic else 0.0)))
        d: Direction | None = None
        if stop == "slope" or (entry["gradient_norm"] >= tol and it < max_iterations):
            d = descent_direction(pb, it_method, opts.projection, A, B, curvature, lam, g, wx, wu,
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
            # the alternative only while its model could still beat the first candidate's cost
            trial = line_search(pb, x, u, J, cand, opts.armijo, opts.backtrack, opts.max_backtracks,
                                0.0 if found is None else J - found[0][2])
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
