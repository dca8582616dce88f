"""The model compiler: a :class:`core.System`'s description (frames and elements, by name) to
its immutable :class:`Model` record (:mod:`core.model.record`), the arrays every kernel reads.

Each kind of element has a check of what it says by itself (``check_constraint``,
``check_spring``, ...: its keys, numbers and axes), run when it is added
(``System.add_*``), and a compiling function that resolves what it refers to (frames and
variables, by name) into rows of the record (``_holonomic``, ``_springs``, ...), run by
:func:`compile_system` in the record's order: frames in topological order (parents first),
the configuration variables (frames, then variable-length constraints and kinematic variables),
the coupling of mimic variables, the tree's index arrays, then every element kind in turn. A
mistake is a :class:`ModelError` naming the element (``spring 2 (frames).stiffness: must be
non-negative, got -1.0``).
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any, cast

import numpy as np

from core.base.linalg import tree_index
from core.errors import ModelError
from core.model.inertia import MergedBody, check_inertia
from core.model.record import (
    HC_COINCIDE,
    HC_DIRECTION,
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
from core.validation import first_non_number

TRANSFORM_KINDS = {"tx": KIND_TX, "ty": KIND_TY, "tz": KIND_TZ,
                   "rx": KIND_RX, "ry": KIND_RY, "rz": KIND_RZ}
AXES = {"x": 0, "y": 1, "z": 2}
WRENCH_COMPONENTS = ("fx", "fy", "fz", "mx", "my", "mz")


# ------------------------------------------------------------------------------------ values
def as_rotation(spec: Any, where: str) -> np.ndarray:
    """A rotation matrix from ``rpy: [r, p, y]`` (fixed axes x then y then z) or a 3x3 matrix."""
    arr = as_numbers(spec, where)
    if arr.shape in ((3,), (3, 3)) and not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: rotation must be finite numbers, got {spec!r}")
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


def _not_a_number(where: str, value: Any) -> ModelError:
    """The error for ``value`` where a number belongs (a boolean says how YAML made it one)."""
    hint = (" (a boolean: YAML reads true, false, yes, no, on, off as booleans)"
            if isinstance(value, (bool, np.bool_)) else "")
    return ModelError(f"{where}: expected a number, got {value!r}{hint}")


def as_number(value: Any, where: str, positive: bool = False, nonnegative: bool = False,
              finite: bool = True) -> float:
    """``value`` as a float (``finite``: a finite one): a number or a string that ``float``
    reads (YAML reads ``1e-3`` as a string), not a boolean; else a ModelError naming ``where``
    and the value."""
    if isinstance(value, (bool, np.bool_)):
        raise _not_a_number(where, value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _not_a_number(where, value) from None
    if finite and not math.isfinite(x):
        raise ModelError(f"{where}: must be finite, got {value!r}")
    if positive and x <= 0:
        raise ModelError(f"{where}: must be positive, got {x}")
    if nonnegative and x < 0:
        raise ModelError(f"{where}: must be non-negative, got {x}")
    return x


def as_numbers(spec: Any, where: str) -> np.ndarray:
    """``spec``, a (nested) list of numbers, as a float array (the entries as :func:`as_number`
    reads them). An entry that is a boolean or no number (``None``, a list in a row of numbers)
    is a ModelError naming ``where[index]`` and the entry; what is no list (a single value, a
    mapping) comes back as an empty array, for the caller's message on the shape."""
    if isinstance(spec, (bool, np.bool_)):
        raise _not_a_number(where, spec)
    bad = first_non_number(spec, booleans=False, strings=True)
    if bad is not None:
        index, entry = bad
        if index:
            raise _not_a_number(f"{where}{list(index)}", entry)
        return np.zeros(0)
    try:
        return np.asarray(spec, dtype=float)
    except (TypeError, ValueError, OverflowError):
        return np.zeros(0)


def as_axis(value: Any, where: str) -> int:
    if value not in AXES:
        raise ModelError(f"{where}: axis must be one of x, y, z, got {value!r}")
    return AXES[value]


