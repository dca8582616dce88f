"""General-form linearizer for equations of motion that come from elsewhere.

The system is written in the general form of Peterson, Gede & Hubbard (Multibody Syst. Dyn. 33,
2015), extended by Crist (2014) with ``u`` in ``f_2`` and Lagrange multipliers in ``f_4``:

    f_c(q, t)                                   = 0      l rows   configuration constraints
    f_v(q, u, t)                                = 0      m rows   velocity constraints
    f_a(q, qd, u, ud, t)                        = 0      m rows   acceleration constraints
    f_0(q, qd, t) + f_1(q, u, t)                = 0      n rows   kinematic differential equations
    f_2(q, u, ud, t) + f_3(q, qd, u, r, t)
                     + f_4(q, lam, t)           = 0  o-m+k rows   dynamic differential equations

with coordinates ``q`` (n), their rates ``qd`` (n), speeds ``u`` (o), their rates ``ud`` (o),
inputs ``r`` (s) and multipliers ``lam`` (k). For Kane's method ``k = 0``; for Lagrange's method
``u = qd`` and ``k = m``. As in the references, ``f_0`` must be linear in ``qd``, ``f_a`` and ``f_2``
linear in ``ud`` and ``f_4`` linear in ``lam`` (used only to complete an operating point).

Ordering (the same as SymPy's ``Linearizer``)
---------------------------------------------
``q`` and ``u`` keep the order in which the callables see them. ``q_ind``/``q_dep`` and
``u_ind``/``u_dep`` are integer indices into ``q`` and ``u`` that choose the independent and dependent
entries (``len(q_dep) = l``, ``len(u_dep) = m``); the independent state is
``x = [q[q_ind], u[u_ind]]`` in the order of those index lists. By default the dependent entries
are the last ``l`` (``m``) ones, i.e. ``q = [q_i, q_d]`` and ``u = [u_i, u_d]``.

Result (``linearize``)
----------------------
``M (n+o+k, n+o+k)``, ``A (n+o+k, n-l+o-m)``, ``B (n+o+k, s)`` of

    M [dqd; dud; dlam] = A [dq_i; du_i] + B dr

where ``dqd``, ``dud`` hold all ``n`` and ``o`` rates in the original ``q``/``u`` order and the rows
are [kinematic (n); acceleration constraints (m); dynamics (o-m+k)]. With ``A_and_B=True`` the
explicit state-space matrices of ``x' = A x + B dr`` are returned instead: ``M`` is inverted and only
the rows of the independent rates ``[q_i', u_i']`` are kept (``perm_mat.T @ solve(M, .)``).

Callables
---------
Each part ``f_*`` is one callable returning its value and its Jacobians, all numpy arrays::

    f_c(q, t, p)             -> (f_c, df_c/dq)
    f_v(q, u, t, p)          -> (f_v, df_v/dq, df_v/du)
    f_a(q, qd, u, ud, t, p)  -> (f_a, df_a/dq, df_a/dqd, df_a/du, df_a/dud)
    f_0(q, qd, t, p)         -> (f_0, df_0/dq, df_0/dqd)
    f_1(q, u, t, p)          -> (f_1, df_1/dq, df_1/du)
    f_2(q, u, ud, t, p)      -> (f_2, df_2/dq, df_2/du, df_2/dud)
    f_3(q, qd, u, r, t, p)   -> (f_3, df_3/dq, df_3/dqd, df_3/du, df_3/dr)
    f_4(q, lam, t, p)        -> (f_4, df_4/dq, df_4/dlam)

i.e. the Jacobians come in the order of the vector arguments. Vector arguments are contiguous 1-D
float64 arrays, ``t`` is a float and ``p`` a 1-D float64 array of parameters passed through
untouched. The value has shape ``(rows,)`` and a Jacobian ``(rows, len(variable))``. Numba
``@njit`` functions returning a tuple of arrays work as they are. Instead of one callable a part
may be given as a sequence ``(value_fn, jac_fn_1, ...)`` of callables with that same signature.
A part that is not given is identically zero.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping, Sequence

import numpy as np
from numba import njit

__all__ = ["Linearizer", "LinearizerError", "SingularMatrixError", "Dimensions", "PART_VARIABLES"]

#: For each part, the vector arguments it takes (before ``t, p``) = the variables of its Jacobians.
PART_VARIABLES = {
    "f_c": ("q",),
    "f_v": ("q", "u"),
    "f_a": ("q", "qd", "u", "ud"),
    "f_0": ("q", "qd"),
    "f_1": ("q", "u"),
    "f_2": ("q", "u", "ud"),
    "f_3": ("q", "qd", "u", "r"),
    "f_4": ("q", "lam"),
}
PART_ORDER = ("f_c", "f_v", "f_a", "f_0", "f_1", "f_2", "f_3", "f_4")
OP_POINT_KEYS = ("q", "qd", "u", "ud", "r", "lam", "t", "p")
_KEY_SET = frozenset(OP_POINT_KEYS)
#: A row-equilibrated matrix whose reciprocal 1-norm condition number is smaller is singular.
RCOND_MIN = 1e-13
NEWTON_MAX_ITERATIONS = 20
NEWTON_TOLERANCE = 1e-12

Dimensions = namedtuple("Dimensions", ["l", "m", "n", "o", "s", "k"])

_FC_NAME = "df_c/dq_dep (dependent coordinates)"
_FV_NAME = "df_v/du_dep (dependent speeds)"


class LinearizerError(ValueError):
    """Wrong sizes, missing values or an operating point that cannot be completed."""


class SingularMatrixError(LinearizerError, np.linalg.LinAlgError):
    """A matrix that must be inverted is singular; the message names it."""


class Linearizer:
    """Linearize ``M [dqd; dud; dlam] = A [dq_i; du_i] + B dr`` about numeric operating points.

    Parameters
    ----------
    n_q, n_u : number of coordinates ``q`` and speeds ``u``.
    f_c, f_v, f_a, f_0, f_1, f_2, f_3, f_4 : the parts of the general form (see module docstring);
        omitted parts are zero. ``f_c`` and ``f_v`` are required when ``q_dep``/``u_dep`` are given.
    q_dep, u_dep : indices of the dependent coordinates / speeds (``l`` and ``m`` of them).
    q_ind, u_ind : indices of the independent ones, in the order wanted in the state; default:
        all the others in ascending order.
    n_r : number of inputs ``r``; n_lam : number of multipliers ``lam``.
    n_p : number of parameters ``p``; ``None`` means not checked.

    Attributes
    ----------
    dims : ``Dimensions(l, m, n, o, s, k)`` as in the references.
    perm_mat : ``(n+o+k, n-l+o-m)`` 0/1 matrix with ``x = [q_i, u_i] = perm_mat.T @ [q; u; lam]``.
    state_rows : the rows of ``[qd; ud; lam]`` that form ``x'``.
    """

    def __init__(self, n_q: int, n_u: int, *, f_c=None, f_v=None, f_a=None, f_0=None,
                 f_1=None, f_2=None, f_3=None, f_4=None, q_dep: Sequence[int] = (),
                 u_dep: Sequence[int] = (), q_ind: Sequence[int] | None = None,
                 u_ind: Sequence[int] | None = None, n_r: int = 0, n_lam: int = 0,
                 n_p: int | None = None):
        self.q_ind, self.q_dep = _partition("q", n_q, q_ind, q_dep)
        self.u_ind, self.u_dep = _partition("u", n_u, u_ind, u_dep)
        l, m = len(self.q_dep), len(self.u_dep)
        self.dims = Dimensions(l=l, m=m, n=int(n_q), o=int(n_u), s=int(n_r), k=int(n_lam))
        if n_u - m + self.dims.k < 0:
            raise LinearizerError(f"more dependent speeds than speeds plus multipliers: "
                                  f"o - m + k = {n_u - m + self.dims.k} < 0")
        self.n_p = n_p
        given = dict(f_c=f_c, f_v=f_v, f_a=f_a, f_0=f_0, f_1=f_1, f_2=f_2, f_3=f_3, f_4=f_4)
        for name, needed in (("f_c", l), ("f_v", m)):
            if needed and given[name] is None:
                raise LinearizerError(f"{name} is required: {needed} dependent entries were chosen")
        self._parts = {name: _as_bundle(name, fn) for name, fn in given.items() if fn is not None}
        self._zero_parts = {name: self._zeros_of(name) for name in PART_ORDER
                            if name not in self._parts}
        self._shapes_checked = False
        self.state_rows = np.concatenate([self.q_ind, n_q + self.u_ind])
        self.perm_mat = np.eye(n_q + n_u + self.dims.k)[:, self.state_rows]
        d = self.dims
        self._op_point_layout = [("q", d.n, d.n > 0), ("qd", d.n, False), ("u", d.o, d.o > 0),
                                 ("ud", d.o, False), ("r", d.s, d.s > 0), ("lam", d.k, False),
                                 ("p", n_p, False)]

    # ------------------------------------------------------------------ public API
    def linearize(self, op_point: Mapping, A_and_B: bool = False):
        """Return ``(M, A, B)`` or, with ``A_and_B=True``, the state-space ``(A, B)``.

        ``op_point`` maps ``"q"``, ``"u"`` (required), ``"r"`` (required when there are inputs),
        ``"qd"``, ``"ud"``, ``"lam"``, ``"t"`` (default 0) and ``"p"`` (default empty) to numbers.
        Rates and multipliers that are omitted or NaN are solved from the equations, see
        :meth:`complete_op_point`.
        """
        point, parts = self._completed(op_point)
        M, A, B = self._linear_model(parts)
        if not A_and_B:
            return M, A, B
        return self.state_space(M, A, B)

    def complete_op_point(self, op_point: Mapping) -> dict:
        """Return the operating point with every key, missing rates and multipliers solved.

        ``qd``, ``ud`` and ``lam`` entries that are omitted (or NaN) are computed at the given
        ``q, u, r, t, p`` from the kinematic equations (``qd``) and jointly from the acceleration
        constraints and dynamics (``ud`` and ``lam``, as SymPy's ``solve_multipliers`` does);
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
        """``(perm_mat.T @ M^-1 A, perm_mat.T @ M^-1 B)``: the rows of ``[q_i', u_i']``."""
        A_ss, B_ss, rcond = _state_space(M, A, B, self.state_rows)
        _raise_if_singular(rcond, "mass matrix M")
        return A_ss, B_ss

    # ------------------------------------------------------------------ operating point
    def _completed(self, op_point):
        point = self._parse(op_point)
        n = self.dims.n
        rates = np.concatenate([point["qd"], point["ud"], point["lam"]])
        missing = np.isnan(rates)
        if not missing.any():
            return point, self._evaluate(point)
        # M is block lower triangular, so the qd block and the (ud, lam) block can be solved
        # separately; a block is solved whenever one of its entries is missing.
        blocks = np.zeros(rates.size, dtype=np.bool_)
        blocks[:n] = missing[:n].any()
        blocks[n:] = missing[n:].any()
        trial = np.where(missing, 0.0, rates)
        for _ in range(NEWTON_MAX_ITERATIONS):
            self._split_rates(point, trial)
            parts = self._evaluate(point)
            step, rcond = _newton_step(*(parts[name] for name in PART_ORDER), blocks)
            _raise_if_singular(rcond, _newton_matrix_name(blocks[:n].any(), blocks[n:].any()))
            unknown_step = np.abs(step[missing[blocks]]).max()
            if unknown_step <= NEWTON_TOLERANCE * (1.0 + np.abs(trial[missing]).max()):
                return point, parts
            trial[blocks] -= step
            trial[~missing] = rates[~missing]
        raise LinearizerError(
            "could not solve the missing qd/ud/lam of the operating point: the given entries "
            "are inconsistent with the equations or the equations are not linear in them")

    def _split_rates(self, point, rates):
        n, o = self.dims.n, self.dims.o
        point["qd"] = rates[:n].copy()
        point["ud"] = rates[n:n + o].copy()
        point["lam"] = rates[n + o:].copy()

    def _parse(self, op_point):
        if not isinstance(op_point, Mapping):
            raise LinearizerError(f"op_point must be a mapping with keys {OP_POINT_KEYS}, "
                                  f"got {type(op_point).__name__}")
        if not _KEY_SET.issuperset(op_point):
            unknown = sorted(map(str, set(op_point) - _KEY_SET))
            raise LinearizerError(f"unknown op_point keys {unknown}; allowed: {OP_POINT_KEYS}")
        point = {}
        for key, size, required in self._op_point_layout:
            value = op_point.get(key)
            if value is not None:
                point[key] = _vector(key, value, size)
            elif required:
                raise LinearizerError(f"op_point lacks '{key}' ({size} values)")
            else:
                point[key] = np.zeros(size or 0) if key == "p" else np.full(size, np.nan)
        given = np.concatenate((point["q"], point["u"], point["r"], point["p"]))
        if not np.isfinite(given).all():
            raise LinearizerError("op_point 'q', 'u', 'r' and 'p' must be finite")
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
        return {"q": n, "qd": n, "u": o, "ud": o, "r": s, "lam": k}

    def _evaluate(self, point):
        t, p = point["t"], point["p"]
        parts = dict(self._zero_parts)
        for name, fn in self._parts.items():
            parts[name] = tuple(fn(*[point[v] for v in PART_VARIABLES[name]], t, p))
        if not self._shapes_checked:
            self._check_outputs(parts)
        return parts

    def _check_outputs(self, parts):
        sizes = self._variable_sizes()
        for name in self._parts:
            out, rows, variables = parts[name], self._rows(name), PART_VARIABLES[name]
            if len(out) != 1 + len(variables):
                raise LinearizerError(f"{name} returned {len(out)} arrays; expected "
                                      f"{1 + len(variables)}: value, d/d{', d/d'.join(variables)}")
            expected = [(rows,)] + [(rows, sizes[v]) for v in variables]
            labels = ["value"] + [f"d{name}/d{v}" for v in variables]
            for label, array, shape in zip(labels, out, expected):
                if not isinstance(array, np.ndarray) or array.shape != shape:
                    raise LinearizerError(f"{name} returned {label} of shape {np.shape(array)}; "
                                          f"expected {shape}")
                if array.dtype != np.float64:
                    raise LinearizerError(f"{name} returned {label} of dtype {array.dtype}; "
                                          "expected float64")
        self._shapes_checked = True

    def _linear_model(self, parts):
        M, A, B, rcond_c, rcond_v, finite = _linear_model(
            *(parts[name] for name in PART_ORDER), self.q_ind, self.q_dep, self.u_ind, self.u_dep)
        _raise_if_singular(rcond_c, _FC_NAME)
        _raise_if_singular(rcond_v, _FV_NAME)
        if not finite:
            raise LinearizerError(f"non-finite values in {self._non_finite_outputs(parts)} "
                                  "at this operating point")
        return M, A, B

    def _non_finite_outputs(self, parts):
        bad = []
        for name, out in parts.items():
            labels = ["value"] + [f"d/d{v}" for v in PART_VARIABLES[name]]
            bad += [f"{name} {lab}" for lab, arr in zip(labels, out) if not np.isfinite(arr).all()]
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
    array = np.array(value, dtype=np.float64).reshape(-1)
    if size is not None and array.shape != (size,):
        raise LinearizerError(f"op_point '{key}' has {array.size} values; expected {size}")
    return array


def _raise_if_singular(rcond, what):
    if not rcond >= RCOND_MIN:
        raise SingularMatrixError(
            f"{what} is singular at this operating point (reciprocal condition number "
            f"{rcond:.1e} after row scaling); choose other dependent coordinates/speeds or "
            "another operating point")


def _newton_matrix_name(solve_qd, solve_dyn):
    if solve_qd and solve_dyn:
        return "mass matrix M (solving the missing qd, ud, lam)"
    if solve_qd:
        return "kinematic matrix df_0/dqd (solving the missing qd)"
    return "matrix [df_a/dud, 0; df_2/dud, df_4/dlam] (solving the missing ud, lam)"


# ---------------------------------------------------------------------- compiled algebra
@njit(cache=True)
def _matmul(a, b):
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            aij = a[i, j]
            if aij != 0.0:
                for c in range(b.shape[1]):
                    out[i, c] += aij * b[j, c]
    return out


@njit(cache=True)
def _lu_factor(a):
    """LU with partial pivoting, ``a[perm] = L U``; ok is False on an exactly zero pivot."""
    n = a.shape[0]
    lu = a.copy()
    perm = np.arange(n)
    for j in range(n):
        p = j
        for i in range(j + 1, n):
            if abs(lu[i, j]) > abs(lu[p, j]):
                p = i
        if lu[p, j] == 0.0:
            return lu, perm, False
        if p != j:
            for c in range(n):
                lu[j, c], lu[p, c] = lu[p, c], lu[j, c]
            perm[j], perm[p] = perm[p], perm[j]
        for i in range(j + 1, n):
            lu[i, j] /= lu[j, j]
            factor = lu[i, j]
            for c in range(j + 1, n):
                lu[i, c] -= factor * lu[j, c]
    return lu, perm, True


@njit(cache=True)
def _lu_solve(lu, perm, b):
    n, cols = b.shape
    x = np.empty((n, cols))
    for i in range(n):
        for c in range(cols):
            x[i, c] = b[perm[i], c]
    for i in range(n):
        for j in range(i):
            for c in range(cols):
                x[i, c] -= lu[i, j] * x[j, c]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            for c in range(cols):
                x[i, c] -= lu[i, j] * x[j, c]
        for c in range(cols):
            x[i, c] /= lu[i, i]
    return x


@njit(cache=True)
def _norm1(a):
    best = 0.0
    for j in range(a.shape[1]):
        total = 0.0
        for i in range(a.shape[0]):
            total += abs(a[i, j])
        best = max(best, total)
    return best


@njit(cache=True)
def _checked_solve(a, b, row_scale):
    """Solve ``a x = b`` with the rows scaled by the max-abs of ``row_scale``'s rows.

    Returns ``(x, rcond)``: rcond is the reciprocal 1-norm condition number of the scaled ``a``
    (0 when exactly singular, 1 for an empty system).
    """
    n = a.shape[0]
    x = np.zeros(b.shape)
    if n == 0:
        return x, 1.0
    scaled_a = np.empty((n, n))
    scaled_b = np.empty(b.shape)
    for i in range(n):
        scale = 0.0
        for j in range(row_scale.shape[1]):
            scale = max(scale, abs(row_scale[i, j]))
        if not scale > 0.0:
            return x, 0.0
        for j in range(n):
            scaled_a[i, j] = a[i, j] / scale
        for c in range(b.shape[1]):
            scaled_b[i, c] = b[i, c] / scale
    lu, perm, ok = _lu_factor(scaled_a)
    if not ok:
        return x, 0.0
    inverse = _lu_solve(lu, perm, np.eye(n))
    rcond = 1.0 / (_norm1(scaled_a) * _norm1(inverse))
    return _lu_solve(lu, perm, scaled_b), rcond


@njit(cache=True)
def _mass_matrix(f_a, f_0, f_2, f_3, f_4):
    n = f_0[2].shape[0]
    m = f_a[0].shape[0]
    o = f_2[3].shape[1]
    k = f_4[2].shape[1]
    M = np.zeros((n + o + k, n + o + k))
    M[:n, :n] = f_0[2]
    M[n:n + m, :n] = f_a[2]
    M[n:n + m, n:n + o] = f_a[4]
    M[n + m:, :n] = f_3[2]
    M[n + m:, n:n + o] = f_2[3]
    M[n + m:, n + o:] = f_4[2]
    return M


@njit(cache=True)
def _constraint_coefficients(f_c, f_v, q_ind, q_dep, u_ind, u_dep):
    """C_0, C_1, C_2 of Peterson et al.: dq = C_0 dq_i and du = C_1 dq + C_2 du_i."""
    n = q_ind.size + q_dep.size
    o = u_ind.size + u_dep.size
    C_0 = np.zeros((n, q_ind.size))
    C_1 = np.zeros((o, n))
    C_2 = np.zeros((o, u_ind.size))
    for j in range(q_ind.size):
        C_0[q_ind[j], j] = 1.0
    for j in range(u_ind.size):
        C_2[u_ind[j], j] = 1.0
    rcond_c = 1.0
    rcond_v = 1.0
    if q_dep.size:
        fc_q = f_c[1]
        solved, rcond_c = _checked_solve(fc_q[:, q_dep], fc_q[:, q_ind], fc_q)
        for a in range(q_dep.size):
            C_0[q_dep[a]] = -solved[a]
    if u_dep.size:
        fv_q, fv_u = f_v[1], f_v[2]
        rhs = np.hstack((fv_q, fv_u[:, u_ind]))
        solved, rcond_v = _checked_solve(fv_u[:, u_dep], rhs, np.hstack((fv_q, fv_u)))
        for a in range(u_dep.size):
            C_1[u_dep[a]] = -solved[a, :n]
            C_2[u_dep[a]] = -solved[a, n:]
    return C_0, C_1, C_2, rcond_c, rcond_v


@njit(cache=True)
def _linear_model(f_c, f_v, f_a, f_0, f_1, f_2, f_3, f_4, q_ind, q_dep, u_ind, u_dep):
    """M, A, B of SymPy's Linearizer (Peterson et al. eq. for M, A, B with C_0, C_1, C_2)."""
    n = f_0[2].shape[0]
    m = f_a[0].shape[0]
    o = f_2[3].shape[1]
    k = f_4[2].shape[1]
    s = f_3[4].shape[1]
    rows = n + o + k
    C_0, C_1, C_2, rcond_c, rcond_v = _constraint_coefficients(f_c, f_v, q_ind, q_dep,
                                                               u_ind, u_dep)
    A_q = np.empty((rows, n))
    A_q[:n] = -(f_0[1] + f_1[1])
    A_q[n:n + m] = -f_a[1]
    A_q[n + m:] = -(f_2[1] + f_3[1] + f_4[1])
    A_u = np.empty((rows, o))
    A_u[:n] = -f_1[2]
    A_u[n:n + m] = -f_a[3]
    A_u[n + m:] = -(f_2[2] + f_3[3])
    A = np.hstack((_matmul(A_q + _matmul(A_u, C_1), C_0), _matmul(A_u, C_2)))
    B = np.zeros((rows, s))
    B[n + m:] = -f_3[4]
    M = _mass_matrix(f_a, f_0, f_2, f_3, f_4)
    finite = np.isfinite(M).all() and np.isfinite(A).all() and np.isfinite(B).all()
    return M, A, B, rcond_c, rcond_v, finite


@njit(cache=True)
def _state_space(M, A, B, state_rows):
    solved, rcond = _checked_solve(M, np.hstack((A, B)), M)
    n_a = A.shape[1]
    return solved[state_rows, :n_a], solved[state_rows, n_a:], rcond


@njit(cache=True)
def _newton_step(f_c, f_v, f_a, f_0, f_1, f_2, f_3, f_4, blocks):
    """Newton step for the rates/multipliers selected by ``blocks`` (residual R, Jacobian M)."""
    M = _mass_matrix(f_a, f_0, f_2, f_3, f_4)
    residual = np.concatenate((f_0[0] + f_1[0], f_a[0], f_2[0] + f_3[0] + f_4[0]))
    index = np.nonzero(blocks)[0]
    jacobian = M[index][:, index]
    step, rcond = _checked_solve(jacobian, residual[index].reshape((-1, 1)), jacobian)
    return step[:, 0], rcond
