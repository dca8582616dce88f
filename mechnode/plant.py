"""The model the node serves: a :class:`core.System`, its midpoint variational integrator and the
exact conversions and fast kernels the node needs. Plain Python + numba; never imports rclpy.

Conventions (the same as :mod:`core.integrator`):

* continuous state ``[q, qdot]`` (2n), configuration ``q`` in ``system.config_names`` order;
* discrete state ``x = [q (all n), p (dynamic variables), v (kinematic variables' velocities)]``;
* input ``u = [force inputs (system.input_names), next values of the kinematic variables]``.

State conversion is the exact (continuous) Legendre transform ``p = dL/dqdot = M(q) qdot`` on the
dynamic rows and its inverse ``qdot_dyn = M_dd^-1 (p - M_dk v)``; discrete momenta along a
sequence of configurations come from the discrete Legendre transform ``p_k = D2 L_d(q_k-1, q_k)``.

The kernels here call the core kernels (``del_step``, ``del_linearize``, the Lagrangian and force
kernels) inside one ``@njit(nogil=True)`` function, so a whole trajectory is linearized, or one
state mapped to a command, without Python in the loop and without holding the GIL.
Numba's cache checks only the timestamp of the file that defines a cached function; the cached
kernels of this module are therefore also tied to a fingerprint of ``core/*.py`` (see
:func:`_tie_cache_to_core`) so that a change in core recompiles them instead of loading stale code.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import os
import re

import numpy as np
from numba import njit

import core
from core.dynamics import check_vector, workspace
from core.forces import generalized_force
from core.integrator import OK, IntegratorError, del_linearize, del_step, second_order_scratch
from core.lagrangian import gradient_hessian, prepare
from core.linalg import cholesky_checked, cholesky_solve

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Relative model paths are looked up in the working directory, then here.
CONFIG_DIR = os.path.join(REPO_DIR, "config")
#: The default model of the node (in CONFIG_DIR).
DEFAULT_MODEL = "cartpole.yaml"


class ModelSpecError(ValueError):
    """The model parameter names no loadable model."""


# ================================================================================ kernels
@njit(cache=True, nogil=True)
def _legendre(model, data, der, dyn, kin, q, dq, x):
    """x = [q, p = dL/dqdot on dynamic rows, qdot on kinematic rows]."""
    n, nd = q.shape[0], dyn.shape[0]
    prepare(model, data, q, dq)
    gradient_hessian(model, data, q, 1, der)
    for i in range(n):
        x[i] = q[i]
    for a in range(nd):
        x[n + a] = der.Lv[dyn[a]]
    for j in range(kin.shape[0]):
        x[n + nd + j] = dq[kin[j]]


@njit(cache=True, nogil=True)
def _legendre_many(model, data, der, dyn, kin, Q, dQ, X):
    for k in range(Q.shape[0]):
        _legendre(model, data, der, dyn, kin, Q[k], dQ[k], X[k])


@njit(cache=True, nogil=True)
def _inverse_legendre(model, data, der, dyn, kin, q, p, v, dq):
    """qdot from (q, p, v): qdot_kin = v, M_dd qdot_dyn = p - M_dk v. Returns False if M_dd is
    singular."""
    n, nd, nk = q.shape[0], dyn.shape[0], kin.shape[0]
    prepare(model, data, q, np.zeros(n))
    gradient_hessian(model, data, q, 2, der)
    M = der.Lvv
    for j in range(nk):
        dq[kin[j]] = v[j]
    if nd == 0:
        return True
    Mdd = np.empty((nd, nd))
    rhs = np.empty(nd)
    for a in range(nd):
        s = p[a]
        for j in range(nk):
            s -= M[dyn[a], kin[j]] * v[j]
        rhs[a] = s
        for b in range(nd):
            Mdd[a, b] = M[dyn[a], dyn[b]]
    # symmetric positive definite when regular: Cholesky with a relative pivot test
    L = np.empty((nd, nd))
    if cholesky_checked(Mdd, L, 1e-14) >= 0:
        return False
    y = rhs.reshape(nd, 1)
    cholesky_solve(L, y)
    for a in range(nd):
        dq[dyn[a]] = y[a, 0]
    return True


@njit(cache=True, nogil=True)
def _legendre_jacobian(model, data, der, dyn, kin, q, dq, J):
    """J = d[q, p, v] / d[q, qdot] at (q, qdot) (2n x 2n)."""
    n, nd, nk = q.shape[0], dyn.shape[0], kin.shape[0]
    prepare(model, data, q, dq)
    gradient_hessian(model, data, q, 2, der)
    J[:, :] = 0.0
    for i in range(n):
        J[i, i] = 1.0
    for a in range(nd):
        for j in range(n):
            J[n + a, j] = der.Lqv[j, dyn[a]]      # d(Lv_i)/dq_j = Lqv[j, i]
            J[n + a, n + j] = der.Lvv[dyn[a], j]
    for c in range(nk):
        J[n + nd + c, n + kin[c]] = 1.0


@njit(cache=True, nogil=True)
def _control(model, data, der, dyn, kin, q, dq, x_ref, u_ref, K, x, u):
    """x = Legendre(q, qdot); u = u_ref - K (x - x_ref). Returns False on non-finite output."""
    _legendre(model, data, der, dyn, kin, q, dq, x)
    nx, nu = x.shape[0], u.shape[0]
    ok = True
    for r in range(nu):
        s = u_ref[r]
        for j in range(nx):
            s -= K[r, j] * (x[j] - x_ref[j])
        u[r] = s
        if not np.isfinite(s):
            ok = False
    return ok


@njit(cache=True, nogil=True)
def _step_linearize(model, data, der, dt, dyn, kin, m, x, u, tol, max_iter, cond_limit, mode,
                    xn, A, B, H, status, info, conds, scratch):
    """One integrator step from x with u (mode 0), plus (A, B) (mode 1) or (A, B, H) (mode 2).
    status[0]: 0 ok, 1 step failed (status[1] = core status code), 2 linearization singular.
    ``scratch``: second-order work space (core.integrator.second_order_scratch)."""
    n, nd, nk = model.nq, dyn.shape[0], kin.shape[0]
    q0 = x[:n].copy()
    p0 = x[n:n + nd].copy()
    uf = u[:m].copy()
    rho = u[m:m + nk].copy()
    q1, p1, lam = np.empty(n), np.empty(nd), np.zeros(model.hc_kind.shape[0])
    Dh1 = np.empty((model.hc_kind.shape[0], n))
    st = np.zeros(2, np.int64)
    del_step(model, data, der, dt, dyn, kin, q0, p0, uf, rho, tol, max_iter, q1, p1, lam, Dh1, st,
             info)
    if st[0] != OK:
        status[0], status[1] = 1, st[0]
        return
    xn[:n] = q1
    xn[n:n + nd] = p1
    for j in range(nk):
        xn[n + nd + j] = (rho[j] - q0[kin[j]]) / dt
    if mode > 0:
        del_linearize(model, data, der, dt, dyn, kin, q0, p0, uf, rho, q1, lam, Dh1, mode == 2,
                      cond_limit, A, B, H, st, conds, scratch)
        if st[0] != OK:
            status[0], status[1] = 2, st[0]
            return
    status[0], status[1] = 0, 0


@njit(cache=True, nogil=True)
def _linearize_along(model, data, der, dt, dyn, kin, m, X, U, tol, max_iter, cond_limit, second,
                     A, B, H, status, info, conds):
    """(A_k, B_k[, H_k]) of the steps from X[k] with U[k], k < N (each step re-solved from X[k],
    as MidpointVI.linearize_trajectory does). Stops at the first failure: status = [code,
    core code, k]."""
    nx = X.shape[1]
    xn = np.empty(nx)
    st = np.zeros(2, np.int64)
    scratch = np.empty(second_order_scratch(model.nq, dyn.shape[0], model.hc_kind.shape[0])
                       if second else 0)
    for k in range(U.shape[0]):
        _step_linearize(model, data, der, dt, dyn, kin, m, X[k], U[k], tol, max_iter, cond_limit,
                        2 if second else 1, xn, A[k], B[k], H[k], st, info, conds, scratch)
        if st[0] != 0:
            status[0], status[1], status[2] = st[0], st[1], k
            return
    status[0], status[1], status[2] = 0, 0, -1


@njit(cache=True, nogil=True)
def _input_matrix(model, data, q, Fu):
    """Fu = dF/du at q (generalized forces of the force inputs)."""
    n, m = model.nq, model.nu
    prepare(model, data, q, np.zeros(n))
    e3 = np.empty((0, 0, 0))
    generalized_force(model, data, np.zeros(n), np.zeros(m), 1, np.empty(n), np.empty((n, n)),
                      np.empty((n, n)), Fu, e3, e3)


@njit(cache=True, nogil=True)
def _del_inverse_dynamics(model, data, der, dt, dyn, kin, Q, p0, U, P, resid):
    """Inputs that make the configurations Q (N+1, n) satisfy the forced DEL equations.

    With p_k = D2 L_d(q_k-1, q_k) (p_0 given) the DEL residual of step k is affine in the force
    inputs, ``r_k(u) = p_k + D1 L_d(q_k, q_k+1) + dt F(qm, v, 0) + dt F_u(qm) u``; the least-squares
    (minimum-norm) u_k is returned in U[k, :m] and the next kinematic values q_k+1,kin in
    U[k, m:]. resid[k] = max |r_k(u_k)| relative to the size of the terms (as the DEL solve
    measures convergence). Holonomic constraint forces are not modelled here (they would add
    Dh^T lam to the residual), so constrained systems leave a residual.
    """
    n, nd, nk, m = model.nq, dyn.shape[0], kin.shape[0], model.nu
    N = Q.shape[0] - 1
    F, Fq, Fv, Fu = np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m))
    e3 = np.empty((0, 0, 0))
    zero_u = np.zeros(m)
    r0 = np.empty(nd)
    G = np.empty((nd, m))
    for a in range(nd):
        P[0, a] = p0[a]
    for k in range(N):
        q0 = Q[k]
        q1 = Q[k + 1]
        qm = 0.5 * (q0 + q1)
        v = (q1 - q0) / dt
        prepare(model, data, qm, v)
        gradient_hessian(model, data, qm, 1, der)
        generalized_force(model, data, v, zero_u, 1, F, Fq, Fv, Fu, e3, e3)
        scale = 1.0
        for a in range(nd):
            i = dyn[a]
            r0[a] = P[k, a] + 0.5 * dt * der.Lq[i] - der.Lv[i] + dt * F[i]
            scale = max(scale, abs(P[k, a]), abs(der.Lv[i]), abs(0.5 * dt * der.Lq[i]), abs(dt * F[i]))
            for r in range(m):
                G[a, r] = dt * Fu[i, r]
        uk = np.zeros(m)
        if nd > 0 and m > 0:
            sol = np.linalg.lstsq(G, -r0, 1e-12)[0]
            for r in range(m):
                uk[r] = sol[r]
        worst = 0.0
        for a in range(nd):
            s = r0[a]
            for r in range(m):
                s += G[a, r] * uk[r]
            worst = max(worst, abs(s) / scale)
        resid[k] = worst
        for r in range(m):
            U[k, r] = uk[r]
        for j in range(nk):
            U[k, m + j] = q1[kin[j]]
        for a in range(nd):
            i = dyn[a]
            P[k + 1, a] = 0.5 * dt * der.Lq[i] + der.Lv[i]


@njit(cache=True, nogil=True)
def _discrete_momenta(model, data, der, dt, dyn, Q, P):
    """P[k] = D2 L_d(Q[k-1], Q[k]) for k >= 1 (P[0] is left as given)."""
    nd = dyn.shape[0]
    for k in range(1, Q.shape[0]):
        qm = 0.5 * (Q[k - 1] + Q[k])
        v = (Q[k] - Q[k - 1]) / dt
        prepare(model, data, qm, v)
        gradient_hessian(model, data, qm, 1, der)
        for a in range(nd):
            P[k, a] = 0.5 * dt * der.Lq[dyn[a]] + der.Lv[dyn[a]]


_KERNELS = [_legendre, _legendre_many, _inverse_legendre, _legendre_jacobian, _control,
            _step_linearize, _linearize_along, _input_matrix, _del_inverse_dynamics,
            _discrete_momenta]


#: The core modules whose kernels are compiled into this module's kernels.
_CORE_DEPENDENCIES = ("constraints", "dynamics", "forces", "integrator", "kinematics", "lagrangian",
                      "linalg", "model", "structs")


def _core_fingerprint() -> str:
    """Hash of the sources of the core modules the kernels here inline."""
    digest = hashlib.sha1()
    base = os.path.dirname(os.path.abspath(core.__file__))
    for name in _CORE_DEPENDENCIES:
        try:
            with open(os.path.join(base, name + ".py"), "rb") as fh:
                digest.update(fh.read())
        except OSError:
            digest.update(b"missing:" + name.encode())
    return digest.hexdigest()


def _tie_cache_to_core() -> None:
    """Make the on-disk cache of this module's kernels stale whenever a core source file changes.

    Numba compares a stored "source stamp" (the defining file's mtime and size) with the current
    one before it loads a cached kernel; the kernels here inline core's kernels, so the stamp is
    extended with a hash of the core sources they depend on. Uses numba's cache internals; if they are missing (another
    numba version) the kernels simply keep numba's own behaviour.
    """
    fingerprint = _core_fingerprint()
    for kernel in _KERNELS:
        cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
        stamp = getattr(cache_file, "_source_stamp", None)
        if stamp is not None:
            cache_file._source_stamp = (stamp, fingerprint)


_tie_cache_to_core()


# ================================================================================ model loading
_PYTHON_SPEC = re.compile(r"^python:([A-Za-z_][\w.]*)\.([A-Za-z_]\w*)(?:\((.*)\))?$")


def resolve_model_path(spec: str) -> str:
    """An existing file for ``spec``: absolute, relative to the working directory, or relative to
    the repository's ``config/`` directory (in that order). Raises :class:`ModelSpecError`."""
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError("the model parameter is empty")
    candidates = [spec] if os.path.isabs(spec) else [os.path.abspath(spec), os.path.join(CONFIG_DIR, spec)]
    for c in candidates:
        if os.path.isfile(c):
            return c
    raise ModelSpecError(f"model file {spec!r} not found (looked in {', '.join(candidates)})")


