"""Timing helpers shared by the benchmarks (not tests: they print figures, assert nothing)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def times_us(fn, repeat: int = 200, warmup: int = 3, budget_s: float = 2.0) -> np.ndarray:
    """Wall times of ``fn()`` in microseconds (fewer repeats if a call is slow)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s and len(times) >= 5:
            break
    return 1e6 * np.array(times)


def median_us(fn, repeat: int = 200, warmup: int = 3, budget_s: float = 2.0) -> float:
    """Median wall time of ``fn()`` in microseconds (see :func:`times_us`)."""
    return float(np.median(times_us(fn, repeat, warmup, budget_s)))


def start_time(snippet: str, cold: bool) -> float:
    """Seconds to run ``snippet`` in a fresh interpreter; ``cold`` uses an empty numba cache."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        if cold:
            env["NUMBA_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", snippet], check=True, env=env,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        return time.perf_counter() - t0
