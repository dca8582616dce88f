"""Contacts against Pinocchio's constrained dynamics (test-only): ``constraintDynamics`` and
``computeConstraintDynamicsDerivatives`` with one ``RigidConstraintModel`` per contact
(``CONTACT_3D`` for a point, ``CONTACT_6D`` for a frame; ``LOCAL_WORLD_ALIGNED``; the anchor
where the frame is), at consistent states (contacts at rest) of example-robot-data's robots.

* :data:`LEGGED`: the files of legged robots, by family; their feet are :func:`core.find_feet`'s.
* :func:`consistent_state`: a random base pose and posture, a velocity that keeps the contacts at
  rest, random inputs.
* :func:`compare_contacts`: one file, every quantity's relative error and the bound it must meet.
"""
from __future__ import annotations

import warnings

import numpy as np
from urdfref import PinocchioFreeFlyer, PinocchioRobot, robot_files, robot_path

import core

#: Families of legged robots (quadrupeds, bipeds, humanoids) in example-robot-data.
LEGGED_FAMILIES = ("a1_", "alexander", "anymal", "b1_", "bolt", "centauro", "g1_", "go1", "go2", "human_",
                   "hyq", "icub", "laikago", "quadruped", "romeo", "simple_humanoid", "solo", "talos_full",
                   "talos_reduced")
#: The legged robots' files.
LEGGED = [f for f in robot_files() if any(f.startswith(family) or f"/{family}" in f for family in LEGGED_FAMILIES)]


def load(relative: str, kind: str = "point", free_flyer: bool = True, feet=None, armature=None) -> core.System:
    """The robot (mimic joints independent, as Pinocchio has them) with a contact of ``kind`` on
    each of ``feet`` (default :func:`core.find_feet`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", core.errors.ModelWarning)
        system = core.load_urdf(robot_path(relative), mimic="independent", armature=armature,
                                floating_base="quaternion" if free_flyer else False)
    for foot in core.find_feet(system) if feet is None else feet:
        system.add_contact(foot, kind)
    return system


def consistent_state(system, rng, spread: float = 0.4):
    """``(q, v, u)``: a random base pose, joints within ``spread`` of neutral, a random velocity
    projected onto the contacts' null space (``Dh v = 0``), random inputs."""
    q = system.neutral()
    if system.free_flyer:
        quat = rng.normal(size=4)
        q[:3], q[3:7] = rng.normal(size=3), quat / np.linalg.norm(quat)
        q[7:] += rng.uniform(-spread, spread, system.nq - 7)
    else:
        q += rng.uniform(-spread, spread, system.nq)
    _, Dh = system.constraint(q, 1)
    null = np.linalg.svd(Dh)[2][np.linalg.matrix_rank(Dh):].T
    return q, null @ rng.normal(size=null.shape[1]), 5.0 * rng.normal(size=system.nu)


