"""The speed table against peers, every row with the peer's figure from the same run and the
ratio mechnode / peer. Models are the tool-agnostic ones of ``../shared/bench/peer_models.py``
(``pendulum(N)`` planar chains, ``tree40`` a 40-joint branched humanoid), built identically in
mechnode, Pinocchio and MuJoCo; agreement of ``qdd`` (and A, B with Pinocchio) is printed first.

    pip install pin mujoco          # benchmark-only dependencies, into the project's venv
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_peers.py [--quick] [--startup]

Rows:

1. ``System.qdd`` vs ``pinocchio.aba``;
2. ``System.linearize`` vs ``pinocchio.computeABADerivatives`` alone;
3. ``MidpointVI.step`` from a new state (the integrator caches its last solve: calls alternate
   two states), and the growth exponent from 40 to 80 links;
4. ``MidpointVI.step_linearize`` (step + first order) from a new state vs MuJoCo's
   ``mjd_transitionFD`` (Euler, forward differences: its step and its derivatives);
5. ``MidpointVI.linearize2`` (second order) vs ``computeABADerivatives``; 5b. the same contracted
   with a costate (``linearize2(x, u, costate=λ)``, what a Newton step needs);
6. 1000 knots on tree40: ``linearize_trajectory`` + the Riccati pass (``core.tvlqr``);
7. with ``--startup``: node start-up with an empty numba cache (``bench/bench_node.py --only
   startup``, which needs ROS 2).

Prints figures only; asserts nothing. Absolute times move 10-30 % between runs on a shared
machine; the ratios are taken within one run.
"""
from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(os.path.dirname(REPO), "shared", "bench")
sys.path.insert(0, REPO)

import core  # noqa: E402

try:
    import mujoco  # noqa: E402
    import pinocchio as pin  # noqa: E402
except ImportError as exc:
    sys.exit(f"bench_peers: {exc.name} is missing: pip install pin mujoco (benchmark-only dependencies)")
try:
    sys.path.insert(0, PEERS)
    from peer_models import bench_stmt, pendulum, test_state, tree40  # noqa: E402
    from sidebyside import to_mechnode, to_pinocchio  # noqa: E402 - the peers' comparison's builders
except ImportError:
    sys.exit(f"bench_peers: the peer models are not at {PEERS} (../shared/bench beside the repository)")


# ------------------------------------------------------------------------------ the models
def to_mujoco(spec, dt: float):
    """MJCF with one body per massive joint; a massless joint at the same point as its only child
    shares that child's body (MuJoCo applies a body's joints in order, each about the axes left
    by the previous ones, as the chained frames do). Euler integrator, a motor per joint."""
    children = {}
    for i, j in enumerate(spec.joints):
        children.setdefault(j.parent, []).append(i)
    body_of = {}

    def group(i):
        """Joints ``i, ...`` that share one body: follow massless joints with one child at 0."""
        out = [i]
        while spec.joints[out[-1]].mass == 0 and len(children.get(out[-1], [])) == 1:
            c = children[out[-1]][0]
            if any(spec.joints[c].pos):
                break
            out.append(c)
        return out

    def body(i, depth):
        g = group(i)
        last = spec.joints[g[-1]]
        pad = "  " * depth
        xml = [f'{pad}<body name="b{i}" pos="{" ".join(map(repr, spec.joints[i].pos))}">']
        for k in g:
            body_of[k] = i
            j = spec.joints[k]
            kind = "slide" if j.kind[0] == "p" else "hinge"
            axis = {"x": "1 0 0", "y": "0 1 0", "z": "0 0 1"}[j.kind[1]]
            xml.append(f'{pad}  <joint name="{j.name}" type="{kind}" axis="{axis}"/>')
        inertia = " ".join(repr(max(v, 1e-12)) for v in last.inertia)
        xml.append(f'{pad}  <inertial pos="{" ".join(map(repr, last.com))}" mass="{last.mass!r}" '
                   f'diaginertia="{inertia}"/>')
        for c in children.get(g[-1], []):
            xml.extend(body(c, depth + 1))
        xml.append(f"{pad}</body>")
        return xml

    world = [line for r in children[-1] for line in body(r, 2)]
    motors = "".join(f'<motor joint="{j.name}" gear="1"/>' for j in spec.joints)
    gravity = " ".join(map(repr, spec.gravity))
    xml = (f'<mujoco><option timestep="{dt!r}" integrator="Euler" gravity="{gravity}"/>'
           f'<worldbody>{"".join(world)}</worldbody><actuator>{motors}</actuator></mujoco>')
    m = mujoco.MjModel.from_xml_string(xml)
    return m, mujoco.MjData(m)


