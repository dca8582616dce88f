"""Mimic joints coupled (``load_urdf(mimic="couple")``, :meth:`core.System.add_mimic`,
:mod:`core.tree.coupling`): a mimic joint's value is ``multiplier q + offset`` of the joint it follows,
with no coordinate of its own.

References: the coupled system is the independent one (``mimic="independent"``) restricted to
``q_joints = T q + c``, so its equations of motion are ``T^T M T ddq = T^T (L_q - L_qv^T T dq +
F)`` with the independent system's Lagrangian derivatives (a code path other than the recursive
dynamics the coupled ``qdd`` runs), and Pinocchio's own mimic model of Panda; the continuous
and discrete linearizations against central
finite differences of ``qdd`` and of the integrator's step. Robots: Panda (its second finger
mimics the first: siblings) and a random URDF with a revolute mimic (multiplier -1.7, offset 0.3)
and a prismatic one following a continuous joint (multiplier 0.4, offset -0.2).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from urdfref import ROBOTS, random_urdf, robot_path

import core

from randsys import assert_close, fd

PANDA = robot_path(ROBOTS["panda"][0])


def random_mimic_urdf() -> str:
    """``random_urdf(3, 9)`` with two mimic joints: the last revolute joint follows ``j1``
    (-1.7, 0.3), the prismatic ``j3`` follows the continuous ``j2`` (0.4, -0.2)."""
    root = ET.fromstring(random_urdf(3, 9))
    joints = {j.get("name"): j for j in root.findall("joint")}
    assert joints["j1"].get("type") == "revolute" and joints["j2"].get("type") == "continuous"
    assert joints["j3"].get("type") == "prismatic"
    revolute = [n for n, j in sorted(joints.items()) if j.get("type") == "revolute" and n != "j1"]
    ET.SubElement(joints[revolute[-1]], "mimic", joint="j1", multiplier="-1.7", offset="0.3")
    ET.SubElement(joints["j3"], "mimic", joint="j2", multiplier="0.4", offset="-0.2")
    return ET.tostring(root, encoding="unicode")


def coupling(coupled: core.System, independent: core.System):
    """``(T, c)`` with ``q_independent = T q_coupled + c`` and the input map ``E`` (independent
    inputs = E u_coupled)."""
    names, full = coupled.config_names, independent.config_names
    T, c = np.zeros((len(full), len(names))), np.zeros(len(full))
    for i, n in enumerate(full):
        if n in coupled.mimic_joints:
            leader, k, off = coupled.mimic_joints[n]
            T[i, names.index(leader)], c[i] = k, off
        else:
            T[i, names.index(n)] = 1.0
    E = np.zeros((independent.nu, coupled.nu))
    for r, n in enumerate(coupled.input_names):
        E[independent.input_names.index(n), r] = 1.0
    return T, c, E


def reference_qdd(coupled, independent, q, dq, u):
    T, c, E = coupling(coupled, independent)
    qf, vf = T @ q + c, T @ dq
    d = independent.lagrangian_derivatives(qf, vf, 2)
    F = independent.input_matrix(qf) @ (E @ u)
    rhs = T.T @ (d.Lq - d.Lqv.T @ vf + F)
    return np.linalg.solve(T.T @ d.Lvv @ T, rhs)


@pytest.fixture(scope="module", params=["panda", "random"])
def robot(request):
    source = PANDA if request.param == "panda" else random_mimic_urdf()
    coupled, independent = core.load_urdf(source), core.load_urdf(source, mimic="independent")
    rng = np.random.default_rng(7)
    n = coupled.nq
    q, dq, u = 0.4 * rng.standard_normal(n), 0.5 * rng.standard_normal(n), rng.standard_normal(coupled.nu)
    return request.param, coupled, independent, q, dq, u


def test_panda_loads_coupled():
    s = core.load_urdf(PANDA)
    names = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
    assert s.config_names == names and s.input_names == names and s.nq == 8
    assert list(s.joint_limits) == names
    assert s.mimic_joints == {"panda_finger_joint2": ("panda_finger_joint1", 1.0, 0.0)}
    q = np.linspace(0.1, 0.8, 8)
    assert s.mimic_positions(q) == {"panda_finger_joint2": 0.8}
    assert core.load_urdf(PANDA, mimic="independent").nq == 9


def test_panda_coupled_against_pinocchio_mimic():
    """Pinocchio's own mimic model (``buildModelFromUrdf(..., mimic=True)``: eight coordinates,
    the second finger following the first): the same mass matrix and accelerations (its
    ``crba`` and ``nonLinearEffects``; its ``aba`` refuses mimic joints)."""
    import pinocchio as pin
    pm = pin.buildModelFromUrdf(PANDA, mimic=True)
    pd = pm.createData()
    s = core.load_urdf(PANDA)
    assert pm.nq == pm.nv == s.nq == 8
    assert [n for n in list(pm.names)[1:] if n not in s.mimic_joints] == s.config_names
    rng = np.random.default_rng(11)
    for _ in range(3):
        q, dq, u = 0.5 * rng.standard_normal(8), rng.standard_normal(8), 5.0 * rng.standard_normal(8)
        q[7] = 0.02
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        nle = pin.nonLinearEffects(pm, pd, q, dq)
        assert_close(s.lagrangian_derivatives(q, dq, 2).Lvv, M, "M", 1e-10)
        assert_close(s.qdd(q, dq, u), np.linalg.solve(M, u - nle), "qdd", 1e-9)


def test_qdd_is_the_independent_system_restricted(robot):
    name, coupled, independent, q, dq, u = robot
    assert coupled.nq == independent.nq - 2 + (name == "panda")
    assert_close(coupled.qdd(q, dq, u), reference_qdd(coupled, independent, q, dq, u), f"{name} qdd", 1e-9)
    # the energy of the coupled system is the independent one's at T q + c, T dq
    T, c, _ = coupling(coupled, independent)
    assert abs(coupled.energy(q, dq) - independent.energy(T @ q + c, T @ dq)) < 1e-10 * max(
        1.0, abs(coupled.energy(q, dq)))


def test_continuous_linearization_against_finite_differences(robot):
    name, s, _, q, dq, u = robot
    n = s.nq
    A, B = s.linearize(q, dq, u)
    x = np.concatenate([q, dq])
    f = lambda x_, u_=u: np.concatenate([x_[n:], s.qdd(x_[:n], x_[n:], u_)])  # noqa: E731
    assert_close(A, fd(f, x, 1e-5), f"{name} A", 1e-7)
    assert_close(B, fd(lambda u_: f(x, u_), u, 1e-5), f"{name} B", 1e-7)


def test_discrete_linearization_against_finite_differences(robot):
    name, s, _, q, dq, u = robot
    vi = core.MidpointVI(s, 0.01)
    x = vi.state(q, vi.momentum(q, dq))
    x1, A, B, H = vi.step_linearize(x, u, second_order=True)
    assert_close(x1, vi.step(x, u), f"{name} step", 1e-12)
    assert_close(A, fd(lambda x_: vi.step(x_, u), x, 1e-5), f"{name} VI A", 1e-7)
    assert_close(B, fd(lambda u_: vi.step(x, u_), u, 1e-5), f"{name} VI B", 1e-7)
    nx = x.size
    z = np.concatenate([x, u])
    dA = fd(lambda z_: vi.step_linearize(z_[:nx], z_[nx:])[1], z, 1e-5)     # (nx, nx, nz)
    assert_close(H[:, :nx, :], dA, f"{name} VI H", 1e-6)


def test_mimic_of_a_mimic_and_coupled_inputs_are_refused():
    root = ET.fromstring(random_mimic_urdf())
    joints = {j.get("name"): j for j in root.findall("joint")}
    ET.SubElement(joints["j2"], "mimic", joint="j1")    # j3 mimics j2, which now mimics j1
    with pytest.raises(core.errors.ModelError, match="joint 'j3': mimics joint 'j2', itself a mimic joint"):
        core.load_urdf(ET.tostring(root, encoding="unicode"))
    with pytest.raises(core.errors.ModelError, match="actuated: joint 'panda_finger_joint2' mimics"):
        core.load_urdf(PANDA, actuated=["panda_finger_joint2"])
    s = core.load_urdf(PANDA)
    s.add_input("torque", config="panda_finger_joint2", name="f2")
    with pytest.raises(core.errors.ModelError, match="'panda_finger_joint2' mimics 'panda_finger_joint1'"):
        s.compile()


def test_add_mimic_on_a_system():
    """Two pendulums in a plane, the second turning -2 times the first plus 0.1: one variable;
    its dynamics is that of the coupled Lagrangian (a scalar equation, written here)."""
    s = core.System(gravity=[0.0, -9.81, 0.0])
    s.add_frame("a", rz="th")
    s.add_frame("A", parent="a", ty=-1.0, mass=1.0)
    s.add_frame("b", offset={"translation": [2.0, 0.0, 0.0]}, rz="phi")
    s.add_frame("B", parent="b", ty=-0.5, mass=3.0)
    s.add_mimic("phi", "th", -2.0, 0.1)
    s.add_input("torque", config="th")
    assert s.config_names == ["th"] and s.nq == 1
    th, w, u = 0.3, -0.7, 0.4
    phi = -2.0 * th + 0.1
    # L = 1/2 (1 + 3 * 0.25 * 4) w^2 + 9.81 (cos th + 3 * 0.5 cos phi)
    expected = (u - 9.81 * (np.sin(th) + 3 * 0.5 * np.sin(phi) * -2.0)) / (1.0 + 3.0)
    assert_close(s.qdd([th], [w], [u]), [expected], "coupled pendulums", 1e-12)
    assert s.mimic_positions([th]) == {"phi": pytest.approx(phi)}
    # the same model from YAML keys
    spec = {"gravity": [0.0, -9.81, 0.0],
            "frames": [{"name": "a", "rz": "th"}, {"name": "A", "parent": "a", "ty": -1.0, "mass": 1.0},
                       {"name": "b", "offset": {"translation": [2.0, 0.0, 0.0]}, "rz": "phi"},
                       {"name": "B", "parent": "b", "ty": -0.5, "mass": 3.0}],
            "mimic": [{"config": "phi", "leader": "th", "multiplier": -2.0, "offset": 0.1}],
            "inputs": [{"type": "torque", "config": "th"}]}
    assert_close(core.load_system(spec).qdd([th], [w], [u]), [expected], "from YAML keys", 1e-12)
    with pytest.raises(core.errors.ModelError, match=r"mimic\[0\]: needs 'config' and 'leader'"):
        core.load_system(dict(spec, mimic=[{"config": "phi", "lead": "th"}]))
    s2 = core.System()
    s2.add_frame("a", rz="x")
    s2.add_frame("b", parent="a", rz="y")
    s2.add_frame("c", parent="b", rz="z")
    s2.add_mimic("y", "x").add_mimic("z", "y")
    with pytest.raises(core.errors.ModelError, match="mimic 'z': its leader 'y' mimics 'x'"):
        s2.compile()


def test_the_node_plant_loads_panda_coupled():
    """The node's model parameter or ``/robot_description`` text (mechnode.logic.plant, ROS-free):
    Panda with its default mimic handling, fully actuated, its gains from the exact
    linearization."""
    from mechnode.logic.plant import Plant
    with open(PANDA) as fh:
        text = fh.read()
    for plant in (Plant.load(PANDA, 0.01), Plant.from_text(text, 0.01)):
        assert plant.config_names == [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
        assert plant.fully_actuated and plant.nx == 16 and plant.nu == 8
    # joint_states carry the mimic joint too: known, not read, not reported as unknown
    from mechnode.logic.joint_map import JointMap
    assert plant.mimic_names == ["panda_finger_joint2"]
    names = plant.config_names + ["panda_finger_joint2"]
    q, _, unknown = JointMap(plant.config_names, (), plant.mimic_names).state(names, np.arange(9.0), np.zeros(9))
    assert unknown == () and q.tolist() == list(range(8))
    assert JointMap(plant.config_names).state(names, np.arange(9.0), np.zeros(9))[2] == ("panda_finger_joint2",)
    x = plant.vi.state(np.full(8, 0.2), np.zeros(8))
    _, A, B = plant.vi.step_linearize(x, np.zeros(8))
    K, _ = core.dlqr(A, B, np.eye(16), np.eye(8))
    assert np.all(np.isfinite(K)) and np.max(np.abs(np.linalg.eigvals(A - B @ K))) < 1.0


def carts(coupled: bool) -> core.System:
    """Two carts on parallel rails along x, a pendulum on each; the second cart at ``x2 = x1 +
    0.3``: coupled (``add_mimic``), or independent with that as a plane constraint."""
    s = core.System(gravity=[0.0, -9.81, 0.0])
    s.add_frame("c1", tx="x1", mass=2.0, inertia=[0.1, 0.1, 0.1])
    s.add_frame("p1", parent="c1", rz="th", mass=0.0)
    s.add_frame("b1", parent="p1", ty=-0.8, mass=0.7, inertia=[0.01, 0.02, 0.03])
    s.add_frame("c2", offset={"translation": [0.0, 1.0, 0.0]}, tx="x2", mass=1.5, inertia=[0.1, 0.1, 0.1])
    s.add_frame("p2", parent="c2", rz="ph", mass=0.0)
    s.add_frame("b2", parent="p2", ty=-0.5, mass=1.1, inertia=[0.02, 0.01, 0.03])
    s.add_input("torque", config="x1").add_input("torque", config="th").add_input("torque", config="ph")
    if coupled:
        s.add_mimic("x2", "x1", 1.0, 0.3)
    else:
        s.add_constraint("plane", frame="c2", plane_frame="c1", normal="x", offset=0.3)
    return s


def test_coupled_equals_the_independent_system_with_the_coupling_as_a_constraint():
    """x2 - x1 - 0.3 = 0 as a holonomic (plane) constraint of the independent system: the same
    accelerations, the continuous linearization equals its minimal linearization in the
    independent coordinates, and the integrator takes the same steps (a linear constraint's
    multiplier only adds ``Dh^T lam`` to the momenta, which ``T^T`` removes)."""
    cs, fs = carts(True), carts(False)
    assert cs.config_names == ["x1", "th", "ph"] and fs.config_names == ["x1", "th", "x2", "ph"]
    T = np.array([[1.0, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]])
    c = np.array([0.0, 0.0, 0.3, 0.0])
    q, dq, u = np.array([0.2, 0.5, -0.4]), np.array([-0.3, 0.8, 1.1]), np.array([0.4, -0.2, 0.3])
    qf, vf = T @ q + c, T @ dq
    assert_close(T @ cs.qdd(q, dq, u), fs.qdd(qf, vf, u), "qdd", 1e-11)
    A, B = cs.linearize(q, dq, u)
    Am, Bm, _ = fs.linearize_minimal(qf, vf, u, independent=["x1", "th", "ph"])
    assert_close(A, Am, "A", 1e-10)
    assert_close(B, Bm, "B", 1e-10)
    vc, vf_ = core.MidpointVI(cs, 0.01), core.MidpointVI(fs, 0.01)
    xc, xf = vc.discrete_state(q, dq), vf_.discrete_state(qf, vf)
    for _ in range(5):
        xc, xf = vc.step(xc, u), vf_.step(xf, u)
        assert_close(T @ xc[:3] + c, xf[:4], "q_k", 1e-11)
        assert_close(xc[3:], T.T @ xf[4:], "p_k", 1e-9)


def test_holonomic_constraint_on_a_coupled_system():
    """A distance constraint between the bobs of the coupled carts: continuous and discrete
    linearizations against finite differences (the constraint rows contracted with T)."""
    q = np.array([0.2, 0.5, -0.4])
    s0 = carts(True)
    s0.add_constraint("distance", frame1="b1", frame2="b2", distance=0.0)
    d = float(np.sqrt(s0.constraint(q)[0]))           # h = |p1 - p2|^2 - 0^2
    s = carts(True)
    s.add_constraint("distance", frame1="b1", frame2="b2", distance=d)
    h, Dh = s.constraint(q, 1)
    assert abs(h[0]) < 1e-12 and Dh.shape == (1, 3)
    N = np.linalg.svd(Dh)[2][1:].T
    dq = N @ np.array([0.6, -0.9])
    u = np.array([0.4, -0.2, 0.3])
    n = 3
    A, B = s.linearize(q, dq, u)
    x = np.concatenate([q, dq])
    f = lambda x_, u_=u: np.concatenate([x_[n:], s.qdd(x_[:n], x_[n:], u_)])  # noqa: E731
    assert_close(A, fd(f, x, 1e-5), "A", 1e-7)
    assert_close(B, fd(lambda u_: f(x, u_), u, 1e-5), "B", 1e-7)
    vi = core.MidpointVI(s, 0.01)
    xk = vi.discrete_state(q, dq)
    x1, Ad, Bd, H = vi.step_linearize(xk, u, second_order=True)
    assert_close(Ad, fd(lambda x_: vi.step(x_, u), xk, 1e-5), "VI A", 1e-7)
    assert_close(Bd, fd(lambda u_: vi.step(xk, u_), u, 1e-5), "VI B", 1e-7)
    nx = xk.size
    z = np.concatenate([xk, u])
    dA = fd(lambda z_: vi.step_linearize(z_[:nx], z_[nx:])[1], z, 1e-5)
    assert_close(H[:, :nx, :], dA, "VI H", 1e-6)
    lam = np.array([0.3, -1.2, 0.7, 2.0, -0.4, 0.9])     # the contracted second order (the
    W = vi.linearize2(xk, u, costate=lam)[2]              # directional third order, contracted with T)
    assert_close(W, np.tensordot(lam, H, axes=1), "VI W = λ.H", 1e-9,
                 scale=max(1.0, float(np.linalg.norm(lam) * np.linalg.norm(H))))


def test_state_transforms_inverse_dynamics_and_holding_inputs_on_panda():
    """What the node runs besides the step: Legendre transforms, inverse dynamics along a
    simulated trajectory (recovers its inputs), the inputs that hold a configuration."""
    s = core.load_urdf(PANDA)
    vi = core.MidpointVI(s, 0.01)
    rng = np.random.default_rng(3)
    q, dq = 0.3 * rng.standard_normal(8), 0.2 * rng.standard_normal(8)
    x = vi.discrete_state(q, dq)
    q2, dq2 = vi.continuous_state(x)
    assert_close(q2, q, "q", 1e-14)
    assert_close(dq2, dq, "dq", 1e-10)
    U = rng.standard_normal((4, 8))
    X = [x]
    for k in range(4):
        X.append(vi.step(X[-1], U[k]))
    X = np.array(X)
    U2, P, residual = vi.inverse_dynamics(X[:, :8], X[0, 8:])
    assert_close(U2, U, "U", 1e-7)
    assert_close(P, X[:, 8:], "P", 1e-9)
    u, res = core.holding_inputs(s, q)
    assert res < 1e-9
    assert_close(s.qdd(q, np.zeros(8), u), np.zeros(8), "held", 1e-8)


def test_the_node_plant_locks_the_panda_gripper():
    """The node's ``locked_joints`` parameter (mechnode.logic.plant, ROS-free): Panda's gripper left
    to its own driver. The arm keeps 7 variables and 7 inputs; JointStates may carry the finger
    joints (ignored, not reported as unknown) or omit them; the same locks apply to a YAML model,
    and malformed entries are refused naming them."""
    from mechnode.errors import InputError
    from mechnode.logic.joint_map import JointMap
    from mechnode.logic.plant import ModelSpecError, Plant, parse_locked_joints
    locked = parse_locked_joints(["panda_finger_joint1 = 0.04"])
    assert locked == {"panda_finger_joint1": 0.04}
    with open(PANDA) as fh:
        text = fh.read()
    plant = Plant.from_text(text, 0.01, "panda", locked)
    arm = [f"panda_joint{i}" for i in range(1, 8)]
    assert plant.config_names == arm and plant.force_input_names == arm and plant.fully_actuated
    assert plant.locked == locked and sorted(plant.follower_names) == ["panda_finger_joint1", "panda_finger_joint2"]
    jm = JointMap(plant.config_names, (), plant.follower_names)
    full = arm + ["panda_finger_joint1", "panda_finger_joint2"]
    q, _, unknown = jm.state(full, np.arange(9.0), np.zeros(9))
    assert unknown == () and q.tolist() == list(range(7))
    assert jm.state(arm, np.arange(7.0), np.zeros(7))[0].tolist() == list(range(7))
    assert plant.with_dt(0.02).locked == locked
    for bad, match in ((["finger"], "must be 'joint=value'"), (["a=b"], "expected 'joint=value' with a finite"),
                       (["a=nan"], "finite"), (["a=1", "a=2"], "names joint 'a' twice"),
                       (["x=" + "1" * 300], "at most 256 characters"), (["j=0"] * 1001, "more than 1000")):
        with pytest.raises(InputError, match=match):
            parse_locked_joints(bad)
    with pytest.raises(ModelSpecError, match=r"locked joint 'gripper': unknown joint"):
        Plant.from_text(text, 0.01, "panda", {"gripper": 0.0})
    yaml_plant = Plant.from_text("frames:\n- {name: a, rz: th, mass: 1, com: [0.5, 0, 0]}\n"
                                 "- {name: b, parent: a, rz: phi, mass: 1, offset: {translation: [1, 0, 0]}}\n"
                                 "inputs:\n- {type: torque, config: th}\n- {type: torque, config: phi}\n",
                                 0.01, "two links", {"phi": 0.3})
    assert yaml_plant.config_names == ["th"] and yaml_plant.force_input_names == ["th"]
