"""Parameters as users write them, over real rclpy + Fast DDS (a node process on this run's
domain): integers where doubles are meant (``Q: [10000, 1, 1, 1]``, ``state_timeout: 1``) are
taken, from the parameter file and at run time, and stored as doubles; a parameter file value
that is refused leaves the node up and unconfigured with one log line naming the parameter and
the value, configure fails with one line, and once the parameter is set the node configures.
"""
from __future__ import annotations

import os

import pytest
import yaml

from mechnode.paths import config_file

from nodeproc import STARTUP, NodeProcess, write_params

# slow: starts node processes (they load the numba kernels)
pytestmark = pytest.mark.slow


def _cartpole_params(**changes) -> dict:
    doc = yaml.safe_load(config_file("cartpole_params.yaml").read_text())
    params = doc["/**/mechnode"]["ros__parameters"]
    params.update(changes)
    return params


def _get(h, *names):
    from rcl_interfaces.srv import GetParameters
    values = h.call(GetParameters, "get_parameters", GetParameters.Request(names=list(names))).values
    return dict(zip(names, values, strict=True))


def _set(h, *params):
    from rcl_interfaces.srv import SetParameters
    req = SetParameters.Request(parameters=[p.to_parameter_msg() for p in params])
    return h.call(SetParameters, "set_parameters", req).results


def _lines(h, text):
    return [line for line in h.log().splitlines() if text in line]


def test_integers_where_doubles_are_meant_configure_and_can_be_set(rclpy_mod, ifaces, tmp_path):
    from rcl_interfaces.msg import ParameterType
    from rclpy.parameter import Parameter
    params = _cartpole_params(Q=[10000, 1, 1, 1], R=[1], state_timeout=1, stamp_tolerance=0,
                              command_limit=1000, state_position_limit=[5, 100], optimizer_time_limit=5)
    path = write_params(tmp_path / "int_params.yaml", params)
    assert "- 10000\n" in open(path).read()              # really integers in the file
    h = NodeProcess(rclpy_mod, path, f"/test_ints_{os.getpid()}", tmp_path / "mechnode.log")
    try:
        h.lifecycle.wait(60.0)
        assert h.transition("configure", STARTUP), "configure failed:\n" + h.log()[-3000:]
        got = _get(h, "Q", "R", "state_timeout", "stamp_tolerance", "command_limit", "state_position_limit")
        assert got["Q"].type == ParameterType.PARAMETER_DOUBLE_ARRAY
        assert list(got["Q"].double_array_value) == [10000.0, 1.0, 1.0, 1.0]
        assert got["state_timeout"].type == ParameterType.PARAMETER_DOUBLE and got["state_timeout"].double_value == 1.0
        assert got["stamp_tolerance"].double_value == 0.0 and got["command_limit"].double_value == 1000.0
        assert list(got["state_position_limit"].double_array_value) == [5.0, 100.0]
        # at run time too: integers (and integer arrays) set on doubles are taken as doubles
        results = _set(h, Parameter("R", value=[2]), Parameter("optimizer_tolerance", value=1),
                       Parameter("command_limit", value=500))
        assert all(r.successful for r in results), [r.reason for r in results]
        got = _get(h, "R", "optimizer_tolerance", "command_limit")
        assert got["R"].type == ParameterType.PARAMETER_DOUBLE_ARRAY and list(got["R"].double_array_value) == [2.0]
        assert got["optimizer_tolerance"].type == ParameterType.PARAMETER_DOUBLE
        assert got["command_limit"].double_value == 500.0
        # other kinds are still refused, naming the parameter and the value
        (res,) = _set(h, Parameter("state_timeout", value="soon"))
        assert not res.successful and "state_timeout" in res.reason and "'soon'" in res.reason, res.reason
        assert h.transition("activate"), "activate failed:\n" + h.log()[-3000:]
        assert not _lines(h, "Traceback") and not _lines(h, "[ERROR]"), h.log()[-3000:]
    finally:
        h.close()


def test_a_refused_parameter_file_value_is_one_line_and_the_node_stays_up(rclpy_mod, ifaces, tmp_path):
    from mechnode_interfaces.srv import GetModel
    from rclpy.parameter import Parameter
    path = write_params(tmp_path / "bad_params.yaml", _cartpole_params(dt="fast", max_knots=2.5))
    h = NodeProcess(rclpy_mod, path, f"/test_refused_{os.getpid()}", tmp_path / "mechnode.log")
    try:
        h.lifecycle.wait(60.0)
        assert h.state() == "unconfigured"
        h.wait_log(r"mechnode started")
        dt_lines, knots_lines = _lines(h, "dt = 'fast'"), _lines(h, "'max_knots' to '2.5'")
        assert len(dt_lines) == 1 and "[ERROR]" in dt_lines[0], h.log()
        assert len(knots_lines) == 1, h.log()
        # the services answer (success: false while unconfigured)
        assert not h.call(GetModel, "get_model", GetModel.Request()).success
        before = len(h.log())
        assert not h.transition("configure", STARTUP), "configure succeeded with refused parameters"
        h.wait_log(r"configure failed", after=before)
        failed = _lines(h, "configure failed")
        assert len(failed) == 1 and "dt = 'fast'" in failed[0] and "max_knots" in failed[0], failed
        assert h.state() == "unconfigured"
        h.check_alive()
        # fixed at run time: the node configures
        results = _set(h, Parameter("dt", value=0.01), Parameter("max_knots", value=20000))
        assert all(r.successful for r in results), [r.reason for r in results]
        assert h.transition("configure", STARTUP), "configure failed:\n" + h.log()[-3000:]
        assert h.call(GetModel, "get_model", GetModel.Request()).success
        assert not _lines(h, "Traceback"), h.log()
    finally:
        h.close()


def test_a_node_whose_construction_fails_shuts_down_without_a_second_error(rclpy_mod, ros_context, monkeypatch):
    """rclpy destroys the nodes of a context at shutdown, also one whose __init__ raised:
    its teardown must not fail on the parts that were never made (and its command process
    ends)."""
    import mechnode.ros.node as node_module

    class Broken(RuntimeError):
        pass

    def broken(*args, **kwargs):
        raise Broken("parameters could not be declared")

    monkeypatch.setattr(node_module, "NodeParameters", broken)
    made = []
    original = node_module.CommandProcess

    def command_process(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(node_module, "CommandProcess", command_process)
    with pytest.raises(Broken):
        node_module.MechNode(context=ros_context)
    rclpy_mod.try_shutdown(context=ros_context)      # destroys the half-made node: no exception
    assert made and not made[0].alive


def test_the_command_help_names_the_shipped_parameter_files(rclpy_mod, capsys):
    from mechnode.cli import main
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert f"parameter files shipped with mechnode: {config_file('mechnode.yaml').parent}" in capsys.readouterr().out
