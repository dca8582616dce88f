"""The model files shipped with the library (package data): ``cartpole.yaml``,
``double_pendulum.yaml``, ``marionette.yaml``, ``pendulum.yaml`` and ``arm7.urdf``.

:func:`core.load_system` finds them by name (``core.load_system("cartpole.yaml")``) wherever the
package is installed; :func:`model_file` gives their path (``from core.data import model_file``).
"""
from __future__ import annotations

from importlib import resources

__all__ = ["model_names", "model_file"]

MODEL_SUFFIXES = (".yaml", ".yml", ".urdf")


def model_names() -> list[str]:
    """The packaged model files, by name.

    Returns
    -------
    list of str
        Sorted file names (``.yaml``, ``.yml``, ``.urdf``).
    """
    return sorted(p.name for p in resources.files(__name__).iterdir() if p.name.endswith(MODEL_SUFFIXES))


def model_file(name: str) -> str | None:
    """The path of a packaged model.

    Parameters
    ----------
    name : str
        A bare file name (e.g. ``"cartpole.yaml"``): paths are never looked up here.

    Returns
    -------
    str or None
        The path, or None if there is no such packaged model (also for anything but a bare
        file name ending in ``.yaml``, ``.yml`` or ``.urdf``).
    """
    if not isinstance(name, str) or not name.endswith(MODEL_SUFFIXES) or "/" in name or "\\" in name:
        return None
    path = resources.files(__name__) / name
    return str(path) if path.is_file() else None
