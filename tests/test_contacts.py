"""Contacts (``System.add_contact``; :mod:`core.continuous.contacts`) on quaternion and fixed bases.

* Against Pinocchio's ``constraintDynamics`` and ``computeConstraintDynamicsDerivatives``
  (:mod:`contactref`) at consistent states: every legged robot of example-robot-data on its point
  feet (``core.find_feet``), every biped on flat feet (frame contacts), an arm with its hand held:
  ``qdd``, the contact wrenches, ``A``, ``B`` in the tangent space and the multipliers' derivatives.
* Against central finite differences in the tangent space (anchors held): ``A, B`` and the second
  order ``H`` on a quadruped and a humanoid, at pitch ±90° and at a random pose.
* The feet of every legged file, the anchors' meaning, and the refusals (each naming the element).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from contactref import LEGGED, compare_contacts, consistent_state, load
from urdfref import robot_path

import core

from randsys import assert_close, fd


def _check(r):
    assert r["worst"] <= r["tolerance"], r


@pytest.mark.parametrize("relative", LEGGED)
def test_point_feet_match_pinocchio(relative):
    """Every legged robot on its point feet. Where its legs cannot hold four points independently
    (two-joint legs: Solo8, the quadruped), the rows are redundant: the error names the row and the
    rank is really short; then two diagonal feet are compared."""
    try:
        _check(compare_contacts(relative, "point"))
    except core.errors.SingularMatrixError as exc:
        assert "rank deficient" in str(exc) and "redundant or degenerate constraints" in str(exc)
        s = load(relative, "point")
        q, _, _ = consistent_state(s, np.random.default_rng(0))
        Dh = s.constraint(q, 1)[1]
        assert np.linalg.matrix_rank(Dh) < Dh.shape[0]
        feet = core.find_feet(load(relative, feet=[]))
        _check(compare_contacts(relative, "point", feet=[feet[0], feet[-1]]))


BIPEDS = [f for f in LEGGED if len(core.find_feet(load(f, feet=[]))) == 2]
#: Bipeds whose two flat feet (12 rows) leave some motion: Bolt's hold all twelve of its velocities.
FLAT = [f for f in BIPEDS if load(f, "frame").nv > 12]


@pytest.mark.parametrize("relative", FLAT)
def test_flat_feet_match_pinocchio(relative):
    """Every biped on two flat feet (frame contacts: force and moment)."""
    _check(compare_contacts(relative, "frame"))


def test_a_robot_its_contacts_hold_completely_does_not_move():
    """Bolt on two flat feet: twelve rows on twelve velocities, the Jacobian square and regular,
    so the only consistent velocity is zero and the accelerations are zero whatever the torques
    (the comparison with Pinocchio would compare round-off)."""
    s = load("bolt_description/robots/bolt.urdf", "frame")
    assert s.nv == 12 and s.model.nh == 12
    q, v, u = consistent_state(s, np.random.default_rng(0))
    assert np.linalg.matrix_rank(s.constraint(q, 1)[1]) == 12 and np.abs(v).max() == 0.0
    free = load("bolt_description/robots/bolt.urdf", feet=[]).qdd(q, v, 100.0 * u)      # (round-off scale)
    assert np.abs(s.qdd(q, v, 100.0 * u)).max() < 1e-12 * np.abs(free).max()
    assert np.abs(s.contact_wrenches(q, v, u)).max() > 1.0


def test_the_named_robots_are_covered():
    assert {"solo_description/robots/solo12.urdf", "anymal_b_simple_description/robots/anymal.urdf",
            "talos_data/robots/talos_reduced.urdf"} <= set(LEGGED)
    assert "talos_data/robots/talos_reduced.urdf" in FLAT
    assert len(LEGGED) >= 30 and len(FLAT) >= 15


@pytest.mark.parametrize("kind", ["point", "frame"])
def test_an_arm_with_its_hand_held_matches_pinocchio(kind):
    _check(compare_contacts("panda_description/urdf/panda.urdf", kind, free_flyer=False, feet=["panda_hand"]))


def test_feet_of_the_legged_files():
    """The rule of core.find_feet on every legged file: two or four feet, the names the files
    give them where they name them."""
    expected = {"solo12": ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"],
                "talos_reduced.urdf": ["left_sole_link", "right_sole_link"],
                "anymal.urdf": ["LF_FOOT", "LH_FOOT", "RF_FOOT", "RH_FOOT"], "icub.urdf": ["l_foot", "r_foot"],
                "g1_29dof_rev_1_0": ["left_ankle_roll_link", "right_ankle_roll_link"],
                "quadruped.urdf": ["BL_contact", "BR_contact", "FL_contact", "FR_contact"]}
    for relative in LEGGED:
        feet = core.find_feet(load(relative, feet=[]))
        assert len(feet) in (2, 4), (relative, feet)
        for key, names in expected.items():
            if key in relative:
                assert feet == names, (relative, feet)
    with pytest.raises(ValueError, match="no URDF links"):
        core.find_feet(core.System())


# ------------------------------------------------------------------------------ finite differences
def _pitch(angle):
    return np.array([0.0, math.sin(angle / 2), 0.0, math.cos(angle / 2)])


def _fd_cases():
    solo = load("solo_description/robots/solo12.urdf", "point")
    humanoid = load("alexander_description/urdf/alexander_v1.lowerBodyOnly.urdf", "frame")
    return {"solo12": solo, "alexander": humanoid}


FD = _fd_cases()


def _state(s, seed, pitch):
    q, v, u = consistent_state(s, np.random.default_rng(seed))
    if pitch is not None:
        q[3:7] = _pitch(pitch)
    return q, v, u


@pytest.mark.parametrize("pitch", [math.pi / 2, -math.pi / 2, None])
@pytest.mark.parametrize("name", sorted(FD))
def test_first_order_against_finite_differences(name, pitch):
    """``A``, ``B`` against central differences of ``qdd`` along ``q ⊕ δ`` with the anchors held
    (their poses at ``q``), at a state that keeps them at rest and at one that does not."""
    s = FD[name]
    q, v, u = _state(s, 3, pitch)
    anchors = s.contact_anchors(q)
    n = s.nv
    for vel in (v, v + 0.3 * np.random.default_rng(4).normal(size=n)):     # (at rest, and not)
        A, B = s.linearize(q, vel, u, residual_limit=None, anchors=anchors)
        z0 = np.concatenate([np.zeros(n), vel, u])
        J = fd(lambda z: s.qdd(s.integrate(q, z[:n]), z[n:2 * n], z[2 * n:], anchors=anchors), z0)
        assert_close(np.hstack([A[n:], B[n:]]), J, f"{name}: da/d[δ, v, u]", tol=1e-7)
    # at rest the default anchors are those: the same answer, and the state passes the check
    A0, B0 = s.linearize(q, v, u)
    A1, B1 = s.linearize(q, v, u, anchors=anchors)
    assert_close(A0, A1, "default anchors", tol=1e-14)


@pytest.mark.parametrize("name", sorted(FD))
def test_second_order_against_finite_differences(name):
    """``H``'s acceleration rows: the ``(v, u)`` columns by differences of the exact ``A, B``; the
    ``(δ, δ)`` block by nested differences of ``qdd`` along ``q ⊕ δ`` (anchors held)."""
    s = FD[name]
    q, v, u = _state(s, 5, math.pi / 2)
    anchors = s.contact_anchors(q)
    n = s.nv
    A, B, H = s.linearize2(q, v, u, anchors=anchors)
    A1, B1 = s.linearize(q, v, u, anchors=anchors)
    assert_close(A, A1, "A of linearize2", tol=1e-13)
    assert_close(H, H.transpose(0, 2, 1), "H symmetric", tol=1e-13)

    def grad_vu(y):
        Ay, By = s.linearize(q, y[:n], y[n:], residual_limit=None, anchors=anchors)
        return np.hstack([Ay[n:], By[n:]])

    assert_close(H[n:, :, n:], fd(grad_vu, np.concatenate([v, u]), 1e-4), f"{name}: d²a/dz d[v, u]", tol=1e-6)
    Hdd = fd(lambda d: fd(lambda e: s.qdd(s.integrate(q, e), v, u, anchors=anchors), d, 1e-3), np.zeros(n), 1e-3)
    assert_close(H[n:, :n, :n], Hdd, f"{name}: d²a/dδ²", tol=1e-5)


@pytest.mark.parametrize("name", sorted(FD))
def test_contact_rows_third_order_along_a_velocity(name):
    """``D3h(w, w, .)`` of the contact rows, as the linearization takes it (``point_third_along``,
    O(k)), against the whole third-order jet contracted twice (the path taken when ``lam . D3h``
    is asked for too), at a random configuration and velocity of the chart."""
    from core.continuous import contacts, floating
    from core.tree.constraints import holonomic
    from core.tree.kinematics import forward_kinematics
    s = FD[name]
    rng = np.random.default_rng(7)
    q, _, _ = _state(s, 7, None)
    contacts.place(s, q)
    chart, qc, _, _ = floating._evaluation(s, q, np.zeros(s.nv), None)
    qc = qc + 0.3 * rng.normal(size=qc.shape[0])
    w = rng.normal(size=qc.shape[0])
    model, data = chart.model, chart.workspace.get()[0]
    forward_kinematics(model, qc, w, data)
    nh, n = model.nh, qc.shape[0]
    out = []
    for lam3 in (np.empty((0, 0, 0)), np.zeros((n, n, n))):
        H3ww = np.empty((nh, n))
        holonomic(model, data, qc, 3, np.zeros(nh), w, np.empty(nh), np.empty((nh, n)), np.empty((nh, n, n)),
                  np.empty((0, 0)), lam3, H3ww)
        out.append(H3ww)
    assert np.max(np.abs(out[1])) > 1.0                 # (the rows do curve along w)
    assert_close(out[0], out[1], f"{name}: D3h(w, w, .)", tol=1e-12)


@pytest.mark.parametrize("name", sorted(FD))
def test_one_call_linearization_is_the_step_by_step_one(name):
    """``System.linearize`` on a quaternion base with its contacts where they are runs one
    compiled call (``contacts.linearize``); it gives the step-by-step path's ``A, B`` to the last
    bit, and leaves every refusal to that path (so the errors name the same thing)."""
    from core.continuous import contacts, floating
    s = FD[name]
    q, v, u = _state(s, 11, None)
    moving = v + 0.2 * np.random.default_rng(12).normal(size=s.nv)     # (off the contacts' rates)
    for vel, limit in ((v, 1e-6), (moving, None)):
        fast = contacts.linearize(s, q, vel, u, limit)
        assert fast is not None
        contacts.place(s, q)
        slow = floating.linearize(s, q, vel, u, limit)
        assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])
    assert contacts.linearize(s, q, moving, u, 1e-6) is None            # off the contacts: refused there
    with pytest.raises(ValueError, match="velocity level"):
        s.linearize(q, moving, u)
    bad = v.copy()
    bad[3] = np.nan
    assert contacts.linearize(s, q, bad, u, 1e-6) is None
    with pytest.raises(ValueError, match=r"v\[3\].*not finite"):
        s.linearize(q, bad, u)


def test_fixed_base_second_order_against_finite_differences():
    s = load("panda_description/urdf/panda.urdf", "frame", free_flyer=False, feet=["panda_hand"])
    q, v, u = consistent_state(s, np.random.default_rng(2))
    anchors = s.contact_anchors(q)
    n = s.nq
    A, B, H = s.linearize2(q, v, u, anchors=anchors)
    z0 = np.concatenate([q, v, u])

    def grad(z):
        Az, Bz = s.linearize(z[:n], z[n:2 * n], z[2 * n:], residual_limit=None, anchors=anchors)
        return np.hstack([Az, Bz])

    assert_close(H, fd(grad, z0, 1e-4), "panda hand held: H", tol=1e-6)


# ------------------------------------------------------------------------------ meaning
def test_anchors_wrenches_and_weight():
    """The anchors are where the feet are (world poses); a frame contact's wrench has a moment;
    the rows vanish at the default anchors and measure how far an anchor was moved; a point
    anchor's place does not enter the accelerations, but a state off it is refused."""
    s = load("talos_data/robots/talos_reduced.urdf", "frame")
    q = s.neutral()
    q[2] = 1.0
    R, p = s.contact_anchors(q)
    assert R.shape == (2, 3, 3) and p.shape == (2, 3)
    assert_close(R[0], np.eye(3), "sole flat at neutral", tol=1e-9)
    W = s.contact_wrenches(q, np.zeros(s.nv))
    assert W.shape == (2, 6) and np.all(np.isfinite(W)) and np.abs(W[:, 3:]).max() > 0.1
    assert s.contacts == [("left_sole_link", "frame", 0), ("right_sole_link", "frame", 6)]
    h = s.constraint(q)
    assert np.abs(h).max() < 1e-12
    moved = (R, p + np.array([0.0, 0.0, 0.01]))
    assert abs(s.constraint(q, anchors=moved)[2] + 0.01) < 1e-12
    solo = load("solo_description/robots/solo12.urdf", "point")
    qs = solo.neutral()
    Rs, ps = solo.contact_anchors(qs)
    assert_close(solo.qdd(qs, np.zeros(solo.nv), anchors=(Rs, ps + 0.05)), solo.qdd(qs, np.zeros(solo.nv)),
                 "a point anchor's place does not enter the accelerations", tol=1e-12)
    with pytest.raises(ValueError, match=r"off the constraints|constraint row"):
        solo.linearize(qs, np.zeros(solo.nv), anchors=(Rs, ps + 0.05))


