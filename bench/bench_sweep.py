"""The Panda's gain-scheduling table on Dask (examples/gain_table_dask.py) against the same call
in this process: throughput per worker.

    .venv/bin/python bench/bench_sweep.py [--points 2000] [--workers 2] [--chunk 250]

Prints the in-process rate (gains per second, one thread), the rate on a ``LocalCluster`` of
``--workers`` single-threaded processes on this host (after a warm-up task per worker, so that
model builds and kernel loads are not timed) and the rate per worker over the in-process one.
Prints figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=250)
    args = ap.parse_args(argv)
    from dask.distributed import Client, LocalCluster
    spec = importlib.util.spec_from_file_location(
        "gain_table_dask", os.path.join(ROOT, "examples", "gain_table_dask.py"))
    example = importlib.util.module_from_spec(spec)
    sys.modules["gain_table_dask"] = example
    spec.loader.exec_module(example)
    system = example.panda()
    q = example.operating_points(system, args.points)
    example.gains(system, q[:2])                        # build and load the kernels here
    t0 = time.perf_counter()
    example.gains(system, q)
    here = args.points / (time.perf_counter() - t0)
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        example.table(client, system, q[:2 * args.workers], chunk=2)    # each worker builds its model
        t0 = time.perf_counter()
        example.table(client, system, q, args.chunk)
        there = args.points / (time.perf_counter() - t0)
    print(f"Panda LQR gain table, {args.points} points: in this process {here:.0f} gains/s; on {args.workers} "
          f"local workers (chunks of {args.chunk}) {there:.0f} gains/s = {there / args.workers:.0f} per worker, "
          f"{there / args.workers / here:.2f}x the in-process rate per worker (this host: {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
