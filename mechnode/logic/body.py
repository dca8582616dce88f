"""Moving a legged robot's body from a joint reference (ROS-free): a ``JointTrajectory`` for the
joints of a robot on a floating base becomes a base motion consistent with the contacts and a
time-varying balance schedule along it.

* **The base.** At every point of the reference, the base's position is the one that keeps the
  contacts where the stance holds them (the anchors) with those joints, its orientation held at
  the stance's: Gauss-Newton on the three base translations over the contacts' rows
  (:meth:`core.System.constraint`). A point whose joints cannot keep the contacts there with a
  translated base (a reference that would rotate the base, or move a foot) is refused with its
  index and the residual (:data:`CONSISTENCY_TOLERANCE`).
* **The motion.** The base offsets from the stance are interpolated by the cubic spline that
  starts and ends at rest and sampled every ``step`` seconds (the schedule's knots);
  :func:`core.body_motion` then solves the joints, speeds, accelerations and the inputs of
  minimum norm at every knot, exactly, and :func:`core.balance_schedule` the contact-consistent
  gains along it (the model frozen over each knot interval, zero-order hold). The joints the
  reference gave are checked against the ones the motion solves at the reference's points.
* **The schedule** is a :class:`~mechnode.logic.gains.Schedule` in the convention
  :data:`~mechnode.logic.gains.STATE_TANGENT` whose knot spacing is ``step``, a whole number of
  command periods: over ``[t_k - step/2, t_k + step/2)`` the command is
  ``u = u_k - K_k [q ⊖ q_k; v - v_k]``; after the last knot its law holds the final stance.

A knot costs a few milliseconds (the exact solves and linearizations with the contacts), so the
knots are spaced ``step`` apart (parameter ``body_step``) rather than every command period.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import scipy.interpolate
from scipy.spatial.transform import Rotation

import core
from mechnode.errors import InputError
from mechnode.logic.gains import STATE_TANGENT, Schedule, pad_last
from mechnode.logic.replan import window
from mechnode.logic.resampling import Reference

#: Largest contact row (m, rad) a reference point may leave with the base translated: above it
#: the joints of that point do not keep the contacts where they are. Below it the joints are
#: re-solved exactly on the contacts (:func:`core.body_motion`); the largest change is logged.
CONSISTENCY_TOLERANCE = 1e-3
#: Gauss-Newton steps on the base translation per point.
BASE_ITERATIONS = 20


def knot_step(step: float, dt: float) -> float:
    """``step`` rounded to a whole number (at least 1) of command periods ``dt``."""
    return max(1, int(round(step / dt))) * dt


def base_offsets(system, stance, joints, anchors) -> np.ndarray:
    """The base's world offsets from ``stance`` (nq) at which each row of ``joints``
    (points, joints) keeps the contacts at ``anchors``, the orientation held (the module
    docstring); an :class:`InputError` naming the first point that cannot."""
    R = Rotation.from_quat(stance[3:7]).as_matrix()           # (x, y, z, w), base to world
    out = np.zeros((joints.shape[0], 3))
    q = stance.copy()
    for i, row in enumerate(joints):
        q[7:] = row
        for _ in range(BASE_ITERATIONS):
            h, Dh = system.constraint(q, 1, anchors=anchors)
            step = np.linalg.lstsq(Dh[:, :3], h, rcond=None)[0]
            q[:3] -= R @ step
            if float(np.max(np.abs(step))) < 1e-13:
                break
        residual = float(np.max(np.abs(system.constraint(q, 0, anchors=anchors))))
        if not residual <= CONSISTENCY_TOLERANCE:
            raise InputError(f"reference point {i}: its joints do not keep the contacts where they stand with "
                             f"the base translated (orientation held): a contact row of {residual:.3g} remains "
                             f"(at most {CONSISTENCY_TOLERANCE:g}); a joint reference for a floating base "
                             "moves the body over the feet, not the feet")
        out[i] = q[:3] - stance[:3]
    return out


def body_schedule(system, stance, ref: Reference, Q, R, dt: float, step: float, max_knots: int,
                  joint_names=()) -> Schedule:
    """The balance schedule along the body motion of the joint reference ``ref`` (model order:
    the joints), from the standing configuration ``stance`` (nq) with the contacts anchored
    where they are there (the module docstring). ``Q`` (2 nv) and ``R`` (nu) are the LQR
    weights per second, ``dt`` the command period, ``step`` the knot spacing (rounded to a
    whole number of ``dt``), ``max_knots`` the most knots.

    A reference whose first point is later than ``t = 0`` starts from the stance at ``t = 0``.
    Raises :class:`InputError` (a point that cannot be reached, too many knots, bad times) and
    the library's errors (:func:`core.body_motion`, :func:`core.balance_schedule`)."""
    t_start = time.perf_counter()
    step = knot_step(step, dt)
    ref.check(step, max_knots)
    stance = np.asarray(system.integrate(stance, np.zeros(system.nv)), dtype=float)
    anchors = system.contact_anchors(stance)
    times, joints = ref.times, ref.positions
    offsets = base_offsets(system, stance, joints, anchors)
    if times[0] > 0.0:
        times, offsets = np.r_[0.0, times], np.vstack([np.zeros(3), offsets])
    t = times[0] + step * np.arange(int(np.floor((times[-1] - times[0]) / step + 1e-9)) + 1)
    if t[-1] < times[-1] - 1e-9 * step:
        t = np.r_[t, t[-1] + step]          # (the end is reached at a knot: the spline holds it)
    spline = scipy.interpolate.CubicSpline(times, offsets, bc_type="clamped", extrapolate=False)
    tc = np.minimum(t, times[-1])
    positions = spline(tc)
    velocities, accelerations = spline(tc, 1), spline(tc, 2)
    velocities[t > times[-1]] = 0.0
    accelerations[t > times[-1]] = 0.0
    t_solve = time.perf_counter()
    motion = core.body_motion(system, stance, t - t[0], positions, velocities, accelerations, anchors=anchors)
    t_gains = time.perf_counter()
    plan = core.balance_schedule(system, motion, Q, R)
    t_end = time.perf_counter()
    off = _joint_mismatch(motion, t, ref.times, joints)
    x_ref = np.hstack([motion.q, motion.v])
    state_names = tuple(f"d_{name}" for name in system.velocity_names) + tuple(system.velocity_names)
    info = {"kind": "body", "knots": int(t.size), "step": step, "joint_mismatch": off,
            "base_offset_max": float(np.max(np.linalg.norm(positions, axis=1))),
            "base_velocity": velocities, "base_acceleration": accelerations,     # (world; for re-plans)
            "resample_s": t_solve - t_start, "motion_s": t_gains - t_solve, "gains_s": t_end - t_gains,
            "independent": tuple(plan.state_names)}           # (the gains' coordinates; for re-plans)
    return Schedule(step, t - t[0], x_ref, motion.u.copy(), pad_last(plan.K), state_names,
                    tuple(system.input_names), tuple(joint_names), STATE_TANGENT, info)


