"""The ROS user's build: a plain ``colcon build`` (no --base-paths, no --paths) of a workspace
holding this repository in src/ (scripts/colcon_build.sh: Debian's colcon, setuptools 66.1.1, the
venv as the ROS underlay) finds and builds exactly mechnode_interfaces,
linear_feedback_controller_msgs and mechnode (ros/mechnode/); the node then runs
from the install space (``install/mechnode/lib/mechnode/mechnode`` with a parameter file of
``install/mechnode/share/mechnode/config``, after ``. install/setup.sh``), and answers over real
DDS on this run's domain. It is not configured: the kernels of the installed copy of core would
compile from a cold cache (minutes).
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from mechnode.testing.harness import LifecycleClient, Spinner, call, ros_environment, stop_process, wait_for

REPO = Path(__file__).resolve().parents[2]
#: what colcon finds in the workspace, as `colcon list` prints it: name, path, (type)
PACKAGES = {
    "linear_feedback_controller_msgs": ("src/mechnode/linear_feedback_controller_msgs", "(ros.ament_cmake)"),
    "mechnode": ("src/mechnode/ros/mechnode", "(ros.ament_python)"),
    "mechnode_interfaces": ("src/mechnode/mechnode_interfaces", "(ros.ament_cmake)"),
}
BUILD_TIMEOUT = 1200.0          # a fresh build of the two interface packages: ~1 min idle, more under load

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("colcon_ws")
    t0 = time.monotonic()
    p = subprocess.run(["bash", str(REPO / "scripts" / "colcon_build.sh"), str(ws)], capture_output=True,
                       text=True, timeout=BUILD_TIMEOUT)
    if p.returncode != 0:
        pytest.fail(f"scripts/colcon_build.sh failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}",
                    pytrace=False)
    print(f"colcon build: {time.monotonic() - t0:.1f} s\n{p.stdout}")
    return ws


def _installed_environment(ws: Path) -> dict:
    """This run's ROS environment with ``install/setup.sh`` sourced (and no PYTHONPATH of the
    checkout: the installed mechnode must be the one imported)."""
    env = ros_environment()
    env.pop("PYTHONPATH", None)
    out = subprocess.run(["bash", "-c", f". '{ws}/install/setup.sh' && env -0"], env=env, check=True,
                         capture_output=True).stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def test_plain_colcon_build_finds_and_builds_exactly_the_three_packages(workspace):
    """colcon's crawl of the workspace (the discovery of `colcon list` and of `colcon build`
    without --base-paths) finds the three packages and nothing else: the repository's root is no
    package (it would stop the crawl), and the build built the three."""
    listed = [line.split("\t") for line in (workspace / "colcon_list.txt").read_text().splitlines()]
    assert {name: (path, kind) for name, path, kind in listed} == PACKAGES and len(listed) == 3, listed
    log = (workspace / "colcon_build.log").read_text()
    started = set(re.findall(r"^Starting >>> (\S+)", log, re.M))
    finished = set(re.findall(r"^Finished <<< (\S+)", log, re.M))
    assert started == finished == set(PACKAGES), (started, finished)
    # colcon-ros sees mechnode install its package.xml and ament index marker itself (the
    # data_files of ros/mechnode/setup.py, not setup.cfg's, reach it)
    assert "doesn't explicitly install" not in log


def test_colcon_installs_the_three_packages_the_executable_and_the_config(workspace):
    install = workspace / "install"
    for pkg in ("mechnode", "mechnode_interfaces", "linear_feedback_controller_msgs"):
        assert (install / pkg / "share" / pkg / "package.xml").is_file(), pkg
        assert (install / "share" / pkg).exists() or (install / pkg / "share" / "ament_index" / "resource_index"
                                                      / "packages" / pkg).is_file(), pkg
    exe = install / "mechnode" / "lib" / "mechnode" / "mechnode"
    assert exe.is_file() and os.access(exe, os.X_OK)
    config = install / "mechnode" / "share" / "mechnode" / "config"
    assert sorted(p.name for p in config.glob("*.yaml")) == sorted(p.name for p in (REPO / "config").glob("*.yaml"))
    assert (install / "mechnode" / "share" / "mechnode" / "launch" / "mechnode.launch.py").is_file()
    # the sourced install space provides mechnode, core and the interfaces; mechnode.paths finds
    # the installed config
    env = _installed_environment(workspace)
    code = ("import core, mechnode, mechnode_interfaces.srv, linear_feedback_controller_msgs.msg\n"
            "from mechnode.paths import config_dir\n"
            "print(mechnode.__file__, core.__file__, mechnode_interfaces.__file__, "
            "linear_feedback_controller_msgs.__file__, config_dir(), sep='\\n')")
    out = subprocess.run([exe.read_text().splitlines()[0][2:].strip(), "-c", code], env=env, cwd=workspace,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert all(line.startswith(str(install)) for line in lines), lines
    assert Path(lines[-1]) == config


def test_the_installed_node_runs_with_an_installed_config_and_answers(workspace, rclpy_mod, ifaces):
    from mechnode_interfaces.srv import GetModel
    from rcl_interfaces.srv import GetParameters
    from rclpy.context import Context
    install = workspace / "install"
    ns = f"/test_colcon_{os.getpid()}"
    params = install / "mechnode" / "share" / "mechnode" / "config" / "cartpole_params.yaml"
    log_path = workspace / "mechnode.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(install / "mechnode" / "lib" / "mechnode" / "mechnode"), "--ros-args",
                                 "--params-file", str(params), "-r", f"__ns:={ns}"],
                                stdout=log, stderr=subprocess.STDOUT, env=_installed_environment(workspace),
                                cwd=workspace)
    ctx = Context()
    rclpy_mod.init(context=ctx, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
    client = rclpy_mod.create_node("test_colcon_client", namespace=ns, context=ctx)
    spinner = Spinner(ctx, client, threads=2)
    try:
        lifecycle = LifecycleClient(client, f"{ns}/mechnode")
        try:
            lifecycle.wait(60.0)
        except TimeoutError as exc:
            pytest.fail(f"{exc}; exit status {proc.poll()}; log:\n{log_path.read_text()[-3000:]}", pytrace=False)
        assert lifecycle.state() == "unconfigured"
        model = call(client.create_client(GetModel, f"{ns}/mechnode/get_model"), GetModel.Request(), 20.0)
        assert not model.success and model.message            # answered: unconfigured
        got = call(client.create_client(GetParameters, f"{ns}/mechnode/get_parameters"),
                   GetParameters.Request(names=["model", "Q", "state_timeout"]), 20.0).values
        assert got[0].string_value == "cartpole.yaml"           # from the installed parameter file
        assert list(got[1].double_array_value) == [10.0, 10.0, 1.0, 10.0] and got[2].double_value == 0.25
        assert lifecycle.change("shutdown", 20.0)
        wait_for(lambda: proc.poll() is not None, 20.0, "the node process to exit after shutdown")
        assert proc.returncode == 0, log_path.read_text()[-3000:]
        assert "Traceback" not in log_path.read_text()
    finally:
        spinner.stop()
        client.destroy_node()
        stop_process(proc)
        ctx.try_shutdown()
