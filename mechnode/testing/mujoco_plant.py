"""A legged robot in MuJoCo, an independent simulator, built from the same URDF as the model.

:class:`MujocoPlant` turns a URDF and a :class:`core.System` on a quaternion base with contacts
into a MuJoCo model: the URDF's bodies, joints and inertias through MuJoCo's own URDF parser
(its visual and collision meshes dropped; no dynamics written by hand), a free joint on the root
body, a floor plane at ``z = 0`` and a collision shape on each contact frame of the system:

* a ``point`` contact gets a sphere of radius ``foot_radius`` centred at the frame's origin (a
  robot stands on it with the frame's origin ``foot_radius`` above the floor:
  ``core.standing(system, q, height=foot_radius)``);
* a ``frame`` contact gets a box of half sides ``sole`` whose lower face contains the frame's
  origin, on its x-y plane (a flat foot: ``core.standing(system, q, height=0.0)``).

Contacts in MuJoCo are soft: their stiffness is set by ``contact_time`` (MuJoCo's ``solref``
time constant, critically damped), elliptic friction cones (``friction``) and ``impratio = 10``
(little slip under tangential load). The model the controller uses holds its feet rigidly; the
plant does not, which is the point of the test. The URDF's ``<dynamics friction>`` (MuJoCo's
``frictionloss``) is not simulated, as the project never models it, and its ``<dynamics
damping>`` only with ``joint_damping=True`` (as :func:`core.load_urdf`'s option of that name).

State in the project's convention (:mod:`core.conventions`): ``q = [x, y, z, qx, qy, qz, qw,
joints]``, ``v = [base linear velocity in the base frame, base angular velocity in the base
frame, joint rates]``; MuJoCo's free joint stores ``(w, x, y, z)`` and the linear velocity on the
world axes, converted here. Joints are matched by name, so MuJoCo's order does not matter.
Inputs are the efforts on the joints named by ``system.input_names`` (MuJoCo's
``qfrc_applied``), held over each :meth:`step`.

MuJoCo (``pip install mujoco``) is a test dependency, imported when a plant is built.
"""
from __future__ import annotations

import re

import numpy as np

__all__ = ["MujocoPlant", "mujoco_model"]


def _import_mujoco():
    try:
        import mujoco
    except ImportError as exc:                                     # pragma: no cover - install hint
        raise ImportError("MuJoCo is needed for the simulated legged robot: pip install mujoco "
                          "(or the test extras: pip install 'mechnode[test]')") from exc
    return mujoco


def _urdf_for_mujoco(text: str) -> str:
    """The URDF without its meshes, with MuJoCo's compiler told to keep every body and the
    inertias as written."""
    text = re.sub(r"<visual\b.*?</visual>", "", text, flags=re.S)
    text = re.sub(r"<collision\b.*?</collision>", "", text, flags=re.S)
    compiler = ('<mujoco><compiler fusestatic="false" discardvisual="true" '
                'balanceinertia="false"/></mujoco>')
    text, found = re.subn(r"(<robot\b[^>]*>)", r"\1" + compiler, text, count=1)
    if not found:
        raise ValueError("mujoco_model: the URDF has no <robot> element")
    return text


def mujoco_model(urdf: str, system, *, foot_radius: float = 0.016, sole=(0.1, 0.05),
                 friction: float = 1.0, timestep: float = 5e-4, contact_time: float = 0.002,
                 joint_damping: bool = False):
    """The compiled ``mujoco.MjModel`` of the robot in ``urdf`` (a path) standing on a floor, with
    a collision shape on each of ``system.contacts`` (the module docstring)."""
    mujoco = _import_mujoco()
    with open(urdf, encoding="utf-8") as f:
        spec = mujoco.MjSpec.from_string(_urdf_for_mujoco(f.read()))
    spec.option.timestep = timestep
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0
    root = spec.worldbody.first_body()
    if root is None:
        raise ValueError(f"mujoco_model: {urdf} has no body")
    root.add_freejoint()
    solref = [contact_time, 1.0]
    rubbing = [friction, 0.005, 0.0001]
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[20.0, 20.0, 0.1],
                            friction=rubbing, solref=solref)
    for frame, kind, _ in system.contacts:
        body = spec.body(frame)
        if body is None:
            raise ValueError(f"mujoco_model: the contact frame {frame!r} is not a link of {urdf}")
        if kind == "point":
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[foot_radius, 0.0, 0.0],
                          friction=rubbing, solref=solref, condim=3)
        else:
            half = [float(sole[0]), float(sole[1]), 0.005]
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=half, pos=[0.0, 0.0, half[2]],
                          friction=rubbing, solref=solref, condim=3)
    model = spec.compile()
    model.dof_frictionloss[:] = 0.0
    if not joint_damping:
        model.dof_damping[:] = 0.0
    return model


def _rotation(mujoco, wxyz) -> np.ndarray:
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, np.asarray(wxyz, dtype=float))
    return R.reshape(3, 3)


