"""Hours of running: the node on the Panda over real DDS on loopback (private ROS_DOMAIN_ID,
LOCALHOST discovery) for ``--minutes`` (default 30).

    .venv/bin/python bench/bench_soak.py [--minutes 30] [--sample 30] [--rate 500] [--dt 0.01] [--replan-period 0.05]

A ``python -m mechnode`` process with config/panda_params.yaml (the URDF on
``robot_description``, as the Panda demo; its dt 0.01 s, ``--dt``) and ``replan_period`` 0.05 s;
a simulated Panda stepping at 500 Hz (``--rate``: a JointState every 2 ms, each answered by a
command); a new reference every 10 s (the demo's motion there and back); the node's diagnostics
read once a second. This process spins its node on a single-threaded executor: a
multi-threaded one stalls the simulated robot's step thread (the GIL) for tenths of a second.

Every ``--sample`` seconds it prints, for the node's process and its command process: resident
memory (MB), threads, open file descriptors; and the command gaps (as received here, on the
effort topic) in that window: p99 and largest (ms). At the end: each figure's growth from the
sample at one minute to its largest later value (%), the p99 and largest command gap over the
whole run after the first reference, the simulated robot's steps without a fresh command
(missed), and the node's re-plan counters (``replans``, ``replan_drops``). The targets (no
growth beyond 2 %, p99 gap <= 15 ms, largest <= 30 ms, nothing missed or dropped) are printed
next to them. Prints figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import numpy as np

from common import child_pids

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

REFERENCE_EVERY = 10.0           # [s]
REPLAN_PERIOD = 0.05             # [s]
NAMESPACE = "/soak"


def process_figures(pid: int) -> tuple[float, int, int]:
    """(resident memory MB, threads, open file descriptors) of process ``pid`` (NaN, 0, 0 if gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        return (int(fields["VmRSS"].split()[0]) / 1024.0, int(fields["Threads"]), len(os.listdir(f"/proc/{pid}/fd")))
    except (OSError, KeyError, ValueError):
        return float("nan"), 0, 0


class Gaps:
    """Arrival times (time.monotonic) of the commands on the effort topic, kept whole."""

    def __init__(self):
        self.times: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, _msg):
        now = time.monotonic()
        with self.lock:
            self.times.append(now)

    def since(self, t0: float) -> np.ndarray:
        """Gaps (ms) between the commands received after ``t0``."""
        with self.lock:
            t = np.asarray(self.times)
        t = t[t >= t0]
        return 1e3 * np.diff(t) if t.size > 1 else np.zeros(0)


