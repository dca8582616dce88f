"""Re-planning from the measured state (ROS-free): the gains re-solved along the trajectory the
robot is predicted to follow from where it is.

A re-plan at time ``t`` (seconds from the schedule's start stamp) with the measured discrete state
``x`` takes the knot ``k0`` nearest to ``t`` and a window of ``H`` steps (the rest of the
reference, or ``horizon`` seconds of it), and predicts the closed loop under the schedule in force:
``X[0] = x``, ``U[j] = u_ref[k0+j] - K[k0+j] (X[j] - x_ref[k0+j])``, ``X[j+1] = f(X[j], U[j])``,
linearized exactly along the way (``core.MidpointVI.closed_loop``, one compiled call); then the
Riccati pass along it (``core.tvlqr`` with the schedule's weights; terminal weight as
:func:`mechnode.gains.terminal_weight`). The new schedule's rows ``k0 .. k0+H-1`` follow the
prediction with the new gains, ``u = U[j] - K_new[j] (x - X[j])``; the rows after the window (and
the hold row at the end) are the old schedule's, on the same time base. Along the prediction both
laws give the same input, so swapping the schedule in makes no jump; away from it the new gains
are those of where the robot is, not of a reference it has left.

What this does not do: the feed-forward stays the old law's. Along the prediction the new law
gives the inputs the old one would, so a robot that then follows the model exactly follows the
same trajectory (a pushed cart-pole or arm7 in simulation: the same tracking cost with and
without re-planning); the re-solved gains change only the response to what comes after the
re-plan (model errors, new disturbances). Steering the plan back to the reference faster takes
a step on the feed-forward as well (a Gauss-Newton step of the tracking cost against the
original reference, which the schedule would then have to keep apart from the plan).
"""
from __future__ import annotations

import time
from dataclasses import replace

import core

from .gains import STATE_Q_P, Schedule, terminal_weight
from .weights import Weights


def window(schedule: Schedule, t: float, horizon: float | None = None) -> tuple[int, int]:
    """``(k0, H)``: the knot nearest to ``t`` and the steps re-planned from it (the rest of the
    reference, at most ``horizon`` seconds of it); ``H = 0`` when the reference has ended."""
    k0 = schedule.knot(t)
    steps = schedule.knots - 1 - k0
    if horizon is not None:
        steps = min(steps, int(round(horizon / schedule.dt)))
    return k0, max(steps, 0)


def replan(plant, schedule: Schedule, x, t: float, weights: Weights,
           horizon: float | None = None, terminal=None) -> Schedule | None:
    """The schedule re-planned from the discrete state ``x`` measured at ``t`` (see the module
    docstring), or None when nothing is left to re-plan (the reference has ended). Its ``info``
    adds ``replan_knot``, ``replan_steps`` and the seconds of the prediction (``closed_loop_s``)
    and of the Riccati pass (``riccati_s``). ``terminal``: the weight on the window's last state;
    None solves :func:`mechnode.gains.terminal_weight` at the prediction's last step (a DARE,
    about 1 ms for 14 states); a caller that re-plans one schedule many times passes the one
    it solved once (:func:`terminal_for`). Raises core's errors if the prediction fails (a step
    that does not solve, a singular linearization)."""
    if schedule.convention != STATE_Q_P:
        raise ValueError("re-planning needs a schedule in [q, p, v] (GainSchedule.STATE_Q_P)")
    k0, H = window(schedule, t, horizon)
    if H == 0:
        return None
    t0 = time.perf_counter()
    rows = slice(k0, k0 + H)
    X, U, A, B = plant.vi.closed_loop(x, schedule.x_ref[rows], schedule.u_ref[rows], schedule.K[rows])
    t1 = time.perf_counter()
    Q_N, note = terminal_weight(A, B, weights) if terminal is None else (terminal, "given")
    K, _ = core.tvlqr(A, B, weights.Q, weights.R, Q_N)
    t2 = time.perf_counter()
    x_ref, u_ref, gains = schedule.x_ref.copy(), schedule.u_ref.copy(), schedule.K.copy()
    x_ref[rows], u_ref[rows], gains[rows] = X[:H], U, K
    info = dict(schedule.info, replan_knot=k0, replan_steps=H, closed_loop_s=t1 - t0,
                riccati_s=t2 - t1, terminal_weight=note)
    return replace(schedule, x_ref=x_ref, u_ref=u_ref, K=gains, info=info)


def terminal_for(plant, schedule: Schedule, weights: Weights):
    """The terminal weight for re-plans of ``schedule``: :func:`mechnode.gains.terminal_weight` at
    the reference's last step (the given ``Q_N``, else the DARE solution there)."""
    A, B = plant.vi.linearize(schedule.x_ref[-2], schedule.u_ref[-2])
    return terminal_weight(A[None], B[None], weights)[0]
