"""Reference handling and time-varying LQR gain schedules, free of ROS (never imports rclpy).

Pipeline for a reference given as joint positions over time (what the node does with a
``trajectory_msgs/JointTrajectory``)::

    JointMap.reference(...)      joint names -> model order (by name, never by index); checks
    resample(reference, dt)      knots t_k = t_first + k dt up to the last point (cubic Hermite
                                 with given velocities, PCHIP without, linear for two points)
    make_feasible(plant, ...)    discrete state along it and a dynamically feasible (X, U):
                                   p_0 = M(q_0) qdot_0 (exact Legendre), p_k = D2 L_d(q_k-1, q_k);
                                   inputs by DEL inverse dynamics (least squares, exact where the
                                   system is fully actuated); if the DEL residual stays above the
                                   tolerance (underactuated, constrained) core.optimize_trajectory
                                   tracks the reference from x_0 instead (every iterate of it is a
                                   rollout of the integrator, hence feasible)
    gain_schedule(plant, X, U, weights)
                                 exact linearization along (X, U), backward Riccati pass
                                 (core.tvlqr) -> Schedule

The :class:`Schedule` holds ``knots = N + 1`` rows: ``x_ref[k]`` for k = 0..N, ``u_ref[k]`` and
``K[k]`` for k < N, and a last row that repeats ``u_ref[N-1]`` and ``K[N-1]`` — the law the node
keeps applying (holding the final state) after the reference has ended. The law at knot k is
``u = u_ref[k] - K[k] (x - x_ref[k])`` with ``x = [q, p, v]`` (GainSchedule.STATE_Q_P) unless the
schedule says otherwise. :meth:`Schedule.knot` picks the knot nearest to a time (clamped to
[0, N]).

Weights are given on the discrete state ``x = [q, p, v]`` as a diagonal (``nx`` numbers) or a
full row-major matrix (``nx * nx`` numbers); the terminal weight defaults to the solution of the
discrete algebraic Riccati equation at the last step (so the final gains are the stationary LQR
gains that keep holding the end point), or ``Q`` if that fails.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.interpolate

import core

STATE_Q_P, STATE_Q_QDOT = 0, 1  # the values of GainSchedule.STATE_Q_P / STATE_Q_QDOT


class InputError(ValueError):
    """A state, reference or request that cannot be used; the message says why."""


# ================================================================================ joint names
class JointMap:
    """Maps the joint names of ROS messages onto the model's configuration variables.

    ``mapping`` entries are ``"model_variable:joint_name"``; variables not mentioned keep their
    own name. Messages are matched by name only: the order of joints in a message is free,
    joints unknown to the model are ignored (reported by :meth:`indices`), missing ones are an
    error.
    """

    def __init__(self, config_names, mapping=()):
        self.config_names = list(config_names)
        pairs = self.parse(mapping, self.config_names)
        self.joint_names = [pairs.get(c, c) for c in self.config_names]
        if len(set(self.joint_names)) != len(self.joint_names):
            dup = sorted({j for j in self.joint_names if self.joint_names.count(j) > 1})
            raise InputError(f"joint_map gives the same joint name to several variables: {dup}")
        self._index = {j: i for i, j in enumerate(self.joint_names)}
        self._cache: dict = {}

    @staticmethod
    def parse(entries, config_names=None) -> dict:
        """``["x:cart_joint", ...]`` -> ``{"x": "cart_joint"}``; checks the format (and the
        variable names when ``config_names`` is given)."""
        out = {}
        for e in entries or ():
            if not isinstance(e, str) or e.count(":") != 1:
                raise InputError(f"joint_map entry {e!r} must be 'model_variable:joint_name'")
            var, joint = (s.strip() for s in e.split(":"))
            if not var or not joint:
                raise InputError(f"joint_map entry {e!r} has an empty side")
            if var in out:
                raise InputError(f"joint_map names variable {var!r} twice")
            if config_names is not None and var not in config_names:
                raise InputError(f"joint_map entry {e!r}: the model has no variable {var!r} "
                                 f"(variables: {list(config_names)})")
            out[var] = joint
        return out

    def indices(self, names):
        """``(take, unknown)``: ``take[i]`` = position in ``names`` of the joint of variable i;
        ``unknown`` = names the model does not know. Raises InputError if a joint is missing or
        named twice. Cached per distinct name list."""
        key = tuple(names)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        pos = {}
        for i, nm in enumerate(key):
            if nm in pos:
                raise InputError(f"joint {nm!r} appears twice in the message")
            pos[nm] = i
        missing = [j for j in self.joint_names if j not in pos]
        if missing:
            raise InputError(f"message lacks joint(s) {missing} (model needs {self.joint_names}, "
                             f"got {list(key)})")
        take = np.array([pos[j] for j in self.joint_names], dtype=np.int64)
        unknown = tuple(nm for nm in key if nm not in self._index)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (take, unknown)
        return take, unknown

    def state(self, names, position, velocity):
        """``(q, qdot, unknown)`` in model order from a JointState's arrays; raises InputError for
        wrong sizes, missing joints, missing velocities or non-finite values."""
        n_names = len(names)
        if len(position) != n_names:
            raise InputError(f"JointState has {n_names} names but {len(position)} positions")
        if len(velocity) != n_names:
            raise InputError(f"JointState has {n_names} names but {len(velocity)} velocities "
                             "(positions and velocities of every joint are required)")
        take, unknown = self.indices(names)
        q = np.asarray(position, dtype=float)[take]
        dq = np.asarray(velocity, dtype=float)[take]
        if not (np.isfinite(q).all() and np.isfinite(dq).all()):
            bad = [self.joint_names[i] for i in range(len(take))
                   if not (np.isfinite(q[i]) and np.isfinite(dq[i]))]
            raise InputError(f"JointState has non-finite position/velocity for {bad}")
        return q, dq, unknown

    def reference(self, names, times, positions, velocities=None) -> "Reference":
        """A :class:`Reference` in model order from a trajectory's arrays (rows = points)."""
        times = np.asarray(times, dtype=float)
        if times.ndim != 1 or times.size == 0:
            raise InputError("the trajectory has no points")
        take, unknown = self.indices(names)
        pos = np.asarray(positions, dtype=float)
        if pos.shape != (times.size, len(names)):
            raise InputError(f"every point needs {len(names)} positions; got array {pos.shape}")
        vel = None
        if velocities is not None:
            vel = np.asarray(velocities, dtype=float)
            if vel.shape != pos.shape:
                raise InputError(f"velocities must be given for every joint of every point or for "
                                 f"none; got {vel.shape} for positions {pos.shape}")
            vel = vel[:, take]
        return Reference(times, pos[:, take], vel, unknown)


