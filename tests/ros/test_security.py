"""The node under a security enclave (docs/security.md): started with ``--ros-args --enclave``
and with ``ROS_SECURITY_ENCLAVE_OVERRIDE`` (which its command process inherits), it runs
unchanged: no code path depends on security being off. DDS-Security itself cannot run here
(the Fast DDS of the PyPI wheels has no security plugins; docs/security.md)."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from nodeproc import TIMEOUT, NodeProcess, write_params

pytestmark = pytest.mark.slow


def test_the_node_runs_unchanged_in_an_enclave(rclpy_mod, ifaces, tmp_path):
    from mechnode.ros.conversions import joint_state
    params = write_params(tmp_path / "params.yaml", {"dt": 0.01, "diagnostics_period": 0.2})
    h = NodeProcess(rclpy_mod, params, f"/test_enclave_{os.getpid()}", tmp_path / "mechnode.log",
                    ros_args=["--enclave", "/mechnode"], env={"ROS_SECURITY_ENCLAVE_OVERRIDE": "/mechnode"})
    try:
        assert h.bring_up()[-1] == "active"
        commands = []
        h.connect_io(lambda m: commands.append(np.asarray(m.data)))
        deadline = time.monotonic() + TIMEOUT
        while not commands and time.monotonic() < deadline:     # (sensor-data QoS: resend)
            h.state_pub.publish(joint_state(["x", "theta"], [0.0, 0.0], [0.0, 0.0],
                                            h.client.get_clock().now().nanoseconds))
            time.sleep(0.03)
        assert commands and commands[-1].shape == (1,) and np.isfinite(commands[-1]).all(), h.log()[-3000:]
    finally:
        code = h.close()
    assert code == 0, h.log()[-3000:]
