"""Ready-made systems for examples, tests and benchmarks.

* :func:`chain` — planar N-link pendulum chain (one ``rz`` joint and a point mass per link);
* :func:`branched_tree` — a 3-D tree with a floating base and four rotational limbs;
* :func:`chain_spec`, :func:`branched_tree_spec` — the same models as plain data (dicts that
  :func:`~core.load_system` accepts, YAML once dumped): what a process hands to another one;
* :func:`marionette` — the marionette-like model of ``core/data/marionette.yaml`` and
  :func:`marionette_rest_state`, a static equilibrium hanging from its strings.
"""
from __future__ import annotations

import numpy as np

from core.io.loader import load_system
from core.system import System


def chain_spec(n: int, length: float = 1.0, mass: float = 1.0, gravity: float = 9.8) -> dict:
    """The model of :func:`chain` as plain data (a dict :func:`core.load_system` accepts; YAML
    when dumped), so that another process can be handed the model without running code."""
    frames: list[dict] = []
    inputs: list[dict] = []
    parent = "world"
    for i in range(n):
        frames.append({"name": f"joint{i}", "parent": parent, "rz": f"theta{i}"})
        frames.append({"name": f"mass{i}", "parent": f"joint{i}", "ty": -float(length),
                       "mass": float(mass), "inertia": [0.01, 0.01, 0.01]})
        inputs.append({"type": "torque", "config": f"theta{i}"})
        parent = f"mass{i}"
    return {"name": f"chain{n}", "gravity": [0.0, -float(gravity), 0.0], "frames": frames,
            "inputs": inputs}


def chain(n: int, length: float = 1.0, mass: float = 1.0, gravity: float = 9.8) -> System:
    """Planar chain of ``n`` links hanging along -y, variables ``theta0..theta{n-1}``, a torque
    input on every joint (built from :func:`chain_spec`)."""
    return load_system(chain_spec(n, length, mass, gravity))


def branched_tree_spec(n_variables: int = 40) -> dict:
    """The model of :func:`branched_tree` as plain data (see :func:`chain_spec`)."""
    if n_variables < 10:
        raise ValueError("branched_tree needs at least 10 variables")
    frames, inputs, parent = [], [], "world"
    for i, kind in enumerate(["tx", "ty", "tz", "rz", "ry", "rx"]):
        name = "base" if i == 5 else f"base_{kind}"
        frame = {"name": name, "parent": parent, "mass": 5.0 if i == 5 else 0.0, kind: f"base_{kind}"}
        if i == 5:
            frame["inertia"] = [0.2, 0.3, 0.4]
        frames.append(frame)
        parent = name
    remaining = n_variables - 6
    corners = [[0.2, 0.1, 0.0], [-0.2, 0.1, 0.0], [0.2, -0.1, 0.0], [-0.2, -0.1, 0.0]]
    for limb in range(4):
        count = remaining // 4 + (1 if limb < remaining % 4 else 0)
        parent = "base"
        for j in range(count):
            kind = ("rx", "ry", "rz")[j % 3]
            name = f"limb{limb}_{j}"
            offset = {"translation": corners[limb] if j == 0 else [0.0, 0.0, -0.15],
                      "rotation": [0.1 * limb, 0.05 * j, 0.0]}
            frames.append({"name": name, "parent": parent, "offset": offset, "mass": 0.5,
                           "inertia": [[0.01, 0.001, 0.0], [0.001, 0.012, 0.0005], [0.0, 0.0005, 0.008]],
                           kind: name})
            inputs.append({"type": "torque", "config": name})
            parent = name
    return {"name": f"tree{n_variables}", "gravity": [0.0, 0.0, -9.81], "frames": frames,
            "inputs": inputs}


def branched_tree(n_variables: int = 40) -> System:
    """A floating base (tx, ty, tz, rz, ry, rx) with four limbs of rotational joints cycling
    rx, ry, rz, ``n_variables`` variables in all; full inertias, torque inputs on limb joints
    (built from :func:`branched_tree_spec`)."""
    return load_system(branched_tree_spec(n_variables))


def marionette() -> System:
    """The 40-variable marionette-like model (22 dynamic, 18 kinematic, 6 strings)."""
    return load_system("marionette.yaml")


# The starting pose (before the equilibrium solve): elbows bent 90 degrees, hips and knees bent,
# as in the authors' script. With straight limbs hanging under nearly vertical strings (the pose
# a naive rest pose) the hand and knee strings sit at a kinematic
# singularity: shortening them moves the attachment only to second order, and the DEL Newton
# solve fails for any change of those string lengths.
MARIONETTE_POSE = {"torso_phi": -0.05, "l_elbow_phi": 1.57, "r_elbow_phi": 1.57,
        "l_hip_phi": np.pi / 2 - 0.6, "r_hip_phi": np.pi / 2 - 0.6,
        "l_knee_phi": -np.pi / 2 + 0.6, "r_knee_phi": -np.pi / 2 + 0.6}

def fit_string_lengths(system, q) -> np.ndarray:
    """``q`` with every string length set to its controller-attachment distance (h(q) = 0)."""
    names = system.config_names
    lengths = np.array([names.index(n) for n in names if n.endswith("_length")])
    q = np.array(q, dtype=float)
    q[lengths] = 1.0
    h, Dh = system.constraint(q, 1)        # distance constraints h = d^2 - L^2
    for r in range(h.size):
        j = lengths[np.argmax(np.abs(Dh[r, lengths]))]   # the length of string r
        q[j] = np.sqrt(h[r] + 1.0)
    return q