# ================================================================================ references
@dataclass(frozen=True)
class Reference:
    """Reference points in model order: ``times`` (M,) seconds from the trajectory's start
    stamp, ``positions`` (M, n), ``velocities`` (M, n) or None; ``ignored_joints``."""
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    ignored_joints: tuple = ()

    def check(self, dt: float, max_knots: int) -> None:
        t = self.times
        if t.size == 0:
            raise InputError("the trajectory has no points")
        if not np.all(np.isfinite(t)):
            raise InputError("non-finite time_from_start")
        if t[0] < 0:
            raise InputError(f"negative time_from_start {t[0]} at point 0")
        if t.size > 1 and not np.all(np.diff(t) > 0):
            k = int(np.flatnonzero(np.diff(t) <= 0)[0]) + 1
            raise InputError(f"time_from_start must increase strictly; point {k} has "
                             f"{t[k]:.9g} s after {t[k - 1]:.9g} s")
        if not np.all(np.isfinite(self.positions)):
            k = int(np.flatnonzero(~np.isfinite(self.positions).all(axis=1))[0])
            raise InputError(f"non-finite position at point {k}")
        if self.velocities is not None and not np.all(np.isfinite(self.velocities)):
            raise InputError("non-finite velocity in the trajectory")
        span = t[-1] - t[0]
        if t.size < 2 or span < dt * (1 - 1e-9):
            raise InputError(f"the trajectory must span at least one time step dt = {dt} s "
                             f"(points: {t.size}, duration {span:.6g} s)")
        knots = int(np.floor(span / dt + 1e-9)) + 1
        if knots > max_knots:
            raise InputError(f"the trajectory needs {knots} knots at dt = {dt} s; the limit "
                             f"(parameter max_knots) is {max_knots}")


