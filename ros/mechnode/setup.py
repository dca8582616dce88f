"""colcon's setup.py of the ament_python package mechnode (ros/mechnode/ is the package colcon
finds; the repository's root holds no package.xml, setup.py or CMakeLists.txt, so that colcon's
crawl goes on below it to the interface packages and here).

Everything else is the repository's: core, mechnode, config, launch, setup.cfg, LICENSE and
README.md in this directory are symbolic links to the top-level ones, so the metadata,
dependencies and console scripts are the top-level setup.cfg's (the wheel's), read through the
link. Given here, as arguments of the setup call below (which take precedence over setup.cfg):

* data_files: the ament index marker and package.xml of this directory (colcon-ros checks that
  'package.xml' is installed to share/mechnode), launch/ and config/ (through the links);
* python_requires, as a string: from setup.cfg newer setuptools keep a SpecifierSet, which
  colcon-python-setup-py (<= 0.2.8, Debian bookworm) cannot parse back from its dry run of this
  file (SyntaxError). The same value as setup.cfg's (tests/test_package.py checks it).

This file must not contain the text of a setup call without arguments (an opening and a closing
parenthesis right after the name): colcon (colcon-core's and colcon-ros's augmentation) then
takes setup.cfg alone for the package's options and ignores these data_files.
"""
from glob import glob

from setuptools import setup

setup(
    python_requires=">=3.11,<3.12",
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/mechnode"]),
        ("share/mechnode", ["package.xml"]),
        ("share/mechnode/launch", sorted(glob("launch/*.launch.py"))),
        ("share/mechnode/config", sorted(glob("config/*.yaml"))),
    ],
)
