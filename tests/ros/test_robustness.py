"""Nothing a peer sends can kill the node or exhaust the host (issue 32), over real rclpy + DDS.

One node process, unconfigured, is sent: a 10 KB model nested 5,000 levels deep (PyYAML would
exhaust the stack, and the exception used to end rclpy's executor: the node stopped answering and
exited); a model whose mass matrix is singular everywhere (configure refuses it with core's
message and the node stays up); a 260-joint URDF (refused by ``max_model_variables``; allowed, its
configure stays within a bounded memory: the warm-up no longer runs the integrator's second order
on the model); ``use_sim_time`` changes (refused while configured; the command process always
runs on the node's clock).
"""
from __future__ import annotations

import os
import time

import pytest

from mechnode.testing.harness import wait_for

from nodeproc import NodeProcess, write_params

pytestmark = pytest.mark.slow

DEEP = "{frames: [{name: a, tx: x, mass: 1, children: " + "[" * 5000 + "]" * 5000 + "}]}"
MASSLESS = """\
frames:
  - {name: arm, rz: shoulder, mass: 1.0, com: [0.5, 0, 0]}
  - {name: finger, parent: arm, offset: {translation: [1, 0, 0]}, rx: finger}
inputs:
  - {type: torque, config: shoulder}
  - {type: torque, config: finger}
"""


def chain_urdf(n: int) -> str:
    links = "".join(f'<link name="l{i}"><inertial><origin xyz="0 0 0.1"/><mass value="1"/>'
                    f'<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>'
                    for i in range(n + 1))
    joints = "".join(f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
                     f'<origin xyz="0 0 0.2"/><axis xyz="0 1 0"/></joint>' for i in range(n))
    return f'<robot name="chain{n}">{links}{joints}</robot>'


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("robust")
    params = write_params(d / "params.yaml", {"dt": 0.01, "diagnostics_period": 0.2})
    h = NodeProcess(rclpy_mod, params, f"/test_robust_{os.getpid()}", d / "mechnode.log")
    try:
        h.lifecycle.wait(60.0)
        yield h
    finally:
        h.close()


def _set(h, **values):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
    return h.call(SetParameters, "set_parameters", req).results


def _get(h, name):
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python
    r = h.call(GetParameters, "get_parameters", GetParameters.Request(names=[name]))
    return parameter_value_to_python(r.values[0])


def command_cmdline(h) -> list:
    children = []
    for task in os.listdir(f"/proc/{h.proc.pid}/task"):
        with open(f"/proc/{h.proc.pid}/task/{task}/children") as fh:
            children += [int(c) for c in fh.read().split()]
    assert len(children) == 1, children
    with open(f"/proc/{children[0]}/cmdline") as fh:
        return fh.read().split("\0")


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024


def test_a_deeply_nested_model_is_refused_and_the_node_keeps_serving(node):
    h = node
    (res,) = _set(h, model=DEEP)
    assert not res.successful and "nested more than 32 levels deep" in res.reason, res.reason
    for _ in range(3):                      # the executor lives: every request is answered
        time.sleep(1.0)
        assert _get(h, "model") == "cartpole.yaml"
        assert h.state() == "unconfigured"
    assert h.proc.poll() is None
    for bad in ("a: &x [1]\nb: *x\n", "frames: [1, 2\n", "{" * 100 + "}" * 100):
        (res,) = _set(h, model=bad)
        assert not res.successful and res.reason, bad
    assert _get(h, "model") == "cartpole.yaml"


def test_a_model_that_can_never_be_linearized_is_refused_at_configure(node):
    h = node
    (res,) = _set(h, model=MASSLESS)
    assert res.successful, res.reason
    mark = len(h.log())
    assert not h.transition("configure", 900)
    h.wait_log(r"configure failed: .*mass matrix is singular at variable 1 \('finger'\).*armature.*lock",
               after=mark)
    assert h.state() == "unconfigured" and h.proc.poll() is None


def test_a_huge_urdf_is_refused_and_a_large_one_configures_in_bounded_memory(node):
    h = node
    (res,) = _set(h, model=chain_urdf(260))
    assert res.successful, res.reason
    mark = len(h.log())
    t0 = time.monotonic()
    assert not h.transition("configure", 120)
    h.wait_log(r"configure failed: .*260 configuration variables, more than max_model_variables = 200", after=mark)
    assert time.monotonic() - t0 < 30.0
    (res,) = _set(h, max_model_variables=300)
    assert res.successful, res.reason
    assert h.transition("configure", 900), h.log()[-3000:]
    peak = peak_rss_mb(h.proc.pid)
    print(f"peak RSS of the node process after configuring a 260-joint chain: {peak:.0f} MB")
    assert peak < 1500, peak            # (the integrator's second order on it would take ~4 GB)
    assert h.transition("cleanup")
    for res in _set(h, model="cartpole.yaml", max_model_variables=200):
        assert res.successful, res.reason


def test_use_sim_time_cannot_change_while_configured_and_both_processes_share_the_clock(node):
    h = node
    assert "--use-sim-time" not in command_cmdline(h)
    (res,) = _set(h, use_sim_time=True)
    assert res.successful, res.reason
    assert h.transition("configure", 900), h.log()[-3000:]
    assert "--use-sim-time" in command_cmdline(h)           # started anew on the node's clock
    (res,) = _set(h, use_sim_time=False)
    assert not res.successful and "use_sim_time can only change while unconfigured" in res.reason, res.reason
    assert _get(h, "use_sim_time") is True
    assert h.transition("cleanup")
    (res,) = _set(h, use_sim_time=False)
    assert res.successful, res.reason
    assert h.transition("configure", 900), h.log()[-3000:]
    wait_for(lambda: "--use-sim-time" not in command_cmdline(h), 10.0, "the command process on wall time")
    assert h.transition("cleanup")
