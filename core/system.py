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
:class:`Model` (:mod:`core.model.record`) is an immutable record of arrays that the kernels read;
per-evaluation scratch lives in its :class:`Workspace` (:mod:`core.tree.workspace`). The numeric
methods are thin calls into :mod:`core.continuous.dynamics` and :mod:`core.continuous.minimal`.
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any, cast

import numpy as np

from core.base.linalg import tree_index
from core.continuous import dynamics, floating, minimal, stacked
from core.errors import ModelError
from core.model.inertia import MergedBody, check_inertia, check_policy
from core.model.record import (
    HC_COINCIDE,
    HC_DISTANCE,
    HC_PLANE,
    INPUT_TORQUE,
    INPUT_WRENCH,
    KIND_CONST,
    KIND_RX,
    KIND_RY,
    KIND_RZ,
    KIND_TX,
    KIND_TY,
    KIND_TZ,
    MODEL_FIELDS,
    WORLD,
    Model,
)
from core.tree.workspace import Workspace

TRANSFORM_KINDS = {"tx": KIND_TX, "ty": KIND_TY, "tz": KIND_TZ,
                   "rx": KIND_RX, "ry": KIND_RY, "rz": KIND_RZ}
AXES = {"x": 0, "y": 1, "z": 2}
WRENCH_COMPONENTS = ("fx", "fy", "fz", "mx", "my", "mz")


def _rotation_from_spec(spec: Any, where: str) -> np.ndarray:
    """A rotation matrix from ``rpy: [r, p, y]`` (fixed axes x then y then z) or a 3x3 matrix."""
    arr = np.asarray(spec, dtype=float)
    if arr.shape == (3,):
        r, p, y = arr
        cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
        rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
        ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
        rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
        return rz @ ry @ rx
    if arr.shape == (3, 3):
        if not np.allclose(arr @ arr.T, np.eye(3), atol=1e-9) or np.linalg.det(arr) < 0:
            raise ModelError(f"{where}: rotation matrix is not a proper rotation")
        return arr
    raise ModelError(f"{where}: rotation must be rpy [r, p, y] or a 3x3 matrix, got {spec!r}")


