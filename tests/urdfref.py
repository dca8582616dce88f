"""Helpers for the URDF tests and benchmark: example-robot-data's files, seeded random URDFs,
a hand-built equivalent System (no merging: extra constant frames), and Pinocchio's view of a
robot with our state and input conventions.

* :func:`robot_path` — a URDF shipped by the ``example-robot-data`` wheel (test-only dependency).
* :func:`random_urdf` — a random tree with arbitrary joint axes, ``rpy`` origins, inertial origins
  with ``rpy`` and full inertias, fixed joints (chains of them too), continuous and prismatic
  joints and links without ``<inertial>``.
* :func:`hand_built` — the same robot the way a user wrote it before ``load_urdf``: one constant
  frame per link and fixed joint, a joint frame turned by an offset rotation per non-axis joint,
  and one constant frame per centre of mass carrying the link's mass.
* :class:`PinocchioRobot` — the robot in Pinocchio (``pin``, test-only dependency), with the
  mapping of our coordinates to its ``q``, ``v`` (a continuous joint is ``(cos, sin)`` there)
  and ``qdd``, ``A``, ``B`` in our conventions (``x = [q, dq]``).
"""
from __future__ import annotations

import math
import os
import sys
import sysconfig

import numpy as np

import core
from core.io.urdf import FLOATING_BASE, _parse, _tree, rpy_rotation

ROBOTS = {
    "panda": ("panda_description/urdf/panda.urdf", {"mimic": "independent"}),
    "solo12": ("solo_description/robots/solo12.urdf", {}),
    "a1": ("a1_description/urdf/a1.urdf", {}),
    "double_pendulum": ("double_pendulum_description/urdf/double_pendulum_continuous.urdf", {}),
    "baxter": ("baxter_description/urdf/baxter.urdf", {"mimic": "independent"}),
    "talos_reduced": ("talos_data/robots/talos_reduced.urdf", {}),
    "solo12_floating": ("solo_description/robots/solo12.urdf", {"floating_base": "euler"}),
}


def robots_dir() -> str:
    """``<site-packages>/cmeel.prefix/share/example-robot-data/robots`` (the wheel's files)."""
    candidates = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]] + sys.path
    for base in candidates:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    raise FileNotFoundError("example-robot-data is not installed (pip install example-robot-data: "
                            "a test-only dependency, in the 'test' extras)")


def robot_path(relative: str) -> str:
    return os.path.join(robots_dir(), relative)


# ---------------------------------------------------------------------------------- random URDFs
def _physical_inertia(rng, scale):
    B = rng.normal(size=(3, 3))
    S = B @ B.T
    return scale * (np.trace(S) * np.eye(3) - S + 0.1 * np.eye(3))


def _origin_xml(rng, translation=0.4):
    xyz = rng.normal(scale=translation, size=3)
    rpy = rng.uniform(-math.pi, math.pi, 3)
    return (f'<origin xyz="{xyz[0]:.17g} {xyz[1]:.17g} {xyz[2]:.17g}" '
            f'rpy="{rpy[0]:.17g} {rpy[1]:.17g} {rpy[2]:.17g}"/>')


