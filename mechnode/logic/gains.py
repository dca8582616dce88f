"""Time-varying LQR gain schedules along discrete trajectories (ROS-free).

A :class:`Schedule` holds ``knots = N + 1`` rows: ``x_ref[k]`` for k = 0..N, ``u_ref[k]`` and
``K[k]`` for k < N, and a last row that repeats ``u_ref[N-1]`` and ``K[N-1]`` — the law the node
keeps applying (holding the final state) after the reference has ended. The law at knot k is
``u = u_ref[k] - K[k] (x - x_ref[k])`` with ``x = [q, p, v]`` (GainSchedule.STATE_Q_P) unless the
schedule says otherwise (:func:`schedule_in_qdot`: ``[q, qdot]``, STATE_Q_QDOT; a floating base's
balance law: ``u = u_ref[k] - K[k] [q ⊖ q_ref; v - v_ref]``, STATE_TANGENT).
:meth:`Schedule.knot` picks the knot nearest to a time (clamped to [0, N]).

:func:`gain_schedule` linearizes exactly along (X, U) and runs the backward Riccati pass
(``core.tvlqr``); without a terminal weight it uses the solution of the discrete algebraic
Riccati equation at the last step (so the final gains are the stationary LQR gains that keep
holding the end point), or ``Q`` if that fails.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

import core
from mechnode.logic.weights import Weights

STATE_Q_P, STATE_Q_QDOT = 0, 1  # the values of GainSchedule.STATE_Q_P / STATE_Q_QDOT
#: A floating base's law on ``x = [q ⊖ q_ref, v - v_ref]`` (:mod:`mechnode.logic.legged`);
#: ``x_ref`` rows are ``[q_ref (nq), v_ref (nv)]``; its knots may be a whole number of command
#: periods apart (:mod:`mechnode.logic.body`). GainSchedule.STATE_TANGENT on the wire.
STATE_TANGENT = 2


@dataclass(frozen=True)
class Schedule:
    """A TV-LQR gain schedule (see the module docstring for the layout); immutable."""
    dt: float
    times: np.ndarray           # (N+1,) seconds from the schedule's start stamp
    x_ref: np.ndarray           # (N+1, nx)
    u_ref: np.ndarray           # (N+1, nu), last row repeats row N-1
    K: np.ndarray               # (N+1, nu, nx), last row repeats row N-1
    state_names: tuple
    input_names: tuple
    joint_names: tuple
    convention: int = STATE_Q_P
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        for a in (self.times, self.x_ref, self.u_ref, self.K):
            a.setflags(write=False)

    @property
    def knots(self) -> int:
        return self.times.shape[0]

    @property
    def duration(self) -> float:
        """Seconds from the first to the last knot."""
        return float(self.times[-1] - self.times[0])

    def fits(self, plant) -> bool:
        """Whether the arrays have the sizes of ``plant`` (the control kernel does not check
        bounds: a schedule for another model must never reach it)."""
        knots = self.times.shape[0]
        tangent = self.convention == STATE_TANGENT
        if tangent != bool(getattr(plant, "floating", False)):
            return False
        rows = plant.n + plant.nv if tangent else plant.nx
        # (a floating base's body motion has knots a whole number of command periods apart)
        periods = self.dt / plant.dt
        spacing = self.dt == plant.dt or (tangent and periods >= 1.0 and abs(periods - round(periods)) < 1e-9)
        return (self.x_ref.shape == (knots, rows) and self.u_ref.shape == (knots, plant.nu)
                and self.K.shape == (knots, plant.nu, plant.nx) and spacing)

    def knot(self, t: float) -> int:
        """Nearest knot to ``t`` (seconds from the start stamp), clamped to [0, N]."""
        k = int(np.floor((t - self.times[0]) / self.dt + 0.5)) if np.isfinite(t) else 0
        return min(max(k, 0), self.knots - 1)

    def command(self, plant, t: float, q, dq):
        """``(u, k, x)`` of the law at the knot nearest to ``t`` for the measured (q, qdot)
        (convention STATE_Q_P; STATE_TANGENT: ``dq`` is the velocity ``v``); ``u`` is None if
        not finite."""
        k = self.knot(t)
        if self.convention == STATE_TANGENT:
            n = plant.n
            x = np.concatenate([plant.system.difference(self.x_ref[k, :n], q), dq - self.x_ref[k, n:]])
            u = self.u_ref[k] - self.K[k] @ x
            return (u if np.all(np.isfinite(u)) else None), k, x
        u, x = plant.vi.feedback(q, dq, self.x_ref[k], self.u_ref[k], self.K[k])
        return u, k, x


def pad_last(a: np.ndarray) -> np.ndarray:
    """Append a copy of the last row (the hold law after the end)."""
    return np.concatenate([a, a[-1:]], axis=0)


def terminal_weight(A, B, weights: Weights):
    """``(Q_N, note)``: the given terminal weight, else the DARE solution at the last step."""
    if weights.Q_N is not None:
        return weights.Q_N, "given"
    try:
        _, P = core.dlqr(A[-1], B[-1], weights.Q, weights.R)
        if np.all(np.isfinite(P)):
            return P, "dare"
    except (np.linalg.LinAlgError, ValueError):
        pass
    return weights.Q, "Q (DARE at the last step failed)"


def tvlqr_gains(plant, X, U, weights: Weights):
    """``(K, info)``: exact linearization along (X, U) and the Riccati pass (core.tvlqr)."""
    t0 = time.perf_counter()
    A, B = plant.vi.linearize_trajectory(X, U, threads=1)
    t1 = time.perf_counter()
    Q_N, note = terminal_weight(A, B, weights)
    K, _ = core.tvlqr(A, B, weights.Q, weights.R, Q_N)
    t2 = time.perf_counter()
    return K, {"linearization_s": t1 - t0, "riccati_s": t2 - t1, "terminal_weight": note}


def gain_schedule(plant, X, U, weights: Weights, joint_names, times=None, info=None) -> Schedule:
    """The Schedule (STATE_Q_P) along a trajectory X (N+1, nx), U (N, nu)."""
    X = np.ascontiguousarray(X, dtype=float)
    U = np.ascontiguousarray(U, dtype=float)
    K, gi = tvlqr_gains(plant, X, U, weights)
    N = U.shape[0]
    times = plant.dt * np.arange(N + 1) if times is None else np.asarray(times, dtype=float)
    return Schedule(plant.dt, times.copy(), X.copy(), pad_last(U), pad_last(K),
                    tuple(plant.state_names), tuple(plant.input_names), tuple(joint_names),
                    STATE_Q_P, dict(info or {}, **gi, knots=N + 1))


def qdot_to_qp(plant, X_qd):
    """States ``[q, qdot]`` (knots, 2n) -> ``[q, p, v]`` and the Legendre Jacobians (knots, 2n, 2n)."""
    X_qd = np.ascontiguousarray(X_qd, dtype=float)
    n = plant.n
    X = plant.vi.discrete_states(X_qd[:, :n], X_qd[:, n:])
    J = np.stack([plant.vi.state_jacobian(x[:n], x[n:]) for x in X_qd])
    return X, J


def schedule_in_qdot(plant, X_qd, U, weights_qd: Weights, joint_names, times=None) -> Schedule:
    """TV-LQR for a reference and weights in ``[q, qdot]`` coordinates (STATE_Q_QDOT).

    Exact change of coordinates per knot: with ``J_k = d[q, p, v]/d[q, qdot]`` at knot k, the
    weights become ``J_k^-T Q J_k^-1`` on ``[q, p, v]``, and the gains ``K_qdot,k = K_k J_k``;
    ``u = u_ref - K_qdot (x_qdot - x_qdot_ref)`` then equals the law in ``[q, p, v]`` to first
    order. ``R`` is unchanged."""
    X, J = qdot_to_qp(plant, X_qd)
    Jinv = np.linalg.inv(J)
    Qs = np.einsum("kji,jl,klm->kim", Jinv, weights_qd.Q, Jinv)   # J^-T Q J^-1 per knot
    N = X.shape[0] - 1
    A, B = plant.vi.linearize_trajectory(X, np.ascontiguousarray(U, dtype=float), threads=1)
    t1 = time.perf_counter()
    if weights_qd.Q_N is not None:
        Q_N, note = Jinv[N].T @ weights_qd.Q_N @ Jinv[N], "given"
    else:
        Q_N, note = terminal_weight(A, B, Weights(Qs[N], weights_qd.R, None))
    K, _ = core.tvlqr(A, B, Qs[:N], weights_qd.R, 0.5 * (Q_N + Q_N.T))
    Kqd = np.einsum("kij,kjl->kil", K, J[:N])
    times = plant.dt * np.arange(N + 1) if times is None else np.asarray(times, dtype=float)
    names = list(plant.config_names) + ["d" + c for c in plant.config_names]
    return Schedule(plant.dt, times.copy(), X_qd.copy(), pad_last(np.asarray(U, dtype=float)),
                    pad_last(Kqd), tuple(names), tuple(plant.input_names), tuple(joint_names),
                    STATE_Q_QDOT, {"riccati_s": time.perf_counter() - t1, "terminal_weight": note,
                                   "knots": N + 1})


#: Largest unbalanced generalized force (:func:`core.holding_inputs`' residual) a configuration
#: may leave for the node to hold it, relative to the gravity and spring forces there (at least
#: 1 N or N m); above it (an underactuated robot off its equilibria, e.g. a tilted cart-pole) the
#: hold is refused.
HOLD_RESIDUAL_LIMIT = 1e-4


class HoldError(ValueError):
    """The hold about a configuration cannot be computed (it names why)."""


def hold_schedule(plant, q, weights: Weights, joint_names) -> Schedule:
    """The law that holds the robot at rest at ``q``, as a one-knot :class:`Schedule`
    (STATE_Q_P): ``x_ref`` the integrator's rest state at ``q`` (``vi.rest_state``), ``u_ref``
    the inputs that hold it against gravity and the constraint forces (``core.holding_inputs``;
    the kinematic variables kept where they are) and ``K`` the stationary LQR gains of the
    exact linearization there (``core.dlqr`` with the node's weights). A model with holonomic
    constraints has ``q`` moved onto them first (``core.satisfy_constraints``).

    Raises :class:`HoldError` naming the reason: ``q`` not finite, off the constraints beyond
    repair, a configuration the inputs cannot hold (a residual above :data:`HOLD_RESIDUAL_LIMIT`
    times the generalized gravity and spring force there), a singular linearization, no stabilizing Riccati solution,
    or any non-finite result."""
    q = np.array(q, dtype=float)
    if q.shape != (plant.n,) or not np.all(np.isfinite(q)):
        raise HoldError(f"the measured configuration {np.round(q, 6).tolist()} is not {plant.n} finite numbers")
    system, vi = plant.system, plant.vi
    info = {}
    try:
        t0 = time.perf_counter()
        if plant.has_constraints:
            q = core.satisfy_constraints(system, q)
        u, residual = core.holding_inputs(system, q)
        scale = max(1.0, float(np.linalg.norm(system.lagrangian_derivatives(q, np.zeros(plant.n), 1).Lq)))
        if not residual <= HOLD_RESIDUAL_LIMIT * scale:
            raise HoldError(f"the inputs {plant.force_input_names} cannot hold q = {np.round(q, 4).tolist()}: "
                            f"an unbalanced generalized force of {residual:.3g} remains (at most "
                            f"{HOLD_RESIDUAL_LIMIT:g} x {scale:.3g}; an underactuated robot off its equilibria)")
        x = vi.rest_state(q)
        ur = vi.rest_input(q, u)
        # (a stack of one: the trajectory linearization's kernels, compiled before activation)
        A, B = (a[0] for a in vi.linearize(x[None], ur[None]))
        K, P = core.dlqr(A, B, weights.Q, weights.R)
        info = {"hold_s": time.perf_counter() - t0, "residual": residual}
    except HoldError:
        raise
    except (core.CoreError, np.linalg.LinAlgError, ValueError, ArithmeticError) as exc:
        raise HoldError(f"{type(exc).__name__}: {exc}") from None
    for name, a in (("rest state", x), ("holding input", ur), ("gain", K), ("Riccati solution", P)):
        if not np.all(np.isfinite(a)):
            raise HoldError(f"the {name} is not finite")
    closed = np.abs(np.linalg.eigvals(A - B @ K)).max()
    if not closed < 1.0:
        raise HoldError(f"the LQR gains do not stabilize the linearization (spectral radius {closed:.6g})")
    info["spectral_radius"] = float(closed)
    return Schedule(plant.dt, np.zeros(1), x[None].copy(), ur[None].copy(), K[None].copy(),
                    tuple(plant.state_names), tuple(plant.input_names), tuple(joint_names),
                    STATE_Q_P, dict(info, knots=1, kind="hold"))
