"""The description of a system: what the robot is, element by element, each checked when added.

:class:`Description` holds the elements of a :class:`core.System` by name, as the user gave them:
frames (a tree under the fixed ``world`` frame, each placed by an offset and one simple
transform), holonomic and velocity constraints, springs, damping, dampers between frames,
constant wrenches, inputs, coupled (mimic) variables, rotor inertias, locks, kinematic
variables, joint limits and a quaternion free-flyer. Each ``add_*``/``set_*``/``lock`` method
checks what its element says by itself (keys, numbers, axes: the element kind's ``check_*`` of
:mod:`core.model.compile`) and marks the compiled model stale; what an element refers to
(frames, variables, by name, which may be added later) is resolved when the system compiles
(:func:`core.model.compile.compile_system`). The builders return the system, so calls chain.

A new kind of element goes here (its builder) and in :mod:`core.model.compile` (its check and its
rows of the compiled :class:`~core.model.record.Model`); its kernels go in :mod:`core.tree`.
:class:`core.System` is this description with the compile step and the numeric methods
(:mod:`core.continuous.evaluation`) on top.
"""
from __future__ import annotations

import math
from typing import Self

import numpy as np

from core.errors import ModelError
from core.model.compile import (
    TRANSFORM_KINDS,
    as_inertia,
    as_number,
    as_numbers,
    as_rotation,
    check_constraint,
    check_damper,
    check_input,
    check_spring,
    check_velocity_constraint,
    check_wrench,
)
from core.model.inertia import check_policy
from core.model.record import WORLD, Model


