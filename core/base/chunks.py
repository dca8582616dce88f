"""Contiguous chunks of a stack of points for ``prange`` loops.

A stacked kernel runs ``for c in prange(nchunks)`` and gives chunk ``c`` the points from
``start`` to ``stop - 1``, ``start, stop = chunk(c, N, nchunks)``: one contiguous block per
thread, so that each thread writes its own pages of the outputs (interleaved points,
``range(c, N, nchunks)``, made the threads share pages: 5-8 % slower on the Panda's stacked
linearization).
"""
from __future__ import annotations

from core.base.jit import njit


@njit(cache=True, nogil=True, inline="always")
def chunk(c, N, nchunks):
    """``(start, stop)`` of chunk ``c`` of ``N`` points split into ``nchunks`` contiguous
    chunks whose sizes differ by at most one."""
    return c * N // nchunks, (c + 1) * N // nchunks
