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


def interleaved_min_us(fns: dict, rounds: int = 15, budget_s: float = 0.02) -> dict:
    """Per-call time in microseconds of each ``fns[name]()``: the minimum over ``rounds`` rounds,
    each timing every function in turn over a batch of calls lasting about ``budget_s``. Figures
    to be subtracted from one another are taken this way: a shared host runs in fast and slow
    spells (measured on a 2-core VM: the same call 7.1 us in one tenth of a second, 12 us in the
    next), which medians taken one after another land in differently; the interleaved minimum
    sees every function in a fast one."""
    batch = {}
    for name, fn in fns.items():
        fn()
        t0, k = time.perf_counter(), 0
        while time.perf_counter() - t0 < budget_s / 4:
            fn()
            k += 1
        batch[name] = max(4 * k, 1)
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            k = batch[name]
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            best[name] = min(best[name], 1e6 * (time.perf_counter() - t0) / k)
    return best


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
