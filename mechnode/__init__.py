"""mechnode ROS 2 node."""
