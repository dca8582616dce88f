"""A legged robot's joint reference made a body motion and its gains (ROS-free,
:mod:`mechnode.logic.body`): the base fitted to the contacts, the joints re-solved on them, the
schedule's knots ``body_step`` apart, a reference that would move a foot refused, and the
schedule tracked in MuJoCo through :meth:`mechnode.logic.gains.Schedule.command`."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="MuJoCo is a test dependency (pip install 'mechnode[test]')")

from test_mujoco_balance import RADIUS, solo12_standing  # noqa: E402

import core  # noqa: E402
from mechnode.errors import InputError  # noqa: E402
from mechnode.logic.body import base_offsets, body_schedule, knot_step, replan_body  # noqa: E402
from mechnode.logic.gains import STATE_TANGENT  # noqa: E402
from mechnode.logic.legged import LeggedPlant  # noqa: E402
from mechnode.logic.resampling import Reference  # noqa: E402
from mechnode.testing.mujoco_plant import MujocoPlant  # noqa: E402

DT = 0.002
FEET = [("FL_FOOT", "point"), ("FR_FOOT", "point"), ("HL_FOOT", "point"), ("HR_FOOT", "point")]


def _weights(system):
    n = system.nv
    return np.diag(np.r_[10.0 * np.ones(n), np.ones(n)]), 100.0 * np.eye(system.nu)


def _sway(system, stance, duration=4.0, period=0.05):
    """A ±2 cm 0.5 Hz lateral sway eased in and out over 1 s: its points' times, the base offsets
    and the joints (``core.body_motion``, as a user's inverse kinematics would give them)."""
    times = np.arange(0.0, duration + 1e-9, period)
    ease = np.clip(np.minimum(times, duration - times), 0.0, 1.0)
    ease = ease * ease * (3.0 - 2.0 * ease)
    offsets = np.zeros((times.size, 3))
    offsets[:, 1] = 0.02 * np.sin(np.pi * times) * ease
    return times, offsets, core.body_motion(system, stance, times, offsets).q[:, 7:]


def test_the_base_is_fitted_to_the_contacts_and_a_foot_move_is_refused():
    _, system, stance = solo12_standing()
    times, offsets, joints = _sway(system, stance.q, duration=2.0, period=0.25)
    anchors = system.contact_anchors(stance.q)
    assert np.abs(base_offsets(system, stance.q, joints, anchors) - offsets).max() < 1e-9
    bad = joints.copy()
    bad[3, 2] += 0.05                                    # FL knee: the front left foot would move
    with pytest.raises(InputError, match=r"reference point 3: its joints do not keep the contacts .* a contact "
                                         r"row of 0\.0\d+ remains"):
        base_offsets(system, stance.q, bad, anchors)


def test_body_schedule_layout():
    _, system, stance = solo12_standing()
    times, offsets, joints = _sway(system, stance.q, duration=1.0, period=0.1)
    Q, R = _weights(system)
    # the first point after t = 0: the motion starts from the stance at t = 0
    s = body_schedule(system, stance.q, Reference(times[1:] + 0.0, joints[1:]), Q, R, DT, 0.0105, 20000,
                      ["j"] * 12)
    assert s.dt == pytest.approx(0.01) == knot_step(0.0105, DT) and s.convention == STATE_TANGENT
    assert s.knots == 101 and s.x_ref.shape == (101, system.nq + system.nv)
    assert s.K.shape == (101, system.nu, 2 * system.nv) and s.u_ref.shape == (101, system.nu)
    assert np.allclose(s.x_ref[0, :system.nq], stance.q, atol=1e-12)
    assert np.abs(s.x_ref[::10, 7:system.nq] - joints).max() < 1e-9       # the points' joints, on the knots
    assert np.abs(s.x_ref[::10, :3] - stance.q[:3] - offsets).max() < 1e-9
    assert np.abs(s.x_ref[[0, -1], system.nq:]).max() < 1e-12               # from rest to rest
    # the contacts stay where they were at every knot
    anchors = system.contact_anchors(stance.q)
    assert max(np.abs(system.constraint(q, 0, anchors=anchors)).max() for q in s.x_ref[:, :system.nq]) < 1e-10
    assert s.info["joint_mismatch"] < 1e-9
    assert s.info["base_offset_max"] == pytest.approx(np.abs(offsets).max(), abs=1e-3)
    plant = LeggedPlant(system, DT, contacts=FEET)
    assert s.fits(plant) and not s.fits(plant.with_dt(0.003))             # a whole number of periods
    with pytest.raises(InputError, match="the limit \\(parameter max_knots\\) is 50"):
        body_schedule(system, stance.q, Reference(times, joints), Q, R, DT, 0.01, 50)
    with pytest.raises(InputError, match="time_from_start must increase"):
        body_schedule(system, stance.q, Reference(times[::-1].copy(), joints), Q, R, DT, 0.01, 20000)


def test_a_body_schedule_tracks_a_sway_in_mujoco():
    """The schedule, applied every 2 ms through ``Schedule.command`` (knots 10 ms apart), keeps the
    base within 5 mm of its reference and the feet within 5 mm in MuJoCo."""
    path, system, stance = solo12_standing()
    times, _, joints = _sway(system, stance.q)
    Q, R = _weights(system)
    s = body_schedule(system, stance.q, Reference(times, joints), Q, R, DT, 0.01, 20000)
    plant = LeggedPlant(system, DT, contacts=FEET)
    sim = MujocoPlant(path, system, foot_radius=RADIUS)
    sim.set_state(stance.q, np.zeros(system.nv))
    feet0 = sim.contact_positions()
    error, slip, lateral = [], [], []
    for _ in range(int(round(5.0 / DT))):
        q, v = sim.state()
        u, _, _ = s.command(plant, sim.time, q, v)
        sim.step(u, DT)
        q, _ = sim.state()
        reference = [np.interp(sim.time, s.times, s.x_ref[:, i]) for i in range(3)]
        error.append(np.linalg.norm(q[:3] - reference))
        slip.append(np.linalg.norm(sim.contact_positions() - feet0, axis=1).max())
        lateral.append(q[1])
    assert np.ptp(lateral) > 0.035
    assert max(error) < 0.005 and max(slip) < 0.005, (max(error), max(slip))


def test_the_lfc_form_of_a_floating_base_is_the_same_law():
    """LFC's law, ``tau = u_ff + K_lfc [difference(q, q_ref); v_ref - v]`` (Pinocchio's difference:
    the free flyer's SE(3) log), on the LFC form of the balance hold and of a body schedule, equals
    ``Schedule.command`` at states around every knot, to rounding: the same law, not a first-order
    copy."""
    from mechnode.logic.legged import balance_hold
    from mechnode.logic.lfc import lfc_schedule
    _, system, stance = solo12_standing()
    Q, R = _weights(system)
    times, _, joints = _sway(system, stance.q, duration=1.0, period=0.1)
    plant = LeggedPlant(system, DT, contacts=FEET)
    rng = np.random.default_rng(3)
    for sched in (balance_hold(system, stance.q, Q, R, DT), body_schedule(system, stance.q, Reference(times, joints),
                                                                         Q, R, DT, 0.01, 20000)):
        lfc = lfc_schedule(plant, sched)
        assert lfc.K.shape == (sched.knots, 12, 2 * system.nv) and lfc.base_pose.shape == (sched.knots, 7)
        for k in range(0, sched.knots, 7):
            q_ref = np.r_[lfc.base_pose[k], lfc.q_ref[k]]
            v_ref = np.r_[lfc.base_twist[k], lfc.v_ref[k]]
            q = system.integrate(q_ref, 0.05 * rng.standard_normal(system.nv))
            v = v_ref + 0.1 * rng.standard_normal(system.nv)
            tau = lfc.u_ff[k] + lfc.K[k] @ np.r_[system.difference(q, q_ref), v_ref - v]
            u, knot, _ = sched.command(plant, sched.times[k], q, v)
            assert knot == k and np.allclose(tau, u, rtol=0, atol=1e-10), np.abs(tau - u).max()


def test_a_body_motion_is_replanned_on_the_measured_contacts():
    """From the reference's own state the re-plan is the schedule itself (the same path, anchors,
    independent coordinates and Riccati pass); from a state whose feet slipped 1 mm it stands on
    them where they are; with a horizon only that window changes; after the end there is nothing
    to re-plan."""
    _, system, stance = solo12_standing()
    Q, R = _weights(system)
    times, _, joints = _sway(system, stance.q, duration=1.0, period=0.1)
    s = body_schedule(system, stance.q, Reference(times, joints), Q, R, DT, 0.01, 20000)
    nq, k0 = system.nq, 40
    same = replan_body(system, s, s.x_ref[k0, :nq], s.times[k0], Q, R)
    assert same.info["replan_knot"] == k0 and same.info["replan_steps"] == s.knots - 1 - k0
    assert np.abs(same.x_ref - s.x_ref).max() < 1e-10 and np.abs(same.u_ref - s.u_ref).max() < 1e-8
    assert np.abs(same.K - s.K).max() < 1e-6 * np.abs(s.K).max()
    slipped = s.x_ref[k0, :nq].copy()
    slipped[0] += 0.001                                 # the whole robot 1 mm forward: every foot slipped
    moved = replan_body(system, s, slipped, s.times[k0] + 0.004, Q, R, horizon=0.2)
    assert moved.info["replan_steps"] == 20
    anchors = system.contact_anchors(slipped)
    window = moved.x_ref[k0:k0 + 21, :nq]
    assert max(np.abs(system.constraint(q, 0, anchors=anchors)).max() for q in window) < 1e-10
    assert np.allclose(window[:, :3], s.x_ref[k0:k0 + 21, :3], atol=1e-12)      # the same base path
    assert np.abs(window[:, 7:] - s.x_ref[k0:k0 + 21, 7:nq]).max() > 1e-3         # other joints
    assert np.array_equal(moved.x_ref[k0 + 21:], s.x_ref[k0 + 21:]) and np.array_equal(moved.K[:k0], s.K[:k0])
    assert replan_body(system, s, s.x_ref[-1, :nq], s.times[-1] + 1.0, Q, R) is None
