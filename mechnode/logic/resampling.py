"""References in model order and their resampling onto the integrator's time step (ROS-free).

:meth:`Reference.check` validates the points (finite, strictly increasing times, at least one
step long, at most ``max_knots`` knots); :func:`resample` evaluates the interpolant at the knots
``t_k = t_first + k dt`` up to the last point: a cubic Hermite spline through the given
velocities, PCHIP without them, a straight line for two points.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.interpolate

import core
from mechnode.errors import InputError


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
        big = core.validation.too_large((("positions", self.positions, None),
                         ("velocities", () if self.velocities is None else self.velocities, None)))
        if big is not None:     # (an interpolant of such points overflows to inf)
            raise InputError(f"reference {big}; indices are [point, variable in model order]")
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