def test_refusals():
    s = core.load_urdf(robot_path("solo_description/robots/solo12.urdf"), floating_base="quaternion")
    with pytest.raises(core.errors.ModelError, match="world frame cannot be held"):
        s.add_contact("world")
    with pytest.raises(core.errors.ModelError, match="unknown kind 'flat'"):
        s.add_contact("FL_FOOT", "flat")
    s.add_contact("FL_FOOT")
    with pytest.raises(core.errors.ModelError, match="the name 'FL_FOOT' is taken"):
        s.add_contact("FL_FOOT", "frame")
    s.add_contact("no_such_link", name="ghost")
    with pytest.raises(core.errors.ModelError, match="contact 'ghost': unknown frame 'no_such_link'"):
        s.compile()
    s = core.load_urdf(robot_path("talos_data/robots/talos_reduced.urdf"), floating_base="quaternion")
    s.add_contact("left_sole_link", "frame").add_contact("leg_left_6_link", "frame")
    with pytest.raises(core.errors.ModelError, match=r"'leg_left_6_link' is on the rigid body .* which contact "
                                                     r"'left_sole_link' already holds \(redundant rows"):
        s.compile()
    fixed = core.load_urdf(robot_path("panda_description/urdf/panda.urdf"))
    fixed.add_contact("panda_link0")
    with pytest.raises(core.errors.ModelError, match="fixed to the world"):
        fixed.compile()
    solo = load("solo_description/robots/solo12.urdf", "point")
    q = solo.neutral()
    q[3:7] = [0.0, 0.0, 0.0, 1.1]
    with pytest.raises(ValueError, match="not a unit quaternion"):
        solo.qdd(q, np.zeros(solo.nv))
    R, p = solo.contact_anchors(solo.neutral())
    with pytest.raises(ValueError, match=r"anchors: expected R of shape \(4, 3, 3\)"):
        solo.qdd(solo.neutral(), np.zeros(solo.nv), anchors=(R[:3], p[:3]))
    R[1] *= 2.0
    with pytest.raises(ValueError, match="rotation of contact 'FR_FOOT' is not a rotation"):
        solo.qdd(solo.neutral(), np.zeros(solo.nv), anchors=(R, p))