class Description:
    """The elements of a system by name, each checked when added (the module docstring).

    Parameters
    ----------
    gravity : array_like, shape (3,)
        The gravitational acceleration in world coordinates (m/s², default ``(0, 0, -9.81)``).
    name : str
        The system's name (shown by ``repr``).
    inertia : {"warn", "strict", "repair"}
        The inertia policy of :meth:`add_frame` (:mod:`core.model.inertia`), kept as
        :attr:`inertia_policy`.

    Raises
    ------
    ModelError
        ``gravity`` is not three finite numbers, or ``inertia`` is not one of the policies.
    """

    def __init__(self, gravity=(0.0, 0.0, -9.81), name: str = "system", *, inertia: str = "warn"):
        self.name = name
        #: the inertia policy of :meth:`add_frame` (:mod:`core.model.inertia`): ``"warn"``, ``"strict"``
        #: or ``"repair"``
        self.inertia_policy = check_policy(inertia)
        g = as_numbers(gravity, "gravity")
        self.gravity = np.array([as_number(v, f"gravity[{i}]") for i, v in enumerate(g)]) \
            if g.shape == (3,) else self._bad_gravity(gravity)
        self._frames: list[dict] = []
        self._constraints: list[dict] = []
        self._velocity_constraints: list[dict] = []
        self._contacts: list[dict] = []
        self._springs: list[dict] = []
        self._damping: dict[str, float] = {}
        self._wrenches: list[dict] = []
        self._dampers: list[dict] = []
        self._inputs: list[dict] = []
        self._kinematic: list[str] = []
        self._extra_configs: list[str] = []
        self._mimic: dict[str, tuple[str, float, float]] = {}
        self._locked: dict[str, float] = {}
        self._armature: dict[str, float] = {}
        self._free_flyer: tuple[str, str] | None = None     # (frame, prefix): a quaternion base
        self._limits: dict[str, dict[str, float]] = {}
        #: the compiled model, None while stale: every builder resets it (set by ``System.compile``)
        self._model: Model | None = None
        #: URDF links -> (frame, R, p): the frame each link moves with and its placement in it
        #: (set by :func:`core.load_urdf`; empty otherwise)
        self.links: dict[str, tuple] = {}

    @staticmethod
    def _bad_gravity(gravity):
        raise ModelError(f"gravity must be [gx, gy, gz], got {gravity!r}")

    # ----------------------------------------------------------------------------- elements
    def add_frame(self, name: str, parent: str = WORLD, mass: float = 0.0, inertia=None,
                  offset: dict | None = None, com=None, **transform) -> Self:
        """Add a frame: ``add_frame("A", parent="link1", ty=-1.0, mass=1.0)``.

        The frame is placed relative to its parent by ``offset`` followed by its one transform,
        ``g_parent,frame = G_offset · X_kind(value)`` (the module docstring), and carries a rigid
        body.

        Parameters
        ----------
        name : str
            A new, non-empty frame name other than ``"world"``.
        parent : str
            The parent frame (default ``"world"``); checked when the system compiles (an unknown
            parent or a cycle is a :class:`ModelError`).
        mass : float
            The body's mass (kg, finite, >= 0; default 0: a massless frame).
        inertia : array_like, shape (3,) or (3, 3), optional
            ``[Ixx, Iyy, Izz]`` or a finite, symmetric 3x3 matrix about the centre of mass, along
            the frame's axes (kg m²; default zero), checked under :attr:`inertia_policy`.
        offset : dict, optional
            ``{"translation": [x, y, z], "rotation": [r, p, y] or 3x3}`` applied before the
            transform (``rpy``: about the fixed axes x, then y, then z; a matrix must be a proper
            rotation).
        com : array_like, shape (3,), optional
            The centre of mass ``[x, y, z]`` in frame coordinates (default the frame's origin).
        **transform : float or str
            At most one of ``tx, ty, tz, rx, ry, rz`` (translation along or rotation about the
            offset frame's x, y or z axis) whose value is a number (a constant transform) or the
            name of the configuration variable that drives it (a variable drives one frame only);
            none: a constant frame.

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            A name that is empty, ``"world"`` or taken; an unknown transform key or more than one
            transform; a non-finite transform value, an empty variable name or a variable that
            already drives a frame; a malformed offset; a negative or non-finite mass; a malformed
            or non-symmetric inertia (or, under ``"strict"``, one that is not physical); a ``com``
            that is not three finite numbers.

        Warns
        -----
        InertiaWarning
            An inertia that is not physical, under the ``"warn"`` (loaded as written) and
            ``"repair"`` (replaced by the nearest physical one) policies.
        """
        where = f"frame {name!r}"
        if not isinstance(name, str) or not name:
            raise ModelError(f"frame name must be a non-empty string, got {name!r}")
        if name == WORLD:
            raise ModelError("frame name 'world' is reserved for the fixed root frame")
        if any(f["name"] == name for f in self._frames):
            raise ModelError(f"{where}: duplicate frame name")
        unknown = [k for k in transform if k not in TRANSFORM_KINDS]
        if unknown:
            raise ModelError(f"{where}: unknown key(s) {unknown}; transforms are tx, ty, tz, rx, ry, rz")
        if len(transform) > 1:
            raise ModelError(f"{where}: a frame has exactly one transform, got {sorted(transform)}")
        kind, value = (next(iter(transform.items())) if transform else (None, 0.0))
        if kind is not None and not isinstance(value, str):
            value = as_number(value, f"{where}.{kind}")
        if isinstance(value, str):
            if not value:
                raise ModelError(f"{where}: configuration variable name must be non-empty")
            for f in self._frames:
                if f["value"] == value:
                    raise ModelError(f"{where}: configuration variable {value!r} already drives "
                                     f"frame {f['name']!r}; each variable drives one frame")
        off_R, off_p = np.eye(3), np.zeros(3)
        if offset is not None:
            if not isinstance(offset, dict) or set(offset) - {"translation", "rotation"}:
                raise ModelError(f"{where}: offset must be {{translation: [x,y,z], rotation: rpy or 3x3}}")
            if "translation" in offset:
                off_p = as_numbers(offset["translation"], f"{where}.offset.translation")
                if off_p.shape != (3,) or not np.all(np.isfinite(off_p)):
                    raise ModelError(f"{where}: offset translation must be 3 finite numbers, "
                                     f"got {offset['translation']!r}")
            if "rotation" in offset:
                off_R = as_rotation(offset["rotation"], f"{where}.offset.rotation")
        mass = as_number(mass, f"{where}.mass", nonnegative=True)
        I = as_inertia(inertia, f"{where}.inertia", self.inertia_policy) if inertia is not None else np.zeros((3, 3))
        c = np.zeros(3)
        if com is not None:
            c = as_numbers(com, f"{where}.com")
            if c.shape != (3,) or not np.all(np.isfinite(c)):
                raise ModelError(f"{where}: com must be 3 finite numbers [x, y, z], got {com!r}")
        self._frames.append(dict(name=name, parent=parent, kind=kind, value=value, mass=mass,
                                 inertia=I, com=c, offset_R=off_R, offset_p=off_p))
        self._model = None
        return self

    def add_constraint(self, type: str, **kw) -> Self:
        """Add a constraint of kind ``type``, described by the keywords ``kw``.

        * ``distance``: ``frame1, frame2, distance`` (a number >= 0, or a variable name: one that
          drives no frame becomes a configuration variable, e.g. a string length); h = |p1 - p2|^2 -
          d^2.
        * ``plane``: ``frame``, ``plane_frame`` (default world), ``normal`` (x/y/z axis of the plane
          frame, default z, or any nonzero vector ``[nx, ny, nz]`` in its coordinates, normalized),
          ``offset`` (default 0); h = n . (p - p_plane) - offset. A vector normal adds a massless
          constant frame ``<plane_frame>@plane<i>`` (its z axis along n) under the plane frame.
        * ``coincide``: ``frame1, frame2, axes`` (world axes, e.g. [x, y]; default all three); h =
          (p1 - p2)_axis, one row per axis.
        * ``velocity``: ``frame, axis``: the frame's origin has zero velocity along that frame's
          axis (knife edge, skate); continuous dynamics only.

        Parameters
        ----------
        type : {"distance", "plane", "coincide", "velocity"}
            The kind of constraint.
        **kw
            Its keywords, as listed (every kind also takes a ``name``).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            Naming the constraint, when added: an unknown ``type``, unknown or missing keys, a
            negative or non-finite distance, a non-finite offset, an axis that is none of x, y, z, a
            normal that is neither an axis nor a nonzero finite vector, ``axes`` that is not a
            non-empty list, a velocity constraint on the world frame. When the system compiles:
            unknown frames; constraints with a quaternion base (:meth:`set_free_flyer`), velocity
            constraints with coupled (mimic) variables.
        """
        entry = dict(kw, type=type)
        if type not in ("distance", "plane", "coincide", "velocity"):
            raise ModelError(f"constraint {len(self._constraints)}: unknown type {type!r} "
                             "(distance, plane, coincide, velocity)")
        if type == "velocity":
            check_velocity_constraint(entry, len(self._velocity_constraints))
            self._velocity_constraints.append(entry)
        else:
            check_constraint(entry, len(self._constraints))
            self._constraints.append(entry)
        self._model = None
        return self

    def add_contact(self, frame: str, kind: str = "point", name: str | None = None) -> Self:
        """Hold ``frame`` where it is: a contact with the ground or a handle.

        * ``"point"``: the frame's origin keeps its place in the world (3 rows, a point foot);
        * ``"frame"``: its whole pose does (6 rows, a flat foot or a hand on a handle).

        The anchor is where the frame is at the configuration of each evaluation (a contact
        constrains motion, not a pre-set world point); the derivatives hold it there. Pass
        ``anchors=`` (:meth:`contact_anchors` of another configuration) to the numeric methods to
        hold the contacts elsewhere. The conventions (rows, multipliers, wrenches) are in
        :mod:`core.continuous.contacts`. Works on fixed bases and on a quaternion base
        (:meth:`set_free_flyer`).

        Parameters
        ----------
        frame : str
            A frame of the system, or a URDF link (:attr:`links`): the frame it moves with, at the
            link's placement.
        kind : {"point", "frame"}
            What the contact holds.
        name : str, optional
            The contact's name (default ``frame``), unique.

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            Naming the contact, when added: a ``frame`` that is not a non-empty string or is the
            world, an unknown ``kind``, a name taken. When the system compiles: an unknown frame, a
            frame fixed to the world, two contacts on one rigid body (redundant rows).
        """
        where = f"contact {len(self._contacts)}"
        if not isinstance(frame, str) or not frame:
            raise ModelError(f"{where}: expected a frame name, got {frame!r}")
        if frame == WORLD:
            raise ModelError(f"{where}: the world frame cannot be held (it does not move)")
        if kind not in ("point", "frame"):
            raise ModelError(f"{where} on {frame!r}: unknown kind {kind!r} (point: 3 rows, frame: 6 rows)")
        name = frame if name is None else name
        if not isinstance(name, str) or not name:
            raise ModelError(f"{where} on {frame!r}: expected a name, got {name!r}")
        if any(c["name"] == name for c in self._contacts):
            raise ModelError(f"{where} on {frame!r}: the name {name!r} is taken by another contact")
        self._contacts.append(dict(frame=frame, kind=kind, name=name))
        self._model = None
        return self

    def add_spring(self, type: str = "config", **kw) -> Self:
        """A spring: a potential added to the Lagrangian (L = KE - V).

        * ``config``: ``config, stiffness, rest`` (V = k/2 (q - rest)^2, k >= 0), or
          ``config, polynomial, rest`` with ``polynomial = [c0, c1, ..., cN]`` (lowest order first,
          finite numbers of any sign; trep's ``NonlinearConfigSpring``): the generalized force on
          the variable is ``F = -sum_k c_k d^k`` with ``d = q - rest``, the potential
          ``V = sum_k c_k d^(k+1) / (k+1)``. A positive ``c1`` pulls back toward ``rest`` (the
          linear spring is ``[0, k]``), ``c0`` is a constant force ``-c0``, ``c3 > 0`` a hardening
          cubic term. Give exactly one of ``stiffness`` and ``polynomial``. A spline force law can
          be given as a polynomial fit of it. ``rest`` defaults to 0; a spring on a locked variable
          is dropped (:meth:`lock`).
        * ``frames``: ``frame1, frame2, stiffness, rest_length`` (V = k/2 (|p1 - p2| - rest)^2;
          ``k >= 0``, ``rest_length >= 0``, default 0).

        Parameters
        ----------
        type : {"config", "frames"}
            The kind of spring (default ``"config"``).
        **kw
            Its keywords, as listed (both kinds also take a ``name``).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            Naming the spring, when added: an unknown ``type``, unknown or missing keys, both or
            neither of ``stiffness`` and ``polynomial``, a negative stiffness or rest length, a
            non-finite number. When the system compiles: an unknown variable or frame.
        """
        if type not in ("config", "frames"):
            raise ModelError(f"spring {len(self._springs)}: unknown type {type!r} (config, frames)")
        entry = dict(kw, type=type)
        check_spring(entry, len(self._springs))
        self._springs.append(entry)
        self._model = None
        return self

    def add_damping(self, config: str, coefficient: float) -> Self:
        """Viscous damping on a configuration variable: F = -c dq.

        Given again for the same variable, the coefficient replaces the earlier one; damping on a
        locked variable is dropped (:meth:`lock`).

        Parameters
        ----------
        config : str
            The variable (checked when the system compiles).
        coefficient : float
            ``c >= 0``.

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            A negative or non-finite ``coefficient``; an unknown variable, when the system compiles.
        """
        self._damping[config] = as_number(coefficient, f"damping on {config!r}.coefficient", nonnegative=True)
        self._model = None
        return self

    def add_damper(self, frame1: str, frame2: str, coefficient: float, name: str | None = None) -> Self:
        """A linear damper between the origins of two frames (trep's ``LinearDamper``).

        With ``x = |p1 - p2|`` it pulls along the line between them with the force ``-c xdot``, so
        the generalized force is ``F = -c xdot dx/dq`` (it dissipates the power ``c xdot^2``). Its
        direction is undefined where the origins coincide (an error there).

        Parameters
        ----------
        frame1, frame2 : str
            The two frames.
        coefficient : float
            ``c >= 0`` (N s/m).
        name : str, optional
            Names the damper in error messages.

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            Naming the damper, when added: the same frame twice, a negative or non-finite
            coefficient. When the system compiles: an unknown frame.
        ValueError
            At an evaluation where the origins coincide (``x < 1e-12``).
        """
        entry = dict(frame1=frame1, frame2=frame2, coefficient=coefficient, name=name)
        check_damper(entry, len(self._dampers))
        self._dampers.append(entry)
        self._model = None
        return self

    def add_wrench(self, frame: str, wrench, name: str | None = None) -> Self:
        """A constant wrench at ``frame``, in that frame's coordinates (force through the frame's
        origin, moment), as an input wrench held at these values (trep's wrenches with constant
        components): it moves with the frame, so it is not a potential force. An input wrench on the
        same frame adds to it.

        Parameters
        ----------
        frame : str
            The frame it acts on (not the world).
        wrench : array_like, shape (6,)
            ``[fx, fy, fz, mx, my, mz]`` (N, N m).
        name : str, optional
            Names the wrench in error messages.

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            Naming the wrench, when added: the world frame, or a ``wrench`` that is not six finite
            numbers. When the system compiles: an unknown frame.
        """
        entry = dict(frame=frame, wrench=wrench, name=name)
        check_wrench(entry, len(self._wrenches))
        self._wrenches.append(entry)
        self._model = None
        return self

    def add_input(self, type: str = "torque", name: str | None = None, **kw) -> Self:
        """Add an input; inputs are ordered as added, a wrench expanding to six
        (:attr:`input_names`).

        * ``torque``: generalized force on the variable ``config`` (named ``name``, default
          ``config``); a torque on a locked variable is dropped (:meth:`lock`);
        * ``force``/``moment``: one component (``axis``) of a wrench at ``frame`` in that frame's
          coordinates (named ``name``, default ``<frame>.f<axis>`` or ``<frame>.m<axis>``);
        * ``wrench``: all six, ``<name>.fx, .fy, .fz, .mx, .my, .mz`` (``name`` defaults to
          ``frame``).

        Parameters
        ----------
        type : {"torque", "force", "moment", "wrench"}
            The kind of input (default ``"torque"``).
        name : str, optional
            The input's name, as above.
        **kw
            ``config`` (torque), ``frame`` and ``axis`` (force, moment: x, y or z), ``frame``
            (wrench).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            Naming the input, when added: an unknown ``type``, unknown or missing keys, a wrench on
            the world frame, an axis other than x, y, z. When the system compiles: an unknown
            variable or frame, a torque on a coupled (mimic) variable, two inputs of the same name.
        """
        if type not in ("torque", "force", "moment", "wrench"):
            raise ModelError(f"input {len(self._inputs)}: unknown type {type!r} "
                             "(torque, force, moment, wrench)")
        entry = dict(kw, type=type, name=name)
        check_input(entry, len(self._inputs))
        self._inputs.append(entry)
        self._model = None
        return self

    def add_mimic(self, config: str, leader: str, multiplier: float = 1.0, offset: float = 0.0) -> Self:
        """Couple the variable ``config`` (it drives a frame) to the variable ``leader``: its value
        is ``multiplier * leader + offset`` (a URDF mimic joint). ``config`` is then no
        configuration variable of the system: it has no coordinate, velocity, input or limits, and
        is not in :attr:`config_names`; every derivative is that of the reduced system (exact: the
        coupling is affine). See :attr:`mimic_joints`, :meth:`mimic_positions`.

        Parameters
        ----------
        config : str
            The coupled variable.
        leader : str
            The variable it follows; a leader that is itself coupled (a mimic of a mimic) is
            refused.
        multiplier, offset : float
            Finite numbers (defaults 1 and 0).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            Names that are not non-empty strings, ``config == leader``, a non-finite ``multiplier``
            or ``offset``. When the system compiles: a ``config`` that drives no frame, an unknown
            leader, a leader that is itself coupled, velocity constraints in the system, a torque
            input on ``config`` or ``config`` declared kinematic.
        """
        where = f"mimic {config!r}"
        if not isinstance(config, str) or not config or not isinstance(leader, str) or not leader:
            raise ModelError(f"mimic: expected variable names, got {config!r} and {leader!r}")
        if config == leader:
            raise ModelError(f"{where}: a variable cannot mimic itself")
        self._mimic[config] = (leader, as_number(multiplier, f"{where}.multiplier"),
                               as_number(offset, f"{where}.offset"))
        self._model = None
        return self

    def add_armature(self, config: str, value: float) -> Self:
        """Rotor inertia (armature) of the variable ``config``.

        The kinetic energy gains ``value dq² / 2``, i.e. ``M``'s diagonal entry gains ``value``, in
        every computation and every derivative (Pinocchio's ``model.armature``). A motor behind a
        gear of ratio ``r`` reflects ``r² I_rotor``. On a coupled (mimic) variable it acts on that
        joint's own velocity; on a locked variable it has no effect. Given again, the value replaces
        the earlier one.

        Parameters
        ----------
        config : str
            The variable (checked when the system compiles).
        value : float
            ``value >= 0`` (kg m² for a revolute variable, kg for a prismatic one).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            A name that is not a non-empty string, a negative or non-finite ``value``; an unknown
            variable, when the system compiles.
        """
        if not isinstance(config, str) or not config:
            raise ModelError(f"armature: expected a variable name, got {config!r}")
        self._armature[config] = as_number(value, f"armature of {config!r}", nonnegative=True)
        self._model = None
        return self

    def lock(self, config: str, value: float) -> Self:
        """Freeze the variable ``config`` at ``value`` (Pinocchio's ``buildReducedModel``).

        The frame it drives becomes a constant frame, whose body the compiler folds into its
        parent's exactly, and ``config`` is no configuration variable any more (not in
        :attr:`config_names`, no coordinate, velocity or limits). What acts on the variable alone is
        absorbed by the lock and dropped: its torque inputs, springs, damping and armature. A
        coupled (mimic) variable follows its leader: lock the leader (its mimics are then frozen at
        ``multiplier * value + offset``). A kinematic variable cannot be locked.
        :attr:`locked_joints` lists the locks.

        Parameters
        ----------
        config : str
            The variable (one that drives a frame; checked when the system compiles).
        value : float
            Its frozen value (finite, within its limits if it has any).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            A name that is not a non-empty string, a non-finite ``value``. When the system compiles:
            a variable that drives no frame, a coupled (mimic) variable, a value outside its limits
            (:meth:`set_joint_limits`), a kinematic variable.
        """
        if not isinstance(config, str) or not config:
            raise ModelError(f"lock: expected a variable name, got {config!r}")
        self._locked[config] = as_number(value, f"lock of {config!r}")
        self._model = None
        return self

    def set_free_flyer(self, frame: str, prefix: str | None = None) -> Self:
        """Let the root frame ``frame`` float freely on a quaternion free-flyer (Pinocchio's
        ``JointModelFreeFlyer``).

        Seven coordinates ``<prefix>_x, _y, _z`` (its origin in the world) and
        ``<prefix>_qx, _qy, _qz, _qw`` (its orientation, a unit quaternion), six velocities
        ``<prefix>_vx, _vy, _vz, _wx, _wy, _wz`` (its spatial velocity in its own frame). The
        conventions, and what the linearization means on this configuration space, are in
        :mod:`core.continuous.floating`; :attr:`nv` counts the velocities (``nq = nv + 1``), :meth:`integrate`
        and :meth:`difference` move on it. Every other frame must descend from ``frame`` (the
        dynamics are computed in its frame); constraints other than contacts (:meth:`add_contact`)
        and kinematic variables are refused, as are the integrator (:class:`MidpointVI`) and the
        node (use the Euler chart of :func:`core.load_urdf` there).

        Parameters
        ----------
        frame : str
            A root frame (parent ``world``) without a transform of its own.
        prefix : str, optional
            The prefix of the base's names (default ``frame``).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            ``frame`` or ``prefix`` is not a non-empty string. When the system compiles: an unknown
            frame, one that is not a root without a transform, other frames hanging from the world,
            constraints or kinematic variables, base names taken by other elements.
        """
        if not isinstance(frame, str) or not frame:
            raise ModelError(f"free flyer: expected a frame name, got {frame!r}")
        prefix = frame if prefix is None else prefix
        if not isinstance(prefix, str) or not prefix:
            raise ModelError(f"free flyer: expected a name prefix, got {prefix!r}")
        self._free_flyer = (frame, prefix)
        self._model = None
        return self

    def set_kinematic(self, names) -> Self:
        """Declare configuration variables whose trajectory is prescribed: inputs of the variational
        integrator (next values) and of the continuous dynamics (accelerations), see
        :mod:`core.conventions`.

        Parameters
        ----------
        names : iterable of str
            The variables (replacing an earlier declaration); a name that drives no frame becomes a
            configuration variable, ordered after the others.

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            When the system compiles: a name that is not a non-empty string, a locked or coupled
            (mimic) variable, or any kinematic variable with a quaternion base.
        """
        self._kinematic = list(names)
        self._model = None
        return self

    def set_joint_limits(self, config: str, lower: float = -math.inf, upper: float = math.inf,
                         velocity: float = math.inf, effort: float = math.inf, **extra) -> Self:
        """Record limits of a configuration variable: position ``lower <= q <= upper``,
        ``|dq| <= velocity``, ``|generalized force| <= effort`` (plain data for users and the node;
        the dynamics ignore them; :meth:`lock` checks its value against them). Given again, they
        replace the earlier ones.

        Parameters
        ----------
        config : str
            The variable (checked when :attr:`joint_limits` is read).
        lower, upper : float
            Position limits (default ``-inf``, ``inf``).
        velocity, effort : float
            Limits ``>= 0`` on ``|dq|`` and on the generalized force (default ``inf``).
        **extra : float
            Further numbers kept with them (e.g. URDF ``damping``, ``friction``).

        Returns
        -------
        System
            ``self``, so that calls chain.

        Raises
        ------
        ModelError
            A name that is not a non-empty string, a value that is no number (a boolean is
            none) or NaN, ``lower > upper``, a negative ``velocity`` or ``effort``.
        """
        where = f"limits of {config!r}"
        if not isinstance(config, str) or not config:
            raise ModelError(f"limits: expected a configuration variable name, got {config!r}")
        values = {"lower": lower, "upper": upper, "velocity": velocity, "effort": effort, **extra}
        for key, v in values.items():
            v = as_number(v, f"{where}.{key}", finite=False)
            if math.isnan(v):
                raise ModelError(f"{where}: {key} must be a number, got nan")
            values[key] = v
        if values["lower"] > values["upper"]:
            raise ModelError(f"{where}: lower {values['lower']} exceeds upper {values['upper']}")
        for key in ("velocity", "effort"):
            if values[key] < 0:
                raise ModelError(f"{where}: {key} must be non-negative, got {values[key]}")
        self._limits[config] = values
        return self

