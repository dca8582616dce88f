"""Building a system: describe a tree-structured mechanical system and compile it to a
:class:`Model`.

A system is a tree of coordinate frames under the fixed ``world`` frame. Each frame is placed
relative to its parent by an optional constant offset followed by exactly one simple transform:

    g_parent,frame = G_offset · X_kind(value)

where ``kind`` is one of ``tx, ty, tz`` (translation along the offset frame's x, y or z axis) or
``rx, ry, rz`` (rotation about it), and ``value`` is a number (a constant transform) or the name
of the configuration variable that drives it. A frame with only an offset is a constant frame.
The orderings of variables, inputs and constraint rows are those of :mod:`core.conventions`.

Pinocchio-style separation: :class:`System` is what the robot is (names, elements); its compiled
:class:`Model` (:mod:`core.model.record`, built by :mod:`core.model.compile`) is an immutable
record of arrays that the kernels read;
per-evaluation scratch lives in its :class:`Workspace` (:mod:`core.tree.workspace`). The numeric
methods are thin calls into :mod:`core.continuous.dynamics` and :mod:`core.continuous.minimal`.
"""
from __future__ import annotations

import math
from typing import cast

import numpy as np

from core.continuous import dynamics, floating, minimal, stacked
from core.errors import ModelError
from core.model.compile import (
    TRANSFORM_KINDS,
    as_inertia,
    as_number,
    as_rotation,
    check_constraint,
    check_damper,
    check_input,
    check_spring,
    check_velocity_constraint,
    check_wrench,
    compile_system,
)
from core.model.inertia import check_policy
from core.model.record import INPUT_TORQUE, WORLD, Model
from core.tree.workspace import Workspace


