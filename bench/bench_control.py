"""Control benchmark: the TV-LQR Riccati pass and the trajectory optimizers of
core.control.riccati and core.control.optimal.

    .venv/bin/python bench/bench_control.py [--no-start]

* Riccati pass (``tvlqr``) for nx = 80, nu = 20, N = 100 (the marionette's size in the paper,
  random stable-ish A_k, B_k): warm median, the first call in this process, and (unless
  ``--no-start``) a fresh interpreter's import + first call with an empty numba cache (compile)
  and with the cache filled.
* Trajectory optimizers on the RK4 pendulum of tests/test_control.py (N = 100, the paper's
  swing-up problem): time per iteration, which includes the test system's Python-level rollouts
  and derivatives (timed separately for reference), the Riccati pass and the line search.
* Newton iterations of ``optimize_trajectory`` on the 40-variable branched tree
  (``core.examples.branched_tree``, 34 inputs, midpoint integrator, N = 20): time per
  iteration and its second-order pass, the curvature contracted with the costate
  (``linearize_trajectory(..., costates=)``) against the full tensors contracted afterwards.
Prints figures only; asserts nothing.
"""
import os
import sys
import time

import numpy as np

from common import median_us, start_time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))

from core import linearize_trajectory, optimize_trajectory, tvlqr
from core.control import riccati, simulation

NX, NU, N = 80, 20, 100
PROBLEM_SNIPPET = f"""
import numpy as np
rng = np.random.default_rng(0)
A = np.eye({NX}) + 0.05 * rng.normal(size=({N}, {NX}, {NX})) / np.sqrt({NX})
B = 0.1 * rng.normal(size=({N}, {NX}, {NU}))
Q, R, Q_N = np.eye({NX}), np.eye({NU}), 10.0 * np.eye({NX})
"""


def riccati_problem():
    scope = {}
    exec(PROBLEM_SNIPPET, scope)
    return tuple(scope[name] for name in ("A", "B", "Q", "R", "Q_N"))


def bench_riccati(fresh_interpreter: bool):
    A, B, Q, R, Q_N = riccati_problem()
    t0 = time.perf_counter()
    tvlqr(A, B, Q, R, Q_N)
    first = time.perf_counter() - t0
    how = "cache load" if riccati.lq_riccati.stats.cache_hits else "compile"
    warm = median_us(lambda: tvlqr(A, B, Q, R, Q_N), repeat=50) / 1e3
    print(f"tvlqr Riccati pass, nx={NX} nu={NU} N={N}")
    print(f"  warm (median)                               {warm:9.2f} ms")
    print(f"  first call in this process ({how:10s})     {1e3 * first:9.2f} ms")
    if fresh_interpreter:
        snippet = PROBLEM_SNIPPET + "from core import tvlqr\ntvlqr(A, B, Q, R, Q_N)\n"
        cold = start_time(snippet, cold=True)
        cached = start_time(snippet, cold=False)
        print(f"  fresh interpreter, import + first call, cold (empty numba cache) "
              f"{cold:6.2f} s, cached {cached:5.2f} s")


def bench_optimizers(first_order_iterations=60):
    from test_control import swing_up_problem  # the test system lives with the tests

    problem = swing_up_problem(N=N)
    system, x, u = problem["system"], problem["x_ref"], np.ones((N, 1))
    optimize_trajectory(**swing_up_problem(N=10), max_iterations=3)   # load the kernels
    print(f"trajectory optimization, RK4 pendulum swing-up, N={N}")
    for label, call in (
            ("rollout (N Python steps)", lambda: simulation.simulate_open_loop(system.step,
                                                                            problem["x0"], u)),
            ("linearize along trajectory", lambda: linearize_trajectory(system, x, u)),
            ("linearize2 along trajectory",
             lambda: linearize_trajectory(system, x, u, second_order=True))):
        print(f"  test system {label:30s}  {median_us(call, repeat=20) / 1e3:7.2f} ms")
    for method, cap in (("second_order", 200), ("first_order", first_order_iterations)):
        t0 = time.perf_counter()
        result = optimize_trajectory(**problem, method=method, max_iterations=cap)
        elapsed = time.perf_counter() - t0
        status = "converged" if result.converged else f"stopped at the cap of {cap}"
        print(f"  {method:13s} {1e3 * elapsed / max(result.iterations, 1):7.2f} ms/iteration"
              f"   ({result.iterations} iterations, {status}, |grad| {result.gradient_norm:.1e})")


def newton_problem(knots=20, dt=0.01):
    """A tracking problem on the branched tree: from a displaced rest state back to the
    trajectory the tree follows from rest with zero inputs."""
    import core.examples
    vi = core.MidpointVI(core.examples.branched_tree(40), dt)
    rng = np.random.default_rng(0)
    x_rest = vi.rest_state(np.zeros(vi.nq))
    u_ref = np.zeros((knots, vi.nu))
    x_ref = simulation.simulate_open_loop(vi.step, x_rest, u_ref)
    x0 = vi.rest_state(0.05 * rng.standard_normal(vi.nq))
    return dict(system=vi, x0=x0, x_ref=x_ref, u_ref=u_ref, Q=np.eye(vi.nx), R=1e-2 * np.eye(vi.nu))


def bench_newton(iterations=4):
    problem = newton_problem()
    vi = problem["system"]
    optimize_trajectory(**newton_problem(knots=2), method="second_order", max_iterations=1)   # load
    x, u = problem["x_ref"], problem["u_ref"] + 0.1
    lam = np.random.default_rng(1).standard_normal((u.shape[0], vi.nx))
    full = median_us(lambda: np.einsum("ki,kiab->kab", lam,
                                       linearize_trajectory(vi, x, u, second_order=True)[2]), repeat=5)
    contracted = median_us(lambda: linearize_trajectory(vi, x, u, second_order=True, costates=lam), repeat=5)
    first = median_us(lambda: linearize_trajectory(vi, x, u), repeat=5)
    N = u.shape[0]
    print(f"Newton iterations, branched tree (nq={vi.nq}, nu={vi.nu}), midpoint integrator, N={N}")
    print(f"  first-order pass along the trajectory        {first / 1e3:8.2f} ms")
    print(f"  second order contracted with the costate     {contracted / 1e3:8.2f} ms")
    print(f"  full tensors, contracted afterwards          {full / 1e3:8.2f} ms")
    t0 = time.perf_counter()
    result = optimize_trajectory(**problem, method="second_order", max_iterations=iterations, tol=1e-12)
    elapsed = time.perf_counter() - t0
    print(f"  second_order {1e3 * elapsed / max(result.iterations, 1):8.2f} ms/iteration  "
          f"({result.iterations} iterations; cost {result.history[0]['cost']:.6e} -> {result.cost:.6e}; "
          f"models {', '.join(h['model'] for h in result.history[1:])}; {result.message})")


if __name__ == "__main__":
    bench_riccati(fresh_interpreter="--no-start" not in sys.argv)
    bench_optimizers()
    bench_newton()
