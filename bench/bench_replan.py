"""Re-plan latency (``mechnode.logic.replan``): the closed loop predicted from a measured state under the
schedule in force, linearized exactly along the prediction (``core.MidpointVI.closed_loop``, one
compiled call), and the TV-LQR gains along it, over a 1 s horizon at dt = 0.01 (100 steps), on
the 7-joint arm of core/data/arm7.urdf, example-robot-data's Panda (gripper locked, as
config/panda_params.yaml) and tree40, the peers' 40-joint branched humanoid (fixed base, a motor per
joint; ``../shared/bench/peer_models.py``).

    .venv/bin/python bench/bench_replan.py [--count 300]

Per robot: median and 99th percentile of a whole re-plan from states perturbed off the
reference at random knots, the medians of its two parts (prediction + linearization; Riccati
pass), and the load average; once re-solving the gains only, once with the Gauss-Newton step
towards the reference (``reference=``: the step's Riccati pass and a second closed loop, counted
in the second part). The terminal weight is solved once per schedule
(``mechnode.logic.replan.terminal_for``), as a node re-planning one schedule would. Prints figures
only; asserts nothing.
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import core  # noqa: E402
from mechnode.logic.gains import gain_schedule  # noqa: E402
from mechnode.logic.plant import Plant  # noqa: E402
from mechnode.logic.replan import replan, terminal_for  # noqa: E402
from mechnode.logic.weights import Weights  # noqa: E402

DT, HORIZON, KNOTS = 0.01, 1.0, 150


def plants():
    from urdfref import robot_path
    yield "arm7", Plant.load(os.path.join(ROOT, "core", "data", "arm7.urdf"), DT)
    yield "panda", Plant.load(robot_path("panda_description/urdf/panda.urdf"), DT,
                              locked={"panda_finger_joint1": 0.04})
    try:        # the peers' 40-joint branched humanoid (fixed base, a motor per joint)
        sys.path.insert(0, os.path.join(os.path.dirname(ROOT), "shared", "bench"))
        from peer_models import tree40
        from sidebyside import to_mechnode
    except ImportError:
        print("tree40: the peer models are not at ../shared/bench beside the repository")
        return
    yield "tree40", Plant(to_mechnode(tree40()), DT)


def reference(plant, rng):
    """A schedule along an exactly feasible reference: every joint swings 0.2 rad about a bent
    pose in 1.5 s, inputs and momenta from the DEL inverse dynamics (starting at rest)."""
    vi = plant.vi
    q0 = 0.3 * rng.uniform(-1, 1, plant.n)
    t = DT * np.arange(KNOTS + 1)[:, None]
    Q = q0 + 0.2 * np.sin(2.0 * t) * rng.uniform(-1, 1, plant.n)
    p0 = vi.discrete_momentum(Q[0], Q[0])                      # (the first step's, at rest)
    U, P, _ = vi.inverse_dynamics(Q, p0)
    X = np.hstack([Q, P])
    nq, nx = plant.n, vi.nx
    w = Weights(np.diag([100.0] * nq + [1.0] * (nx - nq)), 1e-2 * np.eye(vi.nu))
    return gain_schedule(plant, X, U, w, list(plant.system.config_names)), w


def bench(name, plant, count, rng):
    s, w = reference(plant, rng)
    horizon_steps = int(round(HORIZON / DT))
    P_N = terminal_for(plant, s, w)                          # once per schedule
    for ref, what in ((None, "re-plan"), (s, "+ step ")):
        replan(plant, s, s.x_ref[0], 0.0, w, HORIZON, P_N, ref)       # compiled / loaded
        total, pred, ric = [], [], []
        for _ in range(count):
            k = int(rng.integers(0, s.knots - 1 - horizon_steps))
            x = s.x_ref[k] + 1e-3 * rng.standard_normal(plant.vi.nx) * np.maximum(1.0, np.abs(s.x_ref[k]))
            t0 = time.perf_counter()
            r = replan(plant, s, x, k * DT, w, HORIZON, P_N, ref)
            total.append(time.perf_counter() - t0)
            pred.append(r.info["closed_loop_s"])
            ric.append(r.info["riccati_s"])
        ms = 1e3 * np.array(total)
        print(f"{name:7s} nx={plant.vi.nx:3d} nu={plant.vi.nu:3d}  {what} median {np.median(ms):6.2f} ms, "
              f"p99 {np.percentile(ms, 99):6.2f} ms  (prediction + linearization {1e3 * np.median(pred):6.2f} ms, "
              f"Riccati{' + step' if ref is not None else ''} {1e3 * np.median(ric):5.2f} ms)  "
              f"load {os.getloadavg()[0]:.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=300, help="re-plans timed per robot (default 300)")
    args = ap.parse_args(argv)
    print(f"re-plan over {HORIZON:g} s at dt {DT:g} ({int(round(HORIZON / DT))} steps); "
          f"OPENBLAS_NUM_THREADS = {os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    rng = np.random.default_rng(0)
    for name, plant in plants():
        try:
            bench(name, plant, args.count, rng)
        except core.CoreError as e:         # (printed, not hidden: the figure is missing)
            print(f"{name:7s} failed: {e}")


if __name__ == "__main__":
    main()
