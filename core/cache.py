"""Keeping numba's on-disk cache of core's kernels consistent with core's sources.

The kernels are compiled with ``cache=True``: numba stores them beside the sources
(``core/<layer>/__pycache__/*.nbi``, ``*.nbc``) and reloads them while the *defining* file is unchanged.
But a kernel inlines the kernels it calls from other modules, so after an edit of, say,
``tree/lagrangian.py`` the cached ``del_step`` would still run the old Lagrangian. To rule that out
once for every kernel, importing ``core`` compares a hash of all of core's sources with the one
recorded beside the cache; when they differ it deletes core's cache files, so each kernel is
compiled afresh once, and records the new hash.

Compiling takes minutes, so it says so: :func:`report_compilation` (on by default; set
``MECHNODE_COMPILE_MESSAGES=0`` to silence it) listens to numba's ``numba:compile`` events,
which fire only when a kernel is not in the cache, and prints on stderr which of core's
kernels it compiles and how long each took, a whole line when it starts and one when it ends
(several processes may share one stderr, and a reader of a pipe sees what compiles now)::

    core: compiling core.discrete.step.del_step (kernel 2 of ~14) ...
    core: compiled core.discrete.step.del_step in 54.3 s (kernel 2 of ~14; 80 s since the first)

The count is there when the caller said how many kernels to expect (:func:`expect`, as
:func:`core.warmup.run_shared` does for a team of processes, which then count together); a
process of such a team tags its lines (``core[2/2]:``). A warm cache loads silently.

This file and ``warmup.py`` define no kernel: they are left out of the hash.

Only the default cache location is managed, and only where it is writable (a checkout or a
writable install). An installed package's sources do not change; a cache directory chosen with
``NUMBA_CACHE_DIR`` is the user's to clear.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time

from numba.core import event

SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))
CACHE_DIR = os.path.join(SOURCE_DIR, "__pycache__")
STAMP = os.path.join(CACHE_DIR, "core-sources.sha1")
#: core's sources that define no kernel (not hashed: editing them keeps the compiled kernels)
NO_KERNELS = ("cache.py", "warmup.py")
#: Environment of a process that compiles for another: its tag, and the shared count
#: (``total:path``, see :func:`expect`).
TAG_VARIABLE, PROGRESS_VARIABLE = "MECHNODE_COMPILE_TAG", "MECHNODE_COMPILE_PROGRESS"


def source_files() -> list[str]:
    """core's ``*.py`` files (its sub-packages' too) but :data:`NO_KERNELS`, as paths relative to
    :data:`SOURCE_DIR`, sorted."""
    found = []
    for base, dirs, files in os.walk(SOURCE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = os.path.relpath(base, SOURCE_DIR)
        found += [os.path.normpath(os.path.join(rel, name)) for name in files
                  if name.endswith(".py") and not (rel == "." and name in NO_KERNELS)]
    return sorted(found)


def source_hash() -> str:
    """SHA-1 of the names and contents of core's ``*.py`` files (:func:`source_files`)."""
    digest = hashlib.sha1()
    for name in source_files():
        digest.update(name.encode())
        with open(os.path.join(SOURCE_DIR, name), "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()


def cache_dirs() -> list[str]:
    """numba's cache directories of core's kernels: the ``__pycache__`` beside each source."""
    return sorted({os.path.join(SOURCE_DIR, os.path.dirname(name), "__pycache__") for name in source_files()}
                  | {CACHE_DIR})


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
        for directory in cache_dirs():
            if os.path.isdir(directory):
                for name in os.listdir(directory):
                    if name.endswith((".nbi", ".nbc")):
                        os.remove(os.path.join(directory, name))
        tmp = f"{STAMP}.{os.getpid()}"
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(current + "\n")
        os.replace(tmp, STAMP)
    except OSError:
        return False
    return True


class _CompileReporter(event.Listener):
    """numba ``numba:compile`` listener: a stderr line when an outermost compilation of one of
    core's kernels starts (the kernels it calls compile inside it) and one when it ends, a
    header before the first. Compilations are serialized by numba's global compiler lock."""

    def __init__(self, stream=None, tag: str = ""):
        self.stream = stream          # None: sys.stderr at the time of printing
        self.prefix = f"core[{tag}]: " if tag else "core: "
        self.depth = 0
        self.kernel: str | None = None
        self.announced = False
        self.t0 = self.first = 0.0
        self.count = 0                # compilations of this process
        self.counted = True           # the kernel compiling now is counted
        self.total = 0                # expected by the caller (expect), 0: unknown
        self.shared: str | None = None            # a file counting the team's compilations (a line each)

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(text)            # a whole line in one write: lines of processes do not mix
        stream.flush()

    def _done_so_far(self) -> int:
        if self.shared:
            try:
                with open(self.shared, "rb") as fh:
                    return fh.read().count(b"\n")
            except OSError:
                pass
        return self.count

    def _which(self, number: int) -> str:
        return f"kernel {number} of ~{max(self.total, number)}" if self.total else ""

    def on_start(self, ev) -> None:
        if self.depth == 0:
            self.kernel = _core_kernel(ev.data)
            if self.kernel is not None:
                if not self.announced:
                    self.announced = True
                    self.first = time.perf_counter()
                    self._write(f"{self.prefix}numba is compiling core's kernels (first run, or core's "
                                "sources changed; cached afterwards, later runs load them)\n")
                # (the records' allocators, _new_*, compile in a second: not counted)
                self.counted = not self.kernel.rsplit(".", 1)[-1].startswith("_new_")
                which = self._which(self._done_so_far() + 1) if self.counted else ""
                self._write(f"{self.prefix}compiling {self.kernel}{f' ({which})' if which else ''} ...\n")
                self.t0 = time.perf_counter()
        self.depth += 1

    def on_end(self, ev) -> None:
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and self.kernel is not None:
            now = time.perf_counter()
            outcome = _outcome(getattr(ev, "_exc_details", None))
            if not self.counted:
                self._write(f"{self.prefix}{outcome} {self.kernel} in {now - self.t0:.1f} s\n")
                self.kernel = None
                return
            self.count += 1
            number = self.count
            if self.shared:
                try:
                    with open(self.shared, "ab") as fh:
                        fh.write(f"{self.kernel}\n".encode())
                except OSError:
                    pass
                number = self._done_so_far()
            which = self._which(number)
            self._write(f"{self.prefix}{outcome} {self.kernel} in {now - self.t0:.1f} s"
                        f"{f' ({which}; {now - self.first:.0f} s since the first)' if which else ''}\n")
            self.kernel = None


def _outcome(exc_details) -> str:
    """``compiled``, ``stopped compiling`` (the process is ending: SIGINT, SystemExit) or
    ``failed to compile``, from numba's end-of-compilation exception details."""
    if not exc_details or exc_details[0] is None:
        return "compiled"
    if isinstance(exc_details[0], type) and issubclass(exc_details[0], (KeyboardInterrupt, SystemExit)):
        return "stopped compiling"
    return "failed to compile"


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


_FIRST_CALLS = threading.Lock()


def call_and_freeze(entry, frozen: set, *args) -> None:
    """``entry(*args)``, and on its first call disable the kernel's compilation afterwards
    (``frozen`` collects the kernels done): from then on a call with other argument types is a
    ``TypeError`` at numba's dispatcher, never a new compilation. The first calls of all
    threads go one after the other, so that no thread waiting for the compilation finds it
    disabled ("compilation disabled") rather than compiled."""
    if entry in frozen:
        entry(*args)
        return
    with _FIRST_CALLS:
        entry(*args)
        if entry not in frozen and entry.signatures:
            entry.disable_compile()
            frozen.add(entry)


def compile_in_background(*args: str) -> subprocess.Popen | None:
    """Start ``python -m core.warmup *args`` (kernels compiled into the shared cache by a second
    process, its compile messages on this process's stderr); None if it cannot start, and the
    caller compiles everything itself."""
    try:
        return subprocess.Popen([sys.executable, "-m", "core.warmup", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, cwd=os.path.dirname(SOURCE_DIR),
                                env=compile_environment("2/2"))
    except OSError:
        return None


def compile_environment(tag: str, environ=None) -> dict:
    """The environment of a process that compiles for this one: its messages tagged ``tag``
    and counted with this process's (:func:`expect`), the same cache."""
    env = dict(os.environ if environ is None else environ)
    env[TAG_VARIABLE] = tag
    if _reporter is not None and _reporter.shared and _reporter.total:
        env[PROGRESS_VARIABLE] = f"{_reporter.total}:{_reporter.shared}"
    else:
        env.pop(PROGRESS_VARIABLE, None)
    return env


_reporter: _CompileReporter | None = None


def report_compilation(enabled: bool = True, stream=None) -> None:
    """Print (on ``stream``, default stderr) which of core's kernels numba compiles; off with
    ``enabled=False``. On by default unless ``MECHNODE_COMPILE_MESSAGES=0``. Lines are tagged
    with ``MECHNODE_COMPILE_TAG`` and counted as ``MECHNODE_COMPILE_PROGRESS`` says, if set
    (:func:`compile_environment`)."""
    global _reporter
    if _reporter is not None:
        event.unregister("numba:compile", _reporter)
        _reporter = None
    if enabled:
        _reporter = _CompileReporter(stream, os.environ.get(TAG_VARIABLE, ""))
        total, _, path = os.environ.get(PROGRESS_VARIABLE, "").partition(":")
        if total.isdigit() and path:
            _reporter.total, _reporter.shared = int(total), path
        event.register("numba:compile", _reporter)


def expect(total: int, shared: str | None = None) -> None:
    """Count the next compile messages against ``total`` kernels (``kernel 3 of ~12``), shared
    with the processes started with :func:`compile_environment` through the file ``shared``
    (a line per compiled kernel); ``expect(0)``: no count."""
    if _reporter is not None:
        _reporter.total, _reporter.shared = max(0, int(total)), (shared if total else None)
        if shared and total:
            open(shared, "ab").close()


drop_stale_kernels()
if os.environ.get("MECHNODE_COMPILE_MESSAGES", "1").strip().lower() not in ("0", "false", "no", "off"):
    report_compilation()
