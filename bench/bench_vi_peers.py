"""Midpoint VI on the peer models (issue: speed vs Pinocchio and MuJoCo): a step from a new state
on pendulum40, pendulum80 and tree40 with the chain 40 -> 80 exponent, step + first order,
second order against Pinocchio's ``computeABADerivatives`` timed in the same run, and the
1000-knot tree40 pipeline (``linearize_trajectory`` then the Riccati pass, 2 and 1 threads).

Needs the peer models beside the repository (``../shared/bench/peer_models.py``) and, for the
Pinocchio column, ``pin`` in the interpreter. Prints figures, asserts nothing::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_vi_peers.py [--quick]

``vi_rows`` returns the figures as a dict, for a caller that adds its own columns.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

import core
from core.lqr import tvlqr

from common import median_us

PEERS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "shared", "bench")


def peer_models():
    """The ``peer_models`` module from ``../shared/bench`` (a clear error if it is absent)."""
    if not os.path.isfile(os.path.join(PEERS, "peer_models.py")):
        raise SystemExit(f"bench_vi_peers: the peer models are not at {PEERS}/peer_models.py "
                         "(they sit in ../shared/bench beside the repository)")
    if PEERS not in sys.path:
        sys.path.insert(0, PEERS)
    import peer_models
    return peer_models


def to_mechnode(spec):
    """A :class:`core.System` of a peer model spec (one frame per joint, a body frame below
    it when it carries mass, a torque on every joint)."""
    s = core.System(gravity=list(spec.gravity), name=spec.name)
    for i, j in enumerate(spec.joints):
        parent = "world" if j.parent < 0 else f"J{j.parent}"
        kind = {"p": "t", "r": "r"}[j.kind[0]] + j.kind[1]
        s.add_frame(f"J{i}", parent=parent, offset={"translation": list(j.pos)}, **{kind: j.name})
        if j.mass > 0:
            s.add_frame(f"B{i}", parent=f"J{i}", offset={"translation": list(j.com)}, mass=j.mass,
                        inertia=list(j.inertia))
        s.add_input("torque", config=j.name)
    return s


def to_pinocchio(spec):
    import pinocchio as pin
    m = pin.Model()
    m.gravity.linear = np.array(spec.gravity)
    ids = []
    for j in spec.joints:
        parent = 0 if j.parent < 0 else ids[j.parent]
        jm = {"rx": pin.JointModelRX, "ry": pin.JointModelRY, "rz": pin.JointModelRZ,
              "px": pin.JointModelPX, "py": pin.JointModelPY, "pz": pin.JointModelPZ}[j.kind]()
        jid = m.addJoint(parent, jm, pin.SE3(np.eye(3), np.array(j.pos)), j.name)
        m.appendBodyToJoint(jid, pin.Inertia(j.mass, np.array(j.com), np.diag(j.inertia)),
                            pin.SE3.Identity())
        ids.append(jid)
    return m, m.createData()


def _alternating(fn, xs):
    """``fn(x)`` over the states ``xs`` in turn: the integrator remembers its last solve, so
    every timed call starts from a state it has not just solved."""
    it = [0]

    def call():
        it[0] = (it[0] + 1) % len(xs)
        return fn(xs[it[0]])
    return call


def setup(spec, dt=0.01):
    peer = peer_models()
    s = to_mechnode(spec)
    vi = core.MidpointVI(s, dt)
    q, v, tau = peer.test_state(spec)
    xs = [vi.state(q + d, vi.momentum(q + d, v - d)) for d in (0.0, 1e-3)]
    return s, vi, xs, tau


def vi_rows(quick: bool = False, pinocchio: bool = True) -> dict:
    """The VI figures (microseconds, or seconds for the pipeline) as a dict keyed by row."""
    peer = peer_models()
    budget = 0.5 if quick else 2.0
    specs = {"pendulum40": peer.pendulum(40), "pendulum80": peer.pendulum(80),
             "tree40": peer.tree40()}
    out = {name: model_rows(spec, budget, pinocchio) for name, spec in specs.items()}
    out["chain_exponent_40_80"] = math.log2(out["pendulum80"]["step_us"] / out["pendulum40"]["step_us"])
    out["pipeline_tree40"] = pipeline(specs["tree40"], knots=1000, quick=quick)
    return out


def model_rows(spec, budget: float, pinocchio: bool) -> dict:
    """Step, step + first order and (up to 40 variables) second order of one model, with
    Pinocchio's ``computeABADerivatives`` at the test state when ``pinocchio`` and installed."""
    s, vi, xs, tau = setup(spec)
    vi.warm_up()
    row = {"step_us": median_us(_alternating(lambda x: vi.step(x, tau), xs), budget_s=budget),
           "step_lin1_us": median_us(_alternating(lambda x: vi.step_linearize(x, tau), xs),
                                     budget_s=budget)}
    if spec.nv > 40:
        return row
    row["lin2_us"] = median_us(_alternating(lambda x: vi.linearize2(x, tau), xs), repeat=100,
                               budget_s=2 * budget)
    try:
        import pinocchio as pin
    except ImportError:
        pinocchio = False
    if pinocchio:
        m, d = to_pinocchio(spec)
        q, v, _ = peer_models().test_state(spec)
        row["pin_aba_derivs_us"] = median_us(lambda: pin.computeABADerivatives(m, d, q, v, tau),
                                             repeat=2000, budget_s=budget)
        row["lin2_over_pin"] = row["lin2_us"] / row["pin_aba_derivs_us"]
    return row


