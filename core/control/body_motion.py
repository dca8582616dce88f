"""Moving the body of a robot on its contacts: a base motion made consistent with the contacts
(:func:`body_motion`), and time-varying contact-consistent LQR gains along it
(:func:`balance_schedule`): a squat, a sway of the base over the feet.

The reference. The base translates along a path ``p(t)`` (world offsets from the start) with its
orientation held; the contacts hold their frames where they are at the start (the anchors). At
every knot the joints are solved so that the contacts' rows vanish (Newton on ``h(q) = 0`` over
the joints, the base given: minimum-norm steps), the joint speeds and accelerations from the
rows' first and second derivatives (``Dh v = 0`` and ``Dh a + d(Dh)/dt v = 0``, the base's given),
and the inputs of minimum norm that produce that acceleration (``a(u) = a(0) + G u`` is affine
in ``u``, ``G`` the exact ``da/du``): nothing is differenced.

The model along it. At every knot the continuous contact-consistent linearization
(:meth:`core.System.linearize_minimal`, the independent coordinates chosen at the first knot and
kept) is discretized exactly over the step, zero-order hold, by the matrix exponential::

    expm([[A_i, B_i], [0, 0]] dt) = [[A_d, B_d], [0, I]]

and the gains come from the backward Riccati recursion (:func:`core.tvlqr`) with the stationary
(DARE) solution of the last knot as the terminal weight, each mapped back to the full tangent
state as :func:`core.balance_lqr` does (``K = K_i T⁺``). The command over ``[t_k, t_(k+1))`` is
``u = u_k - K_k [q ⊖ q_k; v - v_k]``.

Why the exponential and not a discrete variational step: the contacts' constraint-consistent
subspace, the reduction and the exactness checks are those of the continuous linearization
(cross-checked against Pinocchio); ``expm`` is its exact discretization for the model frozen over
the step: at a standing state it is the Jacobian of the nonlinear flow over ``dt`` itself (the
tests check it against finite differences of :func:`flow`); along a motion the frozen model
differs from the flow's Jacobian by ``O(dt² |dA/dt|)``, small for the slow motions of a body
over its feet. The discrete variational integrator (:class:`core.MidpointVI`) does not take a
quaternion base with contacts yet.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.interpolate
import scipy.linalg

from core.continuous.floating import quaternion_matrix
from core.control.riccati import dlqr, tvlqr
from core.errors import EquilibriumError, ModelError
from core.validation import float_array

__all__ = ["BodyMotion", "BalanceSchedule", "body_motion", "balance_schedule", "discretize", "flow"]

#: Newton on the contacts' rows stops below this (m, rad).
IK_TOLERANCE = 1e-12
#: The inputs must reproduce the reference's accelerations to this, relative to their size.
MOTION_TOLERANCE = 1e-8


@dataclass(frozen=True, eq=False)
class BodyMotion:
    """A motion of the body consistent with the contacts (:func:`body_motion`).

    Attributes
    ----------
    t : ndarray, shape (N + 1,)
        The knots' times (s).
    q : ndarray, shape (N + 1, nq)
        The configurations.
    v : ndarray, shape (N + 1, nv)
        The velocities (:attr:`core.System.velocity_names`).
    a : ndarray, shape (N + 1, nv)
        The accelerations ``dv/dt``.
    u : ndarray, shape (N + 1, nu)
        The inputs of minimum norm that produce them.
    anchors : tuple of ndarray
        Where the contacts hold their frames (:meth:`core.System.contact_anchors` at the start).
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    u: np.ndarray
    anchors: tuple


@dataclass(frozen=True, eq=False)
class BalanceSchedule:
    """Time-varying contact-consistent LQR gains along a :class:`BodyMotion` (:func:`balance_schedule`).

    Attributes
    ----------
    motion : BodyMotion
        The reference.
    K : ndarray, shape (N, nu, 2 nv)
        The gains on the full tangent state: ``u = u_k - K_k [q ⊖ q_k; v - v_k]`` over
        ``[t_k, t_(k+1))``.
    K_minimal : ndarray, shape (N, nu, p)
        The gains on the independent state.
    A, B : ndarray, shapes (N, p, p) and (N, p, nu)
        The discrete reduced model (zero-order hold, matrix exponential).
    T : ndarray, shape (N + 1, 2 nv, p)
        ``[δ; Δv] = T_k x_i`` at every knot.
    P : ndarray, shape (N + 1, p, p)
        The Riccati matrices (``P[N]`` the stationary one).
    state_names : list of str
        The independent state's names (the same at every knot).
    """

    motion: BodyMotion
    K: np.ndarray
    K_minimal: np.ndarray
    A: np.ndarray
    B: np.ndarray
    T: np.ndarray
    P: np.ndarray
    state_names: list


