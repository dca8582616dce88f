"""What the command path accepts and what it may send (ROS-free): state bounds per joint, the
freshness of state stamps, and command saturation per input.

* A JointState whose |position| or |velocity| of a joint exceeds its bound is refused like a
  NaN state (:meth:`Limits.check_state`). The bounds are the parameters
  ``state_position_limit`` and ``state_velocity_limit`` (one number for all joints or one per
  configuration variable): they say which numbers are plausible readings, not where the joint
  may go. A model's joint limits (URDF ``<limit lower upper velocity>``) are not used here: a
  robot at or just past a soft limit must still be commanded, and a refused state stops the
  commands (the watchdog then sends zeros: an arm would fall). GetModel reports them.
* A state stamp is refused when it is zero (unless ``accept_unstamped``), negative, more than
  ``stamp_tolerance`` ahead of the node's clock, older than ``state_timeout``, or older than the
  last accepted state's stamp (:meth:`Limits.check_stamp`).
* Commands saturate to ``+-command_limit`` per force input, or to the model's effort limit
  of the joint the input drives where that is smaller (URDF ``<limit effort>``;
  :func:`model_effort_limits`) (:meth:`Limits.saturate`). In
  ``command_mode: full`` the integrator input also holds the next values of the kinematic
  variables (positions): they saturate to those variables' position bounds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechnode.errors import InputError

DEFAULT_POSITION_LIMIT = 1e3     # m or rad
DEFAULT_VELOCITY_LIMIT = 1e3     # m/s or rad/s
DEFAULT_COMMAND_LIMIT = 1e3      # N or N m
DEFAULT_STAMP_TOLERANCE = 0.05   # s

#: the kinds of refused stamps, each counted in the diagnostics as ``states_stamp_<kind>``
STAMP_KINDS = ("zero", "negative", "future", "stale", "out_of_order")


class StampError(InputError):
    """A state stamp that is refused; ``kind`` is one of :data:`STAMP_KINDS`."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def limit_values(value, name: str) -> np.ndarray:
    """A limit parameter (a number or a list of numbers) as a vector of positive finite values;
    raises InputError naming the first bad entry."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"{name} must be a number or a list of numbers, got {value!r}")
    try:
        v = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number or a list of numbers, got {value!r}") from None
    if v.ndim != 1 or v.size == 0:
        raise InputError(f"{name} must be a number or a non-empty list of numbers, got {value!r}")
    bad = np.flatnonzero(~(np.isfinite(v) & (v > 0)))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{name}[{i}] = {float(v[i])!r}: limits must be finite and > 0")
    return v


def per_entry(value, name: str, labels) -> np.ndarray:
    """A limit parameter spread over ``labels``: one value for all or one per label."""
    v = limit_values(value, name)
    n = len(labels)
    if v.size == 1:
        return np.full(n, v[0])
    if v.size != n:
        raise InputError(f"{name} needs 1 value or {n} (one per {', '.join(labels)}), got {v.size}")
    return v


def model_effort_limits(plant) -> np.ndarray:
    """The model's effort limit of each force input (``core.System.effort_limits``), ``inf``
    where it has none. A limit of 0 (URDFs write ``effort="0"`` for "not given") counts as none:
    it would saturate every command to zero."""
    effort = np.asarray(plant.system.effort_limits, dtype=float)
    return np.where(effort > 0, effort, np.inf)


@dataclass(frozen=True)
class Limits:
    """Bounds in model order (see the module docstring); built per activation."""
    joint_names: tuple          # per configuration variable, for messages
    position: np.ndarray        # n
    velocity: np.ndarray        # n
    command: np.ndarray         # nu: force inputs, then positions of the kinematic variables
    input_names: tuple          # nu
    state_timeout: float        # s
    stamp_tolerance: float      # s
    accept_unstamped: bool

    @classmethod
    def for_plant(cls, plant, joint_names, position, velocity, command, state_timeout,
                  stamp_tolerance, accept_unstamped) -> "Limits":
        config = plant.config_names
        pos = per_entry(position, "state_position_limit", config)
        forces = np.minimum(per_entry(command, "command_limit", plant.force_input_names), model_effort_limits(plant))
        return cls(tuple(joint_names), pos, per_entry(velocity, "state_velocity_limit", config),
                   np.concatenate([forces, pos[np.asarray(plant.kin, dtype=np.int64)]]), tuple(plant.input_names),
                   float(state_timeout), float(stamp_tolerance), bool(accept_unstamped))

    # ------------------------------------------------------------------ states
    def check_state(self, q, dq) -> None:
        """Raise InputError naming the first joint whose position or velocity is out of bounds."""
        if (np.abs(q) <= self.position).all() and (np.abs(dq) <= self.velocity).all():
            return
        for what, values, bound, param in (("position", q, self.position, "state_position_limit"),
                                           ("velocity", dq, self.velocity, "state_velocity_limit")):
            bad = np.flatnonzero(~(np.abs(values) <= bound))
            if bad.size:
                i = int(bad[0])
                raise InputError(f"{what} of joint {self.joint_names[i]!r} is {values[i]:.6g}, "
                                 f"outside +-{bound[i]:.6g} ({param})")

    def check_stamp(self, stamp_ns: int, now_ns: int, last_ns: int | None) -> int:
        """The time (ns) to use for a state stamped ``stamp_ns`` received at ``now_ns`` (node
        clock) after the last accepted stamp ``last_ns``; raises :class:`StampError`."""
        if stamp_ns == 0:
            if self.accept_unstamped:
                return now_ns
            raise StampError("zero", "zero stamp (unstamped state; parameter accept_unstamped "
                                     "is false)")
        if stamp_ns < 0:
            raise StampError("negative", f"negative stamp {stamp_ns * 1e-9:.9f} s")
        ahead = (stamp_ns - now_ns) * 1e-9
        if ahead > self.stamp_tolerance:
            raise StampError("future", f"stamp {ahead:.6f} s ahead of the node's clock "
                                       f"(stamp_tolerance {self.stamp_tolerance} s)")
        if -ahead > self.state_timeout:
            raise StampError("stale", f"stamp {-ahead:.6f} s old (state_timeout "
                                      f"{self.state_timeout} s)")
        if last_ns is not None and stamp_ns < last_ns:
            raise StampError("out_of_order", f"stamp {(last_ns - stamp_ns) * 1e-9:.6f} s older "
                                             "than the last accepted state's")
        return stamp_ns

    # ------------------------------------------------------------------ commands
    def saturate(self, u) -> tuple:
        """``(u clipped to +-limit, number of entries clipped)``; ``u`` is the force inputs or
        the whole integrator input."""
        lim = self.command[:u.size]
        if (np.abs(u) <= lim).all():
            return u, 0
        clipped = np.clip(u, -lim, lim)
        return clipped, int(np.count_nonzero(clipped != u))
