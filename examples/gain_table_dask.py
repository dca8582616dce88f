"""A gain-scheduling table of the Panda on a Dask cluster: LQR gains at 10,000 operating points.

    pip install -e ".[distributed]"          # Dask (dask.distributed); scripts/bootstrap.sh installs it
    python examples/gain_table_dask.py [--points 10000] [--workers 2] [--chunk 500] [--scheduler ADDRESS]

An operating point is a configuration ``q`` of the arm (fingers locked) at rest, held by the
joint torques ``u(q)`` that balance gravity there (:func:`core.holding_inputs`); its gain is the
LQR gain (:func:`core.lqr`) of the exact linearization there (``System.linearize``, stacked over
a chunk of points). The points are cut into chunks of ``--chunk``; each chunk is one Dask task.

How it maps onto Dask (no scheduler of ours): the system goes to every worker once
(``client.scatter(system, broadcast=True)``): it pickles by its description (a few kB), and each
worker builds its model on the first call, the kernels loaded from numba's on-disk cache (compiled
once per cache if cold). ``client.map(gains, [system] * n, chunks)`` then runs :func:`gains` on
the chunks, and ``client.gather`` brings the ``(chunk, nu, nx)`` gain stacks back, in order.
Without ``--scheduler`` the script starts a ``LocalCluster`` of ``--workers`` processes of one
thread each on this host; with ``--scheduler tcp://host:8786`` the same code runs on that
cluster (its workers need this package installed and, to skip compiling, a warm numba cache:
``NUMBA_CACHE_DIR`` on each). What travels per chunk: ``chunk x nq`` floats out, ``chunk x nu x nx``
back (10,000 Panda gains: 7.8 MB).

The result is the same, to the last bit, as :func:`gains` on all points in one process
(``tests/test_dask_sweep.py``); ``bench/bench_sweep.py`` gives the throughput per worker against
that in-process call.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import core

#: the LQR weights on the state [q, dq] (7 + 7) and the inputs (7 joint torques)
Q_WEIGHTS = np.diag([100.0] * 7 + [1.0] * 7)
R_WEIGHTS = 0.01 * np.eye(7)


def panda() -> core.System:
    """The Panda of ``example-robot-data``, its fingers locked open (the Panda demo's model)."""
    from mechnode.demo.scenarios import PANDA_LOCKED, panda_urdf
    return core.load_urdf(panda_urdf(), locked=dict(PANDA_LOCKED))


def operating_points(system, n: int, seed: int = 0) -> np.ndarray:
    """``n`` configurations drawn uniformly within the joint limits, shape (n, nq)."""
    lower, upper = system.position_limits
    return np.random.default_rng(seed).uniform(lower, upper, size=(n, system.nq))


def gains(system, q, Q=Q_WEIGHTS, R=R_WEIGHTS) -> np.ndarray:
    """The LQR gains ``K`` (len(q), nu, nx) at rest at each configuration of ``q`` (N, nq): the
    holding torques, the stacked exact linearization there, a CARE per point."""
    q = np.atleast_2d(q)
    u = np.array([core.holding_inputs(system, qi)[0] for qi in q])
    A, B = system.linearize(q, np.zeros_like(q), u)
    return np.array([core.lqr(A[i], B[i], Q, R)[0] for i in range(len(q))])


def table(client, system, q, chunk: int = 500) -> np.ndarray:
    """:func:`gains` at every row of ``q``, in chunks of ``chunk`` rows on ``client``'s workers."""
    if __name__ != "__main__":
        client.upload_file(__file__)    # imported as a module: the workers import it too (a script's
        #                                 functions travel by value)
    remote = client.scatter(system, broadcast=True)
    chunks = [q[i:i + chunk] for i in range(0, len(q), chunk)]
    futures = client.map(gains, [remote] * len(chunks), chunks, pure=False)
    return np.concatenate(client.gather(futures))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster processes (without --scheduler)")
    ap.add_argument("--chunk", type=int, default=500)
    ap.add_argument("--scheduler", help="a running Dask scheduler's address, e.g. tcp://host:8786")
    args = ap.parse_args(argv)
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print("this example needs Dask: pip install -e '.[distributed]'", file=sys.stderr)
        return 2
    system = panda()
    q = operating_points(system, args.points)
    cluster = None if args.scheduler else LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                                       processes=True, dashboard_address=None)
    with Client(args.scheduler or cluster) as client:
        t0 = time.perf_counter()
        K = table(client, system, q, args.chunk)
        seconds = time.perf_counter() - t0
    if cluster is not None:
        cluster.close()
    where = args.scheduler or f"{args.workers} local workers"
    print(f"{len(q)} LQR gains {K.shape[1:]} of the Panda in {seconds:.1f} s on {where} "
          f"({len(q) / seconds:.0f} per second); largest |K| {np.abs(K).max():.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
