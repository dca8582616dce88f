"""The node's legged-robot logic (ROS-free, :mod:`mechnode.logic.legged`): contacts from the
parameter, the base state from an odometry, the balance hold closed around MuJoCo, and the
contacts a command would need to pull."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="MuJoCo is a test dependency (pip install 'mechnode[test]')")

from test_mujoco_balance import RADIUS, solo12_standing  # noqa: E402

import core  # noqa: E402
from mechnode.errors import InputError  # noqa: E402
from mechnode.logic.gains import STATE_TANGENT, HoldError  # noqa: E402
from mechnode.logic.legged import (  # noqa: E402
    LeggedPlant,
    balance_hold,
    base_state,
    contact_normals,
    parse_contacts,
    pulling_contacts,
)
from mechnode.logic.plant import ModelSpecError  # noqa: E402
from mechnode.testing.mujoco_plant import MujocoPlant  # noqa: E402

DT = 0.002


def _weights(system):
    n = system.nv
    return np.diag(np.r_[10.0 * np.ones(n), np.ones(n)]), 100.0 * np.eye(system.nu)


def test_contacts_parameter():
    assert parse_contacts(["FL_FOOT", "l_sole=frame", " r_sole = point "]) == \
        [("FL_FOOT", "point"), ("l_sole", "frame"), ("r_sole", "point")]
    assert parse_contacts([]) == []
    for entries, message in [(["a=b=c"], "must be 'frame'"), (["foot=line"], "expected 'frame'"),
                             (["=point"], "expected 'frame'"), (["x", "x=frame"], "names frame 'x' twice"),
                             (["f"] * 65, "more than 64"), (["f" * 300], "at most 256"), ([3], "must be 'frame'")]:
        with pytest.raises(InputError, match=message):
            parse_contacts(entries)


def test_base_state_is_the_odometry_in_the_model_convention():
    """An odometry made from MuJoCo's ground truth as REP 105 has it (the base's pose in the
    world, its twist on its own axes) gives the plant's state exactly."""
    path, system, stance = solo12_standing()
    sim = MujocoPlant(path, system, foot_radius=RADIUS)
    rng = np.random.default_rng(3)
    q = stance.q.copy()
    q[3:7] = rng.normal(size=4)
    q[3:7] /= np.linalg.norm(q[3:7])
    v = rng.normal(size=system.nv)
    sim.set_state(q, v)
    d = sim.data
    w, x, y, z = d.qpos[3:7]
    R = np.zeros(9)
    sim._mj.mju_quat2Mat(R, d.qpos[3:7])
    twist = R.reshape(3, 3).T @ d.qvel[:3]          # the world-axes linear velocity, on the base's axes
    qb, vb = base_state(d.qpos[:3], [x, y, z, w], twist, d.qvel[3:6])
    truth_q, truth_v = sim.state()
    np.testing.assert_allclose(qb, truth_q[:7], atol=1e-15)
    np.testing.assert_allclose(vb, truth_v[:6], atol=1e-14)
    np.testing.assert_allclose(vb, v[:6], atol=1e-14)
    qb, _ = base_state([0, 0, 0], [0, 0, 0, 1.0005], [0, 0, 0], [0, 0, 0])
    assert qb[6] == 1.0                                               # normalized within tolerance


def test_base_state_refusals():
    ok = ([0, 0, 0], [0, 0, 0, 1], [0, 0, 0], [0, 0, 0])
    for i, bad, message in [(1, [0, 0, 0, 2], r"norm 2, not 1"), (1, [0, 0, 0, 0], "norm 0"),
                            (0, [0, np.nan, 0], r"position\[1\] = nan"), (2, [0, 0], "3 entries"),
                            (3, [0, 0, np.inf], r"angular velocity\[2\] = inf")]:
        args = list(ok)
        args[i] = bad
        with pytest.raises(InputError, match=message):
            base_state(*args)


