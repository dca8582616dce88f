"""Input validation, written once: every public function of ``core`` checks its numeric
arguments with these before a kernel sees them, and reads model text with :func:`read_yaml`.

:data:`__all__` (``check_vector``, ``weight_matrix``, ``too_large``, ``read_yaml``,
``MAX_MODEL_BYTES``) is public, for code built on core that checks its own inputs the same way
(the mechnode node does); the rest is core's.

Errors are ``ValueError``\\ s that name the argument, the offending entry (and its variable name
where one is known) and its value. The fast paths (:func:`is_plain_vector`) cost a few hundred
nanoseconds, so they run on every call of the hot front-ends.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from core.errors import ModelError, ResourceLimitError

__all__ = ["check_vector", "weight_matrix", "too_large", "read_yaml", "MAX_MODEL_BYTES"]

#: Largest model text or file accepted (bytes), checked before it is parsed
#: (:func:`core.read_model`, :func:`read_yaml`).
MAX_MODEL_BYTES = 5_000_000
#: Deepest nesting of mappings and lists in a YAML model (a model needs about 5).
MAX_YAML_DEPTH = 32

#: Largest memory (bytes) one second-order computation may allocate (``System.linearize2``,
#: ``MidpointVI.linearize2``, second-order trajectory linearizations), checked before anything
#: is allocated: the tensor ``H`` and its work arrays take about twice ``H``'s ``8 rows nz²``
#: bytes (``rows = 2n``, ``nz = 2n + nu``: about ``300 n³`` bytes for ``n`` actuated variables,
#: 2 GiB at ``n ≈ 190``). Raise it (``core.validation.SECOND_ORDER_MEMORY_LIMIT = ...``) where
#: the host has the memory.
SECOND_ORDER_MEMORY_LIMIT = 2 * 1024 ** 3


#: Largest memory (bytes) the results of one call on a stack of states may take
#: (:mod:`core.continuous.stacked`), checked before anything is allocated.
STACK_MEMORY_LIMIT = 2 * 1024 ** 3


def check_memory(what: str, need: int, detail: str) -> None:
    """A :class:`ResourceLimitError` if ``what``'s results (``need`` bytes, described by
    ``detail``) would pass :data:`STACK_MEMORY_LIMIT`."""
    if need > STACK_MEMORY_LIMIT:
        raise ResourceLimitError(
            f"{what} would allocate about {need / 1e9:.3g} GB ({detail}): above the limit of "
            f"{STACK_MEMORY_LIMIT / 1e9:.3g} GB (core.validation.STACK_MEMORY_LIMIT; split the stack, "
            "or raise the limit where the host has the memory)")


def check_second_order_memory(what: str, rows: int, nz: int, count: int = 1) -> None:
    """A :class:`ResourceLimitError` if a second-order computation with ``count`` tensors of
    ``rows x nz x nz`` would pass :data:`SECOND_ORDER_MEMORY_LIMIT`."""
    need = 2 * 8 * rows * nz * nz * count
    if need > SECOND_ORDER_MEMORY_LIMIT:
        stack = f"{count} x " if count > 1 else ""
        raise ResourceLimitError(
            f"{what} would allocate about {need / 1e9:.3g} GB (H is {stack}{rows} x {nz} x {nz} doubles, "
            f"with its work arrays): above the limit of {SECOND_ORDER_MEMORY_LIMIT / 1e9:.3g} GB "
            "(core.validation.SECOND_ORDER_MEMORY_LIMIT; raise it where the host has the memory)")


def is_plain_vector(x, n: int, finite: bool = True) -> bool:
    """Whether ``x`` can be used as it is: a writable, C-contiguous float64 vector of length
    ``n`` (with ``finite``: all entries finite; a finite sum means finite entries, and an
    overflow only sends ``x`` down the slow path of :func:`check_vector`). Anything else is
    converted once by :func:`check_vector`: a read-only or strided array is another numba type,
    which would compile the kernels again."""
    return (type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (n,)
            and x.flags.c_contiguous and x.flags.writeable and (not finite or math.isfinite(x.sum())))


def check_vector(name: str, x, n: int, names=None, finite: bool = True, optional: bool = False) -> np.ndarray:
    """``x`` as a writable, contiguous float64 vector of length ``n``, converted from any real
    numeric sequence or array (integers and booleans included).

    Parameters
    ----------
    name : str
        The argument's name, for the messages.
    x : array_like or None
        The value. ``None`` is refused, but for an ``optional`` vector, which it makes zeros; so
        is an entry that is no real number (``None``, a string, an object: named with its value).
    n : int
        The length required.
    names : sequence of str, optional
        One label per entry (variable names), to name the offending entry.
    finite : bool
        Refuse NaN and infinite entries (False leaves the check to a kernel that reports it,
        see :func:`refuse_nonfinite`).
    optional : bool
        ``None`` means zeros (an input ``u``).

    Returns
    -------
    ndarray, shape (n,)
        ``x`` itself when it already is such a vector, else a converted copy.

    Raises
    ------
    ValueError
        Missing, not numeric (an entry that is ``None``, a string or another object), the wrong
        shape, or a non-finite entry: naming ``name``, the entry (and its label) and its value.
    """
    if is_plain_vector(x, n, finite):
        return x
    label = f" ({', '.join(names)})" if names is not None and n <= 12 else ""
    if x is None:
        if optional:
            return np.zeros(n)
        raise ValueError(f"{name} is missing (None): expected a vector of {n} entries{label}")
    arr = float_array(name, x, finite=False, labels=names)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must be a vector of {n} entries{label}, got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr)) if finite else None
    if bad is not None and len(bad):
        i = int(bad[0])
        what = f" ({names[i]})" if names is not None else ""
        raise ValueError(f"{name}[{i}]{what} is not finite: {arr[i]}")
    return arr


def refuse_nonfinite(vectors) -> None:
    """Raise :func:`check_vector`'s error for the first non-finite entry of ``vectors``, a
    sequence of ``(name, x, names)``."""
    for name, x, names in vectors:
        check_vector(name, x, x.shape[0], names)


def float_array(name: str, value, finite: bool = True, labels=None) -> np.ndarray:
    """``value`` as a writable, C-contiguous float64 array (a copy where it is not one); with
    ``finite``, no NaN or inf entries. Complex values are refused (not cast: that would drop
    their imaginary parts), as are ``None``, strings and objects, and so are such entries of a
    sequence (``[None]``, ``["1"]``: numpy would make them NaN or parse them), named with their
    index (and ``labels[index]``, labels of the last axis) and value. Arrays of numbers (the
    path of every valid call) are only converted."""
    if type(value) is not np.ndarray or value.dtype.kind not in _NUMERIC_KINDS:
        value = _numeric_array(name, value, labels)
    arr = np.asarray(value, dtype=np.float64)
    if not arr.flags.writeable:
        arr = arr.copy()
    if finite and not np.all(np.isfinite(arr)):
        i = np.unravel_index(int(np.flatnonzero(~np.isfinite(arr))[0]), arr.shape)
        raise ValueError(f"{name} contains non-finite values (NaN or inf): {name}{[int(j) for j in i]} = "
                         f"{arr[i]}")
    return np.ascontiguousarray(arr)


#: numpy's kinds of real numbers: booleans, signed and unsigned integers, floats.
_NUMERIC_KINDS = "biuf"


def _numeric_array(name: str, value, labels) -> np.ndarray:
    """``value`` (anything but an array of real numbers) as an array of real numbers, or
    :func:`float_array`'s ValueError naming what is not a number."""
    if value is None or isinstance(value, (str, bytes, dict)):
        raise ValueError(f"{name} must be a real numeric array, got {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):     # ragged, or what numpy cannot read: named below
        arr = None
    if arr is not None and arr.dtype.kind in _NUMERIC_KINDS:
        return arr
    if arr is not None and arr.dtype.kind == "c":
        raise ValueError(f"{name} must be real, got complex values")
    bad = first_non_number(value)
    if bad is None:                     # an object array of numbers (Python ints beyond int64)
        try:
            return np.asarray(value, dtype=object).astype(np.float64)
        except OverflowError:
            raise ValueError(f"{name} has an entry too large for double precision") from None
    index, entry = bad
    if not index:
        raise ValueError(f"{name} must be a real numeric array, got {type(value).__name__}")
    label = f" ({labels[index[-1]]})" if labels is not None and index[-1] < len(labels) else ""
    raise ValueError(f"{name}{list(index)}{label} must be a real number, got {shown(entry)}")


def is_number(entry, booleans: bool = True, strings: bool = False) -> bool:
    """Whether ``entry`` is one real number.

    Parameters
    ----------
    entry : object
        The value.
    booleans : bool
        Count ``True`` and ``False`` as numbers (1 and 0).
    strings : bool
        Count strings that ``float`` reads (``"1e-3"``, which YAML leaves a string) as numbers.

    Returns
    -------
    bool
        True for a Python or numpy integer or float (and a boolean or numeric string, as
        allowed); False for ``None``, complex numbers, dates, containers and other objects.
    """
    if isinstance(entry, (bool, np.bool_)):
        return booleans
    if isinstance(entry, str):
        if not strings:
            return False
        try:
            float(entry)
        except ValueError:
            return False
        return True
    return isinstance(entry, numbers.Real) and not isinstance(entry, np.timedelta64)


def first_non_number(value, booleans: bool = True, strings: bool = False):
    """The first entry of ``value`` that is not a real number (:func:`is_number`).

    Parameters
    ----------
    value : object
        A number, a (nested) sequence of them, or an array.
    booleans, strings : bool
        As :func:`is_number`.

    Returns
    -------
    (tuple of int, object) or None
        The entry's index (empty for ``value`` itself, when it is no sequence of entries) and
        the entry, in row-major order; None when every entry is a number.
    """
    arr = value
    if not isinstance(value, np.ndarray):
        try:
            arr = np.asarray(value, dtype=object)    # (the entries as given, not converted)
        except (TypeError, ValueError):
            return (), value
    if arr.dtype.kind in "iuf" or (arr.dtype.kind == "b" and booleans):
        return None
    for k, entry in enumerate(arr.flat):
        if not is_number(entry, booleans, strings):
            return tuple(int(i) for i in np.unravel_index(k, arr.shape)), entry
    return None


def ndim(value) -> int:
    """``np.ndim(value)``; 1 for a ragged nested sequence (``[[1], 2]``, which numpy refuses):
    the vector checks then name the entry that is not a number."""
    try:
        return np.ndim(value)
    except ValueError:
        return 1


def shown(value, width: int = 40) -> str:
    """``value`` for a message: ``None``, or its type and (shortened) repr (``str '1.0'``)."""
    if value is None:
        return "None"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= width else text[:width - 3] + '...'}"


