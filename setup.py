"""The ament_python side of the package: what colcon installs to share/ besides the Python code
(the metadata, dependencies and console scripts are in setup.cfg; a pip install of the wheel
puts these files under <venv>/share/mechnode as well, where mechnode.paths finds the parameter
files)."""
from glob import glob

from setuptools import setup

setup(
    # What CI tests (Python 3.11, as the ROS 2 Kilted wheels used here are built for). Given here
    # as a string, not in setup.cfg: from setup.cfg (or pyproject.toml) newer setuptools keep a
    # SpecifierSet, which colcon-python-setup-py (<= 0.2.8, Debian bookworm) cannot parse back
    # from its dry run of this file (SyntaxError).
    python_requires=">=3.11,<3.12",
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/mechnode"]),
        ("share/mechnode", ["package.xml"]),
        ("share/mechnode/launch", glob("launch/*.launch.py")),
        ("share/mechnode/config", sorted(glob("config/*.yaml"))),
    ],
)
