"""General-form linearizer for equations of motion that come from elsewhere.

The system is written in the general form of Peterson, Gede & Hubbard (Multibody Syst. Dyn. 33,
2015), extended by Crist (2014) with ``v`` in ``f_2`` and Lagrange multipliers in ``f_4``:

    f_c(q, t)                                   = 0      l rows   configuration constraints
    f_v(q, v, t)                                = 0      m rows   velocity constraints
    f_a(q, qd, v, vd, t)                        = 0      m rows   acceleration constraints
    f_0(q, qd, t) + f_1(q, v, t)                = 0      n rows   kinematic differential equations
    f_2(q, v, vd, t) + f_3(q, qd, v, u, t)
                     + f_4(q, lam, t)           = 0  o-m+k rows   dynamic differential equations

with coordinates ``q`` (n), their rates ``qd`` (n), generalized speeds ``v`` (o), their rates
``vd`` (o), inputs ``u`` (s) and multipliers ``lam`` (k). For Kane's method ``k = 0``; for
Lagrange's method ``v = qd`` and ``k = m``. As in the references, ``f_0`` must be linear in
``qd``, ``f_a`` and ``f_2`` linear in ``vd`` and ``f_4`` linear in ``lam`` (used only to complete
an operating point).

Notation: the references and SymPy's ``Linearizer`` call the generalized speeds ``u`` and the
inputs ``r``. Here, as everywhere in mechnode, ``u`` are the inputs (forces/torques) and the
generalized speeds are ``v`` (as Pinocchio's ``v``), their rates ``vd``. The dimension letters
``Dimensions(l, m, n, o, s, k)`` are the references': ``o`` is the number of speeds ``v`` and
``s`` the number of inputs ``u``.

Ordering (the same as SymPy's ``Linearizer``)
---------------------------------------------
``q`` and ``v`` keep the order in which the callables see them. ``q_ind``/``q_dep`` and
``v_ind``/``v_dep`` are integer indices into ``q`` and ``v`` that choose the independent and
dependent entries (``len(q_dep) = l``, ``len(v_dep) = m``); the independent state is
``x = [q[q_ind], v[v_ind]]`` in the order of those index lists. By default the dependent entries
are the last ``l`` (``m``) ones, i.e. ``q = [q_i, q_d]`` and ``v = [v_i, v_d]``.

Result (``linearize``)
----------------------
``M (n+o+k, n+o+k)``, ``A (n+o+k, n-l+o-m)``, ``B (n+o+k, s)`` of

    M [dqd; dvd; dlam] = A [dq_i; dv_i] + B du

where ``dqd``, ``dvd`` hold all ``n`` and ``o`` rates in the original ``q``/``v`` order and the rows
are [kinematic (n); acceleration constraints (m); dynamics (o-m+k)]. With ``A_and_B=True`` the
explicit state-space matrices of ``x' = A x + B du`` are returned instead: ``M`` is inverted and
only the rows of the independent rates ``[q_i', v_i']`` are kept (``perm_mat.T @ solve(M, .)``).

Callables
---------
Each part ``f_*`` is one callable returning its value and its Jacobians, all numpy arrays::

    f_c(q, t, p)             -> (f_c, df_c/dq)
    f_v(q, v, t, p)          -> (f_v, df_v/dq, df_v/dv)
    f_a(q, qd, v, vd, t, p)  -> (f_a, df_a/dq, df_a/dqd, df_a/dv, df_a/dvd)
    f_0(q, qd, t, p)         -> (f_0, df_0/dq, df_0/dqd)
    f_1(q, v, t, p)          -> (f_1, df_1/dq, df_1/dv)
    f_2(q, v, vd, t, p)      -> (f_2, df_2/dq, df_2/dv, df_2/dvd)
    f_3(q, qd, v, u, t, p)   -> (f_3, df_3/dq, df_3/dqd, df_3/dv, df_3/du)
    f_4(q, lam, t, p)        -> (f_4, df_4/dq, df_4/dlam)

i.e. the Jacobians come in the order of the vector arguments. Vector arguments are contiguous 1-D
float64 arrays, ``t`` is a float and ``p`` a 1-D float64 array of parameters passed through
untouched. The value has shape ``(rows,)`` and a Jacobian ``(rows, len(variable))``; returning
C-contiguous float64 arrays avoids extra compilations of the (numba) assembly kernel. Numba
``@njit`` functions returning a tuple of arrays work as they are. Instead of one callable a part
may be given as a sequence ``(value_fn, jac_fn_1, ...)`` of callables with that same signature.
A part that is not given is identically zero. When ``qd`` and ``v`` are the same quantities
(Lagrange's method, ``v = qd``), write ``f_a`` and ``f_3`` in terms of ``v`` and return zero
``d/dqd`` blocks for them, as SymPy's ``Linearizer`` does (the kinematic rows ``qd - v = 0`` tie
the two together).

Operating point
---------------
A mapping with the keys ``OP_POINT_KEYS = ("q", "qd", "v", "vd", "u", "lam", "t", "p")``.
SymPy's names are refused with a LinearizerError that gives the new ones: ``"r"`` (inputs, now
``"u"``) and ``"ud"`` (rates of the speeds, now ``"vd"``). ``M`` is the Jacobian of [kinematic;
acceleration constraints; dynamics] with respect to ``[qd, vd, lam]``, so rates and multipliers
missing from an operating point are found by Newton steps with ``M`` (one step is exact under the
linearity above). This replaces the manual multiplier step of Crist's post and SymPy's
``LagrangesMethod.solve_multipliers``.
"""
from __future__ import annotations

