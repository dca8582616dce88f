"""Contacts: frames held in place by the world (:meth:`core.System.add_contact`), as holonomic
rows of the constrained dynamics, on fixed bases and on a quaternion base.

Conventions (written once here; :mod:`core.conventions` and the guide render them):

* **anchor**: the world pose ``(R_a, p_a)`` where a contact holds its frame. By default it is
  where the frame is at the configuration of the evaluation, so a contact constrains motion, not a
  pre-set point: ``h = 0`` at every ``q``. The derivatives hold the anchors fixed (as
  Pinocchio's ``computeConstraintDynamicsDerivatives`` does). To hold a contact elsewhere, pass
  ``anchors=`` (:func:`anchors` of the configuration where the feet were put down) to ``qdd``,
  ``constraint_forces``, ``contact_wrenches``, ``linearize`` and ``linearize2``.
* **rows** (``h = t . (p1 - p2) - c``, the ``HC_DIRECTION`` kind of :mod:`core.tree.constraints`,
  ``t`` and ``c`` set per evaluation from the anchors): a point contact's three rows hold its
  origin ``p`` on the world axes, ``h_k = e_k . (p - p_a)``; a frame contact adds three rows
  ``h = a_z . (p_y - p)``, ``a_x . (p_z - p)``, ``a_y . (p_x - p)`` on its unit points
  ``p_x = p + R e_x`` (one metre along its axes; ``a_i = R_a e_i``), which vanish at the anchor
  and whose rates are the angular velocity on the anchor's axes. The contact rows follow the
  other holonomic constraints, contacts in the order they were added.
* **multipliers and wrenches**: ``M ddq + ... = F + A^T lam``, so ``lam`` is what the world
  exerts on the robot. A point contact's three multipliers are the force on the world axes (N);
  a frame contact's next three are the moment about its origin on the anchor's axes (N m).
  :func:`wrenches` gives each contact's ``[f, m]`` on the world axes at the frame's origin:
  Pinocchio's ``LOCAL_WORLD_ALIGNED`` contact forces.
* **off the constraints**: at a consistent state (contacts at rest, ``A dq = 0``) the dynamics are
  Pinocchio's ``constraintDynamics`` (its contact accelerations set to zero, no Baumgarte terms).
  Where a frame contact rotates, the rows add terms quadratic in its angular velocity; they vanish
  with their first derivatives at consistent states.
"""
from __future__ import annotations

import re

import numpy as np

from core.base.jit import njit
from core.base.records import record_at
from core.continuous.dynamics import continuous_dynamics, first_violation
from core.continuous.floating import configuration, quaternion_matrix, quaternion_rotation, tangent_map
from core.errors import OK
from core.model.compile import moving_body
from core.model.record import HC_DIRECTION
from core.tree import workspace
from core.tree.coupling import coupled_forward_kinematics

#: The rows of each kind of contact.
ROWS = {"point": 3, "frame": 6}
#: :func:`find_feet`: link names that name a foot, and those that do not although they match.
FOOT_NAMES = re.compile(r"foot|sole", re.IGNORECASE)
NOT_FEET = re.compile(r"virtual|imu|footprint|sensor|dh_frame|collision|shape", re.IGNORECASE)


def _base(system, q):
    """``(evaluated system, its q, R_b, p_b)``: the system the kernels run on and the world pose of
    its world frame (the chart's, for a quaternion base: the base pose)."""
    if system._free_flyer:
        q = configuration(system, q)
        return system._chart, np.concatenate([np.zeros(6), q[7:]]), quaternion_matrix(q[3:7]), q[:3].copy()
    from core.validation import check_vector
    return system, check_vector("q", q, system.nq, system._config_names), np.eye(3), np.zeros(3)


def _kinematics(evaluated, q):
    """The calling thread's scratch of ``evaluated`` after the forward kinematics at ``q``."""
    data = evaluated.workspace.get()[0]
    coupled_forward_kinematics(evaluated.model, q, np.zeros(q.shape[0]), data)
    return data


