"""Trajectories to and from ``.npz`` files, with the names that say what each column is
(trep's ``save_trajectory`` / ``load_trajectory``).

A file holds ``t`` (N+1,), ``x`` (N+1, nx), ``u`` (N, nu), ``state_names``, ``input_names``,
``dt`` (NaN for a continuous-time trajectory), ``system`` (the system's name) and ``format``
(:data:`FORMAT`). The state and input layouts are the model's (:data:`core.CONVENTIONS`): for a
:class:`~core.MidpointVI`, ``x = [q, p, v]`` and ``u = [force inputs, next kinematic values]``;
for a :class:`~core.System`, ``x = [q, dq]`` and ``u = [force inputs, kinematic accelerations]``.

Loading never unpickles (``allow_pickle=False``): a file from elsewhere is data, not code. Given
the model it is meant for, :func:`load_trajectory` checks that the names match, in order.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from core.validation import float_array

#: The value of a file's ``format`` entry.
FORMAT = "mechnode-trajectory-1"


@dataclass(frozen=True)
class Trajectory:
    """A loaded trajectory (:func:`load_trajectory`).

    Attributes
    ----------
    t : ndarray, shape (N+1,)
        Times.
    x : ndarray, shape (N+1, nx)
        States.
    u : ndarray, shape (N, nu)
        Inputs.
    state_names, input_names : tuple of str
        The column names of ``x`` and ``u``.
    dt : float or None
        The time step; None for continuous time.
    system : str
        The system's name.
    """
    t: np.ndarray
    x: np.ndarray
    u: np.ndarray
    state_names: tuple
    input_names: tuple
    dt: float | None
    system: str


def _layout(model):
    """(state names, input names, dt, system name) of a MidpointVI or a System."""
    if hasattr(model, "dt") and hasattr(model, "system"):              # MidpointVI
        return list(model.state_names), list(model.input_names), float(model.dt), model.system.name
    if hasattr(model, "continuous_input_names"):                         # System
        return list(model.state_names), list(model.continuous_input_names), None, model.name
    raise TypeError(f"model must be a MidpointVI or a System, got {type(model).__name__}")


def save_trajectory(path, model, x, u=None, t=None) -> None:
    """Write a trajectory of ``model`` to an ``.npz`` file: ``t``, ``x``, ``u``, the state and
    input names, ``dt`` (NaN for continuous time), the system's name and :data:`FORMAT`.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.npz`` file.
    model : MidpointVI or System
        The model whose state and input names (and ``dt``, system name) are written.
    x : array_like, shape (N+1, nx)
        The states.
    u : array_like, shape (N, nu), optional
        The inputs; None writes zeros.
    t : array_like, shape (N+1,), optional
        The times; defaults to ``k dt`` for an integrator, required for a continuous system.

    Raises
    ------
    ValueError
        A shape that does not fit ``model``'s states and inputs, a missing ``t`` for a
        :class:`core.System`, an entry of ``t``, ``x`` or ``u`` that is no number (named) or
        not finite.
    TypeError
        ``model`` is neither a :class:`core.MidpointVI` nor a :class:`core.System`.
    """
    states, inputs, dt, name = _layout(model)
    x = float_array("x", x, finite=False)
    if x.ndim != 2 or x.shape[1] != len(states) or x.shape[0] < 1:
        raise ValueError(f"x must be (N+1, {len(states)}) for the states {states}, got shape {x.shape}")
    n = x.shape[0] - 1
    u = np.zeros((n, len(inputs))) if u is None else float_array("u", u, finite=False)
    if u.shape != (n, len(inputs)):
        raise ValueError(f"u must be ({n}, {len(inputs)}) for the inputs {inputs}, got shape {u.shape}")
    if t is None:
        if dt is None:
            raise ValueError("t is required for a continuous-time trajectory (a System has no dt)")
        t = dt * np.arange(n + 1)
    t = float_array("t", t, finite=False)
    if t.shape != (n + 1,):
        raise ValueError(f"t must have {n + 1} entries (one per state), got shape {t.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(x)) and np.all(np.isfinite(u))):
        raise ValueError("t, x and u must be finite")
    np.savez(os.fspath(path), format=np.array(FORMAT), t=t, x=x, u=u,
             state_names=np.array(states, dtype=str), input_names=np.array(inputs, dtype=str),
             dt=np.array(np.nan if dt is None else dt), system=np.array(name))


def load_trajectory(path, model=None) -> Trajectory:
    """Read a file written by :func:`save_trajectory` (never unpickling).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.npz`` file.
    model : MidpointVI or System, optional
        The model the file is for: its state and input names must match the file's, in order,
        and its ``dt`` the file's.

    Returns
    -------
    Trajectory

    Raises
    ------
    ValueError
        Not a trajectory file (an entry missing), another ``format``, inconsistent shapes;
        with ``model``: the first column whose name differs, or a different ``dt``.
    TypeError
        ``model`` is neither a :class:`core.MidpointVI` nor a :class:`core.System`.
    """
    with np.load(os.fspath(path), allow_pickle=False) as f:
        missing = [k for k in ("format", "t", "x", "u", "state_names", "input_names", "dt", "system")
                   if k not in f.files]
        if missing:
            raise ValueError(f"{path}: not a trajectory file (no {', '.join(missing)})")
        if str(f["format"]) != FORMAT:
            raise ValueError(f"{path}: format {str(f['format'])!r}, expected {FORMAT!r}")
        dt = float(f["dt"])
        traj = Trajectory(t=f["t"], x=f["x"], u=f["u"], state_names=tuple(f["state_names"].tolist()),
                          input_names=tuple(f["input_names"].tolist()),
                          dt=None if np.isnan(dt) else dt, system=str(f["system"]))
    n = traj.x.shape[0] - 1
    if traj.t.shape != (n + 1,) or traj.x.shape[1:] != (len(traj.state_names),) \
            or traj.u.shape != (n, len(traj.input_names)):
        raise ValueError(f"{path}: inconsistent shapes t {traj.t.shape}, x {traj.x.shape}, u {traj.u.shape} "
                         f"for {len(traj.state_names)} states and {len(traj.input_names)} inputs")
    if model is not None:
        states, inputs, dt, _ = _layout(model)
        for what, have, want in (("state", traj.state_names, states), ("input", traj.input_names, inputs)):
            if list(have) != want:
                i = next((i for i, (a, b) in enumerate(zip(have, want, strict=False)) if a != b),
                         min(len(have), len(want)))
                got = have[i] if i < len(have) else "(none)"
                exp = want[i] if i < len(want) else "(none)"
                raise ValueError(f"{path}: {what} column {i} is {got!r}, the model's is {exp!r} "
                                 f"(file: {list(have)}; model: {want})")
        if (dt is None) != (traj.dt is None) or (dt is not None and abs(dt - traj.dt) > 1e-15 * max(1.0, dt)):
            raise ValueError(f"{path}: dt {traj.dt} in the file, {dt} for the model")
    return traj
