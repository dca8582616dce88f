"""Legged robots in the node (ROS-free): the floating-base state from a state estimator, the
balance law about a stance, and the check that no contact would have to pull.

* **Contacts** come from the ``contacts`` parameter, one entry per contact: ``frame`` (a point
  contact) or ``frame=point`` / ``frame=frame`` (a flat foot, a hand on a handle:
  :meth:`core.System.add_contact`); :func:`parse_contacts`.
* **State.** The base pose and twist come as a ``nav_msgs/Odometry`` (REP 105): the pose of
  ``child_frame_id`` (the base) in ``header.frame_id`` (the world), the twist in
  ``child_frame_id``. That twist is exactly the model's base velocity (:mod:`core.conventions`:
  the base's spatial velocity in its own frame), so :func:`base_state` only checks and
  normalizes: ``q = [position, quaternion (x, y, z, w), joints]``, ``v = [linear, angular,
  joint rates]``.
* **Balance.** :func:`balance_hold` is the law that holds the robot standing where it is:
  :func:`core.standing` at the measured configuration (the contacts anchored where they are;
  the holding torques and the contact forces of minimum norm) and :func:`core.balance_lqr`'s
  gain for the node's period ``dt`` (the discrete LQR of the exact zero-order-hold pair on the
  independent coordinates, mapped back to the full tangent state). It is a one-knot
  :class:`~mechnode.logic.gains.Schedule` in the convention :data:`STATE_TANGENT`:
  ``x_ref = [q_ref (nq), v_ref (nv)]``, ``K`` (nu, 2 nv) acting on ``[q ⊖ q_ref, v - v_ref]``
  (:meth:`core.System.difference`), ``u = u_ref - K [q ⊖ q_ref; v - v_ref]``
  (:meth:`~mechnode.logic.gains.Schedule.command`). The inputs are the actuated joints' efforts
  only, never the base.
* **The plant.** :class:`LeggedPlant` is the node's model of such a robot: the URDF on a
  quaternion base with its contacts, under the names the command path uses (the joints, the
  inputs, the tangent state), in place of the integrator's :class:`~mechnode.logic.plant.Plant`.
* **Contact check.** :func:`pulling_contacts` solves the model's contact forces for a state and
  a command and names every contact whose normal force (on the world z axis: flat, level
  ground) is below ``-tolerance``: a command that would need the ground to pull, which a real
  foot cannot, to be reported rather than silently sent.
"""
from __future__ import annotations

import math
import time

import numpy as np

import core
from mechnode.errors import InputError
from mechnode.logic.gains import STATE_TANGENT, HoldError, Schedule
from mechnode.logic.plant import ModelSpecError, read_model_text, system_from_text

#: Most entries of the ``contacts`` parameter, and longest entry (characters).
MAX_CONTACTS, MAX_CONTACT_ENTRY = 64, 256
#: How far a quaternion's norm may be from 1 and still be normalized (an estimator's rounding).
QUATERNION_TOLERANCE = 1e-3
#: Normal force (N) below which a contact is reported as pulling.
PULL_TOLERANCE = 1e-6


def parse_contacts(entries) -> list:
    """``["frame", "frame=point", "frame=frame", ...]`` (the ``contacts`` parameter) ->
    ``[(frame, kind), ...]``; an :class:`InputError` naming a malformed entry (bounded:
    :data:`MAX_CONTACTS` entries of at most :data:`MAX_CONTACT_ENTRY` characters, checked
    before anything is parsed)."""
    entries = list(entries or ())
    if len(entries) > MAX_CONTACTS:
        raise InputError(f"contacts has {len(entries)} entries, more than {MAX_CONTACTS}")
    out, seen = [], set()
    for e in entries:
        if not isinstance(e, str) or len(e) > MAX_CONTACT_ENTRY or e.count("=") > 1:
            shown = e if not isinstance(e, str) or len(e) <= 60 else e[:60] + "..."
            raise InputError(f"contacts entry {shown!r} must be 'frame' or 'frame=point|frame' (at most "
                             f"{MAX_CONTACT_ENTRY} characters)")
        frame, _, kind = (x.strip() for x in e.partition("="))
        kind = kind or "point"
        if not frame or kind not in ("point", "frame"):
            raise InputError(f"contacts entry {e!r}: expected 'frame' or 'frame=point|frame'")
        if frame in seen:
            raise InputError(f"contacts names frame {frame!r} twice")
        seen.add(frame)
        out.append((frame, kind))
    return out