# ------------------------------------------------------------------------------ the rows
def timed(stmt, ns, total_s):
    return bench_stmt(stmt, ns, total_s=total_s)["median_us"]


def continuous_rows(spec, total_s):
    s, (m, d) = to_mechnode(spec), to_pinocchio(spec)
    q, v, tau = test_state(spec)
    A, B = s.linearize(q, v, tau)
    pin.computeABADerivatives(m, d, q, v, tau)
    n = spec.nv
    Minv = np.triu(d.Minv) + np.triu(d.Minv, 1).T
    err_ab = max(np.abs(A[n:, :n] - d.ddq_dq).max() / max(1.0, np.abs(d.ddq_dq).max()),
                 np.abs(B[n:] - Minv).max() / max(1.0, np.abs(Minv).max()))
    err_qdd = np.abs(s.qdd(q, v, tau) - pin.aba(m, d, q, v, tau)).max()
    ns = dict(s=s, q=q, v=v, tau=tau, pin=pin, m=m, d=d)
    return dict(err_qdd=err_qdd, err_ab=err_ab,
                qdd=timed("s.qdd(q, v, tau)", ns, total_s), aba=timed("pin.aba(m, d, q, v, tau)", ns, total_s),
                lin=timed("s.linearize(q, v, tau)", ns, total_s),
                abad=timed("pin.computeABADerivatives(m, d, q, v, tau)", ns, total_s))


def vi_rows(spec, total_s, dt=0.01, second_order=True):
    """Step, step + first order, second order of the VI from a new state each call; MuJoCo's
    step + finite-difference derivatives on the same model."""
    s = to_mechnode(spec)
    vi = core.MidpointVI(s, dt)
    q, v, tau = test_state(spec)
    xs = [vi.discrete_state(q, v), vi.discrete_state(q + 1e-3, v - 1e-3)]
    mm, md = to_mujoco(spec, dt)
    mujoco.mj_resetData(mm, md)
    md.qpos[:], md.qvel[:], md.ctrl[:] = q, v, tau
    mujoco.mj_forward(mm, md)
    err_mj = np.abs(md.qacc - s.qdd(q, v, tau)).max() / max(1.0, np.abs(md.qacc).max())
    nx = 2 * mm.nv + mm.na
    Amj, Bmj = np.zeros((nx, nx)), np.zeros((nx, mm.nu))

    def mj_fd():
        md.qpos[:], md.qvel[:], md.ctrl[:] = q, v, tau
        mujoco.mjd_transitionFD(mm, md, 1e-6, 0, Amj, Bmj, None, None)

    lam = np.random.default_rng(0).standard_normal(vi.nx)
    ns = dict(vi=vi, it=itertools.cycle(xs), tau=tau, mj_fd=mj_fd, lam=lam)
    out = dict(err_mj=err_mj, step=timed("vi.step(next(it), tau)", ns, total_s),
               lin1=timed("vi.step_linearize(next(it), tau)", ns, total_s), mjd=timed("mj_fd()", ns, total_s))
    if second_order:
        out["lin2"] = timed("vi.linearize2(next(it), tau)", ns, total_s)
    out["lin2c"] = timed("vi.linearize2(next(it), tau, costate=lam)", ns, total_s)
    return out


def pipeline_row(spec, knots=1000, dt=0.01):
    """Seconds to linearize a ``knots``-step trajectory of ``spec`` and run the Riccati pass
    (a smooth motion of every joint: each knot is re-solved from its state)."""
    s = to_mechnode(spec)
    vi = core.MidpointVI(s, dt)
    q, v, tau = test_state(spec)
    t = dt * np.arange(knots + 1)[:, None]
    X = vi.discrete_states(0.3 * q * np.sin(t + v), 0.3 * q * np.cos(t + v))
    U = np.tile(0.1 * tau, (knots, 1))
    Q, R = np.eye(vi.nx), 0.1 * np.eye(vi.nu)
    out = {}
    for threads in (2, 1):
        vi.linearize_trajectory(X[:3], U[:2], threads=threads)    # compiled and warm
        t0 = time.perf_counter()
        A, B = vi.linearize_trajectory(X, U, threads=threads)
        t1 = time.perf_counter()
        core.tvlqr(A, B, Q, R)
        t2 = time.perf_counter()
        out[threads] = (t1 - t0, t2 - t1)
    return out