def _joint_mismatch(motion, t, times, joints) -> float:
    """The largest difference (rad or m) between the reference's joints and the motion's at the
    reference's points that fall on a knot (for the log; the base's fit is what is checked)."""
    worst = 0.0
    for time_k, row in zip(times, joints, strict=True):
        k = int(np.argmin(np.abs(t - time_k)))
        if abs(t[k] - time_k) < 1e-9:
            worst = max(worst, float(np.max(np.abs(motion.q[k, 7:] - row))))
    return worst


def replan_body(system, schedule: Schedule, q, t: float, Q, R, horizon: float | None = None) -> Schedule | None:
    """A body motion's schedule re-planned from the configuration ``q`` measured at ``t``
    (seconds from its start): from the knot nearest to ``t`` to the end (at most ``horizon``
    seconds of it), the same base path re-solved with the contacts anchored where they are at
    ``q`` (a foot that slipped is stood on where it is) and the gains along it; the knots before
    and after the window are kept. None when the motion has ended. ``info`` adds
    ``replan_knot`` and ``replan_steps``."""
    k0, steps = window(schedule, t, horizon)
    if steps < 1:
        return None
    nq, rows = system.nq, slice(k0, k0 + steps + 1)
    start = schedule.x_ref[k0, :nq]
    anchors = system.contact_anchors(np.asarray(system.integrate(q, np.zeros(system.nv)), dtype=float))
    info = schedule.info
    motion = core.body_motion(system, start, schedule.times[rows] - schedule.times[k0],
                              schedule.x_ref[rows, :3] - start[:3], info["base_velocity"][rows],
                              info["base_acceleration"][rows], anchors=anchors)
    plan = core.balance_schedule(system, motion, Q, R, independent=info.get("independent"))
    x_ref, u_ref, gains = schedule.x_ref.copy(), schedule.u_ref.copy(), schedule.K.copy()
    x_ref[rows], u_ref[rows] = np.hstack([motion.q, motion.v]), motion.u
    gains[k0:k0 + steps] = plan.K
    if k0 + steps == schedule.knots - 1:
        gains[-1] = plan.K[-1]
    return replace(schedule, x_ref=x_ref, u_ref=u_ref, K=gains,
                   info=dict(info, replan_knot=k0, replan_steps=steps))
