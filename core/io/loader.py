"""Loading a :class:`System` from a model description: a YAML or URDF file, a model packaged
with core, YAML or URDF text, or a dict. :func:`read_model` is the one place that decides what
a model argument names (the loader, the ``mechnode-linearize`` command and the mechnode node
use it).

The keys mirror :class:`System`'s building methods (see "Models" in docs/guide.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from core.errors import ModelError
from core.model.compile import as_number
from core.model.record import WORLD
from core.system import System
from core.validation import MAX_MODEL_BYTES, read_yaml

_TOP_KEYS = {"name", "gravity", "frames", "constraints", "contacts", "springs", "damping", "dampers", "inputs",
             "wrenches", "kinematic", "mimic", "armature", "locked"}


@dataclass(frozen=True)
class ModelText:
    """A model argument read, not parsed (:func:`read_model`).

    Attributes
    ----------
    text : str
        The model's YAML or URDF text.
    origin : str
        The file read, or ``"YAML text (N characters)"`` / ``"URDF text (N characters)"``.
    urdf : bool
        URDF (XML) rather than YAML.
    path : str or None
        The file read; None for text.
    """
    text: str                # the model's YAML or URDF text
    origin: str              # the file read, or "YAML text (N characters)" / "URDF text (N characters)"
    urdf: bool               # URDF (XML) rather than YAML
    path: str | None = None  # the file read; None for text


def is_model_text(source: str) -> bool:
    """Whether a model argument is model text rather than a file name: several lines, a YAML
    flow mapping (``{...}``) or XML."""
    return "\n" in source or source.lstrip().startswith(("{", "<"))


def model_origin(source: str) -> str:
    """How :func:`read_model` names a model argument in messages, without reading it: the
    argument itself for a file name, ``YAML text (N characters)`` or ``URDF text (N
    characters)`` for model text."""
    if not is_model_text(source):
        return source
    return f"{'URDF' if source.lstrip().startswith('<') else 'YAML'} text ({len(source)} characters)"


def _check_size(size: int, what: str) -> None:
    if size > MAX_MODEL_BYTES:
        raise ModelError(f"{what} has {size} bytes, more than the limit of {MAX_MODEL_BYTES} bytes "
                         "(MAX_MODEL_BYTES)")


def read_model(source) -> ModelText:
    """Read what a model argument names; nothing is parsed, built or executed.

    Model text (:func:`is_model_text`) is taken as it is; anything else names a file: the path
    as given (absolute, or relative to the working directory), then a model packaged with core
    (:func:`core.data.model_names`). URDF: a ``.urdf`` file, a file or text starting with ``<``;
    YAML otherwise.

    Parameters
    ----------
    source : str, os.PathLike or bytes
        A file name or model text; bytes are UTF-8 model text. At most :data:`MAX_MODEL_BYTES`,
        checked before anything is read or parsed.

    Returns
    -------
    ModelText

    Raises
    ------
    ModelError
        Not a non-empty string, path or bytes; bytes that are not UTF-8; text or a file above
        the size limit; a file that cannot be read; or nothing found (the message names the
        argument and where it was looked for).
    """
    from core.data import model_file, model_names
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if isinstance(source, bytes):       # (model text as bytes, e.g. a message's payload)
        _check_size(len(source), "the model text")
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelError(f"the model text is not UTF-8 ({exc})") from None
    if not isinstance(source, str) or not source.strip():
        shown = repr(source) if not isinstance(source, str) else "an empty string"
        raise ModelError(f"a model is a file name or model text (YAML or URDF), got {shown[:80]}")
    if is_model_text(source):
        _check_size(len(source.encode("utf-8", "surrogatepass")), "the model text")
        return ModelText(source, model_origin(source), source.lstrip().startswith("<"))
    packaged = None if os.path.isabs(source) else model_file(source)
    candidates = [source if os.path.isabs(source) else os.path.abspath(source)] + ([packaged] if packaged else [])
    path = next((c for c in candidates if os.path.isfile(c)), None)
    if path is None:
        looked = ", ".join(candidates + ([] if packaged or os.path.isabs(source)
                                         else [f"the packaged models {model_names()}"]))
        raise ModelError(f"model {source!r} is neither a model file (looked in {looked}) nor model text (YAML: "
                         "a mapping with frames, inputs, ...; or URDF); code references such as "
                         "'python:module.function' are not accepted")
    _check_size(os.path.getsize(path), f"model file {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MAX_MODEL_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"model file {path}: cannot read ({exc})") from None
    _check_size(len(text.encode("utf-8", "surrogatepass")), f"model file {path}")
    return ModelText(text, path, path.lower().endswith(".urdf") or text.lstrip().startswith("<"), path)


def load_system(source, *, inertia: str = "warn", locked=None, **urdf_options) -> System:
    """Build a :class:`System` from a model description.

    URDF goes to :func:`core.load_urdf`, which alone takes ``urdf_options``. A YAML model read
    from a file or text names it (its ``origin``) in every :class:`ModelError`.

    Minimal example::

        gravity: [0, -9.8, 0]
        frames:
          - {name: link1, parent: world, rz: theta1}
          - {name: A, parent: link1, ty: -1.0, mass: 1.0}
        constraints:
          - {type: distance, frame1: A, frame2: C, distance: 1.0}
        inputs:
          - {type: torque, config: theta1}

    Parameters
    ----------
    source : str, os.PathLike, bytes, ModelText or dict
        A model argument (:func:`read_model`: a YAML or URDF file, a model packaged with core
        such as ``"cartpole.yaml"``, YAML or URDF text), a :class:`ModelText` already read, or
        a dict (the YAML mapping).
    inertia : str
        The inertia policy: ``"warn"``, ``"strict"`` or ``"repair"`` (:mod:`core.model.inertia`).
    locked : dict, optional
        ``{variable: value}``: variables frozen (:meth:`System.lock`); in YAML, together with
        the model's own ``locked``, a variable locked at two values is an error.
    **urdf_options
        For a URDF model only: :func:`core.load_urdf`'s ``floating_base``, ``actuated``,
        ``mimic``, ...

    Returns
    -------
    System
        Compiled (a malformed model fails here, at load time).

    Raises
    ------
    ModelError
        A malformed model (a boolean, ``None`` or text where a number belongs, naming the
        element, the key and the value), an unreadable argument (:func:`read_model`) or a bad option
        (``urdf_options`` with a YAML or dict model, an unknown inertia policy, a variable locked
        at two values), naming the element.
    """
    if isinstance(source, dict):
        spec, origin = source, None
    else:
        model = source if isinstance(source, ModelText) else read_model(source)
        if model.urdf:
            from core.io.urdf import load_urdf
            return load_urdf(model.path or model.text, inertia=inertia, locked=locked, **urdf_options)
        spec, origin = read_yaml(model.text, f"model {model.origin}"), model.origin
    if urdf_options:
        raise ModelError(f"{', '.join(sorted(urdf_options))}: options of a URDF model (core.load_urdf), not of "
                         f"{f'model {origin}' if origin else 'a model given as a dict'}")
    try:
        return _build(spec, inertia, locked)
    except ModelError as exc:
        if origin is not None:
            exc.args = (f"model {origin}: {exc}",) + exc.args[1:]
        raise


def _build(spec, inertia: str, locked) -> System:
    """The :class:`System` of a model's YAML mapping."""
    if not isinstance(spec, dict):
        raise ModelError(f"expected a YAML mapping (frames, inputs, ...; keys {sorted(_TOP_KEYS)}), got "
                         f"{type(spec).__name__}")
    unknown = sorted(set(spec) - _TOP_KEYS)
    if unknown:
        raise ModelError(f"model: unknown top-level key(s) {unknown}; allowed {sorted(_TOP_KEYS)}")
    if locked:
        own = _mapping(spec, "locked")
        clash = sorted(n for n in set(own) & set(locked)
                       if as_number(own[n], f"locked.{n}") != as_number(locked[n], f"locked {n!r}"))
        if clash:
            raise ModelError(f"locked: {clash} locked at other values than the model's own 'locked' "
                             f"({ {n: own[n] for n in clash} })")
        spec = dict(spec, locked={**own, **dict(locked)})
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
    for c in _entries(spec, "contacts", ("frame",), ("kind", "name")):
        system.add_contact(c["frame"], c.get("kind", "point"), c.get("name"))
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
            needs = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0]
            raise ModelError(f"{key}[{i}]: needs {needs} (and optionally "
                             f"{', '.join(repr(k) for k in optional)}), got {d!r}")
    return entries


def _mapping(spec: dict, key: str) -> dict:
    """``spec[key]``, a mapping ``{variable: number}`` (empty when absent)."""
    value = spec.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ModelError(f"{key}: expected a mapping {{variable: value}}, got {value!r}")
    return value
