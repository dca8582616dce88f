"""Loading a :class:`System` from a model description: a YAML file, a YAML string or a dict.

The keys mirror :class:`System`'s building methods (see "Models" in docs/guide.md).
"""
from __future__ import annotations

import os

from .errors import ModelError
from .model import WORLD
from .system import System

_TOP_KEYS = {"name", "gravity", "frames", "constraints", "springs", "damping", "dampers", "inputs", "wrenches",
             "kinematic", "mimic", "armature", "locked"}


def load_system(source, *, inertia: str = "warn") -> System:
    """Build a :class:`System` from a YAML file path, a YAML string or a dict; a ``.urdf`` path
    or URDF XML text goes to :func:`core.load_urdf` (with its defaults). A bare file name that
    is not a file here but a model packaged with core (:func:`core.model_names`, e.g.
    ``"cartpole.yaml"``) loads that model. ``inertia`` is the inertia policy (``"warn"``,
    ``"strict"`` or ``"repair"``, :mod:`core.inertia`).

    Minimal example::

        gravity: [0, -9.8, 0]
        frames:
          - {name: link1, parent: world, rz: theta1}
          - {name: A, parent: link1, ty: -1.0, mass: 1.0}
        constraints:
          - {type: distance, frame1: A, frame2: C, distance: 1.0}
        inputs:
          - {type: torque, config: theta1}
    """
    from .data import model_file
    from .urdf import is_urdf_source, load_urdf
    if isinstance(source, str) and not os.path.exists(source):
        source = model_file(source) or source
    if is_urdf_source(source):
        return load_urdf(source, inertia=inertia)
    spec = _read_spec(source)
    if not isinstance(spec, dict):
        raise ModelError(f"a model must be a mapping with keys {sorted(_TOP_KEYS)}")
    unknown = sorted(set(spec) - _TOP_KEYS)
    if unknown:
        raise ModelError(f"model: unknown top-level key(s) {unknown}; allowed {sorted(_TOP_KEYS)}")
    system = System(gravity=spec.get("gravity", (0.0, 0.0, -9.81)), name=spec.get("name", "system"),
                    inertia=inertia)
    frames = spec.get("frames") or []
    if not isinstance(frames, list):
        raise ModelError("model: 'frames' must be a list")
    for i, f in enumerate(frames):
        if not isinstance(f, dict) or "name" not in f:
            raise ModelError(f"frames[{i}]: each frame needs a 'name'")
        f = dict(f)
        name = f.pop("name")
        system.add_frame(name, parent=f.pop("parent", WORLD), mass=f.pop("mass", 0.0),
                         inertia=f.pop("inertia", None), offset=f.pop("offset", None), com=f.pop("com", None),
                         **f)
    for i, c in enumerate(spec.get("constraints") or []):
        if not isinstance(c, dict) or "type" not in c:
            raise ModelError(f"constraints[{i}]: each constraint needs a 'type'")
        c = dict(c)
        system.add_constraint(c.pop("type"), **c)
    for i, s in enumerate(spec.get("springs") or []):
        if not isinstance(s, dict):
            raise ModelError(f"springs[{i}]: must be a mapping")
        s = dict(s)
        system.add_spring(s.pop("type", "config"), **s)
    damping = spec.get("damping") or []
    if isinstance(damping, dict):
        damping = [{"config": k, "coefficient": v} for k, v in damping.items()]
    for i, d in enumerate(damping):
        if not isinstance(d, dict) or "config" not in d or "coefficient" not in d:
            raise ModelError(f"damping[{i}]: needs 'config' and 'coefficient'")
        system.add_damping(d["config"], d["coefficient"])
    for d in _entries(spec, "dampers", ("frame1", "frame2", "coefficient"), ("name",)):
        system.add_damper(d["frame1"], d["frame2"], d["coefficient"], d.get("name"))
    for w in _entries(spec, "wrenches", ("frame", "wrench"), ("name",)):
        system.add_wrench(w["frame"], w["wrench"], w.get("name"))
    for c in _entries(spec, "mimic", ("config", "leader"), ("multiplier", "offset")):
        system.add_mimic(c["config"], c["leader"], c.get("multiplier", 1.0), c.get("offset", 0.0))
    for name, value in _mapping(spec, "armature").items():
        system.add_armature(name, value)
    for name, value in _mapping(spec, "locked").items():
        system.lock(name, value)
    for i, u in enumerate(spec.get("inputs") or []):
        if not isinstance(u, dict):
            raise ModelError(f"inputs[{i}]: must be a mapping")
        u = dict(u)
        system.add_input(u.pop("type", "torque"), name=u.pop("name", None), **u)
    if spec.get("kinematic"):
        system.set_kinematic(spec["kinematic"])
    system.compile()  # a malformed model fails here, at load time
    return system


def _entries(spec: dict, key: str, required: tuple, optional: tuple) -> list:
    """The list ``spec[key]``, each entry a mapping with every ``required`` key and nothing but
    those and the ``optional`` ones (else a ModelError naming the entry)."""
    entries = spec.get(key) or []
    for i, d in enumerate(entries):
        if not isinstance(d, dict) or set(d) - set(required) - set(optional) or not set(required) <= set(d):
            names = [repr(k) for k in required]
            raise ModelError(f"{key}[{i}]: needs {', '.join(names[:-1])} and {names[-1]} (and optionally "
                             f"{', '.join(repr(k) for k in optional)}), got {d!r}")
    return entries


def _mapping(spec: dict, key: str) -> dict:
    """``spec[key]``, a mapping ``{variable: number}`` (empty when absent)."""
    value = spec.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ModelError(f"{key}: expected a mapping {{variable: value}}, got {value!r}")
    return value


def _read_spec(source):
    if isinstance(source, dict):
        return source
    import yaml  # imported on use: loading the library needs no YAML parser
    if isinstance(source, (str, os.PathLike)) and os.path.exists(str(source)):
        with open(source, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    if isinstance(source, str) and ("\n" in source or ":" in source):
        return yaml.safe_load(source)
    raise ModelError(f"load_system: {source!r} is neither an existing file, a YAML string nor a dict")
