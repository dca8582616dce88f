"""Standing equilibria (``core.standing``) and contact-consistent LQR (``core.balance_lqr``,
``linearize_minimal`` on a quaternion base with contacts), and ``core.controllability`` naming
the directions the inputs cannot move.

* Solo12 on four point feet and Talos on two flat feet, placed on the ground: at rest the
  accelerations vanish with the inputs found, the vertical forces carry the weight, the forces are
  the least-norm ones (or split as asked), the feet are on the plane and the soles level.
* The reduced pair is the linearization restricted to the consistent subspace (``A T = T A_i`` at
  the equilibrium); the gain stabilizes it and acts on the full tangent state.
* Refusals: a centre of mass outside the support polygon, feet that cannot all touch the plane,
  a robot whose inputs cannot hold its weight, no contacts, an uncontrollable direction by name.
"""
from __future__ import annotations

import numpy as np
import pytest
from contactref import load
from urdfref import robot_path as _path

import core
from core.control.body_motion import discretize

from randsys import assert_close

CROUCH = np.tile([0.0, 0.8, -1.6], 4)


def _solo(posture=CROUCH):
    s = load("solo_description/robots/solo12.urdf", "point")
    q = s.neutral()
    q[7:] = posture
    return s, q


def _weight(s):
    return -s.gravity[2] * float(np.sum(s.model.frame_mass))


def test_solo12_stands_on_four_point_feet():
    s, q = _solo()
    st = core.standing(s, q, height=0.0)
    assert_close(st.q[7:], q[7:], "the posture is kept", tol=0.0)
    assert np.abs(s.contact_anchors(st.q)[1][:, 2]).max() < 1e-12
    assert np.abs(s.qdd(st.q, np.zeros(s.nv), st.u)).max() < 1e-9
    assert abs(st.wrenches[:, 2].sum() - _weight(s)) < 1e-9 * _weight(s)
    assert np.all(st.wrenches[:, 2] > 0) and st.support.shape == (4, 2)
    # least norm: every other balance differs by a null direction of the rows, orthogonal to it
    B = s.input_matrix(st.q)
    Z = np.linalg.svd(B.T)[2][B.shape[1]:].T
    rows = Z.T @ s.constraint(st.q, 1)[1].T
    null = np.linalg.svd(rows)[2][np.linalg.matrix_rank(rows):]
    assert null.shape[0] > 0 and np.abs(null @ st.multipliers).max() < 1e-9 * np.linalg.norm(st.multipliers)
    # a given split of the vertical load: with the centre of mass fixed, moments leave one freedom,
    # load moved from one diagonal pair of feet (FL, HR) to the other (FR, HL)
    split = st.wrenches[:, 2] / st.wrenches[:, 2].sum() + np.array([0.05, -0.05, -0.05, 0.05])
    st2 = core.standing(s, q, height=0.1, split=list(split))
    assert_close(st2.wrenches[:, 2] / st2.wrenches[:, 2].sum(), split, "split", tol=1e-9)
    assert np.abs(s.qdd(st2.q, np.zeros(s.nv), st2.u)).max() < 1e-9
    assert np.abs(s.contact_anchors(st2.q)[1][:, 2] - 0.1).max() < 1e-12


def test_talos_stands_on_two_flat_feet():
    s = load("talos_data/robots/talos_reduced.urdf", "frame")
    q = s.neutral()
    q[3:7] = [0.02, -0.03, 0.1, 1.0] / np.linalg.norm([0.02, -0.03, 0.1, 1.0])      # a tilted start
    st = core.standing(s, q, height=0.0)
    R, p = s.contact_anchors(st.q)
    assert np.abs(p[:, 2]).max() < 1e-12 and np.abs(R[:, 2, :2]).max() < 1e-12      # on the ground, level
    assert np.abs(s.qdd(st.q, np.zeros(s.nv), st.u)).max() < 1e-9
    assert abs(st.wrenches[:, 2].sum() - _weight(s)) < 1e-9 * _weight(s)
    assert st.support is None
    assert abs(core.standing(s, st.q).u - st.u).max() < 1e-9          # where it is: the same


