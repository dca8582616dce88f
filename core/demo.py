"""Demo: load a model from YAML and print its exact continuous and discrete linearizations.

    python -m core.demo [config/double_pendulum.yaml]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "config", "double_pendulum.yaml")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default=DEFAULT_MODEL, help="model YAML (default: %(default)s)")
    parser.add_argument("--dt", type=float, default=0.01, help="variational integrator time step [s]")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    import core
    system = core.load_system(args.model)
    print(f"model {args.model}: {system}")
    print(f"  q = {system.config_names}, u = {system.input_names}")
    # the paper's operating point for the default model; a relaxed consistent one otherwise
    if os.path.abspath(args.model) == DEFAULT_MODEL:
        q, dq, u = np.array([0.5246, 1.0472]), np.array([1.0, -2.00116]), np.array([2.0])
    else:
        q, dq, u = np.zeros(system.nq), np.zeros(system.nq), np.zeros(system.nu)
    np.set_printoptions(precision=6, suppress=True, linewidth=120)
    A, B = system.linearize(q, dq, u)
    t1 = time.perf_counter()
    print(f"\ncontinuous linearization at q={q}, dq={dq}, u={u}  (x = [q, dq])")
    print("A =\n", A, "\nB =\n", B)
    print("qdd =", system.qdd(q, dq, u), " lambda =", system.constraint_forces(q, dq, u))

    vi = core.MidpointVI(system, args.dt)
    p = vi.momentum(q, dq)
    x = vi.state(q, p)
    Ad, Bd = vi.linearize(x, u)
    print(f"\nmidpoint variational integrator, dt = {args.dt}: x = {vi.state_names}")
    print("x_next =", vi.step(x, u))
    print("A_d =\n", Ad, "\nB_d =\n", Bd)
    print(f"\nstart-up incl. numba cache load and first linearization: {t1 - t0:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
