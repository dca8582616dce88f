#!/usr/bin/env bash
# The main job of README.md: set up .venv (idempotent) and run the demo on the default model.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
cd "$root"
exec .venv/bin/python -m core.demo "$@"
