"""Where a call's time goes: ``System.qdd``, ``System.linearize``, ``MidpointVI.step`` and
``MidpointVI.linearize`` split into the Python front-end, numba's dispatch of the entry kernel
(typing and unboxing its arguments) and the kernel's own work (the same kernel called N times
from compiled code), on a one-joint robot (the fixed cost) and on the ``example-robot-data``
Panda (9 coordinates) when it is installed. The integrator's rows alternate two states, so that
every call solves.

    .venv/bin/python bench/bench_call_cost.py

Prints microseconds (per figure the minimum over rounds that alternate the three ways of calling,
so that the differences are not a shared host's slow spells); asserts nothing.
"""
import glob
import os
import site

import numpy as np
from numba import njit

import core
from core.continuous.dynamics import forward_dynamics, linearize_at, linearize_plain, qdd_at
from core.discrete.entry import linearize_entry, linearize_step_at, step_at, step_entry

from common import interleaved_min_us


@njit(nogil=True)
def _qdd_loop(ev, q, dq, u, ddq, K):
    for _ in range(K):
        forward_dynamics(ev, q, dq, u, ddq)


@njit(nogil=True)
def _linearize_loop(ev, q, dq, u, A, B, K):
    for _ in range(K):
        linearize_plain(ev, q, dq, u, A, B)


@njit(nogil=True)
def _step_loop(rec, xs, u, x1, K):
    for k in range(K):
        step_entry(rec, xs[k % 2], u, x1)


@njit(nogil=True)
def _vi_linearize_loop(rec, xs, u, A, B, K):
    for k in range(K):
        linearize_entry(rec, xs[k % 2], u, A, B, None, np.empty(0))


def one_joint():
    s = core.System()
    s.add_frame("link", "world", rz="q", mass=1.0, inertia=[0.01, 0.01, 0.01], com=[0.5, 0.0, 0.0])
    s.add_input("torque", config="q")
    return s


def panda():
    for p in site.getsitepackages():
        found = glob.glob(os.path.join(p, "cmeel.prefix", "share", "example-robot-data", "robots",
                                       "panda_description", "urdf", "panda.urdf"))
        if found:
            return core.load_urdf(found[0], mimic="independent")
    return None


def split(name, s, rounds=15):
    n, nu = s.nq, s.nu
    rng = np.random.default_rng(0)
    q, dq, u = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-1, 1, nu)
    s.qdd(q, dq, u)
    s.linearize(q, dq, u)
    ev, at = s.workspace.evaluation(), s.workspace.address()
    ddq, A, B = np.empty(n), np.empty((2 * n, 2 * n)), np.empty((2 * n, nu))
    _qdd_loop(ev, q, dq, u, ddq, 1)
    _linearize_loop(ev, q, dq, u, A, B, 1)
    vi = core.MidpointVI(s, 0.01)
    xs = np.array([vi.discrete_state(q, dq), vi.discrete_state(q + 1e-3, dq)])
    states, flip = (xs[0], xs[1]), [0]

    def alternate(fn):      # (its own cost, about 0.1 us, is in the call and the dispatch)
        def call():
            flip[0] ^= 1
            return fn(states[flip[0]])
        return call

    x1, Av, Bv = np.empty(vi.nx), np.empty((vi.nx, vi.nx)), np.empty((vi.nx, vi.nu))
    vi.step(xs[0], u)
    vi.linearize(xs[0], u)
    rec, _, vat = vi._call()
    _step_loop(rec, xs, u, x1, 2)
    _vi_linearize_loop(rec, xs, u, Av, Bv, 2)
    K = 200
    t = interleaved_min_us({
        ("qdd", 0): lambda: s.qdd(q, dq, u), ("qdd", 1): lambda: qdd_at(at, q, dq, u, ddq),
        ("qdd", 2): lambda: _qdd_loop(ev, q, dq, u, ddq, K),
        ("linearize", 0): lambda: s.linearize(q, dq, u),
        ("linearize", 1): lambda: linearize_at(at, q, dq, u, A, B),
        ("linearize", 2): lambda: _linearize_loop(ev, q, dq, u, A, B, K),
        ("VI step", 0): alternate(lambda x: vi.step(x, u)),
        ("VI step", 1): alternate(lambda x: step_at(vat, x, u, x1)),
        ("VI step", 2): lambda: _step_loop(rec, xs, u, x1, K),
        ("VI linear.", 0): alternate(lambda x: vi.linearize(x, u)),
        ("VI linear.", 1): alternate(lambda x: linearize_step_at(vat, x, u, Av, Bv)),
        ("VI linear.", 2): lambda: _vi_linearize_loop(rec, xs, u, Av, Bv, K)}, rounds=rounds)
    rows = [(what, t[what, 0], t[what, 1], t[what, 2] / K)
            for what in ("qdd", "linearize", "VI step", "VI linear.")]
    for what, call, kernel, work in rows:
        print(f"{name:10s} {what:10s} call {call:6.2f}   front-end {call - kernel:5.2f}   "
              f"dispatch {kernel - work:5.2f}   kernel's work {work:6.2f}   (us)")


def main():
    split("one joint", one_joint())
    robot = panda()
    if robot is not None:
        split("Panda (9)", robot)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
