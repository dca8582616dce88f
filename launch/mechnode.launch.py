"""Launch the mechnode node (for a full ROS 2 install with launch / launch_ros):

    ros2 launch launch/mechnode.launch.py [params_file:=config/cartpole_params.yaml]
        [namespace:=/robot] [autostart:=true] [log_level:=info]

Runs the ``mechnode`` console script (installed with this Python package; no ``package=`` is
given, so launch_ros looks the executable up on PATH) with the parameter file; with
``autostart`` the node configures and activates itself, otherwise a lifecycle manager drives
it. Without ``ros2 launch`` the same node starts with
``mechnode --ros-args --params-file config/mechnode.yaml``. The default parameter file is
found by :func:`mechnode.paths.config_file` (the checkout's ``config/``, or
``share/mechnode/config`` of a colcon or pip install).
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from mechnode.paths import config_file

#: The parameter file shipped with the mechnode package (config/, installed to share/mechnode/config).
DEFAULT_PARAMS = str(config_file("mechnode.yaml"))


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=DEFAULT_PARAMS,
                              description="ROS 2 parameter file of the node"),
        DeclareLaunchArgument("namespace", default_value="", description="node namespace"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="configure and activate at start-up"),
        DeclareLaunchArgument("log_level", default_value="info"),
        Node(
            executable="mechnode",
            name="mechnode",
            namespace=LaunchConfiguration("namespace"),
            output="screen",
            parameters=[LaunchConfiguration("params_file"),
                        {"autostart": ParameterValue(LaunchConfiguration("autostart"), value_type=bool)}],
            ros_arguments=["--log-level", LaunchConfiguration("log_level")],
        ),
    ])
