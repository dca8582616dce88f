"""Progress of long computations: ``progress=True`` draws a bar on stderr, a callable
``progress(done, total)`` is called as is (:func:`core.linearize_trajectory`)."""
from __future__ import annotations

import sys
import time
from typing import Callable

Reporter = Callable[[int, int], object]


class ProgressBar:
    """A one-line bar on stderr, redrawn in place, ended at 100 %."""

    def __init__(self, what: str = "linearizing", width: int = 40) -> None:
        self.what, self.stream, self.width, self.clock = what, sys.stderr, width, time.perf_counter
        self.t0 = self.clock()

    def __call__(self, done: int, total: int) -> None:
        frac = done / total if total else 1.0
        filled = int(round(frac * self.width))
        self.stream.write(f"\r{self.what} {done}/{total} steps [{'#' * filled}"
                          f"{'.' * (self.width - filled)}] {self.clock() - self.t0:.1f} s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def progress_reporter(progress) -> Reporter | None:
    """None for ``progress`` None or False, a :class:`ProgressBar` for True, else ``progress``
    itself, which must be callable as ``progress(done, total)``."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return ProgressBar()
    if not callable(progress):
        raise TypeError(f"progress must be None, True or a callable progress(done, total), "
                        f"got {progress!r}")
    return progress