def random_urdf(seed: int, n_links: int = 12) -> str:
    """A seeded random robot (see the module docstring); joints in a random tree."""
    rng = np.random.default_rng(seed)
    links, joints = [], []
    types = ["revolute", "continuous", "prismatic", "fixed"]
    for i in range(n_links):
        parent = int(rng.integers(max(0, i - 3), i)) if i else -1
        jtype = types[(i - 1) % 4] if i <= 4 else types[int(rng.choice(4, p=[0.45, 0.15, 0.15, 0.25]))]
        # a link without inertial only on a fixed joint (a moving joint must move some mass)
        if i == 0 or jtype != "fixed" or rng.random() < 0.5:
            I = _physical_inertia(rng, float(rng.uniform(0.02, 0.2)))
            links.append(
                f'<link name="link{i}"><inertial>{_origin_xml(rng, 0.2)}'
                f'<mass value="{rng.uniform(0.3, 3.0):.17g}"/>'
                f'<inertia ixx="{I[0, 0]:.17g}" ixy="{I[0, 1]:.17g}" ixz="{I[0, 2]:.17g}" iyy="{I[1, 1]:.17g}" '
                f'iyz="{I[1, 2]:.17g}" izz="{I[2, 2]:.17g}"/></inertial>'
                f'<visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>')
        else:
            links.append(f'<link name="link{i}"/>')
        if i == 0:
            continue
        body = [f'<parent link="link{parent}"/>', f'<child link="link{i}"/>', _origin_xml(rng)]
        if jtype != "fixed":
            r = rng.random()
            if r < 0.25:   # axis-aligned, sometimes negative
                axis = np.eye(3)[int(rng.integers(3))] * (1 if rng.random() < 0.6 else -1)
            else:
                axis = rng.normal(size=3) * float(rng.uniform(0.3, 3.0))    # not normalized
            body.append(f'<axis xyz="{axis[0]:.17g} {axis[1]:.17g} {axis[2]:.17g}"/>')
            body.append('<limit lower="-2.0" upper="2.0" effort="50" velocity="3.0"/>')
        joints.append(f'<joint name="j{i}" type="{jtype}">{"".join(body)}</joint>')
    order = rng.permutation(len(joints))      # file order of joints need not be tree order
    return (f'<?xml version="1.0"?>\n<robot name="random{seed}">\n' + "\n".join(links) + "\n"
            + "\n".join(joints[k] for k in order) + "\n</robot>\n")


# ---------------------------------------------------------------------------------- hand built
def hand_built(source, floating_base: bool = False) -> core.System:
    """The robot as a plain frame tree, without merging (see the module docstring); the same
    coordinates (in the same order) and inputs as ``core.load_urdf(source, mimic="independent")``."""
    if isinstance(source, str) and not source.lstrip().startswith("<"):
        with open(source, "rb") as fh:
            source = fh.read()
    robot = _parse(source.encode() if isinstance(source, str) else source)
    links, joints, root, children = _tree(robot)
    order = core.load_urdf(source, floating_base=floating_base, mimic="independent").config_names
    s = core.System(name="hand-built")
    parent_of_root = "world"
    if floating_base:
        for var, kind in zip(FLOATING_BASE, ("tx", "ty", "tz", "rz", "ry", "rx"), strict=True):
            s.add_frame("fb_" + var, parent=parent_of_root, **{kind: var})
            parent_of_root = "fb_" + var
    s.add_frame("L_" + root, parent=parent_of_root)
    pending = [root]
    frames = []
    while pending:
        link = pending.pop(0)
        mass, com, inertia = links[link]
        if mass > 0 or np.any(inertia):
            frames.append(("C_" + link, "L_" + link, None, None, np.eye(3), com, mass, inertia))
        for jn in children[link]:
            j = joints[jn]
            R, p = j["R"], j["p"]
            if j["type"] == "fixed":
                frames.append(("L_" + j["child"], "L_" + link, None, None, R, p, 0.0, None))
            else:
                a = j["axis"]
                # a frame whose z is the axis: z = a, x any unit vector normal to it
                x = np.cross(a, [1.0, 0, 0] if abs(a[0]) < 0.9 else [0, 1.0, 0])
                x /= np.linalg.norm(x)
                Ra = np.column_stack([x, np.cross(a, x), a])
                kind = "tz" if j["type"] == "prismatic" else "rz"
                frames.append(("J_" + jn, "L_" + link, kind, jn, R @ Ra, p, 0.0, None))
                frames.append(("L_" + j["child"], "J_" + jn, None, None, Ra.T, np.zeros(3), 0.0, None))
            pending.append(j["child"])
    # declare the joint frames in the loader's coordinate order, the rest after
    rank = {name: i for i, name in enumerate(order)}
    frames.sort(key=lambda f: rank.get(f[3], len(rank)))
    for name, parent, kind, value, R, p, mass, inertia in frames:
        transform = {kind: value} if kind else {}
        s.add_frame(name, parent=parent, offset={"translation": p, "rotation": R}, mass=mass,
                    inertia=inertia, **transform)
    for name in order:
        if name in joints:
            s.add_input("torque", config=name, name=name)
    s.compile()
    assert s.config_names == order
    return s


