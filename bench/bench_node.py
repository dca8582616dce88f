"""Node benchmark over real DDS on loopback (private ROS_DOMAIN_ID, LOCALHOST discovery).

    .venv/bin/python bench/bench_node.py [--no-cold] [--calls 200] [--seconds 5]

Starts ``python -m mechnode`` processes and measures, from a client process:

1. Linearize round trip (request sent -> response received) for the cart-pole and a 40-variable
   tree (``core.examples.branched_tree_spec(40)``, handed to the node as YAML model text in its
   parameter file), continuous and discrete first order, next
   to the library's own time for the same call in this process.
2. Reference received -> schedule published for a 1000-knot reference: the cart-pole
   (underactuated: closed-loop rollout + trajectory optimizer) and a fully actuated double
   pendulum chain (DEL inverse dynamics). Measured outside (reference published -> GainSchedule
   received) and inside the node (its log line: resample, feasibility, linearization, Riccati).
3. State -> command latency at a 1 kHz JointState rate (median, p99): the node echoes every
   command with the stamp of the state it answers (parameter ``command_echo_topic``); latency =
   echo receipt time - state stamp, both on this machine's clock. The node's own callback time
   (state received -> command published) comes from its diagnostics. Both ends are rclpy
   processes: on a loaded 2-core machine the figure is mostly the CPU the two processes get.
4. The command path under heavy requests: the largest gap between commands for JointState at
   100 Hz while the node refuses a 1e6-point reference and a 1e5-knot compute_gains and runs a
   plan_trajectory to its optimizer_time_limit; the node's memory before, at peak and after.
5. Node start-up: process start -> lifecycle services up -> configured (model + numba warm-up)
   -> active, with the numba cache warm and (unless ``--no-cold``) cold (an empty
   NUMBA_CACHE_DIR: every kernel of core and mechnode is compiled; minutes).

Prints figures only; asserts nothing. The machine's load shows in every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))

import rclpy  # noqa: E402
import yaml  # noqa: E402
from rclpy.context import Context  # noqa: E402

import core  # noqa: E402
from core.examples import branched_tree, branched_tree_spec, chain_spec  # noqa: E402
from mechnode.ros import conversions as cv  # noqa: E402
from mechnode.ros.node import LATCHED  # noqa: E402
from mechnode.testing.harness import (  # noqa: E402
    DEFAULT_PARAMS,
    LifecycleClient,
    Spinner,
    call,
    ros_environment,
    start_node_process,
    stop_process,
    wait_for,
)
from mechnode.testing.soak import child_pids  # noqa: E402


def pct(a, q):
    return float(np.percentile(np.asarray(a), q))


class Bench:
    def __init__(self):
        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
        self.tmp = tempfile.mkdtemp(prefix="bench_node_")
        self.procs = []

    def params_file(self, name, model, iters=10, **extra):
        """A parameter file; ``model``: a model file name, or a model as data (a dict, e.g.
        core.examples.chain_spec(2)) written into the file as YAML model text."""
        params = {"model": model if isinstance(model, str) else yaml.safe_dump(model), "dt": 0.01,
                  "optimizer_max_iterations": iters, "command_echo_topic": "~/command_echo", **extra}
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w") as fh:
            yaml.safe_dump({"/**/mechnode": {"ros__parameters": params}}, fh)
        return path

    cli_args = ()

    def start(self, params, ns, env=None, overrides=()):
        """Start a node and bring it to active; returns (client node, fqn, proc, log, timings)."""
        log = os.path.join(self.tmp, ns.strip("/") + ".log")
        t0, wall0 = time.monotonic(), time.time()
        proc = start_node_process(params, ns, overrides, log_path=log, env=env or ros_environment(),
                                  cli_args=self.cli_args)
        self.procs.append(proc)
        client = rclpy.create_node("bench", namespace=ns, context=self.ctx)
        spinner = Spinner(self.ctx, client, threads=3)
        lc = LifecycleClient(client, f"{ns}/mechnode")
        lc.wait(120)
        t_up = time.monotonic()
        assert lc.change("configure", 1800), open(log).read()[-2000:]
        t_conf = time.monotonic()
        assert lc.change("activate", 60)
        t_act = time.monotonic()
        stamps = {}
        for key, text in (("node_created", "mechnode started"), ("node_configured", "configured:"),
                          ("node_active", "active:")):
            m = re.search(r"\[INFO\] \[(\d+\.\d+)\] [^\n]*" + re.escape(text), open(log).read())
            stamps[key] = float(m.group(1)) - wall0 if m else float("nan")
        return dict(client=client, spinner=spinner, fqn=f"{ns}/mechnode", ns=ns, proc=proc, log=log,
                    lc=lc, up=t_up - t0, configured=t_conf - t0, active=t_act - t0, **stamps)

    def stop(self, h):
        h["spinner"].stop()
        h["client"].destroy_node()
        stop_process(h["proc"])

    def close(self):
        for p in self.procs:
            stop_process(p)
        rclpy.try_shutdown(context=self.ctx)


# ------------------------------------------------------------------------------ 1. Linearize
def bench_linearize(b, h, system, calls):
    from mechnode_interfaces.srv import Linearize
    cl = h["client"].create_client(Linearize, f"{h['fqn']}/linearize")
    n, m = system.nq, system.nu
    rng = np.random.default_rng(0)
    q, dq = 0.1 * rng.standard_normal(n), 0.1 * rng.standard_normal(n)
    vi = core.MidpointVI(system, 0.01)
    p = vi.momentum(q, dq)
    out = {}
    for discrete in (False, True):
        req = Linearize.Request(q=q.tolist(), dq=dq.tolist(), p=p.tolist(), u=np.zeros(m).tolist(),
                                discrete=discrete, order=1)
        assert call(cl, req, 60).success
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            r = call(cl, req, 60)
            times.append(time.perf_counter() - t0)
            assert r.success, r.message
        if discrete:
            x = vi.state(q, p)
            vi.linearize(x, np.zeros(m))
            t0 = time.perf_counter()
            for _ in range(20):
                vi.linearize(x, np.zeros(m))
            lib = (time.perf_counter() - t0) / 20
        else:
            system.linearize(q, dq, np.zeros(m))
            t0 = time.perf_counter()
            for _ in range(20):
                system.linearize(q, dq, np.zeros(m))
            lib = (time.perf_counter() - t0) / 20
        out["discrete" if discrete else "continuous"] = (1e3 * np.median(times), 1e3 * pct(times, 99), 1e3 * lib)
    return out


# ------------------------------------------------------------------------------ 2. reference -> schedule
def reference_msg(names, knots, dt, positions_fn):
    t = np.linspace(0.0, (knots - 1) * dt, 101)
    return cv.joint_trajectory(names, t, positions_fn(t))


def bench_reference(b, h, msg, repeats):
    from mechnode_interfaces.msg import GainSchedule
    from trajectory_msgs.msg import JointTrajectory
    got = []
    h["client"].create_subscription(GainSchedule, f"{h['fqn']}/gain_schedule",
                                    lambda m: got.append(time.perf_counter()), LATCHED)
    pub = h["client"].create_publisher(JointTrajectory, f"{h['fqn']}/reference", LATCHED)
    wait_for(lambda: pub.get_subscription_count() > 0, 30, "reference subscription")
    outside, inside = [], []
    for _ in range(repeats):
        n = len(got)
        seq = len(re.findall(r"schedule #\d+ published", open(h["log"]).read())) + 1
        t0 = time.perf_counter()
        pub.publish(msg)
        wait_for(lambda n=n: len(got) > n, 600, "GainSchedule")
        outside.append(got[-1] - t0)
        pattern = rf"schedule #{seq} published: (\d+) knots.*?; ([\d.]+) ms \(resample ([\d.]+), " \
                  rf"feasibility ([\d.]+), linearization ([\d.]+), Riccati ([\d.]+) ms\)"
        line = wait_for(lambda pattern=pattern: re.search(pattern, open(h["log"]).read()), 10, "the node's log line")
        inside.append([float(v) for v in line.groups()])
    return outside, inside


# ------------------------------------------------------------------------------ 3. state -> command
def bench_command_latency(b, h, seconds, rate=1000.0, during=None):
    """The receiving side has a node and a single-threaded executor of its own (as the node's
    control path does), so that this process keeps up with 1 kHz too."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    rx = rclpy.create_node("bench_rx", namespace=h["ns"], context=b.ctx)
    lat, diags = [], []
    clock = rx.get_clock()

    def on_echo(msg):
        lat.append((clock.now().nanoseconds - cv.stamp_ns(msg.header.stamp)) * 1e-9)

    rx.create_subscription(JointState, f"{h['fqn']}/command_echo", on_echo, qos_profile_sensor_data)
    h["client"].create_subscription(DiagnosticArray, "/diagnostics", diags.append, 10)
    ex = SingleThreadedExecutor(context=b.ctx)
    ex.add_node(rx)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    pub = rx.create_publisher(JointState, f"{h['ns']}/joint_states", qos_profile_sensor_data)
    wait_for(lambda: pub.get_subscription_count() > 0, 30, "JointState subscription")
    time.sleep(0.5)
    names, q, dq = ["cart_joint", "pole_joint"], np.array([0.01, 0.02]), np.zeros(2)
    period = 1.0 / rate
    sent = 0
    if during is not None:      # e.g. publish a reference: the node computes a schedule meanwhile
        during()
    t_start = t_next = time.perf_counter()
    t_end = t_next + seconds
    while t_next < t_end:
        pub.publish(cv.joint_state(names, q, dq, clock.now().nanoseconds))
        sent += 1
        t_next += period
        delay = t_next - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    achieved = sent / (time.perf_counter() - t_start)
    time.sleep(2.5)
    ex.shutdown(timeout_sec=2.0)
    rx.destroy_node()
    values = {}
    for m in diags[-3:]:
        for s in m.status:
            if s.name.startswith(f"{h['fqn']}: "):
                values = {kv.key: kv.value for kv in s.values}
    return lat, sent, achieved, values