def _frame_poses(evaluated, q):
    """Rotations and positions of the contact frames in the evaluated system's world."""
    data = _kinematics(evaluated, q)
    index = [c.frame for c in evaluated._contact_rows]
    return data.R[index].copy(), data.p[index].copy()


def anchors(system, q) -> tuple[np.ndarray, np.ndarray]:
    """The contacts' world poses at ``q``: ``(R, p)`` of shapes ``(nc, 3, 3)`` and ``(nc, 3)``, in
    the order the contacts were added (see the module docstring)."""
    evaluated, qe, Rb, pb = _base(system, q)
    R, p = _frame_poses(evaluated, qe)
    return np.einsum("ij,cjk->cik", Rb, R), p @ Rb.T + pb


def _checked_anchors(system, given):
    """``(R, p)`` of ``given`` (a pair of arrays as :func:`anchors` returns), checked."""
    nc = len(system._contact_rows)
    try:
        R, p = (np.asarray(x, dtype=float) for x in given)
    except (TypeError, ValueError):
        raise ValueError(f"anchors: expected (R, p) as System.contact_anchors returns, got {type(given).__name__}") \
            from None
    if R.shape != (nc, 3, 3) or p.shape != (nc, 3):
        raise ValueError(f"anchors: expected R of shape {(nc, 3, 3)} and p of shape {(nc, 3)} for the contacts "
                         f"{[c.name for c in system._contact_rows]}, got {R.shape} and {p.shape}")
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
        raise ValueError("anchors: non-finite entries")
    for c, Rc in zip(system._contact_rows, R, strict=True):
        err = float(np.max(np.abs(Rc.T @ Rc - np.eye(3))))
        if err > 1e-9 or np.linalg.det(Rc) < 0:
            raise ValueError(f"anchors: the rotation of contact {c.name!r} is not a rotation "
                             f"(|R^T R - I| = {err:.3g}, det {np.linalg.det(Rc):.6g})")
    return R, p


def place(system, q, given=None, third_order: bool = False) -> None:
    """Write the contact rows' directions and offsets for an evaluation at ``q`` into the calling
    thread's scratch of the evaluated system (with ``third_order`` made first), from the anchors
    ``given`` or (None) the contact frames' poses at ``q``; nothing without contacts."""
    if system._model is None:
        system.compile()
    if not system._contact_rows or system._anchors_from_base:
        return
    evaluated, qe, Rb, pb = _base(system, q)
    data = _kinematics(evaluated, qe)
    R, p = data.R, data.p                               # (poses in the evaluated system's world)
    if given is not None:
        Rw, pw = _checked_anchors(system, given)
        R, p = R.copy(), p.copy()
        for k, contact in enumerate(evaluated._contact_rows):
            R[contact.frame], p[contact.frame] = Rb.T @ Rw[k], Rb.T @ (pw[k] - pb)
    if third_order:
        evaluated.workspace.get(third_order=True)
    records = evaluated.workspace.data_records()
    first = records[0]
    contact_rows(evaluated.model, Rb, R, p, first.hc_dir, first.hc_off)
    for data in records[1:]:
        data.hc_dir[:] = first.hc_dir
        data.hc_off[:] = first.hc_off


