#!/usr/bin/env bash
# colcon build of this repository's three ROS 2 packages (mechnode_interfaces,
# linear_feedback_controller_msgs, mechnode), as a ROS user builds a workspace: a plain
# `colcon build` in WORKSPACE (no --base-paths, no --paths), with the colcon and setuptools of
# Debian bookworm (colcon-core 0.12, colcon-ros 0.3, setuptools 66):
#
#   scripts/colcon_build.sh WORKSPACE [extra colcon build arguments]
#
# Then the node runs from the install space:
#   . WORKSPACE/install/setup.sh && WORKSPACE/install/mechnode/lib/mechnode/mechnode --ros-args \
#       --params-file WORKSPACE/install/mechnode/share/mechnode/config/cartpole_params.yaml
#
# 1. colcon  apt-get install the Debian colcon packages if they are missing (idempotent; needs
#            root or password-less sudo the first time).
# 2. src     WORKSPACE/src/mechnode: a symlink to this repository unless src/ has it already.
# 3. list    the packages colcon's crawl finds from WORKSPACE, as `colcon list` prints them
#            (colcon-package-information, which provides `colcon list`, is not installed here:
#            the same discovery through colcon-core's API), into WORKSPACE/colcon_list.txt; it
#            must be exactly the three. colcon stops crawling at a package, so the repository's
#            root is none (no package.xml, setup.py or CMakeLists.txt there): mechnode is
#            ros/mechnode/ (package.xml, setup.py, and links to the top-level core/, mechnode/,
#            config/, launch/, setup.cfg), the interface packages are top-level directories.
# 4. build   colcon build. The project venv (.venv, scripts/setup_ros.sh) is the ROS underlay,
#            standing in for /opt/ros/<distro>: AMENT_PREFIX_PATH / CMAKE_PREFIX_PATH name it and
#            cmake runs the rosidl generators with its python. colcon itself (Debian's code) runs
#            on the venv's interpreter, so that the installed console script starts that
#            interpreter (with rclpy, numba, ...), as on a ROS machine it starts the system
#            python3 that has ROS; setup.py runs with setuptools 66.1.1 (see below).
#
# Logs: WORKSPACE/colcon_build.log (colcon's output), WORKSPACE/log/ (colcon's own). Prints one
# line per stage; on failure the tail of the log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
py="$venv/bin/python"
if [ $# -lt 1 ]; then
  echo "usage: scripts/colcon_build.sh WORKSPACE [colcon build arguments]" >&2
  exit 2
fi
ws=$(mkdir -p "$1" && cd "$1" && pwd)
shift
dist=/usr/lib/python3/dist-packages
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
say() { echo "colcon_build: $*"; }

# --- 1. colcon (Debian packages) ---------------------------------------------------------------
t=$(now)
debs=(colcon python3-colcon-core python3-colcon-ros python3-colcon-cmake python3-colcon-python-setup-py
      python3-colcon-recursive-crawl python3-colcon-library-path python3-colcon-bash python3-setuptools)
have_colcon() {
  /usr/bin/python3 -c 'import colcon_core, colcon_ros, colcon_cmake, colcon_python_setup_py, colcon_bash, setuptools' \
    2>/dev/null
}
if have_colcon; then
  say "colcon $(/usr/bin/python3 -c 'import colcon_core; print(colcon_core.__version__)') present ($(since "$t"))"
else
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo=(sudo -n); else
      echo "colcon_build: colcon is missing; run as root: apt-get install -y ${debs[*]}" >&2
      exit 1
    fi
  fi
  log="$ws/apt-colcon.log"
  export DEBIAN_FRONTEND=noninteractive
  apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300)     # waits for another apt run
  if ! "${apt[@]}" install -y --no-install-recommends "${debs[@]}" >"$log" 2>&1; then
    "${apt[@]}" update >>"$log" 2>&1 || true
    "${apt[@]}" install -y --no-install-recommends "${debs[@]}" >>"$log" 2>&1 \
      || { echo "colcon_build: apt-get install of colcon FAILED; last lines of $log:" >&2; tail -n 20 "$log" >&2; exit 1; }
  fi
  have_colcon || { echo "colcon_build: colcon installed but not importable" >&2; exit 1; }
  say "colcon installed from Debian packages ($(since "$t"))"
fi
if [ ! -x "$py" ] || ! "$py" -c 'import rclpy, ament_package' 2>/dev/null; then
  echo "colcon_build: $py has no ROS 2 (run scripts/bootstrap.sh and scripts/setup_ros.sh first)" >&2
  exit 1