def discretize(A, B, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact zero-order-hold discretization of ``ẋ = A x + B u`` over ``dt``:
    ``A_d = e^(A dt)``, ``B_d = ∫_0^dt e^(A s) ds B`` (one matrix exponential of the block
    matrix ``[[A, B], [0, 0]] dt``)."""
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    n, m = B.shape
    M = np.zeros((n + m, n + m))
    M[:n, :n], M[:n, n:] = A * dt, B * dt
    E = scipy.linalg.expm(M)
    return E[:n, :n], E[:n, n:]


def _times(t) -> np.ndarray:
    t = float_array("t", t)
    if t.ndim != 1 or t.size < 2:
        raise ValueError(f"t: expected the knots' times, at least two, got shape {t.shape}")
    steps = np.diff(t)
    if not np.all(steps > 0.0):
        k = int(np.argmin(steps))
        raise ValueError(f"t: the times must increase, t[{k + 1}] = {t[k + 1]!r} follows t[{k}] = {t[k]!r}")
    return t


def _path(name: str, x, shape) -> np.ndarray:
    x = float_array(name, x)
    if x.shape != shape:
        raise ValueError(f"{name}: expected shape {shape} (a world offset per knot), got {x.shape}")
    return x


def _solve_joints(system, q, anchors, where: str) -> np.ndarray:
    """``q`` with its joints moved (Newton, minimum-norm steps) so that the contacts' rows vanish:
    until the step is at the rounding of ``q`` (one more than :data:`IK_TOLERANCE` needs)."""
    q = q.copy()
    for _ in range(30):
        h, Dh = system.constraint(q, 1, anchors=anchors)
        step = np.linalg.lstsq(Dh[:, 6:], h, rcond=None)[0]
        q[7:] -= step
        if float(np.max(np.abs(h))) < IK_TOLERANCE and float(np.max(np.abs(step))) < 1e-14:
            return q
    h = system.constraint(q, 0, anchors=anchors)
    if float(np.max(np.abs(h))) < IK_TOLERANCE:
        return q
    raise EquilibriumError(f"body_motion: {where}: the joints cannot keep the contacts where they are (the "
                           f"largest row is {float(np.max(np.abs(h))):.3g} after 30 Newton steps): the base "
                           "is out of the legs' reach", residual=float(np.max(np.abs(h))))


def body_motion(system, q, t, positions, velocities=None, accelerations=None, anchors=None) -> BodyMotion:
    """A motion of the base over the contacts, made consistent with them (the module docstring).

    Parameters
    ----------
    system : System
        On a quaternion base, with contacts (:meth:`core.System.add_contact`).
    q : array_like, shape (nq,)
        The start, on the contacts (e.g. :func:`core.standing`'s ``q``).
    t : array_like, shape (N + 1,)
        The knots' times (s), increasing.
    positions : array_like, shape (N + 1, 3)
        The base's offsets from its position at ``q`` (world axes, m); the orientation is held.
    velocities, accelerations : array_like, shape (N + 1, 3), optional
        Their time derivatives; when not given, those of the cubic spline through ``positions``
        that starts and ends at rest.
    anchors : tuple of ndarray, optional
        Where the contacts hold their frames (default: where they are at ``q``).

    Returns
    -------
    BodyMotion

    Raises
    ------
    ModelError
        No quaternion base, no contacts.
    EquilibriumError
        A knot out of the legs' reach; a motion the inputs cannot produce (names the knot).
    ValueError
        Wrong shapes, non-finite entries, times that do not increase.
    """
    if not system.free_flyer or not system.contacts:
        raise ModelError("body_motion: needs a quaternion floating base (floating_base='quaternion') and "
                         "contacts (System.add_contact)")
    t = _times(t)
    N1 = t.size
    positions = _path("positions", positions, (N1, 3))
    if velocities is None or accelerations is None:
        spline = scipy.interpolate.CubicSpline(t, positions, bc_type="clamped")
    velocities = spline(t, 1) if velocities is None else _path("velocities", velocities, (N1, 3))
    accelerations = spline(t, 2) if accelerations is None else _path("accelerations", accelerations, (N1, 3))
    q0 = np.asarray(system.integrate(q, np.zeros(system.nv)), dtype=float)        # (checked, normalized)
    anchors = system.contact_anchors(q0) if anchors is None else anchors
    R = quaternion_matrix(q0[3:7])
    n, nu = system.nv, system.nu
    qs, vs, accs, us = np.empty((N1, q0.size)), np.zeros((N1, n)), np.zeros((N1, n)), np.zeros((N1, nu))
    qk = q0
    for k in range(N1):
        where = f"knot {k} (t = {t[k]:.6g} s)"
        qk = qk.copy()
        qk[:3] = q0[:3] + positions[k]
        qk = _solve_joints(system, qk, anchors, where)
        _, Dh = system.constraint(qk, 1, anchors=anchors)
        v = np.zeros(n)
        v[:3] = R.T @ velocities[k]
        v[6:] = -np.linalg.lstsq(Dh[:, 6:], Dh[:, :6] @ v[:6], rcond=None)[0]
        a0 = system.qdd(qk, v, np.zeros(nu), anchors=anchors)          # consistent: Dh a0 + d(Dh)/dt v = 0
        a = np.zeros(n)                                # the joints': Dh a = Dh a0 (= -d(Dh)/dt v)
        a[:3] = R.T @ accelerations[k]
        a[6:] = np.linalg.lstsq(Dh[:, 6:], Dh @ a0 - Dh[:, :6] @ a[:6], rcond=None)[0]
        change = a - a0
        G = system.linearize(qk, v, np.zeros(nu), residual_limit=None, anchors=anchors)[1][n:]
        u = np.linalg.lstsq(G, change, rcond=None)[0]
        miss = float(np.linalg.norm(G @ u - change))
        if miss > MOTION_TOLERANCE * max(1.0, float(np.linalg.norm(a0)), float(np.linalg.norm(change))):
            raise EquilibriumError(f"body_motion: {where}: the inputs cannot produce the base's acceleration "
                                   f"{np.round(accelerations[k], 6).tolist()} m/s² on the contacts ({miss:.3g} "
                                   "m/s² of it is left)", residual=miss)
        qs[k], vs[k], accs[k], us[k] = qk, v, a, u
    return BodyMotion(t, qs, vs, accs, us, anchors)


def balance_schedule(system, motion: BodyMotion, Q=None, R=None, independent=None) -> BalanceSchedule:
    """Time-varying contact-consistent LQR gains along ``motion`` (the module docstring).

    Parameters
    ----------
    system : System
        The system of ``motion``.
    motion : BodyMotion
        From :func:`body_motion`.
    Q : array_like, shape (2 nv, 2 nv), optional
        The weight of the full tangent state ``[δ, Δv]`` per second (default the identity);
        each step weighs ``Q dt``.
    R : array_like, shape (nu, nu), optional
        The inputs' weight per second (default the identity); each step weighs ``R dt``.
    independent : sequence of str, optional
        The independent state's names (a :class:`BalanceSchedule`'s ``state_names``); default:
        chosen at the first knot. A schedule re-planned over part of a motion passes the whole
        motion's, so that both run the Riccati pass in the same coordinates (the choice at
        another knot may differ, and with it the gains, by the coordinates' variation).

    Returns
    -------
    BalanceSchedule

    Raises
    ------
    numpy.linalg.LinAlgError
        The last knot has no stabilizing gain (its uncontrollable directions named by
        :func:`core.balance_lqr`).
    ValueError
        Weights of the wrong shape, not symmetric (semi)definite; a knot where the independent
        coordinates of the first are a poor choice (:meth:`core.System.linearize_minimal`).
    """
    n, nu = system.nv, system.nu
    Q = np.eye(2 * n) if Q is None else float_array("Q", Q)
    if Q.shape != (2 * n, 2 * n):
        raise ValueError(f"Q must have shape {(2 * n, 2 * n)} (the tangent state [δ, Δv]), got {Q.shape}")
    R = np.eye(nu) if R is None else float_array("R", R)
    if R.shape != (nu, nu):
        raise ValueError(f"R must have shape {(nu, nu)} (the inputs), got {R.shape}")
    t = motion.t
    N = t.size - 1
    names: list = list(independent or ())   # the independent state (default: chosen at the first knot)
    As, Bs, Ts = [], [], []
    for k in range(N + 1):
        A_i, B_i, info = system.linearize_minimal(motion.q[k], motion.v[k], motion.u[k],
                                                  independent=names or None, anchors=motion.anchors)
        names = info.state_names
        As.append(A_i)
        Bs.append(B_i)
        Ts.append(info.T)
    dts = np.diff(t)
    p = As[0].shape[0]
    Ad, Bd = np.empty((N, p, p)), np.empty((N, p, nu))
    for k in range(N):
        Ad[k], Bd[k] = discretize(As[k], Bs[k], dts[k])
    Qs = np.array([Ts[k].T @ Q @ Ts[k] * dts[k] for k in range(N)])
    Rs = np.array([R * dts[k] for k in range(N)])
    AN, BN = discretize(As[N], Bs[N], dts[-1])
    _, P_N = dlqr(AN, BN, Ts[N].T @ Q @ Ts[N] * dts[-1], R * dts[-1])
    K_i, P = tvlqr(Ad, Bd, Qs, Rs, Q_N=0.5 * (P_N + P_N.T))
    K = np.array([K_i[k] @ np.linalg.pinv(Ts[k]) for k in range(N)])
    return BalanceSchedule(motion, K, K_i, Ad, Bd, np.array(Ts), P, names)


def flow(system, q, v, u, dt: float, steps: int = 20, anchors=None) -> tuple[np.ndarray, np.ndarray]:
    """The nonlinear dynamics integrated over ``dt`` with ``u`` held: ``(q, v)`` at ``t + dt``.

    Classical Runge-Kutta (``steps`` of ``dt / steps``) on the embedding ``(p, quaternion, joints,
    v)``: ``ṗ = R v_lin``, the quaternion's rate ``½ quat ⊗ (ω, 0)``, the joints' rates theirs,
    ``v̇`` :meth:`core.System.qdd` with the contacts held at ``anchors`` (default: where they
    are at ``q``). For checks and simulations of the contacts' dynamics; the quaternion is
    renormalized at the end. A fixed base integrates ``(q, v)`` directly."""
    q = np.asarray(system.integrate(q, np.zeros(system.nv)), dtype=float)
    v = float_array("v", v).copy()
    u = float_array("u", u)
    anchors = system.contact_anchors(q) if anchors is None and system.contacts else anchors
    free = bool(system.free_flyer)

    def rates(qe, ve):
        if free:
            quat = qe[3:7] / np.linalg.norm(qe[3:7])
            qn = np.concatenate([qe[:3], quat, qe[7:]])
            x, y, z, w = quat
            wx, wy, wz = ve[3:6]
            dquat = 0.5 * np.array([w * wx + y * wz - z * wy, w * wy + z * wx - x * wz,
                                    w * wz + x * wy - y * wx, -x * wx - y * wy - z * wz])
            dq = np.concatenate([quaternion_matrix(quat) @ ve[:3], dquat, ve[6:]])
        else:
            qn, dq = qe, ve
        return dq, system.qdd(qn, ve, u, anchors=anchors)

    h = dt / steps
    for _ in range(steps):
        k1 = rates(q, v)
        k2 = rates(q + 0.5 * h * k1[0], v + 0.5 * h * k1[1])
        k3 = rates(q + 0.5 * h * k2[0], v + 0.5 * h * k2[1])
        k4 = rates(q + h * k3[0], v + h * k3[1])
        q = q + h / 6.0 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        v = v + h / 6.0 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    if free:
        q[3:7] /= np.linalg.norm(q[3:7])
    return q, v
