"""Loading a :class:`System` from a model description: a YAML file, a YAML string or a dict.

The keys mirror :class:`System`'s building methods (see "Models" in docs/guide.md).
"""
from __future__ import annotations

import os

from .errors import ModelError
from .model import WORLD
from .system import System

#: Largest model text or file accepted (bytes), checked before it is parsed.
MAX_MODEL_BYTES = 5_000_000
#: Deepest nesting of mappings and lists in a YAML model (a model needs about 5).
MAX_YAML_DEPTH = 32

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


def read_yaml(text: str, where: str = "model"):
    """The plain data of the YAML ``text`` (mappings, lists, strings, numbers): PyYAML's safe
    loader, which constructs no objects of its own, after a scan of its events that refuses
    what could exhaust the host before anything is built: more than :data:`MAX_MODEL_BYTES`,
    nesting deeper than :data:`MAX_YAML_DEPTH` (deep nesting exhausts Python's stack) and
    aliases (``*name``: shared references that expand into huge arrays). Every problem is a
    :class:`ModelError` naming ``where`` and the line."""
    import yaml  # imported on use: loading the library needs no YAML parser
    if not isinstance(text, str):
        raise ModelError(f"{where}: expected YAML text, got {type(text).__name__}")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_MODEL_BYTES:
        raise ModelError(f"{where}: {size} bytes exceeds the size limit of {MAX_MODEL_BYTES} bytes")
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise ModelError(f"{where}: line {event.start_mark.line + 1}: nested more than "
                                     f"{MAX_YAML_DEPTH} levels deep (a model needs a few)")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                raise ModelError(f"{where}: line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) "
                                 "are not accepted in models; write the values out")
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ModelError(f"{where}: not valid YAML: {at}{exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ModelError(f"{where}: not valid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
    except (RecursionError, MemoryError) as exc:
        raise ModelError(f"{where}: the YAML is too large or too deeply nested to load ({type(exc).__name__})") \
            from None


def _read_spec(source):
    if isinstance(source, dict):
        return source
    if isinstance(source, (str, os.PathLike)) and os.path.exists(str(source)):
        path = os.fspath(source)
        if os.path.getsize(path) > MAX_MODEL_BYTES:
            raise ModelError(f"model file {path!r}: {os.path.getsize(path)} bytes exceeds the size limit of "
                             f"{MAX_MODEL_BYTES} bytes")
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read(MAX_MODEL_BYTES + 1)
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"model file {path!r}: cannot read ({exc})") from None
        return read_yaml(text, f"model file {path!r}")
    if isinstance(source, str) and ("\n" in source or ":" in source):
        return read_yaml(source, "model text")
    raise ModelError(f"load_system: {source!r} is neither an existing file, a YAML string nor a dict")