fi

# --- 2. the workspace's src/ -------------------------------------------------------------------
mkdir -p "$ws/src"
src="$ws/src/mechnode"
if [ ! -e "$src" ]; then
  ln -s "$root" "$src"
fi
[ -f "$src/ros/mechnode/package.xml" ] && [ -f "$src/mechnode_interfaces/package.xml" ] \
  || { echo "colcon_build: $src is not this repository" >&2; exit 1; }

# --- 3. the packages colcon finds --------------------------------------------------------------
t=$(now)
# setup.py (and colcon's dry run of it, also when it identifies mechnode) with setuptools
# $MECHNODE_COLCON_SETUPTOOLS (default 66.1.1, Debian bookworm's version and the oldest supported;
# "latest" for the newest), from PyPI into the workspace's build dir (a hidden directory: colcon's
# crawl skips it), alone on PYTHONPATH. (Debian's own python3-setuptools is patched for Debian's
# python and fails on another interpreter; all of dist-packages on PYTHONPATH would also shadow
# the venv's numpy, empy, ... in cmake's steps.)
st=${MECHNODE_COLCON_SETUPTOOLS:-66.1.1}
shim="$ws/build/.setuptools-$st"
if [ ! -f "$shim/.done" ]; then
  rm -rf "$shim"
  spec="setuptools==$st"
  [ "$st" = latest ] && spec=setuptools
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$shim" "$spec" \
    || { echo "colcon_build: pip install --target of $spec FAILED" >&2; exit 1; }
  touch "$shim/.done"
fi
st_version=$(PYTHONPATH="$shim" "$py" -c 'import setuptools; print(setuptools.__version__)')
say "setuptools $st_version for setup.py ($(since "$t"))"
t=$(now)
export AMENT_PREFIX_PATH="$venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
cd "$ws"
# colcon's code runs in the venv's interpreter with Debian's dist-packages first on sys.path (its
# colcon, empy 3, ...), in that process only: `colcon ARGS` and the discovery below
colcon() {
  "$py" -c '
import sys
sys.path.insert(0, "'"$dist"'")
from colcon_core.command import main
sys.argv[0] = "colcon"
sys.exit(main())' "$@"
}
# `colcon list`'s discovery with the defaults of `colcon build` (the recursive crawl of "."),
# printed as `colcon list` does: name, path, (type)
"$py" -c '
import argparse, os, sys
sys.path.insert(0, "'"$dist"'")
from colcon_core.package_discovery import add_package_discovery_arguments, discover_packages
from colcon_core.package_identification import get_package_identification_extensions
parser = argparse.ArgumentParser()
add_package_discovery_arguments(parser)
descs = discover_packages(parser.parse_args([]), get_package_identification_extensions())
for d in sorted(descs, key=lambda d: d.name):
    print(f"{d.name}\t{os.path.relpath(str(d.path))}\t({d.type})")' >"$ws/colcon_list.txt" 2>"$ws/colcon_list.log" \
  || { echo "colcon_build: colcon's package discovery FAILED:" >&2; cat "$ws/colcon_list.log" >&2; exit 1; }
found=$(cut -f1 "$ws/colcon_list.txt" | tr '\n' ' ')
say "colcon finds ${found% } ($(since "$t"))"
[ "${found% }" = "linear_feedback_controller_msgs mechnode mechnode_interfaces" ] \
  || { echo "colcon_build: colcon finds other packages than the three:" >&2; cat "$ws/colcon_list.txt" >&2; exit 1; }

# --- 4. build ----------------------------------------------------------------------------------
t=$(now)
colcon build --cmake-args -DPython3_EXECUTABLE="$py" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release \
  "$@" >"$ws/colcon_build.log" 2>&1 \
  || { echo "colcon_build: colcon build FAILED; last lines of $ws/colcon_build.log:" >&2
       tail -n 40 "$ws/colcon_build.log" >&2; exit 1; }
grep -E '^(Finished|Summary)' "$ws/colcon_build.log" | sed 's/^/colcon_build: /'
for pkg in mechnode mechnode_interfaces linear_feedback_controller_msgs; do
  [ -d "$ws/install/$pkg" ] || { echo "colcon_build: $pkg was not installed" >&2; exit 1; }
done
[ -x "$ws/install/mechnode/lib/mechnode/mechnode" ] || { echo "colcon_build: no lib/mechnode/mechnode" >&2; exit 1; }
say "built mechnode_interfaces, linear_feedback_controller_msgs, mechnode into $ws/install ($(since "$t"))"
