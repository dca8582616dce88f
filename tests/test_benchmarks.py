"""The benchmarks under bench/ run. They print figures and assert nothing, so nothing else would
notice one that no longer runs: bench_call_cost.py failed with a typing error for several
revisions after the discrete linearization's entry took two more arguments. Here its split runs
once on the one-joint model (one round: the figures are not checked, only that every row is
there and finite). Its compiled loops inline core's entry kernels, so this compiles them again
(about 80 s)."""
from __future__ import annotations

import re

import pytest
from benchref import load

pytestmark = pytest.mark.slow


def test_call_cost_benchmark_runs_every_row(capsys):
    bench = load("bench_call_cost")
    bench.split("one joint", bench.one_joint(), rounds=1)
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[2] for r in rows] == ["qdd", "linearize", "VI", "VI"], rows
    for row in rows:
        figures = [float(x) for x in re.findall(r"-?\d+\.\d+", row)]
        assert len(figures) == 4 and figures[0] > 0 and figures[3] > 0, row