# ------------------------------------------------------------------------------ sections
def section_linearize(b, cart, args):
    print("\n1. Linearize round trip over DDS (median / p99 ms; the library call in-process, ms)")
    cases = [("cart-pole (nq=2, nx=4)", cart, core.load_system("cartpole.yaml"))]
    tree = b.start(b.params_file("tree", branched_tree_spec(40)), "/bench_tree")
    cases.append(("tree (nq=40, nx=80)", tree, branched_tree(40)))
    for label, h, system in cases:
        for kind, (med, p99, lib) in bench_linearize(b, h, system, args.calls).items():
            print(f"   {label:24s} {kind:10s}: {med:7.3f} / {p99:7.3f} ms   (library {lib:.3f} ms)")
    b.stop(tree)


def _print_reference(label, out, ins):
    i = np.median(np.asarray(ins), axis=0)
    print(f"   {label:34s} outside {1e3 * np.median(out):8.1f} ms;  inside {i[1]:.1f} ms = resample "
          f"{i[2]:.1f} + feasibility {i[3]:.1f} + linearization {i[4]:.1f} + Riccati {i[5]:.1f} ms "
          f"({int(i[0])} knots)")


def section_reference(b, cart, args):
    print("\n2. Reference received -> schedule published, 1000 knots (dt 0.01 s, 101 points; median "
          f"of {args.repeats})")
    msg = reference_msg(["cart_joint", "pole_joint"], 1001, 0.01,
                        lambda t: np.stack([0.3 * np.clip((t - 1) / 3, 0, 1), 0 * t], 1))
    _print_reference("cart-pole (optimizer, 5 iterations)", *bench_reference(b, cart, msg, args.repeats))
    ch = b.start(b.params_file("chain2", chain_spec(2)), "/bench_chain")
    msg = reference_msg(["theta0", "theta1"], 1001, 0.01,
                        lambda t: np.stack([0.5 * np.sin(t), 0.3 * np.sin(2 * t)], 1))
    _print_reference("double chain (inverse dynamics)", *bench_reference(b, ch, msg, args.repeats))
    b.stop(ch)


