"""Sizes read from serialized messages, before anything is converted.

A ``JointTrajectory`` of a million points takes seconds of rclpy's conversion into Python
objects, all of it holding the GIL. The node therefore subscribes to references as serialized
bytes and reads only the counts here — the number of joint names and of points — so that a
message over the node's limits is refused at the cost of a few dozen byte reads.

The serialized form is the middleware's CDR (XCDR1; OMG DDS-XTypes 1.3, 7.4.3): a 4-byte
encapsulation header (byte 1: 0 big-endian, 1 little-endian), then the fields in order, each
primitive aligned to its size relative to the end of that header; a ``string`` is a ``uint32``
length (with the terminating NUL) and its bytes; a sequence a ``uint32`` count and its elements.
``JointTrajectory`` is ``Header header`` (``int32 sec, uint32 nanosec, string frame_id``),
``string[] joint_names``, ``JointTrajectoryPoint[] points``.
"""
from __future__ import annotations

import struct

from mechnode.errors import InputError

#: Bytes of one ``JointTrajectoryPoint`` with ``n`` entries in each of its four arrays
#: (positions, velocities, accelerations, effort: count + aligned doubles) and its Duration.
POINT_OVERHEAD = 4 * (4 + 4) + 8


def point_bytes(n_joints: int) -> int:
    """The most bytes a point can take with ``n_joints`` entries per array."""
    return POINT_OVERHEAD + 4 * 8 * n_joints


def trajectory_counts(raw: bytes, max_names: int = 1024) -> tuple[int, int, int]:
    """``(number of joint names, number of points, most bytes)`` of a serialized
    ``JointTrajectory``; ``most bytes``: the size of the message if no point has more entries
    per array than there are joint names (a longer message carries something else).

    Raises :class:`~mechnode.errors.InputError` if the bytes end early, the encapsulation is
    not plain CDR, or there are more than ``max_names`` joint names."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] not in (0, 1):
        raise InputError("the reference is not a CDR-serialized JointTrajectory")
    u32 = struct.Struct("<I" if raw[1] == 1 else ">I")
    body = memoryview(raw)[4:]
    pos = 8                                     # header.stamp: int32 sec, uint32 nanosec

    def read_u32():
        nonlocal pos
        pos = (pos + 3) & ~3
        if pos + 4 > len(body):
            raise InputError("the serialized reference ends early")
        (value,) = u32.unpack_from(body, pos)
        pos += 4
        return value

    def skip_string():
        nonlocal pos
        length = read_u32()
        if pos + length > len(body):
            raise InputError("the serialized reference ends early")
        pos += length

    skip_string()                               # header.frame_id
    names = read_u32()
    if names > max_names:
        raise InputError(f"the reference names {names} joints; at most {max_names} are accepted")
    for _ in range(names):
        skip_string()
    points = read_u32()
    return names, points, 4 + pos + points * point_bytes(names)