def pipeline(spec, knots=1000, quick=False) -> dict:
    """Seconds for ``linearize_trajectory`` of a simulated ``knots``-step trajectory and for the
    Riccati pass (:func:`core.lqr.tvlqr`) over it, with 2 and 1 threads (best of a few)."""
    s, vi, _, _ = setup(spec)
    # the test state scaled by 0.3, no inputs (a free fall with the joints swinging; the test
    # torques on the light fingers diverge within a few steps at dt = 0.01)
    q, v, _ = peer_models().test_state(spec)
    U = np.zeros((knots, vi.nu))
    Q, P, _ = vi.simulate(0.3 * q, vi.momentum(0.3 * q, 0.3 * v), U)
    X = np.hstack([Q, P])
    Qw, Rw = np.eye(vi.nx), 0.1 * np.eye(vi.nu)
    vi.linearize_trajectory(X[:4], U[:3], threads=1)
    vi.linearize_trajectory(X[:4], U[:3], threads=2)
    A, B = vi.linearize_trajectory(X, U, threads=2)
    tvlqr(A[:3], B[:3], Qw, Rw)
    reps = 2 if quick else 4
    res = {}
    for threads in (2, 1):
        t_lin = t_ric = np.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            A, B = vi.linearize_trajectory(X, U, threads=threads)
            t1 = time.perf_counter()
            tvlqr(A, B, Qw, Rw)
            t2 = time.perf_counter()
            t_lin, t_ric = min(t_lin, t1 - t0), min(t_ric, t2 - t1)
        res[f"threads{threads}"] = {"linearize_s": t_lin, "riccati_s": t_ric, "total_s": t_lin + t_ric}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-pinocchio", action="store_true")
    args = ap.parse_args()
    r = vi_rows(args.quick, not args.no_pinocchio)
    print("midpoint VI, dt = 0.01, from a new state every call (median us)")
    print(f"{'model':<12}{'step':>9}{'step+1st':>10}{'2nd':>9}{'pin ABA derivs':>16}{'2nd/pin':>9}")
    for name in ("pendulum40", "pendulum80", "tree40"):
        row = r[name]
        lin2 = f"{row['lin2_us']:9.0f}" if "lin2_us" in row else f"{'-':>9}"
        pin = f"{row['pin_aba_derivs_us']:16.1f}" if "pin_aba_derivs_us" in row else f"{'-':>16}"
        ratio = f"{row['lin2_over_pin']:9.1f}" if "lin2_over_pin" in row else f"{'-':>9}"
        print(f"{name:<12}{row['step_us']:9.1f}{row['step_lin1_us']:10.1f}{lin2}{pin}{ratio}")
    print(f"step time exponent, pendulum 40 -> 80: {r['chain_exponent_40_80']:.2f}")
    for key, p in r["pipeline_tree40"].items():
        print(f"tree40, 1000 knots, {key}: linearize_trajectory {p['linearize_s']:.3f} s + Riccati "
              f"(tvlqr) {p['riccati_s']:.3f} s = {p['total_s']:.3f} s")


if __name__ == "__main__":
    main()
