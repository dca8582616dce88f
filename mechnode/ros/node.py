"""The mechnode managed (lifecycle) node: exact linearization and TV-LQR tracking over ROS 2.

Lifecycle
---------
* ``configure``: loads the model (parameter ``model``: a YAML or URDF file, absolute, relative
  to the working directory, or a model packaged with core (``core/data/``), or model text; or,
  with ``robot_description_topic`` set, the URDF published there, waited for at most
  ``robot_description_timeout`` s; data only, nothing named in a parameter is ever imported or
  run), builds the variational integrator at ``dt``,
  checks ``joint_map``, the weights and the limits against the model and warms up the numba
  kernels the command path, the schedules and the idle hold need (loads them from the cache; a
  cold cache compiles them in two processes, each kernel named and counted on stderr, about a
  minute or two; the continuous and second-order linearizations then compile in a niced
  background process, ended at shutdown).
* ``activate``: creates the subscriptions (JointState, JointTrajectory reference), publishers
  (command, GainSchedule, diagnostics, optional command echo) and timers (watchdog,
  diagnostics). ``deactivate`` destroys them and drops the active schedule; ``cleanup`` drops
  the model. The services (``~/linearize``, ``~/compute_gains``, ``~/plan_trajectory``,
  ``~/get_model``) exist from start-up and answer ``success: false`` while unconfigured.
* ``shutdown``: tears everything down and completes :attr:`MechNode.finished`; the ``mechnode``
  command then exits (status 0).

The parts, one module each
--------------------------
* :mod:`mechnode.ros.parameters`: declaration, validation and typed reads of the parameters;
* :mod:`mechnode.ros.reference`: JointTrajectory -> GainSchedule (reliable, transient local), the
  schedule in force;
* :mod:`mechnode.ros.command`: JointState (sensor-data QoS) -> command (``Float64MultiArray``) at
  1 kHz, and the state watchdog, in a process of its own (:mod:`mechnode.ros.command_process`,
  started with the node: configured, started, stopped and given schedules by the transitions
  and the reference pipeline);
* :mod:`mechnode.ros.idle`: the hold about the state measured at activation, until the first
  schedule (``idle_action``);
* :mod:`mechnode.ros.replanner`: re-plans of the schedule in force from the measured state
  (``replan_period``), installed through the reference pipeline;
* :mod:`mechnode.ros.clock_jumps`: a jump of the clock (``use_sim_time``: a simulator reset)
  drops what was timed on the old clock in both processes;
* :mod:`mechnode.logic.limits`: state bounds, stamp checks, command saturation;
* :mod:`mechnode.ros.diagnostics`: counters, timings, ``DiagnosticArray`` on ``diagnostics_topic``;
* :mod:`mechnode.ros.services`: the four services.

This module wires them: the lifecycle transitions create and destroy the entities, and the
GainSchedule and DiagnosticArray publishers are lifecycle publishers, activated and
deactivated by the transitions.

Bad input (wrong-sized/NaN/out-of-bounds/badly stamped JointState, empty or non-monotonic
trajectories, wrong-sized or overflowing service requests, singular linearizations) is rejected
with a logged warning or a ``success: false`` response naming the reason; no callback lets an
exception escape.
"""
from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from mechnode_interfaces.msg import GainSchedule  # type: ignore[attr-defined]  # generated message: no type info
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.serialization import deserialize_message
from rclpy.task import Future
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