class PinocchioContacts:
    """Pinocchio's constrained dynamics of ``system``'s robot with its contacts, in our
    coordinates (:class:`urdfref.PinocchioFreeFlyer` or :class:`urdfref.PinocchioRobot`)."""

    def __init__(self, system, relative: str, feet, kind: str, armature=None):
        import pinocchio as pin
        self.pin = pin
        path = robot_path(relative)
        joints = system.velocity_names[6:] if system.free_flyer else system.config_names
        arm = {name: armature for name in joints} if armature else None
        self.robot = (PinocchioFreeFlyer(system, path, arm) if system.free_flyer
                      else PinocchioRobot(system, path, armature=arm))
        self.feet, self.kind, self.free = list(feet), kind, bool(system.free_flyer)
        self.P = np.array(self.robot.iv)
        self.U = self.P[self.robot.inputs]

    def angular_jacobians(self):
        """Each contact frame's angular Jacobian on the world axes over our velocities (at the
        configuration of the last :meth:`evaluate`)."""
        pin, m, d = self.pin, self.robot.model, self.robot.data
        pin.computeJointJacobians(m, d)
        return [pin.getFrameJacobian(m, d, m.getFrameId(foot), pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[3:, self.P]
                for foot in self.feet]

    def models(self, q):
        """The contact models and data at ``q`` (anchors where the frames are) and the proximal
        settings (exact: no relaxation, one iteration)."""
        pin, m, d = self.pin, self.robot.model, self.robot.data
        pin.framesForwardKinematics(m, d, self.robot.configuration(q) if self.free else self.robot.state(
            q, np.zeros(len(q)), np.zeros(len(self.robot.inputs)))[0])
        contact = pin.ContactType.CONTACT_3D if self.kind == "point" else pin.ContactType.CONTACT_6D
        models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
        for foot in self.feet:
            fid = m.getFrameId(foot)
            frame = m.frames[fid]
            models.append(pin.RigidConstraintModel(contact, m, frame.parentJoint, frame.placement, 0, d.oMf[fid],
                                                   pin.ReferenceFrame.LOCAL_WORLD_ALIGNED))
        for cm in models:
            datas.append(cm.createData())
        pin.initConstraintDynamics(m, d, models, datas)
        return models, datas, pin.ProximalSettings(1e-14, 0.0, 1)

    def derivatives(self, q, v, u):
        """Pinocchio's whole call: ``constraintDynamics`` and its derivatives (the benchmark's)."""
        qp, vp, tau = self.robot.state(q, v, u)
        models, datas, prox = self._models
        self.pin.constraintDynamics(self.robot.model, self.robot.data, qp, vp, tau, models, datas, prox)
        self.pin.computeConstraintDynamicsDerivatives(self.robot.model, self.robot.data, models, datas, prox)

    def evaluate(self, q, v, u):
        """``qdd, wrenches (nc, 6), ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau`` (the
        derivatives over our coordinates and inputs, the multipliers' in our row order)."""
        pin, m, d = self.pin, self.robot.model, self.robot.data
        qp, vp, tau = self.robot.state(q, v, u)
        models, datas, prox = self._models = self.models(q)
        ddq = pin.constraintDynamics(m, d, qp, vp, tau, models, datas, prox)
        size = 3 if self.kind == "point" else 6
        wrenches = np.zeros((len(self.feet), 6))
        wrenches[:, :size] = d.lambda_c.reshape(len(self.feet), size)
        pin.computeConstraintDynamicsDerivatives(m, d, models, datas, prox)
        P, U = self.P, self.U
        return (ddq[P], wrenches, d.ddq_dq[np.ix_(P, P)], d.ddq_dv[np.ix_(P, P)], d.ddq_dtau[np.ix_(P, U)],
                d.dlambda_dq[:, P], d.dlambda_dv[:, P], d.dlambda_dtau[:, U])


def compare_contacts(relative: str, kind: str = "point", free_flyer: bool = True, feet=None, states: int = 2,
                     seed: int = 0) -> dict:
    """One file against Pinocchio: ``errors`` (the largest error of each quantity, :func:`_error`, over
    ``states`` consistent states), ``worst`` and ``tolerance`` (1e-8, scaled by ``cond(M) / 1e7``
    as :func:`urdfref.compare_file`), ``feet``, ``armature`` (0.01 on every joint in both tools
    where ``M`` is singular)."""
    system = load(relative, kind, free_flyer, feet)
    feet = core.find_feet(system) if feet is None else list(feet)
    armature = None
    pin_robot = PinocchioContacts(system, relative, feet, kind)
    M = pin_robot.robot.mass_matrix(system.neutral())
    if np.linalg.eigvalsh(M)[0] <= 1e-12 * np.abs(M).max():
        armature = 0.01
        system = load(relative, kind, free_flyer, feet, armature)
        pin_robot = PinocchioContacts(system, relative, feet, kind, armature)
    rng = np.random.default_rng(seed)
    names = ("qdd", "wrenches", "ddq_dq", "ddq_dv", "ddq_dtau", "dlam_dq", "dlam_dv", "dlam_dtau")
    errors = dict.fromkeys(names, 0.0)
    tol = 1e-8
    n = system.nv
    for _ in range(states):
        q, v, u = consistent_state(system, rng)
        A, B, Lx, Lu = system.linearize(q, v, u, multipliers=True)
        R = system.contact_anchors(q)[0]
        lam = system.constraint_forces(q, v, u)
        theirs = pin_robot.evaluate(q, v, u)
        Lq = _moment_rows(system, R, Lx[:, :n]) + _couple_rates(system, R, lam, pin_robot.angular_jacobians())
        ours = [system.qdd(q, v, u), system.contact_wrenches(q, v, u), A[n:, :n], A[n:, n:], B[n:],
                Lq, _moment_rows(system, R, Lx[:, n:]), _moment_rows(system, R, Lu)]
        for name, a, b in zip(names, ours, theirs, strict=True):
            errors[name] = max(errors[name], _error(a, b))
        tol = max(tol, 1e-8 * np.linalg.cond(pin_robot.robot.mass_matrix(q)) / 1e7)
    return dict(file=relative, feet=feet, kind=kind, errors=errors, worst=max(errors.values()), tolerance=tol,
                armature=armature)


def _error(ours, reference) -> float:
    """``||ours - reference|| / max(1, ||reference||)`` (Frobenius): relative, absolute where the
    reference is small (a robot its contacts hold completely has zero accelerations)."""
    return float(np.linalg.norm(np.asarray(ours) - reference) / max(1.0, np.linalg.norm(reference)))


def _moment_rows(system, R, block):
    """Derivatives of our multipliers with each frame contact's moment rows turned onto the world
    axes (Pinocchio's ``LOCAL_WORLD_ALIGNED`` moment; the anchors ``R`` are held)."""
    block = block.copy()
    for k, (_, kind, row) in enumerate(system.contacts):
        if kind == "frame":
            block[row + 3:row + 6] = R[k] @ block[row + 3:row + 6]
    return block


def _couple_rates(system, R, lam, jacobians):
    """The rest of a frame contact's moment derivative over ``q``: its rows' couples ``(R(q) e_a)
    x lam t`` turn with the foot (``d(R e_a)/dq_j = w_j x R e_a``, ``w_j`` the columns of the
    foot's angular Jacobian on the world axes), rows ``a`` = y, z, x with ``t`` = the anchor's z,
    x, y axis (:mod:`core.continuous.contacts`)."""
    out = np.zeros((lam.shape[0], jacobians[0].shape[1]))
    for k, (_, kind, row) in enumerate(system.contacts):
        if kind != "frame":
            continue
        for r, (a, t) in enumerate(((1, 2), (2, 0), (0, 1))):
            arm, direction = R[k][:, a], R[k][:, t]
            out[row + 3:row + 6] += lam[row + 3 + r] * np.cross(np.cross(jacobians[k].T, arm), direction).T
    return out
