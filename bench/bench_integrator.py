"""Variational integrator benchmark (issue: midpoint VI): median time per step, per first-order
and per second-order linearization for N-link chains and the marionette-like system (40
variables, 18 kinematic, 6 constraints), and the trajectory linearization in parallel.

    .venv/bin/python bench/bench_integrator.py
"""
import numpy as np

import core
from core.examples import chain, marionette, marionette_rest_state

from common import median_us, times_us

TREP = {  # trep (C) on this kind of machine, from the issue: step, first, second order [ms]
    "marionette": (1.98, 0.82, 23.3), "chain N=40": (23.1, 5.6, 287.0)}


def setups():
    for n in (5, 10, 20, 40):
        s = chain(n)
        vi = core.MidpointVI(s, 0.01)
        q = np.full(n, 0.1)
        yield f"chain N={n}", vi, vi.state(q, vi.momentum(q, np.full(n, 0.2))), np.zeros(vi.nu)
    s = marionette()
    vi = core.MidpointVI(s, 0.01)
    q = marionette_rest_state(s)
    yield "marionette", vi, vi.state(q, np.zeros(vi.nd)), q[vi.kinematic_index].copy()


def time_integrator(vi, x, u):
    """Median times of a fresh step and of a fresh step + first-order linearization, and all
    times of the first- and second-order linearizations of a solved step, in microseconds."""
    vi.linearize2(x, u)
    xs = [x, x + 1e-9]  # alternate so that no solve is answered from the last-step cache
    flip = [0]

    def fresh_step():
        flip[0] ^= 1
        return vi.step(xs[flip[0]], u)

    def fresh_linearize():
        flip[0] ^= 1
        return vi.linearize(xs[flip[0]], u)

    t_step = median_us(fresh_step)
    t_incl = median_us(fresh_linearize)
    # (many repeats: on a shared host the minimum needs a quiet stretch to land in)
    times_1 = times_us(lambda: vi.linearize(x, u), repeat=2000, budget_s=3.0)
    times_2 = times_us(lambda: vi.linearize2(x, u), repeat=400, budget_s=6.0)
    return t_step, t_incl, times_1, times_2


def main():
    print("step: a real DEL solve every call; 1st/2nd order: the linearization of a solved step")
    print("(the pattern along a trajectory: f(x, u) then linearize(x, u)); 'incl.' adds the solve")
    print(f"{'system':<14}{'nx':>4}{'nu':>4}{'step [us]':>11}{'1st [us]':>10}{'incl. [us]':>11}"
          f"{'2nd [us]':>11}   speed-up vs trep (step / 1st / 2nd)")
    minima = {}
    for name, vi, x, u in setups():
        t_step, t_incl, times_1, times_2 = time_integrator(vi, x, u)
        t_1, t_2 = np.median(times_1), np.median(times_2)
        ref = TREP.get(name)
        speed = "" if ref is None else "   x{:.0f} / x{:.0f} / x{:.0f}".format(
            1e3 * ref[0] / t_step, 1e3 * ref[1] / t_1, 1e3 * ref[2] / t_2)
        print(f"{name:<14}{vi.nx:>4}{vi.nu:>4}{t_step:>11.1f}{t_1:>10.1f}{t_incl:>11.1f}{t_2:>11.1f}{speed}")
        minima[name] = (times_1.min(), times_2.min())
    # on a shared machine the median moves with the load; the minimum shows the code's cost
    print("minimum over the repeats, 1st / 2nd order [us]: " + "; ".join(
        f"{name} {t1:.1f} / {t2:.1f}" + ("" if name not in TREP else " (x{:.0f} / x{:.0f})".format(
            1e3 * TREP[name][1] / t1, 1e3 * TREP[name][2] / t2)) for name, (t1, t2) in minima.items()))
    # whole-trajectory linearization (parallel over steps)
    name, vi, x, u = list(setups())[-1]
    N = 100
    X = [x]
    for _ in range(N):
        X.append(vi.step(X[-1], u))
    X, U = np.array(X), np.tile(u, (N, 1))
    vi.linearize_trajectory(X, U)
    t = median_us(lambda: vi.linearize_trajectory(X, U), repeat=10) / 1e3
    t2 = median_us(lambda: vi.linearize_trajectory(X, U, second_order=True), repeat=3) / 1e3
    print(f"marionette trajectory N={N}: first order {t:.1f} ms, second order {t2:.1f} ms (all steps)")


if __name__ == "__main__":
    main()
