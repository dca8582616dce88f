"""Whole trajectories against Crocoddyl (same Pinocchio, same process): the Panda with its fingers
locked, N knots (default 100) of dt = 0.01 s along a smooth joint-space reference with
gravity-compensating inputs, state-tracking weights diag(100 I, I) and input weights 1e-3 I.

    # (scripts/bootstrap.sh installs Crocoddyl so, without its dependencies: they would move
    # example-robot-data back to 5.0.0)
    .venv/bin/pip install --no-deps crocoddyl==3.2.1 libcrocoddyl==3.2.1
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_trajectory.py [--knots N] [--rounds R]

Rows (per knot; the two tools' calls alternate, the median of each):

* rollout and exact derivatives: ``MidpointVI.linearize_trajectory`` (1 thread) against
  ``ShootingProblem.calc`` + ``calcDiff`` over free forward dynamics, integrated by RK4 and by
  explicit Euler (Crocoddyl's two usual integrators; the discretizations differ from the
  variational midpoint rule: the rows compare the cost of the same job);
* the Riccati pass: ``tvlqr`` against ``SolverDDP.backwardPass`` on those derivatives;
* the tracking solve from the reference's inputs to the same tolerance: ``optimize_trajectory``
  (``second_order``, ``first_order``) against ``SolverFDDP`` (RK4 and Euler), each run once
  untimed first (a first call in a process loads compiled kernels: printed apart), then
  ``--rounds`` timed runs alternating, with iterations and the largest joint tracking error.

Prints figures only; asserts nothing.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np


def _arg(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def _median_alternating(fns: dict, rounds: int) -> dict:
    """Median wall time (s) of each ``fns[name]()``, the functions called in turn ``rounds`` times."""
    times: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _panda():
    """(Pinocchio model without the fingers, mechnode system with them locked, URDF path)."""
    import pinocchio as pin

    import core
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from urdfref import robot_path
    path = robot_path("panda_description/urdf/panda.urdf")
    fingers = ["panda_finger_joint1", "panda_finger_joint2"]
    full = pin.buildModelFromUrdf(path)
    model = pin.buildReducedModel(full, [full.getJointId(f) for f in fingers], pin.neutral(full))
    system = core.load_urdf(path, mimic="independent", locked={f: 0.0 for f in fingers})
    assert system.nq == model.nq == 7
    return model, system


def _crocoddyl_problem(model, qr, dqr, ur, dt, wq, wu, integrator):
    import crocoddyl
    state = crocoddyl.StateMultibody(model)
    actuation = crocoddyl.ActuationModelFull(state)
    n, N = model.nq, ur.shape[0]

    def action(k, terminal=False):
        costs = crocoddyl.CostModelSum(state, n)
        xr = np.concatenate([qr[k], dqr[k]])
        costs.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(wq),
                                                       crocoddyl.ResidualModelState(state, xr, n)), 1.0)
        if not terminal:
            costs.addCost("u", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(wu),
                                                           crocoddyl.ResidualModelControl(state, ur[k])), 1.0)
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
        step = 0.0 if terminal else dt
        if integrator == "euler":
            return crocoddyl.IntegratedActionModelEuler(dam, step)
        return crocoddyl.IntegratedActionModelRK(dam, crocoddyl.RKType.four, step)

    x0 = np.concatenate([qr[0], dqr[0]])
    return crocoddyl.ShootingProblem(x0, [action(k) for k in range(N)], action(N, True))


def main() -> int:
    try:
        import crocoddyl
        import pinocchio as pin
    except ImportError as exc:
        print(f"bench_trajectory: needs Crocoddyl and Pinocchio ({exc}): .venv/bin/pip install --no-deps "
              "crocoddyl==3.2.1 libcrocoddyl==3.2.1 (and the test extras)")
        return 1
    import core
    N, rounds, dt = _arg("--knots", 100), _arg("--rounds", 5), 0.01
    model, system = _panda()
    n = model.nq
    vi = core.MidpointVI(system, dt=dt)
    t = np.arange(N + 1) * dt
    qr = np.array([0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8]) + 0.3 * np.sin(np.pi * t)[:, None]
    dqr = 0.3 * np.pi * np.cos(np.pi * t)[:, None] * np.ones(n)
    data = model.createData()
    ur = np.array([pin.rnea(model, data, qr[k], dqr[k], np.zeros(n)) for k in range(N)])
    wq, wu = np.r_[100.0 * np.ones(n), np.ones(n)], 1e-3 * np.ones(n)
    problems = {name: _crocoddyl_problem(model, qr, dqr, ur, dt, wq, wu, name) for name in ("rk4", "euler")}
    xs = [np.concatenate([qr[k], dqr[k]]) for k in range(N + 1)]
    us = [ur[k] for k in range(N)]
    X, U = vi.discrete_states(qr, dqr), ur.copy()
    Q, R = np.diag(wq), np.diag(wu)
    print(f"Panda (7 joints, fingers locked), N = {N} knots, dt = {dt} s; {rounds} alternating rounds, medians")

    # per knot: rollout + derivatives, the Riccati pass
    def derivatives(problem):
        def run():
            problem.calc(xs, us)
            problem.calcDiff(xs, us)
        return run
    vi.linearize_trajectory(X, U, threads=1)
    per = _median_alternating({"mechnode": lambda: vi.linearize_trajectory(X, U, threads=1),
                               "rk4": derivatives(problems["rk4"]), "euler": derivatives(problems["euler"])},
                              20 * rounds)
    A, B = vi.linearize_trajectory(X, U, threads=1)
    ddp = crocoddyl.SolverDDP(problems["rk4"])
    ddp.setCandidate(xs, us, False)
    problems["rk4"].calc(xs, us)
    problems["rk4"].calcDiff(xs, us)
    riccati = _median_alternating({"mechnode": lambda: core.tvlqr(A, B, Q, R, Q), "croc": ddp.backwardPass},
                                  20 * rounds)
    us_per = 1e6 / N
    print(f"{'per knot':44s} {'mechnode':>10s} {'Crocoddyl':>10s} {'ratio':>6s}")
    for label, ours, theirs in [
            ("rollout + exact derivatives (RK4), 1 thread", per["mechnode"], per["rk4"]),
            ("rollout + exact derivatives (Euler)", per["mechnode"], per["euler"]),
            ("Riccati pass (tvlqr / backwardPass)", riccati["mechnode"], riccati["croc"])]:
        print(f"{label:44s} {ours * us_per:8.2f} us {theirs * us_per:8.2f} us {ours / theirs:6.2f}")

    # whole solves from the reference's inputs
    results: dict = {}

    def fddp(integrator):
        solver = crocoddyl.SolverFDDP(problems[integrator])
        solver.th_stop = 1e-9

        def run():
            solver.solve([xs[0]] * (N + 1), us, 200, False)
            results[integrator] = (solver.iter, np.abs(np.array(solver.xs)[:, :n] - qr).max())
        return run

    def ours(method):
        def run():
            r = core.optimize_trajectory(vi, X[0], X, U, Q, R, Q, method=method, u_init=U, tol=1e-6,
                                         max_iterations=200)
            results[method] = (r.iterations, np.abs(np.asarray(r.x)[:, :n] - qr).max())
        return run
    solves = {"FDDP, RK4": fddp("rk4"), "FDDP, Euler": fddp("euler"),
              "second_order": ours("second_order"), "first_order": ours("first_order")}
    for name, run in solves.items():        # untimed: a first call loads the compiled kernels
        t0 = time.perf_counter()
        run()
        if name in ("second_order", "first_order"):
            print(f"  (first {name} solve in this process: {1e3 * (time.perf_counter() - t0):.0f} ms)")
    wall = _median_alternating(solves, rounds)
    keys = {"FDDP, RK4": "rk4", "FDDP, Euler": "euler", "second_order": "second_order", "first_order": "first_order"}
    print(f"{'tracking solve':44s} {'wall':>10s} {'iter.':>6s} {'max |q - q_ref|':>16s} {'/ FDDP RK4':>10s}")
    for name in solves:
        iterations, error = results[keys[name]]
        label = name if name.startswith("FDDP") else f"mechnode {name}"
        print(f"{label:44s} {1e3 * wall[name]:7.1f} ms {iterations:6d} {error:16.2e} "
              f"{wall[name] / wall['FDDP, RK4']:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