class MujocoPlant:
    """The robot of ``system`` (quaternion base, contacts) simulated by MuJoCo from ``urdf``.

    Parameters
    ----------
    urdf : str
        The URDF file the system was loaded from.
    system : core.System
        On ``floating_base="quaternion"``, with its contacts (their frames get collision shapes)
        and one input per actuated joint, named as the joint.
    foot_radius, sole, friction, timestep, contact_time, joint_damping
        The contact shapes, the friction coefficient, MuJoCo's time step (s), its contact time
        constant (s) and whether the URDF's joint damping is simulated: the module docstring.
    """

    def __init__(self, urdf: str, system, *, foot_radius: float = 0.016, sole=(0.1, 0.05),
                 friction: float = 1.0, timestep: float = 5e-4, contact_time: float = 0.002,
                 joint_damping: bool = False):
        self._mj = _import_mujoco()
        if not getattr(system, "free_flyer", False):
            raise ValueError("MujocoPlant: the system must have floating_base='quaternion'")
        self.system = system
        self.model = mujoco_model(urdf, system, foot_radius=foot_radius, sole=sole, friction=friction,
                                  timestep=timestep, contact_time=contact_time, joint_damping=joint_damping)
        self.data = self._mj.MjData(self.model)
        joints = list(system.velocity_names[6:])
        self._qadr = np.array([self._joint(name).qposadr[0] for name in joints], dtype=int)
        self._vadr = np.array([self._joint(name).dofadr[0] for name in joints], dtype=int)
        self._uadr = np.array([self._joint(name).dofadr[0] for name in system.input_names], dtype=int)
        self._feet = [self.model.body(frame).id for frame, _, _ in system.contacts]

    def _joint(self, name: str):
        try:
            return self.model.joint(name)
        except KeyError:
            raise ValueError(f"MujocoPlant: the joint {name!r} of the system is not in the MuJoCo "
                             "model") from None

    @property
    def time(self) -> float:
        """The simulated time (s)."""
        return float(self.data.time)

    def set_state(self, q, v) -> None:
        """Put the robot at ``(q, v)`` (the project's convention) and recompute its kinematics."""
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        d = self.data
        d.qpos[:3] = q[:3]
        d.qpos[3:7] = [q[6], q[3], q[4], q[5]]
        d.qpos[self._qadr] = q[7:]
        d.qvel[:3] = _rotation(self._mj, d.qpos[3:7]) @ v[:3]
        d.qvel[3:6] = v[3:6]
        d.qvel[self._vadr] = v[6:]
        self._mj.mj_forward(self.model, d)

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """``(q, v)`` in the project's convention: the simulator's ground truth."""
        d = self.data
        w, x, y, z = d.qpos[3:7] / np.linalg.norm(d.qpos[3:7])
        q = np.r_[d.qpos[:3], x, y, z, w, d.qpos[self._qadr]]
        v = np.r_[_rotation(self._mj, d.qpos[3:7]).T @ d.qvel[:3], d.qvel[3:6], d.qvel[self._vadr]]
        return q, v

    def step(self, u, duration: float) -> None:
        """Apply the efforts ``u`` (``system.input_names``) for ``duration`` (s, rounded to whole
        time steps, at least one)."""
        u = np.asarray(u, dtype=float)
        if u.shape != (len(self._uadr),) or not np.all(np.isfinite(u)):
            raise ValueError(f"MujocoPlant.step: u must be {len(self._uadr)} finite efforts, got {u}")
        self.data.qfrc_applied[:] = 0.0
        self.data.qfrc_applied[self._uadr] = u
        for _ in range(max(1, int(round(duration / self.model.opt.timestep)))):
            self._mj.mj_step(self.model, self.data)

    def push(self, dv_world) -> None:
        """A push: the base's linear velocity jumps by ``dv_world`` (m/s, world axes) and the joint
        rates change so that the contacts do not move (minimum norm, the system's contact
        Jacobian): the velocity a rigid ground leaves after an impulse on the base."""
        q, v = self.state()
        v = v.copy()
        v[:3] += _rotation(self._mj, self.data.qpos[3:7]).T @ np.asarray(dv_world, dtype=float)
        Dh = self.system.constraint(q, 1, anchors=self.system.contact_anchors(q))[1]
        v[6:] = np.linalg.lstsq(Dh[:, 6:], -Dh[:, :6] @ v[:6], rcond=None)[0]
        self.set_state(q, v)

    def contact_positions(self) -> np.ndarray:
        """The contact frames' origins (k, 3) on the world axes."""
        return np.array([self.data.xpos[i] for i in self._feet])

    def normal_forces(self) -> np.ndarray:
        """The floor's normal force on each contact frame's body (k,), N."""
        out = np.zeros(len(self._feet))
        wrench = np.zeros(6)
        for c in range(self.data.ncon):
            contact = self.data.contact[c]
            body = {int(self.model.geom_bodyid[contact.geom1]), int(self.model.geom_bodyid[contact.geom2])}
            for k, foot in enumerate(self._feet):
                if foot in body:
                    self._mj.mj_contactForce(self.model, self.data, c, wrench)
                    out[k] += wrench[0]
        return out
