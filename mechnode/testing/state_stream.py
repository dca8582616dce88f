"""A JointState stream and a command recorder in a process of its own, for measuring the node's
command path while another process loads it (so that the loading process's interpreter lock
and DDS work do not disturb the measurement).

    python -m mechnode.testing.state_stream --ns /robot --joints cart_joint,pole_joint \\
        --positions 0.01,0.02 --rate 100 --seconds 10

Publishes JointState (sensor-data QoS, stamped with the ROS clock) on ``<ns>/joint_states`` at
``--rate`` Hz against absolute deadlines and records when commands arrive on
``<ns>/effort_controller/commands``. Prints ``ready`` once the first command arrived, then,
after ``--seconds`` more, one JSON line: states sent, the largest gap between states sent,
commands received and the largest and 99th-percentile gap between commands (seconds, from the
first command to the end). With ``--until-stop`` the stream ends earlier when a line arrives on
its standard input (or it closes): the measurement then covers what the caller did meanwhile.
Exits 1 if no command came within ``--timeout`` seconds.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import cast


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", required=True)
    ap.add_argument("--joints", required=True, help="comma-separated joint names")
    ap.add_argument("--positions", required=True, help="comma-separated positions (velocities 0)")
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--until-stop", action="store_true",
                    help="end when a line (or end of file) arrives on stdin, at most --seconds")
    args = ap.parse_args(argv)
    import numpy as np
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from mechnode.ros.conversions import joint_state
    from mechnode.ros.qos import COMMAND_QOS

    joints = args.joints.split(",")
    q = [float(v) for v in args.positions.split(",")]
    rclpy.init(args=[])
    node = rclpy.create_node("state_stream", namespace=args.ns)
    received = []
    node.create_subscription(Float64MultiArray, f"{args.ns}/effort_controller/commands",
                             lambda m: received.append(time.monotonic()), COMMAND_QOS)
    pub = node.create_publisher(JointState, f"{args.ns}/joint_states", qos_profile_sensor_data)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    clock, period = node.get_clock(), 1.0 / args.rate
    sent, t_first, t_end = [], None, None
    deadline = time.monotonic()
    give_up = deadline + args.timeout
    stop = threading.Event()
    if args.until_stop:
        def stop_on_line() -> None:     # a line (or end of file) on stdin
            sys.stdin.readline()
            stop.set()

        threading.Thread(target=stop_on_line, daemon=True).start()
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                pub.publish(joint_state(joints, q, [0.0] * len(q), clock.now().nanoseconds))
                sent.append(now)
                deadline += period
            if t_first is None and received:
                t_first = received[0]
                t_end = t_first + args.seconds
                print("ready", flush=True)
            if t_first is None and now > give_up:
                print(json.dumps({"error": f"no command within {args.timeout} s"}), flush=True)
                return 1
            if t_end is not None and (now >= t_end or stop.is_set()):
                t_end = min(now, t_end)
                break
            executor.spin_once(timeout_sec=max(0.0, min(deadline - time.monotonic(), 0.005)))
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    # the loop ends (break) only once the first command came: both are set
    t_first, t_end = cast(float, t_first), cast(float, t_end)
    cmds = np.array([t for t in received if t_first <= t <= t_end])
    gaps = np.diff(np.concatenate([cmds, [t_end]]))
    sent_in = np.array([t for t in sent if t_first <= t <= t_end])
    print(json.dumps({"states_sent": int(sent_in.size),
                      "largest_state_gap": float(np.diff(sent_in).max()) if sent_in.size > 1 else None,
                      "commands": int(cmds.size), "largest_gap": float(gaps.max()),
                      "p99_gap": float(np.percentile(gaps, 99))}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