def as_inertia(spec: Any, where: str, policy: str) -> np.ndarray:
    arr = as_numbers(spec, where)
    if arr.shape == (3,):
        arr = np.diag(arr)
    if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: inertia must be [Ixx, Iyy, Izz] or a finite 3x3 matrix, got {spec!r}")
    if not np.allclose(arr, arr.T, atol=1e-12):
        raise ModelError(f"{where}: inertia matrix must be symmetric")
    return check_inertia(arr, where, policy, stacklevel=5)



def plane_normal(normal: Any, where: str) -> np.ndarray:
    """A plane constraint's normal given as a vector: unit, from three finite numbers, nonzero."""
    n = as_numbers(normal, where)
    if n.shape != (3,) or not np.all(np.isfinite(n)) or not np.linalg.norm(n) > 0:
        raise ModelError(f"{where}: must be x, y, z or a nonzero vector of 3 finite numbers, got {normal!r}")
    return n / np.linalg.norm(n)


def spring_polynomial(s: dict, where: str) -> np.ndarray:
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
        return np.array([0.0, as_number(stiffness, f"{where}.stiffness", nonnegative=True)])
    bad = ModelError(f"{where}: polynomial must be a non-empty list of finite numbers [c0, c1, ...] "
                     f"(lowest order first), got {poly!r}")
    if isinstance(poly, (str, bytes, dict)):
        raise bad
    coef = as_numbers(poly, f"{where}.polynomial")
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


# ------------------------------------------------------------------- elements, checked when added
def check_constraint(c: dict, ci: int) -> None:
    """A holonomic constraint's own keys and numbers (its frames are resolved when compiling)."""
    where = f"constraint {ci} ({c['type']})"
    t = c["type"]
    _check_keys(c, {"type", "frame1", "frame2", "distance", "frame", "plane_frame", "normal",
                    "offset", "axes", "name"}, where)
    if t == "distance":
        _req(c, "frame1", where), _req(c, "frame2", where)
        d = _req(c, "distance", where)
        if not isinstance(d, str):
            as_number(d, f"{where}.distance", nonnegative=True)
    elif t == "plane":
        _req(c, "frame", where)
        normal = c.get("normal", "z")
        if isinstance(normal, str):
            as_axis(normal, f"{where}.normal")
        else:
            plane_normal(normal, f"{where}.normal")
        as_number(c.get("offset", 0.0), f"{where}.offset")
    else:  # coincide
        _req(c, "frame1", where), _req(c, "frame2", where)
        axes = c.get("axes", ["x", "y", "z"])
        if isinstance(axes, str) or not axes:
            raise ModelError(f"{where}: axes must be a non-empty list such as [x, y]")
        for a in axes:
            as_axis(a, f"{where}.axes")


def check_velocity_constraint(c: dict, ci: int) -> None:
    """A velocity constraint's own keys and axis."""
    where = f"velocity constraint {ci}"
    _check_keys(c, {"type", "frame", "axis", "name"}, where)
    if _req(c, "frame", where) == WORLD:
        raise ModelError(f"{where}: the world frame cannot move")
    as_axis(_req(c, "axis", where), f"{where}.axis")


def check_spring(s: dict, si: int) -> None:
    """A spring's own keys and numbers."""
    where = f"spring {si} ({s['type']})"
    if s["type"] == "config":
        _check_keys(s, {"type", "config", "stiffness", "polynomial", "rest", "name"}, where)
        _req(s, "config", where)
        spring_polynomial(s, where)
        as_number(s.get("rest", 0.0), f"{where}.rest")
    else:
        _check_keys(s, {"type", "frame1", "frame2", "stiffness", "rest_length", "name"}, where)
        _req(s, "frame1", where), _req(s, "frame2", where)
        as_number(_req(s, "stiffness", where), f"{where}.stiffness", nonnegative=True)
        as_number(s.get("rest_length", 0.0), f"{where}.rest_length", nonnegative=True)


def _damper_where(d: dict, di: int) -> str:
    return f"damper {di}" + (f" ({d['name']!r})" if d["name"] else "")


def check_damper(d: dict, di: int) -> None:
    """A damper's two distinct frames and its coefficient."""
    where = _damper_where(d, di)
    if d["frame1"] == d["frame2"]:
        raise ModelError(f"{where}: frame1 and frame2 are both {d['frame1']!r}: a damper needs two frames")
    as_number(d["coefficient"], f"{where}.coefficient", nonnegative=True)


