"""Moving the body on the contacts (``core.body_motion``) and time-varying contact-consistent LQR
gains along it (``core.balance_schedule``).

* The discrete model is exact where it claims to be: at a standing state (an equilibrium) the
  zero-order-hold pair ``expm`` makes of the continuous linearization is the Jacobian of the
  nonlinear flow over the step, checked against central finite differences of the flow (Runge-Kutta
  on the quaternion embedding) in the tangent space, on the ground and at pitch ±90°.
* The reference is consistent: the contacts' rows vanish, the velocities keep them, the inputs
  produce the accelerations through the full nonlinear dynamics; ``v`` and ``a`` are the time
  derivatives of ``q`` and ``v`` (central differences in time).
* Closed loop on the nonlinear dynamics: Solo12 swaying and Talos squatting, each pushed at the
  start, track their reference with the schedule's gains and fall without them.
* Refusals: no floating base, a base out of the legs' reach, times that do not increase.
"""
from __future__ import annotations

import numpy as np
import pytest
from contactref import load

import core
from core.control.body_motion import discretize, flow

from randsys import assert_close

CROUCH = np.tile([0.0, 0.8, -1.6], 4)
HALF_SITTING = [0.0, 0.0, -0.411354, 0.859395, -0.448041, 0.0]      # Talos, each leg


def _solo():
    s = load("solo_description/robots/solo12.urdf", "point")
    q = s.neutral()
    q[7:] = CROUCH
    return s, core.standing(s, q, height=0.0)


def _talos():
    s = load("talos_data/robots/talos_reduced.urdf", "frame")
    q = s.neutral()
    q[7:19] = HALF_SITTING * 2
    return s, core.standing(s, q, height=0.0)


def _holding(s, q, anchors):
    """Inputs that hold ``q`` at rest on the contacts (``a(u) = a(0) + G u = 0``)."""
    n = s.nv
    G = s.linearize(q, np.zeros(n), np.zeros(s.nu), anchors=anchors)[1][n:]
    u = np.linalg.lstsq(G, -s.qdd(q, np.zeros(n), np.zeros(s.nu), anchors=anchors), rcond=None)[0]
    assert np.abs(s.qdd(q, np.zeros(n), u, anchors=anchors)).max() < 1e-9
    return u


def _flow_jacobian(s, q, u, dt, anchors, eps=1e-6, steps=50):
    """Central differences of the flow over ``dt`` in the tangent space ``[δ, v]`` and in ``u``."""
    n, m = s.nv, s.nu
    q1, v1 = flow(s, q, np.zeros(n), u, dt, steps, anchors)

    def out(dx, du):
        qq, vv = flow(s, s.integrate(q, dx[:n]), dx[n:], u + du, dt, steps, anchors)
        return np.r_[s.difference(q1, qq), vv - v1]

    A = np.array([(out(eps * e, 0.0) - out(-eps * e, 0.0)) / (2 * eps) for e in np.eye(2 * n)]).T
    B = np.array([(out(np.zeros(2 * n), eps * e) - out(np.zeros(2 * n), -eps * e)) / (2 * eps)
                  for e in np.eye(m)]).T
    return A, B


@pytest.mark.parametrize("pitch", [0.0, np.pi / 2, -np.pi / 2])
def test_discrete_model_is_the_flow_jacobian_at_standing(pitch):
    s, st = _solo()
    q = st.q.copy()
    q[3:7] = [0.0, np.sin(pitch / 2), 0.0, np.cos(pitch / 2)]          # the body pitched, the feet held
    anchors = s.contact_anchors(q)
    u = st.u if pitch == 0.0 else _holding(s, q, anchors)
    dt = 0.01
    A, B = s.linearize(q, np.zeros(s.nv), u, anchors=anchors)
    Ad, Bd = discretize(A, B, dt)
    A_fd, B_fd = _flow_jacobian(s, q, u, dt, anchors)
    assert_close(Ad, A_fd, f"A_d at pitch {pitch:+.3f}", tol=1e-7)
    assert_close(Bd, B_fd, f"B_d at pitch {pitch:+.3f}", tol=1e-7)


def test_discretize_is_zero_order_hold():
    """``B_d = ∫ e^(A s) ds B``: on a double integrator, ``[[1, dt], [0, 1]]`` and ``[dt²/2, dt]``."""
    Ad, Bd = discretize([[0.0, 1.0], [0.0, 0.0]], [[0.0], [1.0]], 0.1)
    assert_close(Ad, np.array([[1.0, 0.1], [0.0, 1.0]]), "A_d", tol=1e-15)
    assert_close(Bd, np.array([[0.005], [0.1]]), "B_d", tol=1e-15)


def _sway(t, amplitude=0.02, frequency=0.5):
    w = 2 * np.pi * frequency
    zero = np.zeros_like(t)
    return (np.c_[zero, amplitude * np.sin(w * t), zero], np.c_[zero, amplitude * w * np.cos(w * t), zero],
            np.c_[zero, -amplitude * w * w * np.sin(w * t), zero])