import core
from mechnode.errors import InputError
from mechnode.logic.joint_map import JointMap
from mechnode.logic.legged import LeggedPlant, parse_contacts
from mechnode.logic.lfc import check_lfc_model, lfc_schedule
from mechnode.logic.plant import (
    MAX_MODEL_BYTES,
    REST_NICE,
    ModelSpecError,
    Plant,
    parse_locked_joints,
)
from mechnode.logic.weights import Weights
from mechnode.ros import conversions as cv
from mechnode.ros.clock_jumps import NodeClockJumps
from mechnode.ros.command import CommandSettings
from mechnode.ros.command_process import STALL_SECONDS, CommandProcess
from mechnode.ros.diagnostics import Health, callback_guard, tracking_status
from mechnode.ros.idle import IdleHold
from mechnode.ros.parameters import NodeParameters
from mechnode.ros.qos import COMMAND_QOS, LATCHED
from mechnode.ros.reference import ReferencePipeline
from mechnode.ros.replanner import Replanner
from mechnode.ros.services import ModelServices

if TYPE_CHECKING:
    from rclpy.lifecycle import LifecyclePublisher
    from rclpy.subscription import Subscription
    from rclpy.timer import Timer

__all__ = ["COMMAND_QOS", "LATCHED", "NODE_NAME", "Configuration", "MechNode"]

NODE_NAME = "mechnode"


@dataclass(frozen=True)
class Configuration:
    """What ``configure`` made of the parameters: the model at ``dt``, the joint names, the
    weights checked against the model, and the configuration's number (``generation``, one
    more at every successful configure). Replaced as a whole; a result computed for one
    generation is never installed in another."""
    plant: Plant | LeggedPlant
    joint_map: JointMap
    weights: Weights
    generation: int = 0