def _number(value: Any, where: str, positive: bool = False, nonnegative: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ModelError(f"{where}: must be finite, got {value!r}")
    if positive and x <= 0:
        raise ModelError(f"{where}: must be positive, got {x}")
    if nonnegative and x < 0:
        raise ModelError(f"{where}: must be non-negative, got {x}")
    return x


def _axis(value: Any, where: str) -> int:
    if value not in AXES:
        raise ModelError(f"{where}: axis must be one of x, y, z, got {value!r}")
    return AXES[value]


def _inertia(spec: Any, where: str, policy: str) -> np.ndarray:
    arr = np.asarray(spec, dtype=float)
    if arr.shape == (3,):
        arr = np.diag(arr)
    if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: inertia must be [Ixx, Iyy, Izz] or a finite 3x3 matrix")
    if not np.allclose(arr, arr.T, atol=1e-12):
        raise ModelError(f"{where}: inertia matrix must be symmetric")
    return check_inertia(arr, where, policy, stacklevel=5)


class System:
    """A tree-structured mechanical system in generalized coordinates.

    Build it from Python (``add_frame``, ``add_constraint``, ...) or from YAML/dict with
    :func:`load_system`. Numeric methods (``qdd``, ``linearize``, ``momentum``, ...) compile the
    description into an immutable :class:`Model` on first use; any later change recompiles. The
    builder methods (``add_*``, ``lock``, ``set_*``) return the system, so calls chain; most of
    their checks run when it compiles (:meth:`compile`), so a numeric method's first call may raise
    the :class:`ModelError` naming a malformed element.

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
        self.gravity = np.array([_number(g, f"gravity[{i}]") for i, g in enumerate(gravity)]) \
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
            value = _number(value, f"{where}.{kind}")
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
                off_R = _rotation_from_spec(offset["rotation"], f"{where}.offset.rotation")
        mass = _number(mass, f"{where}.mass", nonnegative=True)
        I = _inertia(inertia, f"{where}.inertia", self.inertia_policy) if inertia is not None else np.zeros((3, 3))
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
            An unknown ``type``. The keywords are checked when the system compiles (a ModelError
            naming the constraint): unknown or missing keys, unknown frames, a negative or
            non-finite distance, a non-finite offset, an axis that is none of x, y, z, a normal that
            is neither an axis nor a nonzero finite vector, ``axes`` that is not a non-empty list, a
            velocity constraint on the world frame. Constraints are refused with a quaternion base
            (:meth:`set_free_flyer`), velocity constraints with coupled (mimic) variables.
        """
        entry = dict(kw, type=type)
        if type not in ("distance", "plane", "coincide", "velocity"):
            raise ModelError(f"constraint {len(self._constraints)}: unknown type {type!r} "
                             "(distance, plane, coincide, velocity)")
        (self._velocity_constraints if type == "velocity" else self._constraints).append(entry)
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
            An unknown ``type``. The specification is checked when the system compiles (a ModelError
            naming the spring): unknown or missing keys, an unknown variable or frame, both or
            neither of ``stiffness`` and ``polynomial``, a negative stiffness or rest length, a
            non-finite number.
        """
        if type not in ("config", "frames"):
            raise ModelError(f"spring {len(self._springs)}: unknown type {type!r} (config, frames)")
        self._springs.append(dict(kw, type=type))
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
        self._damping[config] = _number(coefficient, f"damping on {config!r}", nonnegative=True)
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
            The specification is checked when the system compiles (a ModelError naming the damper):
            an unknown frame, the same frame twice, a negative or non-finite coefficient.
        ValueError
            At an evaluation where the origins coincide (``x < 1e-12``).
        """
        self._dampers.append(dict(frame1=frame1, frame2=frame2, coefficient=coefficient, name=name))
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
            When the system compiles (naming the wrench): an unknown frame, the world frame, or a
            ``wrench`` that is not six finite numbers.
        """
        self._wrenches.append(dict(frame=frame, wrench=wrench, name=name))
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
            An unknown ``type``. When the system compiles (naming the input): unknown or missing
            keys, an unknown variable or frame, a torque on a coupled (mimic) variable, a wrench on
            the world frame, an axis other than x, y, z, two inputs of the same name.
        """
        if type not in ("torque", "force", "moment", "wrench"):
            raise ModelError(f"input {len(self._inputs)}: unknown type {type!r} "
                             "(torque, force, moment, wrench)")
        self._inputs.append(dict(kw, type=type, name=name))
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
        self._mimic[config] = (leader, _number(multiplier, f"{where}.multiplier"),
                               _number(offset, f"{where}.offset"))
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
        self._armature[config] = _number(value, f"armature of {config!r}", nonnegative=True)
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
        self._locked[config] = _number(value, f"lock of {config!r}")
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
            compiled = _compile(self)
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
        return cast(Workspace, self._workspace)      # (set by compile)

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


# ------------------------------------------------------------------------------- compilation
_Compiled = namedtuple("_Compiled", ["model", "config_names", "input_names", "frame_names", "joint_names",
                                     "locked", "inputs"])


def _topological_order(frames: list[dict]) -> list[int]:
    """Frame indices ordered parents-first; names unknown parents and cycles."""
    by_name = {f["name"]: i for i, f in enumerate(frames)}
    for f in frames:
        if f["parent"] != WORLD and f["parent"] not in by_name:
            raise ModelError(f"frame {f['name']!r}: unknown parent {f['parent']!r}")
    order, state = [], [0] * len(frames)  # 0 new, 1 visiting, 2 done

    for start in range(len(frames)):
        path = []
        i = start
        while state[i] == 0:
            state[i] = 1
            path.append(i)
            parent = frames[i]["parent"]
            if parent == WORLD:
                break
            i = by_name[parent]
            if state[i] == 1:
                cycle = [frames[j]["name"] for j in path[path.index(i):]]
                raise ModelError(f"frames form a cycle: {' -> '.join(cycle)}")
        for j in reversed(path):
            state[j] = 2
            order.append(j)
    return order


def _plane_frame_name(c: dict, ci: int) -> str:
    return f"{c.get('plane_frame', WORLD)}@plane{ci}"


def _plane_frames(system: System) -> list[dict]:
    """The massless constant frames of plane constraints whose normal is a vector: each under
    its plane frame, rotated so that its z axis is the normal (any rotation that does it: the
    constraint reads only that axis)."""
    extra = []
    for ci, c in enumerate(system._constraints):
        normal = c.get("normal", "z")
        if c["type"] != "plane" or isinstance(normal, str):
            continue
        where = f"constraint {ci} (plane).normal"
        try:
            n = np.asarray(normal, dtype=float)
        except (TypeError, ValueError):
            n = np.zeros(0)
        if n.shape != (3,) or not np.all(np.isfinite(n)) or not np.linalg.norm(n) > 0:
            raise ModelError(f"{where}: must be x, y, z or a nonzero vector of 3 finite numbers, got {normal!r}")
        z = n / np.linalg.norm(n)
        helper = np.eye(3)[int(np.argmin(np.abs(z)))]       # the axis least along z
        x = np.cross(helper, z)
        x /= np.linalg.norm(x)
        R = np.column_stack([x, np.cross(z, x), z])
        name = _plane_frame_name(c, ci)
        if any(f["name"] == name for f in system._frames):
            raise ModelError(f"{where}: frame name {name!r} is taken")
        extra.append(dict(name=name, parent=c.get("plane_frame", WORLD), kind=None, value=0.0, mass=0.0,
                          inertia=np.zeros((3, 3)), com=np.zeros(3), offset_R=R, offset_p=np.zeros(3)))
    return extra


def constant_transform(kind: str | None, value: float) -> tuple[np.ndarray, np.ndarray]:
    """``(R, p)`` of the simple transform ``X_kind(value)`` (identity for ``None``)."""
    R, p = np.eye(3), np.zeros(3)
    if kind is None:
        return R, p
    axis = AXES[kind[1]]
    if kind[0] == "t":
        p[axis] = value
        return R, p
    c, s = math.cos(value), math.sin(value)
    i, j = (axis + 1) % 3, (axis + 2) % 3
    R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
    return R, p


def _kernel_bodies(frames: list[dict], parent, qindex) -> dict:
    """The model's per-frame bodies (``frame_mass``, ``frame_com``, ``frame_inertia``), with the
    body of every frame rigidly fixed to its parent frame (a constant offset and transform: no
    variable, e.g. a locked one) merged exactly into the parent's body
    (:class:`core.model.inertia.MergedBody`), leaves first so that chains of such frames collapse. The
    kernels then skip the emptied frames, which cost as much as a moving body in every recursion
    (a frame per centre of mass in a hand-built model, a locked joint's links). The frames
    themselves stay: constraints, inputs and springs may refer to them."""
    nf = len(frames)
    bodies = []
    for f in frames:
        b = MergedBody()
        b.add(float(f["mass"]), np.asarray(f["com"], float).reshape(3),
              np.asarray(f["inertia"], float).reshape(3, 3), np.eye(3), np.zeros(3))
        bodies.append(b)
    for fi in range(nf - 1, -1, -1):
        par = parent[fi]
        if par >= 0 and qindex[fi] < 0 and not bodies[fi].is_empty():
            m, c, I = bodies[fi].mass_com_inertia()
            f = frames[fi]
            R_off = np.asarray(f["offset_R"], float).reshape(3, 3)
            R_x, p_x = constant_transform(f["kind"], float(f["value"]))
            p = np.asarray(f["offset_p"], float).reshape(3) + R_off @ p_x
            bodies[par].add(m, c, I, R_off @ R_x, p)
            bodies[fi] = MergedBody()
    merged = [b.mass_com_inertia() for b in bodies]
    return dict(frame_mass=np.array([b[0] for b in merged]).reshape(nf),
                frame_com=np.array([b[1] for b in merged]).reshape(nf, 3),
                frame_inertia=np.array([b[2] for b in merged]).reshape(nf, 3, 3))


def _compile(system: System) -> _Compiled:
    """The model record and the names of a system's description (reads, never writes, it)."""
    locked, mimic_map = _locks(system)
    own_frames = [dict(f, value=locked[f["value"]]) if isinstance(f["value"], str) and f["value"] in locked
                  else f for f in system._frames]
    declared = own_frames + _plane_frames(system)
    order = _topological_order(declared)
    frames = [declared[i] for i in order]
    names = [f["name"] for f in frames]
    index = {n: i for i, n in enumerate(names)}

    config_names: list[str] = []
    for f in own_frames:               # declaration order, not topological
        if isinstance(f["value"], str) and f["value"] not in config_names:
            config_names.append(f["value"])

    def frame_ref(name, where):
        if name == WORLD:
            return -1
        if name not in index:
            raise ModelError(f"{where}: unknown frame {name!r}")
        return index[name]

    def extra_config(name, where):
        if not isinstance(name, str) or not name:
            raise ModelError(f"{where}: expected a configuration variable name, got {name!r}")
        if name not in config_names:
            config_names.append(name)
        return config_names.index(name)

    # holonomic constraints (may introduce variables: variable-length distance constraints)
    hc = []
    for ci, c in enumerate(system._constraints):
        where = f"constraint {ci} ({c['type']})"
        t = c["type"]
        _check_keys(c, {"type", "frame1", "frame2", "distance", "frame", "plane_frame", "normal",
                        "offset", "axes", "name"}, where)
        if t == "distance":
            f1, f2 = frame_ref(_req(c, "frame1", where), where), frame_ref(_req(c, "frame2", where), where)
            d = _req(c, "distance", where)
            if isinstance(d, str):
                hc.append((HC_DISTANCE, f1, f2, 0, 0.0, extra_config(d, where)))
            else:
                hc.append((HC_DISTANCE, f1, f2, 0, _number(d, f"{where}.distance", nonnegative=True), -1))
        elif t == "plane":
            f1 = frame_ref(_req(c, "frame", where), where)
            normal = c.get("normal", "z")
            if isinstance(normal, str):
                f2, axis = frame_ref(c.get("plane_frame", WORLD), where), _axis(normal, f"{where}.normal")
            else:       # the frame _plane_frames added, its z axis along the normal
                f2, axis = frame_ref(_plane_frame_name(c, ci), where), AXES["z"]
            hc.append((HC_PLANE, f1, f2, axis, _number(c.get("offset", 0.0), f"{where}.offset"), -1))
        else:  # coincide
            f1, f2 = frame_ref(_req(c, "frame1", where), where), frame_ref(_req(c, "frame2", where), where)
            axes = c.get("axes", ["x", "y", "z"])
            if isinstance(axes, str) or not axes:
                raise ModelError(f"{where}: axes must be a non-empty list such as [x, y]")
            for a in axes:
                hc.append((HC_COINCIDE, f1, f2, _axis(a, f"{where}.axes"), 0.0, -1))
    for name in system._kinematic:
        if name in locked:
            raise ModelError(f"kinematic: {name!r} is locked: a locked variable cannot be prescribed")
        extra_config(name, "kinematic")

    vc = []
    for ci, c in enumerate(system._velocity_constraints):
        where = f"velocity constraint {ci}"
        _check_keys(c, {"type", "frame", "axis", "name"}, where)
        f = frame_ref(_req(c, "frame", where), where)
        if f < 0:
            raise ModelError(f"{where}: the world frame cannot move")
        vc.append((f, _axis(_req(c, "axis", where), f"{where}.axis")))

    nj, nf = len(config_names), len(frames)       # joint coordinates (all variables, coupled too)
    cidx = {n: i for i, n in enumerate(config_names)}
    mimic_src, mimic_mul, mimic_off, joint_names, config_names = _coupling(mimic_map, config_names, frames, vc)
    nq = len(config_names)
    frame_parent = np.array([index[f["parent"]] if f["parent"] != WORLD else -1 for f in frames], np.int64)
    frame_kind = np.array([TRANSFORM_KINDS[f["kind"]] if f["kind"] else KIND_CONST for f in frames], np.int64)
    frame_qindex = np.array([cidx[f["value"]] if isinstance(f["value"], str) else -1 for f in frames], np.int64)
    frame_value = np.array([0.0 if isinstance(f["value"], str) else float(f["value"]) for f in frames])
    joint_frame = -np.ones(nj, np.int64)
    for fi, qi in enumerate(frame_qindex):
        if qi >= 0:
            joint_frame[qi] = fi
    # nearest joint at or above each frame
    frame_joint = -np.ones(nf, np.int64)
    for fi in range(nf):
        if frame_qindex[fi] >= 0:
            frame_joint[fi] = frame_qindex[fi]
        elif frame_parent[fi] >= 0:
            frame_joint[fi] = frame_joint[frame_parent[fi]]
    # ancestor lists of joints, root first, self last
    anc_lists = []
    for j in range(nj):
        chain = []
        f = joint_frame[j]
        while f >= 0:
            if frame_qindex[f] >= 0:
                chain.append(frame_qindex[f])
            f = frame_parent[f]
        anc_lists.append(chain[::-1])
    anc_ptr = np.zeros(nj + 1, np.int64)
    for j in range(nj):
        anc_ptr[j + 1] = anc_ptr[j] + len(anc_lists[j])
    anc_idx = np.array([a for lst in anc_lists for a in lst], np.int64)
    joint_depth = np.array([len(lst) for lst in anc_lists], np.int64)
    joint_parent = [lst[-2] if len(lst) > 1 else -1 for lst in anc_lists]
    tree_order, tree_anc_ptr, tree_anc_idx, tree_desc_ptr, tree_desc_idx = tree_index(joint_parent)

    springs_q, fsprings = [], []
    for si, s in enumerate(system._springs):
        where = f"spring {si} ({s['type']})"
        if s["type"] == "config":
            _check_keys(s, {"type", "config", "stiffness", "polynomial", "rest", "name"}, where)
            q = _req(s, "config", where)
            if q in locked:
                continue            # (absorbed by the lock)
            if q not in cidx:
                raise ModelError(f"{where}: unknown configuration variable {q!r}")
            springs_q.append((cidx[q], _spring_polynomial(s, where), _number(s.get("rest", 0.0), f"{where}.rest")))
        else:
            _check_keys(s, {"type", "frame1", "frame2", "stiffness", "rest_length", "name"}, where)
            fsprings.append((frame_ref(_req(s, "frame1", where), where), frame_ref(_req(s, "frame2", where), where),
                             _number(_req(s, "stiffness", where), f"{where}.stiffness", nonnegative=True),
                             _number(s.get("rest_length", 0.0), f"{where}.rest_length", nonnegative=True)))
    dampers = []
    for di, d in enumerate(system._dampers):
        where = f"damper {di}" + (f" ({d['name']!r})" if d["name"] else "")
        f1, f2 = frame_ref(d["frame1"], where), frame_ref(d["frame2"], where)
        if f1 == f2:
            raise ModelError(f"{where}: frame1 and frame2 are both {d['frame1']!r}: a damper needs two frames")
        dampers.append((f1, f2, _number(d["coefficient"], f"{where}.coefficient", nonnegative=True)))
    damping, armature = np.zeros(nj), np.zeros(nj)
    for what, values, out in (("damping", system._damping, damping), ("armature", system._armature, armature)):
        for q, amount in values.items():
            if q in locked:
                continue
            if q not in cidx:
                raise ModelError(f"{what}: unknown configuration variable {q!r}")
            out[cidx[q]] = amount

    inputs, input_names, kept = [], [], []
    for ii, inp in enumerate(system._inputs):
        where = f"input {ii} ({inp['type']})"
        t = inp["type"]
        if t == "torque":
            _check_keys(inp, {"type", "config", "name"}, where)
            q = _req(inp, "config", where)
            if q in locked:
                continue            # (absorbed by the lock)
            if q not in cidx:
                raise ModelError(f"{where}: unknown configuration variable {q!r}")
            if q in mimic_map:
                raise ModelError(f"{where}: {q!r} mimics {mimic_map[q][0]!r} (no coordinate of "
                                 "its own): it takes no input")
            inputs.append((INPUT_TORQUE, cidx[q], -1, 0))
            input_names.append(inp["name"] or q)
            kept.append(inp)
        else:
            _check_keys(inp, {"type", "frame", "axis", "name"}, where)
            fname = _req(inp, "frame", where)
            f = frame_ref(fname, where)
            if f < 0:
                raise ModelError(f"{where}: a wrench on the world frame does nothing")
            if t == "wrench":
                comps = list(range(6))
            else:
                comps = [_axis(_req(inp, "axis", where), f"{where}.axis") + (0 if t == "force" else 3)]
            kept.append(inp)
            for comp in comps:
                inputs.append((INPUT_WRENCH, -1, f, comp))
                base = inp["name"] or fname
                input_names.append(f"{base}.{WRENCH_COMPONENTS[comp]}" if (t == "wrench" or not inp["name"]) else base)
    if len(set(input_names)) != len(input_names):
        dup = sorted({n for n in input_names if input_names.count(n) > 1})
        raise ModelError(f"inputs: duplicate input names {dup}; give each a distinct 'name'")

    cwrenches = []
    for wi, w in enumerate(system._wrenches):
        where = f"wrench {wi}" + (f" ({w['name']!r})" if w["name"] else "")
        f = frame_ref(w["frame"], where)
        if f < 0:
            raise ModelError(f"{where}: a wrench on the world frame does nothing")
        try:
            value = np.asarray(w["wrench"], dtype=float)
        except (TypeError, ValueError):
            value = np.empty(0)
        if value.shape != (6,) or not np.all(np.isfinite(value)):
            raise ModelError(f"{where}: wrench must be six finite numbers [fx, fy, fz, mx, my, mz], "
                             f"got {w['wrench']!r}")
        cwrenches += [(f, comp, float(value[comp])) for comp in range(6) if value[comp] != 0.0]

    for k in system._kinematic:
        if k not in cidx:
            raise ModelError(f"kinematic: unknown configuration variable {k!r}")
        if k in mimic_map:
            raise ModelError(f"kinematic: {k!r} mimics {mimic_map[k][0]!r}: it cannot be prescribed")

    def col(rows, i, dtype):
        return np.array([r[i] for r in rows], dtype=dtype)

    model = dict(
        nq=nq, nj=nj, nf=nf, nu=len(inputs), nh=len(hc), nv=len(vc),
        frame_parent=frame_parent, frame_kind=frame_kind, frame_qindex=frame_qindex, frame_value=frame_value,
        frame_offset_R=np.array([f["offset_R"] for f in frames]).reshape(nf, 3, 3),
        frame_offset_p=np.array([f["offset_p"] for f in frames]).reshape(nf, 3),
        **_kernel_bodies(frames, frame_parent, frame_qindex),
        frame_joint=frame_joint,
        joint_frame=joint_frame, anc_ptr=anc_ptr, anc_idx=anc_idx, joint_depth=joint_depth,
        tree_order=tree_order, tree_anc_ptr=tree_anc_ptr, tree_anc_idx=tree_anc_idx,
        tree_desc_ptr=tree_desc_ptr, tree_desc_idx=tree_desc_idx,
        gravity=system.gravity.copy(),
        spring_q=col(springs_q, 0, np.int64), spring_coef=_spring_coefficients([s[1] for s in springs_q]),
        spring_rest=col(springs_q, 2, float),
        damping=damping, armature=armature,
        fspring_f1=col(fsprings, 0, np.int64), fspring_f2=col(fsprings, 1, np.int64),
        fspring_k=col(fsprings, 2, float), fspring_rest=col(fsprings, 3, float),
        damper_f1=col(dampers, 0, np.int64), damper_f2=col(dampers, 1, np.int64),
        damper_c=col(dampers, 2, float),
        input_kind=col(inputs, 0, np.int64), input_q=col(inputs, 1, np.int64),
        input_frame=col(inputs, 2, np.int64), input_comp=col(inputs, 3, np.int64),
        cwrench_frame=col(cwrenches, 0, np.int64), cwrench_comp=col(cwrenches, 1, np.int64),
        cwrench_value=col(cwrenches, 2, float),
        hc_kind=col(hc, 0, np.int64), hc_f1=col(hc, 1, np.int64), hc_f2=col(hc, 2, np.int64),
        hc_axis=col(hc, 3, np.int64), hc_value=col(hc, 4, float), hc_lenvar=col(hc, 5, np.int64),
        vc_frame=col(vc, 0, np.int64), vc_axis=col(vc, 1, np.int64),
        mimic_src=mimic_src, mimic_mul=mimic_mul, mimic_off=mimic_off,
    )
    for value in model.values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)  # the model is immutable: shared by every evaluation
    return _Compiled(Model(*[model[f] for f in MODEL_FIELDS]), config_names, input_names, names, joint_names,
                     locked, kept)


