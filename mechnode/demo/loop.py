"""The demo's closed loop: the node (its own process, or in this one), the simulated robot, the
reference of a scenario (:mod:`mechnode.demo.scenarios`) and the tracking error until it
converges (see :mod:`mechnode.demo`)."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import threading
import time

import numpy as np

from mechnode.demo.scenarios import (
    ARM_MOVE,
    HOLD_WATCH,
    MOVE,
    PANDA_MOVE,
    REFERENCE_SECONDS,
    SCENARIOS,
)

#: Seconds after the schedule's start beyond which a first command is reported as late (and the
#: node's log kept); the node's diagnostics period (config/*_params.yaml).
FIRST_COMMAND_LATE, DIAGNOSTICS_PERIOD = 0.2, 1.0
#: The node's diagnostics counters printed at the end.
NODE_COUNTERS = ("states", "states_rejected", "states_stamp_stale", "states_stamp_future",
                 "states_stamp_out_of_order", "commands", "commands_saturated", "watchdog_trips",
                 "command_latency_median_us", "command_latency_p99_us")
#: printed too when the node re-plans (replan_period)
REPLAN_COUNTERS = ("replans", "replan_drops", "replans_discarded", "replans_failed",
                   "replan_latency_median_ms", "replan_latency_p99_ms")


#: The node's output lines the demo shows besides keeping them in the node's log: core's compile
#: messages (``core: ...``, ``core[2/2]: ...``) and the node's warm-up lines.
PROGRESS_LINE = re.compile(r"^core(\[[^\]]*\])?: |^\[\w+\] \[[\d.]+\] \[[\w./]+\]: warm-up")


class NodeOutput(threading.Thread):
    """Reads the node process's output (stdout and stderr, one pipe): every line goes to its log
    file, the compile and warm-up lines (:data:`PROGRESS_LINE`) also to ``log`` (the console),
    prefixed ``node |``, so that a cold start shows what compiles and how far it is."""

    def __init__(self, pipe, logfile: str, log):
        super().__init__(name="mechnode_demo_node_output", daemon=True)
        self.pipe, self.logfile, self.log = pipe, logfile, log
        self.shown: list[str] = []
        self.start()

    def run(self):
        with open(self.logfile, "ab") as out:
            for raw in iter(self.pipe.readline, b""):
                out.write(raw)
                out.flush()
                line = raw.decode("utf-8", "replace").rstrip()
                if PROGRESS_LINE.search(line):
                    if line.startswith("["):        # a ROS log line: its message only
                        line = line.split("]: ", 1)[-1]
                    self.shown.append(line)
                    self.log(f"node | {line}")
        self.pipe.close()


def run(params_file=None, namespace="/mechnode_demo", timeout=20.0, threshold=0.01,
        in_process=False, startup_timeout=600.0, log=print, context_domain=None, robot="cartpole",
        replan_period=None, push=None, node_status_out=None):
    """Run the demo; returns ``(exit_status, history, robot_stats)`` with history = [(t, error), ...]
    at every tick of the simulated robot from the schedule's start (the first at ``t <= 0``)
    and robot_stats the simulated robot's :meth:`~mechnode.testing.sim.SimRobot.stats` at the end
    of the tracking (None if the robot did not start). ``robot``: a key of :data:`SCENARIOS`.
    ``replan_period``: the node's parameter of that name (seconds; None keeps the parameter
    file's); ``push``: ``(t, impulse)``, an impulse on the simulated robot's momenta at ``t``
    seconds of the reference (:meth:`~mechnode.testing.sim.SimRobot.push`);
    ``node_status_out``: a dict given the node's last diagnostics values."""
    from mechnode.testing.harness import PARAMS_DIR, ros_environment

    scenario = SCENARIOS[robot]
    params_file = params_file or os.path.join(PARAMS_DIR, scenario.params)
    try:
        model_file = scenario.model_file()       # before anything starts: a missing package is said first
    except RuntimeError as exc:
        log(f"demo failed: {exc}")
        return 1, [], None
    env = ros_environment(context_domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]
    domain = int(env["ROS_DOMAIN_ID"])

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from mechnode_interfaces.msg import GainSchedule
    from mechnode_interfaces.srv import GetModel
    from rclpy.context import Context
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from mechnode.logic.joint_map import JointMap
    from mechnode.logic.plant import Plant, read_model_text
    from mechnode.ros import conversions as cv
    from mechnode.testing.harness import LifecycleClient, Spinner, call, node_command, stop_process, wait_for
    from mechnode.testing.sim import SimRobot

    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node_fqn = f"{namespace.rstrip('/')}/mechnode"
    log(f"mechnode demo: ROS_DOMAIN_ID={domain}, discovery LOCALHOST, namespace {namespace}")
    t_begin = time.monotonic()
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain)
    proc = logfile = relay = None
    spinner = node_spinner = robot = node_inproc = stats = summary = None
    status = 1
    history = []
    late_start = None
    try:
        if in_process:
            from mechnode.ros.node import MechNode
            node_inproc = MechNode(context=ctx, cli_args=["--ros-args", "--params-file", params_file,
                                                          "-r", f"__ns:={namespace}"] + (
                [] if replan_period is None else ["-p", f"replan_period:={float(replan_period)}"]))
            log("node: in this process")
        else:
            fd, logfile = tempfile.mkstemp(prefix="mechnode_demo_", suffix=".log")
            os.close(fd)
            overrides = () if replan_period is None else (f"replan_period:={float(replan_period)}",)
            proc = subprocess.Popen(node_command(params_file, namespace, overrides), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
            relay = NodeOutput(proc.stdout, logfile, log)
            log(f"node: process {proc.pid} (python -m mechnode --ros-args --params-file "
                f"{os.path.relpath(params_file)}), log {logfile}; its warm-up and compile lines are shown here")
        manager = rclpy.create_node("demo_manager", namespace=namespace, context=ctx)
        if scenario.robot_description:
            # as robot_state_publisher does: the URDF, latched, on <namespace>/robot_description
            text, _ = read_model_text(model_file)
            description_pub = manager.create_publisher(String, f"{namespace.rstrip('/')}/robot_description",
                                                       latched)
            description_pub.publish(String(data=text))
            log(f"robot description published: {os.path.basename(model_file)} ({len(text)} characters) on "
                f"{description_pub.topic_name}" + (f" (from {model_file})" if os.path.isabs(model_file) else ""))
        node_status = {}       # the node's latest DiagnosticStatus values (mechnode.ros.diagnostics)
        ours = f"{node_fqn}: "                   # the node's status name (its fully qualified name)
        manager.create_subscription(DiagnosticArray, "/diagnostics", lambda m: node_status.update(
            {kv.key: kv.value for st in m.status if st.name.startswith(ours) for kv in st.values}), 10)
        spinner = Spinner(ctx, manager, threads=1)
        if node_inproc is not None:
            node_spinner = Spinner(ctx, node_inproc, threads=2)
        lc = LifecycleClient(manager, node_fqn)
        lc.wait(60.0)
        log(f"node is up ({time.monotonic() - t_begin:.1f} s): {lc.state()}; configuring (loads the "
            "model, warms up the numba kernels; a cold numba cache compiles them: a minute or two, "
            "each kernel shown below as it compiles)")
        if not lc.change("configure", startup_timeout):
            raise RuntimeError("configure failed (see the node's log)")
        if not lc.change("activate", 30.0):
            raise RuntimeError("activate failed")
        t_active = time.monotonic()
        log(f"node is {lc.state()} ({t_active - t_begin:.1f} s after start)")

        model = call(manager.create_client(GetModel, f"{node_fqn}/get_model"), GetModel.Request(),
                     30.0, "get_model")
        plant = Plant.load(model_file, model.dt, dict(scenario.locked))
        if list(model.config_names) != plant.config_names:
            raise RuntimeError(f"the node's model has the variables {list(model.config_names)}, the simulated "
                               f"robot's {plant.config_names}")
        if scenario.locked:
            log(f"locked joints {dict(scenario.locked)} (the node's locked_joints): the node and the simulated "
                f"robot run the {plant.n}-joint model {plant.config_names}; the effort command has "
                f"{plant.m} values")
        plant.warm_up(processes=1)  # the robot steps in real time from its first command (the node
                                    # compiled the kernels: this process loads them)
        jm = JointMap(plant.config_names, list(scenario.joint_map))
        names, times, pos = scenario.reference()
        q0 = scenario.start(jm.joint_names, np.array([pos[0, names.index(j)] for j in jm.joint_names]))
        robot = SimRobot(plant, jm.joint_names, q0, namespace=namespace, context=ctx)
        robot.start()   # its own executor and step thread
        # the node's command path (a process of its own) discovers the robot's topics: up to a
        # few hundred ms on a busy machine; the reference waits for it, as a real robot's driver
        # is up before a reference is sent
        t_robot = time.monotonic()
        wait_for(lambda: robot.connected, 30.0, "the node's command path to discover the simulated robot")
        # discovery is per direction: the robot seeing the node's subscription does not mean the
        # node takes the robot's states yet; its diagnostics say when it does
        wait_for(lambda: int(node_status.get("states", 0)) > 0, 30.0,
                 "the node to report the robot's JointState in its diagnostics")
        log(f"simulated robot connected to the node's command path ({time.monotonic() - t_robot:.2f} s; "
            f"the node has taken {node_status['states']} of its states)")
        if scenario.hold:
            # idle_action: hold: the node holds the robot where it finds it until the reference
            wait_for(lambda: robot.running and node_status.get("mode") == "holding", 30.0,
                     "the node to hold the robot (diagnostics mode: holding)")
            t_hold = time.monotonic()
            drift = np.zeros(plant.n)
            while time.monotonic() - t_hold < HOLD_WATCH:
                drift = np.maximum(drift, np.abs(robot.latest[1] - q0))
                time.sleep(0.01)
            log(f"node mode: holding; the robot stayed within {drift.max():.2e} of its start for {HOLD_WATCH} s "
                f"({robot.commands} hold commands) before any reference")
            if drift.max() > 0.01:
                raise RuntimeError(f"the held robot drifted by {drift.max():.3g} before the reference")
        else:
            log(f"node mode: {node_status.get('mode', '?')}")
        held = robot.running

        schedules = []
        manager.create_subscription(GainSchedule, f"{node_fqn}/gain_schedule",
                                    lambda m: schedules.append(cv.schedule_from_msg(m)), latched)
        ref_pub = manager.create_publisher(JointTrajectory, f"{node_fqn}/reference", latched)
        wait_for(lambda: ref_pub.get_subscription_count() > 0, 30.0, "the node's reference subscription")
        ref_pub.publish(cv.joint_trajectory(names, times, pos))
        what = {"cartpole": f"cart {MOVE[2]} m in {MOVE[1] - MOVE[0]} s with the pole upright",
                "arm7": f"joints move by {ARM_MOVE} (m for the lift, rad) between 0.5 and 3 s",
                "panda": f"joints move by {PANDA_MOVE} (rad) between 0.5 and 3 s"}[scenario.name]
        log(f"reference published: {what}, {REFERENCE_SECONDS} s, {len(times)} points (positions "
            f"only); robot starts at {dict(zip(jm.joint_names, np.round(q0, 4).tolist(), strict=True))}")
        wait_for(lambda: schedules, 120.0, "the GainSchedule")
        sched, start_ns = schedules[-1]
        n = plant.n
        req = np.stack([np.interp(sched.times, times, pos[:, names.index(j)]) for j in jm.joint_names], 1)
        dev = np.abs(sched.x_ref[:, :n] - req).max(axis=0)
        deviation = dict(zip(jm.joint_names, np.round(dev, 4).tolist(), strict=True))
        log(f"schedule received ({time.monotonic() - t_begin:.1f} s after start): {sched.knots} knots, "
            f"dt {sched.dt} s; the feasible reference "
            f"deviates from the requested one by at most {deviation}")
        wait_for(lambda: robot.running, 10.0, "the first command to reach the robot")
        first = (robot.latest[0] - start_ns) * 1e-9
        if not held and first > FIRST_COMMAND_LATE:
            late_start = f"the first command reached the robot {first:.2f} s after the schedule's start"
            log(f"warning: {late_start}")

        below_since, next_print = None, 0.0
        pushed = push is None
        deadline = t_active + timeout
        end_s = sched.times[-1]
        # every tick of the robot's record from the last one at or before the schedule's start (the
        # state the tracking starts from; polling robot.latest would miss the first ticks when the
        # schedule reaches this process late, and the error falls fast)
        index, ticks = robot.states_since(0)
        before = [i for i, (stamp, _) in enumerate(ticks) if stamp <= start_ns]
        index += (before[-1] if before else 0) - len(ticks)
        converged = False
        while True:
            index, ticks = robot.states_since(index)
            for stamp, q in ticks:
                t = (stamp - start_ns) * 1e-9
                k = sched.knot(t)
                e = q - sched.x_ref[k, :n]
                err = float(np.linalg.norm(e))
                history.append((t, err))
                if not pushed and t >= push[0]:
                    robot.push(push[1])
                    pushed = True
                    log(f"t = {t:5.2f} s   push: momenta {np.round(push[1], 3).tolist()} added to the robot's")
                if t >= next_print:
                    parts = ", ".join(f"{j} {abs(v):.4f}" for j, v in zip(jm.joint_names, e, strict=True))
                    log(f"t = {t:5.2f} s   tracking error |q - q_ref| = {err:.5f}   ({parts})")
                    next_print = 0.5 * (np.floor(t / 0.5) + 1)
                if err >= threshold:
                    below_since = None
                elif below_since is None:
                    below_since, below_wall = t, time.monotonic() - t_begin
                if t >= end_s and below_since is not None and t - below_since >= 1.0:
                    log(f"converged: error {err:.2e} < {threshold} since t = {below_since:.2f} s, "
                        f"{below_wall:.1f} s after start ({robot.steps} steps, {robot.commands} commands)")
                    status = 0
                    converged = True
                    break
            if robot.failure:
                raise RuntimeError(f"simulation failed: {robot.failure}")
            if converged:
                break
            if time.monotonic() > deadline:
                last = f"error {history[-1][1]:.3e}" if history else "no state"
                log(f"NOT converged within {timeout} s of activation: {last} (threshold {threshold})")
                break
            time.sleep(0.02)
        stats = robot.stats()
        summary = robot.summary()
        time.sleep(1.2 * DIAGNOSTICS_PERIOD)          # the node's counters up to now
        log("node: " + ", ".join(f"{k} {node_status.get(k, '?')}" for k in NODE_COUNTERS)
            + "".join(f", {k} {node_status[k]}" for k in REPLAN_COUNTERS if k in node_status))
        if node_status_out is not None:
            node_status_out.update(node_status)
        for transition in ("deactivate", "cleanup", "shutdown"):
            if not lc.change(transition, 30.0):
                log(f"warning: {transition} failed")
        log(f"node lifecycle: deactivate, cleanup, shutdown done ({time.monotonic() - t_begin:.1f} s in all)")
        log(f"summary: {'converged' if status == 0 else 'NOT converged'}; {summary}")
    except (TimeoutError, RuntimeError) as exc:
        log(f"demo failed: {exc}")
        status = 1
        if robot is not None:
            if stats is None:
                stats, summary = robot.stats(), robot.summary()
            log(f"summary: NOT converged; {summary}")
    finally:
        if robot is not None:
            robot.stop()
        if spinner is not None:
            spinner.stop()
        if node_spinner is not None:
            node_spinner.stop()
        if proc is not None:
            code = stop_process(proc)
            if relay is not None:
                relay.join(5.0)
            if (status != 0 or late_start) and logfile:
                with open(logfile, errors="replace") as fh:
                    log("---- node log (tail) ----\n" + "".join(fh.readlines()[-30:]))
            elif logfile:
                os.unlink(logfile)
            if code not in (0, None):
                log(f"node process exited with status {code}")
        if node_inproc is not None:
            node_inproc.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return status, history, stats


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mechnode.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", choices=sorted(SCENARIOS) + ["solo12"], default="cartpole",
                        help="cartpole (default): the embedded default model; arm7: the 7-joint arm "
                        "of core/data/arm7.urdf, handed to the node on /robot_description; panda: "
                        "example-robot-data's Panda with its gripper locked, held from activation; "
                        "solo12: the quadruped balanced on its feet in MuJoCo (mechnode.demo.legged)")
    parser.add_argument("--params", default=None, help="node parameter file "
                        "(default config/<robot>_params.yaml)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds after activation to converge (default %(default)s)")
    parser.add_argument("--threshold", type=float, default=0.01,
                        help="tracking error |q - q_ref| to reach (default %(default)s)")
    parser.add_argument("--in-process", action="store_true", help="run the node in this process")
    parser.add_argument("--namespace", default="/mechnode_demo")
    parser.add_argument("--replan-period", type=float, default=None,
                        help="the node re-plans from the measured state every this many seconds "
                        "(its parameter replan_period; default: the parameter file's, off)")
    parser.add_argument("--push", type=float, nargs="+", default=None, metavar=("T", "P"),
                        help="push the robot at T seconds of the reference: add P (one value per "
                        "joint) to its momenta, e.g. --push 2.0 4.0 -0.5 for the cart-pole; solo12: "
                        "T seconds standing, then a lateral base velocity of P m/s (default 5 0.3)")
    parser.add_argument("--plot", default=None, metavar="FILE.png",
                        help="--robot solo12: write the base position and the efforts against time")
    args = parser.parse_args(argv)
    if args.robot == "solo12":
        from mechnode.demo.legged import run_solo12
        return run_solo12(args.namespace, plot=args.plot, log=lambda s: print(s, flush=True),
                          **({} if args.push is None else {"stand": args.push[0], "push": args.push[1]}))
    if args.plot:
        parser.error("--plot is for --robot solo12")
    push = None if args.push is None else (args.push[0], np.array(args.push[1:]))
    status, _, _ = run(args.params, args.namespace, args.timeout, args.threshold, args.in_process,
                       log=lambda s: print(s, flush=True), robot=args.robot,
                       replan_period=args.replan_period, push=push)
    return status
