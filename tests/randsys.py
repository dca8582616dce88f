"""Seeded random tree-structured mechanical systems, and an independent numpy reference model.

``random_system(seed, ...)`` returns ``(system, q0, dq0, u0)``:

* a random tree of 3..15 frames (plus anchor frames created for ``coincide`` constraints) that
  mixes every transform kind ``tx, ty, tz, rx, ry, rz``, each either driven by a configuration
  variable or constant, with random constant offsets (translation and rpy / 3x3 rotation),
  masses with full (non-diagonal, positive definite) inertias, configuration and frame springs,
  damping, torque / force / moment / wrench inputs and gravity in a random direction;
* 0..3 holonomic constraints (distance, plane, coincide) and optionally velocity constraints,
  made consistent at the random ``q0`` (each constant is chosen so that ``h(q0) = 0``);
* ``dq0`` projected onto the null space of the constraint rows at ``q0``;
* a random input ``u0``.

Everything is reproducible from the seed (``numpy.random.default_rng``). The generated system
carries its plain-dict description as ``system.spec`` and a :class:`Reference` as
``system.reference``: a deliberately naive, independent numpy implementation of the documented
conventions (poses ``g = G_offset X_kind(value)``, KE with the mass at the frame's centre of mass
``com`` (default its origin) and the inertia about it along the frame's axes, V from gravity and
springs, constraints, velocity constraint rows, generalized forces by virtual work). Tests use it
to build consistent data and to check values; derivatives of the library are checked against
finite differences of the library itself.
"""
from __future__ import annotations

import math

import numpy as np

import core

KINDS = ("tx", "ty", "tz", "rx", "ry", "rz")
AXIS = {"x": 0, "y": 1, "z": 2}
COMPONENTS = ("fx", "fy", "fz", "mx", "my", "mz")


# ---------------------------------------------------------------------------------- helpers
def rpy_matrix(r: float, p: float, y: float) -> np.ndarray:
    """Rotation for roll-pitch-yaw about fixed x, then y, then z: Rz(y) Ry(p) Rx(r)."""
    return axis_rotation(2, y) @ axis_rotation(1, p) @ axis_rotation(0, r)