def _vector(name: str, value, size: int) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if a.shape != (size,):
        raise InputError(f"{name} must have {size} entries, got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise InputError(f"{name}[{bad[0]}] = {a[bad[0]]} is not finite")
    return a


def base_state(position, orientation, linear, angular) -> tuple[np.ndarray, np.ndarray]:
    """The base's part of ``(q, v)`` from an odometry (the module docstring): ``position``
    (x, y, z) and ``orientation`` (x, y, z, w) of the base in the world, ``linear`` and
    ``angular`` velocity on the base's axes. A quaternion within :data:`QUATERNION_TOLERANCE` of
    unit norm is normalized; anything else (or a non-finite entry) is an :class:`InputError`
    naming the field and its value."""
    p = _vector("odometry position", position, 3)
    quat = _vector("odometry orientation (x, y, z, w)", orientation, 4)
    norm = float(np.linalg.norm(quat))
    if not abs(norm - 1.0) <= QUATERNION_TOLERANCE:
        raise InputError(f"odometry orientation (x, y, z, w) = {quat.tolist()} has norm {norm:.6g}, not 1 "
                         f"(within {QUATERNION_TOLERANCE:g})")
    v = np.r_[_vector("odometry linear velocity", linear, 3), _vector("odometry angular velocity", angular, 3)]
    return np.r_[p, quat / norm], v


def balance_hold(system, q, Q, R, dt: float, joint_names=()) -> Schedule:
    """The law that holds the robot standing at the measured configuration ``q`` (the module
    docstring), a one-knot :class:`Schedule` in :data:`STATE_TANGENT`; ``Q`` (2 nv square, on
    ``[q ⊖ q_ref, v]``) and ``R`` (nu square) the LQR weights, ``dt`` the command period.

    Raises :class:`HoldError` with the library's reason: not a floating base with contacts, a
    posture that cannot stand (the centre of mass outside the support polygon, the weight not
    held: :func:`core.standing`'s numbers), directions the inputs cannot move
    (:func:`core.balance_lqr`), anything non-finite."""
    if not system.free_flyer or not system.contacts:
        raise HoldError("balance needs a floating base (floating_base: quaternion) and contacts")
    try:
        stance = core.standing(system, q)
        gain = core.balance_lqr(system, stance.q, stance.u, Q, R, dt=dt)
    except (core.CoreError, np.linalg.LinAlgError, ValueError, ArithmeticError) as exc:
        raise HoldError(str(exc)) from None
    radius = float(np.abs(gain.eigenvalues).max())
    if not (np.all(np.isfinite(gain.K)) and np.all(np.isfinite(stance.u)) and radius < 1.0):
        raise HoldError(f"the balance gain is not finite or not stabilizing (spectral radius {radius:.6g})")
    nv = system.nv
    x_ref = np.r_[stance.q, np.zeros(nv)]
    state_names = tuple(f"d_{name}" for name in system.velocity_names) + tuple(system.velocity_names)
    info = {"kind": "balance", "knots": 1, "spectral_radius": radius,
            "contact_wrenches": stance.wrenches.tolist(), "independent_state": list(gain.state_names)}
    return Schedule(float(dt), np.zeros(1), x_ref[None], stance.u[None].copy(), gain.K[None].copy(),
                    state_names, tuple(system.input_names), tuple(joint_names), STATE_TANGENT, info)


def contact_normals(system, q, v, u, anchors=None) -> np.ndarray:
    """The model's normal force (N, world z) on each contact, in the order of
    ``system.contacts``, for the state ``(q, v)`` under the inputs ``u``."""
    lam = system.constraint_forces(q, v, u, anchors=anchors)
    size = {"point": 3, "frame": 6}
    start = lam.size - sum(size[kind] for _, kind, _ in system.contacts)
    out, row = [], start
    for _, kind, _ in system.contacts:
        out.append(lam[row + 2])
        row += size[kind]
    return np.array(out)


def pulling_contacts(system, q, v, u, anchors=None, tolerance: float = PULL_TOLERANCE) -> list:
    """``[(frame, normal force), ...]`` of the contacts the command ``u`` at ``(q, v)`` would
    need to pull (normal force below ``-tolerance``; the module docstring)."""
    normals = contact_normals(system, q, v, u, anchors)
    return [(frame, float(f)) for (frame, _, _), f in zip(system.contacts, normals, strict=True)
            if math.isfinite(f) and f < -tolerance]


class LeggedPlant:
    """The node's model of a robot on a quaternion floating base held by contacts (the module
    docstring): ``system`` (a :class:`core.System` loaded from a URDF with
    ``floating_base="quaternion"`` and ``contacts``), the command period ``dt``, and the names
    and sizes the command path uses in place of the integrator's
    (:class:`~mechnode.logic.plant.Plant`):

    * ``config_names``: the joints (what a ``JointState`` carries; the base comes from an
      odometry), ``n`` = ``nq`` and ``nv`` the model's sizes;
    * ``nx = 2 nv`` (the tangent state ``[q ⊖ q_ref, v - v_ref]``), ``nu = m`` the actuated
      joints' efforts (``input_names``), no kinematic variables.

    Thread safety: as :class:`~mechnode.logic.plant.Plant` (core's kernels use the calling
    thread's scratch).
    """

    floating = True
    nk = 0
    kin = np.zeros(0, dtype=np.int64)
    fully_actuated = False
    has_constraints = True

    def __init__(self, system, dt: float, source: str = "", text: str | None = None, locked=None, contacts=()):
        if not system.free_flyer:
            raise ModelSpecError(f"model {source}: floating_base 'quaternion' gave no floating base")
        if not system.contacts:
            raise ModelSpecError(f"model {source}: a floating base needs contacts (the parameter contacts: the "
                                 "frames the robot stands on, e.g. its feet)")
        self.system, self.source, self.text = system, source, text
        self.locked, self.contacts = dict(locked or {}), list(contacts)
        self.dt = float(dt)

    @classmethod
    def load(cls, spec: str, dt: float, contacts=(), locked=None) -> "LeggedPlant":
        """The plant of a model parameter value (a URDF file or text) at ``dt``, with
        ``contacts`` (``[(frame, kind), ...]``, :func:`parse_contacts`)."""
        text, origin = read_model_text(spec)
        return cls.from_text(text, dt, origin, locked, contacts)

    @classmethod
    def from_text(cls, text: str, dt: float, source: str = "model text", locked=None, contacts=()) -> "LeggedPlant":
        """The plant of a URDF's text at ``dt`` with ``contacts``; a :class:`ModelSpecError`
        with core's reason (an unknown frame, a contact on the world, redundant contacts)."""
        contacts = list(contacts)
        if not contacts:
            raise ModelSpecError(f"model {source}: a floating base needs contacts (the parameter contacts: the "
                                 "frames the robot stands on, e.g. its feet)")
        spec = [{"frame": frame, "kind": kind} for frame, kind in contacts]
        system = system_from_text(text, source, locked, floating_base="quaternion", contacts=spec)
        return cls(system, dt, source, text, locked, contacts)

    def with_dt(self, dt: float) -> "LeggedPlant":
        """The same system with another command period."""
        return self if float(dt) == self.dt else LeggedPlant(self.system, dt, self.source, self.text,
                                                             self.locked, self.contacts)

    # ------------------------------------------------------------------ sizes and names
    n = property(lambda self: self.system.nq, doc="configuration size nq (base pose and joints)")
    nv = property(lambda self: self.system.nv, doc="velocity size nv")
    nd = property(lambda self: self.system.nv, doc="dynamic variables: every velocity")
    m = property(lambda self: self.system.nu, doc="number of force inputs (the actuated joints)")
    nu = property(lambda self: self.system.nu, doc="command size (the force inputs)")
    nx = property(lambda self: 2 * self.system.nv, doc="tangent state size 2 nv")
    model = property(lambda self: self.system.model)
    config_names = property(lambda self: list(self.system.velocity_names[6:]),
                            doc="the joints a JointState carries (the base comes from an odometry)")
    dynamic_names = property(lambda self: list(self.system.velocity_names[6:]),
                             doc="the joints (GetModel's dynamic_config_names)")
    kinematic_names: list = []
    base_names = property(lambda self: list(self.system.config_names[:7]), doc="the base pose's coordinates")
    mimic_names = property(lambda self: list(self.system.mimic_joints))
    locked_names = property(lambda self: list(self.system.locked_joints))
    follower_names = property(lambda self: self.mimic_names + self.locked_names)
    force_input_names = property(lambda self: list(self.system.input_names))
    input_names = property(lambda self: list(self.system.input_names))
    state_names = property(lambda self: [f"d_{name}" for name in self.system.velocity_names]
                           + list(self.system.velocity_names), doc="the tangent state [q ⊖ q_ref, v]")
    continuous_state_names = state_names
    actuation = property(lambda self: "floating base on contacts "
                         + ", ".join(f"{frame} ({kind})" for frame, kind in self.contacts))

    # ------------------------------------------------------------------ checks and warm-up
    def check_size(self, max_variables: int) -> None:
        """As :meth:`mechnode.logic.plant.Plant.check_size`."""
        if self.n > max_variables:
            raise ModelSpecError(f"model {self.source}: {self.n} configuration variables, more than "
                                 f"max_model_variables = {max_variables}")

    def check_regular(self) -> None:
        """Nothing to check before a state is known: the posture is checked when the balance law
        is computed (:func:`balance_hold`)."""

    def warm_up(self, *args, **kwargs) -> float:
        """Run the balance computations once at the neutral posture lowered onto its contacts
        (loads or compiles their kernels; a posture that cannot stand is fine here); the
        seconds it took. :attr:`compiled_kernels` is 0 (counted by core's warm-up only)."""
        t0 = time.perf_counter()
        self.compiled_kernels = 0
        q = self.system.neutral()
        try:
            hold = balance_hold(self.system, q, np.eye(self.nx), np.eye(self.nu), self.dt)
            hold.command(self, 0.0, q, np.zeros(self.nv))
            contact_normals(self.system, q, np.zeros(self.nv), hold.u_ref[0])
        except (HoldError, core.CoreError, ValueError, ArithmeticError, np.linalg.LinAlgError):
            contact_normals(self.system, q, np.zeros(self.nv), np.zeros(self.nu))
        return time.perf_counter() - t0

    @staticmethod
    def start_warm_up(stderr=None):
        """No background compilation (:meth:`warm_up` runs the kernels it needs)."""
        return None

    @staticmethod
    def warm_up_rest(stderr=None):
        """No background compilation."""
        return None