def startup_row():
    """The cold start line of ``bench_node.py --only startup`` (ROS 2 needed)."""
    cmd = [sys.executable, os.path.join(REPO, "bench", "bench_node.py"), "--only", "startup"]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    lines = [ln.strip() for ln in res.stdout.splitlines() if "numba cache:" in ln]
    return lines or [f"bench_node.py failed (exit {res.returncode}): {res.stderr.strip()[-300:]}"]


def ratio(a, b):
    return f"{a / b:5.2f}x"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="shorter timing runs")
    ap.add_argument("--startup", action="store_true", help="also the node's cold start (minutes; ROS 2)")
    args = ap.parse_args(argv)
    total = 0.2 if args.quick else 0.6
    print(f"bench_peers: pinocchio {pin.__version__}, mujoco {mujoco.__version__}, load average "
          f"{os.getloadavg()[0]:.2f}; medians per call in us; ratio = mechnode / peer")
    specs = [pendulum(5), pendulum(40), pendulum(80), tree40()]
    cont = {}
    for spec in specs:
        cont[spec.name] = r = continuous_rows(spec, total)
        print(f"{spec.name:11s} agreement with pinocchio: qdd {r['err_qdd']:.1e}, A, B {r['err_ab']:.1e}")
    print("\n1. qdd vs pinocchio.aba")
    for name, r in cont.items():
        print(f"   {name:11s} {r['qdd']:8.1f} vs {r['aba']:8.1f}  {ratio(r['qdd'], r['aba'])}")
    print("2. linearize vs computeABADerivatives alone")
    for name, r in cont.items():
        print(f"   {name:11s} {r['lin']:8.1f} vs {r['abad']:8.1f}  {ratio(r['lin'], r['abad'])}")
    vis = {spec.name: vi_rows(spec, total, second_order=spec.nv <= 40) for spec in specs[1:]}
    print("3. MidpointVI.step from a new state")
    for name, r in vis.items():
        print(f"   {name:11s} {r['step']:8.1f}")
    e = np.log(vis["pendulum80"]["step"] / vis["pendulum40"]["step"]) / np.log(2)
    print(f"   growth exponent pendulum40 -> pendulum80: {e:.2f}")
    print("4. step + first order from a new state vs MuJoCo mjd_transitionFD (Euler, forward differences)")
    for name, r in vis.items():
        print(f"   {name:11s} {r['lin1']:8.1f} vs {r['mjd']:8.1f}  {ratio(r['lin1'], r['mjd'])}   "
              f"(qdd agreement with MuJoCo {r['err_mj']:.1e})")
    print("5. linearize2 (VI second order) vs computeABADerivatives")
    for name, r in vis.items():
        if "lin2" in r:
            peer = cont[name]["abad"]
            print(f"   {name:11s} {r['lin2']:8.1f} vs {peer:8.1f}  {ratio(r['lin2'], peer)}")
    print("5b. linearize2 contracted with a costate (the Newton step's lam . H) vs computeABADerivatives")
    for name, r in vis.items():
        peer = cont[name]["abad"]
        print(f"   {name:11s} {r['lin2c']:8.1f} vs {peer:8.1f}  {ratio(r['lin2c'], peer)}")
    print("6. 1000 knots on tree40: linearize_trajectory + Riccati (tvlqr), seconds")
    for threads, (t_lin, t_ric) in pipeline_row(tree40()).items():
        print(f"   threads={threads}: {t_lin:.3f} + {t_ric:.3f} = {t_lin + t_ric:.3f}")
    if args.startup:
        print("7. node start-up with an empty numba cache (bench_node.py --only startup)")
        for line in startup_row():
            print(f"   {line}")


if __name__ == "__main__":
    main()
