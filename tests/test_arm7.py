"""``core/data/arm7.urdf``, the example arm: it loads from the file and from its text, its names and
limits are the file's, its inertias and axes are what the file promises, its mass matrix is well
conditioned, it matches Pinocchio (``qdd``, ``A``, ``B`` and the holding torque), the
variational integrator steps and linearizes it, and LQR on the integrator's exact linearization
holds it at a gravity-compensated pose.

Pinocchio (``pin``) is a test-only dependency: without it the cross-checks error, they are never
skipped.
"""
from __future__ import annotations

import math
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from urdfref import PinocchioRobot, relative_error

import core
from core.io.urdf import rpy_rotation

ARM7 = Path(__file__).resolve().parents[1] / "core" / "data" / "arm7.urdf"
JOINTS = [f"arm_joint{i}" for i in range(1, 8)]
TOL = 1e-8
DT = 0.01
#: a bent pose inside the position limits (lift in m, the rest in rad)
POSE = np.array([0.15, 0.3, 0.6, -0.4, -1.2, 0.5, 0.2])


@pytest.fixture(scope="module")
def arm():
    return core.load_system(ARM7)


@pytest.fixture(scope="module")
def xml():
    return ET.parse(ARM7).getroot()      # our own file: the standard library parser is enough


def mass_matrix(system, q):
    """``M(q)``, column by column from the momentum ``p = M(q) dq`` (linear in ``dq``)."""
    return np.column_stack([system.momentum(q, e) for e in np.eye(system.nq)])


def random_poses(system, seed, count):
    """Configurations inside the position limits (the continuous joint in [-pi, pi])."""
    rng = np.random.default_rng(seed)
    lower, upper = system.position_limits
    lower, upper = np.where(np.isinf(lower), -math.pi, lower), np.where(np.isinf(upper), math.pi, upper)
    return [rng.uniform(lower, upper) for _ in range(count)]


def holding_state(vi, q0):
    """The integrator's rest state at ``q0`` and the input that keeps it there: the DEL inverse
    dynamics of three equal knots. With ``F_d^+ = 0`` the first step's input is half the holding
    torque (it starts from ``p = 0``); from the second step on, ``u`` is the holding torque and
    ``p = D2 L_d(q0, q0) = -dt/2 u`` (not the continuous momentum 0)."""
    U, P, residual = vi.inverse_dynamics(np.stack([q0, q0, q0]), np.zeros(vi.nd))
    assert np.all(residual == 0.0)
    return np.concatenate([q0, P[-1]]), U[-1]


# ---------------------------------------------------------------------------------- loading
def test_loads_from_the_file_and_from_its_text(arm, monkeypatch):
    monkeypatch.chdir(ARM7.parents[2])          # the repository
    text = ARM7.read_text()
    q, dq, u = POSE, np.linspace(-1.0, 1.0, 7), np.linspace(5.0, -5.0, 7)
    for system in (core.load_system(str(ARM7)), core.load_system("core/data/arm7.urdf"), core.load_system("arm7.urdf"),
                   core.load_urdf(text), core.load_system(text)):
        assert system.name == "mechnode_arm7"
        assert system.config_names == arm.config_names
        assert np.array_equal(system.qdd(q, dq, u), arm.qdd(q, dq, u))


def test_coordinates_inputs_and_bodies(arm):
    assert arm.nq == 7 and arm.nu == 7
    assert arm.config_names == JOINTS and arm.input_names == JOINTS
    assert arm.frame_names == ["lift_link", "shoulder_link", "upper_arm_link", "elbow_link",
                               "forearm_link", "wrist_link", "flange_link"]
    # one frame per coordinate: the fixed tool and tool centre point are merged into the flange
    assert arm.model.nf == 7
    assert arm.model.frame_mass.tolist() == pytest.approx([4.0, 3.0, 2.5, 1.8, 1.2, 0.8, 0.85], abs=1e-15)
    assert arm.links["tool_link"][0] == arm.links["tcp_link"][0] == "flange_link"
    assert arm.links["base_link"][0] == "world"


