"""The ROS 2 package manifests (package.xml, format 3), checked with catkin_pkg as rosdep and
colcon read them: mechnode's (ament_python) names every ROS package the node imports, its version
is core.__version__, and what setup.py installs to share/ exists; the interface packages parse."""
import ast
import glob
import os
import re

import pytest
from catkin_pkg.package import parse_package  # a test dependency: missing is an error, not a skip

import core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: ROS packages (not Python ones) among the node's imports
ROS_PREFIXES = ("rclpy", "rcl_interfaces", "lifecycle_msgs", "builtin_interfaces", "mechnode_interfaces",
                "linear_feedback_controller_msgs")


def _ros_imports():
    found = set()
    for base, _, files in os.walk(os.path.join(ROOT, "mechnode")):
        if os.sep + "testing" in base or os.sep + "demo" in base:
            continue
        for f in files:
            if f.endswith(".py"):
                tree = ast.parse(open(os.path.join(base, f)).read())
                for n in ast.walk(tree):
                    names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                             else [n.module] if isinstance(n, ast.ImportFrom) and n.module and not n.level else [])
                    for name in names:
                        top = name.split(".")[0]
                        if top.endswith("_msgs") or top.startswith(ROS_PREFIXES):
                            found.add(top)
    return found


def test_mechnode_manifest_names_every_ros_dependency_and_the_version():
    pkg = parse_package(os.path.join(ROOT, "package.xml"))
    pkg.validate()
    assert pkg.name == "mechnode" and pkg.package_format == 3
    assert pkg.version == core.__version__
    assert pkg.get_build_type() == "ament_python"
    exec_deps = {d.name for d in pkg.exec_depends}
    imported = _ros_imports()
    assert {"rclpy", "std_msgs", "sensor_msgs", "mechnode_interfaces"} <= imported
    missing = imported - exec_deps
    assert not missing, f"imported by the node but not exec_depend in package.xml: {sorted(missing)}"
    # rclpy.lifecycle needs lifecycle_msgs
    assert "lifecycle_msgs" in exec_deps


def test_setup_py_installs_existing_files_to_share():
    text = open(os.path.join(ROOT, "setup.py")).read()
    assert "share/ament_index/resource_index/packages" in text
    assert os.path.isfile(os.path.join(ROOT, "resource", "mechnode"))
    for pattern in re.findall(r'glob\("([^"]+)"\)', text):
        assert glob.glob(os.path.join(ROOT, pattern)), pattern
    cfg = open(os.path.join(ROOT, "setup.cfg")).read()
    assert "install_scripts=$base/lib/mechnode" in cfg      # ros2 run finds lib/<package>/<executable>


@pytest.mark.parametrize("name", ["mechnode_interfaces", "linear_feedback_controller_msgs"])
def test_interface_manifests_parse(name):
    pkg = parse_package(os.path.join(ROOT, name, "package.xml"))
    pkg.validate()
    assert pkg.name == name and pkg.package_format == 3 and pkg.get_build_type() == "ament_cmake"
    assert "rosidl_interface_packages" in {g.name for g in pkg.member_of_groups}