def section_latency(b, cart, args):
    # a schedule to track for the whole stream: 30 s holding the upright equilibrium
    bench_reference(b, cart, reference_msg(["cart_joint", "pole_joint"], 3001, 0.01,
                                           lambda t: np.zeros((t.size, 2))), 1)
    print(f"\n3. State -> command latency, JointState at 1 kHz for {args.seconds:g} s (cart-pole)")
    lat, sent, rate, diag = bench_command_latency(b, cart, args.seconds)
    lat_ms = 1e3 * np.asarray(lat)
    print(f"   sent {sent} states ({rate:.0f} Hz achieved); the node received {diag.get('states', '?')} "
          f"and sent {diag.get('commands', '?')} commands; {len(lat)} command echoes received here")
    if len(lat):
        print(f"   end to end (state stamp -> echo received): median {np.median(lat_ms):.3f} ms, "
              f"p99 {pct(lat_ms, 99):.3f} ms, max {lat_ms.max():.3f} ms")
    print(f"   inside the node (callback: map by name, Legendre, law, publish): median "
          f"{diag.get('command_latency_median_us', '?')} us, p99 {diag.get('command_latency_p99_us', '?')} us")
    # the same while the node computes a 1000-knot schedule (optimizer) on another thread
    from trajectory_msgs.msg import JointTrajectory
    pub = cart["client"].create_publisher(JointTrajectory, f"{cart['fqn']}/reference", LATCHED)
    msg = reference_msg(["cart_joint", "pole_joint"], 1001, 0.01,
                        lambda t: np.stack([0.3 * np.clip((t - 1) / 3, 0, 1), 0 * t], 1))
    lat, sent, rate, diag = bench_command_latency(b, cart, args.seconds, during=lambda: pub.publish(msg))
    lat_ms = 1e3 * np.asarray(lat)
    if len(lat):
        print(f"   while a 1000-knot schedule is computed (optimizer, ~2 s): end to end median "
              f"{np.median(lat_ms):.3f} ms, p99 {pct(lat_ms, 99):.3f} ms, max {lat_ms.max():.3f} ms; "
              f"{len(lat)} of {sent} echoed")