def _wrench_where(w: dict, wi: int) -> str:
    return f"wrench {wi}" + (f" ({w['name']!r})" if w["name"] else "")


def check_wrench(w: dict, wi: int) -> np.ndarray:
    """A constant wrench's value (six finite numbers), not on the world frame."""
    where = _wrench_where(w, wi)
    if w["frame"] == WORLD:
        raise ModelError(f"{where}: a wrench on the world frame does nothing")
    value = as_numbers(w["wrench"], f"{where}.wrench")
    if value.shape != (6,) or not np.all(np.isfinite(value)):
        raise ModelError(f"{where}: wrench must be six finite numbers [fx, fy, fz, mx, my, mz], "
                         f"got {w['wrench']!r}")
    return value


def check_input(inp: dict, ii: int) -> None:
    """An input's own keys and axis (its variable or frame is resolved when compiling)."""
    where = f"input {ii} ({inp['type']})"
    if inp["type"] == "torque":
        _check_keys(inp, {"type", "config", "name"}, where)
        _req(inp, "config", where)
        return
    _check_keys(inp, {"type", "frame", "axis", "name"}, where)
    if _req(inp, "frame", where) == WORLD:
        raise ModelError(f"{where}: a wrench on the world frame does nothing")
    if inp["type"] != "wrench":
        as_axis(_req(inp, "axis", where), f"{where}.axis")


# ------------------------------------------------------------------------------- the compiler
Compiled = namedtuple("Compiled", ["model", "config_names", "input_names", "frame_names", "joint_names",
                                   "locked", "inputs", "contacts"])
#: A compiled contact: its name, kind (``"point"`` or ``"frame"``), the index of its frame
#: ``<name>@contact`` and its first holonomic row (3 rows for a point, 6 for a frame).
Contact = namedtuple("Contact", ["name", "kind", "frame", "row"])


class _Frames:
    """The frames in topological order, their indices by name, and the configuration variables in
    declaration order (more are added by constraints of variable length and kinematic variables)."""

    def __init__(self, system, locked: dict):
        own = [dict(f, value=locked[f["value"]]) if isinstance(f["value"], str) and f["value"] in locked
               else f for f in system._frames]
        declared = own + _plane_frames(system) + _contact_frames(system, own)
        self.frames = [declared[i] for i in _topological_order(declared)]
        self.names = [f["name"] for f in self.frames]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.config_names: list[str] = []
        for f in own:                   # declaration order, not topological
            if isinstance(f["value"], str) and f["value"] not in self.config_names:
                self.config_names.append(f["value"])

    def ref(self, name, where: str) -> int:
        """The index of frame ``name`` (-1: the world)."""
        if name == WORLD:
            return -1
        if name not in self.index:
            raise ModelError(f"{where}: unknown frame {name!r}")
        return self.index[name]

    def extra_config(self, name, where: str) -> int:
        """The index of variable ``name``, added if no frame declared it."""
        if not isinstance(name, str) or not name:
            raise ModelError(f"{where}: expected a configuration variable name, got {name!r}")
        if name not in self.config_names:
            self.config_names.append(name)
        return self.config_names.index(name)


def _holonomic(system, fr: _Frames) -> list[tuple]:
    """Rows ``(kind, f1, f2, axis, value, length variable)`` of the holonomic constraints
    (a constraint of variable length adds its variable)."""
    hc = []
    for ci, c in enumerate(system._constraints):
        check_constraint(c, ci)
        where = f"constraint {ci} ({c['type']})"
        if c["type"] == "distance":
            f1, f2, d = fr.ref(c["frame1"], where), fr.ref(c["frame2"], where), c["distance"]
            if isinstance(d, str):
                hc.append((HC_DISTANCE, f1, f2, 0, 0.0, fr.extra_config(d, where)))
            else:
                hc.append((HC_DISTANCE, f1, f2, 0, as_number(d, f"{where}.distance", nonnegative=True), -1))
        elif c["type"] == "plane":
            f1 = fr.ref(c["frame"], where)
            normal = c.get("normal", "z")
            if isinstance(normal, str):
                f2, ax = fr.ref(c.get("plane_frame", WORLD), where), as_axis(normal, f"{where}.normal")
            else:       # the frame _plane_frames added, its z axis along the normal
                f2, ax = fr.ref(_plane_frame_name(c, ci), where), AXES["z"]
            hc.append((HC_PLANE, f1, f2, ax, as_number(c.get("offset", 0.0), f"{where}.offset"), -1))
        else:  # coincide
            f1, f2 = fr.ref(c["frame1"], where), fr.ref(c["frame2"], where)
            hc += [(HC_COINCIDE, f1, f2, as_axis(a, f"{where}.axes"), 0.0, -1)
                   for a in c.get("axes", ["x", "y", "z"])]
    return hc


