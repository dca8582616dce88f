"""Gain schedules in the form of LAAS's ``linear_feedback_controller`` (LFC) (ROS-free).

LFC, a ros2_control controller, applies per joint effort

    tau = u_ff + K (z_ref (-) z),     z = [q, v] (joint positions, joint velocities)

from a ``linear_feedback_controller_msgs/Control`` message: ``feedback_gain`` K (n x 2n,
row-major), ``feedforward`` u_ff (n), ``initial_state`` z_ref (``joint_state`` positions and
velocities by joint name). Our law at knot k is ``u = u_ref - K_k (x - x_ref)`` on the discrete
state ``x = [q, p, v]`` (:mod:`mechnode.logic.gains`), with the inputs entering the generalized forces
through ``F_u(q)`` (n x m). With ``J_k = d[q, p, v]/d[q, qdot]`` at the reference, the same law in
LFC's form is, exactly to first order in ``z - z_ref``:

    u_ff = F_u(q_ref) u_ref,    K_lfc = F_u(q_ref) K_k J_k,    z_ref = [q_ref, qdot_ref].

A schedule already in ``[q, qdot]`` (STATE_Q_QDOT) needs no ``J_k``.

A floating base (``STATE_TANGENT``): LFC then takes the whole state, ``z = [q, v]`` with the
base's pose and twist (``initial_state.base_pose``, ``base_twist``), and its error is
``[difference(q, q_ref), v_ref - v]`` (Pinocchio's ``difference``: for the free flyer the SE(3)
``log(g⁻¹ g_ref)``, which is :meth:`core.System.difference`'s). Since
``difference(q, q_ref) = -(q ⊖ q_ref)`` exactly, our law ``u = u_ref - K [q ⊖ q_ref; v - v_ref]``
is LFC's with ``u_ff = F_u u_ref`` and ``K_lfc = F_u K`` on the joints' rows, with no
approximation.

Rows of joints no input acts
on are zero (an underactuated joint gets zero effort). Joints are in the model's order, named by
the node's joint map. A model with kinematic variables or wrench inputs has no LFC form
(:func:`check_lfc_model`): with joint-torque inputs ``F_u`` is constant, and the two laws agree
to first order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechnode.errors import InputError
from mechnode.logic.gains import STATE_Q_QDOT, STATE_TANGENT, Schedule


@dataclass(frozen=True)
class LfcSchedule:
    """A schedule in LFC's form, per knot k: ``tau = u_ff[k] + K[k] ([q_ref[k], v_ref[k]] - z)``."""
    times: np.ndarray           # (knots,) seconds from the schedule's start stamp
    q_ref: np.ndarray           # (knots, n)
    v_ref: np.ndarray           # (knots, n)
    u_ff: np.ndarray            # (knots, n) joint efforts
    K: np.ndarray               # (knots, n, 2n); a floating base: (knots, joints, 2 nv)
    joint_names: tuple
    base_pose: np.ndarray | None = None     # (knots, 7) position, quaternion (x, y, z, w): a floating base
    base_twist: np.ndarray | None = None    # (knots, 6) linear, angular on the base's axes


def check_lfc_model(plant) -> None:
    """Raise InputError if ``plant`` has no LFC form: kinematic variables, or inputs that are
    not joint efforts (a wrench on a frame enters through a configuration-dependent ``F_u(q)``,
    whose change LFC's constant feed-forward cannot follow)."""
    if plant.nk:
        raise InputError(f"the LFC output needs a model without kinematic variables; this one has "
                         f"{list(plant.kinematic_names)} (their inputs are positions, not efforts)")
    wrenches = [name for name, joint in zip(plant.force_input_names, plant.system.input_is_joint_torque,
                                            strict=True) if not joint]
    if wrenches:
        raise InputError(f"the LFC output needs joint torque/force inputs; {wrenches} act on frames "
                         "(wrench inputs)")


def lfc_schedule(plant, schedule: Schedule) -> LfcSchedule:
    """The LFC form of ``schedule`` for ``plant`` (see the module docstring)."""
    check_lfc_model(plant)
    if schedule.convention == STATE_TANGENT:
        return _floating_lfc(plant, schedule)
    n, knots = plant.n, schedule.knots
    Q, V = np.empty((knots, n)), np.empty((knots, n))
    K = np.empty((knots, n, 2 * n))
    u_ff = np.empty((knots, n))
    for k in range(knots):
        if schedule.convention == STATE_Q_QDOT:
            q, v = schedule.x_ref[k, :n], schedule.x_ref[k, n:]
            Kz = schedule.K[k]
        else:
            q, v = plant.vi.continuous_state(schedule.x_ref[k])
            Kz = schedule.K[k] @ plant.vi.state_jacobian(q, v)
        Fu = plant.system.input_matrix(q)
        Q[k], V[k] = q, v
        K[k] = Fu @ Kz
        u_ff[k] = Fu @ schedule.u_ref[k]
    return LfcSchedule(schedule.times.copy(), Q, V, u_ff, K, tuple(schedule.joint_names))


def _floating_lfc(plant, schedule: Schedule) -> LfcSchedule:
    """The LFC form of a floating base's schedule (STATE_TANGENT; the module docstring)."""
    nq, knots = plant.n, schedule.knots
    rows = []
    for k in range(knots):
        q, v = schedule.x_ref[k, :nq], schedule.x_ref[k, nq:]
        Fu = plant.system.input_matrix(q)[6:]               # the joints' rows (the base has no input)
        rows.append((q, v, Fu @ schedule.u_ref[k], Fu @ schedule.K[k]))
    Q, V, U, K = (np.array([row[i] for row in rows]) for i in range(4))
    return LfcSchedule(schedule.times.copy(), Q[:, 7:], V[:, 6:], U, K, tuple(schedule.joint_names),
                       Q[:, :7].copy(), V[:, :6].copy())


def lfc_effort(lfc: LfcSchedule, k: int, q, v) -> np.ndarray:
    """LFC's law at knot k for the measured joint state (what the C++ controller computes)."""
    z_ref = np.concatenate([lfc.q_ref[k], lfc.v_ref[k]])
    return lfc.u_ff[k] + lfc.K[k] @ (z_ref - np.concatenate([q, v]))
