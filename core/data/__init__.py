"""The model files shipped with the library (package data): ``cartpole.yaml``,
``double_pendulum.yaml``, ``marionette.yaml``, ``pendulum.yaml`` and ``arm7.urdf``.

:func:`core.load_system` finds them by name (``core.load_system("cartpole.yaml")``) wherever the
package is installed; :func:`model_file` gives their path.
"""
from __future__ import annotations

from importlib import resources

MODEL_SUFFIXES = (".yaml", ".yml", ".urdf")


def model_names() -> list[str]:
    """The packaged model files, by name."""
    return sorted(p.name for p in resources.files(__name__).iterdir() if p.name.endswith(MODEL_SUFFIXES))


def model_file(name: str) -> str | None:
    """The path of the packaged model ``name`` (e.g. ``"cartpole.yaml"``), or None if there is
    no such packaged model. A bare file name only: paths are never looked up here."""
    if not isinstance(name, str) or not name.endswith(MODEL_SUFFIXES) or "/" in name or "\\" in name:
        return None
    path = resources.files(__name__) / name
    return str(path) if path.is_file() else None