def axis_rotation(axis: int, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    if axis == 0:
        return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])
    if axis == 1:
        return np.array([[c, 0, s], [0, 1.0, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def random_rotation(rng) -> np.ndarray:
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q @ np.diag(np.sign(np.diag(R)))
    if np.linalg.det(Q) < 0:
        Q[:, 0] = -Q[:, 0]
    return Q


def random_inertia(rng, scale: float) -> np.ndarray:
    """A physical inertia with clearly non-zero off-diagonal entries: ``tr(S) 1 - S`` for the
    PSD second moment ``S = B B^T`` of a mass distribution (principal moments ``s_j + s_k``, so
    the triangle inequality holds), plus a small positive multiple of the identity."""
    B = rng.normal(size=(3, 3))
    S = B @ B.T
    inertia = scale * (np.trace(S) * np.eye(3) - S + 0.2 * np.eye(3))
    return 0.5 * (inertia + inertia.T)


def frame_transform(frame: dict):
    """(kind, value) of a frame description: kind in KINDS or None."""
    kinds = [k for k in KINDS if k in frame]
    if not kinds:
        return None, 0.0
    return kinds[0], frame[kinds[0]]


# ---------------------------------------------------------------------------------- reference
class Reference:
    """Plain numpy evaluation of a system description (the dict given to ``core.load_system``)."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.frames = {f["name"]: f for f in spec["frames"]}
        names = []
        for f in spec["frames"]:  # documented rule: first appearance in ``frames``
            kind, value = frame_transform(f)
            if isinstance(value, str) and value not in names:
                names.append(value)
        self.config_names = names
        self.index = {n: i for i, n in enumerate(names)}
        self.n = len(names)
        self.gravity = np.asarray(spec.get("gravity", [0.0, 0.0, -9.81]), float)
        # inputs as (kind, target, component): kind "torque" (target = variable index) or
        # "wrench" (target = frame name, component 0..5)
        self.inputs = []
        for inp in spec.get("inputs", []):
            t = inp.get("type", "torque")
            if t == "torque":
                self.inputs.append(("torque", self.index[inp["config"]], -1))
            elif t == "wrench":
                self.inputs.extend(("wrench", inp["frame"], c) for c in range(6))
            else:
                self.inputs.append(("wrench", inp["frame"], AXIS[inp["axis"]] + (0 if t == "force" else 3)))
        self.nu = len(self.inputs)

    # -- kinematics
    def chain(self, name: str) -> list:
        """Frames from the root down to ``name`` (inclusive)."""
        out = []
        while name != "world":
            out.append(name)
            name = self.frames[name].get("parent", "world")
        return out[::-1]

    def poses(self, q):
        """World (R, p) of every frame, and per variable (is_rotation, axis, origin) in world."""
        q = np.asarray(q, float)
        R = {"world": np.eye(3)}
        p = {"world": np.zeros(3)}
        joints = {}

        def visit(name):
            if name in R:
                return
            f = self.frames[name]
            parent = f.get("parent", "world")
            visit(parent)
            off = f.get("offset") or {}
            rot = off.get("rotation", [0.0, 0.0, 0.0])
            rot = np.asarray(rot, float)
            Roff = rpy_matrix(*rot) if rot.shape == (3,) else rot
            poff = np.asarray(off.get("translation", [0.0, 0.0, 0.0]), float)
            Rpre = R[parent] @ Roff
            ppre = p[parent] + R[parent] @ poff
            kind, value = frame_transform(f)
            x = q[self.index[value]] if isinstance(value, str) else float(value)
            if kind is None:
                R[name], p[name] = Rpre, ppre
            elif kind[0] == "t":
                a = AXIS[kind[1]]
                R[name], p[name] = Rpre, ppre + x * Rpre[:, a]
            else:
                a = AXIS[kind[1]]
                R[name], p[name] = Rpre @ axis_rotation(a, x), ppre
            if isinstance(value, str):
                joints[value] = (kind[0] == "r", Rpre[:, AXIS[kind[1]]].copy(), ppre.copy())

        for name in self.frames:
            visit(name)
        return R, p, joints

    def joints_above(self, name: str) -> list:
        out = []
        if name == "world":
            return out
        for f in self.chain(name):
            kind, value = frame_transform(self.frames[f])
            if isinstance(value, str):
                out.append(self.index[value])
        return out

    def point_jacobian(self, q, name: str, local=(0.0, 0.0, 0.0), kin=None):
        """d x / d q (3 x n) of the world point with coordinates ``local`` in frame ``name``."""
        R, p, joints = kin if kin is not None else self.poses(q)
        x = R[name] @ np.asarray(local, float) + p[name]
        J = np.zeros((3, self.n))
        for i in self.joints_above(name):
            is_rot, axis, origin = joints[self.config_names[i]]
            J[:, i] = np.cross(axis, x - origin) if is_rot else axis
        return J

    def angular_jacobian(self, q, name: str, kin=None):
        R, p, joints = kin if kin is not None else self.poses(q)
        J = np.zeros((3, self.n))
        for i in self.joints_above(name):
            is_rot, axis, _ = joints[self.config_names[i]]
            if is_rot:
                J[:, i] = axis
        return J

    # -- energy
    def mass_matrix(self, q):
        kin = self.poses(q)
        R = kin[0]
        M = np.zeros((self.n, self.n))
        for name, f in self.frames.items():
            m = float(f.get("mass", 0.0))
            inertia = f.get("inertia")
            if m > 0:
                Jp = self.point_jacobian(q, name, local=f.get("com", (0.0, 0.0, 0.0)), kin=kin)
                M += m * Jp.T @ Jp
            if inertia is not None:
                inertia = np.asarray(inertia, float)
                inertia = np.diag(inertia) if inertia.shape == (3,) else inertia
                Jw = self.angular_jacobian(q, name, kin=kin)
                M += Jw.T @ (R[name] @ inertia @ R[name].T) @ Jw
        for name, a in (self.spec.get("armature") or {}).items():      # rotor inertia: M's diagonal
            M[self.index[name], self.index[name]] += a
        return M

    def potential(self, q):
        q = np.asarray(q, float)
        R, p, _ = self.poses(q)
        V = 0.0
        for name, f in self.frames.items():
            com = R[name] @ np.asarray(f.get("com", (0.0, 0.0, 0.0)), float) + p[name]
            V -= float(f.get("mass", 0.0)) * self.gravity @ com
        for s in self.spec.get("springs", []):
            if s.get("type", "config") == "config":
                d = q[self.index[s["config"]]] - s.get("rest", 0.0)
                if s.get("polynomial") is not None:
                    V += sum(c * d ** (k + 1) / (k + 1) for k, c in enumerate(s["polynomial"]))
                else:
                    V += 0.5 * s["stiffness"] * d ** 2
            else:
                r = np.linalg.norm(p[s["frame1"]] - p[s["frame2"]])
                V += 0.5 * s["stiffness"] * (r - s.get("rest_length", 0.0)) ** 2
        return V

    def kinetic(self, q, dq):
        dq = np.asarray(dq, float)
        return 0.5 * dq @ self.mass_matrix(q) @ dq

    def lagrangian(self, q, dq):
        return self.kinetic(q, dq) - self.potential(q)

    def energy(self, q, dq):
        return self.kinetic(q, dq) + self.potential(q)

    # -- constraints
    def _holonomic_rows(self):
        rows = []
        for c in self.spec.get("constraints", []):
            t = c["type"]
            if t == "distance":
                rows.append(("distance", c["frame1"], c["frame2"], 0, float(c["distance"])))
            elif t == "plane":
                rows.append(("plane", c["frame"], c.get("plane_frame", "world"), AXIS[c.get("normal", "z")],
                             float(c.get("offset", 0.0))))
            elif t == "coincide":
                for a in c.get("axes", ["x", "y", "z"]):
                    rows.append(("coincide", c["frame1"], c["frame2"], AXIS[a], 0.0))
        return rows

    def holonomic(self, q):
        R, p, _ = self.poses(q)
        h = []
        for kind, f1, f2, axis, value in self._holonomic_rows():
            w = p[f1] - p[f2]
            if kind == "distance":
                h.append(w @ w - value ** 2)
            elif kind == "plane":
                h.append(R[f2][:, axis] @ w - value)
            else:
                h.append(w[axis])
        return np.array(h)

    def holonomic_jacobian(self, q):
        kin = self.poses(q)
        R, p, _ = kin
        rows = []
        for kind, f1, f2, axis, _value in self._holonomic_rows():
            w = p[f1] - p[f2]
            W = self.point_jacobian(q, f1, kin=kin) - self.point_jacobian(q, f2, kin=kin)
            if kind == "distance":
                rows.append(2.0 * w @ W)
            elif kind == "plane":
                n = R[f2][:, axis]
                dn = np.cross(self.angular_jacobian(q, f2, kin=kin).T, n).T  # 3 x n: w_i x n
                rows.append(n @ W + w @ dn)
            else:
                rows.append(W[axis])
        return np.array(rows).reshape(len(rows), self.n)

    def velocity_rows(self, q):
        """Rows a_r(q) of the velocity constraints: n_f . dp_f/dq with n_f an axis of frame f."""
        kin = self.poses(q)
        rows = []
        for c in self.spec.get("velocity_constraints", []):
            n = kin[0][c["frame"]][:, AXIS[c["axis"]]]
            rows.append(n @ self.point_jacobian(q, c["frame"], kin=kin))
        return np.array(rows).reshape(len(rows), self.n)

    def constraint_rows(self, q):
        """All rows of A(q): holonomic Jacobian rows, then velocity constraint rows."""
        return np.vstack([self.holonomic_jacobian(q), self.velocity_rows(q)])

    # -- forces
    def generalized_force(self, q, dq, u):
        """F = torques - damping dq + J^T (body wrenches) + dampers between frames, by virtual
        work (a damper's force -c xdot along p1 - p2, x = |p1 - p2|, does the work
        -c xdot dx)."""
        q, dq, u = (np.asarray(x, float) for x in (q, dq, u))
        kin = self.poses(q)
        F = np.zeros(self.n)
        for d in self.spec.get("damping", []):
            i = self.index[d["config"]]
            F[i] -= d["coefficient"] * dq[i]
        for d in self.spec.get("dampers", []):
            w = kin[1][d["frame1"]] - kin[1][d["frame2"]]
            W = self.point_jacobian(q, d["frame1"], kin=kin) - self.point_jacobian(q, d["frame2"], kin=kin)
            dx = w @ W / np.linalg.norm(w)          # dx/dq
            F -= d["coefficient"] * (dx @ dq) * dx
        for r, (kind, target, comp) in enumerate(self.inputs):
            if kind == "torque":
                F[target] += u[r]
                continue
            direction = kin[0][target][:, comp % 3]
            if comp < 3:
                F += self.point_jacobian(q, target, kin=kin).T @ direction * u[r]
            else:
                F += self.angular_jacobian(q, target, kin=kin).T @ direction * u[r]
        return F


# ---------------------------------------------------------------------------------- building
def build_system(spec: dict, use_api: bool = False):
    """A :class:`core.System` from ``spec``: through ``core.load_system`` or the Python API."""
    if not use_api:
        loaded = {k: v for k, v in spec.items() if k != "velocity_constraints"}
        loaded["constraints"] = list(spec.get("constraints", [])) + [
            dict(type="velocity", **c) for c in spec.get("velocity_constraints", [])]
        return core.load_system(loaded)
    s = core.System(gravity=spec["gravity"], name=spec.get("name", "system"))
    for f in spec["frames"]:
        kind, value = frame_transform(f)
        transform = {kind: value} if kind else {}
        s.add_frame(f["name"], parent=f.get("parent", "world"), mass=f.get("mass", 0.0),
                    inertia=f.get("inertia"), offset=f.get("offset"), com=f.get("com"), **transform)
    for c in spec.get("constraints", []):
        c = dict(c)
        s.add_constraint(c.pop("type"), **c)
    for c in spec.get("velocity_constraints", []):
        s.add_constraint("velocity", **c)
    for sp in spec.get("springs", []):
        sp = dict(sp)
        s.add_spring(sp.pop("type"), **sp)
    for d in spec.get("damping", []):
        s.add_damping(d["config"], d["coefficient"])
    for d in spec.get("dampers", []):
        s.add_damper(d["frame1"], d["frame2"], d["coefficient"])
    for inp in spec.get("inputs", []):
        inp = dict(inp)
        s.add_input(inp.pop("type"), **inp)
    for name, a in (spec.get("armature") or {}).items():
        s.add_armature(name, a)
    return s


def _rank_ok(C: np.ndarray, ratio: float = 0.05) -> bool:
    """Rows independent with a comfortable margin (smallest / largest singular value)."""
    if C.shape[0] == 0:
        return True
    sv = np.linalg.svd(C, compute_uv=False)
    return sv.size == C.shape[0] and sv[-1] > ratio * max(sv[0], 1e-300) and sv[-1] > 1e-2


def null_space_projection(C: np.ndarray, v: np.ndarray) -> np.ndarray:
    if C.shape[0] == 0:
        return v
    return v - C.T @ np.linalg.solve(C @ C.T, C @ v)


def random_system(seed: int, *, n_frames=(3, 15), constraints=None, velocity_constraints=None,
                  forces: bool = True, damping: bool = True, springs: bool = True,
                  use_api=None, dq_scale: float = 1.0, com: bool = False):
    """A random system and a consistent state: returns ``(system, q0, dq0, u0)``.

    ``constraints``: number of holonomic constraint entries to attempt (None: random 0..3);
    ``velocity_constraints``: number of velocity constraints to attempt (None: 0 or 1 at random);
    ``forces``: damping-free and input-free when False (with ``damping=False``);
    ``use_api``: build through the Python API instead of ``load_system`` (None: by seed parity);
    ``com``: give bodies a centre of mass off their frame's origin (drawn from a separate stream,
    so a seed's system is otherwise the same).
    """
    rng = np.random.default_rng(seed)
    lo, hi = n_frames
    nframes = int(rng.integers(lo, hi + 1))
    frames = []
    kind_pool: list = []
    nvars = 0
    for k in range(nframes):
        f = {"name": f"f{k}"}
        if k == 0 or rng.random() < 0.12:
            f["parent"] = "world"
        else:
            w = np.arange(1, k + 1, dtype=float)
            f["parent"] = frames[int(rng.choice(k, p=w / w.sum()))]["name"]
        if k == 0 or rng.random() < 0.88:
            if not kind_pool:
                kind_pool = list(rng.permutation(KINDS))
            kind = str(kind_pool.pop())
            if k == 0 or rng.random() < 0.7:
                f[kind] = f"q{nvars}"
                nvars += 1
            else:
                f[kind] = float(rng.uniform(-0.8, 0.8) if kind[0] == "t" else rng.uniform(-math.pi, math.pi))
        if rng.random() < 0.5:
            off = {}
            if rng.random() < 0.75:
                off["translation"] = [float(x) for x in rng.normal(scale=0.5, size=3)]
            if rng.random() < 0.6:
                if rng.random() < 0.5:
                    off["rotation"] = [float(x) for x in rng.uniform(-math.pi, math.pi, 3)]
                else:
                    off["rotation"] = random_rotation(rng).tolist()
            f["offset"] = off
        is_joint = isinstance(frame_transform(f)[1], str)
        r = rng.random()
        if is_joint and r < 0.8 or not is_joint and r < 0.3:
            f["mass"] = float(rng.uniform(0.5, 2.0))
            f["inertia"] = random_inertia(rng, float(rng.uniform(0.05, 0.3))).tolist()
        elif r < 0.9 if is_joint else r < 0.6:
            f["mass"] = float(rng.uniform(0.3, 1.5))  # point mass
        elif not is_joint and r < 0.7:
            f["inertia"] = random_inertia(rng, 0.1).tolist()  # inertia without mass
        frames.append(f)
    if com:
        crng = np.random.default_rng(seed + 1_000_003)
        for f in frames:
            if f.get("mass", 0.0) > 0.0 or crng.random() < 0.3:
                f["com"] = [float(x) for x in crng.normal(scale=0.4, size=3)]
    spec = {"name": f"random{seed}", "frames": frames}
    g = rng.normal(size=3)
    spec["gravity"] = [float(x) for x in rng.uniform(5.0, 12.0) * g / np.linalg.norm(g)]
    ref = Reference(spec)
    n = ref.n
    q0 = rng.uniform(-1.2, 1.2, n)

    # every variable must move mass: M(q0) well conditioned, else give every joint a full body
    ev = np.linalg.eigvalsh(ref.mass_matrix(q0))
    if ev[0] < 1e-3 * ev[-1]:
        for f in frames:
            if isinstance(frame_transform(f)[1], str):
                f["mass"] = f.get("mass", 0.0) or 1.0
                f["inertia"] = random_inertia(rng, 0.2).tolist()
        ref = Reference(spec)
        ev = np.linalg.eigvalsh(ref.mass_matrix(q0))
        assert ev[0] > 1e-4 * ev[-1], "generator: mass matrix still ill conditioned"

    # ---- constraints, consistent at q0
    body_names = [f["name"] for f in frames]
    moving = [nm for nm in body_names if ref.joints_above(nm)]
    spec["constraints"], spec["velocity_constraints"] = [], []
    n_hc = int(rng.integers(0, 4)) if constraints is None else int(constraints)
    n_vc = (int(rng.random() < 0.35)) if velocity_constraints is None else int(velocity_constraints)
    max_rows = n - 1
    anchors = 0
    for _attempt in range(6 * (n_hc + n_vc) + 1):
        done_h, done_v = len(spec["constraints"]), len(spec["velocity_constraints"])
        if done_h >= n_hc and done_v >= n_vc:
            break
        R, p, _ = ref.poses(q0)
        rows_now = ref.constraint_rows(q0).shape[0]
        if rows_now >= max_rows or not moving:
            break
        trial = dict(spec, constraints=list(spec["constraints"]), frames=list(frames),
                     velocity_constraints=list(spec["velocity_constraints"]))
        f1 = moving[int(rng.integers(len(moving)))]
        if done_h < n_hc and (done_v >= n_vc or constraints is not None or rng.random() < 0.7):
            ctype = ("distance", "plane", "coincide")[int(rng.integers(3))]
            other = (["world"] + body_names)[int(rng.integers(len(body_names) + 1))]
            if ctype == "distance":
                d = float(np.linalg.norm(p[f1] - p[other]))
                if d < 0.2:
                    continue
                trial["constraints"].append({"type": "distance", "frame1": f1, "frame2": other, "distance": d})
            elif ctype == "plane":
                axis = "xyz"[int(rng.integers(3))]
                c = {"type": "plane", "frame": f1, "normal": axis,
                     "offset": float(R[other][:, AXIS[axis]] @ (p[f1] - p[other]))}
                if other != "world" or rng.random() < 0.5:
                    c["plane_frame"] = other
                trial["constraints"].append(c)
            else:
                name = f"anchor{anchors}"
                off = {"translation": [float(x) for x in R[other].T @ (p[f1] - p[other])],
                       "rotation": [float(x) for x in rng.uniform(-math.pi, math.pi, 3)]}
                trial["frames"].append({"name": name, "parent": other, "offset": off})
                nax = int(rng.integers(1, 3))
                axes = [str(a) for a in rng.permutation(list("xyz"))[:nax]]
                if rng.random() < 0.5:
                    trial["constraints"].append({"type": "coincide", "frame1": f1, "frame2": name, "axes": axes})
                else:
                    trial["constraints"].append({"type": "coincide", "frame1": name, "frame2": f1, "axes": axes})
        else:
            trial["velocity_constraints"].append({"frame": f1, "axis": "xyz"[int(rng.integers(3))]})
        tref = Reference(trial)
        C = tref.constraint_rows(q0)
        if C.shape[0] > max_rows or not _rank_ok(C):
            continue
        if len(trial["frames"]) > len(frames):
            anchors += 1
        spec, ref, frames = trial, tref, trial["frames"]

    # ---- springs, damping, inputs
    names = ref.config_names
    R, p, _ = ref.poses(q0)
    spec["springs"], spec["damping"], spec["inputs"] = [], [], []
    if springs:
        for _ in range(int(rng.integers(0, 3))):
            spec["springs"].append({"type": "config", "config": names[int(rng.integers(n))],
                                    "stiffness": float(rng.uniform(0.5, 5.0)),
                                    "rest": float(rng.uniform(-1.0, 1.0))})
        for _ in range(int(rng.integers(0, 3))):
            a = moving[int(rng.integers(len(moving)))]
            b = (["world"] + body_names)[int(rng.integers(len(body_names) + 1))]
            if np.linalg.norm(p[a] - p[b]) < 0.2:
                continue
            spec["springs"].append({"type": "frames", "frame1": a, "frame2": b,
                                    "stiffness": float(rng.uniform(0.5, 5.0)),
                                    "rest_length": float(rng.uniform(0.0, 1.5))})
    if damping:
        for i in rng.permutation(n)[:int(rng.integers(0, 3))]:
            spec["damping"].append({"config": names[int(i)], "coefficient": float(rng.uniform(0.05, 1.0))})
    if forces:
        used = set()
        for i in rng.permutation(n)[:int(rng.integers(1, 3))]:
            spec["inputs"].append({"type": "torque", "config": names[int(i)]})
        for _ in range(int(rng.integers(0, 3))):
            frame = moving[int(rng.integers(len(moving)))]
            t = ("force", "moment")[int(rng.integers(2))]
            axis = "xyz"[int(rng.integers(3))]
            comp = AXIS[axis] + (0 if t == "force" else 3)
            if (frame, comp) in used:
                continue
            used.add((frame, comp))
            spec["inputs"].append({"type": t, "frame": frame, "axis": axis})
        if rng.random() < 0.5:
            frame = moving[int(rng.integers(len(moving)))]
            if not any((frame, c) in used for c in range(6)):
                spec["inputs"].append({"type": "wrench", "frame": frame})
    ref = Reference(spec)

    C = ref.constraint_rows(q0)
    dq0 = null_space_projection(C, dq_scale * rng.normal(size=n))
    u0 = rng.normal(size=ref.nu)
    if use_api is None:
        use_api = seed % 2 == 1
    system = build_system(spec, use_api=use_api)
    system.spec = spec
    system.reference = ref
    return system, q0, dq0, u0


def force_terms(system, q, dq, u, order: int) -> list:
    """The library's generalized force at ``(q, dq, u)`` (``core.tree.forces.generalized_force``) up
    to ``order``: ``[F, Fq, Fv, Fu, Fqq, Fqv, Fqu]`` (at order 0 only ``F`` is filled)."""
    from core.tree.forces import generalized_force
    from core.tree.kinematics import create_data
    from core.tree.lagrangian import prepare
    model = system.model
    n, m = model.nq, model.nu
    q, dq, u = (np.asarray(x, float) for x in (q, dq, u))
    data = create_data(model)
    prepare(model, data, q, dq)
    out = [np.empty(n), np.empty((n, n)), np.empty((n, n)), np.empty((n, m)),
           np.empty((n, n, n)), np.empty((n, n, n)), np.empty((n, n, m))]
    if order == 0:
        out[1:] = [np.empty((0, 0))] * 3 + [np.empty((0, 0, 0))] * 3
    generalized_force(model, data, dq, u, order, *out)
    return out


# ---------------------------------------------------------------------------------- checking
def fd(fun, x, h: float = 1e-5) -> np.ndarray:
    """Central 4-point finite differences: result[..., k] = d fun / d x_k (shape fun(x).shape + (n,))."""
    x = np.asarray(x, float)
    base = np.asarray(fun(x), float)
    out = np.zeros(base.shape + (x.size,))
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        out[..., k] = (-np.asarray(fun(x + 2 * e)) + 8 * np.asarray(fun(x + e))
                       - 8 * np.asarray(fun(x - e)) + np.asarray(fun(x - 2 * e))) / (12 * h)
    return out


def fd_along(fun, h: float = 1e-5) -> np.ndarray:
    """d/dt fun(t) at t = 0 by the central 4-point stencil."""
    return (-np.asarray(fun(2 * h)) + 8 * np.asarray(fun(h)) - 8 * np.asarray(fun(-h))
            + np.asarray(fun(-2 * h))) / (12 * h)


def fd2_along(fun, h: float = 1e-3) -> np.ndarray:
    """d2/dt2 fun(t) at t = 0 by the central 5-point stencil."""
    return (-np.asarray(fun(2 * h)) + 16 * np.asarray(fun(h)) - 30 * np.asarray(fun(0.0))
            + 16 * np.asarray(fun(-h)) - np.asarray(fun(-2 * h))) / (12 * h * h)


def assert_close(exact, approx, what: str, tol: float = 1e-6, scale: float | None = None) -> None:
    """Norm-wise: ||exact - approx|| <= tol * max(1, ||exact||) (or ``tol * scale``)."""
    exact, approx = np.asarray(exact, float), np.asarray(approx, float)
    assert exact.shape == approx.shape, f"{what}: shape {exact.shape} != {approx.shape}"
    err = float(np.linalg.norm(exact - approx))
    ref = max(1.0, float(np.linalg.norm(exact))) if scale is None else scale
    if not err <= tol * ref:
        worst = np.unravel_index(int(np.argmax(np.abs(exact - approx))), exact.shape) if exact.size else ()
        raise AssertionError(
            f"{what}: ||exact - reference|| = {err:.3e} > {tol:g} * {ref:.3e}; worst entry {worst}: "
            f"exact {exact[worst]:.10g}, reference {approx[worst]:.10g}")


def coupled_two_links() -> "core.System":
    """Two links whose second joint ``b`` mimics the first (``-0.7 a + 0.2``), a torque on
    ``a``: a coupled (mimic) system for the element tests to add to."""
    s = core.System(gravity=[0.0, -9.81, 0.0])
    s.add_frame("l1", rz="a", mass=1.0, inertia=[0.02, 0.03, 0.04], com=[0.4, 0.0, 0.0])
    s.add_frame("l2", parent="l1", offset={"translation": [0.8, 0.0, 0.0]}, ry="b", mass=0.7,
                inertia=[0.01, 0.02, 0.02], com=[0.3, 0.0, 0.1])
    s.add_mimic("b", "a", -0.7, 0.2)
    s.add_input("torque", config="a")
    return s


# ---------------------------------------------------------------------------------- derivative checks
def continuous_checks(s, q, dq, u, tol=1e-7):
    """A, B against finite differences of ``qdd``; ``H`` of ``linearize2`` against finite
    differences of the exact ``A, B``."""
    n = s.nq
    A, B, H = s.linearize2(q, dq, u)
    assert_close(A[n:, :n], fd(lambda x: s.qdd(x, dq, u), q), "d qdd / dq")
    assert_close(A[n:, n:], fd(lambda x: s.qdd(q, x, u), dq), "d qdd / d dq")
    assert_close(B[n:], fd(lambda x: s.qdd(q, dq, x), u), "d qdd / du")

    def AB(z):
        return np.hstack(s.linearize(z[:n], z[n:2 * n], z[2 * n:], residual_limit=None))

    assert_close(H, fd(AB, np.concatenate([q, dq, u]), 1e-4), "H", tol=tol)


def discrete_checks(s, q, dq, u, dt=0.01):
    """The step's A, B against finite differences of the step; H against finite differences
    of the exact A, B."""
    vi = core.MidpointVI(s, dt, tolerance=1e-13)
    x = vi.discrete_state(q, dq)
    nx = x.size
    A, B, H = vi.linearize2(x, u)
    z = np.concatenate([x, u])
    assert_close(np.hstack([A, B]), fd(lambda y: vi.step(y[:nx], y[nx:]), z, 1e-5), "VI A, B")
    H_fd = fd(lambda y: np.hstack(vi.linearize(y[:nx], y[nx:])), z, 1e-4)
    assert_close(H, H_fd, "VI H", tol=1e-5)
    lam = np.random.default_rng(nx).normal(size=nx)     # the contracted second order, alike
    W = vi.linearize2(x, u, costate=lam)[2]
    assert_close(W, np.tensordot(lam, H, axes=1), "VI W = λ.H", tol=1e-9,
                 scale=max(1.0, float(np.linalg.norm(lam) * np.linalg.norm(H))))
    assert_close(W, np.tensordot(lam, H_fd, axes=1), "VI W = λ.H", tol=1e-5)
    return vi, x