def growth(values) -> float:
    """Largest later value over the first, in % (NaN without two values)."""
    v = np.asarray(values, dtype=float)
    return float(100.0 * (np.nanmax(v[1:]) - v[0]) / v[0]) if v.size > 1 and v[0] > 0 else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--sample", type=float, default=30.0, help="seconds between printed samples")
    ap.add_argument("--replan-period", type=float, default=REPLAN_PERIOD, help="the node's replan_period (s)")
    ap.add_argument("--rate", type=float, default=500.0, help="the simulated robot's rate (Hz)")
    ap.add_argument("--dt", type=float, default=0.01, help="the node's dt (s; its schedules' and re-plans' knots)")
    args = ap.parse_args(argv)
    dt = 1.0 / args.rate

    from mechnode.testing.harness import ros_environment
    env = ros_environment()
    os.environ.update(ROS_DOMAIN_ID=env["ROS_DOMAIN_ID"], ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float64MultiArray, String
    from trajectory_msgs.msg import JointTrajectory

    from mechnode.demo.scenarios import PANDA_LOCKED, PANDA_START_OFFSET, panda_reference_points, panda_urdf
    from mechnode.logic.plant import Plant, read_model_text
    from mechnode.ros import conversions as cv
    from mechnode.testing.harness import (
        PARAMS_DIR,
        LifecycleClient,
        Spinner,
        start_node_process,
        stop_process,
        wait_for,
    )
    from mechnode.testing.sim import ROBOT_COMMAND_QOS, SimRobot

    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    urdf = panda_urdf()
    log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"bench_soak_{os.getpid()}.log")
    proc = start_node_process(os.path.join(PARAMS_DIR, "panda_params.yaml"), NAMESPACE,
                              (f"replan_period:={args.replan_period}", f"dt:={args.dt}"), log_path=log, env=env)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
    bench = rclpy.create_node("soak_bench", namespace=NAMESPACE, context=ctx)
    fqn = f"{NAMESPACE}/mechnode"
    status: dict = {}
    bench.create_subscription(DiagnosticArray, "/diagnostics", lambda m: status.update(
        {kv.key: kv.value for st in m.status if st.name.startswith(f"{fqn}: ") for kv in st.values}), 10)
    gaps = Gaps()
    bench.create_subscription(Float64MultiArray, f"{NAMESPACE}/effort_controller/commands", gaps, ROBOT_COMMAND_QOS)
    description = bench.create_publisher(String, f"{NAMESPACE}/robot_description", latched)
    description.publish(String(data=read_model_text(urdf)[0]))
    spinner = Spinner(ctx, bench, threads=1)
    robot = None
    try:
        lc = LifecycleClient(bench, fqn)
        lc.wait(60.0)
        if not lc.change("configure", 1800.0) or not lc.change("activate", 60.0):
            print(f"the node did not configure and activate (its log: {log})")
            return 1
        plant = Plant.load(urdf, dt, dict(PANDA_LOCKED))
        plant.warm_up(processes=1)
        names, times, pos = panda_reference_points()
        q0 = pos[0] + PANDA_START_OFFSET
        robot = SimRobot(plant, names, q0, namespace=NAMESPACE, context=ctx).start()
        wait_for(lambda: robot.connected and int(status.get("states", 0)) > 0, 60.0, "the node to take the states")
        wait_for(lambda: robot.running and status.get("mode") == "holding", 30.0, "the node to hold the robot")
        time.sleep(1.0)
        ref_pub = bench.create_publisher(JointTrajectory, f"{fqn}/reference", latched)
        wait_for(lambda: ref_pub.get_subscription_count() > 0, 30.0, "the node's reference subscription")
        t_start = time.monotonic()
        end = t_start + 60.0 * args.minutes
        print(f"soak: the node ({proc.pid}) on the Panda, robot at {args.rate:g} Hz, a reference every "
              f"{REFERENCE_EVERY:g} s, re-plans every {args.replan_period * 1e3:.0f} ms, node dt {args.dt:g} s, "
              f"{args.minutes:g} min; log {log}")
        print(f"{'t (s)':>7} | {'node MB':>8} {'thr':>4} {'fds':>4} | {'cmd MB':>8} {'thr':>4} {'fds':>4} | "
              f"{'gap p99':>8} {'gap max':>8} (ms, window) | commands, missed, replans, drops")
        samples, references, next_ref, next_sample = [], 0, t_start, t_start + args.sample
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_ref:
                motion = pos if references % 2 == 0 else pos[::-1]
                ref_pub.publish(cv.joint_trajectory(names, times, motion))
                references += 1
                next_ref += REFERENCE_EVERY
            if now >= next_sample:
                kids = child_pids(proc.pid)
                node_f = process_figures(proc.pid)
                cmd_f = process_figures(kids[0]) if kids else (float("nan"), 0, 0)
                window = gaps.since(next_sample - args.sample)
                p99 = float(np.percentile(window, 99)) if window.size else float("nan")
                big = float(window.max()) if window.size else float("nan")
                missed = robot.steps - robot.fresh_steps
                samples.append((now - t_start, *node_f, *cmd_f))
                print(f"{now - t_start:7.0f} | {node_f[0]:8.1f} {node_f[1]:4d} {node_f[2]:4d} | {cmd_f[0]:8.1f} "
                      f"{cmd_f[1]:4d} {cmd_f[2]:4d} | {p99:8.2f} {big:8.2f}              | {robot.commands}, "
                      f"{missed}, {status.get('replans', '?')}, {status.get('replan_drops', '?')}", flush=True)
                next_sample += args.sample
            if robot.failure or proc.poll() is not None:
                print(f"stopped early: {robot.failure or f'the node exited ({proc.returncode})'}")
                break
            time.sleep(0.05)
        all_gaps = gaps.since(t_start)
        later = [s for s in samples if s[0] >= 60.0 - 1e-9]
        print(f"\nafter {(time.monotonic() - t_start) / 60:.1f} min, {references} references:")
        if len(later) > 1:
            cols = ("node RSS", "node threads", "node fds", "command RSS", "command threads", "command fds")
            print("  growth after the first minute (target <= 2 %): " + ", ".join(
                f"{c} {growth([s[i + 1] for s in later]):+.1f} %" for i, c in enumerate(cols)))
        else:
            print("  growth after the first minute: fewer than two samples after it (a longer --minutes)")
        if all_gaps.size:
            print(f"  command gaps: p99 {np.percentile(all_gaps, 99):.2f} ms (target <= 15), largest "
                  f"{all_gaps.max():.2f} ms (target <= 30), {all_gaps.size + 1} commands received here")
        print(f"  robot: {robot.steps} steps, {robot.steps - robot.fresh_steps} without a fresh command (target 0); "
              f"node: replans {status.get('replans', '?')}, replan_drops {status.get('replan_drops', '?')} "
              f"(target 0), watchdog_trips {status.get('watchdog_trips', '?')}")
        return 0
    finally:
        if robot is not None:
            robot.stop()
        spinner.stop()
        bench.destroy_node()
        stop_process(proc)
        rclpy.try_shutdown(context=ctx)


if __name__ == "__main__":
    sys.exit(main())