@njit(cache=True, nogil=True)
def contact_rows(model, Rb, R, p, t, c):
    """The rows' directions ``t`` and offsets ``c`` (:func:`place`; zero on rows of no contact),
    each contact held at the pose ``(R[f], p[f])`` of its frame ``f`` in the evaluated world, whose
    world axes are the rows of ``Rb``. The contacts are read off the model's rows
    (:func:`core.model.compile._contact_rows`): three ``HC_DIRECTION`` rows on a frame and the
    world, then for a frame contact three on its unit points and the frame."""
    nh = model.hc_kind.shape[0]
    t[:, :] = 0.0
    c[:] = 0.0
    r = 0
    while r < nh:
        if model.hc_kind[r] != HC_DIRECTION or model.hc_f2[r] >= 0:
            r += 1
            continue
        f = model.hc_f1[r]
        for i in range(3):
            s = 0.0
            for j in range(3):
                t[r + i, j] = Rb[i, j]                  # the world axis e_i in the evaluated world: Rb^T e_i
                s += Rb[i, j] * p[f, j]
            c[r + i] = s
        if r + 3 < nh and model.hc_kind[r + 3] == HC_DIRECTION and model.hc_f2[r + 3] == f:
            for j in range(3):
                t[r + 3, j], t[r + 4, j], t[r + 5, j] = R[f, j, 2], R[f, j, 0], R[f, j, 1]
            r += 6
        else:
            r += 3


def linearize(system, q, v, u, residual_limit):
    """``(A, B)`` of :meth:`core.System.linearize` for a quaternion base on its contacts held
    where they are, in one compiled call (:func:`_linearize_at`: the rows placed, the chart's
    dynamics, the consistency check, the tangent map); None when that call did not succeed, for
    the step-by-step path to name the error (:func:`place`, then
    :func:`core.continuous.floating.linearize`)."""
    from core.validation import check_vector, number
    q = configuration(system, q)
    chart = system._chart
    # (non-finite entries: the kernel finds them, and the step-by-step path names them)
    v = check_vector("v", v, system.nv, chart._config_names, finite=False)
    u = check_vector("u", u, system.nu, chart._input_names, finite=False, optional=True)
    tol = -1.0 if residual_limit is None else number("residual_limit", residual_limit, positive=True)
    n = system.nv
    A, B = np.empty((2 * n, 2 * n)), np.empty((2 * n, system.nu))
    code = _linearize_at(chart.workspace.address(), q, v, u, system.gravity, tol, A, B)
    return (A, B) if code == OK else None


@njit(cache=True, nogil=True)
def _linearize_at(address, q, v, u, gravity, tol, A, B):
    """:func:`linearize`'s kernel on the chart's Evaluation at ``address`` (``q`` with a unit
    quaternion): gravity on the base's axes, the contact rows at the frames' poses,
    ``continuous_dynamics`` at the chart's zero, the consistency check (``tol`` > 0) and the tangent
    map into ``A``, ``B``. Returns OK, or 1 (the dynamics' status is not OK) or 2 (the state is off
    the contacts)."""
    ev = record_at(address, workspace.EVALUATION)
    model, data = ev.model, ev.data
    Rb = quaternion_rotation(q[3], q[4], q[5], q[6])
    for i in range(3):                                  # R_b^T g
        data.gravity[i] = Rb[0, i] * gravity[0] + Rb[1, i] * gravity[1] + Rb[2, i] * gravity[2]
    n, m = v.shape[0], u.shape[0]
    qc = np.zeros(n)
    qc[6:] = q[7:]
    coupled_forward_kinematics(model, qc, np.zeros(n), data)
    contact_rows(model, Rb, data.R, data.p, data.hc_dir, data.hc_off)
    nc = model.hc_kind.shape[0] + model.vc_frame.shape[0]
    ddq, lam, dlam = np.empty(n), np.zeros(nc), np.zeros((nc, 2 * n + m))
    Ac, Bc = np.empty((2 * n, 2 * n)), np.empty((2 * n, m))
    h, rows = np.empty(model.hc_kind.shape[0]), np.empty((nc, n))
    continuous_dynamics(ev, qc, v, u, True, ddq, lam, Ac, Bc, dlam, h, rows)
    if ev.status[0] != OK:
        return 1
    if tol > 0.0 and first_violation(h, rows, v, tol)[0] != 0:
        return 2
    tangent_map(Ac, Bc, ddq, v[:6], A, B)
    return OK


