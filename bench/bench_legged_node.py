"""The node balancing legged robots simulated by MuJoCo, over real DDS on loopback: state ->
command latency and the balance's figures.

    .venv/bin/python bench/bench_legged_node.py [--seconds 10] [--robot solo12|talos|both]

For each robot: ``python -m mechnode`` with ``config/solo12_params.yaml`` (Talos: the same
settings on its two soles, frame contacts, its crouched stance of ``tests/test_mujoco_balance.py``)
and :class:`mechnode.testing.mujoco_robot.MujocoRobot` in this process (JointState and Odometry
every 2 ms from the simulator's ground truth, the node's efforts applied as they come). Printed:
the node's own state -> command time (JointState received -> command published, median and p99
from its diagnostics), the robot's ticks with a fresh command, its overruns, and how far the base
and the feet moved while balanced. Prints figures only; asserts nothing. Both processes share
the machine's cores: the figures include its load.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))

import rclpy  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.context import Context  # noqa: E402
from urdfref import robot_path  # noqa: E402

import core  # noqa: E402
from mechnode.testing.harness import (  # noqa: E402
    PARAMS_DIR,
    LifecycleClient,
    Spinner,
    ros_environment,
    start_node_process,
    stop_process,
    wait_for,
)
from mechnode.testing.mujoco_plant import MujocoPlant  # noqa: E402
from mechnode.testing.mujoco_robot import MujocoRobot  # noqa: E402


def _solo():
    path = robot_path("solo_description/robots/solo12.urdf")
    feet = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    system = core.load_urdf(path, floating_base="quaternion", contacts=feet)
    q = system.neutral()
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    stance = core.standing(system, q, height=0.016)
    return path, system, stance, {"contacts": feet}, {"foot_radius": 0.016}


def _talos():
    from test_mujoco_balance import _talos as talos
    path, system, stance = talos()
    n = system.nv
    params = {"contacts": [f"{frame}=frame" for frame, _, _ in system.contacts], "Q": [100.0] * n + [1.0] * n,
              "R": [1.0] * system.nu, "command_limit": 1000.0}
    return path, system, stance, params, {"sole": (0.105, 0.065)}


def run(name: str, seconds: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path, system, stance, overrides, shape = {"solo12": _solo, "talos": _talos}[name]()
    with open(os.path.join(PARAMS_DIR, "solo12_params.yaml")) as f:
        params = yaml.safe_load(f)["/**/mechnode"]["ros__parameters"]
    params.update(model=path, diagnostics_period=0.5, **overrides)
    tmp = tempfile.mkdtemp(prefix="bench_legged_")
    params_file = os.path.join(tmp, "params.yaml")
    with open(params_file, "w") as f:
        yaml.safe_dump({"/**/mechnode": {"ros__parameters": params}}, f)
    ns = f"/bench_legged_{name}_{os.getpid()}"
    proc = start_node_process(params_file, ns, log_path=os.path.join(tmp, "mechnode.log"), env=ros_environment())
    ctx = Context()
    rclpy.init(context=ctx, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
    client = rclpy.create_node("bench_client", namespace=ns, context=ctx)
    status: dict = {}

    def take(msg):
        for st in msg.status:
            if st.name.startswith(f"{ns}/mechnode: "):
                status.update({kv.key: kv.value for kv in st.values})
    client.create_subscription(DiagnosticArray, "/diagnostics", take, 10)
    spinner = Spinner(ctx, client, threads=2)
    robot = None
    try:
        life = LifecycleClient(client, f"{ns}/mechnode")
        life.wait(60.0)
        t0 = time.monotonic()
        if not (life.change("configure", 900.0) and life.change("activate", 60.0)):
            raise RuntimeError(f"the node did not come up; log in {tmp}")
        up = time.monotonic() - t0
        plant = MujocoPlant(path, system, **shape)
        robot = MujocoRobot(plant, stance.q, namespace=ns, context=ctx).start()
        wait_for(lambda: robot.started is not None, 60.0, "the first balance command")
        wait_for(lambda: plant.time - robot.started >= seconds, 3 * seconds + 30.0, "the run")
        status.clear()
        wait_for(lambda: "command_latency_p99_us" in status, 5.0, "the diagnostics")
        record = [r for r in robot.record if r[3] is not None]
        base = np.array([r[1][:3] for r in record])
        feet = np.array([r[2] for r in record])
        print(f"{name}: nv = {system.nv}, configure + activate {up:.1f} s; {robot.steps} ticks of 2 ms, "
              f"{100 * robot.fresh_steps / max(robot.steps, 1):.1f} % with a fresh command, {robot.overruns} "
              f"overruns (max lateness {1e3 * robot.max_lateness:.1f} ms); node state -> command "
              f"median {status['command_latency_median_us']} us, p99 {status['command_latency_p99_us']} us; "
              f"base moved {1e3 * np.linalg.norm(base - base[0], axis=1).max():.3f} mm, feet "
              f"{1e3 * np.linalg.norm(feet - feet[0], axis=2).max():.3f} mm in {seconds:g} s")
    finally:
        if robot is not None:
            robot.stop()
        spinner.stop()
        client.destroy_node()
        stop_process(proc)
        ctx.try_shutdown()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--robot", choices=("solo12", "talos", "both"), default="both")
    args = parser.parse_args(argv)
    for name in (("solo12", "talos") if args.robot == "both" else (args.robot,)):
        run(name, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
