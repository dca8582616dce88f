"""Where the node's parameter files are: the top-level ``config/`` directory of the repository,
installed to ``share/mechnode/config`` (colcon, from setup.py's data_files; the pip wheel
carries the same files as data files, so a pip install puts them under ``<prefix>/share``).

:func:`config_dir` is the one lookup every user (the ``mechnode`` command's help, the launch
file, the demo, the test harness, scripts/check_wheel.sh) goes through. It looks, in order:

1. beside the ``mechnode`` package in a source checkout (``<repo>/config``, when ``<repo>``
   holds mechnode's ``ros/mechnode/package.xml``): an editable install, ``PYTHONPATH=<repo>``
   or a colcon ``--symlink-install``;
2. in the prefix this ``mechnode`` is installed into (``<prefix>/lib/pythonX.Y/site-packages/
   mechnode`` -> ``<prefix>/share/mechnode/config``): a colcon install space or a pip install;
3. in every prefix of ``AMENT_PREFIX_PATH`` that has mechnode in its ament index;
4. under ``sys.prefix``, ``sys.base_prefix`` and the user base (``pip install --user``).

Only paths are computed here: nothing is imported from, or run in, a parameter file.
"""
from __future__ import annotations

import os
import site
import sys
from pathlib import Path

PACKAGE = "mechnode"
#: a file every config directory of mechnode holds (the node's parameters with their defaults)
MARKER = "mechnode.yaml"
#: the file that makes the directory holding the ``mechnode`` package a source checkout: the ROS
#: package manifest, in the colcon package directory ros/mechnode/ (not at the root, where it
#: would stop colcon's crawl)
CHECKOUT_MARKER = Path("ros") / PACKAGE / "package.xml"


def _share(prefix) -> Path:
    return Path(prefix) / "share" / PACKAGE / "config"


def config_candidates() -> list[Path]:
    """Every directory :func:`config_dir` considers, in its order (duplicates removed)."""
    pkg = Path(__file__).resolve().parent
    found = []
    checkout = pkg.parent
    if (checkout / CHECKOUT_MARKER).is_file():
        found.append(checkout / "config")
    # <prefix>/lib/pythonX.Y/site-packages/mechnode (or lib64, dist-packages)
    if len(pkg.parents) > 3 and pkg.parents[1].name.startswith("python"):
        found.append(_share(pkg.parents[3]))
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        index = Path(prefix) / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE
        if prefix and index.is_file():
            found.append(_share(prefix))
    for prefix in (sys.prefix, sys.base_prefix, site.getuserbase()):
        found.append(_share(prefix))
    unique = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def config_dir() -> Path:
    """The directory of mechnode's parameter files (see the module docstring for the order);
    FileNotFoundError naming every place looked at if there is none."""
    candidates = config_candidates()
    for path in candidates:
        if (path / MARKER).is_file():
            return path
    raise FileNotFoundError(f"mechnode's parameter files ({MARKER}, ...) are in none of: "
                            + ", ".join(str(p) for p in candidates)
                            + " (install the package, or run from a source checkout)")


def config_file(name: str) -> Path:
    """The parameter file ``name`` (e.g. ``cartpole_params.yaml``) of :func:`config_dir`;
    FileNotFoundError naming it and the directory if it is not there."""
    if os.path.basename(name) != name or name in ("", ".", ".."):
        raise ValueError(f"config_file takes a file name, got {name!r}")
    path = config_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"no parameter file {name!r} in {path.parent} (there are: "
                                f"{', '.join(sorted(p.name for p in path.parent.glob('*.yaml')))})")
    return path