import math
import reprlib
from collections import namedtuple
from collections.abc import Mapping, Sequence

import numpy as np

from core.base.jit import njit
from core.errors import LinearizerError, SingularMatrixError

__all__ = ["Linearizer", "LinearizerError", "SingularMatrixError", "Dimensions", "PART_VARIABLES"]

#: For each part, the vector arguments it takes (before ``t, p``) = the variables of its Jacobians.
PART_VARIABLES = {
    "f_c": ("q",),
    "f_v": ("q", "v"),
    "f_a": ("q", "qd", "v", "vd"),
    "f_0": ("q", "qd"),
    "f_1": ("q", "v"),
    "f_2": ("q", "v", "vd"),
    "f_3": ("q", "qd", "v", "u"),
    "f_4": ("q", "lam"),
}
PART_ORDER = ("f_c", "f_v", "f_a", "f_0", "f_1", "f_2", "f_3", "f_4")
OP_POINT_KEYS = ("q", "qd", "v", "vd", "u", "lam", "t", "p")
_KEY_SET = frozenset(OP_POINT_KEYS)
#: Keys in SymPy's notation that are refused, with what they are called here.
_RENAMED_KEYS = {
    "r": "inputs are 'u' and generalized speeds are 'v' (SymPy's r and u)",
    "ud": "rates of the generalized speeds are 'vd' and generalized speeds are 'v' "
          "(SymPy's u' and u); 'u' are the inputs",
}
#: What a required op_point entry is, for the message when it is missing.
_MEANING = {"q": "", "v": ": the generalized speeds (SymPy's u)", "u": ": the inputs (SymPy's r)"}
#: A row-equilibrated matrix whose reciprocal 1-norm condition number is smaller is singular.
RCOND_MIN = 1e-13
NEWTON_MAX_ITERATIONS = 20
NEWTON_TOLERANCE = 1e-12

Dimensions = namedtuple("Dimensions", ["l", "m", "n", "o", "s", "k"])

_FC_NAME = "df_c/dq_dep (dependent coordinates)"
_FV_NAME = "df_v/dv_dep (dependent speeds)"