def wrenches(system, q, lam, given=None) -> np.ndarray:
    """Each contact's ``[f, m]`` (``nc x 6``) on the world axes at its frame's origin, from the
    multipliers ``lam`` of :func:`core.continuous.dynamics.constraint_forces` (a point contact's
    moment is zero); the anchors as in :func:`place`."""
    R = anchors(system, q)[0] if given is None else _checked_anchors(system, given)[0]
    out = np.zeros((len(system._contact_rows), 6))
    for k, contact in enumerate(system._contact_rows):
        r = contact.row
        out[k, :3] = lam[r:r + 3]
        if contact.kind == "frame":
            out[k, 3:] = R[k] @ lam[r + 3:r + 6]
    return out


def mass_points(system, q) -> tuple[np.ndarray, np.ndarray]:
    """Each frame's mass and its centre of mass in the world at ``q`` (massless frames included)."""
    evaluated, qe, Rb, pb = _base(system, q)
    model = evaluated.model
    data = _kinematics(evaluated, qe)
    points = np.einsum("fij,fj->fi", data.R, model.frame_com) + data.p
    return np.asarray(model.frame_mass).copy(), points @ Rb.T + pb


def find_feet(system, q=None, tolerance: float = 0.01) -> list[str]:
    """The URDF links a legged robot stands on, by this rule: the links whose name contains
    ``foot`` or ``sole`` (not ``virtual``, ``imu``, ``footprint``, ``sensor``, ``dh_frame``,
    ``collision``, ``shape``: :data:`FOOT_NAMES`, :data:`NOT_FEET`), the lowest one per rigid
    body; without such names, the lowest links: those within ``tolerance`` (m) of the lowest
    link origin, one per rigid body; a body above another's foot (a shin) is not a foot. Heights
    are along the world z (the base frame's z with a quaternion base) at ``q`` (default
    :meth:`core.System.neutral`). Links on the base's own body are never feet.

    Parameters
    ----------
    system : System
        A robot loaded by :func:`core.load_urdf` (its :attr:`~core.System.links`).
    q : array_like, optional
        The configuration whose heights decide (default the neutral one).
    tolerance : float
        How much higher than the lowest link a nameless foot may be (m).

    Returns
    -------
    list of str
        The feet's link names, sorted: what :meth:`core.System.add_contact` takes.

    Raises
    ------
    ValueError
        A system without URDF links (:attr:`core.System.links`), or without a moving link.
    """
    links = {name: entry for name, entry in system.links.items() if name != "world"}
    if not links:
        raise ValueError("find_feet: the system has no URDF links (load it with core.load_urdf)")
    evaluated, qe, _, _ = _base(system, system.neutral() if q is None else q)
    frames = {f["name"]: f for f in system._frames}
    bodies = {name: moving_body(frames, entry[0]) for name, entry in links.items() if entry[0] in frames}
    moving = [name for name, body in bodies.items() if body is not None]
    if not moving:
        raise ValueError("find_feet: no link of the system moves")
    data = _kinematics(evaluated, qe)
    index = {name: i for i, name in enumerate(evaluated._frame_names)}
    height = {}
    for name in moving:
        frame, _, p = links[name]
        i = index[frame]
        height[name] = float((data.R[i] @ p + data.p[i])[2])
    named = [n for n in moving if FOOT_NAMES.search(n) and not NOT_FEET.search(n)]
    if not named:
        lowest = min(height.values())
        named = [n for n in moving if height[n] <= lowest + tolerance]
    feet: dict[str, str] = {}
    for name in sorted(named):
        body = bodies[name]
        assert body is not None             # (only moving links are candidates)
        if body not in feet or height[name] < height[feet[body]]:
            feet[body] = name
    above = set()                   # bodies above another foot's: the shin, not the foot
    for body in feet:
        parent = frames[body]["parent"]
        while parent in frames:
            above.add(parent)
            parent = frames[parent]["parent"]
    return sorted(name for body, name in feet.items() if body not in above)