def test_refusals():
    s, q = _solo(np.tile([0.0, -0.6, -1.6], 4))              # the feet swung forward of the body
    with pytest.raises(core.errors.EquilibriumError, match=r"centre of mass \(0.02098, .*\) m is outside the "
                                                           r"support polygon .* by 0.004122 m"):
        core.standing(s, q, height=0.0)
    s, q = _solo()
    q[9] = -1.2                                                # one knee straighter than the others
    with pytest.raises(core.errors.EquilibriumError, match=r"cannot all be at height 0 .*'FL_FOOT': -0.0101"):
        core.standing(s, q, height=0.0)
    bolt = load("bolt_description/robots/bolt.urdf", "point")
    with pytest.raises(core.errors.EquilibriumError, match=r"the contacts \['FL_FOOT', 'FR_FOOT'\] and the inputs "
                                                           "cannot hold the weight"):
        core.standing(bolt, bolt.neutral(), height=0.0)      # (two points: it pivots about the line between them)
    passive = core.load_urdf(_path("solo_description/robots/solo12.urdf"), floating_base="quaternion", actuated=[])
    for foot in core.find_feet(passive):
        passive.add_contact(foot)
    with pytest.raises(core.errors.EquilibriumError, match=r"cannot hold the weight at this posture: .* left on "
                                                           "the directions no input drives"):
        core.standing(passive, _solo()[1], height=0.0)
    with pytest.raises(core.errors.ModelError, match="no contacts"):
        core.standing(load("solo_description/robots/solo12.urdf", feet=[]), q)
    with pytest.raises(ValueError, match="split: expected 4 non-negative numbers"):
        core.standing(s, _solo()[1], height=0.0, split=[1.0, 1.0])
    with pytest.raises(core.errors.EquilibriumError, match="cannot hold the vertical load split"):
        core.standing(s, _solo()[1], height=0.0, split=[0.4, 0.1, 0.3, 0.2])     # (the moments forbid it)


def test_balance_gain_on_the_contacts():
    s, q = _solo()
    st = core.standing(s, q, height=0.0)
    n = s.nv
    A, B, info = s.linearize_minimal(st.q, np.zeros(n), st.u)
    A_full, B_full = s.linearize(st.q, np.zeros(n), st.u)
    T = info.T
    assert A.shape == (2 * (n - 12), 2 * (n - 12))
    assert_close(A_full @ T, T @ A, "the consistent subspace is invariant", tol=1e-9)
    assert_close(B_full[info.state_index], B, "B", tol=1e-12)
    g = core.balance_lqr(s, st.q, st.u, Q=np.diag(np.r_[100.0 * np.ones(n), np.ones(n)]), R=0.1 * np.eye(s.nu))
    assert g.K.shape == (s.nu, 2 * n) and np.all(g.eigenvalues.real < 0)
    assert_close(g.K @ T, g.K_minimal, "K acts on the full tangent state", tol=1e-9)
    # the full closed loop on the consistent subspace has the reduced closed loop's eigenvalues
    closed = np.linalg.lstsq(T, (A_full - B_full @ g.K) @ T, rcond=None)[0]
    full, reduced = np.sort_complex(np.linalg.eigvals(closed)), np.sort_complex(g.eigenvalues)
    assert_close(np.c_[full.real, full.imag], np.c_[reduced.real, reduced.imag], "closed loop", tol=1e-7)
    assert core.controllability(g.A, g.B, names=g.state_names).uncontrollable == ()


def test_an_uncontrollable_direction_is_named():
    c = core.controllability(np.diag([0.5, 2.0, 1.0]), np.array([[1.0], [0.0], [1.0]]), names=["a", "b", "c"])
    assert c.uncontrollable == ("eigenvalue 2: b 1.00",)
    s = core.System()
    s.add_frame("left", rz="qa", mass=1.0, com=[0.0, -1.0, 0.0], inertia=[0.01, 0.01, 0.01])
    s.add_frame("right", offset={"translation": [2.0, 0.0, 0.0]}, rz="qb", mass=1.0, com=[0.0, -1.0, 0.0],
                inertia=[0.01, 0.01, 0.01])
    s.gravity = np.array([0.0, -9.81, 0.0])
    s.add_input("torque", config="qa")
    with pytest.raises(np.linalg.LinAlgError, match=r"cannot move 2 direction\(s\).*qb .*dqb"):
        core.balance_lqr(s, [0.0, 0.0], [0.0])


def test_discrete_balance_gain_is_stable_at_its_rate():
    """With ``dt`` the gain is the discrete LQR of the exact zero-order-hold pair: stable at its
    rate, where the continuous gain held over the same 2 ms is not (its fastest mode is 1805
    rad/s); as ``dt`` shrinks it tends to the continuous gain."""
    s, q = _solo()
    st = core.standing(s, q, height=0.0)
    n = s.nv
    Q, R = np.diag(np.r_[100.0 * np.ones(n), np.ones(n)]), 0.1 * np.eye(s.nu)
    cont = core.balance_lqr(s, st.q, st.u, Q, R)
    assert 1800.0 < np.abs(cont.eigenvalues).max() < 1810.0 and cont.dt is None
    digital = core.balance_lqr(s, st.q, st.u, Q, R, dt=0.002)
    assert digital.dt == 0.002 and np.abs(digital.eigenvalues).max() < 1.0
    Ad, Bd = discretize(cont.A, cont.B, 0.002)
    assert_close(digital.A, Ad, "the discrete pair", tol=1e-15)
    assert np.abs(np.linalg.eigvals(Ad - Bd @ cont.K_minimal)).max() > 1.0
    fine = core.balance_lqr(s, st.q, st.u, Q, R, dt=1e-6)
    assert_close(fine.K, cont.K, "the gain as dt -> 0", tol=1e-3)
    with pytest.raises(ValueError, match="dt must be a finite positive number, got -0.002"):
        core.balance_lqr(s, st.q, st.u, Q, R, dt=-0.002)