# ---------------------------------------------------------------------------------- Pinocchio
class PinocchioRobot:
    """A URDF in Pinocchio with our coordinates: ``floating_base`` puts the same six joints
    (PX, PY, PZ, RZ, RY, RX, the last one carrying the root link) under the URDF, built with
    Pinocchio's API; mimic joints are independent joints (its default)."""

    def __init__(self, system: core.System, source, floating_base: bool = False, armature=None, locked=None):
        import pinocchio as pin
        self.pin = pin
        xml = source if isinstance(source, str) and source.lstrip().startswith("<") else open(source).read()
        if floating_base:
            prefix = pin.Model()
            parent = 0
            for name, joint in zip(FLOATING_BASE[:-1], (pin.JointModelPX(), pin.JointModelPY(),
                                                        pin.JointModelPZ(), pin.JointModelRZ(),
                                                        pin.JointModelRY()), strict=True):
                parent = prefix.addJoint(parent, joint, pin.SE3.Identity(), name)
            frame = prefix.addJointFrame(parent)
            body = pin.buildModelFromXML(xml, pin.JointModelRX())
            self.model = pin.appendModel(prefix, body, frame, pin.SE3.Identity())
        else:
            self.model = pin.buildModelFromXML(xml)
        if locked:          # Pinocchio's reduced model, locked joints at their values
            full = self.model
            q_ref = pin.neutral(full)
            for name, value in locked.items():
                joint = full.joints[full.getJointId(name)]
                if joint.nq == 2:
                    q_ref[joint.idx_q:joint.idx_q + 2] = math.cos(value), math.sin(value)
                else:
                    q_ref[joint.idx_q] = value
            self.model = pin.buildReducedModel(full, [full.getJointId(n) for n in locked], q_ref)
        if armature:        # {joint name: rotor inertia}
            for name, value in armature.items():
                self.model.armature[self.model.joints[self.model.getJointId(name)].idx_v] = value
        self.data = self.model.createData()
        m = self.model
        self.iq, self.iv, self.continuous = [], [], []
        for name in system.config_names:
            jid = m.getJointId("root_joint" if name == FLOATING_BASE[-1] else name)
            assert jid < m.njoints, f"no Pinocchio joint {name:.17g}"
            joint = m.joints[jid]
            self.iq.append(joint.idx_q)
            self.iv.append(joint.idx_v)
            self.continuous.append(joint.nq == 2)
        assert m.nv == system.nq, (m.nv, system.nq)
        # our coordinates in Pinocchio's order (urdfdom's depth-first order, children by name)
        assert self.iv == sorted(self.iv), ("coordinate order differs from Pinocchio's", self.iv)
        self.n = system.nq
        self.inputs = [system.config_names.index(u) for u in system.input_names]

    def state(self, q, dq, u):
        m = self.model
        qp, vp, tau = np.zeros(m.nq), np.zeros(m.nv), np.zeros(m.nv)
        for k in range(self.n):
            if self.continuous[k]:
                qp[self.iq[k]], qp[self.iq[k] + 1] = math.cos(q[k]), math.sin(q[k])
            else:
                qp[self.iq[k]] = q[k]
            vp[self.iv[k]] = dq[k]
        for r, k in enumerate(self.inputs):
            tau[self.iv[k]] = u[r]
        return qp, vp, tau

    def qdd(self, q, dq, u):
        return self.pin.aba(self.model, self.data, *self.state(q, dq, u))[self.iv]

    def mass_matrix(self, q):
        M = self.pin.crba(self.model, self.data, self.state(q, np.zeros(self.n), np.zeros(len(self.inputs)))[0])
        return (np.triu(M) + np.triu(M, 1).T)[np.ix_(self.iv, self.iv)]

    def linearize(self, q, dq, u):
        """``(A, B)`` for ``x = [q, dq]`` from ``computeABADerivatives`` (upper triangle of
        ``Minv`` mirrored)."""
        self.pin.computeABADerivatives(self.model, self.data, *self.state(q, dq, u))
        d, n, P = self.data, self.n, np.array(self.iv)
        Minv = np.triu(d.Minv) + np.triu(d.Minv, 1).T
        A = np.block([[np.zeros((n, n)), np.eye(n)],
                      [d.ddq_dq[np.ix_(P, P)], d.ddq_dv[np.ix_(P, P)]]])
        B = np.vstack([np.zeros((n, len(self.inputs))), Minv[np.ix_(P, P[self.inputs])]])
        return A, B


