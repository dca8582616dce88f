"""``python -m core.warmup discrete``: compile (or load from numba's cache) the integrator's
kernels in a process of its own, for :meth:`core.MidpointVI.warm_up` with ``processes=2``.

numba compiles one kernel at a time per process, and compiling is most of a cold start (the
integrator's kernels take about half of it). A kernel's types do not depend on the model (a
:class:`core.Model` is one record type whatever it holds), so this process warms them up on a
two-link chain while the caller compiles the continuous kernels for its own model; the caller
then loads these from the cache.
"""
from __future__ import annotations

import sys

from .examples import chain
from .midpoint import MidpointVI


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args != ["discrete"]:
        print("usage: python -m core.warmup discrete", file=sys.stderr)
        return 2
    MidpointVI(chain(2), 0.01).warm_up(part="discrete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