class MechNode(LifecycleNode):
    """The managed node (see the module docstring). Spin it with a MultiThreadedExecutor."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self.config: Configuration | None = None    # while configured
        self._generation = 0                    # of the last successful configure
        self._lock = threading.RLock()          # the transitions' entities vs the callbacks
        self._stalls_seen: dict = {}            # command process pid -> stalls reported
        self._leaving = False                   # deactivating after the command process died
        # lifecycle publishers, timers and the reference subscription while active
        self._schedule_pub: LifecyclePublisher | None = None
        self._diagnostics_pub: LifecyclePublisher | None = None
        self._diagnostics_timer: Timer | None = None
        self._reference_sub: Subscription | None = None
        self._background = None                 # the background compilation (cold cache)
        self._team = None                       # the warm-up's compiling process (python -m core.warmup)
        self._cold = False                      # the warm-up compiled (a first run)
        self.health = Health(self.get_logger())
        self.finished: Future[bool] = Future()      # done at the shutdown transition
        # the command path's process, started now: its start-up overlaps the node's
        self.command = CommandProcess(self.get_name(), self.get_namespace(),
                                      self.get_parameter("use_sim_time").value, self.get_logger())
        self.params = NodeParameters(self, plant=self._configured_plant,
                                     is_active=lambda: self.is_active, on_control=self._on_control)
        # what configure needs, missing from numba's cache (a first run), compiles from now on
        # in two processes (core names and counts each kernel on stderr); a warm cache: nothing
        self._team = Plant.start_warm_up() if self.params.value("warm_up") else None
        self.reference = ReferencePipeline(self.params, self.health, self._lock, self.get_clock(),
                                           on_install=self._install, stance=self._balance_stance)
        self._lfc = False                       # publishing the LFC form (lfc_topic set at activate)
        self.model_services = ModelServices(self, self.params, self.health)
        # callback groups on the multi-threaded executor (the services have theirs): schedule
        # computations (and the idle hold's) and diagnostics; the command path has an executor of its own
        self._cb_reference = MutuallyExclusiveCallbackGroup()
        self._cb_diagnostics = MutuallyExclusiveCallbackGroup()
        self.idle = IdleHold(self)              # idle_action: the hold until the first schedule
        self.replanner = Replanner(self)        # replan_period: re-plans from the measured state
        self.clock_jumps = NodeClockJumps(self)  # use_sim_time: a simulator that resets its clock
        self.get_logger().info("mechnode started (unconfigured); services ~/linearize, "
                               "~/compute_gains, ~/plan_trajectory, ~/get_model")

    def _configured_plant(self):
        config = self.config
        return None if config is None else config.plant

    def _on_control(self):
        """``command_mode`` or ``timeout_action`` changed: the command path applies it."""
        params = getattr(self, "params", None)      # None while the parameters are declared
        if params is not None:
            self.command.set_modes(params.command_mode, params.timeout_action)

    def _balance_stance(self):
        """The configuration the balance hold stands at (a floating base), or None."""
        return self.idle.stance

    def _install(self, active):
        """A new schedule in force: its LFC form if that is published, the hold after its end
        (idle_after_schedule), then to the command path."""
        self.idle.attach_end_hold(active, self.config)
        self.attach_lfc(active)
        self.command.install(active)

    def attach_lfc(self, active) -> None:
        """With ``lfc_topic``: give ``active`` its LFC form (logged and left out if it has none)."""
        config = self.config
        if self._lfc and config is not None:
            try:
                active.lfc = lfc_schedule(config.plant, active.schedule)
            except (InputError, core.CoreError, np.linalg.LinAlgError) as exc:
                self.health.last_error = f"LFC form of {active.kind} #{active.seq}: {exc}"
                self.get_logger().error(f"{active.kind} #{active.seq} has no LFC form ({exc}); LFC keeps "
                                        "the previous one")

    def publish_schedule(self, sched, start_ns: int) -> None:
        """Publish ``sched`` on the GainSchedule topic (while active; the balance hold of a
        floating base: its gain, holding torques and stance, one knot)."""
        pub = self._schedule_pub
        if pub is not None and pub.is_activated:
            pub.publish(cv.schedule_to_msg(sched, start_ns))

    @property
    def lifecycle_label(self) -> str:
        return self._state_machine.current_state[1]

    @property
    def is_active(self) -> bool:
        """True from activation to deactivation (the lifecycle publishers are activated)."""
        pub = self._schedule_pub
        return pub is not None and pub.is_activated

    # ================================================================== lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        log, value = self.get_logger(), self.params.value
        t0 = time.perf_counter()
        spec, dt = value("model"), float(value("dt"))
        try:
            self.params.check_refused()     # a parameter file value refused at start-up
            topic = value("robot_description_topic")
            locked = parse_locked_joints(value("locked_joints"))
            floating = value("floating_base") == "quaternion"
            contacts = parse_contacts(value("contacts"))
            if contacts and not floating:
                raise InputError(f"contacts {[frame for frame, _ in contacts]} need floating_base: quaternion")
            kind = LeggedPlant if floating else Plant
            extra = {"contacts": contacts} if floating else {}
            if topic:
                text, source = self._robot_description(topic, float(value("robot_description_timeout")))
                plant = kind.from_text(text, dt, source, locked, **extra)
            else:
                plant = kind.load(spec, dt, locked=locked, **extra)
            plant.check_size(int(value("max_model_variables")))
            joint_map = JointMap(plant.config_names, value("joint_map") or (), plant.follower_names)
            weights = self.params.weights(plant)
            self.params.limits(plant, joint_map.joint_names)     # checked here, applied at activate
            t1 = time.perf_counter()
            if value("warm_up"):
                self._warm_up(plant)
            plant.check_regular()       # a model that can never be linearized is refused here
            t2 = time.perf_counter()
            # after the warm-up: the command process loads the control kernel from the cache
            command_s = self.command.configure(plant, value("joint_map"), self._generation + 1,
                                               self.get_parameter("use_sim_time").value)
        except Exception as exc:  # noqa: BLE001 - any failure is a failed transition
            log.error(f"configure failed: {type(exc).__name__}: {exc}")
            self.health.last_error = f"configure: {exc}"
            return TransitionCallbackReturn.FAILURE
        self._generation += 1
        self.config = Configuration(plant, joint_map, weights, self._generation)
        # what is alive now (model, compiled kernels, rclpy) lives as long as the node: moved out
        # of the collector's view, so that its full collections stay short for the command path
        gc.collect()
        gc.freeze()
        self.health.stats.update(load_s=t1 - t0, warm_up_s=t2 - t1, command_process_configure_s=command_s)
        if value("warm_up"):
            self._warm_up_rest()
        locks = f", locked {plant.system.locked_joints}" if plant.locked else ""
        log.info(f"configured: model {plant.source!r} ({plant.system.name}: q = {plant.config_names}{locks}, "
                 f"joints {joint_map.joint_names}, inputs {plant.input_names}, {plant.actuation}), "
                 f"dt = {plant.dt} s; load {t1 - t0:.2f} s, warm-up {t2 - t1:.2f} s, command process "
                 f"(pid {self.command.pid}) {command_s:.2f} s")
        return TransitionCallbackReturn.SUCCESS

    def _warm_up(self, plant) -> None:
        """Load the kernels the node needs before it may activate; those numba's cache lacks
        compile in two processes (core names and counts each on stderr), started with the node
        (or now); the node says when it waits for them and how long it took."""
        log = self.get_logger()
        team, self._team = self._team, None
        if team is None:
            team = Plant.start_warm_up()
        if team is not None:
            try:
                team.wait(timeout=0.5)
            except Exception:  # noqa: BLE001 - still compiling: say so
                log.info("warm-up: numba is compiling the kernels of the command path, the schedules and the "
                         "hold (first run; core names and counts each on stderr); configure waits for them, "
                         "the continuous and second-order linearizations follow in the background")
        # with replan_period set now, the re-plan's kernels too (else the first re-plan loads them)
        replan = float(self.params.value("replan_period")) > 0
        seconds = (plant.warm_up(team=team, replan=replan) if team is not None
                   else plant.warm_up(processes=1, replan=replan))
        if plant.compiled_kernels:
            log.info(f"warm-up: compiled the {plant.compiled_kernels} kernels of the command path, the "
                     f"schedules and the hold; configure waited {seconds:.1f} s for them")
            self._cold = True
        else:
            log.info(f"warm-up: loaded the numba kernels of {plant.system.name} from the cache ({seconds:.1f} s)")

    def _warm_up_rest(self) -> None:
        """After a cold start: the kernels the services may need besides, in a background
        process (niced; ended at shutdown). Whatever it has not compiled yet compiles on use."""
        if not self._cold or (self._background is not None and self._background.poll() is None):
            return
        self._background = Plant.warm_up_rest()
        if self._background is not None:
            self.get_logger().info(
                f"warm-up: the continuous and second-order linearizations (the services' first calls) compile "
                f"in the background (pid {self._background.pid}, nice {REST_NICE}; core[background] on stderr)")

    def _stop_background(self) -> None:
        """End the compiling processes (numba writes each cache file whole: nothing is left
        half-written; a team's second process ends with the first's group)."""
        for proc in (getattr(self, "_team", None), getattr(self, "_background", None)):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5.0)
                except Exception:  # noqa: BLE001 - best effort
                    proc.kill()
                    proc.wait()
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
        self._team = self._background = None

    def _robot_description(self, topic: str, timeout: float):
        """``(text, source)`` of the first message on ``topic`` (std_msgs/String, reliable +
        transient local: the last one published, as robot_state_publisher keeps it), waited for
        at most ``timeout`` s on a helper node of this context. Taken as serialized bytes and
        refused above MAX_MODEL_BYTES before it is converted."""
        name = self.resolve_topic_name(topic)
        got: list[bytes] = []       # serialized messages (raw=True)
        helper = rclpy.create_node(f"{self.get_name()}_robot_description", namespace=self.get_namespace(),
                                   context=self.context, use_global_arguments=False,
                                   start_parameter_services=False, enable_rosout=False)
        executor = SingleThreadedExecutor(context=self.context)
        try:
            helper.create_subscription(String, name, got.append, LATCHED, raw=True)
            executor.add_node(helper)
            deadline = time.monotonic() + timeout
            while not got and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=min(0.1, max(0.0, deadline - time.monotonic())))
        finally:
            executor.shutdown(timeout_sec=1.0)
            helper.destroy_node()
        if not got:
            raise ModelSpecError(f"no robot description on {name} within {timeout} s (parameter "
                                 "robot_description_timeout); robot_state_publisher publishes the URDF there")
        raw = got[0]
        if len(raw) > MAX_MODEL_BYTES + 64:
            raise ModelSpecError(f"the robot description on {name} has {len(raw)} bytes, more than the "
                                 f"limit of {MAX_MODEL_BYTES} (MAX_MODEL_BYTES)")
        text = deserialize_message(raw, String).data
        return text, f"{name} ({len(text)} characters)"

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        value = self.params.value
        # under the lock: a reference callback waits until every entity exists and the
        # lifecycle publishers are activated
        with self._lock:
            try:
                config = cast(Configuration, self.config)      # activate follows a successful configure
                self._schedule_pub = self.create_lifecycle_publisher(
                    GainSchedule, value("schedule_topic"), LATCHED)
                self._diagnostics_pub = self.create_lifecycle_publisher(
                    DiagnosticArray, value("diagnostics_topic"), 10)
                self._diagnostics_timer = self.create_timer(
                    float(value("diagnostics_period")), self._on_diagnostics,
                    callback_group=self._cb_diagnostics)
                self.reference.start(config, self._schedule_pub)
                settings = self._command_settings()
                if settings.lfc_topic:
                    check_lfc_model(config.plant)
                self._lfc = bool(settings.lfc_topic)
                if not self.command.alive:      # it died (and the node left active): a new one
                    self.command.configure(config.plant, value("joint_map"), config.generation,
                                           self.get_parameter("use_sim_time").value)
                self.command.start(settings)
                self.idle.start(config)
                self.replanner.start(config)
                self.clock_jumps.start(config)
                # subscriptions last: their callbacks may run as soon as they exist
                self._reference_sub = self.create_subscription(
                    JointTrajectory, value("reference_topic"), self.reference.on_reference, LATCHED,
                    callback_group=self._cb_reference, raw=True)
            except Exception as exc:  # noqa: BLE001
                self.get_logger().error(f"activate failed: {type(exc).__name__}: {exc}")
                self._teardown()
                return TransitionCallbackReturn.FAILURE
            result = super().on_activate(state)     # activates the lifecycle publishers
        self.get_logger().info(
            f"active: state {settings.state_topic}, reference {self._reference_sub.topic_name}, "
            f"command {settings.command_topic} ({value('command_mode')}), schedule "
            f"{self._schedule_pub.topic_name}" + (f", LFC Control {settings.lfc_topic}" if self._lfc else ""))
        return result

    def _command_settings(self) -> CommandSettings:
        # called at activate, after a successful configure
        config, value, resolve = cast(Configuration, self.config), self.params.value, self.resolve_topic_name
        echo, lfc = value("command_echo_topic"), value("lfc_topic")
        return CommandSettings(
            state_topic=resolve(value("state_topic")), command_topic=resolve(value("command_topic")),
            echo_topic=resolve(echo) if echo else "", lfc_topic=resolve(lfc) if lfc else "",
            limits=self.params.limits(config.plant, config.joint_map.joint_names),
            command_mode=self.params.command_mode, timeout_action=self.params.timeout_action,
            generation=config.generation, **self._odometry_settings(config))

    def _odometry_settings(self, config) -> dict:
        """A floating base's odometry topic (resolved) and the frame ids it must carry."""
        if not getattr(config.plant, "floating", False):
            return {}
        value = self.params.value
        return dict(odometry_topic=self.resolve_topic_name(value("odometry_topic")),
                    odometry_frame=value("odometry_frame") or "",
                    base_frame=value("base_frame") or config.plant.system.free_flyer)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = super().on_deactivate(state)       # deactivates the lifecycle publishers
        self._teardown()
        self.get_logger().info("deactivated: commands stopped; subscriptions, publishers and timers removed, "
                               "schedule dropped")
        return result

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        self.command.cleanup()
        self.config = None
        self.get_logger().info("cleaned up: model unloaded")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        self._stop_background()
        self.command.close()
        self.config = None
        self.get_logger().info("shut down")
        if not self.finished.done():
            self.finished.set_result(True)
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        self.command.cleanup()
        self.config = None
        self.get_logger().error("error processing: back to unconfigured")
        return TransitionCallbackReturn.SUCCESS

    def destroy_node(self):
        self._teardown()
        if getattr(self, "_background", None) is not None or getattr(self, "_team", None) is not None:
            self._stop_background()
        if getattr(self, "command", None) is not None:      # None: __init__ did not get that far
            self.command.close()
        return super().destroy_node()

    def _teardown(self):
        """Stop the command path, destroy what activate created, drop the schedule. Safe on a
        node whose __init__ did not complete (rclpy destroys it at context shutdown)."""
        if getattr(self, "command", None) is not None:
            self.command.stop()     # first: no command is sent after this (or the process is gone)
        if getattr(self, "reference", None) is None:
            return                  # constructed no further than this: nothing was activated
        with self._lock:
            self.idle.stop()
            self.replanner.stop()
            self.clock_jumps.stop()
            self.reference.stop()
            sub, timer = self._reference_sub, self._diagnostics_timer
            pubs = (self._schedule_pub, self._diagnostics_pub)
            self._reference_sub = self._diagnostics_timer = None
            self._schedule_pub = self._diagnostics_pub = None
            for destroy, entity in ((self.destroy_subscription, sub), (self.destroy_timer, timer),
                                    (self.destroy_lifecycle_publisher, pubs[0]),
                                    (self.destroy_lifecycle_publisher, pubs[1])):
                if entity is None:
                    continue
                try:
                    destroy(entity)
                except Exception:  # noqa: BLE001
                    pass

    # ================================================================== diagnostics
    def diagnostics(self):
        """The node's ``DiagnosticStatus`` now. A stalled command process (an old heartbeat)
        is not asked for its status (the request would wait for it)."""
        age, stalls, longest = self.command.heartbeat()
        alive = self.command.alive
        stalled = alive and age > STALL_SECONDS
        new_stalls = stalls - self._stalls_seen.get(self.command.pid, 0)
        self._stalls_seen = {self.command.pid: stalls}
        heartbeat = dict(age=age if alive else None, stalls=stalls, longest=longest, stalled=stalled,
                         new_stalls=max(new_stalls, 0))
        status = None if stalled else self.command.status()
        self.clock_jumps.catch_up(status)
        return tracking_status(self.get_fully_qualified_name(), self._configured_plant(), self.lifecycle_label,
                               self.is_active, status, self.reference.active,
                               self.health, self.get_clock().now().nanoseconds, heartbeat)

    def _check_command_process(self) -> None:
        """Active with a dead command process: say so and leave active (nothing commands the
        robot any more; the next activate starts a new process)."""
        if self.is_active and not self.command.alive and not self._leaving:
            self._leaving = True
            self.health.count("command_process_deaths")
            self.health.last_error = "the command process died: left active"
            self.get_logger().error("the command process died while active: nothing commands the robot; "
                                    "deactivating (activate again to start a new one)")
            threading.Thread(target=self._deactivate_after_death, daemon=True).start()

    def _deactivate_after_death(self):
        try:
            self.trigger_deactivate()
        finally:
            self._leaving = False

    @callback_guard
    def _on_diagnostics(self):
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [self.diagnostics()]
        with self._lock:                # _teardown destroys the publisher
            if self._diagnostics_pub is not None:
                self._diagnostics_pub.publish(arr)
        self._check_command_process()   # (after the report: leaving active ends the diagnostics)