def marionette_rest_state(system, pose=None, tol: float = 1e-10, max_iterations: int = 50) -> np.ndarray:
    """A static equilibrium hanging from the strings near ``pose`` (default :data:`MARIONETTE_POSE`): the
    string lengths are fitted to the pose, then Newton's method on
    ``dL/dq_dyn + Dh_dyn^T lam = 0, h(q) = 0`` (zero velocity) moves the dynamic variables with
    the controllers and lengths held fixed."""
    pose = MARIONETTE_POSE if pose is None else pose
    names = system.config_names
    kin = set(system.kinematic_names)
    dyn = np.array([i for i, n in enumerate(names) if n not in kin])
    q = np.zeros(system.nq)
    for name, value in pose.items():
        q[names.index(name)] = value
    q = fit_string_lengths(system, q)
    zero = np.zeros(system.nq)
    h, Dh = system.constraint(q, 1)
    lam = np.linalg.lstsq(Dh[:, dyn].T, -system.lagrangian_derivatives(q, zero, 1).Lq[dyn],
                          rcond=None)[0]
    nd, nc = dyn.size, h.size
    for _ in range(max_iterations):
        d = system.lagrangian_derivatives(q, zero, 2)
        h, Dh, D2h = system.constraint(q, 2)
        residual = np.concatenate([d.Lq[dyn] + Dh[:, dyn].T @ lam, h])
        if np.max(np.abs(residual)) < tol:
            return q
        J = np.zeros((nd + nc, nd + nc))
        J[:nd, :nd] = (d.Lqq + np.einsum("r,rab->ab", lam, D2h))[np.ix_(dyn, dyn)]
        J[:nd, nd:] = Dh[:, dyn].T
        J[nd:, :nd] = Dh[:, dyn]
        step = np.linalg.lstsq(J, -residual, rcond=None)[0]
        step *= min(1.0, 0.2 / max(np.max(np.abs(step[:nd])), 1e-300))   # at most 0.2 per step
        q[dyn] += step[:nd]
        lam += step[nd:]
    raise RuntimeError(f"no static equilibrium found: residual {np.max(np.abs(residual)):.2e}")


def sympy_rolling_disc():
    """The rolling disc of SymPy's ``test_linearize.py`` (``test_linearize_rolling_disc_kane``),
    built with ``sympy.physics.mechanics`` and Kane's method; needs SymPy (imported here only).

    A disc of radius ``r`` and mass ``m`` rolls without slipping on the plane under gravity
    ``g``: coordinates ``q1..q6`` (yaw, lean, spin; centre x, y, z) with ``q6`` dependent (one
    configuration constraint), speeds ``u1..u6`` with ``u4..u6`` dependent (three velocity
    constraints). Returns the ``KanesMethod`` after ``kanes_equations``; its ``q`` and ``u`` are
    in that order and the parameters are ``sympy.symbols("r m g")``."""
    import sympy as sp
    from sympy.physics.mechanics import (
        KanesMethod,
        Point,
        ReferenceFrame,
        RigidBody,
        cross,
        dot,
        dynamicsymbols,
        inertia,
    )

    t = dynamicsymbols._t
    r, m, g = sp.symbols("r m g")
    q = dynamicsymbols("q1:7")
    q1, q2, q3, q4, q5, q6 = q
    u = dynamicsymbols("u1:7")
    N = ReferenceFrame("N")
    NO = Point("NO")
    A = N.orientnew("A", "Axis", [q1, N.z])
    B = A.orientnew("B", "Axis", [q2, A.x])
    C = B.orientnew("C", "Axis", [q3, B.y])
    CO = NO.locatenew("CO", q4 * N.x + q5 * N.y + q6 * N.z)
    w_c_n_qd, w_b_n_qd = C.ang_vel_in(N), B.ang_vel_in(N)
    C.set_ang_vel(N, u[0] * B.x + u[1] * B.y + u[2] * B.z)
    v_co_n_qd = CO.pos_from(NO).dt(N)
    CO.set_vel(N, u[3] * C.x + u[4] * C.y + u[5] * C.z)
    P = CO.locatenew("P", r * B.z)
    P.v2pt_theory(CO, N, C)
    f_c = sp.Matrix([q6 - dot(CO.pos_from(P), N.z)])
    f_v = sp.Matrix([dot(P.vel(N), uv) for uv in C])
    kindiffs = sp.Matrix([dot(w_c_n_qd - C.ang_vel_in(N), uv) for uv in B]
                         + [dot(v_co_n_qd - CO.vel(N), uv) for uv in N])
    qdots = sp.solve(kindiffs, [qi.diff(t) for qi in q])
    B.set_ang_vel(N, w_b_n_qd.subs(qdots))
    C.set_ang_acc(N, C.ang_vel_in(N).dt(B) + cross(B.ang_vel_in(N), C.ang_vel_in(N)))
    disc = RigidBody("Disc", CO, C, m, (inertia(C, m * r**2 / 4, m * r**2 / 2, m * r**2 / 4), CO))
    KM = KanesMethod(N, q[:5], u[:3], kd_eqs=kindiffs, q_dependent=[q6],
                     configuration_constraints=f_c, u_dependent=u[3:], velocity_constraints=f_v)
    KM.kanes_equations([disc], [(CO, m * g * A.z)])
    return KM
