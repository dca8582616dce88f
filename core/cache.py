"""Keeping numba's on-disk cache of core's kernels consistent with core's sources.

The kernels are compiled with ``cache=True``: numba stores them beside the sources
(``core/__pycache__/*.nbi``, ``*.nbc``) and reloads them while the *defining* file is unchanged.
But a kernel inlines the kernels it calls from other modules, so after an edit of, say,
``lagrangian.py`` the cached ``del_step`` would still run the old Lagrangian. To rule that out
once for every kernel, importing ``core`` compares a hash of all of core's sources with the one
recorded beside the cache; when they differ it deletes core's cache files, so each kernel is
compiled afresh once, and records the new hash.

Compiling takes minutes, so it says so: :func:`report_compilation` (on by default; set
``MECHNODE_COMPILE_MESSAGES=0`` to silence it) listens to numba's ``numba:compile`` events,
which fire only when a kernel is not in the cache, and prints on stderr which of core's
kernels it compiles and how long each took. A warm cache loads silently.

Only the default cache location is managed, and only where it is writable (a checkout or a
writable install). An installed package's sources do not change; a cache directory chosen with
``NUMBA_CACHE_DIR`` is the user's to clear.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

from numba.core import event

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


class _CompileReporter(event.Listener):
    """numba ``numba:compile`` listener: one stderr line per outermost compilation of one of
    core's kernels (the kernels it calls compile inside it), a header before the first.
    Compilations are serialized by numba's global compiler lock."""

    def __init__(self, stream=None):
        self.stream = stream          # None: sys.stderr at the time of printing
        self.depth = 0
        self.kernel = None
        self.announced = False
        self.t0 = 0.0

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(text)
        stream.flush()

    def on_start(self, ev) -> None:
        if self.depth == 0:
            self.kernel = _core_kernel(ev.data)
            if self.kernel is not None:
                if not self.announced:
                    self.announced = True
                    self._write("core: numba is compiling core's kernels (first run, or core's "
                                "sources changed; cached afterwards, later runs load them)\n")
                self._write(f"core: compiling {self.kernel} ... ")
                self.t0 = time.perf_counter()
        self.depth += 1

    def on_end(self, ev) -> None:
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and self.kernel is not None:
            outcome = "failed" if getattr(ev, "_exc_details", None) else "done"
            self._write(f"{outcome} in {time.perf_counter() - self.t0:.1f} s\n")
            self.kernel = None


def _core_kernel(data) -> str | None:
    """``module.name`` of the dispatcher being compiled if it is one of core's, else None."""
    try:
        fn = data["dispatcher"].py_func
    except (KeyError, TypeError, AttributeError):
        return None
    module = getattr(fn, "__module__", "") or ""
    if module != "core" and not module.startswith("core."):
        return None
    return f"{module}.{fn.__name__}"


def is_cached(kernel) -> bool:
    """Whether numba's on-disk cache holds an index for ``kernel`` (a ``cache=True`` dispatcher);
    False when that cannot be told. A cold cache has none: that is all this is for."""
    try:
        return os.path.exists(kernel._cache._cache_file._index_path)
    except AttributeError:
        return False


def compile_in_background(*args: str) -> subprocess.Popen | None:
    """Start ``python -m core.warmup *args`` (kernels compiled into the shared cache by a second
    process, its compile messages on this process's stderr); None if it cannot start, and the
    caller compiles everything itself."""
    try:
        return subprocess.Popen([sys.executable, "-m", "core.warmup", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, cwd=os.path.dirname(SOURCE_DIR))
    except OSError:
        return None


_reporter: _CompileReporter | None = None


def report_compilation(enabled: bool = True, stream=None) -> None:
    """Print (on ``stream``, default stderr) which of core's kernels numba compiles; off with
    ``enabled=False``. On by default unless ``MECHNODE_COMPILE_MESSAGES=0``."""
    global _reporter
    if _reporter is not None:
        event.unregister("numba:compile", _reporter)
        _reporter = None
    if enabled:
        _reporter = _CompileReporter(stream)
        event.register("numba:compile", _reporter)


drop_stale_kernels()
if os.environ.get("MECHNODE_COMPILE_MESSAGES", "1").strip().lower() not in ("0", "false", "no", "off"):
    report_compilation()