def _velocity(system, fr: _Frames) -> list[tuple]:
    """Rows ``(frame, axis)`` of the velocity constraints."""
    vc = []
    for ci, c in enumerate(system._velocity_constraints):
        check_velocity_constraint(c, ci)
        where = f"velocity constraint {ci}"
        vc.append((fr.ref(c["frame"], where), as_axis(c["axis"], f"{where}.axis")))
    return vc


def _tree(frames: list[dict], cidx: dict, nj: int) -> dict:
    """The model's frame and joint arrays: parents, transforms, the nearest joint above each
    frame, every joint's ancestors and the tree's index lists."""
    nf = len(frames)
    index = {f["name"]: i for i, f in enumerate(frames)}
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
    return dict(frame_parent=frame_parent, frame_kind=frame_kind, frame_qindex=frame_qindex,
                frame_value=frame_value,
                frame_offset_R=np.array([f["offset_R"] for f in frames]).reshape(nf, 3, 3),
                frame_offset_p=np.array([f["offset_p"] for f in frames]).reshape(nf, 3),
                **_kernel_bodies(frames, frame_parent, frame_qindex),
                frame_joint=frame_joint, joint_frame=joint_frame, anc_ptr=anc_ptr, anc_idx=anc_idx,
                joint_depth=joint_depth, tree_order=tree_order, tree_anc_ptr=tree_anc_ptr,
                tree_anc_idx=tree_anc_idx, tree_desc_ptr=tree_desc_ptr, tree_desc_idx=tree_desc_idx)


def _springs(system, fr: _Frames, cidx: dict, locked: dict) -> tuple[list, list]:
    """``(springs on variables, springs between frames)``: ``(q, polynomial, rest)`` and
    ``(f1, f2, k, rest_length)``; a spring on a locked variable is absorbed by the lock."""
    springs_q, fsprings = [], []
    for si, s in enumerate(system._springs):
        check_spring(s, si)
        where = f"spring {si} ({s['type']})"
        if s["type"] == "config":
            q = s["config"]
            if q in locked:
                continue
            if q not in cidx:
                raise ModelError(f"{where}: unknown configuration variable {q!r}")
            springs_q.append((cidx[q], spring_polynomial(s, where), as_number(s.get("rest", 0.0), f"{where}.rest")))
        else:
            fsprings.append((fr.ref(s["frame1"], where), fr.ref(s["frame2"], where),
                             as_number(s["stiffness"], f"{where}.stiffness", nonnegative=True),
                             as_number(s.get("rest_length", 0.0), f"{where}.rest_length", nonnegative=True)))
    return springs_q, fsprings


def _dampers(system, fr: _Frames) -> list[tuple]:
    """Rows ``(f1, f2, c)`` of the dampers between frames."""
    rows = []
    for di, d in enumerate(system._dampers):
        check_damper(d, di)
        where = _damper_where(d, di)
        rows.append((fr.ref(d["frame1"], where), fr.ref(d["frame2"], where),
                     as_number(d["coefficient"], f"{where}.coefficient", nonnegative=True)))
    return rows


def _joint_values(system, cidx: dict, locked: dict, nj: int) -> tuple[np.ndarray, np.ndarray]:
    """``(damping, armature)`` per joint coordinate (a locked variable's are dropped)."""
    damping, armature = np.zeros(nj), np.zeros(nj)
    for what, values, out in (("damping", system._damping, damping), ("armature", system._armature, armature)):
        for q, amount in values.items():
            if q in locked:
                continue
            if q not in cidx:
                raise ModelError(f"{what}: unknown configuration variable {q!r}")
            out[cidx[q]] = amount
    return damping, armature