def float_stack(name: str, value, shape: tuple) -> np.ndarray:
    """A finite float64 array whose shape matches ``shape`` (``None`` entries are free)."""
    arr = float_array(name, value)
    if arr.ndim != len(shape) or any(s is not None and a != s for a, s in zip(arr.shape, shape, strict=True)):
        want = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    return arr


def check_symmetric(name: str, M: np.ndarray) -> None:
    """A ValueError unless ``M`` (or each matrix of a stack) is symmetric to 1e-10 relative."""
    if M.size and not np.max(np.abs(M - np.swapaxes(M, -1, -2))) <= 1e-10 * max(1.0, np.max(np.abs(M))):
        raise ValueError(f"{name} must be symmetric")


def check_definite(name: str, M: np.ndarray, definite: bool) -> None:
    """A ValueError unless the symmetric ``M`` (or each matrix of a stack) is positive
    semi-definite (``definite``: positive definite), to 1e-12 of its largest |eigenvalue|. The
    error names the matrix (``name[k]`` in a stack) and its smallest eigenvalue."""
    if M.shape[-1] == 0:
        return
    # ascending; eigvalsh reads the lower triangle (M is symmetric: check_symmetric)
    eig = np.linalg.eigvalsh(M.reshape((-1,) + M.shape[-2:]))
    lowest = eig[:, 0]
    tolerance = 1e-12 * np.maximum(1.0, np.maximum(-lowest, eig[:, -1]))       # of the largest |eigenvalue|
    bad = lowest <= tolerance if definite else lowest < -tolerance
    if bad.any():
        k = int(np.argmax(bad))
        label = f"{name}[{k}]" if M.ndim == 3 else name
        kind = "positive definite" if definite else "positive semi-definite"
        raise ValueError(f"{label} must be {kind} (smallest eigenvalue {eig[k, 0]:.3g})")


