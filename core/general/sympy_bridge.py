"""SymPy bridge: a compiled :class:`core.general.linearizer.Linearizer` from a SymPy mechanics method.

Switching from SymPy's linearizer is a one-line change::

    lin = KM.to_linearizer()                         # SymPy: symbolic substitution per point
    lin = core.from_sympy(KM)                        # mechnode: generated code, built once
    A, B = lin.linearize(op_point=[q_op, u_op, ud_op, params], A_and_B=True)   # numpy arrays

``from_sympy`` takes SymPy's own ``Linearizer`` (``method.to_linearizer(...)``), i.e. its general
form ``f_c, f_v, f_a, f_0, f_1, f_2, f_3, f_4`` and the orders of ``q, u, r, lams``, and generates
once, for every part, a Python function returning the part and its Jacobians: common
subexpressions are eliminated, the Jacobians are formed by the chain rule through those
subexpressions (forward-mode differentiation of the straight-line program, much cheaper than
differentiating large expression trees), and the code is printed with SymPy's Python code
printer (what ``lambdify`` uses) into preallocated arrays, so the same source also compiles with
numba. Each operating point then only evaluates these functions and does small dense algebra.

Names: SymPy's side keeps SymPy's notation (its ``u`` are the generalized speeds, its ``r`` the
inputs), and so do the op_points users pass (dicts keyed by SymPy symbols) and the SymPy matrices
mirrored on :class:`SympyLinearizer`. The numeric :class:`core.general.linearizer.Linearizer` it builds
uses mechnode's: SymPy's ``lin.u`` (and ``lin.u_i``, ``lin.u_d``, the rates ``u'``) feed its
generalized speeds ``v`` (``v_ind``, ``v_dep``, ``vd``), SymPy's ``lin.r`` feed its inputs ``u``,
``lin.q`` its ``q`` and ``lin.lams`` its ``lam``.

Backends (measured on a loaded 2-core machine, see ``bench/bench_linearizer.py``):
``"python"`` compiles nothing (plain Python functions, numpy for the per-point algebra), builds
fast (rolling disc 0.4 s, bicycle ~10-20 s), has no slow first call and is fine for small
systems (~0.2 ms per point for the rolling disc, ~1.2 ms for the bicycle, against ~17 s for
SymPy's ``linearize`` of the bicycle); ``"numba"`` compiles the same source and mechnode's
linearizer kernels (disc ~7 s, bicycle minutes) and is faster per point (bicycle ~140 us).

Differences from SymPy's ``Linearizer.linearize``:

* the operating point must be numeric: every parameter symbol, and every coordinate, speed and
  input that some part of the general form depends on, needs a value (values may be SymPy
  expressions of other op_point entries, as in SymPy's tests). As in SymPy, a coordinate, speed
  or input that no part depends on (e.g. the rolling disc's contact-point coordinates ``q4, q5``)
  may be left out: which symbols each part depends on is recorded when the functions are
  generated (``needed_by``), the ones left out are read by no function and get an inert
  placeholder, and leaving out any other one raises a LinearizerError naming it and the parts
  that need it. Missing rates ``q'``, ``u'`` and multipliers are solved from the equations
  (SymPy would leave them symbolic); keys that are not part of the system are ignored, as in
  SymPy;
* the results are numpy arrays; without inputs ``B`` has shape ``(rows, 0)`` instead of SymPy's
  ``0 x 0`` ``Matrix()``;
* ``simplify`` and ``linear_solver`` are accepted and ignored (numeric LU with pivoting is used);
* independent coordinates/speeds listed in an order that is not an involution of ``q``/``u``
  (e.g. a 3-cycle) are handled as Peterson et al. define it; SymPy 1.14 builds its permutation
  matrix transposed, which gives wrong results in that case (identical results otherwise).
"""
from __future__ import annotations

import itertools
import linecache
import math
import time
from collections.abc import Iterable, Mapping

import numpy as np

from core.errors import LinearizerError
from core.general.linearizer import PART_ORDER, PART_VARIABLES, Linearizer

__all__ = ["from_sympy", "SympyLinearizer"]

