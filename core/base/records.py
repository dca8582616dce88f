"""Immutable-by-convention records of arrays that numba kernels take by reference.

A namedtuple of N arrays costs about N x 0.3 us to unbox on every call from Python; a numba
StructRef is passed as one pointer (about 1 us whatever N), which matters for microsecond
kernels. :func:`record_type` defines both halves (the numba type and the Python proxy) at the
caller's module level so that ``cache=True`` can pickle them by reference.

A record can also be handed to a kernel by its address (:func:`address`, :func:`record_at`):
numba dispatches a record argument in about 0.6 us and an integer in 0.02 us, which is a fifth
of a microsecond call. The entry kernels of ``System.qdd``, ``System.linearize`` and
``MidpointVI.step``/``linearize`` take the calling thread's record that way; the caller keeps
the record alive for the call.
"""
from __future__ import annotations

from numba.core import cgutils, types
from numba.experimental import structref
from numba.extending import intrinsic

from core.base.jit import njit


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
        namespace[f] = property(lambda self, f=f: self._values[f])  # type: ignore[misc]  # (a field per name)
    proxy = type(name, (structref.StructRefProxy,), namespace)
    structref.define_proxy(proxy, numba_type, list(fields))
    return numba_type, proxy


def set_constructor(proxy, ctor) -> None:
    """Build ``proxy`` records with ``ctor``, a module-level ``@njit(cache=True)`` function
    ``def ctor(*args): return Proxy(*args)`` (it must live in the record's module to be cached)."""
    proxy._cached_ctor = ctor


@intrinsic
def _meminfo_address(typingctx, record):
    """The address of ``record``'s meminfo (an int64)."""
    def codegen(context, builder, signature, args):
        proxy = cgutils.create_struct_proxy(record)(context, builder, value=args[0])
        return builder.ptrtoint(proxy.meminfo, context.get_value_type(types.int64))
    return types.int64(record), codegen


@njit(cache=True)
def address(record) -> int:
    """The address that :func:`record_at` turns back into ``record`` (valid while it lives)."""
    return _meminfo_address(record)  # type: ignore[call-arg]  # (numba's intrinsic: typingctx is its own)


def typed_address(record, module, name: str) -> int:
    """:func:`address` of ``record``, whose numba type must be ``module.<name>``: the type the
    kernels that take such records by address compile with (set to ``record``'s when the
    process makes its first one: every record of a kind has one type)."""
    expected = getattr(module, name)
    if expected is None:
        setattr(module, name, record._type)
    elif record._type != expected:
        raise TypeError(f"a {type(record).__name__} record of another numba type than "
                        f"{module.__name__}.{name} (built from arrays of other types or flags)")
    return address(record)


@intrinsic
def record_at(typingctx, address, record_type):
    """The record of numba type ``record_type`` at ``address`` (from :func:`address`), in
    compiled code; it holds a reference of its own while the kernel uses it."""
    record = record_type.instance_type

    def codegen(context, builder, signature, args):
        pointer_type = context.get_value_type(types.MemInfoPointer(record.get_data_type()))
        proxy = cgutils.create_struct_proxy(record)(context, builder)
        proxy.meminfo = builder.inttoptr(args[0], pointer_type)
        value = proxy._getvalue()
        context.nrt.incref(builder, record, value)
        return value
    return record(address, record_type), codegen
