"""References in, gain schedules out: the node's ``JointTrajectory`` -> ``GainSchedule`` path.

A ``JointTrajectory`` on ``reference_topic`` is mapped by joint name, resampled onto ``dt``, made
dynamically feasible, linearized and run through the Riccati pass
(:func:`mechnode.logic.schedule.schedule_from_reference`) in a callback group of its own — so on
another executor thread than the state callback, with the numba kernels running without the
GIL — then swapped in atomically as the :class:`ActiveSchedule` in force, handed to the command path
and published as a ``GainSchedule``. ``header.stamp`` of the reference is the start time (time of
its knot ``t = 0``); zero means "as soon as the schedule is ready" (the GainSchedule's stamp
says when). A reference that cannot be used is logged and leaves the current schedule in force.

On a floating base the reference is the joints' and moves the body over the contacts
(:mod:`mechnode.logic.body`): it starts from the stance in force (the end of the schedule in
force, else the balance hold's), and its schedule is in ``STATE_TANGENT`` with knots
``body_step`` apart.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from rclpy.serialization import deserialize_message
from trajectory_msgs.msg import JointTrajectory

import core
from mechnode.errors import InputError
from mechnode.logic import wire
from mechnode.logic.body import body_schedule
from mechnode.logic.schedule import schedule_from_reference
from mechnode.ros import conversions as cv
from mechnode.ros.diagnostics import callback_guard

#: The niceness the planning thread of a body motion adds to its own (Linux; elsewhere unchanged).
PLANNER_NICENESS = 10


def _lower_priority() -> None:
    """Raise the calling thread's niceness by :data:`PLANNER_NICENESS` (a thread's own on Linux)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + PLANNER_NICENESS)
    except (AttributeError, OSError):
        pass


class ActiveSchedule:
    """A schedule, its start time (ROS time, ns), number, and the generation of the
    configuration it was computed for; ``lfc``: its LFC form (:mod:`mechnode.logic.lfc`) when the node
    publishes one; ``kind``: ``"schedule"`` (from a reference) or ``"hold"`` (the idle hold
    about the state measured at activation, a one-knot schedule: :func:`mechnode.logic.gains.hold_schedule`);
    ``hold``: the one-knot law that replaces the schedule once it has ended
    (``idle_after_schedule``), or None. Replaced as a whole; not changed once handed to the
    command path."""
    __slots__ = ("schedule", "start_ns", "seq", "generation", "lfc", "kind", "hold")

    def __init__(self, schedule, start_ns: int, seq: int, generation: int, lfc=None, kind="schedule",
                 hold=None):
        self.schedule, self.start_ns, self.seq = schedule, start_ns, seq
        self.generation, self.lfc, self.kind, self.hold = generation, lfc, kind, hold

    @property
    def end_ns(self) -> int:
        return self.start_ns + int(self.schedule.times[-1] * 1e9)


