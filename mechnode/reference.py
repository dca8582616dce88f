"""References in, gain schedules out: the node's ``JointTrajectory`` -> ``GainSchedule`` path.

A ``JointTrajectory`` on ``reference_topic`` is mapped by joint name, resampled onto ``dt``, made
dynamically feasible, linearized and run through the Riccati pass
(:func:`mechnode.schedule.schedule_from_reference`) in a callback group of its own — so on
another executor thread than the state callback, with the numba kernels running without the
GIL — then swapped in atomically as the :class:`ActiveSchedule` the command path reads and
published as a ``GainSchedule``. ``header.stamp`` of the reference is the start time (time of
its knot ``t = 0``); zero means "as soon as the schedule is ready" (the GainSchedule's stamp
says when). A reference that cannot be used is logged and leaves the current schedule in force.
"""
from __future__ import annotations

import time

import numpy as np
from trajectory_msgs.msg import JointTrajectory

import core

from . import conversions as cv
from .diagnostics import callback_guard
from .errors import InputError
from .schedule import schedule_from_reference


class ActiveSchedule:
    """A schedule, its start time (ROS time, ns) and number: replaced as a whole, never mutated."""
    __slots__ = ("schedule", "start_ns", "seq")

    def __init__(self, schedule, start_ns: int, seq: int):
        self.schedule, self.start_ns, self.seq = schedule, start_ns, seq

    @property
    def end_ns(self) -> int:
        return self.start_ns + int(self.schedule.times[-1] * 1e9)


class ReferencePipeline:
    """Turns references into the schedule in force, ``active`` (see the module docstring).

    ``params``: the node's :class:`~mechnode.parameters.NodeParameters` (weights, options);
    ``health``: its :class:`~mechnode.diagnostics.Health`; ``lock``: the node's lock, held by the
    lifecycle transitions while they create or destroy entities; ``clock``: the node's clock.
    :meth:`start` at activate (with the GainSchedule lifecycle publisher), :meth:`stop` at
    deactivate (drops the schedule).
    """

    def __init__(self, params, health, lock, clock):
        self._params = params
        self.health = health
        self._lock = lock
        self._clock = clock
        self._config = None
        self._publisher = None
        self._seq = 0
        self.active = None              # ActiveSchedule, swapped atomically

    def start(self, config, publisher):
        with self._lock:
            self._config, self._publisher = config, publisher

    def stop(self):
        with self._lock:
            self._config = self._publisher = self.active = None

    def _publishing(self) -> bool:
        """Whether schedules are published: between activation and deactivation."""
        return self._publisher is not None and self._publisher.is_activated

    @callback_guard
    def on_reference(self, msg: JointTrajectory):
        t_recv = time.perf_counter()
        health, log = self.health, self.health.logger
        with self._lock:
            config, publishing = self._config, self._publishing()
        if config is None or not publishing:
            return
        plant, jm = config.plant, config.joint_map
        weights, options = self._params.current_weights(config), self._params.options()
        try:
            names, times, pos, vel = cv.trajectory_arrays(msg)
            ref = jm.reference(names, times, pos, vel)
            sched = schedule_from_reference(plant, jm, ref, weights, options)
        except (InputError, core.IntegratorError, core.SingularMatrixError, np.linalg.LinAlgError,
                ValueError) as exc:
            health.count("references_rejected")
            health.last_error = f"reference rejected: {type(exc).__name__}: {exc}"
            log.warning(f"reference rejected ({type(exc).__name__}): {exc}; "
                        "keeping the current schedule")
            return
        stamp = cv.stamp_ns(msg.header.stamp)
        now = self._clock.now().nanoseconds
        start = stamp if stamp else now
        with self._lock:
            if not self._publishing():              # deactivated meanwhile
                return
            self._seq += 1
            new = ActiveSchedule(sched, start, self._seq)
            self.active = new                       # the atomic swap
            self._publisher.publish(cv.schedule_to_msg(sched, start))
        total = time.perf_counter() - t_recv
        health.count("schedules")
        info = sched.info
        health.stats.update(reference_to_schedule_s=total, **{k: v for k, v in info.items()
                                                               if k.endswith("_s")})
        health.stats["feasibility"] = info.get("feasibility", "")
        if ref.ignored_joints:
            log.warning(f"reference: ignored joint(s) unknown to the model "
                        f"{list(ref.ignored_joints)}")
        late = (now - new.end_ns) * 1e-9
        log.info(
            f"schedule #{new.seq} published: {sched.knots} knots over {sched.duration:.3f} s, "
            f"feasibility {info['feasibility']} {info.get('feasibility_message', '')}; "
            f"{total * 1e3:.1f} ms (resample {info['resample_s'] * 1e3:.1f}, feasibility "
            f"{info['feasibility_s'] * 1e3:.1f}, linearization {info['linearization_s'] * 1e3:.1f}, "
            f"Riccati {info['riccati_s'] * 1e3:.1f} ms)"
            + (f"; NOTE: it ended {late:.3f} s ago, holding its final state" if late > 0 else ""))
