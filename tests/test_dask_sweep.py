"""The Dask recipe of ``examples/gain_table_dask.py`` on a ``LocalCluster`` of two worker
processes on this host: the Panda's LQR gain table, in chunks on the workers, is the same to the
last bit as the in-process call on all points; the system travels by its description."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _example():
    spec = importlib.util.spec_from_file_location(
        "gain_table_dask", os.path.join(ROOT, "examples", "gain_table_dask.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["gain_table_dask"] = module
    spec.loader.exec_module(module)
    return module


def test_the_gain_table_on_two_workers_equals_the_in_process_call():
    from dask.distributed import Client, LocalCluster
    example = _example()
    system = example.panda()
    q = example.operating_points(system, 120, seed=4)
    here = example.gains(system, q)
    assert here.shape == (120, 7, 14) and np.all(np.isfinite(here))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        there = example.table(client, system, q, chunk=25)          # 5 chunks: uneven over 2 workers
        workers = {w for w in client.run(os.getpid).values()}
    assert len(workers) == 2 and os.getpid() not in workers
    assert there.shape == here.shape and np.array_equal(there, here)
