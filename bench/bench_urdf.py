"""URDF robots: ``System.linearize`` against Pinocchio's ``computeABADerivatives`` in the same
process, and against the hand-built equivalent (one frame per link, fixed joint, axis rotation
and centre of mass, as users wrote them before ``load_urdf``).

    OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python bench/bench_urdf.py

Needs the test extras (``pin``, ``example-robot-data``). Per robot: median per-call times of
``linearize`` (loaded from the URDF), Pinocchio's derivatives alone and with A, B filled (as
``../shared/bench/sidebyside.py`` does), and ``linearize`` of the hand-built model; the ratios
mechnode / Pinocchio and URDF / hand-built; first, the fixed cost of a call (a one-joint robot).
Timings alternate between the tools in rounds, so load on the shared machine affects both alike.
"""
import os
import sys

import numpy as np

import core

from common import median_us

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from urdfref import ROBOTS, PinocchioRobot, hand_built, robot_path  # noqa: E402


def pin_AB(pin, m, d, q, v, tau, A, B):
    """Pinocchio's analytic ABA derivatives filled into preallocated A, B (Minv's lower triangle
    mirrored), as ``../shared/bench/sidebyside.py`` does; in Pinocchio's own order (ours for
    these robots), every joint actuated."""
    pin.computeABADerivatives(m, d, q, v, tau)
    n = m.nv
    A[n:, :n] = d.ddq_dq
    A[n:, n:] = d.ddq_dv
    Bl = B[n:]
    Bl[:] = d.Minv
    il = np.tril_indices(n, -1)
    Bl[il] = Bl.T[il]


def one_joint():
    """The floor: a one-joint robot (the fixed cost of a call)."""
    return core.load_urdf('''<robot name="one"><link name="base"/>
      <link name="arm"><inertial><origin xyz="0 0 -0.5"/><mass value="1"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="1 0 0"/></joint>
      </robot>''')


def time_robot(name, relative, options, rounds):
    """Median times (us) of the four calls at one random state, alternating in rounds."""
    path = robot_path(relative)
    floating = options.get("floating_base", False)
    s = core.load_urdf(path, **options)
    plain = hand_built(path, floating_base=floating)
    robot = PinocchioRobot(s, path, floating_base=floating)
    rng = np.random.default_rng(0)
    q, dq, u = rng.uniform(-1, 1, s.nq), rng.normal(size=s.nq), rng.normal(size=s.nu)
    n = s.nq
    A, B = np.zeros((2 * n, 2 * n)), np.zeros((2 * n, n))
    A[:n, n:] = np.eye(n)
    qp, vp, tau = robot.state(q, dq, u)
    pin, m, d = robot.pin, robot.model, robot.data
    calls = {
        "lin": lambda: s.linearize(q, dq, u),
        "pin der": lambda: pin.computeABADerivatives(m, d, qp, vp, tau),
        "pin A,B": lambda: pin_AB(pin, m, d, qp, vp, tau, A, B),
        "hand": lambda: plain.linearize(q, dq, u),
    }
    for fn in calls.values():
        fn()
    samples = {k: [] for k in calls}
    for _ in range(rounds):
        for k, fn in calls.items():
            samples[k].append(median_us(fn, repeat=300, budget_s=0.3))
    return n, {k: float(np.median(v)) for k, v in samples.items()}


def main(rounds: int = 5):
    floor = one_joint()
    x = np.array([0.3])
    floor.linearize(x, x, x)
    print(f"fixed cost of a call (one-joint robot): linearize {median_us(lambda: floor.linearize(x, x, x)):.1f} us")
    print(f"{'robot':<18}{'nq':>4}{'lin [us]':>10}{'pin der':>9}{'pin A,B':>9}{'hand':>9}"
          f"{'/pin der':>10}{'/pin A,B':>10}{'/hand':>8}")
    for name, (relative, options) in ROBOTS.items():
        n, t = time_robot(name, relative, options, rounds)
        print(f"{name:<18}{n:>4}{t['lin']:>10.1f}{t['pin der']:>9.1f}{t['pin A,B']:>9.1f}{t['hand']:>9.1f}"
              f"{t['lin'] / t['pin der']:>10.2f}{t['lin'] / t['pin A,B']:>10.2f}{t['lin'] / t['hand']:>8.2f}")


if __name__ == "__main__":
    main()
