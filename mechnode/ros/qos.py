"""QoS profiles of the node's topics (peers that talk to the node use the same ones).

* ``LATCHED``: references (``JointTrajectory``) and gain schedules (``GainSchedule``): reliable,
  transient local, depth 1 — a late joiner gets the last one.
* ``COMMAND_QOS``: commands (``Float64MultiArray``): reliable, volatile, depth 1.
* JointState in and the optional command echo out use rclpy's ``qos_profile_sensor_data``.
"""
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
COMMAND_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
