"""The library's contact-consistent LQR balances legged robots simulated by MuJoCo.

The plant is :class:`mechnode.testing.mujoco_plant.MujocoPlant`: the robot's URDF through
MuJoCo's own parser, soft contacts with friction on a floor; the controller is
:func:`core.balance_lqr` (one gain about the stance) or :func:`core.balance_schedule` (gains
along a sway), designed for the 500 Hz loop it runs in (``dt = 2 ms``, the command held between
samples, the state read from the simulator's ground truth). The targets are those of the node's
closed loop: standing 10 s with the base within 1 cm and 1 deg and no foot lifting or slipping
over 5 mm, back within 1 cm of the stance less than 2 s after a 0.3 m/s lateral push, a ±2 cm
0.5 Hz sway tracked within 5 mm.
"""
from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="MuJoCo is a test dependency (pip install 'mechnode[test]')")

from urdfref import robot_path  # noqa: E402

import core  # noqa: E402
from mechnode.testing.mujoco_plant import MujocoPlant  # noqa: E402

DT = 0.002                                  # the control period (s): 500 Hz
RADIUS = 0.016                              # Solo12's foot spheres (m)


def solo12_standing():
    path = robot_path("solo_description/robots/solo12.urdf")
    system = core.load_urdf(path, floating_base="quaternion")
    for foot in core.find_feet(system):
        system.add_contact(foot, "point")
    q = system.neutral()
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    return path, system, core.standing(system, q, height=RADIUS)


def _weights(system, position: float, rate: float, effort: float):
    n = system.nv
    return np.diag(np.r_[position * np.ones(n), rate * np.ones(n)]), effort * np.eye(system.nu)


class Run:
    """The closed loop's record: time, base position and orientation error (rad), contact
    frame positions, efforts."""

    def __init__(self):
        self.t, self.base, self.angle, self.feet, self.u = [], [], [], [], []

    def arrays(self):
        return (np.array(self.t), np.array(self.base), np.array(self.angle), np.array(self.feet),
                np.array(self.u))


def _run(plant, law, duration: float, run: Run, events=()) -> Run:
    """``duration`` s of the loop: every ``DT`` the state, ``u = law(t, q, v)`` held for ``DT``;
    ``events``: ``(time, action)`` pairs, each ``action(plant)`` once at its time."""
    pending = sorted(events, key=lambda e: e[0])
    start = plant.time
    for k in range(int(round(duration / DT))):
        t = start + k * DT
        while pending and pending[0][0] <= t + 1e-9:
            pending.pop(0)[1](plant)
        q, v = plant.state()
        u = law(t, q, v)
        plant.step(u, DT)
        q, _ = plant.state()
        run.t.append(plant.time)
        run.base.append(q[:3])
        run.angle.append(q[3:7])
        run.feet.append(plant.contact_positions())
        run.u.append(u)
    return run


def _hold(system, stance, gain):
    limit = np.array([system.joint_limits[name]["effort"] for name in system.input_names])

    def law(t, q, v):
        return np.clip(stance.u - gain.K @ np.r_[system.difference(stance.q, q), v], -limit, limit)
    return law


def _tilt(quaternions, reference) -> np.ndarray:
    """The angle (rad) between each orientation and the reference's."""
    w0, xyz0 = reference[3], reference[:3]
    dots = np.abs(quaternions[:, 3] * w0 + quaternions[:, :3] @ xyz0)
    return 2.0 * np.arccos(np.clip(dots, -1.0, 1.0))


def _stand_and_push(path, system, stance, Q, R, push_at: float, duration: float, push: float = 0.3, **plant):
    gain = core.balance_lqr(system, stance.q, stance.u, Q, R, dt=DT)
    sim = MujocoPlant(path, system, **plant)
    sim.set_state(stance.q, np.zeros(system.nv))
    feet0 = sim.contact_positions()
    run = _run(sim, _hold(system, stance, gain), duration, Run(),
               events=[(push_at, lambda p: p.push([0.0, push, 0.0]))])
    t, base, quat, feet, u = run.arrays()
    error = np.linalg.norm(base - stance.q[:3], axis=1)
    return t, error, _tilt(quat, stance.q[3:7]), np.linalg.norm(feet - feet0, axis=2).max(axis=1), u


