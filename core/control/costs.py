"""The tracking problem's numbers: its quadratic cost, the cost's exact gradient by the costate
(adjoint) pass, and the linearizations of a discrete system along a trajectory.

With ``δx = x − x_ref`` and ``δu = u − u_ref``::

    J = ½ Σ_{k<N} [δx_kᵀ Q_k δx_k + δu_kᵀ R_k δu_k] + ½ δx_Nᵀ Q_N δx_N
    λ_N = Q_N δx_N,   λ_k = Q_k δx_k + A_kᵀ λ_{k+1},   ∂J/∂u_k = R_k δu_k + B_kᵀ λ_{k+1}

Any discrete system in state form is one (the :class:`DiscreteSystem` protocol; a
:class:`core.MidpointVI` is one); what the optimizer does with these numbers is
:mod:`core.control.optimal`. Conventions: :mod:`core.conventions`.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from core.base.jit import njit
from core.control.riccati import state_weights, weight_stack
from core.progress import progress_reporter
from core.validation import check_second_order_memory, float_array


@njit(cache=True, nogil=True)
def costate_and_gradient(A, B, wx, wu, w_N):
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


class CostData(Protocol):
    """What the tracking cost reads: the reference and the weight stacks (``Qs``, ``Rs`` with 1
    or ``N`` entries). A :class:`core.control.optimal.TrackingProblem` and :class:`_Weights` are
    both one."""
    @property
    def x_ref(self) -> np.ndarray: ...

    @property
    def u_ref(self) -> np.ndarray: ...

    @property
    def Qs(self) -> np.ndarray: ...

    @property
    def Rs(self) -> np.ndarray: ...

    @property
    def Q_N(self) -> np.ndarray: ...


class _Weights(NamedTuple):
    """The quadratic tracking cost's data (:class:`CostData`) of :func:`trajectory_cost`."""
    x_ref: np.ndarray
    u_ref: np.ndarray
    Qs: np.ndarray
    Rs: np.ndarray
    Q_N: np.ndarray


def apply_weight(Ws: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``W_k d_k`` for every row of ``d`` (Ws has 1 or len(d) entries)."""
    return np.ascontiguousarray((Ws @ d[:, :, None])[:, :, 0])


def weighted_errors(pb: CostData, x, u):
    """Errors and the cost's linear terms ``wx_k = Q_k δx_k``, ``wu_k = R_k δu_k``, ``w_N``."""
    N = u.shape[0]
    dx, du = x - pb.x_ref, u - pb.u_ref
    wx, wu = apply_weight(pb.Qs, dx[:N]), apply_weight(pb.Rs, du)
    return dx, du, wx, wu, pb.Q_N @ dx[N]


def tracking_cost(pb: CostData, x, u) -> float:
    dx, du, wx, wu, w_N = weighted_errors(pb, x, u)
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
    return tracking_cost(pb, x, u)