class Linearizer:
    """Linearize ``M [dqd; dvd; dlam] = A [dq_i; dv_i] + B du`` about numeric operating points.

    ``v`` are the generalized speeds and ``u`` the inputs (SymPy's and Crist's ``u`` and ``r``).

    Parameters
    ----------
    n_q, n_v : number of coordinates ``q`` and generalized speeds ``v``.
    f_c, f_v, f_a, f_0, f_1, f_2, f_3, f_4 : the parts of the general form (see module docstring);
        omitted parts are zero. ``f_c`` and ``f_v`` are required when ``q_dep``/``v_dep`` are given.
    q_dep, v_dep : indices of the dependent coordinates / speeds (``l`` and ``m`` of them).
    q_ind, v_ind : indices of the independent ones, in the order wanted in the state; default:
        all the others in ascending order.
    n_u : number of inputs ``u``; n_lam : number of multipliers ``lam``.
    n_p : number of parameters ``p``; ``None`` means not checked.
    kernels : ``"numba"`` (default) or ``"numpy"``: how the small dense algebra of each point
        (assembling ``M, A, B``, the constraint and mass-matrix solves) is done. ``"numba"``
        uses kernels of this module compiled with ``numba.njit(cache=True)`` (``_linear_model_kernel``
        and ``_solve_rows`` with the helpers they call): fastest per point, but their first use
        with an empty numba cache compiles them (seconds; later processes load them from the
        cache in well under a second). ``"numpy"`` does the same algebra with numpy (same
        results to rounding, same singularity checks) and compiles nothing, at numpy's per-call
        overhead: about 0.1-0.25 ms more per point (measured with from_sympy's generated
        functions: rolling disc 170 us vs 64 us, bicycle 1.09 ms vs 0.89 ms).

    Attributes
    ----------
    dims : ``Dimensions(l, m, n, o, s, k)`` as in the references: ``o = n_v`` speeds ``v``,
        ``s = n_u`` inputs ``u``.
    perm_mat : ``(n+o+k, n-l+o-m)`` 0/1 matrix with ``x = [q_i, v_i] = perm_mat.T @ [q; v; lam]``.
    state_rows : the rows of ``[qd; vd; lam]`` that form ``x'``.
    """

    def __init__(self, n_q: int, n_v: int, *, f_c=None, f_v=None, f_a=None, f_0=None,
                 f_1=None, f_2=None, f_3=None, f_4=None, q_dep: Sequence[int] = (),
                 v_dep: Sequence[int] = (), q_ind: Sequence[int] | None = None,
                 v_ind: Sequence[int] | None = None, n_u: int = 0, n_lam: int = 0,
                 n_p: int | None = None, kernels: str = "numba"):
        if kernels not in KERNELS:
            raise LinearizerError(f"kernels must be one of {tuple(KERNELS)}, got {kernels!r}")
        #: the arguments it was made with: it pickles as them (see __reduce__)
        self._arguments = ((n_q, n_v), dict(f_c=f_c, f_v=f_v, f_a=f_a, f_0=f_0, f_1=f_1, f_2=f_2, f_3=f_3,
                                            f_4=f_4, q_dep=q_dep, v_dep=v_dep, q_ind=q_ind, v_ind=v_ind,
                                            n_u=n_u, n_lam=n_lam, n_p=n_p, kernels=kernels))
        self.kernels = kernels
        self._solve_rows, self._linear_model_kernel = KERNELS[kernels]
        self.q_ind, self.q_dep = _partition("q", n_q, q_ind, q_dep)
        self.v_ind, self.v_dep = _partition("v", n_v, v_ind, v_dep)
        l, m = len(self.q_dep), len(self.v_dep)
        self.dims = Dimensions(l=l, m=m, n=int(n_q), o=int(n_v), s=int(n_u), k=int(n_lam))
        if n_v - m + self.dims.k < 0:
            raise LinearizerError(f"more dependent speeds than speeds plus multipliers: "
                                  f"o - m + k = {n_v - m + self.dims.k} < 0")
        self.n_p = n_p
        given = dict(f_c=f_c, f_v=f_v, f_a=f_a, f_0=f_0, f_1=f_1, f_2=f_2, f_3=f_3, f_4=f_4)
        for name, needed in (("f_c", l), ("f_v", m)):
            if needed and given[name] is None:
                raise LinearizerError(f"{name} is required: {needed} dependent entries were chosen")
        self._parts = {name: _as_bundle(name, fn) for name, fn in given.items() if fn is not None}
        self._zero_parts = {name: self._zeros_of(name) for name in PART_ORDER
                            if name not in self._parts}
        self._shapes_checked = False
        self._calls = [(name, fn, PART_VARIABLES[name]) for name, fn in self._parts.items()]
        self.state_rows = np.concatenate([self.q_ind, n_q + self.v_ind])
        self.perm_mat = np.eye(n_q + n_v + self.dims.k)[:, self.state_rows]
        d = self.dims
        self._op_point_layout = [("q", d.n, d.n > 0), ("qd", d.n, False), ("v", d.o, d.o > 0),
                                 ("vd", d.o, False), ("u", d.s, d.s > 0), ("lam", d.k, False),
                                 ("p", n_p, False)]

    def __reduce__(self):
        """A Linearizer pickles as the arguments it was made with and is built anew on
        unpickling: its functions must pickle (functions defined at a module's top level, or
        numba ``@njit`` ones there, do; a lambda or a closure does not, and pickle says so)."""
        args, kwargs = self._arguments
        return (_rebuild, (type(self), args, kwargs))

    # ------------------------------------------------------------------ public API
    def linearize(self, op_point: Mapping, A_and_B: bool = False):
        """Return ``(M, A, B)`` or, with ``A_and_B=True``, the state-space ``(A, B)``.

        ``op_point`` maps ``"q"``, ``"v"`` (generalized speeds, required), ``"u"`` (inputs,
        required when there are inputs), ``"qd"``, ``"vd"``, ``"lam"``, ``"t"`` (default 0) and
        ``"p"`` (default empty) to numbers. SymPy's keys ``"r"`` and ``"ud"`` are refused.
        Rates and multipliers that are omitted or NaN are solved from the equations, see
        :meth:`complete_op_point`.
        """
        point, parts = self._completed(op_point)
        M, A, B, A_ss, B_ss = self._linear_model(parts, A_and_B)
        return (A_ss, B_ss) if A_and_B else (M, A, B)

    def complete_op_point(self, op_point: Mapping) -> dict:
        """Return the operating point with every key, missing rates and multipliers solved.

        ``qd``, ``vd`` and ``lam`` entries that are omitted (or NaN) are computed at the given
        ``q, v, u, t, p`` from the kinematic equations (``qd``) and jointly from the acceleration
        constraints and dynamics (``vd`` and ``lam``, as SymPy's ``solve_multipliers`` does);
        entries that are given are kept as given.
        """
        return self._completed(op_point)[0]

    def residuals(self, op_point: Mapping) -> dict:
        """Residuals of all equations at the completed operating point (name -> 1-D array)."""
        values = {name: out[0] for name, out in self._completed(op_point)[1].items()}
        return {"f_c": values["f_c"], "f_v": values["f_v"], "f_a": values["f_a"],
                "kinematic": values["f_0"] + values["f_1"],
                "dynamic": values["f_2"] + values["f_3"] + values["f_4"]}

    def state_space(self, M, A, B):
        """``(perm_mat.T @ M^-1 A, perm_mat.T @ M^-1 B)``: the rows of ``[q_i', v_i']``."""
        n_a = A.shape[1]
        solved = _checked_solve(M, np.concatenate((A, B), axis=1), M, "mass matrix M",
                                self._solve_rows)
        rows = self.state_rows
        return solved[rows, :n_a], solved[rows, n_a:]

    # ------------------------------------------------------------------ operating point
    def _completed(self, op_point):
        point = self._parse(op_point)
        n = self.dims.n
        rates = np.concatenate([point["qd"], point["vd"], point["lam"]])
        missing = np.isnan(rates)
        if not missing.any():
            return point, self._evaluate(point)
        # M is block lower triangular, so the qd block and the (vd, lam) block can be solved
        # separately; a block is solved whenever one of its entries is missing.
        blocks = np.zeros(rates.size, dtype=np.bool_)
        blocks[:n] = missing[:n].any()
        blocks[n:] = missing[n:].any()
        trial = np.where(missing, 0.0, rates)
        for _ in range(NEWTON_MAX_ITERATIONS):
            self._split_rates(point, trial)
            parts = self._evaluate(point)
            step = self._newton_step(parts, blocks)
            unknown_step = np.abs(step[missing[blocks]]).max()
            if unknown_step <= NEWTON_TOLERANCE * (1.0 + np.abs(trial[missing]).max()):
                return point, parts
            trial[blocks] -= step
            trial[~missing] = rates[~missing]
        raise LinearizerError(
            "could not solve the missing qd/vd/lam of the operating point: the given entries "
            "are inconsistent with the equations or the equations are not linear in them")

    def _split_rates(self, point, rates):
        n, o = self.dims.n, self.dims.o
        point["qd"] = rates[:n].copy()
        point["vd"] = rates[n:n + o].copy()
        point["lam"] = rates[n + o:].copy()

    def _parse(self, op_point):
        if not isinstance(op_point, Mapping):
            raise LinearizerError(f"op_point must be a mapping with keys {OP_POINT_KEYS}, "
                                  f"got {type(op_point).__name__}")
        for key, renamed in _RENAMED_KEYS.items():
            if key in op_point:
                raise LinearizerError(f"op_point key '{key}' (value {_short(op_point[key])}) is "
                                      f"not known: {renamed}")
        if not _KEY_SET.issuperset(op_point):
            unknown = sorted(map(str, set(op_point) - _KEY_SET))
            raise LinearizerError(f"unknown op_point keys {unknown}; allowed: {OP_POINT_KEYS}")
        point = {}
        for key, size, required in self._op_point_layout:
            value = op_point.get(key)
            if value is not None:
                point[key] = _vector(key, value, size)
            elif required:
                raise LinearizerError(f"op_point lacks '{key}' ({size} values){_MEANING[key]}")
            else:
                point[key] = np.zeros(size or 0) if key == "p" else np.full(size, np.nan)
        given = np.concatenate((point["q"], point["v"], point["u"], point["p"]))
        if not np.isfinite(given).all():
            raise LinearizerError("op_point 'q', 'v', 'u' and 'p' must be finite")
        point["t"] = float(op_point.get("t", 0.0))
        return point

    # ------------------------------------------------------------------ evaluation
    def _zeros_of(self, name):
        rows, sizes = self._rows(name), self._variable_sizes()
        return (np.zeros(rows),) + tuple(np.zeros((rows, sizes[v])) for v in PART_VARIABLES[name])

    def _rows(self, name):
        l, m, n, o, s, k = self.dims
        return {"f_c": l, "f_v": m, "f_a": m, "f_0": n, "f_1": n}.get(name, o - m + k)

    def _variable_sizes(self):
        l, m, n, o, s, k = self.dims
        return {"q": n, "qd": n, "v": o, "vd": o, "u": s, "lam": k}

    def _evaluate(self, point):
        t, p = point["t"], point["p"]
        parts = self._zero_parts.copy()
        for name, fn, variables in self._calls:
            parts[name] = fn(*[point[v] for v in variables], t, p)
        if not self._shapes_checked:
            self._check_outputs(parts)
        return parts

    def _check_outputs(self, parts):
        sizes = self._variable_sizes()
        for name in self._parts:
            out, rows, variables = parts[name], self._rows(name), PART_VARIABLES[name]
            if not isinstance(out, tuple):
                raise LinearizerError(f"{name} returned a {type(out).__name__}; expected a tuple "
                                      f"(value, d/d{', d/d'.join(variables)})")
            if len(out) != 1 + len(variables):
                raise LinearizerError(f"{name} returned {len(out)} arrays; expected "
                                      f"{1 + len(variables)}: value, d/d{', d/d'.join(variables)}")
            expected = [(rows,)] + [(rows, sizes[v]) for v in variables]
            labels = ["value"] + [f"d{name}/d{v}" for v in variables]
            for label, array, shape in zip(labels, out, expected, strict=True):
                if not isinstance(array, np.ndarray) or array.shape != shape:
                    raise LinearizerError(f"{name} returned {label} of shape {np.shape(array)}; "
                                          f"expected {shape}")
        self._shapes_checked = True

    def _newton_step(self, parts, blocks):
        """Newton step for the rates/multipliers selected by ``blocks`` (residual R, Jacobian M)."""
        n = self.dims.n
        f_0, f_1, f_2, f_3, f_4, f_a = (parts[x] for x in
                                        ("f_0", "f_1", "f_2", "f_3", "f_4", "f_a"))
        residual = np.concatenate((f_0[0] + f_1[0], f_a[0], f_2[0] + f_3[0] + f_4[0]))[blocks]
        jacobian = self._mass_matrix(parts)[np.ix_(blocks, blocks)]
        what = _newton_matrix_name(blocks[:n].any(), blocks[n:].any())
        return _checked_solve(jacobian, residual, jacobian, what, self._solve_rows)

    def _mass_matrix(self, parts):
        l, m, n, o, s, k = self.dims
        M = np.zeros((n + o + k, n + o + k))
        M[:n, :n] = parts["f_0"][2]
        M[n:n + m, :n] = parts["f_a"][2]
        M[n:n + m, n:n + o] = parts["f_a"][4]
        M[n + m:, :n] = parts["f_3"][2]
        M[n + m:, n:n + o] = parts["f_2"][3]
        M[n + m:, n + o:] = parts["f_4"][2]
        return M

    def _linear_model(self, parts, with_state_space):
        """M, A, B (and the state-space A, B if asked) in one kernel call."""
        f_0, f_1, f_2, f_3 = parts["f_0"], parts["f_1"], parts["f_2"], parts["f_3"]
        f_4, f_a, f_c, f_v = parts["f_4"], parts["f_a"], parts["f_c"], parts["f_v"]
        M, A, B, A_ss, B_ss, rconds = self._linear_model_kernel(
            f_0[1], f_0[2], f_1[1], f_1[2], f_a[1], f_a[2], f_a[3], f_a[4], f_2[1], f_2[2],
            f_2[3], f_3[1], f_3[2], f_3[3], f_3[4], f_4[1], f_4[2], f_c[1], f_v[1], f_v[2],
            self.q_ind, self.q_dep, self.v_ind, self.v_dep, self.state_rows, with_state_space)
        _raise_if_singular(rconds[0], _FC_NAME)
        _raise_if_singular(rconds[1], _FV_NAME)
        if not math.isfinite(M.sum() + A.sum() + B.sum()):
            raise LinearizerError(f"non-finite values in {self._non_finite_outputs(parts)} "
                                  "at this operating point")
        _raise_if_singular(rconds[2], "mass matrix M")
        return M, A, B, A_ss, B_ss

    def _non_finite_outputs(self, parts):
        bad = []
        for name, out in parts.items():
            labels = ["value"] + [f"d/d{v}" for v in PART_VARIABLES[name]]
            bad += [f"{name} {lab}" for lab, arr in zip(labels, out, strict=True) if not np.isfinite(arr).all()]
        return ", ".join(bad) or "the constraint solution"