def test_solo12_stands_and_recovers_from_a_push_in_mujoco():
    """Solo12 on four point feet: 10 s standing, then a 0.3 m/s lateral push, 3 s more."""
    path, system, stance = solo12_standing()
    Q, R = _weights(system, 10.0, 1.0, 100.0)
    t, error, tilt, slip, u = _stand_and_push(path, system, stance, Q, R, push_at=10.0, duration=13.0,
                                              foot_radius=RADIUS)
    before = t <= 10.0
    assert error[before].max() < 0.01 and np.degrees(tilt[before].max()) < 1.0, \
        (error[before].max(), np.degrees(tilt[before].max()))
    assert slip.max() < 0.005, slip.max()                                        # no foot lifts or slips
    assert error[~before].max() > 0.005                                          # the push moved it
    assert error[t >= 12.0 - 1e-9].max() < 0.01, error[t >= 12.0 - 1e-9].max()  # back within 2 s
    assert np.all(np.isfinite(u))
    # without the feedback (the holding torques alone) the same push leaves it elsewhere
    sim = MujocoPlant(path, system, foot_radius=RADIUS)
    sim.set_state(stance.q, np.zeros(system.nv))
    sim.push([0.0, 0.3, 0.0])
    open_loop = _run(sim, lambda time, q, v: stance.u, 2.0, Run()).arrays()[1]
    assert np.linalg.norm(open_loop[-1] - stance.q[:3]) > 0.02


def test_solo12_tracks_a_sway_in_mujoco():
    """A ±2 cm 0.5 Hz lateral sway of the base over the feet (``core.body_motion``), tracked in
    MuJoCo with the time-varying gains along it (``core.balance_schedule``, one knot a period)."""
    path, system, stance = solo12_standing()
    duration, amplitude, w = 4.0, 0.02, np.pi
    t = DT * np.arange(int(round(duration / DT)) + 1)
    zero = np.zeros_like(t)
    motion = core.body_motion(system, stance.q, t, np.c_[zero, amplitude * np.sin(w * t), zero],
                              np.c_[zero, amplitude * w * np.cos(w * t), zero],
                              np.c_[zero, -amplitude * w * w * np.sin(w * t), zero])
    Q, R = _weights(system, 10.0, 1.0, 100.0)
    schedule = core.balance_schedule(system, motion, Q, R)
    sim = MujocoPlant(path, system, foot_radius=RADIUS)
    sim.set_state(motion.q[0], motion.v[0])
    feet0 = sim.contact_positions()

    def law(time, q, v):
        k = min(int(round(time / DT)), t.size - 2)
        return motion.u[k] - schedule.K[k] @ np.r_[system.difference(motion.q[k], q), v - motion.v[k]]

    run = _run(sim, law, duration, Run())
    times, base, _, feet, _ = run.arrays()
    reference = np.array([np.interp(times, t, motion.q[:, i]) for i in range(3)]).T
    error = np.linalg.norm(base - reference, axis=1)
    assert np.ptp(base[:, 1]) > 0.035                              # it does sway, ±2 cm
    assert error.max() < 0.005, error.max()
    assert np.linalg.norm(feet - feet0, axis=2).max() < 0.005


def _talos():
    """Talos (reduced) on its two soles: the arms and torso at the SRDF's ``half_sitting``, the
    legs crouched level (hip pitch -0.4, knee 0.8, ankle pitch -0.4 rad; the SRDF's legs leave
    the soles 0.3 mm apart in height, which :func:`core.standing` refuses)."""
    path = robot_path("talos_data/robots/talos_reduced.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system = core.load_urdf(path, floating_base="quaternion")
    for foot in core.find_feet(system):
        system.add_contact(foot, "frame")
    q, names = system.neutral(), list(system.velocity_names[6:])
    posture = ET.parse(robot_path("talos_data/srdf/talos.srdf")).getroot().find("group_state[@name='half_sitting']")
    for joint in posture:
        if joint.get("name") in names:
            q[7 + names.index(joint.get("name"))] = float(joint.get("value"))
    for side in ("left", "right"):
        for j, angle in enumerate([0.0, 0.0, -0.4, 0.8, -0.4, 0.0], start=1):
            q[7 + names.index(f"leg_{side}_{j}_joint")] = angle
    return path, system, core.standing(system, q, height=0.0)


def test_talos_stands_and_recovers_from_a_push_in_mujoco():
    """Talos on its two flat feet (frame contacts on the soles, MuJoCo boxes of the soles' size
    in ``talos_reduced_box.urdf``, 0.21 x 0.13 m): 10 s standing, then a 0.1 m/s lateral push,
    3 s more, the efforts saturated at the URDF's limits. A 0.2 m/s push tips the soles: the
    gain's first answer asks the ankles for more roll moment than a sole can carry (its normal
    force times its half width), which a controller on rigid contacts does not know."""
    path, system, stance = _talos()
    Q, R = _weights(system, 100.0, 1.0, 1.0)
    t, error, tilt, slip, u = _stand_and_push(path, system, stance, Q, R, push_at=10.0, duration=13.0,
                                              push=0.1, sole=(0.105, 0.065))
    before = t <= 10.0
    assert error[before].max() < 0.01 and np.degrees(tilt[before].max()) < 1.0, \
        (error[before].max(), np.degrees(tilt[before].max()))
    assert slip.max() < 0.005, slip.max()
    assert error[~before].max() > 0.005
    assert error[t >= 12.0 - 1e-9].max() < 0.01, error[t >= 12.0 - 1e-9].max()
