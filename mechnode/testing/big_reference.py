"""A huge ``JointTrajectory`` for testing the node's limits, published from a process of its own
(so that the publishing process's GIL and DDS work do not disturb the measuring one).

    python -m mechnode.testing.big_reference --topic /ns/mechnode/reference --points 1000000 \\
        --joints cart_joint,pole_joint

Publishes once with the reference QoS (reliable, transient local), waits until every matched
subscriber acknowledged it, and exits 0 (1 if no subscriber matched or acknowledged in time).
"""
from __future__ import annotations

import argparse
import struct
import sys
import time


def reference_bytes(joint_names, points: int) -> bytes:
    """A serialized ``JointTrajectory`` of ``points`` points (one position per joint, all the
    same), built from the bytes of a one-point message: megabytes in milliseconds."""
    from builtin_interfaces.msg import Duration
    from rclpy.serialization import serialize_message
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    def serialized(k):
        msg = JointTrajectory(joint_names=list(joint_names))
        msg.points = [JointTrajectoryPoint(positions=[0.0] * len(joint_names),
                                           time_from_start=Duration(sec=1))] * k
        return serialize_message(msg)
    empty, one = serialized(0), serialized(1)
    point = one[len(empty):]
    # the points count is the last field of the empty message, and a point keeps 8-byte alignment
    if len(point) % 8 or struct.unpack_from("<I", empty, len(empty) - 4)[0] != 0:
        raise RuntimeError("unexpected serialized layout of JointTrajectory")
    return empty[:-4] + struct.pack("<I", points) + point * points


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--points", type=int, required=True)
    ap.add_argument("--joints", required=True, help="comma-separated joint names")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    import rclpy
    from rclpy.duration import Duration
    from trajectory_msgs.msg import JointTrajectory

    from mechnode.ros.qos import LATCHED
    raw = reference_bytes(args.joints.split(","), args.points)
    rclpy.init()
    node = rclpy.create_node("big_reference")
    pub = node.create_publisher(JointTrajectory, args.topic, LATCHED)
    deadline = time.monotonic() + args.timeout
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if pub.get_subscription_count() == 0:
        print(f"big_reference: no subscriber on {args.topic}", file=sys.stderr)
        return 1
    pub.publish(raw)
    acked = pub.wait_for_all_acked(Duration(seconds=max(0.0, deadline - time.monotonic())))
    print(f"big_reference: {args.points} points, {len(raw)} bytes published on {args.topic}; "
          f"acknowledged: {acked}")
    node.destroy_node()
    rclpy.try_shutdown()
    return 0 if acked else 1


if __name__ == "__main__":
    raise SystemExit(main())