def _coupling(mimic: dict, joint_names: list[str], frames: list[dict], vc: list):
    """``(mimic_src, mimic_mul, mimic_off, joint_names, config_names)``: the affine map from the
    configuration variables to the joint coordinates (see :mod:`core.model.record`); the variables are
    the joint coordinates that mimic nothing, in their order. ``mimic``: the couplings that
    are not locked."""
    driving = {f["value"] for f in frames if isinstance(f["value"], str)}
    for name, (leader, _, _) in mimic.items():
        where = f"mimic {name!r}"
        if name not in driving:
            raise ModelError(f"{where}: not a variable that drives a frame")
        if leader not in joint_names:
            raise ModelError(f"{where}: unknown leader variable {leader!r}")
        if leader in mimic:
            raise ModelError(f"{where}: its leader {leader!r} mimics {mimic[leader][0]!r} itself "
                             "(a mimic of a mimic is refused)")
    if mimic and vc:
        raise ModelError("velocity constraints on a system with mimic variables are not supported")
    config_names = [n for n in joint_names if n not in mimic]
    ridx = {n: i for i, n in enumerate(config_names)}
    nj = len(joint_names)
    src, mul, off = np.empty(nj, np.int64), np.ones(nj), np.zeros(nj)
    for j, n in enumerate(joint_names):
        if n in mimic:
            leader, mul[j], off[j] = mimic[n]
            src[j] = ridx[leader]
        else:
            src[j] = ridx[n]
    return src, mul, off, list(joint_names), config_names