# ---------------------------------------------------------------------- Python helpers
def _partition(label, size, ind, dep):
    dep = np.asarray(dep, dtype=np.int64).reshape(-1)
    if ind is None:
        ind = np.setdiff1d(np.arange(size), dep)
    ind = np.asarray(ind, dtype=np.int64).reshape(-1)
    if sorted(np.concatenate([ind, dep]).tolist()) != list(range(size)):
        raise LinearizerError(f"{label}_ind {ind.tolist()} and {label}_dep {dep.tolist()} must "
                              f"partition the {size} indices of {label}")
    return ind, dep


def _rebuild(cls, args, kwargs):
    """``cls(*args, **kwargs)`` (unpickling: :meth:`Linearizer.__reduce__`)."""
    return cls(*args, **kwargs)


def _as_bundle(name, fn):
    if callable(fn):
        return fn
    expected = 1 + len(PART_VARIABLES[name])
    if isinstance(fn, Sequence) and len(fn) == expected and all(callable(f) for f in fn):
        functions = tuple(fn)
        return lambda *args: tuple(f(*args) for f in functions)
    raise LinearizerError(f"{name} must be a callable or a sequence of {expected} callables "
                          f"(value, d/d{', d/d'.join(PART_VARIABLES[name])})")


def _vector(key, value, size):
    if (type(value) is np.ndarray and value.dtype == np.float64 and value.ndim == 1
            and value.flags.c_contiguous):
        array = value
    else:
        array = np.ascontiguousarray(value, dtype=np.float64).reshape(-1)
    if size is not None and array.shape[0] != size:
        raise LinearizerError(f"op_point '{key}' has {array.size} values; expected {size}")
    return array