def _inputs(system, fr: _Frames, cidx: dict, locked: dict, mimic: dict) -> tuple[list, list, list]:
    """``(rows (kind, q, frame, component), names, the inputs kept)``: a torque on a locked
    variable is absorbed by the lock, a wrench expands to its six components."""
    inputs, names, kept = [], [], []
    for ii, inp in enumerate(system._inputs):
        check_input(inp, ii)
        where = f"input {ii} ({inp['type']})"
        t = inp["type"]
        if t == "torque":
            q = inp["config"]
            if q in locked:
                continue
            if q not in cidx:
                raise ModelError(f"{where}: unknown configuration variable {q!r}")
            if q in mimic:
                raise ModelError(f"{where}: {q!r} mimics {mimic[q][0]!r} (no coordinate of "
                                 "its own): it takes no input")
            inputs.append((INPUT_TORQUE, cidx[q], -1, 0))
            names.append(inp["name"] or q)
            kept.append(inp)
            continue
        fname = inp["frame"]
        f = fr.ref(fname, where)
        comps = list(range(6)) if t == "wrench" else \
            [as_axis(inp["axis"], f"{where}.axis") + (0 if t == "force" else 3)]
        kept.append(inp)
        for comp in comps:
            inputs.append((INPUT_WRENCH, -1, f, comp))
            base = inp["name"] or fname
            names.append(f"{base}.{WRENCH_COMPONENTS[comp]}" if (t == "wrench" or not inp["name"]) else base)
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ModelError(f"inputs: duplicate input names {dup}; give each a distinct 'name'")
    return inputs, names, kept


def _constant_wrenches(system, fr: _Frames) -> list[tuple]:
    """Rows ``(frame, component, value)`` of the constant wrenches' nonzero components."""
    rows = []
    for wi, w in enumerate(system._wrenches):
        value = check_wrench(w, wi)
        f = fr.ref(w["frame"], _wrench_where(w, wi))
        rows += [(f, comp, float(value[comp])) for comp in range(6) if value[comp] != 0.0]
    return rows


def _kinematic(system, cidx: dict, mimic: dict) -> None:
    """Every kinematic (prescribed) variable is a variable, and mimics nothing."""
    for k in system._kinematic:
        if k not in cidx:
            raise ModelError(f"kinematic: unknown configuration variable {k!r}")
        if k in mimic:
            raise ModelError(f"kinematic: {k!r} mimics {mimic[k][0]!r}: it cannot be prescribed")


def _column(rows: list, i: int, dtype) -> np.ndarray:
    return np.array([r[i] for r in rows], dtype=dtype)


