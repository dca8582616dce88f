"""mechnode.logic.wire: the counts of a serialized JointTrajectory, read without converting it, agree
with rclpy's own serialization for every alignment of the strings before them."""
from __future__ import annotations

import itertools

import pytest

from mechnode.errors import InputError


def _serialized(frame_id, names, points, full=False):
    from builtin_interfaces.msg import Duration
    from rclpy.serialization import serialize_message
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    n = len(names)
    msg = JointTrajectory(joint_names=list(names))
    msg.header.frame_id = frame_id
    arrays = dict(velocities=[0.5] * n, accelerations=[0.25] * n, effort=[2.0] * n) if full else {}
    msg.points = [JointTrajectoryPoint(positions=[float(k)] * n, time_from_start=Duration(sec=k), **arrays)
                  for k in range(points)]
    return serialize_message(msg)


@pytest.mark.parametrize("frame_len, name_len", list(itertools.product(range(0, 5), range(1, 6))))
def test_counts_agree_with_rclpy(ifaces, frame_len, name_len):
    from mechnode.logic import wire
    names = ["j" * name_len, "k" * (name_len + 1), "l"]
    for points, full in ((0, False), (1, False), (7, True)):
        raw = _serialized("f" * frame_len, names, points, full)
        got_names, got_points, most = wire.trajectory_counts(raw)
        assert (got_names, got_points) == (3, points)
        assert len(raw) <= most        # every array as long as the joint names: within the bound


def test_truncated_and_foreign_bytes_are_refused(ifaces):
    from mechnode.logic import wire
    raw = _serialized("frame", ["a", "b"], 3)
    with pytest.raises(InputError, match="ends early"):
        wire.trajectory_counts(raw[:20])
    with pytest.raises(InputError, match="not a CDR-serialized"):
        wire.trajectory_counts(b"\x07\x07" + raw[2:])
    with pytest.raises(InputError, match="names 2 joints; at most 1"):
        wire.trajectory_counts(raw, max_names=1)


def test_the_node_process_uses_its_fast_dds_profile_unless_one_is_named():
    import xml.etree.ElementTree as ET

    from mechnode.ros.middleware import middleware_environment
    env = {}
    middleware_environment(env)
    assert env["RMW_FASTRTPS_USE_QOS_FROM_XML"] == "1"
    root = ET.parse(env["FASTDDS_DEFAULT_PROFILES_FILE"]).getroot()
    policies = [e.text for e in root.iter("{http://www.eprosima.com}historyMemoryPolicy")]
    assert policies == ["DYNAMIC", "DYNAMIC"]
    mine = {"FASTDDS_DEFAULT_PROFILES_FILE": "/etc/my_profile.xml"}
    middleware_environment(mine)
    assert mine == {"FASTDDS_DEFAULT_PROFILES_FILE": "/etc/my_profile.xml"}
