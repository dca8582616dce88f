"""Conversions between ROS 2 messages and numpy arrays / :class:`mechnode.logic.gains.Schedule`.

``float64[]`` fields are filled with ``array.array('d', ...)`` (rclpy's type check rejects numpy
arrays) and read with ``np.frombuffer``; :class:`mechnode_interfaces.msg.Matrix` is row-major,
:class:`~mechnode_interfaces.msg.Tensor` C-ordered. Every ``*_from_msg`` reader validates sizes
and raises :class:`mechnode.errors.InputError` with the reason.
"""
from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Duration, Time
from mechnode_interfaces.msg import GainSchedule, Matrix, Tensor  # type: ignore[attr-defined]  # generated: no type info
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import core
from mechnode.errors import InputError
from mechnode.logic.gains import STATE_Q_P, Schedule

NS = 1_000_000_000


# ================================================================================ arrays
def float_array(x) -> array.array:
    """``array('d')`` for a float64[] field."""
    return array.array("d", np.ascontiguousarray(x, dtype=np.float64).ravel().tobytes())


def as_vector(seq, name: str = "vector", size: int | None = None, names=None) -> np.ndarray:
    """A float64[] field as a numpy vector (a copy). With ``size``, the length is checked before
    anything is converted, then :func:`core.validation.check_vector` checks the values (NaN/inf allowed:
    the computation that uses them reports them); ``names`` label the entries in its errors."""
    if size is not None and len(seq) != size:
        label = f" ({', '.join(names)})" if names is not None and size <= 12 else ""
        raise InputError(f"{name} must have {size} entries{label}, got {len(seq)}")
    v = np.frombuffer(seq, dtype=np.float64).copy() if isinstance(seq, array.array) and seq.typecode == "d" \
        else np.asarray(list(seq), dtype=np.float64)
    if size is None:
        return v
    try:
        return core.validation.check_vector(name, v, size, names, finite=False)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def matrix_msg(a) -> Matrix:
    a = np.ascontiguousarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"a Matrix needs a 2-D array, got shape {a.shape}")
    return Matrix(rows=a.shape[0], cols=a.shape[1], data=float_array(a))


def matrix_from_msg(m: Matrix, name: str = "matrix", shape=None, allow_empty: bool = False):
    """The Matrix as a (rows, cols) array; ``None`` when empty and ``allow_empty``. ``shape``
    may hold ``None`` for a free dimension."""
    if m.rows == 0 and m.cols == 0 and len(m.data) == 0:
        if allow_empty:
            return None
        raise InputError(f"{name} is empty")
    if len(m.data) != m.rows * m.cols:
        raise InputError(f"{name}: rows * cols = {m.rows} * {m.cols} but {len(m.data)} data entries")
    a = np.frombuffer(m.data, dtype=np.float64).copy().reshape(m.rows, m.cols) if len(m.data) \
        else np.zeros((m.rows, m.cols))
    if shape is not None:
        for want, got in zip(shape, a.shape, strict=True):
            if want is not None and want != got:
                raise InputError(f"{name} must be {_shape_text(shape)}, got {a.shape[0]} x {a.shape[1]}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} has non-finite entries")
    return a


def _shape_text(shape) -> str:
    return " x ".join("N" if s is None else str(s) for s in shape)


def tensor_msg(a) -> Tensor:
    a = np.ascontiguousarray(a, dtype=np.float64)
    return Tensor(shape=array.array("I", a.shape), data=float_array(a))


def tensor_from_msg(t: Tensor, name: str = "tensor") -> np.ndarray:
    shape = tuple(int(s) for s in t.shape)
    if int(np.prod(shape)) != len(t.data):
        raise InputError(f"{name}: shape {shape} needs {int(np.prod(shape))} entries, got {len(t.data)}")
    return np.frombuffer(t.data, dtype=np.float64).copy().reshape(shape) if len(t.data) \
        else np.zeros(shape)


