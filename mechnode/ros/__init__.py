"""The node's ROS-facing side: parameters, messages, QoS, the lifecycle node and its services, the
command path's process, diagnostics. Built on :mod:`mechnode.logic`."""