def test_limits_are_the_files(arm, xml):
    expected = {}
    for j in xml.findall("joint"):
        if j.get("type") == "fixed":
            continue
        lim, dyn = j.find("limit").attrib, j.find("dynamics").attrib
        continuous = j.get("type") == "continuous"
        expected[j.get("name")] = {
            "lower": -math.inf if continuous else float(lim["lower"]),
            "upper": math.inf if continuous else float(lim["upper"]),
            "velocity": float(lim["velocity"]), "effort": float(lim["effort"]),
            "damping": float(dyn["damping"]), "friction": float(dyn["friction"])}
    assert arm.joint_limits == expected
    lower, upper = arm.position_limits
    assert lower.tolist() == [0.0, -2.8, -2.0, -2.9, -2.6, -2.5, -math.inf]
    assert upper.tolist() == [0.35, 2.8, 2.0, 2.9, 0.3, 2.5, math.inf]
    assert arm.velocity_limits.tolist() == [0.15, 1.5, 1.5, 2.0, 2.0, 2.5, 3.0]
    assert arm.effort_limits.tolist() == [300.0, 80.0, 80.0, 40.0, 40.0, 15.0, 10.0]
    assert np.all((lower <= POSE) & (POSE <= upper))


def test_the_file_has_what_it_promises(xml):
    joints = xml.findall("joint")
    types = [j.get("type") for j in joints]
    assert sorted(types) == sorted(["prismatic", "continuous", "fixed", "fixed"] + ["revolute"] * 5)
    assert [j.get("name") for j in joints if j.get("type") != "fixed"] == JOINTS
    axes = [np.array(j.find("axis").get("xyz").split(), float) for j in joints if j.find("axis") is not None]
    assert any(np.count_nonzero(a) > 1 for a in axes)              # an axis off the coordinate axes
    assert any(np.any(np.array(j.find("origin").get("rpy").split(), float)) for j in joints)
    with_inertial = [link for link in xml.findall("link") if link.find("inertial") is not None]
    assert len(with_inertial) == 9 and xml.find("link[@name='tcp_link']").find("inertial") is None
    for link in with_inertial:
        inertial = link.find("inertial")
        assert np.any(np.array(inertial.find("origin").get("xyz").split(), float))   # offset centre of mass
        rpy = np.array(inertial.find("origin").get("rpy").split(), float)
        c = {k: float(v) for k, v in inertial.find("inertia").attrib.items()}
        inertia = np.array([[c["ixx"], c["ixy"], c["ixz"]], [c["ixy"], c["iyy"], c["iyz"]],
                            [c["ixz"], c["iyz"], c["izz"]]])
        moments = np.linalg.eigvalsh(inertia)
        assert moments[0] > 0 and moments[2] < moments[0] + moments[1], link.get("name")
        if link.get("name") != "base_link":          # fixed to the world: never moves
            assert np.any(rpy) and np.count_nonzero(inertia - np.diag(np.diag(inertia))), link.get("name")
            # not axis-aligned in the link frame either
            R = rpy_rotation(*rpy)
            in_link = R @ inertia @ R.T
            assert np.abs(in_link - np.diag(np.diag(in_link))).max() > 1e-6, link.get("name")
    masses = {link.get("name"): float(link.find("inertial/mass").get("value")) for link in with_inertial}
    assert masses["lift_link"] == 4.0 and masses["flange_link"] == 0.5


def test_mass_matrix_is_well_conditioned(arm):
    """Positive definite everywhere in the limits; the condition number (about 3e4: a 14 kg lift
    next to a 6e-4 kg m^2 flange roll) is a matter of units: scaled to a unit diagonal it is below
    30, as for the Panda."""
    for q in [np.zeros(7)] + random_poses(arm, 0, 8):
        M = mass_matrix(arm, q)
        assert np.allclose(M, M.T, rtol=0, atol=1e-14)
        moments = np.linalg.eigvalsh(M)
        d = 1.0 / np.sqrt(np.diag(M))
        scaled = np.linalg.eigvalsh(M * np.outer(d, d))
        assert moments[0] > 4e-4 and moments[-1] / moments[0] < 5e4, moments
        assert scaled[-1] / scaled[0] < 40.0, scaled
    M0 = mass_matrix(arm, np.zeros(7))
    assert M0[0, 0] == pytest.approx(14.15, rel=1e-12)      # the lift carries every moving body
    print(f"M(0): eigenvalues {np.linalg.eigvalsh(M0)[[0, -1]]}, diagonal {np.diag(M0)}")