def _short(value):
    """A short text of an op_point value for error messages."""
    return reprlib.repr(value)


def _raise_if_singular(rcond, what):
    if not rcond >= RCOND_MIN:
        raise SingularMatrixError(
            f"{what} is singular at this operating point (reciprocal condition number "
            f"{rcond:.1e} after row scaling); choose other dependent coordinates/speeds or "
            "another operating point", matrix=what)


def _newton_matrix_name(solve_qd, solve_dyn):
    if solve_qd and solve_dyn:
        return "mass matrix M (solving the missing qd, vd, lam)"
    if solve_qd:
        return "kinematic matrix df_0/dqd (solving the missing qd)"
    return "matrix [df_a/dvd, 0; df_2/dvd, df_4/dlam] (solving the missing vd, lam)"


# ---------------------------------------------------------------------- small dense algebra
def _checked_solve(a, b, row_scale, what, solve_rows):
    """Solve ``a x = b`` with each row divided by the max-abs of that row of ``row_scale``.

    ``row_scale`` is ``a`` itself or the full Jacobian whose columns ``a`` was taken from. The
    matrix counts as singular (SingularMatrixError naming ``what``) when the reciprocal
    condition number ``1 / (|S row_scale|_1 |(S a)^-1|_1)`` is below RCOND_MIN, ``S`` being the
    row scaling: the conditioning of ``a`` relative to the size of its full rows.
    """
    if a.shape[0] == 0:
        return np.zeros(b.shape)
    b2 = b if b.ndim == 2 else b.reshape(-1, 1)
    x, rcond = solve_rows(np.ascontiguousarray(a), np.ascontiguousarray(b2),
                          np.ascontiguousarray(row_scale))
    _raise_if_singular(rcond, what)
    return x if b.ndim == 2 else x[:, 0]