def square_matrix(name: str, M, n: int, definite: bool | None = None) -> np.ndarray:
    """A finite, symmetric ``n x n`` float64 matrix (a scalar when ``n == 1``); with
    ``definite`` True/False also positive definite/semi-definite (:func:`check_definite`)."""
    M = float_array(name, M)
    if n == 1 and M.size == 1 and M.ndim <= 2:
        M = M.reshape(1, 1)
    if M.shape != (n, n):
        raise ValueError(f"{name} must have shape ({n}, {n}), got {M.shape}")
    check_symmetric(name, M)
    if definite is not None:
        check_definite(name, M, definite)
    return M


def weight_matrix(values, n: int, name: str, definite: bool = False) -> np.ndarray:
    """A symmetric ``n x n`` weight matrix from its diagonal or all of its entries.

    Parameters
    ----------
    values : array_like
        ``n`` diagonal entries or ``n*n`` row-major entries.
    n : int
        The size.
    name : str
        The weight's name, for the messages.
    definite : bool
        Require positive definite rather than semi-definite (to 1e-12 of the largest eigenvalue).

    Returns
    -------
    ndarray, shape (n, n)
        The symmetric weight.

    Raises
    ------
    ValueError
        The wrong count, a non-finite entry, not symmetric, or not (semi-)definite: naming the
        weight and its smallest eigenvalue.
    """
    v = float_array(name, list(values) if not isinstance(values, np.ndarray) else values,
                    finite=False).ravel()
    if v.size == n:
        W = np.diag(v)
    elif v.size == n * n:
        W = v.reshape(n, n)
    else:
        raise ValueError(f"{name} needs {n} (diagonal) or {n * n} (full) numbers, got {v.size}")
    if not np.all(np.isfinite(W)):
        raise ValueError(f"{name} has non-finite entries")
    if not np.allclose(W, W.T, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(W).max(initial=0.0))):
        raise ValueError(f"{name} is not symmetric")
    W = 0.5 * (W + W.T)
    check_definite(name, W, definite)
    return W


