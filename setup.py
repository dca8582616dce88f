"""The ament_python side of the package: what colcon installs to share/ besides the Python code
(the metadata, dependencies and console scripts are in pyproject.toml; a pip install of the
wheel puts these files under <venv>/share/mechnode as well, harmlessly)."""
from glob import glob

from setuptools import setup

setup(data_files=[
    ("share/ament_index/resource_index/packages", ["resource/mechnode"]),
    ("share/mechnode", ["package.xml"]),
    ("share/mechnode/launch", glob("launch/*.launch.py")),
    ("share/mechnode/config", sorted(glob("config/*.yaml"))),
])
