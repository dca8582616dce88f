"""Re-planning from the measured state (ROS-free): the gains re-solved along the trajectory the
robot is predicted to follow from where it is.

A re-plan at time ``t`` (seconds from the schedule's start stamp) with the measured discrete state
``x`` takes the knot ``k0`` nearest to ``t`` and a window of ``H`` steps (the rest of the
reference, or ``horizon`` seconds of it), and predicts the closed loop under the schedule in force:
``X[0] = x``, ``U[j] = u_ref[k0+j] - K[k0+j] (X[j] - x_ref[k0+j])``, ``X[j+1] = f(X[j], U[j])``,
linearized exactly along the way (``core.MidpointVI.closed_loop``, one compiled call); then the
Riccati pass along it (``core.tvlqr`` with the schedule's weights; terminal weight as
:func:`mechnode.logic.gains.terminal_weight`). The new schedule's rows ``k0 .. k0+H-1`` follow the
prediction with the new gains, ``u = U[j] - K_new[j] (x - X[j])``; the rows after the window (and
the hold row at the end) are the old schedule's, on the same time base. Along the prediction both
laws give the same input, so swapping the schedule in makes no jump; away from it the new gains
are those of where the robot is, not of a reference it has left.

Re-linearizing alone does not move the plan: along the prediction the new law gives the inputs
the old one would, so a robot that follows the model exactly follows the same trajectory (a
pushed cart-pole or arm7 in simulation: the same tracking cost with and without it); the
re-solved gains change only the response to what comes after (model errors, new disturbances).
With ``reference`` (the schedule made from the reference, which the plan must be kept apart
from) the re-plan also takes one Gauss-Newton step of the tracking cost against it, as a
real-time iteration does (``core.tracking_step`` along the prediction: the same gains, a
feed-forward ``kff`` towards the reference), and the new rows are the closed loop of that law
from ``x`` (the plan the robot follows, not the step's linear prediction; the step is halved
while that loop does not solve). The first input then differs from the old law's by ``kff[0]``:
the plan steers back. For a feasible reference the schedule's TV-LQR law is already optimal to
first order, so the step matters when the robot is far off it: re-planned every step, a
cart-pole pushed hard (3 and -1.5 on its momenta) ends at 58 % of the fixed schedule's cost
(``tests/test_replan.py``), a mild push within a few per cent of it either way.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

import core
from mechnode.logic.gains import STATE_Q_P, Schedule, terminal_weight
from mechnode.logic.weights import Weights


def window(schedule: Schedule, t: float, horizon: float | None = None) -> tuple[int, int]:
    """``(k0, H)``: the knot nearest to ``t`` and the steps re-planned from it (the rest of the
    reference, at most ``horizon`` seconds of it); ``H = 0`` when the reference has ended."""
    k0 = schedule.knot(t)
    steps = schedule.knots - 1 - k0
    if horizon is not None:
        steps = min(steps, int(round(horizon / schedule.dt)))
    return k0, max(steps, 0)


def replan(plant, schedule: Schedule, x, t: float, weights: Weights,
           horizon: float | None = None, terminal=None, reference: Schedule | None = None) -> Schedule | None:
    """The schedule re-planned from the discrete state ``x`` measured at ``t`` (see the module
    docstring), or None when nothing is left to re-plan (the reference has ended). Its ``info``
    adds ``replan_knot``, ``replan_steps``, the seconds of the prediction (``closed_loop_s``)
    and of the Riccati pass (``riccati_s``, with the step's second closed loop) and the step's
    length (``step_length``; None without ``reference``). ``terminal``: the weight on the window's last state;
    None solves :func:`mechnode.logic.gains.terminal_weight` at the prediction's last step (a DARE,
    about 1 ms for 14 states); a caller that re-plans one schedule many times passes the one
    it solved once (:func:`terminal_for`). ``reference``: the schedule made from the reference
    (the same knots), whose trajectory the Gauss-Newton step tracks; None re-solves the gains
    only. Raises core's errors if the prediction fails (a step that does not solve, a singular
    linearization)."""
    if schedule.convention != STATE_Q_P:
        raise ValueError("re-planning needs a schedule in [q, p, v] (GainSchedule.STATE_Q_P)")
    if reference is not None and (reference.knots != schedule.knots or reference.dt != schedule.dt):
        raise ValueError(f"the reference has {reference.knots} knots at dt {reference.dt}, the schedule "
                         f"{schedule.knots} at dt {schedule.dt}: not the same time base")
    k0, H = window(schedule, t, horizon)
    if H == 0:
        return None
    t0 = time.perf_counter()
    rows = slice(k0, k0 + H)
    X, U, A, B = plant.vi.closed_loop(x, schedule.x_ref[rows], schedule.u_ref[rows], schedule.K[rows])
    t1 = time.perf_counter()
    Q_N, note = terminal_weight(A, B, weights) if terminal is None else (terminal, "given")
    if reference is None:
        K, _ = core.tvlqr(A, B, weights.Q, weights.R, Q_N)
    else:
        K, kff, _, _ = core.tracking_step(A, B, X, U, reference.x_ref[k0:k0 + H + 1], reference.u_ref[rows],
                                          weights.Q, weights.R, Q_N)
        X, U, step = _stepped_plan(plant, x, X, U, kff, K)
    t2 = time.perf_counter()
    x_ref, u_ref, gains = schedule.x_ref.copy(), schedule.u_ref.copy(), schedule.K.copy()
    x_ref[rows], u_ref[rows], gains[rows] = X[:H], U, K
    info = dict(schedule.info, replan_knot=k0, replan_steps=H, closed_loop_s=t1 - t0,
                riccati_s=t2 - t1, terminal_weight=note, step_length=step if reference is not None else None)
    return replace(schedule, x_ref=x_ref, u_ref=u_ref, K=gains, info=info)


def _stepped_plan(plant, x, X, U, kff, K):
    """The closed loop from ``x`` of the stepped law ``u_j = U[j] + a kff[j] - K[j] (x_j - X[j])``
    and the step length ``a``: 1, else halved (twice) while the loop does not solve (a step
    too long for the nonlinear dynamics); 0 keeps the prediction."""
    H = U.shape[0]
    for a in (1.0, 0.5, 0.25):
        try:
            Xs, Us, _, _ = plant.vi.closed_loop(x, X[:H], U + a * kff, K, linearize=False)
            return Xs, Us, a
        except core.CoreError:
            continue
    return X, U, 0.0


def terminal_for(plant, schedule: Schedule, weights: Weights):
    """The terminal weight for re-plans of ``schedule``: :func:`mechnode.logic.gains.terminal_weight` at
    the reference's last step (the given ``Q_N``, else the DARE solution there)."""
    # (writable copies: a schedule's arrays are read-only, and the integrator's compiled entry
    # takes writable vectors; anything else goes the checked way, which compiles more kernels)
    A, B = plant.vi.linearize(np.array(schedule.x_ref[-2]), np.array(schedule.u_ref[-2]))
    return terminal_weight(A[None], B[None], weights)[0]