@njit(cache=True)
def _solve_rows(a, b, row_scale):
    """Gaussian elimination with partial pivoting on ``[S a | S b | I]``, ``S`` = row scaling.

    Returns ``x`` and ``rcond = 1 / (|S row_scale|_1 |(S a)^-1|_1)`` (0 when a pivot or a row
    scale is exactly zero). Compiled: for these small systems numpy's per-call overhead
    (tens of microseconds per solve) would dominate the cost of an operating point.
    """
    n = a.shape[0]
    cols = b.shape[1]
    if n == 0:
        return np.zeros((0, cols)), 1.0
    width = n + cols + n
    work = np.zeros((n, width))
    column_sums = np.zeros(row_scale.shape[1])
    for i in range(n):
        scale = 0.0
        for j in range(row_scale.shape[1]):
            scale = max(scale, abs(row_scale[i, j]))
        if scale == 0.0:
            return np.zeros((n, cols)), 0.0
        for j in range(row_scale.shape[1]):
            column_sums[j] += abs(row_scale[i, j]) / scale
        for j in range(n):
            work[i, j] = a[i, j] / scale
        for c in range(cols):
            work[i, n + c] = b[i, c] / scale
        work[i, n + cols + i] = 1.0
    for j in range(n):
        p = j
        for i in range(j + 1, n):
            if abs(work[i, j]) > abs(work[p, j]):
                p = i
        if work[p, j] == 0.0:
            return np.zeros((n, cols)), 0.0
        if p != j:
            for c in range(j, width):
                work[j, c], work[p, c] = work[p, c], work[j, c]
        for i in range(j + 1, n):
            factor = work[i, j] / work[j, j]
            if factor != 0.0:
                for c in range(j + 1, width):
                    work[i, c] -= factor * work[j, c]
    solution = np.empty((n, cols + n))
    for i in range(n - 1, -1, -1):
        for c in range(cols + n):
            total = work[i, n + c]
            for j in range(i + 1, n):
                total -= work[i, j] * solution[j, c]
            solution[i, c] = total / work[i, i]
    inverse_norm = 0.0
    for c in range(n):
        total = 0.0
        for i in range(n):
            total += abs(solution[i, cols + c])
        inverse_norm = max(inverse_norm, total)
    return solution[:, :cols].copy(), 1.0 / (column_sums.max() * inverse_norm)


@njit(cache=True)
def _matmul_into(out, row0, col0, a, b, sign):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            aij = sign * a[i, j]
            if aij != 0.0:
                for c in range(b.shape[1]):
                    out[row0 + i, col0 + c] += aij * b[j, c]


