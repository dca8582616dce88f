"""Benchmark of the paper's examples (Sec. VIII): examples/marionette_lqr.py and
examples/pendulum_optimal_control.py.

    .venv/bin/python bench/bench_examples.py [--full]

* Marionette (nx = 80, nu = 18): the TV-LQR Riccati pass over 100 steps on the real
  linearizations; linearization (parallel over steps) + Riccati for the whole trajectory
  (100 steps, and with ``--full`` the example's 1000 steps); per step: integrator step, first-
  and second-order linearization (the paper: 2.11, 1.12 and 22.15 ms on an i7-2760QM).
* Pendulum (N = 100, the paper's problem): time per iteration of each optimizer over its first
  iterations from u = 0, and the parts of an iteration: a linearization pass along the
  trajectory (first or second order, through core.linearize_trajectory's per-step calls), a rollout, the
  LQ Riccati pass (the paper: descent direction 28.5 ms first order, 55.8 ms second order).
Prints figures only; asserts nothing.

BLAS threads matter: the kernels call BLAS (scipy's OpenBLAS) for their matrix products, and on a
busy 2-core machine OpenBLAS's own threads make the marionette's second-order linearization
vary by an order of magnitude per step; with ``OPENBLAS_NUM_THREADS=1`` it is a steady ~5 ms (and
the Riccati pass ~30 % faster). The setting in effect is printed first.
"""
import argparse
import os
import sys
import time

import numpy as np

from common import median_us

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)

import core  # noqa: E402

import marionette_lqr  # noqa: E402
import pendulum_optimal_control as pendulum  # noqa: E402


def bench_marionette(full: bool):
    print("Marionette-like system (core/data/marionette.yaml)")
    ref = marionette_lqr.reference(duration=1.0, dt=0.01)        # 100 steps
    vi = ref.vi
    Q, R = marionette_lqr.lqr_weights(vi)
    A, B = vi.linearize_trajectory(ref.x, ref.u)
    core.tvlqr(A, B, Q, R, Q)
    print(f"  nx = {vi.nx}, nu = {vi.nu}, N = {ref.N}")
    t_ric = median_us(lambda: core.tvlqr(A, B, Q, R, Q), repeat=30) / 1e3
    print(f"  TV-LQR Riccati pass, 100 steps (median)          {t_ric:9.2f} ms "
          f"({1e3 * t_ric / ref.N:.1f} us/step)")
    t_lin = median_us(lambda: vi.linearize_trajectory(ref.x, ref.u), repeat=20) / 1e3
    t_all = median_us(lambda: core.tvlqr(*vi.linearize_trajectory(ref.x, ref.u), Q, R, Q),
                      repeat=20) / 1e3
    print(f"  linearize_trajectory, 100 steps (parallel)       {t_lin:9.2f} ms "
          f"({t_lin / ref.N:.3f} ms/step)")
    print(f"  linearization + Riccati, 100 steps               {t_all:9.2f} ms")
    x, u = ref.x[10], ref.u[10]
    t_step = median_us(lambda: vi.step(x, u)) / 1e3
    t_lin1 = median_us(lambda: vi.linearize(x, u)) / 1e3
    t_lin2 = median_us(lambda: vi.linearize2(x, u), repeat=50) / 1e3
    print(f"  per step: integrator {t_step:.3f} ms, first-order linearization {t_lin1:.3f} ms, "
          f"second-order {t_lin2:.3f} ms  (paper/trep: 2.11, 1.12, 22.15 ms)")
    if full:
        ref = marionette_lqr.reference(duration=10.0, dt=0.01)    # the example: 1000 steps
        t0 = time.perf_counter()
        A, B = ref.vi.linearize_trajectory(ref.x, ref.u)
        t1 = time.perf_counter()
        core.tvlqr(A, B, Q, R, Q)
        t2 = time.perf_counter()
        print(f"  whole 10 s trajectory ({ref.N} steps): simulation {ref.seconds_simulate:.3f} s, "
              f"linearization {t1 - t0:.3f} s, Riccati {t2 - t1:.3f} s, "
              f"together {t2 - t0:.3f} s")


def bench_pendulum(iterations: int):
    print("Pendulum optimal control (N = 100, dt = 0.1, Q = diag(1000, 1), R = 50)")
    problem = pendulum.pendulum_problem(N=100)
    sys_ = problem.system
    u = problem.u_init
    x = core.simulate_open_loop(sys_.step, problem.x0, u)
    t_roll = median_us(lambda: core.simulate_open_loop(sys_.step, problem.x0, u), repeat=30)
    t_lin1 = median_us(lambda: core.linearize_trajectory(sys_, x, u), repeat=30)
    t_lin2 = median_us(lambda: core.linearize_trajectory(sys_, x, u, second_order=True),
                       repeat=30)
    t_par = median_us(lambda: problem.vi.linearize_trajectory(x, u), repeat=30)
    A, B = core.linearize_trajectory(sys_, x, u)
    t_ric = median_us(lambda: core.tvlqr(A, B, problem.Q, problem.R, problem.Q_N), repeat=50)
    print(f"  rollout (100 steps) {t_roll / 1e3:.2f} ms; linearization pass first order "
          f"{t_lin1 / 1e3:.2f} ms, second order {t_lin2 / 1e3:.2f} ms (per-step calls); "
          f"parallel vi.linearize_trajectory {t_par / 1e3:.2f} ms; Riccati {t_ric / 1e3:.3f} ms")
    for method in pendulum.METHODS:
        pendulum.optimize(problem, method, max_iterations=1)                   # warm up
        run = pendulum.optimize(problem, method, max_iterations=iterations)
        times = np.array(run.iteration_times) * 1e3
        backtracks = [h["backtracks"] for h in run.result.history[1:]]
        print(f"  {method:17s} {run.result.iterations:3d} iterations: "
              f"{1e3 * run.seconds_per_iteration:7.2f} ms/iteration (median "
              f"{np.median(times):.2f} ms, max {times.max():.2f} ms; "
              f"mean backtracks {np.mean(backtracks):.1f})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true",
                        help="also the marionette's whole 10 s trajectory (1000 steps)")
    parser.add_argument("--iterations", type=int, default=20,
                        help="optimizer iterations timed per method (default 20)")
    args = parser.parse_args(argv)
    print("OPENBLAS_NUM_THREADS =", os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"))
    bench_marionette(args.full)
    bench_pendulum(args.iterations)


if __name__ == "__main__":
    main()