class PinocchioFreeFlyer:
    """A URDF in Pinocchio on a ``JointModelFreeFlyer`` root, with our quaternion base's
    coordinates (the same ``[x, y, z, qx, qy, qz, qw]`` and base velocities, our joint order):
    ``qdd`` and, in the tangent space, ``A = [[-ad(v_base), I], [ddq_dq, ddq_dv]]`` (``ad`` from
    Pinocchio's ``Motion.action``), ``B = [[0], [Minv]]``; ``integrate``, ``difference``."""

    def __init__(self, system: core.System, source, armature=None):
        import pinocchio as pin
        self.pin = pin
        xml = source if isinstance(source, str) and source.lstrip().startswith("<") else open(source).read()
        self.model = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
        if armature:
            for name, value in armature.items():
                self.model.armature[self.model.joints[self.model.getJointId(name)].idx_v] = value
        self.data = self.model.createData()
        m = self.model
        joints = system.velocity_names[6:]
        self.iq = [m.joints[m.getJointId(n)].idx_q for n in joints]
        self.iv = list(range(6)) + [m.joints[m.getJointId(n)].idx_v for n in joints]
        self.continuous = [m.joints[m.getJointId(n)].nq == 2 for n in joints]
        assert m.nv == system.nv, (m.nv, system.nv)
        self.n = system.nv
        self.inputs = [system.velocity_names.index(u) for u in system.input_names]

    def configuration(self, q):
        qp = np.zeros(self.model.nq)
        qp[:7] = q[:7]
        for k, (iq, c) in enumerate(zip(self.iq, self.continuous, strict=True)):
            if c:
                qp[iq], qp[iq + 1] = math.cos(q[7 + k]), math.sin(q[7 + k])
            else:
                qp[iq] = q[7 + k]
        return qp

    def state(self, q, v, u):
        vp, tau = np.zeros(self.model.nv), np.zeros(self.model.nv)
        vp[self.iv] = v
        for r, k in enumerate(self.inputs):
            tau[self.iv[k]] = u[r]
        return self.configuration(q), vp, tau

    def qdd(self, q, v, u):
        return self.pin.aba(self.model, self.data, *self.state(q, v, u))[self.iv]

    def linearize(self, q, v, u):
        pin, d, n, P = self.pin, self.data, self.n, np.array(self.iv)
        pin.computeABADerivatives(self.model, d, *self.state(q, v, u))
        Minv = np.triu(d.Minv) + np.triu(d.Minv, 1).T
        top = np.hstack([np.zeros((n, n)), np.eye(n)])
        top[:6, :6] = -pin.Motion(np.asarray(v[:6], float)).action
        A = np.vstack([top, np.hstack([d.ddq_dq[np.ix_(P, P)], d.ddq_dv[np.ix_(P, P)]])])
        B = np.vstack([np.zeros((n, len(self.inputs))), Minv[np.ix_(P, P[self.inputs])]])
        return A, B

    def mass_matrix(self, q):
        M = self.pin.crba(self.model, self.data, self.configuration(q))
        return np.triu(M) + np.triu(M, 1).T


def robot_files() -> list[str]:
    """Every URDF file of example-robot-data, relative to :func:`robots_dir`, sorted."""
    root = robots_dir()
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root)
                  for f in files if f.endswith(".urdf"))


def random_base_state(system, rng):
    """``(q, v, u)``: a random quaternion base pose, joints in [-1, 1], velocities and inputs."""
    q = system.neutral()
    if system.free_flyer:
        quat = rng.normal(size=4)
        q[:3], q[3:7] = rng.normal(size=3), quat / np.linalg.norm(quat)
        q[7:] = rng.uniform(-1.0, 1.0, system.nq - 7)
    else:
        q[:] = rng.uniform(-1.0, 1.0, system.nq)
    return q, rng.normal(size=system.nv), 5.0 * rng.normal(size=system.nu)


