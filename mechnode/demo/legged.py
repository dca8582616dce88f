"""``python -m mechnode.demo --robot solo12``: the node balances Solo12 simulated by MuJoCo.

What runs:

* the node, started as its own process as a user starts it (``python -m mechnode --ros-args
  --params-file config/solo12_params.yaml -p model:=<solo12.urdf>``: ``floating_base:
  quaternion``, point contacts on the four feet, ``idle_action: balance``), driven through its
  lifecycle (configure, activate; at the end deactivate, cleanup, shutdown);
* Solo12 in MuJoCo (:class:`mechnode.testing.mujoco_robot.MujocoRobot`: ``example-robot-data``'s
  URDF through MuJoCo's own parser, spheres on the feet, a floor with friction; its ground truth
  published as ``JointState`` and ``nav_msgs/Odometry`` every 2 ms in real time, the node's
  efforts applied as they come), standing crouched on its feet, held by its stand until the
  node's first command.

The node balances it where it stands; after ``--stand`` seconds the base is pushed sideways
(``--push`` m/s, the legs' joints moving so that the feet do not). Printed every 0.5 s: the base's
distance from where it stood (mm), its tilt, the feet's normal forces (N, MuJoCo's) and the
largest effort; at the end the standing error, the push's peak and the time the base took to come
back within 1 cm. Exit status 0 if the robot stood within 1 cm and 1 deg, came back within 1 cm
less than 2 s after the push and no foot moved 1 cm; 1 otherwise. ``--plot FILE.png`` writes the
base position and the efforts against time (matplotlib, the ``plot`` extra).

MuJoCo (``pip install mujoco``) and ``example-robot-data`` come with the test extras
(``scripts/bootstrap.sh`` installs them); without them the demo says what to install.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from mechnode.demo.scenarios import example_robot_file

SOLO12_URDF = "solo_description/robots/solo12.urdf"
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
CROUCH = (0.0, 0.8, -1.6)       # (hip abduction, hip flexion, knee) per leg [rad]
FOOT_RADIUS = 0.016             # the feet's spheres in MuJoCo [m]
BACK_WITHIN = 0.01              # [m] the push is recovered once the base is this close again
PRINT_PERIOD = 0.5              # [s]


def _check_mujoco() -> None:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        raise RuntimeError("this demo simulates the robot with MuJoCo, which is not installed: "
                           ".venv/bin/pip install mujoco (or the test extras: .venv/bin/pip install "
                           "-e '.[test]'; scripts/bootstrap.sh installs them)") from None


def run_solo12(namespace: str = "/mechnode_demo", stand: float = 5.0, after: float = 3.0, push: float = 0.3,
               plot: str | None = None, log=print, context_domain=None, startup_timeout: float = 600.0) -> int:
    """The demo of the module docstring; its exit status."""
    try:
        _check_mujoco()
        urdf = example_robot_file(SOLO12_URDF)
    except RuntimeError as exc:
        log(f"demo failed: {exc}")
        return 1
    import rclpy
    from rclpy.context import Context

    import core
    from mechnode.testing.harness import (
        PARAMS_DIR,
        LifecycleClient,
        Spinner,
        ros_environment,
        start_node_process,
        stop_process,
        wait_for,
    )
    from mechnode.testing.mujoco_plant import MujocoPlant
    from mechnode.testing.mujoco_robot import MujocoRobot

    env = ros_environment(context_domain)
    domain = int(env["ROS_DOMAIN_ID"])
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    system = core.load_urdf(urdf, floating_base="quaternion", contacts=list(FEET))
    q = system.neutral()
    q[7:] = np.tile(CROUCH, 4)
    stance = core.standing(system, q, height=FOOT_RADIUS)
    params_file = os.path.join(PARAMS_DIR, "solo12_params.yaml")
    fd, logfile = tempfile.mkstemp(prefix="mechnode_demo_solo12_", suffix=".log")
    os.close(fd)
    proc = start_node_process(params_file, namespace, (f"model:={urdf}",), log_path=logfile, env=env)
    log(f"mechnode demo (Solo12 in MuJoCo): ROS_DOMAIN_ID={domain}, namespace {namespace}; node process "
        f"{proc.pid} (python -m mechnode --ros-args --params-file {os.path.relpath(params_file)} "
        f"-p model:={urdf}), log {logfile}")
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain)
    manager = rclpy.create_node("demo_manager", namespace=namespace, context=ctx)
    spinner = Spinner(ctx, manager, threads=1)
    robot = None
    status = 1
    try:
        lc = LifecycleClient(manager, f"{namespace.rstrip('/')}/mechnode")
        lc.wait(60.0)
        t0 = time.monotonic()
        if not lc.change("configure", startup_timeout) or not lc.change("activate", 30.0):
            raise RuntimeError(f"the node did not configure and activate (its log: {logfile})")
        log(f"node active ({time.monotonic() - t0:.1f} s): floating base on {', '.join(FEET)}, balance at 500 Hz")
        plant = MujocoPlant(urdf, system, foot_radius=FOOT_RADIUS)
        robot = MujocoRobot(plant, stance.q, namespace=namespace, context=ctx,
                            events=[(stand, lambda p: p.push([0.0, push, 0.0]))]).start()
        wait_for(lambda: robot.started is not None, 60.0, "the node's first balance command (its log: " + logfile + ")")
        log(f"Solo12 standing on its feet (base at {np.round(stance.q[:3], 4).tolist()} m); a {push} m/s lateral "
            f"push at {stand:g} s")
        printed = 0.0
        while plant.time - robot.started < stand + after:
            time.sleep(0.05)
            if plant.time - robot.started >= printed:
                printed += PRINT_PERIOD
                _, qm, _, u, _ = robot.record[-1]
                log(f"t = {plant.time - robot.started:5.2f} s  base {1e3 * np.linalg.norm(qm[:3] - stance.q[:3]):6.2f} "
                    f"mm  tilt {_tilt(qm[3:7], stance.q[3:7]):.3f} deg  feet normal forces "
                    f"{np.round(robot.normal_forces, 2).tolist()} N  |effort| max {np.abs(u).max():.3f} N m")
        status = _summary(robot, stance, stand, plot, log)
    except (RuntimeError, TimeoutError) as exc:
        log(f"demo failed: {exc}")
    finally:
        if robot is not None:
            robot.stop()
        for transition in ("deactivate", "cleanup", "shutdown"):
            try:
                lc.change(transition, 30.0)
            except Exception:  # noqa: BLE001 - best effort; the process is stopped below
                break
        spinner.stop()
        manager.destroy_node()
        stop_process(proc)
        ctx.try_shutdown()
    return status


def _tilt(quat, reference) -> float:
    return float(np.degrees(2.0 * np.arccos(min(1.0, abs(float(np.dot(quat, reference)))))))


def _summary(robot, stance, stand: float, plot, log) -> int:
    record = [r for r in robot.record if r[3] is not None]
    t = np.array([r[0] for r in record]) - robot.started
    base = np.array([r[1][:3] for r in record])
    error = np.linalg.norm(base - stance.q[:3], axis=1)
    tilt = np.array([_tilt(r[1][3:7], stance.q[3:7]) for r in record])
    feet = np.array([r[2] for r in record])
    slip = np.linalg.norm(feet - feet[0], axis=2).max(axis=1)
    u = np.array([r[3] for r in record])
    before = t < stand
    out = np.flatnonzero(~before & (error > BACK_WITHIN))
    back = float(t[out[-1]] - stand) if out.size else 0.0
    log(f"standing {stand:g} s: base within {1e3 * error[before].max():.3f} mm and {tilt[before].max():.4f} deg, "
        f"feet within {1e3 * slip[before].max():.3f} mm")
    log(f"push: base {1e3 * error[~before].max():.1f} mm away at most, back within {1e3 * BACK_WITHIN:g} mm "
        f"{back:.2f} s after it; feet moved {1e3 * slip.max():.2f} mm; efforts up to {np.abs(u).max():.3f} N m")
    log(f"robot: {robot.steps} steps of {robot.period * 1e3:g} ms, {robot.fresh_steps} with a fresh command, "
        f"{robot.overruns} overruns")
    if plot:
        _plot(t, base - stance.q[:3], u, stand, plot, log)
    ok = (error[before].max() < 0.01 and tilt[before].max() < 1.0 and back < 2.0 and slip.max() < 0.01)
    log("summary: " + ("balanced and recovered" if ok else "NOT balanced within the bounds"))
    return 0 if ok else 1


def _plot(t, base, u, stand, path, log) -> list | None:
    """The base's displacement and the efforts against time, written to ``path``; the axes' labels."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot (pip install 'mechnode[plot]')")
        return None
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    for i, name in enumerate("xyz"):
        axes[0].plot(t, 1e3 * base[:, i], label=f"base {name}")
    axes[0].axvline(stand, color="k", ls=":", label="push")
    axes[0].set_ylabel("base displacement (mm)")
    axes[0].legend()
    axes[1].plot(t, u)
    axes[1].set_ylabel("joint efforts (N m)")
    axes[1].set_xlabel("t (s)")
    fig.suptitle("Solo12 balanced by mechnode in MuJoCo")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    log(f"plot written to {path}")
    return [ax.get_ylabel() for ax in axes]