@njit(cache=True)
def _copy_into(out, row0, col0, a, sign):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[row0 + i, col0 + j] += sign * a[i, j]


@njit(cache=True)
def _columns(a, index):
    out = np.empty((a.shape[0], index.size))
    for i in range(a.shape[0]):
        for j in range(index.size):
            out[i, j] = a[i, index[j]]
    return out


@njit(cache=True)
def _coefficients(fc_q, fv_q, fv_v, q_ind, q_dep, v_ind, v_dep):
    """C_0, C_1, C_2 of Peterson et al.: dq = C_0 dq_i and dv = C_1 dq + C_2 dv_i."""
    n, o = fc_q.shape[1], fv_v.shape[1]
    C_0 = np.zeros((n, q_ind.size))
    C_1 = np.zeros((o, n))
    C_2 = np.zeros((o, v_ind.size))
    for j in range(q_ind.size):
        C_0[q_ind[j], j] = 1.0
    for j in range(v_ind.size):
        C_2[v_ind[j], j] = 1.0
    rcond_c, rcond_v = 1.0, 1.0
    if q_dep.size:
        x, rcond_c = _solve_rows(_columns(fc_q, q_dep), _columns(fc_q, q_ind), fc_q)
        for a in range(q_dep.size):
            for j in range(q_ind.size):
                C_0[q_dep[a], j] = -x[a, j]
    if v_dep.size:
        rhs = np.empty((v_dep.size, n + v_ind.size))
        rhs[:, :n] = fv_q
        rhs[:, n:] = _columns(fv_v, v_ind)
        x, rcond_v = _solve_rows(_columns(fv_v, v_dep), rhs, fv_v)
        for a in range(v_dep.size):
            for j in range(n):
                C_1[v_dep[a], j] = -x[a, j]
            for j in range(v_ind.size):
                C_2[v_dep[a], j] = -x[a, n + j]
    return C_0, C_1, C_2, rcond_c, rcond_v


@njit(cache=True)
def _linear_model_kernel(f0_q, f0_qd, f1_q, f1_v, fa_q, fa_qd, fa_v, fa_vd, f2_q, f2_v, f2_vd,
                         f3_q, f3_qd, f3_v, f3_u, f4_q, f4_lam, fc_q, fv_q, fv_v,
                         q_ind, q_dep, v_ind, v_dep, state_rows, with_state_space):
    """Rows [kinematic n; f_a m; dynamics o-m+k] of

        M = [f_0_qd 0 0; f_a_qd f_a_vd 0; f_3_qd f_2_vd f_4_lam]
        A = [(A_q + A_v C_1) C_0, A_v C_2],  A_q = -d/dq, A_v = -d/dv of the same rows
        B = [0; 0; -f_3_u]
    exactly as SymPy's Linearizer.linearize builds them, and with ``with_state_space`` the rows
    ``state_rows`` of ``M^-1 A`` and ``M^-1 B``. ``rconds`` are those of df_c/dq_dep,
    df_v/dv_dep and M (1 when not needed).
    """
    n, o, m = f0_q.shape[1], f1_v.shape[1], fa_q.shape[0]
    k, s = f4_lam.shape[1], f3_u.shape[1]
    rows = n + o + k
    C_0, C_1, C_2, rcond_c, rcond_v = _coefficients(fc_q, fv_q, fv_v, q_ind, q_dep, v_ind, v_dep)
    A_q = np.zeros((rows, n))
    _copy_into(A_q, 0, 0, f0_q, -1.0)
    _copy_into(A_q, 0, 0, f1_q, -1.0)
    _copy_into(A_q, n, 0, fa_q, -1.0)
    _copy_into(A_q, n + m, 0, f2_q, -1.0)
    _copy_into(A_q, n + m, 0, f3_q, -1.0)
    _copy_into(A_q, n + m, 0, f4_q, -1.0)
    A_v = np.zeros((rows, o))
    _copy_into(A_v, 0, 0, f1_v, -1.0)
    _copy_into(A_v, n, 0, fa_v, -1.0)
    _copy_into(A_v, n + m, 0, f2_v, -1.0)
    _copy_into(A_v, n + m, 0, f3_v, -1.0)
    _matmul_into(A_q, 0, 0, A_v, C_1, 1.0)
    A = np.zeros((rows, C_0.shape[1] + C_2.shape[1]))
    _matmul_into(A, 0, 0, A_q, C_0, 1.0)
    _matmul_into(A, 0, C_0.shape[1], A_v, C_2, 1.0)
    B = np.zeros((rows, s))
    _copy_into(B, n + m, 0, f3_u, -1.0)
    M = np.zeros((rows, rows))
    _copy_into(M, 0, 0, f0_qd, 1.0)
    _copy_into(M, n, 0, fa_qd, 1.0)
    _copy_into(M, n, n, fa_vd, 1.0)
    _copy_into(M, n + m, 0, f3_qd, 1.0)
    _copy_into(M, n + m, n, f2_vd, 1.0)
    _copy_into(M, n + m, n + o, f4_lam, 1.0)
    A_ss = np.zeros((state_rows.size, A.shape[1]))
    B_ss = np.zeros((state_rows.size, s))
    rcond_m = 1.0
    if with_state_space:
        rhs = np.empty((rows, A.shape[1] + s))
        rhs[:, :A.shape[1]] = A
        rhs[:, A.shape[1]:] = B
        solved, rcond_m = _solve_rows(M, rhs, M)
        for i in range(state_rows.size):
            A_ss[i] = solved[state_rows[i], :A.shape[1]]
            B_ss[i] = solved[state_rows[i], A.shape[1]:]
    return M, A, B, A_ss, B_ss, np.array([rcond_c, rcond_v, rcond_m])


