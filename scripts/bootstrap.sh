#!/usr/bin/env bash
# Creates .venv (once) and installs mechnode with its test extras into it (and Crocoddyl, for a
# benchmark).
# Idempotent and quiet on a second run: it reinstalls only when the package's metadata
# (pyproject.toml, setup.cfg) changed since the last install.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
stamp="$venv/.mechnode-installed"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/setup.cfg" -nt "$stamp" ] \
   || [ "$root/scripts/bootstrap.sh" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -e "$root[test,sympy,plot,distributed]"
  # Crocoddyl for bench/bench_trajectory.py only, without its dependencies: through
  # example-robot-data-loaders they would move example-robot-data back to 5.0.0, and the tests
  # run on the robot files the test extra installs. Benchmark-only: a failure here is not fatal.
  "$venv/bin/python" -m pip install --quiet --no-deps "crocoddyl==3.2.1" "libcrocoddyl==3.2.1" \
    || echo "bootstrap: Crocoddyl not installed (only bench/bench_trajectory.py needs it)"
  touch "$stamp"
fi