def resample(ref: Reference, dt: float, max_knots: int = 100000):
    """``(t, Q, dQ)``: knot times ``t_k = t_first + k dt`` (k = 0..N, the last one at or before
    the final point), positions and velocities of the interpolant there."""
    ref.check(dt, max_knots)
    t_pts, q_pts = ref.times, ref.positions
    N = int(np.floor((t_pts[-1] - t_pts[0]) / dt + 1e-9))
    t = t_pts[0] + dt * np.arange(N + 1)
    t = np.minimum(t, t_pts[-1])
    if ref.velocities is not None:
        spline = scipy.interpolate.CubicHermiteSpline(t_pts, q_pts, ref.velocities, axis=0)
    elif t_pts.size >= 3:
        spline = scipy.interpolate.PchipInterpolator(t_pts, q_pts, axis=0)
    else:
        slope = (q_pts[1] - q_pts[0]) / (t_pts[1] - t_pts[0])
        Q = q_pts[0] + (t - t_pts[0])[:, None] * slope
        return t, Q, np.tile(slope, (N + 1, 1))
    return t, spline(t), spline(t, 1)


@dataclass
class Feasible:
    """A dynamically feasible discrete trajectory: states X (N+1, nx), inputs U (N, nu)."""
    X: np.ndarray
    U: np.ndarray
    method: str                 # "inverse_dynamics", "optimizer" or "as_given"
    residual: float             # largest relative DEL residual of the inverse-dynamics pass
    message: str = ""
    iterations: int = 0
    converged: bool = True
    cost: float = 0.0
    seconds: float = 0.0


def discrete_reference(plant, Q, dq0):
    """``(X, U_ls, residual)``: the discrete state along configurations ``Q`` (N+1, n) —
    ``p_0`` by the Legendre transform of ``dq0``, ``p_k = D2 L_d(q_k-1, q_k)``, ``v_k`` by
    differences — the least-squares DEL inputs and the per-step DEL residual."""
    Q = np.ascontiguousarray(Q, dtype=float)
    p0 = plant.to_discrete(Q[0], dq0)[plant.n:plant.n + plant.nd]
    U, P, resid = plant.inverse_dynamics(Q, p0)
    V = np.empty((Q.shape[0], plant.nk))
    if plant.nk:
        V[0] = np.asarray(dq0, dtype=float)[plant.kin]
        V[1:] = np.diff(Q[:, plant.kin], axis=0) / plant.dt
    return np.hstack([Q, P, V]), U, resid