def compare_file(relative: str, seed: int = 0, states: int = 3, free_flyer: bool = False) -> dict:
    """One example-robot-data file against Pinocchio (``buildModelFromUrdf``), as a user loads
    it: ``pinocchio`` (whether Pinocchio loads it, else its error), ``loaded`` (whether
    ``core.load_urdf`` loads it with the default options), ``warnings`` (the messages of that
    load), ``nq``; where both load and the robot has coordinates, ``qdd``, ``A``, ``B`` are
    compared at ``states`` random states (fixed base, mimic joints independent, the inertias as
    written) and ``worst`` is the largest relative error, ``tolerance`` the bound it must meet:
    1e-8, scaled by ``cond(M) / 1e7`` where ``M`` is worse conditioned (double precision loses
    ``log10 cond(M)`` digits in both tools). A robot whose ``M`` is singular (links without mass,
    Romeo's fingers) is compared with ``armature`` 0.01 on every joint in both (``armature``
    says so)."""
    import warnings

    import pinocchio as pin
    path = robot_path(relative)
    out = dict(file=relative, pinocchio=True, loaded=False, warnings=[], nq=None, worst=None,
               tolerance=None, armature=None)
    try:
        pin.buildModelFromUrdf(path)
    except Exception as exc:  # noqa: BLE001 - any refusal of Pinocchio's
        out["pinocchio"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            default = core.load_urdf(path)
    except core.errors.ModelError as exc:
        out["error"] = str(exc)
        return out
    out.update(loaded=True, nq=default.nq,
               warnings=[str(w.message) for w in caught if issubclass(w.category, core.errors.ModelWarning)])
    if out["pinocchio"] is not True:
        return out
    base = "quaternion" if free_flyer else False
    Robot = PinocchioFreeFlyer if free_flyer else PinocchioRobot
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", core.errors.ModelWarning)
        try:
            system = core.load_urdf(path, mimic="independent", floating_base=base)
        except core.errors.ModelError as exc:      # (a file whose root is 'world' cannot float)
            out["error"] = str(exc)
            return out
        robot = Robot(system, path)
        joints = system.velocity_names[6:] if free_flyer else system.config_names
        M = robot.mass_matrix(system.neutral()) if system.nv else np.zeros((0, 0))
        if system.nv and np.linalg.eigvalsh(M)[0] <= 1e-12 * np.abs(M).max():
            out["armature"] = 0.01
            system = core.load_urdf(path, mimic="independent", armature=0.01, floating_base=base)
            robot = Robot(system, path, armature={n: 0.01 for n in joints})
    out["nq_independent"] = system.nq
    if system.nq == 0:
        return out
    rng = np.random.default_rng(seed)
    worst, tol = 0.0, 1e-8
    for _ in range(states):
        q, dq, u = random_base_state(system, rng)
        A, B = system.linearize(q, dq, u)
        Ap, Bp = robot.linearize(q, dq, u)
        worst = max(worst, relative_error(system.qdd(q, dq, u), robot.qdd(q, dq, u)),
                    relative_error(A, Ap), relative_error(B, Bp))
        tol = max(tol, 1e-8 * np.linalg.cond(robot.mass_matrix(q)) / 1e7)
    out.update(worst=worst, tolerance=tol)
    return out


def relative_error(ours, reference) -> float:
    """``||ours - reference|| / ||reference||`` (Frobenius; reference non-zero)."""
    ours, reference = np.asarray(ours, float), np.asarray(reference, float)
    return float(np.linalg.norm(ours - reference) / max(np.linalg.norm(reference), 1e-300))


__all__ = ["ROBOTS", "robot_path", "robots_dir", "robot_files", "compare_file", "random_urdf", "hand_built",
           "PinocchioRobot", "PinocchioFreeFlyer", "random_base_state", "relative_error", "rpy_rotation"]
