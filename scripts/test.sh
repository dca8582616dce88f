#!/usr/bin/env bash
# The test command of README.md: set up .venv (idempotent) and run the whole test suite.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
cd "$root"
exec .venv/bin/python -m pytest -q "$@"