def _locks(system: System) -> tuple[dict, dict]:
    """``(locked, mimic)``: every locked variable with its value (the mimics of a locked leader
    at ``multiplier * value + offset``), checked against the frames and the limits, and the
    couplings that remain."""
    driving = {f["value"] for f in system._frames if isinstance(f["value"], str)}
    locked = {}
    for name, value in system._locked.items():
        where = f"lock {name!r}"
        if name not in driving:
            raise ModelError(f"{where}: not a variable that drives a frame")
        if name in system._mimic:
            raise ModelError(f"{where}: it mimics {system._mimic[name][0]!r}; lock {system._mimic[name][0]!r}")
        lim = system._limits.get(name)
        if lim is not None and not lim["lower"] <= value <= lim["upper"]:
            raise ModelError(f"{where}: value {value} is outside its limits [{lim['lower']}, {lim['upper']}]")
        locked[name] = value
    for name, (leader, mul, off) in system._mimic.items():
        if leader in locked:
            locked[name] = mul * locked[leader] + off
    return locked, {n: c for n, c in system._mimic.items() if n not in locked}


def _spring_polynomial(s: dict, where: str) -> np.ndarray:
    """The force polynomial ``[c0, c1, ...]`` of a spring on a variable: ``[0, k]`` for
    ``stiffness: k``, else its ``polynomial``, checked."""
    stiffness, poly = s.get("stiffness"), s.get("polynomial")
    if stiffness is not None and poly is not None:
        raise ModelError(f"{where}: give either stiffness (linear) or polynomial, not both "
                         f"(stiffness={stiffness!r}, polynomial={poly!r})")
    if stiffness is None and poly is None:
        raise ModelError(f"{where}: missing required key 'stiffness' (linear) or 'polynomial' "
                         "(force coefficients [c0, c1, ...], lowest order first)")
    if stiffness is not None:
        return np.array([0.0, _number(stiffness, f"{where}.stiffness", nonnegative=True)])
    bad = ModelError(f"{where}: polynomial must be a non-empty list of finite numbers [c0, c1, ...] "
                     f"(lowest order first), got {poly!r}")
    if isinstance(poly, (str, bytes, dict)):
        raise bad
    try:
        coef = np.array(poly, dtype=float)
    except (TypeError, ValueError):
        raise bad from None
    if coef.ndim != 1 or coef.size == 0:
        raise bad
    for k, c in enumerate(coef):
        if not math.isfinite(c):
            raise ModelError(f"{where}.polynomial[{k}]: must be finite, got {cast(list, poly)[k]!r}")
    return coef


def _spring_coefficients(polys: list) -> np.ndarray:
    """The springs' polynomials as rows of one array, padded with zeros (at least [c0, c1])."""
    width = max([2] + [p.size for p in polys])
    coef = np.zeros((len(polys), width))
    for s, p in enumerate(polys):
        coef[s, :p.size] = p
    return coef


def _req(d: dict, key: str, where: str):
    if key not in d or d[key] is None:
        raise ModelError(f"{where}: missing required key {key!r}")
    return d[key]


def _check_keys(d: dict, allowed: set, where: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ModelError(f"{where}: unknown key(s) {unknown}")