def _assert_consistent(s, motion):
    for k in range(motion.t.size):
        h, Dh = s.constraint(motion.q[k], 1, anchors=motion.anchors)
        assert np.abs(h).max() < 1e-12, k
        assert np.abs(Dh @ motion.v[k]).max() < 1e-12, k
        a = s.qdd(motion.q[k], motion.v[k], motion.u[k], anchors=motion.anchors)
        assert_close(a, motion.a[k], f"the inputs' accelerations at knot {k}", tol=1e-9)


def test_sway_reference_is_consistent_and_its_rates_are_derivatives():
    s, st = _solo()
    t = np.array([0.3, 0.3 + 1e-5, 0.3 + 2e-5])
    m = core.body_motion(s, st.q, t, *_sway(t))
    _assert_consistent(s, m)
    assert_close(s.difference(m.q[0], m.q[2]) / 2e-5, m.v[1], "v = dq/dt", tol=1e-7)
    assert_close((m.v[2] - m.v[0]) / 2e-5, m.a[1], "a = dv/dt", tol=1e-6)
    assert_close(m.q[:, :3] - st.q[:3], _sway(t)[0], "the base follows the path", tol=1e-15)
    assert_close(m.q[:, 3:7], np.tile(st.q[3:7], (3, 1)), "the orientation is held", tol=1e-15)


def _track(s, schedule, push, feedback=True):
    """The nonlinear closed loop from the reference's start, the base pushed sideways by ``push``
    (m/s, the legs moving so that the contacts stay): the base's position error at every knot."""
    m = schedule.motion
    q, v = m.q[0].copy(), m.v[0].copy()
    Dh = s.constraint(q, 1, anchors=m.anchors)[1]
    kick = np.array([0.0, push, 0.0, 0.0, 0.0, 0.0])
    v[:6] += kick
    v[6:] -= np.linalg.lstsq(Dh[:, 6:], Dh[:, :6] @ kick, rcond=None)[0]
    errors = []
    for k in range(m.t.size - 1):
        x = np.r_[s.difference(m.q[k], q), v - m.v[k]]
        errors.append(np.linalg.norm(m.q[k, :3] - q[:3]))
        u = m.u[k] - (schedule.K[k] @ x if feedback else 0.0)
        q, v = flow(s, q, v, u, m.t[k + 1] - m.t[k], 5, m.anchors)
    errors.append(np.linalg.norm(m.q[-1, :3] - q[:3]))
    return np.array(errors)


def test_solo12_sway_is_tracked_with_the_schedule():
    s, st = _solo()
    n = s.nv
    t = np.linspace(0.0, 2.0, 201)
    m = core.body_motion(s, st.q, t, *_sway(t))
    _assert_consistent(s, m)
    sch = core.balance_schedule(s, m, Q=np.diag(np.r_[100.0 * np.ones(n), np.ones(n)]), R=0.1 * np.eye(s.nu))
    assert sch.K.shape == (200, s.nu, 2 * n) and np.all(np.isfinite(sch.K))
    assert len(sch.state_names) == sch.A.shape[1] == 12
    with_gains, without = _track(s, sch, 0.05), _track(s, sch, 0.05, feedback=False)
    assert with_gains.max() < 1e-3 and with_gains[-1] < 1e-4, with_gains.max()
    assert without.max() > 0.05, without.max()


def test_talos_squat_from_a_spline_is_tracked():
    s, st = _talos()
    n = s.nv
    t = np.linspace(0.0, 1.0, 51)
    path = np.zeros((t.size, 3))
    path[:, 2] = -0.03 * np.sin(np.pi * t) ** 2                 # 3 cm down and up
    m = core.body_motion(s, st.q, t, path)
    _assert_consistent(s, m)
    assert np.abs(m.v[0]).max() < 1e-12 and np.abs(m.v[-1]).max() < 1e-12       # starts and ends at rest
    assert m.q[25, 2] < st.q[2] - 0.029
    sch = core.balance_schedule(s, m, Q=np.diag(np.r_[100.0 * np.ones(n), np.ones(n)]), R=0.01 * np.eye(s.nu))
    with_gains, without = _track(s, sch, 0.05), _track(s, sch, 0.05, feedback=False)
    assert with_gains.max() < 6e-3 and with_gains[-1] < 2e-3, with_gains      # (peak 4.7 mm, 1.6 mm at 1 s)
    assert without[-1] > 0.1, without[-1]                                         # (1.1 m)


def test_body_motion_refusals():
    s, st = _solo()
    t = np.linspace(0.0, 1.0, 3)
    with pytest.raises(core.errors.EquilibriumError, match="knot 1 .* out of the legs' reach"):
        core.body_motion(s, st.q, t, [[0, 0, 0], [0, 0, 1.0], [0, 0, 0]])
    with pytest.raises(ValueError, match=r"t: the times must increase, t\[2\]"):
        core.body_motion(s, st.q, [0.0, 1.0, 1.0], np.zeros((3, 3)))
    with pytest.raises(ValueError, match="positions: expected shape"):
        core.body_motion(s, st.q, t, np.zeros((2, 3)))
    fixed = load("solo_description/robots/solo12.urdf", "point", free_flyer=False)
    with pytest.raises(core.errors.ModelError, match="quaternion floating base"):
        core.body_motion(fixed, fixed.neutral(), t, np.zeros((3, 3)))
