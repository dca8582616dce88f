"""Contact-consistent LQR: balance gains for a robot standing on its contacts (Mason, Rotella,
Schaal & Righetti, "Balancing and Walking Using Full Dynamics LQR Control With Contact
Constraints", 2016; :func:`balance_lqr`).

About a standing equilibrium ``(q̄, v = 0, ū)`` (:func:`core.standing`), the contacts confine the
motion to the constraint-consistent subspace ``[δ; v] = T x_i`` of
:meth:`core.System.linearize_minimal` (independent coordinates and speeds, chosen by pivoting;
``p = 2 (nv - nh)`` of them). That subspace is invariant under the linearization there, so the
reduced pair ``(A_i, B_i)`` is the robot's linear model on its feet: LQR is solved there, with the
weights of the full tangent state mapped in (``Q_i = Tᵀ Q T``), and the gain mapped back,
``K = K_i T⁺`` (``T⁺ T = I``: on consistent states it is ``K_i x_i``; the components a
measurement puts off the constraints are projected away rather than amplified). The command is
``u = ū - K [q ⊖ q̄; v]`` (:meth:`core.System.difference` for ``q ⊖ q̄``).

A controller that holds its command over a period ``dt`` (a digital loop at ``1/dt`` Hz) takes
``dt``: the reduced pair is discretized exactly (zero-order hold, the matrix exponential,
:func:`core.control.body_motion.discretize`) and the gain is the discrete LQR's, with the weights
``Q dt`` and ``R dt``. The continuous gain's fastest closed-loop modes can be far beyond such a
loop's rate (Solo12 with ``Q = diag(100, 1)``, ``R = 0.1``: 1805 rad/s), and held over 2 ms they
make the loop unstable; the discrete gain is stable at its rate by construction.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.control.body_motion import discretize
from core.control.riccati import controllability, dlqr, lqr
from core.validation import float_array, time_step

__all__ = ["BalanceGain", "balance_lqr"]


@dataclass(frozen=True, eq=False)
class BalanceGain:
    """A contact-consistent LQR gain (:func:`balance_lqr`).

    Attributes
    ----------
    K : ndarray, shape (nu, 2 nv)
        The gain on the full tangent state ``[q ⊖ q̄, v]``: ``u = ū - K x``.
    eigenvalues : ndarray, shape (p,)
        The closed loop's (``A_i - B_i K_i``): every real part negative, or with ``dt`` every
        modulus below 1.
    K_minimal : ndarray, shape (nu, p)
        The gain on the independent state ``x_i``.
    P : ndarray, shape (p, p)
        The CARE solution in the independent state.
    A, B : ndarray
        The reduced pair (:meth:`core.System.linearize_minimal`), with ``dt`` discretized.
    state_names : list of str
        The independent state's names.
    T : ndarray, shape (2 nv, p)
        ``[δ; v] = T x_i``.
    dt : float or None
        The period the gain was designed for (None: continuous).
    """

    K: np.ndarray
    eigenvalues: np.ndarray
    K_minimal: np.ndarray
    P: np.ndarray
    A: np.ndarray
    B: np.ndarray
    state_names: list
    T: np.ndarray
    dt: float | None = None


def balance_lqr(system, q, u, Q=None, R=None, anchors=None, dt: float | None = None) -> BalanceGain:
    """The contact-consistent LQR gain about the standing state ``(q, v = 0, u)`` (the module
    docstring), e.g. ``core.standing(system, q)``'s ``q`` and ``u``.

    Parameters
    ----------
    system : System
        With contacts (:meth:`core.System.add_contact`), on a quaternion or a fixed base.
    q : array_like, shape (nq,)
        The standing configuration.
    u : array_like, shape (nu,)
        The inputs that hold it.
    Q : array_like, shape (2 nv, 2 nv), optional
        The weight of the full tangent state ``[δ, v]`` (default the identity).
    R : array_like, shape (nu, nu), optional
        The weight of the inputs (default the identity).
    anchors : tuple of ndarray, optional
        Where the contacts hold their frames (default: where they are at ``q``).
    dt : float, optional
        The period over which the command is held (s): the discrete gain for that loop (the
        module docstring), within :data:`core.validation.TIME_STEP_RANGE`; default the continuous
        gain.

    Returns
    -------
    BalanceGain

    Raises
    ------
    numpy.linalg.LinAlgError
        No stabilizing gain: the message names the directions the inputs cannot move
        (:func:`core.controllability`'s ``uncontrollable``).
    ValueError
        A state off the contacts, wrong sizes, weights that are not symmetric positive
        (semi)definite, a ``dt`` that is not a positive number or is outside
        :data:`core.validation.TIME_STEP_RANGE`.
    """
    n = system.nv
    A, B, info = system.linearize_minimal(q, np.zeros(n), u, anchors=anchors)
    T = info.T
    Q = np.eye(2 * n) if Q is None else float_array("Q", Q)
    if Q.shape != (2 * n, 2 * n):
        raise ValueError(f"Q must have shape {(2 * n, 2 * n)} (the tangent state [δ, v]), got {Q.shape}")
    R = np.eye(B.shape[1]) if R is None else R
    Q_i = T.T @ Q @ T
    if dt is not None:
        dt = time_step("dt", dt)
        A, B = discretize(A, B, dt)
        Q_i, R = Q_i * dt, np.asarray(R, dtype=float) * dt
    try:
        K_i, P = (dlqr if dt is not None else lqr)(A, B, Q_i, R)
    except np.linalg.LinAlgError as exc:
        modes = controllability(A, B, names=info.state_names).uncontrollable
        if not modes:
            raise
        raise np.linalg.LinAlgError(f"balance_lqr: no stabilizing gain on the contacts: the inputs cannot move "
                                    f"{len(modes)} direction(s) of the standing robot: {'; '.join(modes)} "
                                    f"({exc})") from None
    K = K_i @ np.linalg.pinv(T)
    return BalanceGain(K, np.linalg.eigvals(A - B @ K_i), K_i, P, A, B, info.state_names, T, dt)
