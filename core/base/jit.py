"""``njit`` for core's kernels: numba's, compiled once per argument *types*, never per constant.

numba compiles a ``@njit`` function called from compiled code once for every distinct
constant argument: ``f(x, 2)``, ``f(x, 1)`` and ``f(x, order)`` are three compilations
(``Literal[int](2)``, ``Literal[int](1)``, ``int64``), each with its own copy of every callee
reached with a constant. core passes derivative orders and flags as plain arguments all
through the tree recursions, so numba's default compiled the Lagrangian, force and constraint
derivatives up to five times each. The kernels decorated here take constants as their
types (``int64``, ``bool``): one compilation each, about a fifth less compile time on a cold
cache, the same machine code wherever the value is not a constant, and the same results.

:func:`flat` kernels inline the calls to kernels compiled with ``inline=INTO_FLAT`` (see there).

Everything else is numba's: ``@njit(cache=True, nogil=True)``, ``parallel=True``,
``inline="always"``. A ``None`` argument still has a type of its own (``NoneType``): that is
how a kernel leaves a part out at compile time (``if H is None: return`` is pruned).
"""
from __future__ import annotations

from numba.core import types
from numba.core.registry import CPUDispatcher

__all__ = ["INTO_FLAT", "flat", "njit"]


class _KernelDispatcher(CPUDispatcher):
    """numba's CPU dispatcher, typing calls from compiled code by their arguments' types."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})


def njit(function=None, *, cache: bool = False, **options):
    """``numba.njit(function, cache=cache, **options)`` with :class:`_KernelDispatcher`
    (as a decorator, with or without arguments)."""
    def wrap(f):
        dispatcher = _KernelDispatcher(py_func=f, locals={}, targetoptions={"nopython": True, **options})
        if cache:
            dispatcher.enable_caching()
        return dispatcher
    return wrap if function is None else wrap(function)


def flat(function):
    """Mark ``function`` (under :func:`njit`) as a flat kernel: numba inlines into it every call
    to a kernel compiled with ``inline=INTO_FLAT``, and the calls those make in turn.

    Why: a call between compiled functions costs numba a reference count up and down on every
    array and record argument (an atomic operation, and the record fields read in the callee
    cost the same), about 580 of them in one ``System.linearize`` of the Panda: 27 % of the
    kernel's time, and most of a small robot's. Inlined, the counts of one function are
    pruned. Only the entry kernels of the O(n) paths are flat, so that the kernels they inline
    are compiled into them once and not into every other caller (compile time)."""
    function.core_flat = True
    return function


def INTO_FLAT(call, caller_ir, callee_ir) -> bool:
    """numba's ``inline=`` cost model: inline a call when the calling kernel is :func:`flat`."""
    return getattr(caller_ir.func_id.func, "core_flat", False)