class System:
    """A tree-structured mechanical system in generalized coordinates.

    Build it from Python (``add_frame``, ``add_constraint``, ...) or from YAML/dict with
    :func:`load_system`. Numeric methods (``qdd``, ``linearize``, ``momentum``, ...) compile the
    description into an immutable :class:`Model` on first use; any later change recompiles. The
    builder methods (``add_*``, ``lock``, ``set_*``) return the system, so calls chain. Each checks
    what its element says by itself when it is added (keys, numbers, axes); what an element refers
    to (frames, variables, by name, which may be added later) is resolved when the system compiles
    (:meth:`compile`, :mod:`core.model.compile`), so a numeric method's first call may raise the
    :class:`ModelError` naming an element whose frame or variable does not exist.

    Example::

        sys = System(gravity=[0, -9.8, 0])
        sys.add_frame("link1", parent="world", rz="theta1")
        sys.add_frame("A", parent="link1", ty=-1.0, mass=1.0)
        sys.add_input("torque", config="theta1")

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
        self.gravity = np.array([as_number(g, f"gravity[{i}]") for i, g in enumerate(gravity)]) \
            if len(gravity) == 3 else self._bad_gravity(gravity)
        self._frames: list[dict] = []
        self._constraints: list[dict] = []
        self._velocity_constraints: list[dict] = []
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
        self._chart: System | None = None                    # its chart system (compile())
        self._model: Model | None = None          # set by compile() only
        self._workspace: Workspace | None = None
        self._config_names: list[str] = []
        self._joint_names: list[str] = []
        self._input_names: list[str] = []
        self._frame_names: list[str] = []
        self._kinematic_set: set[str] = set()
        self._limits: dict[str, dict[str, float]] = {}
        self._locked_values: dict[str, float] = {}
        #: URDF links -> (frame, R, p): the frame each link moves with and its placement in it
        #: (set by :func:`core.load_urdf`; empty otherwise)
        self.links: dict[str, tuple] = {}

    @staticmethod
    def _bad_gravity(gravity):
        raise ModelError(f"gravity must be [gx, gy, gz], got {gravity!r}")

    # ----------------------------------------------------------------------------- building
    def add_frame(self, name: str, parent: str = WORLD, mass: float = 0.0, inertia=None,
                  offset: dict | None = None, com=None, **transform) -> "System":
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
                off_p = np.asarray(offset["translation"], dtype=float)
                if off_p.shape != (3,) or not np.all(np.isfinite(off_p)):
                    raise ModelError(f"{where}: offset translation must be 3 finite numbers")
            if "rotation" in offset:
                off_R = as_rotation(offset["rotation"], f"{where}.offset.rotation")
        mass = as_number(mass, f"{where}.mass", nonnegative=True)
        I = as_inertia(inertia, f"{where}.inertia", self.inertia_policy) if inertia is not None else np.zeros((3, 3))
        c = np.zeros(3)
        if com is not None:
            try:
                c = np.asarray(com, dtype=float)
            except (TypeError, ValueError):
                c = np.zeros(0)
            if c.shape != (3,) or not np.all(np.isfinite(c)):
                raise ModelError(f"{where}: com must be 3 finite numbers [x, y, z], got {com!r}")
        self._frames.append(dict(name=name, parent=parent, kind=kind, value=value, mass=mass,
                                 inertia=I, com=c, offset_R=off_R, offset_p=off_p))
        self._model = None
        return self

    def add_constraint(self, type: str, **kw) -> "System":
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

    def add_spring(self, type: str = "config", **kw) -> "System":
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

    def add_damping(self, config: str, coefficient: float) -> "System":
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
        self._damping[config] = as_number(coefficient, f"damping on {config!r}", nonnegative=True)
        self._model = None
        return self

    def add_damper(self, frame1: str, frame2: str, coefficient: float, name: str | None = None) -> "System":
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

    def add_wrench(self, frame: str, wrench, name: str | None = None) -> "System":
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

    def add_input(self, type: str = "torque", name: str | None = None, **kw) -> "System":
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

    def add_mimic(self, config: str, leader: str, multiplier: float = 1.0, offset: float = 0.0) -> "System":
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

    def add_armature(self, config: str, value: float) -> "System":
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

    @property
    def armature(self) -> dict[str, float]:
        """Rotor inertias by variable (:meth:`add_armature`), locked variables left out."""
        self.compile()
        return {n: a for n, a in self._armature.items() if n not in self._locked_values}

    def lock(self, config: str, value: float) -> "System":
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

    @property
    def locked_joints(self) -> dict[str, float]:
        """The locked variables and their values (:meth:`lock`), coupled variables of a locked
        leader included."""
        self.compile()
        return dict(self._locked_values)

    def set_free_flyer(self, frame: str, prefix: str | None = None) -> "System":
        """Let the root frame ``frame`` float freely on a quaternion free-flyer (Pinocchio's
        ``JointModelFreeFlyer``).

        Seven coordinates ``<prefix>_x, _y, _z`` (its origin in the world) and
        ``<prefix>_qx, _qy, _qz, _qw`` (its orientation, a unit quaternion), six velocities
        ``<prefix>_vx, _vy, _vz, _wx, _wy, _wz`` (its spatial velocity in its own frame). The
        conventions, and what the linearization means on this configuration space, are in
        :mod:`core.continuous.floating`; :attr:`nv` counts the velocities (``nq = nv + 1``), :meth:`integrate`
        and :meth:`difference` move on it. Every other frame must descend from ``frame`` (the
        dynamics are computed in its frame); constraints and kinematic variables are refused, as are
        the integrator (:class:`MidpointVI`) and the node (use the Euler chart of
        :func:`core.load_urdf` there).

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

    @property
    def free_flyer(self) -> str | None:
        """The frame carried by a quaternion free-flyer (:meth:`set_free_flyer`), or None."""
        return self._free_flyer[0] if self._free_flyer else None

    @property
    def mimic_joints(self) -> dict[str, tuple[str, float, float]]:
        """Coupled (mimic) variables: ``{name: (leader, multiplier, offset)}``, the value of
        ``name`` being ``multiplier * q[leader] + offset`` (its velocity ``multiplier *
        dq[leader]``). Their values at a configuration: :meth:`mimic_positions`."""
        self.compile()
        return {n: self._mimic[n] for n in self._joint_names if n in self._mimic}

    def mimic_positions(self, q) -> dict[str, float]:
        """Values of the coupled (mimic) variables at a configuration (their velocities are
        ``multiplier * dq[leader]``, see :attr:`mimic_joints`).

        Parameters
        ----------
        q : array_like, shape (nq,)
            The configuration.

        Returns
        -------
        dict of str to float
            ``{name: multiplier * q[leader] + offset}``.

        Raises
        ------
        ValueError
            ``q`` has the wrong size or a non-finite entry.
        """
        from core.validation import check_vector
        model = self.model
        q = check_vector("q", q, self.nq, self._config_names)
        if self._chart is not None:            # (the chart's variables: the base's six, then the joints)
            q = np.concatenate([np.zeros(6), q[7:]])
        return {n: float(model.mimic_mul[j] * q[model.mimic_src[j]] + model.mimic_off[j])
                for j, n in enumerate(self._joint_names) if n in self._mimic}

    def set_kinematic(self, names) -> "System":
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
                         velocity: float = math.inf, effort: float = math.inf, **extra) -> "System":
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
            A name that is not a non-empty string, a value that is no number or NaN,
            ``lower > upper``, a negative ``velocity`` or ``effort``.
        """
        where = f"limits of {config!r}"
        if not isinstance(config, str) or not config:
            raise ModelError(f"limits: expected a configuration variable name, got {config!r}")
        values = {"lower": lower, "upper": upper, "velocity": velocity, "effort": effort, **extra}
        for key, v in values.items():
            try:
                v = float(v)
            except (TypeError, ValueError):
                raise ModelError(f"{where}: {key} must be a number, got {v!r}") from None
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

    @property
    def joint_limits(self) -> dict[str, dict[str, float]]:
        """Limits by configuration variable, in variable order: ``{name: {"lower", "upper",
        "velocity", "effort", ...}}`` (infinite where none was given; see
        :meth:`set_joint_limits`)."""
        names = self.config_names
        unknown = sorted(set(self._limits) - set(names) - set(self._locked))
        if unknown:
            raise ModelError(f"limits: unknown configuration variable(s) {unknown}")
        free = {"lower": -math.inf, "upper": math.inf, "velocity": math.inf, "effort": math.inf}
        return {n: dict(self._limits.get(n, free)) for n in names}

    @property
    def position_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)``: arrays in variable order (``±inf`` where unlimited)."""
        lim = self.joint_limits.values()
        return np.array([d["lower"] for d in lim]), np.array([d["upper"] for d in lim])

    @property
    def velocity_limits(self) -> np.ndarray:
        """``|v| <=`` these, in :attr:`velocity_names` order (``inf`` where unlimited)."""
        limits = self.joint_limits
        return np.array([limits[n]["velocity"] if n in limits else math.inf for n in self.velocity_names])

    @property
    def effort_limits(self) -> np.ndarray:
        """Largest magnitude of each input, in input order: the effort limit of the variable a
        torque input drives (``inf`` for other inputs and unlimited variables)."""
        self.compile()
        limits = self.joint_limits
        out = []
        for inp in self._kept_inputs:
            kind = inp["type"]
            if kind == "torque":
                out.append(limits[inp["config"]]["effort"])
            else:
                out.extend([math.inf] * (6 if kind == "wrench" else 1))
        return np.array(out)

    # ----------------------------------------------------------------------------- numerics
    def qdd(self, q, dq, u=None):
        """Accelerations of the constrained, forced dynamics (see :mod:`core.continuous.dynamics`)::

            M(q) ddq + L_vq dq - L_q = F(q, dq, u) + A(q)^T lam,    A(q) ddq + b(q, dq) = 0

        on the dynamic rows, ``lam`` eliminated; on the rows of the kinematic variables ``ddq``
        repeats their accelerations from ``u``. With a quaternion base, ``dv/dt`` for the velocity
        ``dq = v`` (:mod:`core.continuous.floating`). The state is not checked against the constraints.

        Parameters
        ----------
        q, dq : array_like, shape (n,) or (N, n)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries). Stacks of ``N``
            states are computed in parallel (:mod:`core.continuous.stacked`).
        u : array_like, shape (m + nk,) or (N, nu), optional
            :attr:`continuous_input_names`: the force inputs, then the accelerations of the
            kinematic variables (None: zeros). A stack's ``u`` has :attr:`nu` columns, the force
            inputs only, so a system with kinematic variables takes no stack (ValueError).

        Returns
        -------
        ddq : ndarray, shape (n,) or (N, n)
            (``nv`` entries per state with a quaternion base.)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); with a quaternion base, a quaternion whose
            norm is off 1.
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        ResourceLimitError
            A stack whose results would pass :data:`core.validation.STACK_MEMORY_LIMIT`. The first
            point of a stack that fails raises the single call's error, prefixed with its index.
        """
        if (type(q) is not np.ndarray or q.ndim == 2) and stacked.is_stack(q):
            return stacked.qdd(self, q, dq, u)
        if self._free_flyer:
            return floating.qdd(self, q, dq, u)
        return dynamics.qdd(self, q, dq, u)

    def constraint_forces(self, q, dq, u=None):
        """Constraint multipliers ``lam`` of :meth:`qdd`'s equations (holonomic rows, then velocity
        rows). The state is not checked against the constraints.

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state.
        u : array_like, shape (m + nk,), optional
            :attr:`continuous_input_names` (None: zeros).

        Returns
        -------
        lam : ndarray, shape (nc,)
            One entry per constraint row.

        Raises
        ------
        ModelError
            With a quaternion base.
        ValueError
            A wrong size or a non-finite entry (named).
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        """
        self._fixed_chart("constraint_forces")
        return dynamics.constraint_forces(self, q, dq, u)

    def linearize(self, q, dq, u=None, multipliers: bool = False, *,
                  residual_limit: float | None = 1e-6):
        """Exact continuous linearization ``d/dt δx = A δx + B δu`` of
        ``d/dt [q, dq] = f(q, dq, u)``, constraints included (the multipliers eliminated as
        functions of the state; see :func:`core.continuous.dynamics.linearize`). With a quaternion base, in the
        tangent space: ``A`` is ``2 nv x 2 nv`` for ``[δ, v]`` (:attr:`state_names`,
        :mod:`core.continuous.floating`).

        Parameters
        ----------
        q, dq : array_like, shape (n,) or (N, n)
            The state ``x = [q, dq]`` (with a quaternion base, ``q`` of ``nq`` entries and the
            velocity ``v``). Stacks of ``N`` states are linearized in parallel (:mod:`core.continuous.stacked`;
            not with ``multipliers``).
        u : array_like, shape (m + nk,) or (N, m + nk), optional
            :attr:`continuous_input_names`: the force inputs, then the accelerations of the
            kinematic variables (None: zeros).
        multipliers : bool
            Also return the derivatives of the multipliers (one state; not with a quaternion base).
        residual_limit : float or None
            A state off the constraints by more than this is refused:
            ``|h_r| > residual_limit |Dh_r|`` (about ``residual_limit`` in ``q``) or
            ``|(J dq)_r| > residual_limit |J_r| max(1, |dq|)`` for the rows ``J`` of the holonomic
            Jacobian and of the velocity constraints (default 1e-6; None skips the check).

        Returns
        -------
        A : ndarray, shape (2n, 2n) or (N, 2n, 2n)
        B : ndarray, shape (2n, m + nk) or (N, 2n, m + nk)
        dlam_dx, dlam_du : ndarray, shapes (nc, 2n) and (nc, m + nk)
            With ``multipliers``: ``dlam/dx`` and ``dlam/du``, one row per constraint row
            (holonomic, then velocity).

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); a state off the constraints (naming the
            row); a ``residual_limit`` that is not positive (with constraints); ``multipliers`` with
            a stack; with a quaternion base, a quaternion whose norm is off 1.
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        ModelError
            ``multipliers`` with a quaternion base.
        ResourceLimitError
            A stack whose results would pass :data:`core.validation.STACK_MEMORY_LIMIT`. The first
            point of a stack that fails raises the single call's error, prefixed with its index.
        """
        if (type(q) is not np.ndarray or q.ndim == 2) and stacked.is_stack(q):
            if multipliers:
                raise ValueError("linearize(multipliers=True) takes one state, not a stack")
            return stacked.linearize(self, q, dq, u, residual_limit)
        if self._free_flyer:
            if multipliers:
                self._fixed_chart("linearize(multipliers=True)")
            return floating.linearize(self, q, dq, u)
        return dynamics.linearize(self, q, dq, u, multipliers, residual_limit)

    def linearize2(self, q, dq, u=None, *, residual_limit: float | None = 1e-6):
        """Exact continuous linearization to second order (:func:`core.continuous.dynamics.linearize2`):
        ``A, B`` as :meth:`linearize` and::

            H[i, a, b] = d2 xdot_i / dz_a dz_b,    z = [q, dq, u],

        symmetric in ``a, b``, constraints included. With a quaternion base, in the tangent space
        (``z = [δ, v, u]``, :mod:`core.continuous.floating`).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries).
        u : array_like, shape (m + nk,), optional
            :attr:`continuous_input_names` (None: zeros).
        residual_limit : float or None
            A state off the constraints by more than this is refused:
            ``|h_r| > residual_limit |Dh_r|`` (about ``residual_limit`` in ``q``) or
            ``|(J dq)_r| > residual_limit |J_r| max(1, |dq|)`` for the rows ``J`` of the holonomic
            Jacobian and of the velocity constraints (default 1e-6; None skips the check).

        Returns
        -------
        A : ndarray, shape (2n, 2n)
        B : ndarray, shape (2n, m + nk)
        H : ndarray, shape (2n, nz, nz)
            ``nz = 2n + m + nk``.

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); a state off the constraints (naming the
            row); a ``residual_limit`` that is not positive (with constraints); with a quaternion
            base, a quaternion whose norm is off 1.
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        ResourceLimitError
            ``H`` and its work arrays would pass :data:`core.validation.SECOND_ORDER_MEMORY_LIMIT`
            (checked before allocating).
        """
        if self._free_flyer:
            return floating.linearize2(self, q, dq, u)
        return dynamics.linearize2(self, q, dq, u, residual_limit)

    def linearize_minimal(self, q, dq, u=None, independent=None, condition_limit: float = 1e8, *,
                          residual_limit: float = 1e-6):
        """Linearization in independent coordinates and speeds (Peterson, Gede & Hubbard; see
        :mod:`core.continuous.minimal`): ``x_i' = A x_i + B u`` for the state
        ``x_i = [independent q, independent dq]``, each group in model order,
        ``p = (n - nh) + (n - nh - nv)`` entries for ``nh`` holonomic and ``nv`` velocity
        constraints.

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            A state on the constraints (``h = 0``, ``Dh dq = 0``, ``A_v dq = 0``).
        u : array_like, shape (m + nk,), optional
            As in :meth:`linearize` (None: zeros).
        independent : list of str, optional
            None: automatic (pivoted QR of the constraint Jacobians); or names of the independent
            coordinates (``n - nh``) and/or speeds (``"d" + coordinate``, ``n - nh - nv``), a group
            left out chosen automatically.
        condition_limit : float
            The largest accepted condition ``||(J P_d)^-1 J||_2`` of the dependent choice (finite,
            >= 1).
        residual_limit : float or None
            How far off the constraints the state may be (a distance in ``q``, relative in ``dq``;
            None skips the check).

        Returns
        -------
        A : ndarray, shape (p, p)
        B : ndarray, shape (p, m + nk)
        info : MinimalInfo
            The choice of variables, the maps ``C0, C1, C2, T`` back to all coordinates, the
            conditioning.

        Raises
        ------
        ModelError
            With a quaternion base.
        ValueError
            A wrong size or non-finite entry; ``condition_limit`` not a finite number >= 1; more
            velocity-level constraints than speeds; a state off the constraints; redundant or
            degenerate constraints at this state; ``independent`` names unknown, repeated or of the
            wrong count; a choice whose condition exceeds ``condition_limit`` (naming the automatic
            choice).
        SingularMatrixError, NonFiniteError
            As for :meth:`linearize`.
        """
        self._fixed_chart("linearize_minimal")
        return minimal.linearize_minimal(self, q, dq, u, independent, condition_limit,
                                 residual_limit=residual_limit)

    def momentum(self, q, dq):
        """Generalized momentum ``p = dL/d dq`` (with a quaternion base, ``dL/dv``).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries).

        Returns
        -------
        p : ndarray, shape (n,)
            (``nv`` entries with a quaternion base.)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry; with a quaternion base, a quaternion whose norm is
            off 1.
        """
        if self._free_flyer:
            return floating.momentum(self, q, dq)
        return dynamics.momentum(self, q, dq)

    def energy(self, q, dq):
        """Total mechanical energy ``KE + V`` (``dq . p - L``).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries).

        Returns
        -------
        float
            The energy (J).

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry; with a quaternion base, a quaternion whose norm is
            off 1.
        """
        if self._free_flyer:
            return floating.energy(self, q, dq)
        return dynamics.energy(self, q, dq)

    def constraint(self, q, order: int = 0):
        """Holonomic constraint values ``h(q)`` (and ``Dh``, ``D2h`` with ``order`` 1, 2), rows in
        the order of the constraints (:mod:`core.tree.constraints`).

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration.
        order : {0, 1, 2}
            The highest derivative returned.

        Returns
        -------
        h : ndarray, shape (nh,)
            Alone for ``order=0``.
        (h, Dh) or (h, Dh, D2h) : tuple of ndarray
            For ``order`` 1 or 2: ``Dh[r, a] = dh_r/dq_a`` (nh, n) and ``D2h[r, a, b]`` (nh, n, n).

        Raises
        ------
        ValueError
            ``order`` not 0, 1 or 2; a wrong size or non-finite entry of ``q``.
        ModelError
            With a quaternion base.
        """
        self._fixed_chart("constraint")
        return dynamics.constraint(self, q, order)

    def check_configuration(self, q, residual_limit: float = 1e-6, what: str = "the computation") -> None:
        """Check that ``q`` satisfies the holonomic constraints:
        ``|h_r(q)| <= residual_limit |Dh_r(q)|`` (about ``residual_limit`` in q from it) for every
        row. For computations that take a configuration alone, e.g. a step of the integrator.
        Without holonomic constraints nothing is checked.

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration.
        residual_limit : float
            The tolerance (> 0).
        what : str
            The computation that needs it, named in the message.

        Raises
        ------
        ValueError
            Naming the first violated row; also a wrong size or non-finite entry of ``q``, a
            ``residual_limit`` that is not positive.
        ModelError
            With a quaternion base.
        """
        self._fixed_chart("check_configuration")
        dynamics.check_configuration(self, q, residual_limit, what)

    def lagrangian_derivatives(self, q, dq, order: int = 2):
        """Derivatives of the Lagrangian ``L = KE - V`` up to third order (see
        :mod:`core.tree.lagrangian` for the index order).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state.
        order : {0, 1, 2, 3}
            The highest order computed.

        Returns
        -------
        Derivatives
            A namedtuple of copies: ``L`` (1,); ``Lq``, ``Lv`` (n,) from order 1; ``Lqq``, ``Lqv``,
            ``Lvv`` (n, n) from order 2; ``Lqqq``, ``Lqqv``, ``Lqvv`` (n, n, n) at order 3. Fields
            above ``order`` and the directional ones (``dLqq``, ``dLqv``, ``dLvv``) are None.

        Raises
        ------
        ValueError
            ``order`` not 0..3; a wrong size or non-finite entry.
        ModelError
            With a quaternion base.
        """
        self._fixed_chart("lagrangian_derivatives")
        return dynamics.lagrangian_derivatives(self, q, dq, order)

    def input_matrix(self, q):
        """``dF/du`` at ``q``: how each input enters the generalized forces (column ``r`` is the
        generalized force of a unit input ``r``).

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration (``nq`` entries with a quaternion base).

        Returns
        -------
        ndarray, shape (n, m)
            For the :attr:`nu` inputs (``nv x m`` with a quaternion base).

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; with a quaternion base, a quaternion whose norm is off
            1.
        """
        if self._free_flyer:
            return floating.input_matrix(self, q)
        return dynamics.input_matrix(self, q)

    # ----------------------------------------------------------------------------- configurations
    def neutral(self) -> np.ndarray:
        """The configuration of zero joint values (with a quaternion base: at the origin, the
        identity orientation ``qw = 1``).

        Returns
        -------
        ndarray, shape (nq,)
        """
        q = np.zeros(self.nq)
        if self._free_flyer:
            q[6] = 1.0
        return q

    def integrate(self, q, v) -> np.ndarray:
        """``q ⊕ v``: the configuration reached from ``q`` along the velocity ``v`` held for unit
        time (``q + v``; with a quaternion base, the base pose ``g exp(v^)``, see
        :mod:`core.continuous.floating`).

        Parameters
        ----------
        q : array_like, shape (nq,)
        v : array_like, shape (nv,)

        Returns
        -------
        ndarray, shape (nq,)

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; with a quaternion base, a quaternion whose norm is off
            1.
        """
        from core.validation import check_vector
        v = check_vector("v", v, self.nv, self.velocity_names)
        if self._free_flyer:
            return floating.integrate(floating.configuration(self, q), v)
        return check_vector("q", q, self.nq, self._config_names) + v

    def difference(self, q0, q1) -> np.ndarray:
        """``q1 ⊖ q0``, the velocity that :meth:`integrate` takes from ``q0`` to ``q1``
        (``q1 - q0``; with a quaternion base, the base's ``log(g0⁻¹ g1)``).

        Parameters
        ----------
        q0, q1 : array_like, shape (nq,)

        Returns
        -------
        ndarray, shape (nv,)

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; with a quaternion base, a quaternion whose norm is off
            1.
        """
        from core.validation import check_vector
        if self._free_flyer:
            return floating.difference(floating.configuration(self, q0), floating.configuration(self, q1))
        return check_vector("q1", q1, self.nq, self._config_names) - check_vector("q0", q0, self.nq,
                                                                                 self._config_names)

    def _fixed_chart(self, what: str) -> None:
        """Refuse ``what`` on a quaternion base (it works on coordinates with ``nq == nv``)."""
        floating.refuse(self, what)

    # ----------------------------------------------------------------------------- compilation
    def compile(self) -> Model:
        """Compile the description into its immutable :class:`Model` (and a fresh
        :class:`Workspace`) now. Numeric methods compile on first use; call this to fail early. Any
        later change recompiles.

        Returns
        -------
        Model
            The compiled model (also :attr:`model`).

        Raises
        ------
        ModelError
            Naming a malformed element.
        """
        if self._model is None and self._free_flyer:
            chart = floating.chart_system(self)
            chart.compile()
            self._chart = chart
            frame, prefix = self._free_flyer
            self._config_names = [f"{prefix}_{x}" for x in floating.CONFIG_SUFFIXES] + chart._config_names[6:]
            for name in ("_joint_names", "_input_names", "_frame_names", "_locked_values", "_kept_inputs",
                         "_kinematic_set", "_workspace"):
                setattr(self, name, getattr(chart, name))
            self._model = chart._model
        if self._model is None:
            self._chart = None
            compiled = compile_system(self)
            self._config_names = compiled.config_names
            self._joint_names = compiled.joint_names
            self._input_names = compiled.input_names
            self._frame_names = compiled.frame_names
            self._locked_values = compiled.locked
            self._kept_inputs = compiled.inputs
            self._kinematic_set = set(self._kinematic)
            names = compiled.config_names
            kin = set(self._kinematic)
            self._workspace = Workspace(compiled.model, [i for i, nm in enumerate(names) if nm not in kin],
                                        [i for i, nm in enumerate(names) if nm in kin])
            self._model = compiled.model
        return self._model

    @property
    def model(self) -> Model:
        """The compiled, immutable model (see :meth:`compile`)."""
        return self._model if self._model is not None else self.compile()

    @property
    def workspace(self) -> Workspace:
        """Per-thread scratch for evaluations of :attr:`model` (see :mod:`core.tree.workspace`)."""
        if self._model is None:
            self.compile()
        return self._workspace      # type: ignore[return-value]  # (set by compile; cast() is a call)

    # ----------------------------------------------------------------------------- names

    @property
    def config_names(self) -> list[str]:
        self.compile()
        return list(self._config_names)

    @property
    def input_names(self) -> list[str]:
        self.compile()
        return list(self._input_names)

    @property
    def input_is_joint_torque(self) -> list[bool]:
        """Per input (in ``input_names`` order): True for a torque or force on one configuration
        variable (``type: torque``: a constant column of :meth:`input_matrix`), False for a force,
        torque or wrench on a frame (a column that depends on ``q``)."""
        return [bool(kind == INPUT_TORQUE) for kind in self.model.input_kind]

    @property
    def frame_names(self) -> list[str]:
        self.compile()
        return list(self._frame_names)

    @property
    def continuous_input_names(self) -> list[str]:
        """Inputs of :meth:`qdd` and :meth:`linearize`: :attr:`input_names`, then the
        accelerations ``<kinematic>_ddot`` of the kinematic variables."""
        return dynamics.continuous_input_names(self)

    @property
    def kinematic_names(self) -> list[str]:
        self.compile()
        return [n for n in self._config_names if n in self._kinematic_set]

    @property
    def nq(self) -> int:
        """The number of configuration coordinates (``nv + 1`` with a quaternion base)."""
        return self.model.nq + (1 if self._free_flyer else 0)

    @property
    def nv(self) -> int:
        """The number of velocities: :attr:`nq`, or ``nq - 1`` with a quaternion base."""
        return self.model.nq

    @property
    def velocity_names(self) -> list[str]:
        """The velocities' names: :attr:`config_names`, or with a quaternion base its six
        velocities then the joints' (:meth:`set_free_flyer`)."""
        self.compile()
        return list(self._chart._config_names if self._chart is not None else self._config_names)

    @property
    def nu(self) -> int:
        return self.model.nu

    @property
    def state_names(self) -> list[str]:
        """Names of the rows and columns of :meth:`linearize`'s ``A``: ``[q..., dq...]`` with
        ``dq`` named ``d<variable>``. With a quaternion base, ``[δ..., v...]``: the tangent
        displacement ``δ`` of the base ``<prefix>_tx, _ty, _tz, _rx, _ry, _rz`` (along and about
        its own axes) then the joints, and the velocities :attr:`velocity_names` (``d<joint>``
        for the joints)."""
        if self._free_flyer:
            self.compile()
            chart = cast(System, self._chart)     # (set by compile for a quaternion base)
            prefix, joints = self._free_flyer[1], chart._config_names[6:]
            return ([f"{prefix}_{x}" for x in ("tx", "ty", "tz", "rx", "ry", "rz")] + joints
                    + chart._config_names[:6] + ["d" + n for n in joints])
        return self.config_names + ["d" + n for n in self.config_names]

    def config_index(self, name: str) -> int:
        """The position of a configuration variable in :attr:`config_names`.

        Parameters
        ----------
        name : str

        Returns
        -------
        int

        Raises
        ------
        KeyError
            An unknown variable.
        """
        try:
            return self.config_names.index(name)
        except ValueError:
            raise KeyError(f"unknown configuration variable {name!r}") from None

    def frame_index(self, name: str) -> int:
        """The position of a frame in :attr:`frame_names`.

        Parameters
        ----------
        name : str

        Returns
        -------
        int

        Raises
        ------
        KeyError
            An unknown frame.
        """
        try:
            return self.frame_names.index(name)
        except ValueError:
            raise KeyError(f"unknown frame {name!r}") from None

    def __repr__(self) -> str:
        m = self.model
        return (f"System({self.name!r}: {m.nf} frames, nq={m.nq}, nu={m.nu}, "
                f"{m.nh} holonomic + {m.nv} velocity constraints)")
