"""Optimal control of the pendulum (Johnson, Schultz & Murphey, Sec. VIII-A; Figs. 3 and 4).

The pendulum of ``core/data/pendulum.yaml`` (m = l = 1, g = 9.8, torque input) under the midpoint
variational integrator, dt = 0.1, N = 100 steps, state ``x = [theta, p]``:

1. An infeasible reference (Eq. 35): ``theta_ref`` steps from 0 to pi at k = N/2,
   ``p_ref = 0``, ``u_ref = 0``; ``x0 = 0``, initial guess ``u = 0``.
2. Trajectory optimization of ``J = 1/2 sum_k (dx^T Q dx + du^T R du) + 1/2 dx_N^T Q dx_N`` with
   the weights of the authors' published script (``Q = diag(1000, 1)``, ``R = 50``, terminal
   weight ``Q``), the authors' stopping rule (trep's ``descent_tolerance``: the directional
   derivative of J along the descent direction is below 1e-6 in magnitude) and projection (LQR
   with Q = I, R = I): first the paper's two curves of Fig. 3 as the authors' script ran them
   (``PAPER_CURVES``: four Gauss-Newton ("quasi") iterations, then Newton for the second-order
   curve and steepest descent for the first-order one; trep's Armijo constants), then each
   method of :func:`core.optimize_trajectory` from ``u = 0`` with its defaults; printed:
   iterations, final cost, time per iteration.
3. LQR about the optimal (feasible) trajectory (weights ``Q = I``, ``R = 1`` as in the authors'
   closed-loop script), then the closed loop (Eq. 37) and the open loop from ``x(0) = [1, 1]``.

Run ``python examples/pendulum_optimal_control.py [--quick] [--plot DIR]`` (``--plot`` needs
matplotlib, the ``plot`` extra: ``pip install 'mechnode[plot]'``). The functions are importable
(``tests/test_examples.py`` runs reduced versions).

About the methods: ``second_order`` is the projection-operator Newton method that needs the
second-order linearization (Sec. V); ``first_order`` is its Gauss-Newton sibling (the cost's own
weights as the LQ model, trep's "quasi"); ``steepest_descent`` uses identity weights (trep's
"steepest"). The paper's "first-order" curve is steepest descent after four quasi iterations, not
Gauss-Newton. Paper: 14 iterations (second order) and 653 (first order); here under the same
set-up: SECOND_ORDER_ITERATIONS and FIRST_ORDER_ITERATIONS below, both to J = 13297.3788946.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import core  # noqa: E402

CONFIG = "pendulum.yaml"      # packaged with core (core/data/)
METHODS = ("second_order", "first_order", "steepest_descent")
# The authors' set-up (trep's examples/papers/tase2012/pend-optimization.py): four "quasi"
# (Gauss-Newton) iterations, then "newton" (second-order curve) or "steepest" (first-order
# curve), trep's Armijo constants. Fig. 3: 14 and 653 iterations.
PAPER_WARM_UP = dict(first_method="first_order", first_method_iterations=4, **core.OptimizerOptions.TREP_ARMIJO)
PAPER_CURVES = {"paper second-order curve": ("second_order", PAPER_WARM_UP),
                "paper first-order curve": ("steepest_descent", PAPER_WARM_UP)}
SECOND_ORDER_ITERATIONS = 15      # measured here (paper: 14)
FIRST_ORDER_ITERATIONS = 656      # measured here (paper: 653)


@dataclass
class PendulumProblem:
    """The optimal-control problem of Sec. VIII-A (Eq. 35 and the published weights)."""
    vi: object
    system: object          # state-form view of ``vi`` for core.control
    dt: float
    x0: np.ndarray
    x_ref: np.ndarray       # (N+1, 2) infeasible reference
    u_ref: np.ndarray       # (N, 1)
    u_init: np.ndarray      # (N, 1) initial guess
    Q: np.ndarray
    R: np.ndarray
    Q_N: np.ndarray

    @property
    def N(self) -> int:
        return self.u_ref.shape[0]

    @property
    def t(self) -> np.ndarray:
        return self.dt * np.arange(self.N + 1)


@dataclass
class OptimizationRun:
    method: str
    result: object           # core.datatypes.TrajectoryOptimizationResult
    seconds: float
    iteration_times: list = field(default_factory=list)   # wall time of each iteration

    @property
    def seconds_per_iteration(self) -> float:
        return self.seconds / max(self.result.iterations, 1)

    def iterations_to(self, tol: float) -> int | None:
        """First iterate whose descent direction has ``|slope| < tol`` (None if never)."""
        for h in self.result.history:
            if abs(h["slope"]) < tol:
                return h["iteration"]
        return None

    def iterations_to_cost(self, cost: float, rtol: float = 1e-6) -> int | None:
        """First iterate whose cost is within ``rtol`` (relative) of ``cost``."""
        for h in self.result.history:
            if h["cost"] - cost <= rtol * abs(cost):
                return h["iteration"]
        return None


def pendulum_problem(N: int = 100, dt: float = 0.1, q_weight: float = 1000.0,
                     p_weight: float = 1.0, r_weight: float = 50.0) -> PendulumProblem:
    """The paper's problem; ``N`` (even) may be reduced for tests (the step stays at N/2)."""
    if N < 2:
        raise ValueError("N must be at least 2")
    vi = core.MidpointVI(core.load_system(CONFIG), dt)
    x_ref = np.zeros((N + 1, 2))
    x_ref[N // 2:, 0] = np.pi           # Eq. (35a): 0 for k < N/2, pi for k >= N/2
    u_ref = np.zeros((N, 1))             # Eq. (35b, c): p_ref = 0, u_ref = 0
    Q = np.diag([q_weight, p_weight])
    return PendulumProblem(vi, vi, dt, np.zeros(2), x_ref, u_ref,
                           np.zeros((N, 1)), Q, np.array([[r_weight]]), Q.copy())


def initial_cost(problem: PendulumProblem) -> float:
    """Cost of the initial guess (rolled out from x0)."""
    tracking = core.TrackingProblem(problem.system, problem.x0, problem.x_ref, problem.u_ref,
                                    problem.Q, problem.R, problem.Q_N)
    return tracking.cost(tracking.rollout(problem.u_init), problem.u_init)


def optimize(problem: PendulumProblem, method: str, tol: float = 1e-6,
             max_iterations: int = 2000, verbose: bool = False, **options) -> OptimizationRun:
    """Run :func:`core.optimize_trajectory` on the problem from the initial guess ``u = 0``
    (``options``: further keywords of it, e.g. ``PAPER_WARM_UP``)."""
    stamps = []

    def callback(entry):
        stamps.append(time.perf_counter())

    t0 = time.perf_counter()
    result = core.optimize_trajectory(problem.system, problem.x0, problem.x_ref, problem.u_ref,
                                      problem.Q, problem.R, problem.Q_N, method=method,
                                      u_init=problem.u_init, tol=tol,
                                      max_iterations=max_iterations, callback=callback,
                                      verbose=verbose, **options)
    seconds = time.perf_counter() - t0
    return OptimizationRun(method, result, seconds, list(np.diff(stamps)))


@dataclass
class FeedbackRun:
    t: np.ndarray
    x_d: np.ndarray          # feasible reference (the optimal trajectory)
    u_d: np.ndarray
    K: np.ndarray            # (N, 1, 2) LQR gains
    x_closed: np.ndarray
    x_open: np.ndarray
    error_closed: np.ndarray  # ||x_k - x_d,k|| for k = 0..N
    error_open: np.ndarray
    seconds_linearize: float
    seconds_riccati: float


def stabilize(problem: PendulumProblem, x_d, u_d, x0_perturbed=(1.0, 1.0), Q=None, R=None,
              Q_N=None) -> FeedbackRun:
    """LQR about the feasible trajectory ``(x_d, u_d)`` (first-order linearization, Sec. IV) and
    the closed loop of Eq. (37) and the open loop (``u = u_d``) from ``x0_perturbed``."""
    vi = problem.vi
    Q = np.eye(2) if Q is None else np.asarray(Q, float)
    R = np.eye(1) if R is None else np.asarray(R, float)
    t0 = time.perf_counter()
    A, B = vi.linearize_trajectory(x_d, u_d)
    t1 = time.perf_counter()
    K, _ = core.tvlqr(A, B, Q, R, Q if Q_N is None else Q_N)
    t2 = time.perf_counter()
    x0 = np.asarray(x0_perturbed, float)
    x_closed, _ = core.simulate_closed_loop(problem.system.step, x0, x_d, u_d, K)
    x_open = core.simulate_open_loop(problem.system.step, x0, u_d)
    err = lambda x: np.linalg.norm(x - x_d, axis=1)  # noqa: E731
    return FeedbackRun(problem.t, x_d, u_d, K, x_closed, x_open, err(x_closed), err(x_open),
                       t1 - t0, t2 - t1)


# ----------------------------------------------------------------------------------- plots
def plot(problem: PendulumProblem, runs: dict, feedback: FeedbackRun, directory: str) -> list:
    """Figs. 3 and 4 as PNG files in ``directory``; returns the paths ([] without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the plots (pip install 'mechnode[plot]')")
        return []
    os.makedirs(directory, exist_ok=True)
    paths = []
    best = min(r.result.cost for r in runs.values())
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for name, run in runs.items():
        it = [h["iteration"] for h in run.result.history]
        ax1.semilogy(it, [max(h["cost"] - best, 1e-12) for h in run.result.history], label=name)
        ax2.semilogy(it, [abs(h["slope"]) for h in run.result.history], label=name)
    ax1.set(xlabel="iteration", ylabel="J - J* (best cost found)", title="Cost")
    ax2.axhline(1e-6, color="k", ls=":", lw=0.8)
    ax2.set(xlabel="iteration", ylabel="|DJ . direction|", title="Descent slope (tol 1e-6)")
    for ax in (ax1, ax2):
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"Pendulum optimization, N = {problem.N} (cf. Fig. 3)")
    fig.tight_layout()
    paths.append(os.path.join(directory, "pendulum_convergence.png"))
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    t = problem.t
    ax.step(t, problem.x_ref[:, 0], where="post", color="0.6", ls="--",
            label="infeasible reference")
    ax.plot(t, feedback.x_d[:, 0], "k", lw=2, label="feasible reference (optimal)")
    ax.plot(t, feedback.x_closed[:, 0], "b", label="closed loop")
    ax.plot(t, feedback.x_open[:, 0], "r", label="open loop")
    ax.set(xlabel="t [s]", ylabel="theta [rad]",
           title="Pendulum LQR from x(0) = [1, 1] (cf. Fig. 4)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    paths.append(os.path.join(directory, "pendulum_feedback.png"))
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


# ------------------------------------------------------------------------------------ main
def _fmt(value) -> str:
    return "-" if value is None else str(value)


def run(N: int = 100, methods=METHODS, max_iterations=None, tol: float = 1e-6,
        plot_dir: str | None = None, verbose: bool = False, paper: bool = True) -> dict:
    """The whole example; returns the runs and the feedback result (and prints the figures).
    ``paper``: also the two curves of Fig. 3 under the authors' set-up (``PAPER_CURVES``)."""
    max_iterations = max_iterations or {}
    problem = pendulum_problem(N)
    print(f"Pendulum (Sec. VIII-A): dt = {problem.dt}, N = {N}, step 0 -> pi at k = {N // 2}, "
          f"Q = diag(1000, 1), R = 50, Q_N = Q; cost of the initial guess u = 0: "
          f"{initial_cost(problem):.6f}")
    jobs = {m: (m, {}) for m in methods}
    if paper:
        print("  the paper's set-up (4 quasi iterations first, trep's Armijo constants; "
              "Fig. 3: 14 and 653 iterations), then each method alone from u = 0:")
        jobs = {**PAPER_CURVES, **jobs}
    runs = {}
    for name, (method, options) in jobs.items():
        cap = max_iterations.get(method, 2000)
        run_ = optimize(problem, method, tol=tol, max_iterations=cap, verbose=verbose, **options)
        runs[name] = run_
        r = run_.result
        print(f"  {name:24s} converged={str(r.converged):5s} iterations={r.iterations:5d} "
              f"(to |slope| < {tol:g}: {_fmt(run_.iterations_to(tol)):>5s})  "
              f"cost={r.cost:.10f}  ||dJ/du||={r.gradient_norm:.2e}  "
              f"time={run_.seconds:.2f} s ({1e3 * run_.seconds_per_iteration:.1f} ms/iteration)"
              + ("" if r.converged else f"  [{r.message}]"))
    best_method = min(runs, key=lambda m: runs[m].result.cost)
    best = runs[best_method].result
    print(f"  best cost {best.cost:.10f} ({best_method}); iterations to within 1e-6 (relative) "
          "of it: " + ", ".join(f"{m} {_fmt(r.iterations_to_cost(best.cost))}"
                                for m, r in runs.items()))
    feedback = stabilize(problem, best.x, best.u)
    ec, eo = feedback.error_closed, feedback.error_open
    print("LQR about the optimal trajectory (Q = I, R = 1), from x(0) = [1, 1]:")
    print(f"  linearization {1e3 * feedback.seconds_linearize:.2f} ms (first parallel call in "
          f"this process), Riccati {1e3 * feedback.seconds_riccati:.2f} ms for {N} steps")
    print(f"  closed loop |x - x_d|: initial {ec[0]:.4f}  max {ec.max():.4f}  "
          f"final {ec[-1]:.3e}  (mean over the last quarter {ec[3 * N // 4:].mean():.3e})")
    print(f"  open loop   |x - x_d|: initial {eo[0]:.4f}  max {eo.max():.4f}  "
          f"final {eo[-1]:.3e}  (mean over the last quarter {eo[3 * N // 4:].mean():.3e})")
    out = {"problem": problem, "runs": runs, "feedback": feedback}
    if plot_dir:
        for path in plot(problem, runs, feedback, plot_dir):
            print(f"  saved {path}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="reduced form: N = 60")
    parser.add_argument("--N", type=int, default=None, help="number of steps (default 100)")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="comma-separated subset of " + ", ".join(METHODS))
    parser.add_argument("--max-iterations", type=int, default=None,
                        help="iteration cap of each method (default 2000)")
    parser.add_argument("--tol", type=float, default=1e-6)
    parser.add_argument("--plot", metavar="DIR", default=None,
                        help="save PNG figures in DIR (needs matplotlib: the mechnode[plot] extra)")
    parser.add_argument("--verbose", action="store_true", help="one line per iteration")
    parser.add_argument("--no-paper", action="store_true",
                        help="skip the two runs under the paper's set-up")
    args = parser.parse_args(argv)
    N = args.N or (60 if args.quick else 100)
    cap = args.max_iterations or 2000
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            parser.error(f"unknown method {m!r}")
    run(N, methods, {m: cap for m in METHODS}, args.tol, args.plot, args.verbose,
        paper=not args.no_paper)
    return 0


if __name__ == "__main__":
    sys.exit(main())