# ================================================================================ time
def stamp_ns(stamp: Time) -> int:
    return int(stamp.sec) * NS + int(stamp.nanosec)


def time_msg(ns: int) -> Time:
    ns = int(ns)
    return Time(sec=ns // NS, nanosec=ns % NS)


def duration_s(d: Duration) -> float:
    return d.sec + d.nanosec * 1e-9


def duration_msg(seconds: float) -> Duration:
    ns = int(round(seconds * NS))
    return Duration(sec=ns // NS, nanosec=ns % NS)


# ================================================================================ messages
def schedule_to_msg(s: Schedule, start_ns: int, frame_id: str = "") -> GainSchedule:
    out = GainSchedule()
    out.header.stamp = time_msg(start_ns)
    out.header.frame_id = frame_id
    out.dt = float(s.dt)
    out.state_names = list(s.state_names)
    out.input_names = list(s.input_names)
    out.joint_names = list(s.joint_names)
    out.times = float_array(s.times)
    out.state_convention = int(s.convention)
    out.x_ref = matrix_msg(s.x_ref)
    out.u_ref = matrix_msg(s.u_ref)
    out.k = tensor_msg(s.K)
    return out


def schedule_from_msg(msg: GainSchedule):
    """``(Schedule, start_ns)`` from a GainSchedule message (validated)."""
    times = as_vector(msg.times, "times")
    knots, nx, nu = times.size, len(msg.state_names), len(msg.input_names)
    # a floating base's x_ref rows are [q_ref (nq = nv + 1), v_ref (nv)] (GainSchedule.STATE_TANGENT)
    tangent = int(msg.state_convention) == GainSchedule.STATE_TANGENT
    x_ref = matrix_from_msg(msg.x_ref, "x_ref", (knots, nx + 1 if tangent else nx))
    u_ref = matrix_from_msg(msg.u_ref, "u_ref", (knots, nu))
    K = tensor_from_msg(msg.k, "k")
    if K.shape != (knots, nu, nx):
        raise InputError(f"k must have shape {(knots, nu, nx)}, got {K.shape}")
    s = Schedule(float(msg.dt), times, x_ref, u_ref, K, tuple(msg.state_names),
                 tuple(msg.input_names), tuple(msg.joint_names), int(msg.state_convention))
    return s, stamp_ns(msg.header.stamp)


def trajectory_arrays(msg: JointTrajectory):
    """``(names, times, positions, velocities or None)`` of a JointTrajectory; checks that every
    point has one position per joint and velocities for all points or none."""
    names = list(msg.joint_names)
    pts = msg.points
    if not pts:
        raise InputError("the trajectory has no points")
    if not names:
        raise InputError("the trajectory has no joint_names")
    times = np.array([duration_s(p.time_from_start) for p in pts])
    positions = np.empty((len(pts), len(names)))
    with_vel = [len(p.velocities) > 0 for p in pts]
    if any(with_vel) and not all(with_vel):
        raise InputError("velocities must be given for all points or for none")
    velocities = np.empty_like(positions) if all(with_vel) else None
    for i, p in enumerate(pts):
        if len(p.positions) != len(names):
            raise InputError(f"point {i} has {len(p.positions)} positions for {len(names)} joints")
        positions[i] = p.positions
        if velocities is not None:
            if len(p.velocities) != len(names):
                raise InputError(f"point {i} has {len(p.velocities)} velocities for {len(names)} joints")
            velocities[i] = p.velocities
    return names, times, positions, velocities


def joint_trajectory(names, times, positions, velocities=None, start_ns: int = 0) -> JointTrajectory:
    msg = JointTrajectory()
    msg.header.stamp = time_msg(start_ns)
    msg.joint_names = list(names)
    positions = np.asarray(positions, dtype=float)
    for i, t in enumerate(times):
        p = JointTrajectoryPoint()
        p.positions = float_array(positions[i])
        if velocities is not None:
            p.velocities = float_array(np.asarray(velocities, dtype=float)[i])
        p.time_from_start = duration_msg(float(t))
        msg.points.append(p)
    return msg


def joint_state(names, q, dq, stamp: int, effort=None) -> JointState:
    """A JointState (``q``, ``dq``, ``effort`` may be None = left empty)."""
    msg = JointState()
    msg.header.stamp = time_msg(stamp)
    msg.name = list(names)
    if q is not None:
        msg.position = float_array(q)
    if dq is not None:
        msg.velocity = float_array(dq)
    if effort is not None:
        msg.effort = float_array(effort)
    return msg


def command_msg(u, labels=None) -> Float64MultiArray:
    """The command for a forward_command_controller: ``data`` = u (one entry per joint/input)."""
    msg = Float64MultiArray()
    msg.data = float_array(u)
    if labels is not None:
        msg.layout.dim = [MultiArrayDimension(label="inputs", size=len(labels), stride=len(labels))]
    return msg


def row_major_msg(a) -> Float64MultiArray:
    """A 2-D array as LFC lays it out: dims ``rows`` (stride rows*cols) and ``cols`` (stride
    cols), data row-major; a 1-D array is one column."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    rows, cols = a.shape if a.ndim == 2 else (a.shape[0], 1)
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label="rows", size=rows, stride=rows * cols),
                      MultiArrayDimension(label="cols", size=cols, stride=cols)]
    msg.data = float_array(a)
    return msg


def row_major_from_msg(msg: Float64MultiArray) -> np.ndarray:
    """The (rows, cols) array of :func:`row_major_msg`."""
    rows, cols = msg.layout.dim[0].size, msg.layout.dim[1].size
    return np.asarray(msg.data, dtype=float).reshape(rows, cols)


def lfc_control_msg(lfc, k: int, stamp: int):
    """Knot ``k`` of an :class:`~mechnode.logic.lfc.LfcSchedule` as a
    ``linear_feedback_controller_msgs/Control`` stamped ``stamp`` (ns): ``feedback_gain`` K (n x 2n),
    ``feedforward`` (n x 1), ``initial_state.joint_state`` the reference positions and velocities
    by joint name, ``base_pose`` and ``base_twist`` the floating base's reference (a fixed base:
    the identity pose and a zero twist)."""
    from linear_feedback_controller_msgs.msg import Control  # type: ignore[attr-defined]  # generated: no type info
    msg = Control()
    msg.header.stamp = time_msg(stamp)
    msg.feedback_gain = row_major_msg(lfc.K[k])
    msg.feedforward = row_major_msg(lfc.u_ff[k])
    msg.initial_state.header.stamp = msg.header.stamp
    msg.initial_state.joint_state = joint_state(lfc.joint_names, lfc.q_ref[k], lfc.v_ref[k], stamp)
    msg.initial_state.base_pose.orientation.w = 1.0
    if lfc.base_pose is not None:
        pose, twist = msg.initial_state.base_pose, msg.initial_state.base_twist
        (pose.position.x, pose.position.y, pose.position.z, pose.orientation.x, pose.orientation.y,
         pose.orientation.z, pose.orientation.w) = (float(x) for x in lfc.base_pose[k])
        (twist.linear.x, twist.linear.y, twist.linear.z, twist.angular.x, twist.angular.y,
         twist.angular.z) = (float(x) for x in lfc.base_twist[k])
    return msg


__all__ = ["float_array", "as_vector", "matrix_msg", "matrix_from_msg", "tensor_msg",
           "tensor_from_msg", "stamp_ns", "time_msg", "duration_s", "duration_msg",
           "schedule_to_msg", "schedule_from_msg", "trajectory_arrays", "joint_trajectory",
           "joint_state", "command_msg", "row_major_msg", "row_major_from_msg", "lfc_control_msg",
           "STATE_Q_P"]
