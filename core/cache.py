"""Keeping numba's on-disk cache of core's kernels consistent with core's sources.

The kernels are compiled with ``cache=True``: numba stores them beside the sources
(``core/__pycache__/*.nbi``, ``*.nbc``) and reloads them while the *defining* file is unchanged.
But a kernel inlines the kernels it calls from other modules, so after an edit of, say,
``lagrangian.py`` the cached ``del_step`` would still run the old Lagrangian. To rule that out
once for every kernel, importing ``core`` compares a hash of all of core's sources with the one
recorded beside the cache; when they differ it deletes core's cache files, so each kernel is
compiled afresh once, and records the new hash. Nothing here touches numba itself.

Only the default cache location is managed, and only where it is writable (a checkout or a
writable install). An installed package's sources do not change; a cache directory chosen with
``NUMBA_CACHE_DIR`` is the user's to clear.
"""
from __future__ import annotations

import hashlib
import os

SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))
CACHE_DIR = os.path.join(SOURCE_DIR, "__pycache__")
STAMP = os.path.join(CACHE_DIR, "core-sources.sha1")


def source_hash() -> str:
    """SHA-1 of the names and contents of core's ``*.py`` files."""
    digest = hashlib.sha1()
    for name in sorted(os.listdir(SOURCE_DIR)):
        if name.endswith(".py"):
            digest.update(name.encode())
            with open(os.path.join(SOURCE_DIR, name), "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()


def drop_stale_kernels() -> bool:
    """Delete core's cached kernels if the sources changed since they were compiled; returns
    whether it did. Best effort: an unwritable cache is left alone."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return False
    current = source_hash()
    try:
        with open(STAMP, encoding="ascii") as fh:
            if fh.read().strip() == current:
                return False
    except OSError:
        pass
    try:
        os.makedirs(CACHE_DIR, exist_ok=True)
        for name in os.listdir(CACHE_DIR):
            if name.endswith((".nbi", ".nbc")):
                os.remove(os.path.join(CACHE_DIR, name))
        tmp = f"{STAMP}.{os.getpid()}"
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(current + "\n")
        os.replace(tmp, STAMP)
    except OSError:
        return False
    return True


drop_stale_kernels()