# ---------------------------------------------------------------------------------- Pinocchio
@pytest.mark.parametrize("source", ["path", "text"])
def test_matches_pinocchio(arm, source):
    """qdd, A, B at random states (the continuous joint is (cos, sin) in Pinocchio: mapped by
    ``PinocchioRobot``), and the holding torque against Pinocchio's generalized gravity."""
    src = str(ARM7) if source == "path" else ARM7.read_text()
    system = core.load_urdf(src)
    pin_robot = PinocchioRobot(system, src)
    assert pin_robot.continuous == [False] * 6 + [True]
    rng = np.random.default_rng(18)
    worst = np.zeros(3)
    for q in [np.zeros(7), POSE] + random_poses(system, 1, 4):
        dq, u = rng.normal(size=7), rng.normal(size=7) * 5.0
        A, B = system.linearize(q, dq, u)
        Ap, Bp = pin_robot.linearize(q, dq, u)
        worst = np.maximum(worst, (relative_error(system.qdd(q, dq, u), pin_robot.qdd(q, dq, u)),
                                   relative_error(A, Ap), relative_error(B, Bp)))
    print(f"arm7 ({source}): max relative error qdd {worst[0]:.1e}, A {worst[1]:.1e}, B {worst[2]:.1e}")
    assert worst.max() < TOL, worst
    pin = pin_robot.pin
    qp, _, _ = pin_robot.state(POSE, np.zeros(7), np.zeros(7))
    gravity = pin.computeGeneralizedGravity(pin_robot.model, pin_robot.data, qp)[pin_robot.iv]
    _, u_hold = holding_state(core.MidpointVI(system, DT), POSE)
    assert relative_error(u_hold, gravity) < TOL


# ---------------------------------------------------------------------------------- integrator, LQR
def test_integrator_steps_and_linearizes_at_zero(arm):
    vi = core.MidpointVI(arm, DT)
    assert vi.nx == 14 and vi.nu == 7
    x = vi.discrete_state(np.zeros(7), np.zeros(7))
    x1 = vi.step(x, np.zeros(7))
    assert np.all(np.isfinite(x1)) and x1[0] < 0.0                 # unheld, the lift sinks
    A, B = vi.linearize(x, np.zeros(7))
    assert A.shape == (14, 14) and B.shape == (14, 7)
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(B))
    x2, A2, B2 = vi.step_linearize(x, np.zeros(7))
    assert np.array_equal(x2, x1) and np.array_equal(A2, A) and np.array_equal(B2, B)
    assert core.controllability(A, B).controllable


def test_lqr_holds_a_pose_against_gravity(arm):
    """Discrete LQR on the integrator's exact linearization at the gravity-compensated rest
    state of :data:`POSE`; from a perturbed pose the closed loop returns within 3 s, inside the
    URDF's effort limits."""
    vi = core.MidpointVI(arm, DT)
    x0, u0 = holding_state(vi, POSE)
    assert np.array_equal(vi.step(x0, u0), x0)                     # a fixed point of the step
    assert np.abs(u0).max() > 100.0                                # the lift holds ~14 kg
    A, B = vi.linearize(x0, u0)
    n = arm.nq
    M_inv = np.linalg.inv(mass_matrix(arm, POSE))
    # Bryson-style weights: 0.02 m, 0.1 rad, 1 rad/s (on p through dq = M^-1 p), full effort
    position_scale = np.array([0.02] + [0.1] * 6)
    Q = np.zeros((2 * n, 2 * n))
    Q[:n, :n] = np.diag(1.0 / position_scale**2)
    Q[n:, n:] = M_inv @ M_inv
    R = np.diag(1.0 / arm.effort_limits**2)
    K, _ = core.dlqr(A, B, Q, R)
    open_loop, closed_loop = np.abs(np.linalg.eigvals(A)), np.abs(np.linalg.eigvals(A - B @ K))
    print("open-loop |eig|:", np.array2string(np.sort(open_loop), precision=4))
    print("closed-loop |eig|:", np.array2string(np.sort(closed_loop), precision=4))
    assert open_loop.max() > 1.0 and closed_loop.max() < 0.95
    steps = int(round(3.0 / DT))
    start = x0.copy()
    start[:n] += np.array([0.03, 0.1, -0.1, 0.15, 0.1, -0.2, 0.3])
    X, U = core.simulate_closed_loop(vi.step, start, np.tile(x0, (steps + 1, 1)),
                                     np.tile(u0, (steps, 1)), np.tile(K, (steps, 1, 1)))
    error = np.abs(X - x0).max(axis=1)
    print(f"error: {error[0]:.2e} at 0 s, {error[100]:.2e} at 1 s, {error[-1]:.2e} at 3 s; "
          f"largest |u| / effort limit {np.max(np.abs(U) / arm.effort_limits):.2f}")
    assert np.all(np.diff(error[100:]) <= 1e-12)                  # settles monotonically after 1 s
    assert error[100] < 1e-3 and error[-1] < 1e-10
    assert np.all(np.abs(U) <= arm.effort_limits)
