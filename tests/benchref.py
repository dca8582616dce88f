"""The scripts under bench/ as modules, for the tests that use what they build or check that
they run: ``load("bench_linearizer")``."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str):
    """``bench/<name>.py`` imported as a module (bench/ on ``sys.path`` meanwhile: the scripts
    import their ``common.py``)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