def make_feasible(plant, Q, dq0, weights: "Weights", mode: str = "auto",
                  optimizer_method: str = "first_order", tolerance: float = 1e-6,
                  max_iterations: int = 30, feasibility_tolerance: float = 1e-9) -> Feasible:
    """A feasible (X, U) near the configurations ``Q`` (see the module docstring).

    ``mode``: ``"auto"`` (inverse dynamics when its residual is below ``feasibility_tolerance``,
    otherwise the optimizer), ``"inverse_dynamics"`` (fails if the residual is too large),
    ``"optimizer"`` (always optimize) or ``"none"`` (use the discrete reference and the
    least-squares inputs as they are).
    """
    t0 = time.perf_counter()
    X, U, resid = discrete_reference(plant, Q, dq0)
    worst = float(resid.max()) if resid.size else 0.0
    if mode == "none":
        return Feasible(X, U, "as_given", worst, "used as given (feasibility: none)",
                        seconds=time.perf_counter() - t0)
    if mode in ("auto", "inverse_dynamics") and worst <= feasibility_tolerance:
        return Feasible(X, U, "inverse_dynamics", worst, "", seconds=time.perf_counter() - t0)
    if mode == "inverse_dynamics":
        k = int(np.argmax(resid))
        raise InputError(f"the reference is not dynamically feasible for this {plant.actuation} "
                         f"system: DEL residual {worst:.3e} at step {k} (feasibility "
                         "'inverse_dynamics' needs a fully actuated, unconstrained system)")
    if mode not in ("auto", "optimizer"):
        raise InputError(f"unknown feasibility mode {mode!r}")
    # Initial guess: a closed-loop rollout of the integrator under TV-LQR tracking of the
    # (infeasible) reference — feasible and close to it even for unstable systems, where an
    # open-loop rollout of the least-squares inputs would diverge.
    K, _ = tvlqr_gains(plant, X, U, weights)
    Xc, Uc = core.simulate_closed_loop(plant.discrete_system().step, X[0], X, U, K)
    if not (np.all(np.isfinite(Xc)) and np.all(np.isfinite(Uc))):
        raise InputError("the reference cannot be tracked: the closed-loop rollout that seeds the "
                         "trajectory optimizer failed (DEL solve diverged)")
    if max_iterations == 0:
        return Feasible(Xc, Uc, "optimizer", worst, "closed-loop rollout (0 optimizer iterations)",
                        0, False, float("nan"), time.perf_counter() - t0)
    QN = weights.Q_N if weights.Q_N is not None else weights.Q
    result = core.optimize_trajectory(plant.discrete_system(), X[0], X, U, weights.Q, weights.R,
                                      QN, method=optimizer_method, u_init=Uc, tol=tolerance,
                                      max_iterations=max_iterations)
    msg = (f"optimizer ({optimizer_method}) from a closed-loop rollout: {result.iterations} "
           f"iterations, cost {result.cost:.4g}, {result.message}")
    return Feasible(result.x, result.u, "optimizer", worst, msg, result.iterations,
                    result.converged, float(result.cost), time.perf_counter() - t0)


# ================================================================================ weights
def weight_matrix(values, n: int, name: str, definite: bool = False) -> np.ndarray:
    """A symmetric ``n x n`` weight from ``n`` diagonal entries or ``n*n`` row-major entries;
    positive semi-definite (``definite``: positive definite). Raises InputError."""
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float).ravel()
    if v.size == n:
        W = np.diag(v)
    elif v.size == n * n:
        W = v.reshape(n, n)
    else:
        raise InputError(f"{name} needs {n} (diagonal) or {n * n} (full) numbers, got {v.size}")
    if not np.all(np.isfinite(W)):
        raise InputError(f"{name} has non-finite entries")
    if not np.allclose(W, W.T, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(W).max())):
        raise InputError(f"{name} is not symmetric")
    W = 0.5 * (W + W.T)
    eig = np.linalg.eigvalsh(W) if n else np.zeros(0)
    scale = max(1.0, float(np.abs(eig).max())) if n else 1.0
    if definite and not np.all(eig > 1e-12 * scale):
        raise InputError(f"{name} must be positive definite (smallest eigenvalue {eig.min():.3g})")
    if not definite and not np.all(eig >= -1e-12 * scale):
        raise InputError(f"{name} must be positive semi-definite (smallest eigenvalue {eig.min():.3g})")
    return W


