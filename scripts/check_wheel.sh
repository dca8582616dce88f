#!/usr/bin/env bash
# The package outside the repository: builds the wheel from pyproject.toml, installs it into a
# fresh venv (its dependencies from the package registry) and, from a directory outside the
# repository, loads every packaged model by name, finds the node's parameter files
# (share/mechnode/config, through mechnode.paths), and runs the
# library demo on the default model and on the URDF arm, and the command line on the arm.
# Called by scripts/test.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
"$root/.venv/bin/python" -m pip wheel --quiet --no-deps -w "$work/dist" "$root"
wheel=$(ls "$work"/dist/mechnode-*.whl)
"$py" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
mkdir "$work/elsewhere"
cd "$work/elsewhere"
"$work/venv/bin/python" - <<'PY'
import os
from importlib import resources

import core
import core.examples

site = os.path.dirname(os.path.dirname(core.__file__))
assert "site-packages" in site, f"core imported from {site}, not from the installed wheel"
names = core.data.model_names()
assert {"cartpole.yaml", "double_pendulum.yaml", "marionette.yaml", "pendulum.yaml", "arm7.urdf"} <= set(names), names
for name in names:
    s = core.load_system(name)
    print(f"check_wheel: {name}: {s.name}, {s.nq} coordinates, {s.nu} inputs")
core.examples.marionette()
# the node's parameter files: data files of the wheel, in <venv>/share/mechnode/config, found
# by the one lookup (mechnode.paths) from the installed package
import sys

from mechnode.paths import config_dir, config_file

params = config_dir()
expected = os.path.join(sys.prefix, "share", "mechnode", "config")
assert os.path.samefile(params, expected), f"config_dir() = {params}, not {expected}"
found = sorted(p.name for p in params.iterdir() if p.name.endswith(".yaml"))
assert {"mechnode.yaml", "cartpole_params.yaml", "arm7_params.yaml"} <= set(found), found
assert "ros__parameters" in config_file("cartpole_params.yaml").read_text()
assert not (resources.files("mechnode") / "params").is_dir(), "parameter files copied into the package"
assert (resources.files("mechnode") / "fastdds_profile.xml").is_file()
print(f"check_wheel: core {core.__version__} from {site}; node parameter files {found} in {params}")
PY
"$work/venv/bin/python" -m core.demo >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
tail -n 2 "$work/demo.log"
"$work/venv/bin/mechnode-demo" arm7.urdf >"$work/demo_arm.log" 2>&1 || { cat "$work/demo_arm.log"; exit 1; }
tail -n 2 "$work/demo_arm.log"
# the command line, on a packaged URDF, as JSON
"$work/venv/bin/mechnode-linearize" arm7.urdf --format json >"$work/cli.json" 2>"$work/cli.err" \
  || { cat "$work/cli.err"; exit 1; }
"$work/venv/bin/python" -c "import json, sys; d = json.load(open(sys.argv[1])); \
print(f'check_wheel: mechnode-linearize arm7.urdf: A {len(d[\"A\"])}x{len(d[\"A\"][0])}, controllability rank {d[\"controllability_rank\"]}')" "$work/cli.json"
echo "check_wheel: $(basename "$wheel") installed and used outside the repository ($(( $(date +%s) - t0 )) s)"
