#!/usr/bin/env bash
# The test command of README.md: set up .venv and ROS 2 (both idempotent), lint with ruff and
# type-check with mypy (configurations in pyproject.toml), run every test, build the API reference (pdoc, warnings as
# errors: scripts/build_api_docs.py), then check the wheel outside the repository
# (scripts/check_wheel.sh).
# ROS tests are required here (MECHNODE_REQUIRE_ROS=1: a missing rclpy fails instead of skipping)
# and DDS discovery is kept on this host. The tests include the colcon build of the three ROS
# packages (tests/ros/test_colcon_build.py runs scripts/colcon_build.sh: it apt-installs Debian's
# colcon once) and the installed node's start from the install space.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
bash "$root/scripts/setup_ros.sh"
cd "$root"
export MECHNODE_REQUIRE_ROS=1 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
.venv/bin/ruff check .
# the type checker on the Python layers (configuration in pyproject.toml; the @njit kernels carry no
# annotations and are typed by numba)
.venv/bin/python -m mypy
.venv/bin/python -m pytest -q "$@"
# the API reference from the docstrings (pdoc), warnings as errors: build/api/index.html
.venv/bin/python scripts/build_api_docs.py build/api
# the package installed from its wheel into a fresh venv, used from outside the repository
bash scripts/check_wheel.sh
# speed figures against Pinocchio on every example-robot-data robot (printed, never asserted:
# a regression shows here); ../shared/bench/robots.py when the shared benchmarks are beside us
if [ -f ../shared/bench/robots.py ]; then
  echo "speed (mechnode / Pinocchio, one run, --quick):"
  OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python ../shared/bench/robots.py --quick 2>/dev/null \
    | tail -n 3 || echo "speed figures: the benchmark failed (not a test)"
fi
# whole trajectories against Crocoddyl (printed, never asserted)
echo "whole trajectories (mechnode / Crocoddyl, one run):"
OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_trajectory.py --rounds 3 2>/dev/null \
  || echo "trajectory figures: the benchmark failed (not a test)"
