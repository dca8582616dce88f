"""The benchmarks under bench/ run. They print figures and assert nothing, so nothing else would
notice one that no longer runs: bench_call_cost.py failed with a typing error for several
revisions after the discrete linearization's entry took two more arguments. Here its split runs
once on the one-joint model (one round: the figures are not checked, only that every row is
there and finite). Its compiled loops inline core's entry kernels, so this compiles them again
(about 80 s)."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _module(name):
    sys.path.insert(0, str(BENCH))         # (the scripts import their common.py)
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_call_cost_benchmark_runs_every_row(capsys):
    bench = _module("bench_call_cost")
    bench.split("one joint", bench.one_joint(), rounds=1)
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[2] for r in rows] == ["qdd", "linearize", "VI", "VI"], rows
    for row in rows:
        figures = [float(x) for x in re.findall(r"-?\d+\.\d+", row)]
        assert len(figures) == 4 and figures[0] > 0 and figures[3] > 0, row