def test_contacts_from_yaml_and_load_urdf_options():
    """``contacts`` in a model dict (a two-link arm with its tip held, the same dynamics as a
    ``coincide`` constraint to a world frame where the tip is) and ``load_urdf(contacts=...)``."""
    frames = [{"name": "upper", "rz": "q1", "mass": 1.0, "com": [0.5, 0, 0], "inertia": [0.01, 0.02, 0.03]},
              {"name": "lower", "parent": "upper", "offset": {"translation": [1.0, 0, 0]}, "rz": "q2", "mass": 0.7,
               "com": [0.4, 0, 0], "inertia": [0.01, 0.02, 0.03]},
              {"name": "shaft", "parent": "lower", "offset": {"translation": [0.8, 0, 0]}, "tz": "q3", "mass": 0.2}]
    inputs = [{"type": "torque", "config": c} for c in ("q1", "q2", "q3")]
    held = core.load_system({"frames": frames, "inputs": inputs,
                             "contacts": [{"frame": "shaft", "kind": "point", "name": "tip"}]})
    assert held.contacts == [("tip", "point", 0)]
    q, v, u = np.array([0.3, -0.7, 0.0]), np.zeros(3), np.array([1.0, -2.0, 0.5])
    tip = held.contact_anchors(q)[1][0]
    pinned = core.load_system({"frames": frames + [{"name": "anchor", "offset": {"translation": tip.tolist()}}],
                               "inputs": inputs, "constraints": [{"type": "coincide", "frame1": "shaft",
                                                                  "frame2": "anchor", "axes": ["x", "y"]}]})
    assert_close(held.qdd(q, v, u)[:2], pinned.qdd(q, v, u)[:2], "the tip held = coincide", tol=1e-12)
    with pytest.raises(core.errors.ModelError, match=r"contacts\[0\]: needs 'frame'"):
        core.load_system({"frames": frames, "contacts": [{"link": "shaft"}]})
    path = robot_path("solo_description/robots/solo12.urdf")
    s = core.load_urdf(path, floating_base="quaternion", contacts=["FL_FOOT", {"frame": "HR_FOOT", "kind": "point"}])
    assert [c[0] for c in s.contacts] == ["FL_FOOT", "HR_FOOT"]
    with pytest.raises(core.errors.ModelError, match="contacts must be a list"):
        core.load_urdf(path, contacts="FL_FOOT")
    with pytest.raises(core.errors.ModelError, match=r"contacts\[0\] must be a link name or a mapping"):
        core.load_urdf(path, contacts=[{"link": "FL_FOOT"}])
