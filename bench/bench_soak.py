"""Hours of running: the node on the Panda over real DDS on loopback (private ROS_DOMAIN_ID,
LOCALHOST discovery) for ``--minutes`` (default 30).

    .venv/bin/python bench/bench_soak.py [--minutes 30] [--sample 30] [--rate 500] [--dt 0.01] [--replan-period 0.05]

The node with config/panda_params.yaml and ``replan_period`` 0.05 s, a simulated Panda publishing
a JointState every 2 ms (``--rate`` 500 Hz), a new reference every 10 s, diagnostics read once a
second (:mod:`mechnode.testing.soak`). Prints a row every ``--sample`` seconds (RSS, threads, fds
of the node's process and its command process; command gaps in the window), then each figure's
growth after the first minute, the p99 and largest command gap, the states no command answered,
the steps one command late and the re-plan counters, with the targets beside them, and the
targets not met. Prints figures only; asserts nothing (``tests/ros/test_soak.py`` asserts the
targets on two minutes).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mechnode.testing.soak import REPLAN_PERIOD, soak  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--sample", type=float, default=30.0, help="seconds between printed samples")
    ap.add_argument("--replan-period", type=float, default=REPLAN_PERIOD, help="the node's replan_period (s)")
    ap.add_argument("--rate", type=float, default=500.0, help="the simulated robot's rate (Hz)")
    ap.add_argument("--dt", type=float, default=0.01, help="the node's dt (s; its schedules' and re-plans' knots)")
    args = ap.parse_args(argv)
    figures = soak(args.minutes, args.sample, args.rate, args.dt, args.replan_period,
                   out=lambda line: print(line, flush=True))
    print("\n" + figures.report())
    failures = figures.failures()
    print("targets not met: " + ("; ".join(failures) if failures else "none"))
    return 1 if figures.stopped_early else 0


if __name__ == "__main__":
    sys.exit(main())