@dataclass(frozen=True)
class Weights:
    """LQR weights on the discrete state ``[q, p, v]``; ``Q_N`` None = DARE at the last step."""
    Q: np.ndarray
    R: np.ndarray
    Q_N: np.ndarray | None = None

    @classmethod
    def from_values(cls, plant, Q, R, Q_N=()) -> "Weights":
        return cls(weight_matrix(Q, plant.nx, "Q"), weight_matrix(R, plant.nu, "R", definite=True),
                   weight_matrix(Q_N, plant.nx, "Q_N") if len(Q_N) else None)


def check_weight_values(values, name: str, allow_empty: bool = False) -> None:
    """Size-independent checks of a weight parameter (before the model is known)."""
    v = list(values)
    if not v:
        if allow_empty:
            return
        raise InputError(f"{name} must not be empty")
    a = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} has non-finite entries")
    n = int(round(np.sqrt(a.size)))
    if n * n != a.size and np.any(a < 0):
        raise InputError(f"{name}: diagonal weights must be >= 0")


# ================================================================================ schedules
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

    def knot(self, t: float) -> int:
        """Nearest knot to ``t`` (seconds from the start stamp), clamped to [0, N]."""
        k = int(np.floor((t - self.times[0]) / self.dt + 0.5)) if np.isfinite(t) else 0
        return min(max(k, 0), self.knots - 1)

    def law(self, k: int):
        """``(x_ref[k], u_ref[k], K[k])``."""
        return self.x_ref[k], self.u_ref[k], self.K[k]

    def command(self, plant, t: float, q, dq):
        """``(u, k, x)`` of the law at the knot nearest to ``t`` for the measured (q, qdot)
        (convention STATE_Q_P); ``u`` is None if not finite."""
        k = self.knot(t)
        u, x = plant.control(q, dq, self.x_ref[k], self.u_ref[k], self.K[k])
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
    A, B = plant.linearize_along(X, U)
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


@dataclass(frozen=True)
class Options:
    """How references become schedules (the node's parameters of the same names)."""
    feasibility: str = "auto"
    optimizer_method: str = "first_order"
    optimizer_tolerance: float = 1e-6
    optimizer_max_iterations: int = 30
    feasibility_tolerance: float = 1e-9
    max_knots: int = 100000


def schedule_from_reference(plant, joint_map: JointMap, ref: Reference, weights: Weights,
                            options: Options = Options()) -> Schedule:
    """Resample, make feasible, linearize, Riccati: the node's work for one JointTrajectory.
    ``info`` records the seconds of every stage and how feasibility was obtained."""
    t0 = time.perf_counter()
    t, Q, dQ = resample(ref, plant.dt, options.max_knots)
    t1 = time.perf_counter()
    feas = make_feasible(plant, Q, dQ[0], weights, options.feasibility, options.optimizer_method,
                         options.optimizer_tolerance, options.optimizer_max_iterations,
                         options.feasibility_tolerance)
    info = {"resample_s": t1 - t0, "feasibility_s": feas.seconds, "feasibility": feas.method,
            "feasibility_message": feas.message, "del_residual": feas.residual,
            "optimizer_iterations": feas.iterations, "optimizer_converged": feas.converged,
            "ignored_joints": list(ref.ignored_joints)}
    sched = gain_schedule(plant, feas.X, feas.U, weights, joint_map.joint_names, t, info)
    sched.info["total_s"] = time.perf_counter() - t0
    return sched


# ================================================================================ conventions
def qdot_to_qp(plant, X_qd):
    """States ``[q, qdot]`` (knots, 2n) -> ``[q, p, v]`` and the Legendre Jacobians (knots, 2n, 2n)."""
    X_qd = np.ascontiguousarray(X_qd, dtype=float)
    n = plant.n
    X = plant.to_discrete_many(X_qd[:, :n], X_qd[:, n:])
    J = np.stack([plant.legendre_jacobian(x[:n], x[n:]) for x in X_qd])
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
    A, B = plant.linearize_along(X, np.ascontiguousarray(U, dtype=float))
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