def compile_system(system) -> Compiled:
    """The model record and the names of a system's description (reads, never writes, it): the
    frames in topological order, then each kind of element in turn."""
    locked, mimic = _locks(system)
    fr = _Frames(system, locked)
    hc = _holonomic(system, fr)                  # (may add variables: variable-length distances)
    for name in system._kinematic:
        if name in locked:
            raise ModelError(f"kinematic: {name!r} is locked: a locked variable cannot be prescribed")
        fr.extra_config(name, "kinematic")
    contacts = _contact_rows(system, fr, hc)
    vc = _velocity(system, fr)
    joint_names = fr.config_names                # joint coordinates (all variables, coupled too)
    nj, nf = len(joint_names), len(fr.frames)
    cidx = {n: i for i, n in enumerate(joint_names)}
    mimic_src, mimic_mul, mimic_off, joint_names, config_names = _coupling(mimic, joint_names, fr.frames, vc)
    tree = _tree(fr.frames, cidx, nj)
    springs_q, fsprings = _springs(system, fr, cidx, locked)
    dampers = _dampers(system, fr)
    damping, armature = _joint_values(system, cidx, locked, nj)
    inputs, input_names, kept = _inputs(system, fr, cidx, locked, mimic)
    cwrenches = _constant_wrenches(system, fr)
    _kinematic(system, cidx, mimic)
    col = _column
    model = dict(
        nq=len(config_names), nj=nj, nf=nf, nu=len(inputs), nh=len(hc), nv=len(vc), **tree,
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
    return Compiled(Model(*[model[f] for f in MODEL_FIELDS]), config_names, input_names, fr.names, joint_names,
                    locked, kept, contacts)


# ------------------------------------------------------------------ the compiler's helpers
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


def _plane_frames(system) -> list[dict]:
    """The massless constant frames of plane constraints whose normal is a vector: each under
    its plane frame, rotated so that its z axis is the normal (any rotation that does it: the
    constraint reads only that axis)."""
    extra = []
    for ci, c in enumerate(system._constraints):
        normal = c.get("normal", "z")
        if c["type"] != "plane" or isinstance(normal, str):
            continue
        where = f"constraint {ci} (plane).normal"
        z = plane_normal(normal, where)
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


def moving_body(frames: dict, name: str) -> str | None:
    """The frame whose joint moves frame ``name`` (``frames``: the descriptions by name): ``name``
    or its nearest ancestor driven by a variable; None when it is fixed to the world (or to a
    root frame without a joint, such as a floating base's own frame)."""
    while not (frames[name]["kind"] is not None and isinstance(frames[name]["value"], str)):
        if frames[name]["parent"] not in frames:
            return None
        name = frames[name]["parent"]
    return name


def _contact_frames(system, own: list[dict]) -> list[dict]:
    """The massless constant frames of the contacts: ``<name>@contact`` where the contact's
    frame or URDF link is, and for a frame contact ``<name>@contact_x``, ``_y``, ``_z`` one metre
    along its axes (:mod:`core.continuous.contacts`)."""
    frames = {f["name"]: f for f in own}
    taken = set(frames)
    extra: list[dict] = []
    bodies: dict[str, str] = {}
    for c in system._contacts:
        where = f"contact {c['name']!r}"
        if c["frame"] in frames:
            parent, R, p = c["frame"], np.eye(3), np.zeros(3)
        elif c["frame"] in system.links:
            parent, R, p = system.links[c["frame"]]
        else:
            raise ModelError(f"{where}: unknown frame {c['frame']!r}")
        body = None if parent == WORLD else moving_body(frames, parent)
        if body is None:
            raise ModelError(f"{where}: frame {c['frame']!r} is fixed to the world (no joint moves it); a contact "
                             "holds a moving frame")
        if body in bodies:
            raise ModelError(f"{where}: frame {c['frame']!r} is on the rigid body of frame {body!r}, which "
                             f"contact {bodies[body]!r} already holds (redundant rows: hold a body once, with "
                             "kind='frame' for its whole pose)")
        bodies[body] = c["name"]
        name = f"{c['name']}@contact"
        helpers = [(name, parent, np.asarray(R, float), np.asarray(p, float))]
        if c["kind"] == "frame":
            helpers += [(f"{name}_{a}", name, np.eye(3), np.eye(3)[i]) for i, a in enumerate("xyz")]
        for hname, hparent, hR, hp in helpers:
            if hname in taken:
                raise ModelError(f"{where}: frame name {hname!r} is taken")
            taken.add(hname)
            extra.append(dict(name=hname, parent=hparent, kind=None, value=0.0, mass=0.0, inertia=np.zeros((3, 3)),
                              com=np.zeros(3), offset_R=hR, offset_p=hp))
    return extra


def _contact_rows(system, fr: _Frames, hc: list) -> list:
    """Append the contacts' rows to ``hc``: a point's three ``t . p`` (world axes), then for a
    frame the three ``t . (p_a - p)`` of its unit points, ``a`` = y, z, x with ``t`` = the
    anchor's z, x, y axis (:mod:`core.continuous.contacts`); their compiled :class:`Contact`."""
    out = []
    for c in system._contacts:
        f = fr.index[f"{c['name']}@contact"]
        out.append(Contact(c["name"], c["kind"], f, len(hc)))
        hc += [(HC_DIRECTION, f, -1, 0, 0.0, -1)] * 3
        if c["kind"] == "frame":
            hc += [(HC_DIRECTION, fr.index[f"{c['name']}@contact_{a}"], f, 0, 0.0, -1) for a in "yzx"]
    return out


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


def _locks(system) -> tuple[dict, dict]:
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