BACKENDS = ("python", "numba")
#: Value given to a coordinate, speed or input that the op_point leaves out because no part of
#: the general form depends on it (it is read by no generated function, so it cannot matter).
UNUSED_PLACEHOLDER = 0.0
_source_counter = itertools.count()


def _import_sympy():
    try:
        import sympy
        import sympy.physics.mechanics  # noqa: F401
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("core.from_sympy needs SymPy: install the optional extra with "
                          "`pip install 'mechnode[sympy]'`") from error
    return sympy


def from_sympy(method, *to_linearizer_args, backend: str = "python",
               **to_linearizer_kwargs) -> "SympyLinearizer":
    """Build a compiled linearizer from a SymPy ``KanesMethod`` or ``LagrangesMethod``.

    Parameters
    ----------
    method : a ``KanesMethod`` (after ``kanes_equations``), a ``LagrangesMethod`` (after
        ``form_lagranges_equations``), or a ``sympy.physics.mechanics.Linearizer`` itself.
    backend : ``"python"`` or ``"numba"``. ``"python"`` compiles nothing: the generated
        functions are plain Python (+ ``math``) and the per-point algebra of the numeric
        Linearizer uses numpy (its ``kernels="numpy"``), so the first ``linearize`` costs about
        what the next ones do. ``"numba"`` compiles, while building, the generated functions with
        ``numba.njit`` and uses the Linearizer's compiled kernels (``numba.njit(cache=True)``:
        compiled once per numba cache, seconds, then loaded): slower to build, faster per
        operating point on large systems.
    *to_linearizer_args, **to_linearizer_kwargs : passed unchanged to ``method.to_linearizer``;
        SymPy 1.14 accepts ``linear_solver`` for both methods and ``q_ind, qd_ind, q_dep,
        qd_dep`` (in that positional order) for ``LagrangesMethod``.
    """
    sympy = _import_sympy()
    from sympy.physics.mechanics import Linearizer as SymPyLinearizerClass

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if isinstance(method, SymPyLinearizerClass):
        if to_linearizer_args or to_linearizer_kwargs:
            raise TypeError("to_linearizer arguments were given with a SymPy Linearizer, which "
                            "is used as it is")
        sympy_linearizer = method
    elif hasattr(method, "to_linearizer"):
        sympy_linearizer = method.to_linearizer(*to_linearizer_args, **to_linearizer_kwargs)
    else:
        raise TypeError("from_sympy needs a KanesMethod, LagrangesMethod or SymPy Linearizer, "
                        f"got {type(method).__name__}")
    return SympyLinearizer(sympy_linearizer, backend=backend, _sympy=sympy)