# ------------------------------------------------------------------------------ sizes and types
#: An input entry above this magnitude overflows double precision once squared (the square root
#: of the largest double is 1.3e154): a computation that fails on such an input is reported as
#: the input's size, not as what broke inside (a "singular" matrix of infinities, "condition inf").
OVERFLOW_SCALE = 1e150


def number(name: str, value, positive: bool = False, integer: bool = False) -> float:
    """``value`` as a finite float (``integer``: an int), or a ValueError naming the argument,
    its type or its value (``positive``: > 0). Strings are refused, not parsed."""
    ok_type = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok_type:
        raise ValueError(f"{name} must be a {'whole ' if integer else ''}number, got "
                         f"{type(value).__name__} {value!r}")
    x = float(value)
    if not math.isfinite(x) or (positive and not x > 0) or (integer and x != int(x)):
        kind = "positive " if positive else ""
        raise ValueError(f"{name} must be a finite {kind}{'whole ' if integer else ''}number, "
                         f"got {value!r}")
    return int(x) if integer else x


#: The time steps accepted, ``(shortest, longest)`` in seconds (:func:`time_step`: the
#: ``dt`` of :class:`core.MidpointVI` and of :func:`core.balance_lqr`, the CLI's ``--dt``). Below
#: 1 ns the DEL's difference quotients ``(q_k+1 - q_k) / dt`` keep few significant digits and
#: ``1 / dt`` heads for overflow (a subnormal ``dt`` gives inf); above 1000 s one step of a
#: mechanism means nothing, and ``dt²`` terms overflow long before ``dt`` does.
TIME_STEP_RANGE = (1e-9, 1e3)


