"""The state transforms of a :class:`core.MidpointVI` and its tracking law: the part of the
integrator that maps between the discrete state ``x = [q, p, v]`` and the continuous one
``(q, qdot)`` without stepping (:mod:`core.conventions`)::

    p = dL/dqdot (dynamic rows),   v = qdot (kinematic rows),   M_dd qdot_dyn = p - M_dk v

:class:`DiscreteStates` packs and splits states and inputs (checked), computes the exact
Legendre transform and its inverse and Jacobian (:mod:`core.discrete.legendre`), the discrete
Legendre transform ``p_k = D2 L_d(q_k-1, q_k)`` (:mod:`core.discrete.inverse`), the rest state
and its input, and the feedback law ``u = u_ref - K (x - x_ref)`` of a controller
(:mod:`core.discrete.tracking`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from core.discrete.inverse import discrete_momenta
from core.discrete.legendre import (
    inverse_legendre,
    legendre,
    legendre_jacobian,
    legendre_many,
)
from core.discrete.tracking import feedback
from core.errors import SingularMatrixError
from core.validation import check_vector, float_stack, is_plain_vector


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a`` if it is read-only, else a read-only view of it."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view


class DiscreteStates:
    """The state transforms and the tracking law of :class:`core.MidpointVI` (the module
    docstring). Reads the integrator's system, dimensions, index arrays and names."""

    system: Any
    dt: float
    dynamic_index: np.ndarray
    kinematic_index: np.ndarray
    _nq: int
    _nd: int
    _nk: int
    _nx: int
    _nu: int
    _m: int
    _names: Any        # (the integrator's: state and input names)

    # ---------------------------------------------------------------- packing
    # (called on every step and linearization: the names for the error message are only
    # looked up when the check fails)
    def split_state(self, x, finite: bool = True):
        """``(q, p, v)`` views of ``x = [q, p, v]``.

        Parameters
        ----------
        x : array_like, shape (nx,)
            A discrete state (converted to float64 once if it is not a plain float64 vector).
        finite : bool
            Also refuse non-finite entries.

        Returns
        -------
        q, p, v : ndarray, shapes (n,), (nd,), (nk,)
            Views of ``x`` (or of its conversion).

        Raises
        ------
        ValueError
            A wrong size or, with ``finite``, the first non-finite entry (named).
        """
        n, nd = self._nq, self._nd
        if not is_plain_vector(x, n + nd + self._nk, finite):
            x = check_vector("x", x, n + nd + self._nk, self._names()[0], finite)
        return x[:n], x[n:n + nd], x[n + nd:]

    def split_input(self, u, finite: bool = True, copy: bool = True):
        """``(u_force, rho)`` of ``u = [force inputs, rho_k+1]``.

        Parameters
        ----------
        u : array_like, shape (nu,) or None
            A discrete input (None: zeros).
        finite : bool
            Also refuse non-finite entries.
        copy : bool
            Copies (default) or views.

        Returns
        -------
        u_force, rho : ndarray, shapes (m,), (nk,)

        Raises
        ------
        ValueError
            As :meth:`split_state`.
        """
        if not is_plain_vector(u, self._nu, finite):
            u = check_vector("u", u, self._nu, self._names()[1], finite, optional=True)
        m = self._m
        return (u[:m].copy(), u[m:].copy()) if copy else (u[:m], u[m:])

    def state(self, q, p, v=None):
        """Pack ``x = [q, p_dyn, v_kin]``.

        Parameters
        ----------
        q : array_like, shape (n,)
        p : array_like, shape (nd,)
        v : array_like, shape (nk,), optional
            Default zeros.

        Returns
        -------
        x : ndarray, shape (nx,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        v = np.zeros(self._nk) if v is None else v
        return np.concatenate([check_vector("q", q, self._nq), check_vector("p", p, self._nd),
                               check_vector("v", v, self._nk)])

    # ---------------------------------------------------------------- exact state transforms
    def momentum(self, q, dq):
        """Discrete-state momentum from a continuous state: ``p = dL/d dq`` on dynamic rows.

        Parameters
        ----------
        q, dq : array_like, shape (n,)

        Returns
        -------
        p : ndarray, shape (nd,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        return self.system.momentum(q, dq)[self.dynamic_index]

    def discrete_state(self, q, dq) -> np.ndarray:
        """The exact Legendre transform ``[q, qdot] -> x = [q, p, v]``: ``p = dL/dqdot`` on the
        dynamic rows, ``v = qdot`` on the kinematic rows.

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The continuous state.

        Returns
        -------
        x : ndarray, shape (nx,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        names = self.system.config_names
        q = check_vector("q", q, self._nq, names)
        dq = check_vector("qdot", dq, self._nq, names)
        x = np.empty(self._nx)
        data, der = self.system.workspace.get()
        legendre(self.system.model, data, der, self.dynamic_index, self.kinematic_index, q, dq, x)
        return x

    def discrete_states(self, Q, dQ) -> np.ndarray:
        """:meth:`discrete_state` of each row of ``Q`` and ``dQ``.

        Parameters
        ----------
        Q, dQ : array_like, shape (knots, n)
            Positions and velocities.

        Returns
        -------
        X : ndarray, shape (knots, nx)

        Raises
        ------
        ValueError
            Shapes that differ or are wrong; a non-finite entry (named).
        """
        Q = float_stack("positions", Q, (None, self._nq))
        dQ = float_stack("velocities", dQ, Q.shape)
        X = np.empty((Q.shape[0], self._nx))
        data, der = self.system.workspace.get()
        legendre_many(self.system.model, data, der, self.dynamic_index, self.kinematic_index, Q, dQ, X)
        return X

    def continuous_state(self, x):
        """The inverse transform ``x = [q, p, v] -> (q, qdot)``: ``M_dd qdot_dyn = p - M_dk v``.

        Parameters
        ----------
        x : array_like, shape (nx,)

        Returns
        -------
        q, dq : ndarray, shape (n,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        SingularMatrixError
            ``M_dd`` is singular at ``q``.
        """
        q, p, v = self.split_state(x)
        dq = np.empty(self._nq)
        data, der = self.system.workspace.get()
        if not inverse_legendre(self.system.model, data, der, self.dynamic_index,
                                self.kinematic_index, q.copy(), p.copy(), v.copy(), dq):
            raise SingularMatrixError("inverse Legendre transform: the mass matrix of the dynamic "
                                      "variables is singular at this q", "mass matrix", -1)
        return q.copy(), dq

    def state_jacobian(self, q, dq) -> np.ndarray:
        """``d[q, p, v] / d[q, qdot]`` at ``(q, qdot)``: maps a continuous-state perturbation (or
        weight) to the discrete state.

        Parameters
        ----------
        q, dq : array_like, shape (n,)

        Returns
        -------
        ndarray, shape (2n, 2n)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        names = self.system.config_names
        q = check_vector("q", q, self._nq, names)
        dq = check_vector("qdot", dq, self._nq, names)
        J = np.empty((2 * self._nq, 2 * self._nq))
        data, der = self.system.workspace.get()
        legendre_jacobian(self.system.model, data, der, self.dynamic_index, self.kinematic_index,
                          q, dq, J)
        return J

    def discrete_momentum(self, q_prev, q):
        """The discrete Legendre transform ``p_k = D2 L_d(q_k-1, q_k)`` (dynamic rows).

        ``discrete_momentum(q, q)`` is the momentum of the discrete rest state (see
        :meth:`rest_state`): ``dt/2 L_q(q, 0)``, not the continuous ``dL/d dq (q, 0) = 0``.

        Parameters
        ----------
        q_prev, q : array_like, shape (n,)
            ``q_k-1`` and ``q_k``.

        Returns
        -------
        p : ndarray, shape (nd,)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named).
        """
        Q = np.stack([check_vector("q_prev", q_prev, self._nq), check_vector("q", q, self._nq)])
        return self.discrete_momenta(Q, np.zeros(self._nd))[1]

    def rest_state(self, q) -> np.ndarray:
        """The discrete state at rest at ``q``: ``x = [q, D2 L_d(q, q), 0]``, the fixed point of the
        one-step map under :meth:`rest_input` (when :func:`core.holding_inputs` reports a zero
        residual).

        With ``q_k = q_k+1 = q`` the DEL equations give ``p_k+1 = D2 L_d(q, q) = dt/2 L_q(q, 0)``
        and ``D1 L_d + D2 L_d = dt L_q(q, 0)``, so ``p_k = p_k+1`` exactly when
        ``L_q + B u = Dh^T lam / dt``: the continuous static balance.
        ``vi.state(q, vi.momentum(q, 0))`` (``p = 0``) is *not* at rest: it starts a step late by
        half a step of gravity and drifts. Stepping reproduces the fixed point to the DEL solve's
        ``tolerance`` (its Newton iteration starts from ``q + dt M^-1 p``).

        Parameters
        ----------
        q : array_like, shape (n,)
            A configuration on the holonomic constraints.

        Returns
        -------
        x : ndarray, shape (nx,)

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; ``q`` off the holonomic constraints
            (:meth:`core.System.check_configuration`).
        """
        q = check_vector("q", q, self._nq, self.system.config_names)
        self.system.check_configuration(q, what="the rest state")
        return self.state(q, self.discrete_momentum(q, q))

    def rest_input(self, q, u=None) -> np.ndarray:
        """The discrete input that keeps :meth:`rest_state` fixed: ``[u, q_kinematic]``.

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration.
        u : array_like, shape (m,), optional
            The force inputs (None: :func:`core.holding_inputs`, whose residual is then not checked:
            call it yourself to know whether the system can hold ``q``).

        Returns
        -------
        ndarray, shape (nu,)

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; with ``u`` None, ``q`` off the holonomic constraints.
        """
        q = check_vector("q", q, self._nq, self.system.config_names)
        if u is None:
            from core.continuous.equilibrium import holding_inputs
            u = holding_inputs(self.system, q)[0]
        u = check_vector("u", u, self._m, self.system.input_names, optional=True)
        return np.concatenate([u, q[self.kinematic_index]])

    def discrete_momenta(self, Q, p0) -> np.ndarray:
        """Momenta along configurations: ``p_0`` given, then ``p_k = D2 L_d(q_k-1, q_k)``.

        Parameters
        ----------
        Q : array_like, shape (knots, n)
            The configurations.
        p0 : array_like, shape (nd,)
            The first momentum.

        Returns
        -------
        P : ndarray, shape (knots, nd)

        Raises
        ------
        ValueError
            A wrong shape or a non-finite entry (named).
        """
        Q = float_stack("configurations", Q, (None, self._nq))
        P = np.empty((Q.shape[0], self._nd))
        P[0] = check_vector("p0", p0, self._nd)
        data, der = self.system.workspace.get()
        discrete_momenta(self.system.model, data, der, self.dt, self.dynamic_index, Q, P)
        return P

    # ---------------------------------------------------------------- the tracking law
    def feedback(self, q, dq, x_ref, u_ref, K, x_out=None, u_out=None):
        """``u = u_ref - K (x - x_ref)`` with ``x = discrete_state(q, dq)``, in one compiled call
        (the 1 kHz path of a controller).

        The arguments are not checked: pass float64 arrays of the right sizes. ``x_ref``, ``u_ref``,
        ``K`` reach the kernel read-only (a gain schedule's are; numba types read-only arrays apart,
        so one compiled law serves both kinds).

        Parameters
        ----------
        q, dq : ndarray, shape (n,)
            The measured continuous state.
        x_ref : ndarray, shape (nx,)
        u_ref : ndarray, shape (nu,)
        K : ndarray, shape (nu, nx)
        x_out, u_out : ndarray, shapes (nx,), (nu,), optional
            Receive the results if given.

        Returns
        -------
        u : ndarray, shape (nu,), or None
            None if an entry of ``u`` is not finite.
        x : ndarray, shape (nx,)
        """
        x = np.empty(self._nx) if x_out is None else x_out
        u = np.empty(self._nu) if u_out is None else u_out
        data, der = self.system.workspace.get()
        ok = feedback(self.system.model, data, der, self.dynamic_index, self.kinematic_index, q, dq,
                      _read_only(x_ref), _read_only(u_ref), _read_only(K), x, u)
        return (u if ok else None), x