class SympyLinearizer:
    """Numeric counterpart of a ``sympy.physics.mechanics.Linearizer``.

    Attributes
    ----------
    q, u, q_i, q_d, u_i, u_d, r, lams : the SymPy matrices of the source linearizer, in SymPy's
        notation (``u`` generalized speeds, ``r`` inputs); the state is ``[q_i, u_i]``, the
        columns of ``M`` are ``[q', u', lams]`` in ``q``/``u`` order.
    params : tuple of the parameter symbols (every free symbol other than time).
    needed_by : dict symbol -> names of the parts of the general form that depend on it, for the
        coordinates, speeds, their rates, inputs, multipliers and parameters that some part
        depends on; a coordinate, speed or input not in it may be left out of an op_point.
    linearizer : the numeric :class:`core.general.linearizer.Linearizer` doing the work, in mechnode's
        notation: its speeds ``v`` are SymPy's ``u`` and its inputs ``u`` are SymPy's ``r``.
    perm_mat : numpy version of SymPy's ``perm_mat``.
    build_seconds : time spent generating (and compiling) the functions.
    sources : generated Python source of each part.
    """

    def __init__(self, sympy_linearizer, backend: str = "python", _sympy=None):
        sympy = _sympy or _import_sympy()
        started = time.perf_counter()
        lin = sympy_linearizer
        self.sympy_linearizer = lin
        self.backend = backend
        for name in ("q", "u", "q_i", "q_d", "u_i", "u_d", "r", "lams"):
            setattr(self, name, getattr(lin, name))
        self._symbols = _SystemSymbols(sympy, lin)
        self.params = self._symbols.params
        self.needed_by = self._symbols.needed_by
        self.sources: dict = {}
        functions = {name: self._build_part(sympy, name) for name in PART_ORDER}
        # SymPy's speeds lin.u are our v, SymPy's inputs lin.r are our u.
        q, v = list(lin.q), list(lin.u)
        #: the numeric Linearizer's arguments other than its functions (kept for pickling)
        self._layout = dict(n_q=len(q), n_v=len(v),
                            q_ind=[q.index(x) for x in lin.q_i], q_dep=[q.index(x) for x in lin.q_d],
                            v_ind=[v.index(x) for x in lin.u_i], v_dep=[v.index(x) for x in lin.u_d],
                            n_u=len(lin.r), n_lam=len(lin.lams), n_p=len(self.params),
                            kernels="numba" if backend == "numba" else "numpy")
        self._finish(functions)
        self.build_seconds = time.perf_counter() - started

    def _finish(self, functions):
        """The numeric Linearizer of the generated ``functions`` (and, with numba, compiled now)."""
        self.linearizer = Linearizer(**functions, **self._layout)
        self.perm_mat = self.linearizer.perm_mat
        if self.backend == "numba":
            self._warm_up()

    def __reduce__(self):
        """It pickles by its description: the generated source of each part, the symbols and the
        layout; unpickling compiles the sources again (with ``backend="numba"``, numba compiles
        them too), without SymPy's derivation. The SymPy linearizer itself is left out (it holds
        its linear solver as a lambda): ``sympy_linearizer`` is None after the trip."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("sympy_linearizer", "linearizer", "perm_mat")}
        return (_rebuild, (type(self), state))

    def linearize(self, op_point=None, A_and_B: bool = False, simplify: bool = False):
        """Like SymPy's ``Linearizer.linearize``, with a numeric operating point.

        ``op_point`` is a dict or an iterable of dicts mapping coordinates, speeds, their time
        derivatives, inputs, multipliers and parameter symbols to numbers (or to expressions of
        other entries); coordinates, speeds and inputs that no part depends on may be left out
        (see the module docstring). Returns numpy arrays
        ``(M, A, B)`` of ``M [q'; u'; lams] = A [q_i; u_i] + B r`` or, with ``A_and_B=True``,
        ``(A, B)`` of ``[q_i'; u_i'] = A [q_i; u_i] + B r`` (SymPy's notation: ``u`` speeds,
        ``r`` inputs). ``simplify`` is ignored.
        """
        return self.linearizer.linearize(self._numeric_point(op_point), A_and_B=A_and_B)

    def complete_op_point(self, op_point=None) -> dict:
        """The operating point with the solved rates of the coordinates and speeds (SymPy's
        ``q'``, ``u'``) and multipliers, symbol -> float."""
        point = self.linearizer.complete_op_point(self._numeric_point(op_point))
        return self._symbols.to_symbols(point)

    # ------------------------------------------------------------------ internals
    def _build_part(self, sympy, name):
        value = self._symbols.part_expressions(name)
        if value is None:
            return None
        arguments = self._symbols.part_arguments(name)
        program = _ForwardProgram(sympy, value, [arguments[v] for v in PART_VARIABLES[name]])
        source = _function_source(name, arguments, self._symbols.p, program)
        self.sources[name] = source
        function = _compile_source(name, source)
        if self.backend == "numba":
            import numba
            function = numba.njit(function)
        return function

    def _warm_up(self):
        """Compile the numba functions now (part of the build cost) with a dummy point."""
        d = self.linearizer.dims
        point = {"q": np.ones(d.n), "qd": np.ones(d.n), "v": np.ones(d.o), "vd": np.ones(d.o),
                 "u": np.ones(d.s), "lam": np.ones(d.k), "t": 0.0, "p": np.ones(len(self.params))}
        for name, function in self.linearizer._parts.items():
            function(*[point[v] for v in PART_VARIABLES[name]], point["t"], point["p"])

    def _numeric_point(self, op_point):
        values = _numeric_values(_merge_op_points(op_point), self._symbols.time)
        return self._symbols.to_arrays(values)


class _SystemSymbols:
    """The symbols of a SymPy Linearizer and their plain-symbol replacements for code generation.

    Keyed in mechnode's notation (the op_point keys of :class:`core.general.linearizer.Linearizer`):
    ``"v"`` holds SymPy's speeds ``lin.u``, ``"vd"`` their rates and ``"u"`` SymPy's inputs
    ``lin.r``.
    """

    def __init__(self, sympy, lin):
        from sympy.physics.mechanics import dynamicsymbols, find_dynamicsymbols

        self.time = dynamicsymbols._t
        t = self.time
        self.expressions = {name: sympy.Matrix(getattr(lin, name)) for name in PART_ORDER}
        self.dynamic = {"q": list(lin.q), "v": list(lin.u), "u": list(lin.r),
                        "lam": list(lin.lams)}
        self.dynamic["qd"] = [x.diff(t) for x in lin.q]
        self.dynamic["vd"] = [x.diff(t) for x in lin.u]
        known = set().union(*self.dynamic.values())
        stray = set().union(*(find_dynamicsymbols(e, exclude=known)
                              for e in self.expressions.values()))
        if stray:
            raise LinearizerError(f"dynamic symbols {sorted(map(str, stray))} are neither "
                                  "coordinates, speeds, their derivatives, inputs nor multipliers")
        free = set().union(*(e.free_symbols for e in self.expressions.values())) - {t}
        self.params = tuple(sorted(free, key=sympy.default_sort_key))
        self._plain = {key: sympy.symbols(f"{key}_0:{len(items)}")
                       for key, items in self.dynamic.items()}
        self.p = sympy.symbols(f"p_0:{len(self.params)}")
        v_position = {x: i for i, x in enumerate(self.dynamic["v"])}
        # Where q' is also a speed (Lagrange's method, v = q'), q' is that speed: f_0 sees it as
        # q', while f_a and f_3 are differentiated with respect to it only as v (SymPy's _qd_dup).
        self.qd_is_v = [v_position.get(x) for x in self.dynamic["qd"]]
        replace = {}
        for key, items in self.dynamic.items():
            replace.update(zip(items, self._plain[key], strict=True))
        for j, i in enumerate(self.qd_is_v):
            if i is not None:
                replace[self.dynamic["qd"][j]] = self._plain["v"][i]
        replace.update(zip(self.params, self.p, strict=True))
        self.plain_expressions = {name: e.xreplace(replace) for name, e in self.expressions.items()}
        self.time_dependent = any(t in e.free_symbols for e in self.plain_expressions.values())
        self._check_part_dependencies()
        # The parts that read each coordinate, speed, input and parameter (free symbols of the
        # part's value; its Jacobians cannot depend on more). A coordinate, speed or input that
        # no part reads may be left out of an op_point: it enters no generated function, so its
        # placeholder (UNUSED_PLACEHOLDER) is inert.
        original = {plain: self.dynamic[key][i] for key, symbols in self._plain.items()
                    for i, plain in enumerate(symbols)}
        original.update(zip(self.p, self.params, strict=True))
        self.needed_by = {}
        for name in PART_ORDER:
            for plain in self.plain_expressions[name].free_symbols:
                symbol = original.get(plain)
                if symbol is not None:
                    self.needed_by.setdefault(symbol, []).append(name)

    def part_expressions(self, name):
        expressions = self.plain_expressions[name]
        if expressions.rows == 0 or expressions.is_zero_matrix:
            return None
        return expressions

    def part_arguments(self, name):
        arguments = {key: list(self._plain[key]) for key in PART_VARIABLES[name]}
        if "qd" in arguments:
            for j, i in enumerate(self.qd_is_v):
                if i is not None:
                    arguments["qd"][j] = (self._plain["v"][i] if name == "f_0"
                                          else self._plain["qd"][j])
        return arguments

    def _check_part_dependencies(self):
        for name in PART_ORDER:
            arguments = self.part_arguments(name)
            allowed = set().union(*map(set, arguments.values()), self.p, {self.time})
            extra = self.plain_expressions[name].free_symbols - allowed
            if extra:
                names = sorted(str(self._original(s)) for s in extra)
                form = f"{name}({', '.join(PART_VARIABLES[name])}, t) (v: speeds, u: inputs)"
                raise LinearizerError(f"{name} depends on {names}, which the general form "
                                      f"{form} does not allow")

    def _original(self, plain):
        for key, symbols in self._plain.items():
            if plain in symbols:
                return self.dynamic[key][symbols.index(plain)]
        return plain

    def to_arrays(self, values):
        """op_point values (symbol -> float) to the arrays of the numeric Linearizer."""
        arrays, missing = {}, []
        for key, symbols in self.dynamic.items():
            optional = key in ("qd", "vd", "lam")
            # a coordinate, speed or input that no part reads gets an inert placeholder
            default = math.nan if optional else UNUSED_PLACEHOLDER
            arrays[key] = np.array([values.get(x, default) for x in symbols])
            if not optional:
                missing += [x for x in symbols if x not in values and x in self.needed_by]
        for j, i in enumerate(self.qd_is_v):
            if i is not None:
                arrays["qd"][j] = arrays["v"][i]
        arrays["p"] = np.array([values.get(x, math.nan) for x in self.params])
        missing += [x for x in self.params if x not in values]
        if missing:
            lacking = ", ".join(f"{x} (needed by {', '.join(self.needed_by[x])})" for x in missing)
            raise LinearizerError(
                f"op_point lacks values for {lacking}; "
                "coordinates, speeds, inputs and parameters that a part of the general form "
                "depends on must be given (the time derivatives of coordinates and speeds, and "
                "the multipliers, may be omitted)")
        if self.time_dependent and self.time not in values:
            raise LinearizerError("the equations depend on time explicitly: op_point needs "
                                  f"a value for {self.time}")
        arrays["t"] = values.get(self.time, 0.0)
        return arrays

    def to_symbols(self, point):
        """Arrays of a completed numeric point back to a dict symbol -> float."""
        result = {}
        for key, symbols in self.dynamic.items():
            result.update(zip(symbols, map(float, point[key]), strict=True))
        result.update(zip(self.params, map(float, point["p"]), strict=True))
        if self.time_dependent:
            result[self.time] = point["t"]
        return result


# ---------------------------------------------------------------------- op_point handling
def _merge_op_points(op_point):
    if op_point is None:
        return {}
    if isinstance(op_point, Mapping):
        return dict(op_point)
    if isinstance(op_point, Iterable):
        merged = {}
        for item in op_point:
            if not isinstance(item, Mapping):
                raise TypeError(f"op_point must be a dict or an iterable of dicts; found "
                                f"{type(item).__name__}")
            merged.update(item)
        return merged
    raise TypeError("op_point must be a dict or an iterable of dicts, got "
                    f"{type(op_point).__name__}")


def _numeric_values(merged, time):
    """Convert op_point values to floats; values that are expressions of other entries are
    evaluated once those entries are known (as in SymPy's own tests)."""
    numeric, symbolic = {}, {}
    for key, value in merged.items():
        try:
            numeric[key] = float(value)
        except (TypeError, ValueError):
            symbolic[key] = value
    while symbolic:
        resolved = {}
        for key, value in symbolic.items():
            number = _evaluate_expression(value, numeric, time)
            if number is not None:
                resolved[key] = number
        if not resolved:
            unresolved = ", ".join(f"{key} = {value}" for key, value in symbolic.items())
            raise LinearizerError(f"op_point values not evaluable to numbers: {unresolved}")
        numeric.update(resolved)
        for key in resolved:
            del symbolic[key]
    return numeric


def _evaluate_expression(value, numeric, time):
    from sympy import Float, sympify
    from sympy.physics.mechanics import find_dynamicsymbols

    expression = sympify(value)
    needed = find_dynamicsymbols(expression) | (expression.free_symbols - {time})
    if not all(x in numeric for x in needed):
        return None
    needed |= {time} & set(numeric)
    try:
        return float(expression.xreplace({x: Float(numeric[x]) for x in needed}))
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------- code generation
class _ForwardProgram:
    """Straight-line program computing a column ``value`` and its Jacobians.

    The value is reduced by common-subexpression elimination first; the Jacobians are then
    formed by the chain rule through the temporaries (forward-mode differentiation of the
    program). This avoids SymPy differentiating the expanded expression trees, whose cost grows
    quickly with their size (minutes for the bicycle), and shares work between value and
    Jacobians.

    Attributes: ``steps`` - list of ``(symbol, expression)`` assignments in order;
    ``outputs`` - for the value and each Jacobian, ``(shape, [(index, expression), ...])`` with
    zero entries left out.
    """

    def __init__(self, sympy, value, variable_groups):
        self._sympy = sympy
        self._names = sympy.numbered_symbols("_d")
        temporaries, reduced = sympy.cse(list(value), order="none",
                                         symbols=sympy.numbered_symbols("_x"))
        self.steps = []
        self._tangents = {v: {v: sympy.S.One} for group in variable_groups for v in group}
        for symbol, expression in temporaries:
            self.steps.append((symbol, expression))
            tangent = {v: self._named(d) for v, d in self._tangent(expression).items()}
            if tangent:
                self._tangents[symbol] = tangent
        rows = len(reduced)
        self.outputs = [((rows,), [(i, e) for i, e in enumerate(reduced) if e != 0])]
        tangents = [self._tangent(e) for e in reduced]
        for group in variable_groups:
            entries = [((i, j), tangent[v]) for i, tangent in enumerate(tangents)
                       for j, v in enumerate(group) if v in tangent]
            self.outputs.append(((rows, len(group)), entries))

    def _tangent(self, expression):
        """{variable: d expression / d variable} by the chain rule over known tangents."""
        total = {}
        for symbol in sorted(expression.free_symbols, key=str):
            seeds = self._tangents.get(symbol)
            if not seeds:
                continue
            partial = expression.diff(symbol)
            if partial == 0:
                continue
            if len(seeds) > 1:
                partial = self._named(partial)
            for variable, seed in seeds.items():
                total[variable] = total.get(variable, 0) + partial * seed
        return {v: d for v, d in total.items() if d != 0}

    def _named(self, expression):
        if expression.is_Atom:
            return expression
        symbol = next(self._names)
        self.steps.append((symbol, expression))
        return symbol


def _function_source(name, arguments, params, program):
    """Python source of ``name(<vector args>, t, p)`` returning the arrays of ``program``."""
    from sympy.printing.pycode import PythonCodePrinter

    printer = PythonCodePrinter({"fully_qualified_modules": True, "standard": "python3"})
    expressions = [e for _, e in program.steps] + [e for _, out in program.outputs for _, e in out]
    used = set().union(*(e.free_symbols for e in expressions))
    vectors = list(arguments.items()) + [("p", list(params))]
    lines = [f"def {name}({', '.join(list(arguments) + ['t', 'p'])}):"]
    for vector_name, symbols in vectors:
        lines += [f"    {s} = {vector_name}[{i}]" for i, s in enumerate(symbols) if s in used]
    lines += [f"    {symbol} = {printer.doprint(e)}" for symbol, e in program.steps]
    for k, (shape, entries) in enumerate(program.outputs):
        lines.append(f"    out{k} = np.zeros({shape[0] if len(shape) == 1 else shape})")
        for index, e in entries:
            target = f"out{k}[{index}]" if k == 0 else f"out{k}[{index[0]}, {index[1]}]"
            lines.append(f"    {target} = {printer.doprint(e)}")
    lines.append(f"    return {', '.join(f'out{k}' for k in range(len(program.outputs)))}")
    return "\n".join(lines) + "\n"


def _rebuild(cls, state):
    """A SympyLinearizer from its pickled description (:meth:`SympyLinearizer.__reduce__`)."""
    self = cls.__new__(cls)
    self.__dict__.update(state)
    self.sympy_linearizer = None
    functions = {name: _compile_source(name, source) for name, source in self.sources.items()}
    if self.backend == "numba":
        import numba
        functions = {name: numba.njit(f) for name, f in functions.items()}
    self._finish(functions)
    return self


def _compile_source(name, source):
    filename = f"<mechnode-sympy-{name}-{next(_source_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"math": math, "np": np}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]
