"""Joint names of ROS messages <-> the model's configuration variables (ROS-free).

Messages are matched by name, never by index: :class:`JointMap` puts the arrays of a
``JointState`` or of a ``JointTrajectory`` into model order and says what is wrong with them.
"""
from __future__ import annotations

import numpy as np

from mechnode.errors import InputError
from mechnode.logic.resampling import Reference


class JointMap:
    """Maps the joint names of ROS messages onto the model's configuration variables.

    ``mapping`` entries are ``"model_variable:joint_name"``; variables not mentioned keep their
    own name. Messages are matched by name only: the order of joints in a message is free,
    joints unknown to the model are ignored (reported by :meth:`indices`), missing ones are an
    error. ``followers`` are joints the model knows without a variable of their own (mimic
    joints, :attr:`core.System.mimic_joints`): ignored too, but not reported as unknown.
    """

    def __init__(self, config_names, mapping=(), followers=()):
        self.config_names = list(config_names)
        self.followers = frozenset(followers)
        pairs = self.parse(mapping, self.config_names)
        self.joint_names = [pairs.get(c, c) for c in self.config_names]
        if len(set(self.joint_names)) != len(self.joint_names):
            dup = sorted({j for j in self.joint_names if self.joint_names.count(j) > 1})
            raise InputError(f"joint_map gives the same joint name to several variables: {dup}")
        self._index = {j: i for i, j in enumerate(self.joint_names)}
        self._cache: dict = {}

    @staticmethod
    def parse(entries, config_names=None) -> dict:
        """``["x:cart_joint", ...]`` -> ``{"x": "cart_joint"}``; checks the format (and the
        variable names when ``config_names`` is given)."""
        out = {}
        for e in entries or ():
            if not isinstance(e, str) or e.count(":") != 1:
                raise InputError(f"joint_map entry {e!r} must be 'model_variable:joint_name'")
            var, joint = (s.strip() for s in e.split(":"))
            if not var or not joint:
                raise InputError(f"joint_map entry {e!r} has an empty side")
            if var in out:
                raise InputError(f"joint_map names variable {var!r} twice")
            if config_names is not None and var not in config_names:
                raise InputError(f"joint_map entry {e!r}: the model has no variable {var!r} "
                                 f"(variables: {list(config_names)})")
            out[var] = joint
        return out

    def indices(self, names):
        """``(take, unknown)``: ``take[i]`` = position in ``names`` of the joint of variable i;
        ``unknown`` = names the model does not know. Raises InputError if a joint is missing or
        named twice. Cached per distinct name list."""
        key = tuple(names)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        pos = {}
        for i, nm in enumerate(key):
            if nm in pos:
                raise InputError(f"joint {nm!r} appears twice in the message")
            pos[nm] = i
        missing = [j for j in self.joint_names if j not in pos]
        if missing:
            raise InputError(f"message lacks joint(s) {missing} (model needs {self.joint_names}, "
                             f"got {list(key)})")
        take = np.array([pos[j] for j in self.joint_names], dtype=np.int64)
        unknown = tuple(nm for nm in key if nm not in self._index and nm not in self.followers)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (take, unknown)
        return take, unknown

    def state(self, names, position, velocity):
        """``(q, qdot, unknown)`` in model order from a JointState's arrays; raises InputError for
        wrong sizes, missing joints, missing velocities or non-finite values."""
        n_names = len(names)
        if len(position) != n_names:
            raise InputError(f"JointState has {n_names} names but {len(position)} positions")
        if len(velocity) != n_names:
            raise InputError(f"JointState has {n_names} names but {len(velocity)} velocities "
                             "(positions and velocities of every joint are required)")
        take, unknown = self.indices(names)
        q = np.asarray(position, dtype=float)[take]
        dq = np.asarray(velocity, dtype=float)[take]
        if not (np.isfinite(q).all() and np.isfinite(dq).all()):
            bad = [self.joint_names[i] for i in range(len(take))
                   if not (np.isfinite(q[i]) and np.isfinite(dq[i]))]
            raise InputError(f"JointState has non-finite position/velocity for {bad}")
        return q, dq, unknown

    def reference(self, names, times, positions, velocities=None) -> "Reference":
        """A :class:`Reference` in model order from a trajectory's arrays (rows = points)."""
        times = np.asarray(times, dtype=float)
        if times.ndim != 1 or times.size == 0:
            raise InputError("the trajectory has no points")
        take, unknown = self.indices(names)
        pos = np.asarray(positions, dtype=float)
        if pos.shape != (times.size, len(names)):
            raise InputError(f"every point needs {len(names)} positions; got array {pos.shape}")
        vel = None
        if velocities is not None:
            vel = np.asarray(velocities, dtype=float)
            if vel.shape != pos.shape:
                raise InputError(f"velocities must be given for every joint of every point or for "
                                 f"none; got {vel.shape} for positions {pos.shape}")
            vel = vel[:, take]
        return Reference(times, pos[:, take], vel, unknown)
