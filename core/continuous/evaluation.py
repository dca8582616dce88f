"""The numeric methods of a system: its continuous dynamics, their linearizations and the
quantities they are made of, each dispatched to the path that computes it.

:class:`ContinuousDynamics` is the part of :class:`core.System` that evaluates: ``qdd``,
``constraint_forces``, ``linearize``, ``linearize2``, ``linearize_minimal``, ``momentum``,
``energy``, ``constraint``, ``check_configuration``, ``lagrangian_derivatives`` and
``input_matrix``. Each is a few lines that hand the call to the module that owns the
computation: :mod:`core.continuous.dynamics` for one state, :mod:`core.continuous.stacked` for
``(N, n)`` stacks, :mod:`core.continuous.floating` for a quaternion base (in its tangent space),
:mod:`core.continuous.minimal` for independent coordinates. Those take the system itself and read
its compiled model and workspace; what a computation on a quaternion base cannot do yet is
refused by name (:func:`core.continuous.floating.refuse`).
"""
from __future__ import annotations

import numpy as np

from core.continuous import contacts, dynamics, floating, minimal, stacked
from core.validation import float_array


class ContinuousDynamics:
    """The numeric methods of :class:`core.System` (the module docstring): the continuous,
    forced, constrained dynamics ``d/dt [q, dq] = f(q, dq, u)`` and their exact derivatives."""

    #: the quaternion free-flyer ``(frame, prefix)`` or None (:meth:`core.System.set_free_flyer`)
    _free_flyer: tuple[str, str] | None
    #: the contacts as added (:meth:`core.System.add_contact`)
    _contacts: list

    @property
    def continuous_input_names(self) -> list[str]:
        """Inputs of :meth:`qdd` and :meth:`linearize`: :attr:`input_names`, then the
        accelerations ``<kinematic>_ddot`` of the kinematic variables."""
        return dynamics.continuous_input_names(self)

    def qdd(self, q, dq, u=None, *, anchors=None):
        """Accelerations of the constrained, forced dynamics (see :mod:`core.continuous.dynamics`)::

            M(q) ddq + L_vq dq - L_q = F(q, dq, u) + A(q)^T lam,    A(q) ddq + b(q, dq) = 0

        on the dynamic rows, ``lam`` eliminated; on the rows of the kinematic variables ``ddq``
        repeats their accelerations from ``u``. With a quaternion base, ``dv/dt`` for the velocity
        ``dq = v`` (:mod:`core.continuous.floating`). The state is not checked against the constraints.

        Parameters
        ----------
        q, dq : array_like, shape (n,) or (N, n)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries). Stacks of ``N``
            states are computed in parallel (:mod:`core.continuous.stacked`).
        u : array_like, shape (m + nk,) or (N, nu), optional
            :attr:`continuous_input_names`: the force inputs, then the accelerations of the
            kinematic variables (None: zeros). A stack's ``u`` has :attr:`nu` columns, the force
            inputs only, so a system with kinematic variables takes no stack (ValueError).
        anchors : tuple of ndarray, optional
            Where the contacts hold their frames (:meth:`contact_anchors`; default: where they are
            at ``q``; see :mod:`core.continuous.contacts`).

        Returns
        -------
        ddq : ndarray, shape (n,) or (N, n)
            (``nv`` entries per state with a quaternion base.)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); with a quaternion base, a quaternion whose
            norm is off 1.
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        ResourceLimitError
            A stack whose results would pass :data:`core.validation.STACK_MEMORY_LIMIT`. The first
            point of a stack that fails raises the single call's error, prefixed with its index.
        """
        if (type(q) is not np.ndarray or q.ndim == 2) and stacked.is_stack(q):
            if self._contacts:
                return self._contact_stack("qdd", q, dq, u)
            return stacked.qdd(self, q, dq, u)
        if self._contacts:
            contacts.place(self, q, anchors)
        if self._free_flyer:
            return floating.qdd(self, q, dq, u)
        return dynamics.qdd(self, q, dq, u)

    def constraint_forces(self, q, dq, u=None, *, anchors=None):
        """Constraint multipliers ``lam`` of :meth:`qdd`'s equations (holonomic rows, then velocity
        rows; a contact's rows last, :mod:`core.continuous.contacts`). The state is not checked
        against the constraints.

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state (with a quaternion base, ``nq`` entries and the velocity ``v``).
        u : array_like, shape (m + nk,), optional
            :attr:`continuous_input_names` (None: zeros).
        anchors : tuple of ndarray, optional
            Where the contacts hold their frames (:meth:`contact_anchors`; default: where they are
            at ``q``).

        Returns
        -------
        lam : ndarray, shape (nc,)
            One entry per constraint row.

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); anchors of the wrong shape or not rotations.
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        """
        contacts.place(self, q, anchors)
        if self._free_flyer:
            return floating.constraint_forces(self, q, dq, u)
        return dynamics.constraint_forces(self, q, dq, u)

    def contact_anchors(self, q):
        """Where the contacts (:meth:`add_contact`) hold their frames when the robot is at ``q``:
        the frames' world poses there (the default anchors of every evaluation at ``q``).

        Parameters
        ----------
        q : array_like, shape (nq,)
            The configuration.

        Returns
        -------
        R : ndarray, shape (nc, 3, 3)
            Each contact frame's rotation (frame to world), contacts in the order added.
        p : ndarray, shape (nc, 3)
            Each contact frame's origin in the world.

        Raises
        ------
        ValueError
            A wrong size or non-finite entry of ``q``; a quaternion whose norm is off 1.
        """
        return contacts.anchors(self, q)

    def contact_wrenches(self, q, dq, u=None, *, anchors=None):
        """Each contact's wrench on the robot, ``[fx, fy, fz, mx, my, mz]`` on the world axes at its
        frame's origin (Pinocchio's ``LOCAL_WORLD_ALIGNED``; a point contact's moment is zero):
        :meth:`constraint_forces` of the contact rows, mapped (:mod:`core.continuous.contacts`).

        Parameters
        ----------
        q, dq : array_like
            The state (with a quaternion base, ``nq`` entries and the velocity ``v``).
        u : array_like, optional
            :attr:`continuous_input_names` (None: zeros).
        anchors : tuple of ndarray, optional
            As for :meth:`constraint_forces`.

        Returns
        -------
        ndarray, shape (nc, 6)
            One row per contact, in the order added (N, N m).

        Raises
        ------
        ValueError
            As for :meth:`constraint_forces`.
        SingularMatrixError
            As for :meth:`constraint_forces`.
        """
        lam = self.constraint_forces(q, dq, u, anchors=anchors)
        return contacts.wrenches(self, q, lam, anchors)

    def linearize(self, q, dq, u=None, multipliers: bool = False, *,
                  residual_limit: float | None = 1e-6, anchors=None):
        """Exact continuous linearization ``d/dt δx = A δx + B δu`` of
        ``d/dt [q, dq] = f(q, dq, u)``, constraints included (the multipliers eliminated as
        functions of the state; see :func:`core.continuous.dynamics.linearize`). With a quaternion base, in the
        tangent space: ``A`` is ``2 nv x 2 nv`` for ``[δ, v]`` (:attr:`state_names`,
        :mod:`core.continuous.floating`).

        Parameters
        ----------
        q, dq : array_like, shape (n,) or (N, n)
            The state ``x = [q, dq]`` (with a quaternion base, ``q`` of ``nq`` entries and the
            velocity ``v``). Stacks of ``N`` states are linearized in parallel (:mod:`core.continuous.stacked`;
            not with ``multipliers``).
        u : array_like, shape (m + nk,) or (N, m + nk), optional
            :attr:`continuous_input_names`: the force inputs, then the accelerations of the
            kinematic variables (None: zeros).
        multipliers : bool
            Also return the derivatives of the multipliers (one state).
        residual_limit : float or None
            A state off the constraints by more than this is refused:
            ``|h_r| > residual_limit |Dh_r|`` (about ``residual_limit`` in ``q``) or
            ``|(J dq)_r| > residual_limit |J_r| max(1, |dq|)`` for the rows ``J`` of the holonomic
            Jacobian and of the velocity constraints (default 1e-6; None skips the check).
        anchors : tuple of ndarray, optional
            Where the contacts hold their frames (:meth:`contact_anchors`; default: where they are
            at ``q``; see :mod:`core.continuous.contacts`).

        Returns
        -------
        A : ndarray, shape (2n, 2n) or (N, 2n, 2n)
        B : ndarray, shape (2n, m + nk) or (N, 2n, m + nk)
        dlam_dx, dlam_du : ndarray, shapes (nc, 2n) and (nc, m + nk)
            With ``multipliers``: ``dlam/dx`` and ``dlam/du``, one row per constraint row
            (holonomic, then velocity).

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); a state off the constraints (naming the
            row); a ``residual_limit`` that is not positive (with constraints); ``multipliers`` with
            a stack; with a quaternion base, a quaternion whose norm is off 1.
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        ResourceLimitError
            A stack whose results would pass :data:`core.validation.STACK_MEMORY_LIMIT`. The first
            point of a stack that fails raises the single call's error, prefixed with its index.
        """
        if (type(q) is not np.ndarray or q.ndim == 2) and stacked.is_stack(q):
            if multipliers:
                raise ValueError("linearize(multipliers=True) takes one state, not a stack")
            if self._contacts:
                return self._contact_stack("linearize", q, dq, u, residual_limit=residual_limit)
            return stacked.linearize(self, q, dq, u, residual_limit)
        if self._contacts and self._free_flyer and anchors is None and not multipliers:
            fast = contacts.linearize(self, q, dq, u, residual_limit)     # (None: the path below names why)
            if fast is not None:
                return fast
        if self._contacts:
            contacts.place(self, q, anchors)
        if self._free_flyer:
            return floating.linearize(self, q, dq, u, residual_limit, multipliers)
        return dynamics.linearize(self, q, dq, u, multipliers, residual_limit)

    def linearize2(self, q, dq, u=None, *, residual_limit: float | None = 1e-6, anchors=None):
        """Exact continuous linearization to second order (:func:`core.continuous.dynamics.linearize2`):
        ``A, B`` as :meth:`linearize` and::

            H[i, a, b] = d2 xdot_i / dz_a dz_b,    z = [q, dq, u],

        symmetric in ``a, b``, constraints included. With a quaternion base, in the tangent space
        (``z = [δ, v, u]``, :mod:`core.continuous.floating`).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries).
        u : array_like, shape (m + nk,), optional
            :attr:`continuous_input_names` (None: zeros).
        residual_limit : float or None
            A state off the constraints by more than this is refused:
            ``|h_r| > residual_limit |Dh_r|`` (about ``residual_limit`` in ``q``) or
            ``|(J dq)_r| > residual_limit |J_r| max(1, |dq|)`` for the rows ``J`` of the holonomic
            Jacobian and of the velocity constraints (default 1e-6; None skips the check).
        anchors : tuple of ndarray, optional
            Where the contacts hold their frames (:meth:`contact_anchors`; default: where they are
            at ``q``; see :mod:`core.continuous.contacts`).

        Returns
        -------
        A : ndarray, shape (2n, 2n)
        B : ndarray, shape (2n, m + nk)
        H : ndarray, shape (2n, nz, nz)
            ``nz = 2n + m + nk``.

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry (named); a state off the constraints (naming the
            row); a ``residual_limit`` that is not positive (with constraints); with a quaternion
            base, a quaternion whose norm is off 1.
        SingularMatrixError
            The mass matrix is singular (naming the variable) or the constraint Jacobian is rank
            deficient, ``A M^-1 A^T`` singular (naming the row).
        NonFiniteError
            Finite inputs gave non-finite intermediates (an overflow; naming the largest input).
        ResourceLimitError
            ``H`` and its work arrays would pass :data:`core.validation.SECOND_ORDER_MEMORY_LIMIT`
            (checked before allocating).
        """
        contacts.place(self, q, anchors, third_order=True)
        if self._free_flyer:
            return floating.linearize2(self, q, dq, u, residual_limit)
        return dynamics.linearize2(self, q, dq, u, residual_limit)

    def linearize_minimal(self, q, dq, u=None, independent=None, condition_limit: float = 1e8, *,
                          residual_limit: float = 1e-6, anchors=None):
        """Linearization in independent coordinates and speeds (Peterson, Gede & Hubbard; see
        :mod:`core.continuous.minimal`): ``x_i' = A x_i + B u`` for the state
        ``x_i = [independent q, independent dq]``, each group in model order,
        ``p = (n - nh) + (n - nh - nv)`` entries for ``nh`` holonomic and ``nv`` velocity
        constraints.

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            A state on the constraints (``h = 0``, ``Dh dq = 0``, ``A_v dq = 0``).
        u : array_like, shape (m + nk,), optional
            As in :meth:`linearize` (None: zeros).
        independent : list of str, optional
            None: automatic (pivoted QR of the constraint Jacobians); or names of the independent
            coordinates (``n - nh``) and/or speeds (``"d" + coordinate``, ``n - nh - nv``), a group
            left out chosen automatically.
        condition_limit : float
            The largest accepted condition ``||(J P_d)^-1 J||_2`` of the dependent choice (finite,
            >= 1).
        residual_limit : float or None
            How far off the constraints the state may be (a distance in ``q``, relative in ``dq``;
            None skips the check).
        anchors : tuple of ndarray, optional
            Where the contacts hold their frames (:meth:`contact_anchors`; default: where they are
            at ``q``; see :mod:`core.continuous.contacts`).

        Returns
        -------
        A : ndarray, shape (p, p)
        B : ndarray, shape (p, m + nk)
        info : MinimalInfo
            The choice of variables, the maps ``C0, C1, C2, T`` back to all coordinates, the
            conditioning.

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; ``condition_limit`` not a finite number >= 1; more
            velocity-level constraints than speeds; a state off the constraints; redundant or
            degenerate constraints at this state; ``independent`` names unknown, repeated or of the
            wrong count; a choice whose condition exceeds ``condition_limit`` (naming the automatic
            choice).
        SingularMatrixError, NonFiniteError
            As for :meth:`linearize`.
        """
        if self._contacts:
            contacts.place(self, q, anchors)
        return minimal.linearize_minimal(self, q, dq, u, independent, condition_limit,
                                         residual_limit=residual_limit, anchors=anchors)

    def momentum(self, q, dq):
        """Generalized momentum ``p = dL/d dq`` (with a quaternion base, ``dL/dv``).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries).

        Returns
        -------
        p : ndarray, shape (n,)
            (``nv`` entries with a quaternion base.)

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry; with a quaternion base, a quaternion whose norm is
            off 1.
        """
        if self._free_flyer:
            return floating.momentum(self, q, dq)
        return dynamics.momentum(self, q, dq)

    def energy(self, q, dq):
        """Total mechanical energy ``KE + V`` (``dq . p - L``).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state (:attr:`config_names` order); with a quaternion base ``q`` has ``nq`` entries
            (a unit quaternion) and ``dq`` is the velocity ``v`` (``nv`` entries).

        Returns
        -------
        float
            The energy (J).

        Raises
        ------
        ValueError
            A wrong size or a non-finite entry; with a quaternion base, a quaternion whose norm is
            off 1.
        """
        if self._free_flyer:
            return floating.energy(self, q, dq)
        return dynamics.energy(self, q, dq)

    def constraint(self, q, order: int = 0, *, anchors=None):
        """Holonomic constraint values ``h(q)`` (and ``Dh``, ``D2h`` with ``order`` 1, 2), rows in
        the order of the constraints (:mod:`core.tree.constraints`).

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration.
        order : {0, 1, 2}
            The highest derivative returned.
        anchors : tuple of ndarray, optional
            Where the contacts hold their frames (:meth:`contact_anchors`; default: where they are
            at ``q``, so that their rows are zero).

        Returns
        -------
        h : ndarray, shape (nh,)
            Alone for ``order=0``.
        (h, Dh) or (h, Dh, D2h) : tuple of ndarray
            For ``order`` 1 or 2: ``Dh[r, a] = dh_r/dq_a`` (nh, n) and ``D2h[r, a, b]`` (nh, n, n).

        Raises
        ------
        ValueError
            ``order`` not 0, 1 or 2; a wrong size or non-finite entry of ``q``.
        ModelError
            With a quaternion base, ``order`` 2.
        """
        contacts.place(self, q, anchors)
        if self._free_flyer:
            if order == 2:
                self._fixed_chart("constraint(order=2)")
            return floating.constraint(self, q, order)
        return dynamics.constraint(self, q, order)

    def check_configuration(self, q, residual_limit: float = 1e-6, what: str = "the computation") -> None:
        """Check that ``q`` satisfies the holonomic constraints:
        ``|h_r(q)| <= residual_limit |Dh_r(q)|`` (about ``residual_limit`` in q from it) for every
        row. For computations that take a configuration alone, e.g. a step of the integrator.
        Without holonomic constraints nothing is checked.

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration.
        residual_limit : float
            The tolerance (> 0).
        what : str
            The computation that needs it, named in the message.

        Raises
        ------
        ValueError
            Naming the first violated row; also a wrong size or non-finite entry of ``q``, a
            ``residual_limit`` that is not positive.
        ModelError
            With a quaternion base.
        """
        self._fixed_chart("check_configuration")
        contacts.place(self, q)
        dynamics.check_configuration(self, q, residual_limit, what)

    def lagrangian_derivatives(self, q, dq, order: int = 2):
        """Derivatives of the Lagrangian ``L = KE - V`` up to third order (see
        :mod:`core.tree.lagrangian` for the index order).

        Parameters
        ----------
        q, dq : array_like, shape (n,)
            The state.
        order : {0, 1, 2, 3}
            The highest order computed.

        Returns
        -------
        Derivatives
            A namedtuple of copies: ``L`` (1,); ``Lq``, ``Lv`` (n,) from order 1; ``Lqq``, ``Lqv``,
            ``Lvv`` (n, n) from order 2; ``Lqqq``, ``Lqqv``, ``Lqvv`` (n, n, n) at order 3. Fields
            above ``order`` and the directional ones (``dLqq``, ``dLqv``, ``dLvv``) are None.

        Raises
        ------
        ValueError
            ``order`` not 0..3; a wrong size or non-finite entry.
        ModelError
            With a quaternion base.
        """
        self._fixed_chart("lagrangian_derivatives")
        return dynamics.lagrangian_derivatives(self, q, dq, order)

    def input_matrix(self, q):
        """``dF/du`` at ``q``: how each input enters the generalized forces (column ``r`` is the
        generalized force of a unit input ``r``).

        Parameters
        ----------
        q : array_like, shape (n,)
            The configuration (``nq`` entries with a quaternion base).

        Returns
        -------
        ndarray, shape (n, m)
            For the :attr:`nu` inputs (``nv x m`` with a quaternion base).

        Raises
        ------
        ValueError
            A wrong size or non-finite entry; with a quaternion base, a quaternion whose norm is off
            1.
        """
        if self._free_flyer:
            return floating.input_matrix(self, q)
        return dynamics.input_matrix(self, q)

    def _contact_stack(self, method: str, q, dq, u, **kw):
        """A stack of states of a system with contacts, one state at a time (each its anchors)."""
        q, dq = float_array("q", q, finite=False), float_array("dq", dq, finite=False)
        us = [None] * len(q) if u is None else float_array("u", u, finite=False)
        if dq.ndim != 2 or len(dq) != len(q) or len(us) != len(q):
            raise ValueError(f"{method}: a stack takes q, dq (and u) with the same number of rows, got "
                             f"{q.shape}, {dq.shape}" + ("" if u is None else f", {np.shape(u)}"))
        out = [getattr(self, method)(qi, dqi, ui, **kw) for qi, dqi, ui in zip(q, dq, us, strict=True)]
        if isinstance(out[0], tuple):
            return tuple(np.stack(parts) for parts in zip(*out, strict=True))
        return np.stack(out)

    def _fixed_chart(self, what: str) -> None:
        """Refuse ``what`` on a quaternion base (it works on coordinates with ``nq == nv``)."""
        floating.refuse(self, what, contacts=False)
