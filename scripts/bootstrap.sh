#!/usr/bin/env bash
# Creates .venv (once) and installs mechnode with its test and benchmark extras into it.
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
  "$venv/bin/python" -m pip install --quiet -e "$root[test,sympy,plot,bench]"
  touch "$stamp"
fi