def test_balance_hold_holds_solo12_in_mujoco():
    """The hold about the measured stance (with the feet slightly settled into MuJoCo's soft
    floor after 0.2 s open loop) keeps the robot within 1 mm for 3 s, and its contact forces
    push."""
    path, system, stance = solo12_standing()
    sim = MujocoPlant(path, system, foot_radius=RADIUS)
    sim.set_state(stance.q, np.zeros(system.nv))
    sim.step(stance.u, 0.2)
    q0, v0 = sim.state()
    Q, R = _weights(system)
    plant = LeggedPlant.load(path, DT, [(frame, kind) for frame, kind, _ in system.contacts])
    hold = balance_hold(plant.system, q0, Q, R, DT, plant.config_names)
    assert hold.fits(plant)
    assert hold.convention == STATE_TANGENT and hold.K.shape == (1, system.nu, 2 * system.nv)
    assert hold.x_ref.shape == (1, system.nq + system.nv) and hold.info["spectral_radius"] < 1.0
    worst = 0.0
    for _ in range(int(3.0 / DT)):
        q, v = sim.state()
        u, _, x = hold.command(plant, 0.0, q, v)
        assert u is not None and not pulling_contacts(system, q, v, u)
        sim.step(u, DT)
        worst = max(worst, float(np.linalg.norm(sim.state()[0][:3] - q0[:3])))
    assert worst < 1e-3, worst
    normals = contact_normals(system, q0, np.zeros(system.nv), hold.u_ref[0])
    np.testing.assert_allclose(normals.sum(), 9.81 * 2.5, rtol=1e-3)       # Solo12's 2.5 kg


def test_a_command_that_would_pull_is_named():
    """Lifting the front legs' knees hard while standing: the model's normal forces at the front
    feet turn negative and are named with their values."""
    _, system, stance = solo12_standing()
    u = stance.u.copy()
    u[[2, 5]] -= 5.0                                       # FL_KFE, FR_KFE
    pulling = pulling_contacts(system, stance.q, np.zeros(system.nv), u)
    assert [frame for frame, _ in pulling] == ["FL_FOOT", "FR_FOOT"], pulling
    assert all(force < 0.0 for _, force in pulling)
    assert not pulling_contacts(system, stance.q, np.zeros(system.nv), stance.u)


def test_balance_hold_refusals():
    _, system, stance = solo12_standing()
    Q, R = _weights(system)
    q = stance.q.copy()
    q[7:] = np.tile([0.0, -0.6, -1.6], 4)                 # the feet swung forward of the body
    with pytest.raises(HoldError, match="centre of mass"):
        balance_hold(system, q, Q, R, DT)
    arm = core.load_system("double_pendulum.yaml")
    with pytest.raises(HoldError, match="floating base"):
        balance_hold(arm, np.zeros(arm.nq), np.eye(2 * arm.nv), np.eye(arm.nu), DT)
    with pytest.raises(HoldError, match="dt must be a finite positive number"):
        balance_hold(system, stance.q, Q, R, 0.0)


def test_legged_plant_names_and_refusals():
    path, system, _ = solo12_standing()
    feet = [(frame, "point") for frame, _, _ in system.contacts]
    plant = LeggedPlant.load(path, DT, feet)
    assert plant.config_names == list(system.input_names) and plant.nx == 36 and plant.nu == 12 and plant.n == 19
    assert plant.state_names[:2] == ["d_root_vx", "d_root_vy"] and plant.state_names[18] == "root_vx"
    assert "FL_FOOT (point)" in plant.actuation
    with pytest.raises(ModelSpecError, match="needs contacts"):
        LeggedPlant.load(path, DT, [])
    with pytest.raises(ModelSpecError, match="no_such_foot"):
        LeggedPlant.load(path, DT, [("no_such_foot", "point")])
    with pytest.raises(ModelSpecError, match="need a URDF model"):
        LeggedPlant.load("cartpole.yaml", DT, feet)
