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
record of arrays that the kernels read; per-evaluation scratch lives in its :class:`Workspace`
(:mod:`core.tree.workspace`).

:class:`System` is a façade over three rooms, each owning one idea:

* the description and its builders, ``add_*``, ``lock``, ``set_*``
  (:class:`core.model.description.Description`: each element checked when added);
* the compile step, here: :meth:`System.compile` turns the description into the ``Model`` (through
  :func:`core.model.compile.compile_system`, or :func:`core.continuous.floating.chart_system` for a
  quaternion base) and keeps the names it fixes; the views that need them (names, limits, locks)
  and the configuration space (``neutral``, ``integrate``, ``difference``) are here too;
* the numeric methods ``qdd``, ``linearize``, ... (:class:`core.continuous.evaluation.ContinuousDynamics`,
  handing over to :mod:`core.continuous.dynamics`, :mod:`core.continuous.stacked`,
  :mod:`core.continuous.floating` and :mod:`core.continuous.minimal`).
"""
from __future__ import annotations

import math
from typing import cast

import numpy as np

from core.continuous import floating
from core.continuous.evaluation import ContinuousDynamics
from core.errors import ModelError
from core.model.compile import compile_system
from core.model.description import Description
from core.model.record import INPUT_TORQUE, Model
from core.tree.workspace import Workspace


class System(Description, ContinuousDynamics):
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

    The builders are :class:`~core.model.description.Description`'s, the numeric methods
    :class:`~core.continuous.evaluation.ContinuousDynamics`'s; the compile step, the names and the
    configuration space are this class's own.
    """

    def __init__(self, gravity=(0.0, 0.0, -9.81), name: str = "system", *, inertia: str = "warn"):
        super().__init__(gravity, name, inertia=inertia)
        # what compile() fixes (the description itself: Description.__init__)
        self._chart: System | None = None                    # the chart system of a quaternion base
        self._workspace: Workspace | None = None
        self._config_names: list[str] = []
        self._joint_names: list[str] = []
        self._input_names: list[str] = []
        self._frame_names: list[str] = []
        self._kinematic_set: set[str] = set()
        self._locked_values: dict[str, float] = {}
        self._kept_inputs: list[dict] = []
        self._contact_rows: list = []                        # compiled contacts (core.model.compile.Contact)
        self._anchors_from_base = False      # a chart system: its contacts are placed by its base's calls

    # ----------------------------------------------------------------------------- pickling
    #: what compiling makes (rebuilt from the description after unpickling, never pickled)
    _COMPILED = ("_model", "_chart", "_workspace", "_config_names", "_joint_names", "_input_names",
                 "_frame_names", "_kinematic_set", "_locked_values", "_kept_inputs", "_contact_rows")

    def __getstate__(self) -> dict:
        """A system pickles by its description (the elements added, the names, the links): the
        compiled model and its kernels' data are left out and made again on the first numeric call
        after unpickling, from the same description, so results are the same to the last bit. The
        kernels then load from numba's on-disk cache where it is warm (``NUMBA_CACHE_DIR``)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._COMPILED}

    def __setstate__(self, state: dict) -> None:
        System.__init__(self, state["gravity"], state["name"], inertia=state["inertia_policy"])
        self.__dict__.update(state)

    # ----------------------------------------------------------------------------- what compiling fixes
    @property
    def armature(self) -> dict[str, float]:
        """Rotor inertias by variable (:meth:`add_armature`), locked variables left out."""
        self.compile()
        return {n: a for n, a in self._armature.items() if n not in self._locked_values}

    @property
    def locked_joints(self) -> dict[str, float]:
        """The locked variables and their values (:meth:`lock`), coupled variables of a locked
        leader included."""
        self.compile()
        return dict(self._locked_values)

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
                         "_kinematic_set", "_workspace", "_contact_rows"):
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
            self._contact_rows = compiled.contacts
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
    def contacts(self) -> list[tuple[str, str, int]]:
        """The contacts (:meth:`add_contact`) in the order added: ``(name, kind, row)`` with
        ``row`` the first of their rows in :meth:`constraint_forces` (3 for a point, 6 for a
        frame; see :mod:`core.continuous.contacts`)."""
        self.compile()
        return [(c.name, c.kind, c.row) for c in self._contact_rows]

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