def check_model_spec(spec: str) -> None:
    """Cheap validation of a model parameter value (no loading); raises ModelSpecError."""
    if isinstance(spec, str) and spec.startswith("python:"):
        if not _PYTHON_SPEC.match(spec):
            raise ModelSpecError(f"{spec!r}: expected python:package.module.function or "
                                 "python:package.module.function(args)")
        return
    resolve_model_path(spec)


def load_model(spec: str) -> core.System:
    """A :class:`core.System` from a YAML path (see :func:`resolve_model_path`) or from
    ``python:package.module.function(literal args)`` (e.g. ``python:core.examples.chain(2)``)."""
    if isinstance(spec, str) and spec.startswith("python:"):
        match = _PYTHON_SPEC.match(spec)
        if not match:
            check_model_spec(spec)
        module, func, args = match.groups()
        try:
            fn = getattr(importlib.import_module(module), func)
            values = ast.literal_eval(f"({args},)") if args and args.strip() else ()
        except (ImportError, AttributeError, ValueError, SyntaxError) as exc:
            raise ModelSpecError(f"{spec!r}: {exc}") from exc
        system = fn(*values)
        if not isinstance(system, core.System):
            raise ModelSpecError(f"{spec!r} returned {type(system).__name__}, not core.System")
        system.model  # compile: a malformed model fails here
        return system
    return core.load_system(resolve_model_path(spec))