# ---------------------------------------------------------------------- the same with numpy
def _solve_rows_numpy(a, b, row_scale):
    """:func:`_solve_rows` with numpy (LAPACK's LU with partial pivoting), nothing compiled."""
    n, cols = a.shape[0], b.shape[1]
    if n == 0:
        return np.zeros((0, cols)), 1.0
    scale = np.abs(row_scale).max(axis=1)
    if not scale.all():
        return np.zeros((n, cols)), 0.0
    scale = scale[:, None]
    try:
        solution = np.linalg.solve(a / scale, np.concatenate((b / scale, np.eye(n)), axis=1))
    except np.linalg.LinAlgError:  # an exactly zero pivot
        return np.zeros((n, cols)), 0.0
    column_sums = (np.abs(row_scale) / scale).sum(axis=0)
    inverse_norm = np.abs(solution[:, cols:]).sum(axis=0).max()
    return solution[:, :cols], 1.0 / (column_sums.max() * inverse_norm)


def _linear_model_numpy(f0_q, f0_qd, f1_q, f1_v, fa_q, fa_qd, fa_v, fa_vd, f2_q, f2_v, f2_vd,
                        f3_q, f3_qd, f3_v, f3_u, f4_q, f4_lam, fc_q, fv_q, fv_v,
                        q_ind, q_dep, v_ind, v_dep, state_rows, with_state_space):
    """:func:`_linear_model_kernel` with numpy, nothing compiled."""
    n, o, m = f0_q.shape[1], f1_v.shape[1], fa_q.shape[0]
    k, s = f4_lam.shape[1], f3_u.shape[1]
    rows = n + o + k
    C_0 = np.zeros((n, q_ind.size))
    C_0[q_ind, np.arange(q_ind.size)] = 1.0
    C_1 = np.zeros((o, n))
    C_2 = np.zeros((o, v_ind.size))
    C_2[v_ind, np.arange(v_ind.size)] = 1.0
    rcond_c, rcond_v, rcond_m = 1.0, 1.0, 1.0
    if q_dep.size:
        x, rcond_c = _solve_rows_numpy(fc_q[:, q_dep], fc_q[:, q_ind], fc_q)
        C_0[q_dep] = -x
    if v_dep.size:
        x, rcond_v = _solve_rows_numpy(fv_v[:, v_dep],
                                       np.concatenate((fv_q, fv_v[:, v_ind]), axis=1), fv_v)
        C_1[v_dep] = -x[:, :n]
        C_2[v_dep] = -x[:, n:]
    A_q = -np.concatenate((f0_q + f1_q, fa_q, f2_q + f3_q + f4_q))
    A_v = -np.concatenate((f1_v, fa_v, f2_v + f3_v))
    A_q += A_v @ C_1
    A = np.concatenate((A_q @ C_0, A_v @ C_2), axis=1)
    B = np.zeros((rows, s))
    B[n + m:] = -f3_u
    M = np.zeros((rows, rows))
    M[:n, :n] = f0_qd
    M[n:n + m, :n] = fa_qd
    M[n:n + m, n:n + o] = fa_vd
    M[n + m:, :n] = f3_qd
    M[n + m:, n:n + o] = f2_vd
    M[n + m:, n + o:] = f4_lam
    A_ss = np.zeros((state_rows.size, A.shape[1]))
    B_ss = np.zeros((state_rows.size, s))
    if with_state_space:
        solved, rcond_m = _solve_rows_numpy(M, np.concatenate((A, B), axis=1), M)
        A_ss = solved[state_rows, :A.shape[1]]
        B_ss = solved[state_rows, A.shape[1]:]
    return M, A, B, A_ss, B_ss, np.array([rcond_c, rcond_v, rcond_m])


#: kernels name -> (row-scaled solve, linear-model assembly); see Linearizer's ``kernels``.
KERNELS = {"numba": (_solve_rows, _linear_model_kernel),
           "numpy": (_solve_rows_numpy, _linear_model_numpy)}
