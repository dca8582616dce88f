"""The middleware's settings of the node's processes (ROS-free): the Fast DDS profile that the
``mechnode`` command and the command path's process use (see the profile file's comment)."""
from __future__ import annotations

import os
from importlib import resources

#: The Fast DDS profile of the node's processes, shipped in the package.
FASTDDS_PROFILE = "fastdds_profile.xml"


def middleware_environment(environ=os.environ) -> None:
    """Point Fast DDS at the node's profile (received buffers freed after use) unless the
    environment already names a profile file; before ``rclpy.init``."""
    if environ.get("FASTDDS_DEFAULT_PROFILES_FILE") or environ.get("FASTRTPS_DEFAULT_PROFILES_FILE"):
        return
    environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(resources.files("mechnode") / FASTDDS_PROFILE)
    environ["RMW_FASTRTPS_USE_QOS_FROM_XML"] = "1"