def time_step(name: str, value) -> float:
    """``value`` as a time step within :data:`TIME_STEP_RANGE`.

    Parameters
    ----------
    name : str
        The argument's name, for the messages.
    value : float
        The time step (s).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Not a finite positive number (:func:`number`), or outside :data:`TIME_STEP_RANGE`:
        naming ``name``, the value and the range.
    """
    dt = number(name, value, positive=True)
    shortest, longest = TIME_STEP_RANGE
    if not shortest <= dt <= longest:
        raise ValueError(f"{name} must be a time step from {shortest:g} s to {longest:g} s "
                         f"(core.validation.TIME_STEP_RANGE), got {value!r}")
    return dt


def largest_entry(inputs, above: float = 0.0):
    """The entry of largest magnitude among ``inputs`` (``(name, array, labels of the last axis
    or None)``) if it exceeds ``above`` (non-finite entries are not counted): a text such as
    ``"u[0] (cart_force) = 1e+12"``, or None."""
    best, text = above, None
    for name, a, labels in inputs:
        a = np.asarray(a, dtype=float)
        if a.size == 0:
            continue
        mag = np.where(np.isfinite(a), np.abs(a), 0.0)
        k = int(np.argmax(mag))
        if mag.flat[k] > best:
            idx = tuple(int(i) for i in np.unravel_index(k, a.shape))
            label = f" ({labels[idx[-1]]})" if labels is not None and idx[-1] < len(labels) else ""
            best, text = float(mag.flat[k]), f"{name}{list(idx)}{label} = {a[idx]:.6g}"
    return text


def too_large(inputs) -> str | None:
    """A message naming the first input entry whose square overflows double precision.

    Parameters
    ----------
    inputs : iterable of (str, array_like, sequence of str or None)
        ``(name, array, labels of its last axis)`` per input.

    Returns
    -------
    str or None
        ``"input u[0] (cart_force) = 1e+160 is too large: ..."`` for the first entry above
        :data:`OVERFLOW_SCALE` in magnitude, None if there is none.
    """
    for name, a, labels in inputs:
        big = largest_entry(((name, a, labels),), OVERFLOW_SCALE)
        if big is not None:
            return (f"input {big} is too large: the computation overflows double precision "
                    f"(|entries| above {OVERFLOW_SCALE:.0e})")
    return None


def read_yaml(text: str, where: str = "model"):
    """The plain data of the YAML ``text`` (mappings, lists, strings, numbers).

    PyYAML's safe loader, which constructs no objects of its own, after a scan of its events
    that refuses what could exhaust the host before anything is built: more than
    :data:`MAX_MODEL_BYTES`, nesting deeper than :data:`MAX_YAML_DEPTH` (deep nesting exhausts
    Python's stack) and aliases (``*name``: shared references that expand into huge arrays).

    Parameters
    ----------
    text : str
        The YAML text.
    where : str
        What the text is, for the messages.

    Returns
    -------
    object
        What ``yaml.safe_load`` returns for ``text``.

    Raises
    ------
    ModelError
        Every problem (not a string, too large, too deep, aliases, not valid YAML), naming
        ``where`` and the line where there is one.
    """
    import yaml  # imported on use: loading the library needs no YAML parser
    if not isinstance(text, str):
        raise ModelError(f"{where}: expected YAML text, got {type(text).__name__}")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_MODEL_BYTES:
        raise ModelError(f"{where}: {size} bytes exceeds the size limit of {MAX_MODEL_BYTES} bytes")
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise ModelError(f"{where}: line {event.start_mark.line + 1}: nested more than "
                                     f"{MAX_YAML_DEPTH} levels deep (a model needs a few)")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                raise ModelError(f"{where}: line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) "
                                 "are not accepted in models; write the values out")
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ModelError(f"{where}: not valid YAML: {at}{exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ModelError(f"{where}: not valid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
    except (RecursionError, MemoryError) as exc:
        raise ModelError(f"{where}: the YAML is too large or too deeply nested to load ({type(exc).__name__})") \
            from None
