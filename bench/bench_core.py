"""Continuous dynamics benchmark (issue: core library): median time of ``qdd`` and of the exact
``linearize`` for N-link planar chains and a branched 40-variable 3-D tree, plus cold and warm
start of ``import core`` + first call.

    .venv/bin/python bench/bench_core.py [--no-start]
"""
import sys

import numpy as np

from core.examples import branched_tree, chain

from common import median_us, start_time


def state(system, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=system.nq) * 0.3, rng.normal(size=system.nq) * 0.3, rng.normal(size=system.nu)


def time_system(system):
    """Median times of ``qdd`` and ``linearize`` at a random state, in microseconds."""
    q, dq, u = state(system)
    system.linearize(q, dq, u)
    return median_us(lambda: system.qdd(q, dq, u)), median_us(lambda: system.linearize(q, dq, u))


def main():
    print(f"{'system':<22}{'nq':>4}{'qdd [us]':>12}{'linearize [us]':>16}")
    systems = [(f"chain N={n}", chain(n)) for n in (5, 10, 20, 40)] + [("branched 3-D tree", branched_tree(40))]
    for name, system in systems:
        t_qdd, t_lin = time_system(system)
        print(f"{name:<22}{system.nq:>4}{t_qdd:>12.1f}{t_lin:>16.1f}")
    if "--no-start" not in sys.argv:
        snippet = ("import numpy as np, core; from core.examples import chain; s = chain(5); "
                   "s.linearize(np.zeros(5), np.zeros(5), np.zeros(5))")
        cold = start_time(snippet, cold=True)
        warm = start_time(snippet, cold=False)
        print(f"start (import core + first linearize): cold cache {cold:.2f} s, warm cache {warm:.2f} s")


if __name__ == "__main__":
    main()
