"""Immutable-by-convention records of arrays that numba kernels take by reference.

A namedtuple of N arrays costs about N x 0.3 us to unbox on every call from Python; a numba
StructRef is passed as one pointer (about 1 us whatever N), which matters for microsecond
kernels. :func:`record_type` defines both halves (the numba type and the Python proxy) at the
caller's module level so that ``cache=True`` can pickle them by reference.
"""
from __future__ import annotations

from numba.core import types
from numba.experimental import structref


def record_type(name: str, fields, module: str):
    """Return ``(NumbaType, ProxyClass)`` for a record with ``fields``; assign both to
    module-level names ``<name>Type`` and ``<name>`` in ``module``."""

    def preprocess_fields(self, fs):
        return tuple((f, types.unliteral(t)) for f, t in fs)

    numba_type = type(f"{name}Type", (types.StructRef,),
                      {"preprocess_fields": preprocess_fields, "__module__": module,
                       "__qualname__": f"{name}Type"})
    structref.register(numba_type)
    fields = tuple(fields)

    def arrays(self):
        """The record's fields as a tuple, in declaration order."""
        return tuple(self._values[f] for f in fields)

    def new(cls, *args):
        if len(args) != len(fields):
            raise TypeError(f"{name} takes {len(fields)} fields {fields}, got {len(args)}")
        # numba's default constructor is an uncached @njit compiled in every process (~0.7 s);
        # a module-level cached one (see set_constructor) loads from the cache instead.
        ctor = getattr(cls, "_cached_ctor", None)
        inst = ctor(*args) if ctor is not None else structref.StructRefProxy.__new__(cls, *args)
        # Python-side view of the same arrays: attribute reads need no jitted call
        inst._values = dict(zip(fields, args, strict=True))
        return inst

    namespace = {"__module__": module, "__qualname__": name, "_fields": fields, "fields": arrays,
                 "__new__": new, "__repr__": lambda self: f"<{name} record>"}
    for f in fields:
        namespace[f] = property(lambda self, f=f: self._values[f])
    proxy = type(name, (structref.StructRefProxy,), namespace)
    structref.define_proxy(proxy, numba_type, list(fields))
    return numba_type, proxy


def set_constructor(proxy, ctor) -> None:
    """Build ``proxy`` records with ``ctor``, a module-level ``@njit(cache=True)`` function
    ``def ctor(*args): return Proxy(*args)`` (it must live in the record's module to be cached)."""
    proxy._cached_ctor = ctor