class ReferencePipeline:
    """Turns references into the schedule in force, ``active`` (see the module docstring).

    ``params``: the node's :class:`~mechnode.ros.parameters.NodeParameters` (weights, options);
    ``health``: its :class:`~mechnode.ros.diagnostics.Health`; ``lock``: the node's lock, held by the
    lifecycle transitions while they create or destroy entities; ``clock``: the node's clock;
    ``on_install``: called with every new ActiveSchedule (the command path's ``install``);
    ``stance``: returns the configuration a floating base's balance hold stands at, or None.
    :meth:`start` at activate (with the GainSchedule lifecycle publisher), :meth:`stop` at
    deactivate (drops the schedule).
    """

    def __init__(self, params, health, lock, clock, on_install=None, stance=None):
        self._params = params
        self._stance = stance or (lambda: None)
        # a body motion takes seconds of CPU: on a thread of lower priority, so that the robot's
        # controllers and drivers on the same computer keep theirs
        self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mechnode_planner",
                                           initializer=_lower_priority)
        self._on_install = on_install
        self.health = health
        self._lock = lock
        self._clock = clock
        self._config = None
        self._publisher = None
        self._seq = 0
        self.active = None              # ActiveSchedule, swapped atomically
        self.origin = None              # the ActiveSchedule made from the last reference (re-plans track it)
        self.epoch = 0                  # one more at every clock jump: a reference from before is not installed

    def start(self, config, publisher):
        with self._lock:
            self._config, self._publisher = config, publisher

    def stop(self):
        with self._lock:
            self._config = self._publisher = self.active = self.origin = None

    def clock_jumped(self):
        """The clock jumped (:mod:`mechnode.ros.clock_jumps`): a reference being computed now was
        timed on the old clock and is not installed. Called where the jump is seen (not blocking);
        :meth:`drop` follows."""
        self.epoch += 1

    def drop(self):
        """No schedule in force (after a clock jump: re-plans of the old one are superseded)."""
        with self._lock:
            self.active = self.origin = None

    def install(self, config, sched, start_ns: int, replaces=None, epoch=None):
        """Put ``sched`` (computed for ``config``) in force from ``start_ns``: the one path of
        every schedule, from a reference or a re-plan (``replaces``: the ActiveSchedule it was
        re-planned from). Under the lock: nothing is installed after deactivation, for another
        configuration (or one it does not fit), for a re-plan once its base is no longer in
        force, or for a reference received before a clock jump (``epoch``: :attr:`epoch` when it
        arrived). Returns ``(ActiveSchedule, None)`` or ``(None, why)``, ``why`` one of
        ``"inactive"``, ``"reconfigured"``, ``"superseded"``, ``"clock_jump"``."""
        with self._lock:
            if not self._publishing():
                return None, "inactive"
            if self._config is not config or not sched.fits(self._config.plant):
                return None, "reconfigured"
            if replaces is not None and self.active is not replaces:
                return None, "superseded"
            if epoch is not None and epoch != self.epoch:
                return None, "clock_jump"
            self._seq += 1
            new = ActiveSchedule(sched, start_ns, self._seq, config.generation)
            self.active = new                       # the atomic swap
            if replaces is None:
                self.origin = new
            if self._on_install is not None:
                self._on_install(new)
            self._publisher.publish(cv.schedule_to_msg(sched, start_ns))
            return new, None

    def _publishing(self) -> bool:
        """Whether schedules are published: between activation and deactivation."""
        return self._publisher is not None and self._publisher.is_activated

    def _refuse(self, reason: str):
        self.health.count("references_rejected")
        self.health.last_error = f"reference rejected: {reason}"
        self.health.logger.warning(f"reference rejected: {reason}; keeping the current schedule")

    def _bounded(self, raw: bytes):
        """The JointTrajectory in ``raw`` (its serialized bytes), or None when it is over the
        limits (read from the bytes, before any conversion: :mod:`mechnode.logic.wire`)."""
        limit = int(self._params.value("max_reference_points"))
        try:
            names, points, most = wire.trajectory_counts(raw)
        except InputError as exc:
            self._refuse(str(exc))
            return None
        if points > limit:
            self._refuse(f"{points} points; the limit (parameter max_reference_points) is {limit}")
            return None
        if len(raw) > most:
            self._refuse(f"{len(raw)} bytes for {points} points of {names} joints (at most {most}): "
                         "a point has more entries than there are joint names")
            return None
        return deserialize_message(raw, JointTrajectory)

    def _body_schedule(self, config, ref, weights, options):
        """A floating base's reference: the body motion over the contacts from the stance in
        force (the end of the schedule in force, else the balance hold's) and its gains
        (:func:`mechnode.logic.body.body_schedule`)."""
        active = self.active
        stance = active.schedule.x_ref[-1, :config.plant.n] if active is not None else self._stance()
        if stance is None:
            raise InputError("no stance yet: the balance hold starts from the first fresh JointState and "
                             "Odometry after activation (idle_action: balance), and a body motion starts from it")
        return self.plan(body_schedule, config.plant.system, stance, ref, weights.Q, weights.R, config.plant.dt,
                         float(self._params.value("body_step")), options.max_knots, config.joint_map.joint_names)

    def plan(self, function, *args):
        """``function(*args)`` on the planning thread (lower priority), waited for."""
        return self._planner.submit(function, *args).result()

    @callback_guard
    def on_reference(self, raw: bytes):
        """A reference, as serialized bytes (the subscription is ``raw``): see :meth:`_bounded`."""
        t_recv = time.perf_counter()
        health, log, epoch = self.health, self.health.logger, self.epoch
        with self._lock:
            config, publishing = self._config, self._publishing()
        if config is None or not publishing:
            return
        msg = self._bounded(raw)
        if msg is None:
            return
        plant, jm = config.plant, config.joint_map
        floating = getattr(plant, "floating", False)
        weights, options = self._params.current_weights(config), self._params.options()
        try:
            names, times, pos, vel = cv.trajectory_arrays(msg)
            ref = jm.reference(names, times, pos, vel)
            if floating:
                sched = self._body_schedule(config, ref, weights, options)
            else:
                sched = schedule_from_reference(plant, jm, ref, weights, options)
        except (InputError, core.CoreError, np.linalg.LinAlgError, ValueError) as exc:
            self._refuse(f"{type(exc).__name__}: {exc}")
            return
        stamp = cv.stamp_ns(msg.header.stamp)
        now = self._clock.now().nanoseconds
        start = stamp if stamp else now
        new, why = self.install(config, sched, start, epoch=epoch)
        if new is None:
            if why == "clock_jump":
                health.count("schedules_discarded")
                log.warning("reference: dropped its schedule: the clock jumped while it was computed")
            elif why == "reconfigured":
                # reconfigured while this reference was processed: its schedule is for another
                # model (or dt) and is dropped, never published or used
                health.count("schedules_discarded")
                now_config = self._config
                log.warning(f"reference: dropped the schedule computed for configuration "
                            f"#{config.generation} (now "
                            f"{'#' + str(now_config.generation) if now_config is not None else 'none'})")
            return                                  # (or deactivated meanwhile)
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
        if info.get("kind") == "body":
            detail = (f"a body motion on the contacts, knots {info['step']:g} s apart (base offset up to "
                      f"{1e3 * info['base_offset_max']:.1f} mm, joints re-solved on the contacts by at most "
                      f"{info['joint_mismatch']:.2g}); {total * 1e3:.1f} ms (motion {info['motion_s'] * 1e3:.1f}, "
                      f"gains {info['gains_s'] * 1e3:.1f} ms)")
        else:
            detail = (f"feasibility {info['feasibility']} {info.get('feasibility_message', '')}; "
                      f"{total * 1e3:.1f} ms (resample {info['resample_s'] * 1e3:.1f}, feasibility "
                      f"{info['feasibility_s'] * 1e3:.1f}, linearization {info['linearization_s'] * 1e3:.1f}, "
                      f"Riccati {info['riccati_s'] * 1e3:.1f} ms)")
        log.info(f"schedule #{new.seq} published: {sched.knots} knots over {sched.duration:.3f} s, {detail}"
                 + (f"; NOTE: it ended {late:.3f} s ago, holding its final state" if late > 0 else ""))
