"""Many states in one call: ``System.linearize`` and ``System.qdd`` on a stack of N states
against a Python loop of Pinocchio's ``computeABADerivatives`` / ``aba`` over the same states
(Pinocchio has no stacked call), and against a loop of mechnode's own single calls.

    .venv/bin/python bench/bench_stacked.py [robot.urdf] [--n N]

Default: the ``example-robot-data`` Panda (9 coordinates, fixed base), N = 1000 random states.
Prints per-point times (median of repeated runs), the ratios, the thread count and how far the
stacked results are from the single calls (they must be equal to 1e-12). Needs the test extras
(``pin``, ``example-robot-data``). Prints figures; asserts nothing.
"""
import glob
import os
import site
import sys
import time

import numba
import numpy as np

import core


def per_point_us(fn, N, repeat=15):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / N * 1e6)
    return float(np.median(times))


def main():
    import pinocchio as pin
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    N = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 1000
    args = [a for a in args if a != str(N)]
    if args:
        path = args[0]
    else:
        root = next(os.path.join(p, "cmeel.prefix", "share", "example-robot-data", "robots")
                    for p in site.getsitepackages()
                    if os.path.isdir(os.path.join(p, "cmeel.prefix", "share", "example-robot-data")))
        path = glob.glob(os.path.join(root, "panda_description", "urdf", "panda.urdf"))[0]
    s = core.load_urdf(path, mimic="independent")
    m = pin.buildModelFromUrdf(path)
    d = m.createData()
    n, nu = s.nq, s.nu
    rng = np.random.default_rng(0)
    Q, DQ, U = rng.uniform(-1, 1, (N, n)), rng.uniform(-1, 1, (N, n)), rng.uniform(-1, 1, (N, nu))
    # Pinocchio at the same states where its configuration is the joint values (revolute and
    # prismatic joints; a continuous joint's (cos, sin) is made from the angle)
    Qp = np.array([pin.neutral(m) for _ in range(N)]) if m.nq != m.nv else Q
    V, T = DQ, rng.uniform(-1, 1, (N, m.nv))
    A, B = s.linearize(Q, DQ, U)
    worst = 0.0
    for k in range(N):
        a, b = s.linearize(Q[k], DQ[k], U[k])
        worst = max(worst, float(np.abs(A[k] - a).max()), float(np.abs(B[k] - b).max()))
    ddq = s.qdd(Q, DQ, U)
    worst_q = max(float(np.abs(ddq[k] - s.qdd(Q[k], DQ[k], U[k])).max()) for k in range(N))

    def pin_loop_dABA():
        for k in range(N):
            pin.computeABADerivatives(m, d, Qp[k], V[k], T[k])

    def pin_loop_aba():
        for k in range(N):
            pin.aba(m, d, Qp[k], V[k], T[k])

    def own_loop_lin():
        for k in range(N):
            s.linearize(Q[k], DQ[k], U[k])

    def own_loop_qdd():
        for k in range(N):
            s.qdd(Q[k], DQ[k], U[k])

    t = {"stack_lin": per_point_us(lambda: s.linearize(Q, DQ, U), N),
         "loop_dABA": per_point_us(pin_loop_dABA, N),
         "own_lin": per_point_us(own_loop_lin, N),
         "stack_qdd": per_point_us(lambda: s.qdd(Q, DQ, U), N),
         "loop_aba": per_point_us(pin_loop_aba, N),
         "own_qdd": per_point_us(own_loop_qdd, N)}
    print(f"{os.path.basename(path)}: n = {n}, N = {N} states, {numba.get_num_threads()} threads "
          f"(numba.get_num_threads()), load average {os.getloadavg()[0]:.2f}")
    print(f"  linearize stacked      {t['stack_lin']:7.3f} us/point  "
          f"({t['stack_lin'] / t['loop_dABA']:.2f}x a Python loop of computeABADerivatives, "
          f"{t['loop_dABA']:.3f} us/point; a loop of System.linearize {t['own_lin']:.3f})")
    print(f"  qdd stacked            {t['stack_qdd']:7.3f} us/point  "
          f"({t['stack_qdd'] / t['loop_aba']:.2f}x a Python loop of aba, {t['loop_aba']:.3f} us/point; "
          f"a loop of System.qdd {t['own_qdd']:.3f})")
    print(f"  stacked vs single calls: largest difference {worst:.1e} (A, B), {worst_q:.1e} (ddq)")


if __name__ == "__main__":
    main()