def _rss_mb(pid):
    """Resident memory (MB) of the node: its process and its children (the command process)."""
    def one(p):
        try:
            with open(f"/proc/{p}/status") as fh:
                return next(int(line.split()[1]) / 1024.0 for line in fh if line.startswith("VmRSS:"))
        except OSError:
            return 0.0
    return one(pid) + sum(one(c) for c in child_pids(pid))


def section_heavy(b, cart, args):
    """Commands at 100 Hz while the node refuses a 1e6-point reference and a 1e5-knot
    compute_gains and runs a plan_trajectory to its optimizer_time_limit."""
    from mechnode_interfaces.srv import ComputeGains, PlanTrajectory

    from mechnode.ros.conversions import matrix_msg
    from mechnode.testing.harness import start_big_reference
    print("\n4. Command path under heavy requests: JointState at 100 Hz (cart-pole) while the node gets a "
          "1e6-point reference, a 1e5-knot compute_gains and a plan_trajectory (tol 1e-300, runs to "
          "optimizer_time_limit)")
    bench_reference(b, cart, reference_msg(["cart_joint", "pole_joint"], 3001, 0.01,
                                           lambda t: np.zeros((t.size, 2))), 1)
    c = cart["client"]
    gains = c.create_client(ComputeGains, f"{cart['fqn']}/compute_gains")
    plan = c.create_client(PlanTrajectory, f"{cart['fqn']}/plan_trajectory")
    wait_for(lambda: gains.service_is_ready() and plan.service_is_ready(), 30, "the node's services")
    # the states and the command receipts in a process of their own (mechnode.testing.state_stream),
    # so that this process's work on the big requests does not show as gaps
    stream = subprocess.Popen(
        [sys.executable, "-m", "mechnode.testing.state_stream", "--ns", cart["ns"], "--joints",
         "cart_joint,pole_joint", "--positions", "0.01,0.02", "--rate", "100", "--seconds", "9"],
        env=ros_environment(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if stream.stdout.readline().strip() != "ready":
        print(f"   the state stream failed: {stream.communicate()[0]}")
        return
    stop, rss = threading.Event(), []
    pid = cart["proc"].pid

    def sample():
        while not stop.is_set():
            rss.append(_rss_mb(pid))
            time.sleep(0.01)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    time.sleep(1.0)
    rss_before = _rss_mb(pid)
    X = np.zeros((301, 4))
    X[:, 0] = np.linspace(0.0, 0.5, 301)
    t0 = time.monotonic()
    big = start_big_reference(f"{cart['fqn']}/reference", ["cart_joint", "pole_joint"], 1_000_000)
    f_gains = gains.call_async(ComputeGains.Request(x_ref=matrix_msg(np.zeros((100_000, 2)))))
    f_plan = plan.call_async(PlanTrajectory.Request(x_ref=matrix_msg(X), max_iterations=1000, tolerance=1e-300))
    wait_for(lambda: f_gains.done() and f_plan.done() and big.poll() is not None, 120, "the answers")
    t_answers = time.monotonic() - t0
    out, _ = stream.communicate(timeout=60)
    stop.set()
    thread.join(2.0)
    rss_after = _rss_mb(pid)
    print(f"   {big.stdout.read().strip()}")
    print(f"   load average {os.getloadavg()[0]:.2f}; answers after {t_answers:.2f} s: compute_gains "
          f"{f_gains.result().message[:70]!r}; plan_trajectory {f_plan.result().message[:70]!r}")
    try:
        r = json.loads(out.strip().splitlines()[-1])
        print(f"   over 9 s from the first command (states at 100 Hz from a process of their own: "
              f"{r['states_sent']} sent, largest gap between them {1e3 * r['largest_state_gap']:.1f} ms): "
              f"{r['commands']} commands, largest gap {1e3 * r['largest_gap']:.1f} ms, p99 "
              f"{1e3 * r['p99_gap']:.1f} ms")
    except (ValueError, KeyError, IndexError, TypeError):
        print(f"   the state stream's output: {out!r}")
    print(f"   node RSS (both processes) before {rss_before:.0f} MB, peak {max(rss):.0f} MB, after "
          f"{rss_after:.0f} MB")


def section_startup(b, args):
    print("\n5. Node start-up, seconds from process start: seen by the client (lifecycle services "
          "discovered / configure answered / activate answered) and in the node's log (node created / "
          "configured / active)")

    def show(label, h):
        print(f"   {label}: client {h['up']:.2f} / {h['configured']:.2f} / {h['active']:.2f};  node log "
              f"{h['node_created']:.2f} / {h['node_configured']:.2f} / {h['node_active']:.2f}")

    h = b.start(DEFAULT_PARAMS, "/bench_warm")
    show("warm numba cache", h)
    b.stop(h)
    if not args.no_cold:
        with tempfile.TemporaryDirectory() as cache:
            env = ros_environment()
            env["NUMBA_CACHE_DIR"] = cache
            print("   cold numba cache (an empty NUMBA_CACHE_DIR): compiling every kernel ...", flush=True)
            h = b.start(DEFAULT_PARAMS, "/bench_cold", env=env)
            show("cold numba cache", h)
            b.stop(h)


# ------------------------------------------------------------------------------ main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache start-up")
    ap.add_argument("--calls", type=int, default=200, help="Linearize calls per case")
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of the 1 kHz state stream")
    ap.add_argument("--repeats", type=int, default=3, help="references per model")
    ap.add_argument("--only", choices=["linearize", "reference", "latency", "heavy", "startup"], default=None)
    ap.add_argument("--node-switch-interval", type=float, default=None,
                    help="the node's GIL switch interval (mechnode --switch-interval)")
    args = ap.parse_args(argv)
    print(f"bench_node: ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}, discovery LOCALHOST, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    b = Bench()
    if args.node_switch_interval:
        b.cli_args = ("--switch-interval", str(args.node_switch_interval))
    try:
        if args.only != "startup":
            cart = b.start(DEFAULT_PARAMS, "/bench_cartpole",
                           overrides=["command_echo_topic:=~/command_echo"])
            for name, section in (("linearize", section_linearize), ("reference", section_reference),
                                  ("latency", section_latency), ("heavy", section_heavy)):
                if args.only in (None, name):
                    section(b, cart, args)
            b.stop(cart)
        if args.only in (None, "startup"):
            section_startup(b, args)
    finally:
        b.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