# ================================================================================ the plant
class Plant:
    """A system, its variational integrator at ``dt`` and fast, exact conversions.

    Thread safety: every kernel call uses the calling thread's scratch (core's per-thread
    workspace), so one Plant serves several threads at once.
    """

    def __init__(self, system: core.System, dt: float, source: str = ""):
        self.system = system
        self.source = source
        self.vi = core.MidpointVI(system, dt)
        self.dt = self.vi.dt
        self.model = system.model
        self.dyn = np.ascontiguousarray(self.vi.dynamic_index, dtype=np.int64)
        self.kin = np.ascontiguousarray(self.vi.kinematic_index, dtype=np.int64)
        self.n, self.nd, self.nk = system.nq, len(self.dyn), len(self.kin)
        self.m = system.nu
        self.nx, self.nu = self.vi.nx, self.vi.nu
        self.config_names = system.config_names
        self.dynamic_names = [self.config_names[i] for i in self.dyn]
        self.kinematic_names = [self.config_names[i] for i in self.kin]
        self.force_input_names = system.input_names
        self.input_names = self.vi.input_names
        self.state_names = self.vi.state_names
        self.continuous_state_names = system.state_names
        self.has_constraints = self.model.nh > 0
        Fu = self.input_matrix(np.zeros(self.n))
        rank = np.linalg.matrix_rank(Fu[self.dyn]) if self.nd and self.m else 0
        self.fully_actuated = (not self.has_constraints) and rank == self.nd
        self.actuation = ("fully actuated" if self.fully_actuated else
                          "constrained" if self.has_constraints else
                          f"underactuated ({rank} independent force inputs for {self.nd} dynamic variables)")

    @classmethod
    def load(cls, spec: str, dt: float) -> "Plant":
        return cls(load_model(spec), dt, source=spec)

    def with_dt(self, dt: float) -> "Plant":
        """The same system with another time step (shares the compiled model)."""
        return self if float(dt) == self.dt else Plant(self.system, dt, self.source)

    # ------------------------------------------------------------------ conversions
    def _ws(self, third: bool = False):
        return workspace(self.system, third_order=third)

    def to_discrete(self, q, dq) -> np.ndarray:
        """Exact Legendre transform ``[q, qdot] -> x = [q, p, v]``."""
        q = check_vector("q", q, self.n, self.config_names)
        dq = check_vector("qdot", dq, self.n, self.config_names)
        x = np.empty(self.nx)
        data, der = self._ws()
        _legendre(self.model, data, der, self.dyn, self.kin, q, dq, x)
        return x

    def to_discrete_many(self, Q, dQ) -> np.ndarray:
        Q = np.ascontiguousarray(Q, dtype=float)
        dQ = np.ascontiguousarray(dQ, dtype=float)
        if Q.ndim != 2 or Q.shape[1] != self.n or dQ.shape != Q.shape:
            raise ValueError(f"positions and velocities must both be (knots, {self.n}); got "
                             f"{Q.shape} and {dQ.shape}")
        if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(dQ))):
            raise ValueError("states contain non-finite values")
        X = np.empty((Q.shape[0], self.nx))
        data, der = self._ws()
        _legendre_many(self.model, data, der, self.dyn, self.kin, Q, dQ, X)
        return X

    def to_continuous(self, x):
        """Inverse Legendre transform ``x = [q, p, v] -> (q, qdot)``."""
        x = check_vector("x", x, self.nx, self.state_names)
        q = x[:self.n].copy()
        dq = np.empty(self.n)
        data, der = self._ws()
        if not _inverse_legendre(self.model, data, der, self.dyn, self.kin, q,
                                 x[self.n:self.n + self.nd].copy(), x[self.n + self.nd:].copy(), dq):
            raise core.SingularMatrixError("inverse Legendre transform: the mass matrix of the "
                                           "dynamic variables is singular at this q", "mass matrix", -1)
        return q, dq

    def legendre_jacobian(self, q, dq) -> np.ndarray:
        """``d[q, p, v] / d[q, qdot]`` (2n x 2n) at ``(q, qdot)``."""
        q = check_vector("q", q, self.n, self.config_names)
        dq = check_vector("qdot", dq, self.n, self.config_names)
        J = np.empty((2 * self.n, 2 * self.n))
        data, der = self._ws()
        _legendre_jacobian(self.model, data, der, self.dyn, self.kin, q, dq, J)
        return J

    def discrete_momenta(self, Q, p0) -> np.ndarray:
        """Momenta along configurations Q (knots, n): ``p_0`` given, ``p_k = D2 L_d(q_k-1, q_k)``."""
        Q = np.ascontiguousarray(Q, dtype=float)
        P = np.empty((Q.shape[0], self.nd))
        P[0] = check_vector("p0", p0, self.nd)
        data, der = self._ws()
        _discrete_momenta(self.model, data, der, self.dt, self.dyn, Q, P)
        return P

    def input_matrix(self, q) -> np.ndarray:
        """``dF/du`` (n x m) at q: how each force input enters the generalized forces."""
        q = check_vector("q", q, self.n, self.config_names)
        Fu = np.empty((self.n, self.m))
        data, _ = self._ws()
        _input_matrix(self.model, data, q, Fu)
        return Fu

    # ------------------------------------------------------------------ control law
    def control(self, q, dq, x_ref, u_ref, K, x_out=None, u_out=None):
        """``u = u_ref - K (Legendre(q, qdot) - x_ref)``; returns ``(u, x)`` or ``(None, x)`` if
        u is not finite. Arguments must already be float64 arrays of the right sizes."""
        x = np.empty(self.nx) if x_out is None else x_out
        u = np.empty(self.nu) if u_out is None else u_out
        data, der = self._ws()
        ok = _control(self.model, data, der, self.dyn, self.kin, q, dq, x_ref, u_ref, K, x, u)
        return (u if ok else None), x

    # ------------------------------------------------------------------ integrator
    def _raise(self, status, info, conds, k=None):
        code, sub = int(status[0]), int(status[1])
        if code == 1:
            self.vi._raise(np.array([sub, -1]), info, k)
            raise IntegratorError(f"DEL solve failed{'' if k is None else f' at step {k}'}", step=k)
        if code == 2:
            self.vi._raise_singular(sub, conds, k)
            raise IntegratorError(f"linearization failed{'' if k is None else f' at step {k}'}", step=k)

    def _call(self, x, u, mode):
        x = check_vector("x", x, self.nx, self.state_names)
        u = check_vector("u", u, self.nu, self.input_names)
        nz = self.nx + self.nu
        xn = np.empty(self.nx)
        A = np.empty((self.nx, self.nx))
        B = np.empty((self.nx, self.nu))
        H = np.empty((self.nx, nz, nz) if mode == 2 else (0, 0, 0))
        status, info, conds = np.zeros(2, np.int64), np.zeros(2), np.zeros(2)
        data, der = self._ws(third=mode == 2)
        vi = self.vi
        _step_linearize(self.model, data, der, self.dt, self.dyn, self.kin, self.m, x, u,
                        vi.tolerance, vi.max_iterations, vi.condition_limit, mode, xn, A, B, H,
                        status, info, conds, vi._scratch(mode == 2))
        if status[0] != 0:
            self._raise(status, info, conds)
        if not np.all(np.isfinite(xn)):
            raise IntegratorError(f"the step from x = {x} with u = {u} gives a non-finite state")
        return xn, A, B, H

    def step(self, x, u) -> np.ndarray:
        """``x_k+1 = f(x_k, u_k)`` (raises IntegratorError)."""
        return self._call(x, u, 0)[0]

    def linearize(self, x, u, second: bool = False):
        """``(A, B)`` or ``(A, B, H)`` of one step at ``(x, u)`` (as MidpointVI.linearize/2)."""
        _, A, B, H = self._call(x, u, 2 if second else 1)
        return (A, B, H) if second else (A, B)

    def linearize_along(self, X, U, second: bool = False):
        """Stacks ``(A, B[, H])`` along ``X`` (N+1, nx), ``U`` (N, nu); each step re-solved from
        ``X[k]`` (the same as ``MidpointVI.linearize_trajectory``, serial, without the GIL)."""
        X = np.ascontiguousarray(X, dtype=float)
        U = np.ascontiguousarray(U, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.nx or U.ndim != 2 or U.shape != (X.shape[0] - 1, self.nu):
            raise ValueError(f"X must be (N+1, {self.nx}) and U (N, {self.nu}); got {X.shape}, {U.shape}")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(U))):
            raise ValueError("trajectory contains non-finite values")
        N, nz = U.shape[0], self.nx + self.nu
        A = np.empty((N, self.nx, self.nx))
        B = np.empty((N, self.nx, self.nu))
        H = np.empty((N, self.nx, nz, nz) if second else (N, 0, 0, 0))
        status, info, conds = np.zeros(3, np.int64), np.zeros(2), np.zeros(2)
        data, der = self._ws(third=second)
        vi = self.vi
        _linearize_along(self.model, data, der, self.dt, self.dyn, self.kin, self.m, X, U,
                         vi.tolerance, vi.max_iterations, vi.condition_limit, second, A, B, H,
                         status, info, conds)
        if status[0] != 0:
            self._raise(status, info, conds, int(status[2]))
        return (A, B, H) if second else (A, B)

    def inverse_dynamics(self, Q, p0):
        """``(U, P, residual)``: least-squares force inputs through the DEL equations for the
        configurations ``Q`` (N+1, n), momenta ``P`` (N+1, nd) from ``p0`` and the discrete
        Legendre transform, and the relative DEL residual per step (0 where exactly feasible)."""
        Q = np.ascontiguousarray(Q, dtype=float)
        if Q.ndim != 2 or Q.shape[1] != self.n or Q.shape[0] < 2:
            raise ValueError(f"configurations must be (knots >= 2, {self.n}), got {Q.shape}")
        N = Q.shape[0] - 1
        U, P, resid = np.empty((N, self.nu)), np.empty((N + 1, self.nd)), np.empty(N)
        data, der = self._ws()
        _del_inverse_dynamics(self.model, data, der, self.dt, self.dyn, self.kin, Q,
                              check_vector("p0", p0, self.nd), U, P, resid)
        return U, P, resid

    def discrete_system(self) -> "FastDiscreteSystem":
        return FastDiscreteSystem(self)

    # ------------------------------------------------------------------ warm-up
    def warm_up(self) -> None:
        """Run every kernel once (loads or compiles the numba code) at q = 0."""
        q = np.zeros(self.n)
        dq = np.zeros(self.n)
        x = self.to_discrete(q, dq)
        self.legendre_jacobian(q, dq)
        try:                         # the continuous Linearize service (one kernel for qdd too)
            self.system.linearize(q, dq, np.zeros(self.system.nu))
        except core.SingularMatrixError:
            pass
        try:
            self.to_continuous(x)
        except core.SingularMatrixError:
            pass
        u = np.zeros(self.nu)
        u[self.m:] = q[self.kin]
        K = np.zeros((self.nu, self.nx))
        self.control(q, dq, x, u, K)
        for a in (x, u, K):          # schedules hold read-only arrays: a numba type of its own
            a.setflags(write=False)
        self.control(q, dq, x, u, K)
        Q = np.zeros((3, self.n))
        self.discrete_momenta(Q, np.zeros(self.nd))
        U, P, _ = self.inverse_dynamics(Q, np.zeros(self.nd))
        X = np.hstack([Q, P, np.zeros((3, self.nk))])
        for second in (False, True):
            try:
                self.linearize_along(X, U, second=second)
                self.linearize(x, u, second=second)
            except (IntegratorError, core.SingularMatrixError):
                pass  # singular at q = 0 for this model: compiled all the same
        A, B = np.tile(np.eye(self.nx), (2, 1, 1)), np.tile(np.eye(self.nx, self.nu), (2, 1, 1))
        core.tvlqr(A, B, np.eye(self.nx), np.eye(self.nu), np.eye(self.nx))


class FastDiscreteSystem:
    """The plant in the state-form protocol of :func:`core.optimize_trajectory` (``nx``, ``nu``,
    ``step``, ``linearize``, ``linearize2``), one numba call per method. ``step`` returns NaNs
    when the DEL solve fails, which the optimizer's line search treats as a rejected trial."""

    def __init__(self, plant: Plant):
        self.plant = plant
        self.nx, self.nu = plant.nx, plant.nu

    def step(self, x, u):
        try:
            return self.plant.step(x, u)
        except (IntegratorError, ValueError):
            return np.full(self.nx, np.nan)

    def linearize(self, x, u):
        return self.plant.linearize(x, u)

    def linearize2(self, x, u):
        return self.plant.linearize(x, u, second=True)
