"""The ROS 2 package manifests (package.xml, format 3), checked with catkin_pkg as rosdep and
colcon read them: mechnode's (ament_python, in ros/mechnode/) names every ROS package the node
imports, its version is core.__version__, and what its setup.py installs to share/ exists; the
interface packages parse. The repository's root is no colcon package (a plain ``colcon build``
crawls past it to the three), and ros/mechnode/ reaches the top-level sources through links."""
import ast
import functools
import glob
import os
import re
import subprocess
import sys

import pytest
from catkin_pkg.package import parse_package  # a test dependency: missing is an error, not a skip

import core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: mechnode's ament_python package directory (package.xml, setup.py, resource/, links)
ROS_PKG = os.path.join(ROOT, "ros", "mechnode")
#: what ros/mechnode/ links to: the top-level directories and files of the same name
LINKS = ("core", "mechnode", "config", "launch", "setup.cfg", "LICENSE", "README.md")
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
    pkg = parse_package(os.path.join(ROS_PKG, "package.xml"))
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
    text = open(os.path.join(ROS_PKG, "setup.py")).read()
    assert "share/ament_index/resource_index/packages" in text
    assert os.path.isfile(os.path.join(ROS_PKG, "resource", "mechnode"))
    for pattern in re.findall(r'glob\("([^"]+)"\)', text):
        assert glob.glob(os.path.join(ROS_PKG, pattern)), pattern
    cfg = open(os.path.join(ROOT, "setup.cfg")).read()
    assert "install_scripts=$base/lib/mechnode" in cfg      # ros2 run finds lib/<package>/<executable>
    # colcon-core and colcon-ros read setup.cfg alone (ignoring setup.py's data_files) when
    # setup.py's text holds a setup call without arguments
    assert "setup()" not in text and "setup(cmdclass=cmdclass)" not in text


def test_the_repository_root_is_no_colcon_package():
    """colcon stops crawling at a package: the root must not be one for any identification
    extension (colcon-ros: package.xml; colcon-core, colcon-python-setup-py: setup.py;
    colcon-cmake: CMakeLists.txt), so that a plain ``colcon build`` finds the three packages
    below it; nor may it carry an ignore marker (that would hide all three)."""
    for name in ("package.xml", "setup.py", "CMakeLists.txt", "COLCON_IGNORE", "AMENT_IGNORE", "CATKIN_IGNORE"):
        assert not os.path.lexists(os.path.join(ROOT, name)), name
    for pkg in ("ros/mechnode", "mechnode_interfaces", "linear_feedback_controller_msgs"):
        assert os.path.isfile(os.path.join(ROOT, pkg, "package.xml")), pkg


@pytest.mark.parametrize("name", LINKS)
def test_ros_package_links_to_the_top_level_sources(name):
    """core/ and mechnode/ stay at the top level (and config/, launch/, setup.cfg are the
    wheel's too): ros/mechnode/ has relative symbolic links to them, which setuptools follows."""
    link = os.path.join(ROS_PKG, name)
    assert os.path.islink(link), f"ros/mechnode/{name} is not a symbolic link"
    assert os.readlink(link) == os.path.join("..", "..", name)
    assert os.path.samefile(link, os.path.join(ROOT, name))


def test_wheel_and_colcon_install_the_same_data_files():
    """setup.cfg's [options.data_files] (the wheel, paths from the root) and ros/mechnode/
    setup.py's data_files (colcon, which overrides them there) install the same files to the
    same places; python_requires is the same string in both."""
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    wheel = {}
    for dest, value in cfg["options.data_files"].items():
        for pattern in value.split():
            matches = glob.glob(os.path.join(ROOT, pattern))
            assert matches, pattern
            wheel.update({os.path.join(dest, os.path.basename(m)): os.path.realpath(m) for m in matches})
    colcon = {}
    for dest, sources in _colcon_dry_run()["data_files"]:
        colcon.update({os.path.join(dest, os.path.basename(src)): os.path.realpath(os.path.join(ROS_PKG, src))
                       for src in sources})
    assert wheel == colcon
    assert cfg["options"]["python_requires"] == _colcon_dry_run()["python_requires"]


@pytest.mark.parametrize("name", ["mechnode_interfaces", "linear_feedback_controller_msgs"])
def test_interface_manifests_parse(name):
    pkg = parse_package(os.path.join(ROOT, name, "package.xml"))
    pkg.validate()
    assert pkg.name == name and pkg.package_format == 3 and pkg.get_build_type() == "ament_cmake"
    assert "rosidl_interface_packages" in {g.name for g in pkg.member_of_groups}


#: What colcon-python-setup-py (0.2.8, Debian bookworm's; colcon-ros identifies an ament_python
#: package with it) runs to read a setup.py: a dry run stopped after the configuration, whose
#: repr must parse back with ast.literal_eval (a SpecifierSet, as setuptools makes of a
#: python_requires from setup.cfg or a [project] table, does not: SyntaxError).
COLCON_DRY_RUN = """
import sys
from distutils.core import run_setup
dist = run_setup('setup.py', script_args=('--dry-run',), stop_after='config')
skip_keys = ('cmdclass', 'distclass', 'ext_modules', 'metadata')
data = {key: value for key, value in dist.__dict__.items()
        if not key.startswith('_') and not callable(value) and key not in skip_keys
        and key not in dist.display_option_names}
data['metadata'] = {k: v for k, v in dist.metadata.__dict__.items() if k not in ('license_files', 'provides_extras')}
sys.stdout.buffer.write(repr(data).encode('utf-8'))
"""


@functools.cache
def _colcon_dry_run() -> dict:
    """What colcon-python-setup-py parses from its dry run of ros/mechnode/setup.py."""
    out = subprocess.run([sys.executable, "-c", COLCON_DRY_RUN], cwd=ROS_PKG, capture_output=True, check=True).stdout
    return ast.literal_eval(out.decode())


def test_colcon_reads_setup_py_metadata_and_version_is_core_version():
    data = _colcon_dry_run()
    assert data["metadata"]["name"] == "mechnode"
    assert data["metadata"]["version"] == core.__version__
    assert data["python_requires"] == ">=3.11,<3.12"
    assert {"numpy>=1.24", "numba>=0.59"} <= set(data["install_requires"])
    assert "mechnode = mechnode.cli:main" in data["entry_points"]["console_scripts"]
    shared = dict(data["data_files"])
    assert shared["share/mechnode/config"] == sorted(f"config/{f}" for f in os.listdir(os.path.join(ROOT, "config"))
                                                     if f.endswith(".yaml"))
    # one place for the metadata: setup.cfg (read by colcon through ros/mechnode/setup.cfg, a link;
    # ros/mechnode/setup.py repeats python_requires and gives the data_files), none in pyproject.toml
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        pyproject = tomllib.load(fh)
    assert "project" not in pyproject and "setuptools" not in pyproject.get("tool", {})
