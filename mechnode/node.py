"""The mechnode managed (lifecycle) node: exact linearization and TV-LQR tracking over ROS 2.

Lifecycle
---------
* ``configure``: loads the model (parameter ``model``: a YAML file, absolute, relative to the
  working directory or to the repository's ``config/``; or ``python:module.function(args)``),
  builds the variational integrator at ``dt``, checks ``joint_map`` and the weights against the
  model and warms up every numba kernel (compiles them on a cold cache: minutes; loads them
  from the cache otherwise).
* ``activate``: creates the subscriptions (JointState, JointTrajectory reference), publishers
  (command, GainSchedule, diagnostics, optional command echo) and timers (watchdog,
  diagnostics). ``deactivate`` destroys them and drops the active schedule; ``cleanup`` drops
  the model. The services (``~/linearize``, ``~/compute_gains``, ``~/plan_trajectory``,
  ``~/get_model``) exist from start-up and answer ``success: false`` while unconfigured.

Data flow when active
---------------------
* ``JointTrajectory`` on ``reference_topic`` (reliable, transient local): mapped by joint name,
  resampled onto ``dt``, made dynamically feasible, linearized, Riccati pass
  (:mod:`mechnode.schedule`) in its own callback group — so on another executor thread than
  the state callback, with the numba kernels running without the GIL — then swapped in
  atomically and published as a ``GainSchedule`` on ``schedule_topic`` (reliable, transient
  local). ``header.stamp`` of the reference is the start time (time of its knot ``t = 0``);
  zero means "as soon as the schedule is ready" (the GainSchedule's stamp says when).
* ``JointState`` on ``state_topic`` (sensor-data QoS), mapped by joint name — on a thread of its
  own (a helper node ``<name>_control`` spun by a single-threaded executor that holds only the
  state subscription, the command publisher and the watchdog timer: rclpy's multi-threaded
  executor over all of this node's entities cannot keep up with 1 kHz): the state
  ``x = [q, p = M(q) qdot, v]`` (exact Legendre transform) and the command
  ``u = u_ref[k] - K[k] (x - x_ref[k])`` at the knot nearest to the message's stamp (its
  receipt time if the stamp is zero) are computed in one numba call and published as
  ``std_msgs/Float64MultiArray`` on ``command_topic`` — what a ros2_control
  forward_command_controller (effort interfaces) accepts. ``command_mode``: ``effort`` sends
  the force inputs (``GetModel.input_names`` that are forces, in that order), ``full`` the whole
  integrator input (force inputs, then the next values of the kinematic variables). After the
  last knot the node keeps holding the final state with the last gains.
* Watchdog: when no valid JointState arrived for ``state_timeout`` seconds while commanding,
  the node stops commanding, after sending once either zeros (``timeout_action: zero``) or
  the last command computed from a valid state (``hold``), and logs a warning; it resumes with
  the next valid state. ``diagnostic_msgs/DiagnosticArray`` on ``diagnostics_topic`` reports
  state age, schedule time remaining, computation times and counters.

Bad input (wrong-sized/NaN/unknown-joint JointState, empty or non-monotonic trajectories,
wrong-sized service requests, singular linearizations) is rejected with a logged warning or a
``success: false`` response naming the reason; no callback lets an exception escape.
"""
from __future__ import annotations

import functools
import threading
import time
import traceback
from collections import deque

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.exceptions import ParameterUninitializedException
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

import core
from mechnode_interfaces.msg import GainSchedule
from mechnode_interfaces.srv import ComputeGains, GetModel, Linearize, PlanTrajectory

from . import conversions as cv
from .plant import DEFAULT_MODEL, ModelSpecError, Plant, check_model_spec
from .errors import InputError
from .feasibility import make_feasible
from .gains import STATE_Q_P, STATE_Q_QDOT, gain_schedule, schedule_in_qdot
from .joint_map import JointMap
from .schedule import Options, schedule_from_reference
from .weights import Weights, check_weight_values


NODE_NAME = "mechnode"

LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
COMMAND_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)

COMMAND_MODES = ("effort", "full")
TIMEOUT_ACTIONS = ("zero", "hold")
FEASIBILITY_MODES = ("auto", "inverse_dynamics", "optimizer", "none")
OPTIMIZER_METHODS = ("first_order", "second_order")
TOPIC_PARAMETERS = ("state_topic", "reference_topic", "command_topic", "schedule_topic",
                    "diagnostics_topic", "command_echo_topic")
CONVENTIONS = (
    "Units SI. q follows config_names (model order). Continuous state x = [q, dq] "
    "(continuous_state_names). Discrete state (midpoint variational integrator) x = [q, p, v]: "
    "all q, the momenta p = dL/d(dq) of the dynamic variables, the velocities v of the kinematic "
    "variables (discrete_state_names). Discrete input u = [force inputs, next values of the "
    "kinematic variables] (input_names). Linearize: continuous -> (A, B) of xdot = f(x, u); "
    "discrete -> (A, B) of x_next = F(x, u) with x = [q, p, v] (v = 0 is used, it does not enter "
    "F), second_order[i, a, b] = d2 x_next_i / dz_a dz_b with z = [x, u]. GainSchedule: "
    "u = u_ref[k] - K[k] (x - x_ref[k]), knots = N + 1, the last row of u_ref and K repeats row "
    "N - 1 (the law held after the end); weights Q, R, Q_N act on x in the schedule's "
    "state_convention (parameters: on [q, p, v]). Commands on the command topic: force inputs "
    "(command_mode effort) or the whole u (full).")


class ActiveSchedule:
    """A schedule and its start time (ROS time, ns): replaced as a whole, never mutated."""
    __slots__ = ("schedule", "start_ns", "seq", "published_ns")

    def __init__(self, schedule, start_ns: int, seq: int, published_ns: int):
        self.schedule, self.start_ns, self.seq, self.published_ns = schedule, start_ns, seq, published_ns

    @property
    def end_ns(self) -> int:
        return self.start_ns + int(self.schedule.times[-1] * 1e9)


def _guard_service(method):
    """Service callbacks never raise: unexpected errors become success = false."""
    @functools.wraps(method)
    def wrapper(self, request, response):
        t0 = time.perf_counter()
        try:
            result = method(self, request, response)
        except (InputError, ValueError, core.IntegratorError, core.SingularMatrixError,
                np.linalg.LinAlgError, core.ModelError) as exc:
            response.success = False
            response.message = f"{type(exc).__name__}: {exc}"
            self._warn_limited(f"srv:{method.__name__}:{response.message[:60]}",
                               f"{method.__name__[5:]}: {response.message}")
            result = response
        except Exception as exc:  # noqa: BLE001 - the node must keep serving
            response.success = False
            response.message = f"internal error: {type(exc).__name__}: {exc}"
            self.get_logger().error(f"{method.__name__}: {response.message}\n{traceback.format_exc()}")
            result = response
        self._stats[f"{method.__name__}_s"] = time.perf_counter() - t0
        return result
    return wrapper


def _guard_callback(method):
    """Subscription/timer callbacks never raise."""
    @functools.wraps(method)
    def wrapper(self, *args):
        try:
            return method(self, *args)
        except Exception as exc:  # noqa: BLE001
            self._count("callback_errors")
            self._warn_limited(f"err:{method.__name__}:{type(exc).__name__}",
                               f"{method.__name__} failed: {type(exc).__name__}: {exc}\n"
                               f"{traceback.format_exc()}", error=True)
    return wrapper


class MechNode(LifecycleNode):
    """The managed node (see the module docstring). Spin it with a MultiThreadedExecutor."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self._lock = threading.RLock()          # configuration and I/O entities vs callbacks
        self._plant = None
        self._joint_map = None
        self._weights = None
        self._options = Options()
        self._schedule = None                   # ActiveSchedule, swapped atomically
        self._schedule_seq = 0
        self._active = False
        self._io = {}                           # publishers, subscriptions, timers when active
        self._control = None                    # (node, executor, thread) of the 1 kHz path
        self._control_node = None
        self._last_state_mono = None
        self._last_command = None
        self._commanding = False
        self._tripped = False
        self._counters = {}
        self._stats = {}
        self._warned = {}
        self._latency_us = deque(maxlen=2000)
        self._last_error = ""
        self._declare_parameters()
        # callback groups on the multi-threaded executor: references (schedule computation),
        # heavy services, quick queries, diagnostics; the state path has an executor of its own
        self._cb_reference = MutuallyExclusiveCallbackGroup()
        self._cb_compute = MutuallyExclusiveCallbackGroup()
        self._cb_query = ReentrantCallbackGroup()
        self._cb_diag = MutuallyExclusiveCallbackGroup()
        self.create_service(Linearize, "~/linearize", self._srv_linearize, callback_group=self._cb_query)
        self.create_service(GetModel, "~/get_model", self._srv_get_model, callback_group=self._cb_query)
        self.create_service(ComputeGains, "~/compute_gains", self._srv_compute_gains,
                            callback_group=self._cb_compute)
        self.create_service(PlanTrajectory, "~/plan_trajectory", self._srv_plan_trajectory,
                            callback_group=self._cb_compute)
        self.get_logger().info("mechnode started (unconfigured); services ~/linearize, "
                               "~/compute_gains, ~/plan_trajectory, ~/get_model")

    # ================================================================== parameters
    def _declare_parameters(self):
        D = ParameterDescriptor

        def rng(lo, hi):
            return [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]

        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.add_post_set_parameters_callback(self._after_set_parameters)
        self.declare_parameter("model", DEFAULT_MODEL, D(
            description="Model: YAML file (absolute, relative to the working directory or to the "
                        "repository's config/), or python:module.function(args). Read at configure.",
            additional_constraints="change only while unconfigured"))
        self.declare_parameter("dt", 0.01, D(description="Variational integrator time step [s]; "
                                             "read at configure", floating_point_range=rng(1e-5, 1.0)))
        for name, text in (("Q", "State weight on x = [q, p, v]: nx diagonal entries or nx*nx "
                                 "row-major; unset = identity"),
                           ("R", "Input weight: nu diagonal entries or nu*nu; unset = identity"),
                           ("Q_N", "Terminal state weight (as Q); unset = DARE solution at the "
                                   "last step")):
            self.declare_parameter(name, Parameter.Type.DOUBLE_ARRAY, D(description=text))
        self.declare_parameter("joint_map", Parameter.Type.STRING_ARRAY, D(
            description="'model_variable:joint_name' entries; unmapped variables use their own "
                        "name. Read at configure."))
        for name, default, text in (
                ("state_topic", "joint_states", "sensor_msgs/JointState input (sensor-data QoS)"),
                ("reference_topic", "~/reference", "trajectory_msgs/JointTrajectory references "
                                                   "(reliable, transient local)"),
                ("command_topic", "effort_controller/commands", "std_msgs/Float64MultiArray "
                                                                "commands"),
                ("schedule_topic", "~/gain_schedule", "mechnode_interfaces/GainSchedule "
                                                      "(reliable, transient local)"),
                ("diagnostics_topic", "/diagnostics", "diagnostic_msgs/DiagnosticArray"),
                ("command_echo_topic", "", "optional sensor_msgs/JointState echo of every command "
                                           "(effort = u, stamp = the state's stamp); empty = off")):
            self.declare_parameter(name, default, D(description=text + "; applied at activate"))
        self.declare_parameter("state_timeout", 0.5, D(
            description="Watchdog: seconds without a valid JointState before commanding stops",
            floating_point_range=rng(1e-3, 3600.0)))
        self.declare_parameter("timeout_action", "zero", D(
            description="On state timeout send once 'zero' (zeros) or 'hold' (last command), "
                        "then stop commanding", additional_constraints="zero | hold"))
        self.declare_parameter("command_mode", "effort", D(
            description="'effort': publish the force inputs u (forward_command_controller with "
                        "effort interfaces); 'full': the whole integrator input",
            additional_constraints="effort | full"))
        self.declare_parameter("feasibility", "auto", D(
            description="How references are made dynamically feasible: auto | inverse_dynamics | "
                        "optimizer | none"))
        self.declare_parameter("optimizer_method", "first_order", D(
            description="core.optimize_trajectory method: first_order | second_order"))
        self.declare_parameter("optimizer_max_iterations", 10, D(
            description="Iteration cap of the trajectory optimizer (0 = closed-loop rollout only)",
            integer_range=[IntegerRange(from_value=0, to_value=10000, step=1)]))
        self.declare_parameter("optimizer_tolerance", 1e-6, D(
            description="Optimizer stopping tolerance on |dJ along the descent direction| "
                        "(core.optimize_trajectory, stop='slope')",
            floating_point_range=rng(1e-15, 1e6)))
        self.declare_parameter("max_knots", 20000, D(
            description="Longest accepted reference, in knots",
            integer_range=[IntegerRange(from_value=2, to_value=10_000_000, step=1)]))
        self.declare_parameter("diagnostics_period", 1.0, D(
            description="Seconds between diagnostics; applied at activate",
            floating_point_range=rng(0.01, 3600.0)))
        self.declare_parameter("warm_up", True, D(description="Run every numba kernel at configure"))
        self.declare_parameter("autostart", False, D(
            description="Configure and activate at start-up (read by the mechnode command)"))
        for name in ("command_mode", "state_timeout", "timeout_action"):
            setattr(self, "_p_" + name, self._value(name))

    def _value(self, name):
        """The parameter's value; None for a typed parameter that was never set."""
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:
            return None

    def _after_set_parameters(self, params):
        """Keep the values the 1 kHz path reads in plain attributes."""
        for p in params:
            if p.name in ("command_mode", "state_timeout", "timeout_action"):
                setattr(self, "_p_" + p.name, p.value)

    def _on_set_parameters(self, params):
        try:
            for p in params:
                self._check_parameter(p.name, p.value)
        except (InputError, ModelSpecError, ValueError, TypeError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _check_parameter(self, name, value):
        configured = self._plant is not None
        if name in ("model", "dt", "joint_map") and configured:
            raise InputError(f"{name} can only change while unconfigured (cleanup first)")
        if name in TOPIC_PARAMETERS and self._active:
            raise InputError(f"{name} can only change while inactive (deactivate first)")
        if name == "model":
            check_model_spec(value)
        elif name == "joint_map" and value is not None:
            JointMap.parse(value)
        elif name in ("Q", "R", "Q_N") and value is not None:
            check_weight_values(value, name, allow_empty=True)
            if configured:
                self._weights_from(**{name: value})
        elif name in ("state_topic", "reference_topic", "command_topic", "schedule_topic"):
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{name} must be a non-empty topic name")
        elif name == "timeout_action" and value not in TIMEOUT_ACTIONS:
            raise InputError(f"timeout_action must be one of {TIMEOUT_ACTIONS}, got {value!r}")
        elif name == "command_mode" and value not in COMMAND_MODES:
            raise InputError(f"command_mode must be one of {COMMAND_MODES}, got {value!r}")
        elif name == "feasibility" and value not in FEASIBILITY_MODES:
            raise InputError(f"feasibility must be one of {FEASIBILITY_MODES}, got {value!r}")
        elif name == "optimizer_method" and value not in OPTIMIZER_METHODS:
            raise InputError(f"optimizer_method must be one of {OPTIMIZER_METHODS}, got {value!r}")

    def _weights_from(self, plant=None, **override) -> Weights:
        plant = plant or self._plant
        vals = {n: override.get(n, self._value(n)) for n in ("Q", "R", "Q_N")}
        Q = vals["Q"] if vals["Q"] is not None and len(vals["Q"]) else np.ones(plant.nx)
        R = vals["R"] if vals["R"] is not None and len(vals["R"]) else np.ones(plant.nu)
        Q_N = vals["Q_N"] if vals["Q_N"] is not None else ()
        return Weights.from_values(plant, Q, R, Q_N)

    def _current_weights(self) -> Weights:
        try:
            return self._weights_from()
        except InputError:
            return self._weights

    def _options_now(self) -> Options:
        return Options(feasibility=self._value("feasibility"),
                       optimizer_method=self._value("optimizer_method"),
                       optimizer_tolerance=float(self._value("optimizer_tolerance")),
                       optimizer_max_iterations=int(self._value("optimizer_max_iterations")),
                       max_knots=int(self._value("max_knots")))

    # ================================================================== lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        log = self.get_logger()
        t0 = time.perf_counter()
        spec, dt = self._value("model"), float(self._value("dt"))
        try:
            plant = Plant.load(spec, dt)
            joint_map = JointMap(plant.config_names, self._value("joint_map") or ())
            weights = self._weights_from(plant)
            options = self._options_now()
            t1 = time.perf_counter()
            if self._value("warm_up"):
                plant.warm_up()
        except Exception as exc:  # noqa: BLE001 - any failure is a failed transition
            log.error(f"configure failed: {type(exc).__name__}: {exc}")
            self._last_error = f"configure: {exc}"
            return TransitionCallbackReturn.FAILURE
        t2 = time.perf_counter()
        with self._lock:
            self._plant, self._joint_map, self._weights, self._options = plant, joint_map, weights, options
        self._stats.update(load_s=t1 - t0, warm_up_s=t2 - t1)
        log.info(f"configured: model {spec!r} ({plant.system.name}: q = {plant.config_names}, "
                 f"joints {joint_map.joint_names}, inputs {plant.input_names}, {plant.actuation}), "
                 f"dt = {plant.dt} s; load {t1 - t0:.2f} s, warm-up {t2 - t1:.2f} s")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            with self._lock:
                io = {}
                io["schedule"] = self.create_publisher(GainSchedule, self._value("schedule_topic"), LATCHED)
                io["diagnostics"] = self.create_publisher(DiagnosticArray,
                                                          self._value("diagnostics_topic"), 10)
                io["diag_timer"] = self.create_timer(float(self._value("diagnostics_period")),
                                                     self._on_diagnostics, callback_group=self._cb_diag)
                self._start_control(io)
                self._io = io
                self._active = True
                self._last_state_mono = None
                self._tripped = False
                self._commanding = False
                # subscriptions last: their callbacks may run as soon as they exist
                io["state_sub"] = self._control_node.create_subscription(
                    JointState, self.resolve_topic_name(self._value("state_topic")), self._on_joint_state,
                    qos_profile_sensor_data)
                io["reference_sub"] = self.create_subscription(
                    JointTrajectory, self._value("reference_topic"), self._on_reference, LATCHED,
                    callback_group=self._cb_reference)
        except Exception as exc:  # noqa: BLE001
            self.get_logger().error(f"activate failed: {type(exc).__name__}: {exc}")
            self._teardown_io()
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(
            f"active: state {io['state_sub'].topic_name}, reference {io['reference_sub'].topic_name}, "
            f"command {io['command'].topic_name} ({self._value('command_mode')}), schedule "
            f"{io['schedule'].topic_name}")
        return super().on_activate(state)

    def _start_control(self, io):
        """The 1 kHz path (JointState -> command, watchdog) gets a node and a single-threaded
        executor of its own, spun in a dedicated thread: its wait set holds a subscription and a
        timer instead of every service, timer and subscription of this node, which is what makes
        rclpy keep up with a 1 kHz state stream. Topic names are resolved (expanded, remapped)
        by this node, so ``~/...`` names and remappings mean what they mean for mechnode."""
        from rclpy.executors import SingleThreadedExecutor
        ctl = rclpy.create_node(f"{self.get_name()}_control", namespace=self.get_namespace(),
                                context=self.context, use_global_arguments=False,
                                start_parameter_services=False, enable_rosout=False)
        self._control_node = ctl
        io["command"] = ctl.create_publisher(Float64MultiArray,
                                             self.resolve_topic_name(self._value("command_topic")),
                                             COMMAND_QOS)
        echo = self._value("command_echo_topic")
        if echo:
            io["echo"] = ctl.create_publisher(JointState, self.resolve_topic_name(echo),
                                              qos_profile_sensor_data)
        timeout = float(self._value("state_timeout"))
        io["watchdog"] = ctl.create_timer(min(max(timeout / 4, 0.005), 0.25), self._on_watchdog)
        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(ctl)
        thread = threading.Thread(target=self._spin_control, args=(executor,), daemon=True,
                                  name="mechnode_control")
        self._control = (ctl, executor, thread)
        thread.start()

    def _spin_control(self, executor):
        try:
            executor.spin()
        except Exception as exc:  # noqa: BLE001 - context shut down under us
            if self.context.ok():
                self.get_logger().error(f"control executor stopped: {type(exc).__name__}: {exc}")

    def _stop_control(self):
        control, self._control = getattr(self, "_control", None), None
        if control is None:
            return
        ctl, executor, thread = control
        executor.shutdown(timeout_sec=2.0)
        if thread is not threading.current_thread():
            thread.join(timeout=2.0)
        try:
            ctl.destroy_node()
        except Exception:  # noqa: BLE001
            pass
        self._control_node = None

    def _teardown_io(self):
        with self._lock:
            self._active = False
            io, self._io = self._io, {}
            self._schedule = None
            for key in ("reference_sub", "diag_timer", "schedule", "diagnostics"):
                ent = io.get(key)
                if ent is None:
                    continue
                try:
                    if key.endswith("_sub"):
                        self.destroy_subscription(ent)
                    elif key == "diag_timer":
                        self.destroy_timer(ent)
                    else:
                        self.destroy_publisher(ent)
                except Exception:  # noqa: BLE001
                    pass
        self._stop_control()   # destroys the state subscription, command publishers, watchdog

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown_io()
        self.get_logger().info("deactivated: subscriptions, publishers and timers removed, "
                               "schedule dropped")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown_io()
        with self._lock:
            self._plant = self._joint_map = self._weights = None
        self.get_logger().info("cleaned up: model unloaded")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown_io()
        with self._lock:
            self._plant = self._joint_map = self._weights = None
        self.get_logger().info("shut down")
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown_io()
        with self._lock:
            self._plant = self._joint_map = self._weights = None
        self.get_logger().error("error processing: back to unconfigured")
        return TransitionCallbackReturn.SUCCESS

    def destroy_node(self):
        self._teardown_io()
        return super().destroy_node()

    @property
    def lifecycle_label(self) -> str:
        return self._state_machine.current_state[1]

    # ================================================================== helpers
    def _count(self, key, n=1):
        self._counters[key] = self._counters.get(key, 0) + n

    def _warn_limited(self, key, text, period=2.0, error=False):
        """Log ``text`` at most once per ``period`` seconds per ``key``."""
        now = time.monotonic()
        last = self._warned.get(key)
        if last is not None and now - last < period:
            return
        if len(self._warned) > 256:
            self._warned.clear()
        self._warned[key] = now
        (self.get_logger().error if error else self.get_logger().warning)(text)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _publish(self, key, msg) -> bool:
        """Publish on one of this node's publishers (under the lock: teardown destroys them)."""
        with self._lock:
            pub = self._io.get(key)
            if pub is None or not self._active:
                return False
            pub.publish(msg)
            return True

    def _publish_control(self, key, msg) -> bool:
        """Publish on a publisher of the control node, from the control thread only: no lock,
        since teardown joins the control thread before it destroys that node."""
        pub = self._io.get(key)
        if pub is None or not self._active:
            return False
        pub.publish(msg)
        return True

    # ================================================================== state -> command
    @_guard_callback
    def _on_joint_state(self, msg: JointState):
        t_cb = time.perf_counter()
        plant, jm = self._plant, self._joint_map
        if plant is None or not self._active:
            return
        try:
            q, dq, unknown = jm.state(msg.name, msg.position, msg.velocity)
        except InputError as exc:
            self._count("states_rejected")
            self._last_error = f"JointState rejected: {exc}"
            self._warn_limited("state:" + str(exc)[:60], f"JointState rejected: {exc}")
            return
        if unknown:
            self._warn_limited("unknown:" + ",".join(unknown), f"JointState: ignoring joint(s) "
                               f"unknown to the model: {list(unknown)}", period=60.0)
        self._last_state_mono = time.monotonic()
        self._count("states")
        if self._tripped:
            self._tripped = False
            self.get_logger().info("JointState messages resumed: commanding again")
        active = self._schedule
        if active is None:
            return
        t_ns = cv.stamp_ns(msg.header.stamp) or self._now_ns()
        sched = active.schedule
        k = sched.knot((t_ns - active.start_ns) * 1e-9)
        u, _ = plant.control(q, dq, sched.x_ref[k], sched.u_ref[k], sched.K[k])
        if u is None:
            self._count("commands_not_finite")
            self._warn_limited("u_nan", "the control law gave a non-finite command; not sent")
            return
        cmd = u[:plant.m] if self._p_command_mode == "effort" else u
        if self._publish_control("command", cv.command_msg(cmd)):
            self._last_command = cmd
            self._commanding = True
            self._count("commands")
            if "echo" in self._io:
                self._publish_control("echo", cv.joint_state(list(plant.input_names[:cmd.size]), None, None,
                                                     cv.stamp_ns(msg.header.stamp), effort=cmd))
        self._latency_us.append(1e6 * (time.perf_counter() - t_cb))

    @_guard_callback
    def _on_watchdog(self):
        if not self._active or not self._commanding or self._last_state_mono is None:
            return
        timeout = float(self._p_state_timeout)
        age = time.monotonic() - self._last_state_mono
        if age <= timeout:
            return
        action = self._p_timeout_action
        plant = self._plant
        m = plant.m if self._p_command_mode == "effort" else plant.nu
        hold = (np.zeros(m) if action == "zero" or self._last_command is None
                or self._last_command.size != m else self._last_command)
        self._publish_control("command", cv.command_msg(hold))
        self._commanding = False
        self._tripped = True
        self._count("watchdog_trips")
        self._last_error = f"state timeout after {age:.3f} s"
        self.get_logger().warning(
            f"watchdog: no valid JointState for {age:.3f} s (state_timeout {timeout} s): stopped "
            f"commanding after sending {'zeros' if action == 'zero' else 'the last command'} "
            f"{np.round(hold, 6).tolist()}")

    # ================================================================== reference -> schedule
    @_guard_callback
    def _on_reference(self, msg: JointTrajectory):
        t_recv = time.perf_counter()
        with self._lock:
            plant, jm, active = self._plant, self._joint_map, self._active
        if plant is None or not active:
            return
        weights, options = self._current_weights(), self._options_now()
        try:
            names, times, pos, vel = cv.trajectory_arrays(msg)
            ref = jm.reference(names, times, pos, vel)
            sched = schedule_from_reference(plant, jm, ref, weights, options)
        except (InputError, core.IntegratorError, core.SingularMatrixError, np.linalg.LinAlgError,
                ValueError) as exc:
            self._count("references_rejected")
            self._last_error = f"reference rejected: {type(exc).__name__}: {exc}"
            self.get_logger().warning(f"reference rejected ({type(exc).__name__}): {exc}; "
                                      "keeping the current schedule")
            return
        stamp = cv.stamp_ns(msg.header.stamp)
        now = self._now_ns()
        start = stamp if stamp else now
        with self._lock:
            if not self._active:
                return
            self._schedule_seq += 1
            new = ActiveSchedule(sched, start, self._schedule_seq, now)
            self._schedule = new                            # the atomic swap
            self._publish("schedule", cv.schedule_to_msg(sched, start))
        total = time.perf_counter() - t_recv
        self._count("schedules")
        info = sched.info
        self._stats.update(reference_to_schedule_s=total, **{k: v for k, v in info.items()
                                                              if k.endswith("_s")})
        self._stats["feasibility"] = info.get("feasibility", "")
        if ref.ignored_joints:
            self.get_logger().warning(f"reference: ignored joint(s) unknown to the model "
                                      f"{list(ref.ignored_joints)}")
        late = (now - new.end_ns) * 1e-9
        self.get_logger().info(
            f"schedule #{new.seq} published: {sched.knots} knots over {sched.duration:.3f} s, "
            f"feasibility {info['feasibility']} {info.get('feasibility_message', '')}; "
            f"{total * 1e3:.1f} ms (resample {info['resample_s'] * 1e3:.1f}, feasibility "
            f"{info['feasibility_s'] * 1e3:.1f}, linearization {info['linearization_s'] * 1e3:.1f}, "
            f"Riccati {info['riccati_s'] * 1e3:.1f} ms)"
            + (f"; NOTE: it ended {late:.3f} s ago, holding its final state" if late > 0 else ""))

    # ================================================================== diagnostics
    def diagnostics(self) -> DiagnosticStatus:
        st = DiagnosticStatus()
        st.name = f"{self.get_name()}: tracking controller"
        plant = self._plant
        st.hardware_id = plant.system.name if plant is not None else ""
        now_mono, now_ns = time.monotonic(), self._now_ns()
        age = None if self._last_state_mono is None else now_mono - self._last_state_mono
        active = self._schedule
        remaining = None if active is None else max(0.0, (active.end_ns - now_ns) * 1e-9)
        lat = np.asarray(self._latency_us) if self._latency_us else None
        values = {
            "lifecycle_state": self.lifecycle_label,
            "state_age_s": "none" if age is None else f"{age:.4f}",
            "schedule_active": str(active is not None),
            "schedule_time_remaining_s": "none" if remaining is None else f"{remaining:.4f}",
            "schedule_knots": "0" if active is None else str(active.schedule.knots),
            "watchdog_tripped": str(self._tripped),
            "command_latency_median_us": "none" if lat is None else f"{np.median(lat):.1f}",
            "command_latency_p99_us": "none" if lat is None else f"{np.percentile(lat, 99):.1f}",
            "last_error": self._last_error,
        }
        for key, val in sorted(self._stats.items()):
            values["last_" + key] = f"{val:.6f}" if isinstance(val, float) else str(val)
        for key, val in sorted(self._counters.items()):
            values[key] = str(val)
        st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        if plant is None:
            st.level, st.message = DiagnosticStatus.WARN, "unconfigured"
        elif not self._active:
            st.level, st.message = DiagnosticStatus.OK, "inactive"
        elif self._tripped:
            st.level, st.message = DiagnosticStatus.ERROR, (
                f"state timeout: no JointState for {age:.2f} s, not commanding")
        elif active is None:
            st.level, st.message = DiagnosticStatus.OK, "active, waiting for a reference"
        elif age is None:
            st.level, st.message = DiagnosticStatus.WARN, "schedule active, waiting for JointState"
        else:
            st.level, st.message = DiagnosticStatus.OK, (
                f"tracking schedule #{active.seq}, {remaining:.2f} s remaining")
        return st

    @_guard_callback
    def _on_diagnostics(self):
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [self.diagnostics()]
        self._publish("diagnostics", arr)

    # ================================================================== services
    def _need_plant(self):
        plant = self._plant
        if plant is None:
            raise InputError(f"the node is {self.lifecycle_label}: configure it first (no model loaded)")
        return plant

    def _plant_for_dt(self, dt: float):
        plant = self._need_plant()
        if dt == 0:
            return plant
        if not (np.isfinite(dt) and 0 < dt <= 1.0):
            raise InputError(f"dt must be 0 (node default) or in (0, 1] s, got {dt}")
        return plant.with_dt(dt)

    @_guard_service
    def _srv_get_model(self, request, response):
        plant = self._need_plant()
        response.success = True
        response.message = f"{plant.system.name} from {plant.source}: {plant.actuation}"
        response.config_names = list(plant.config_names)
        response.dynamic_config_names = list(plant.dynamic_names)
        response.kinematic_config_names = list(plant.kinematic_names)
        response.input_names = list(plant.input_names)
        response.continuous_state_names = list(plant.continuous_state_names)
        response.discrete_state_names = list(plant.state_names)
        response.dt = plant.dt
        joints = self._joint_map.joint_names if self._joint_map else plant.config_names
        response.conventions = (CONVENTIONS + f" JointState/JointTrajectory joint names: "
                                f"{dict(zip(plant.config_names, joints))}. Force inputs (command_mode "
                                f"effort): {plant.force_input_names}.")
        return response

    @_guard_service
    def _srv_linearize(self, request, response):
        plant = self._need_plant()
        order = int(request.order) or 1
        if order not in (1, 2):
            raise InputError(f"order must be 1 or 2, got {request.order}")
        q = cv.as_vector(request.q, "q", plant.n)
        if request.discrete:
            if request.minimal:
                raise InputError("minimal coordinates are available for continuous "
                                 "linearizations only (discrete = false)")
            p = cv.as_vector(request.p, "p", plant.nd)
            u = cv.as_vector(request.u, "u", plant.nu)
            x = np.concatenate([q, p, np.zeros(plant.nk)])
            if order == 2:
                A, B, H = plant.linearize(x, u, second=True)
                response.second_order = cv.tensor_msg(H)
            else:
                A, B = plant.linearize(x, u)
            f = plant.step(x, u)
            state_names, input_names = plant.state_names, plant.input_names
        else:
            if order == 2:
                raise InputError("second-order derivatives are available for discrete "
                                 "linearizations only (discrete = true)")
            system = plant.system
            dq = cv.as_vector(request.dq, "dq", plant.n)
            u = cv.as_vector(request.u, "u", system.nu)
            state_names = plant.continuous_state_names
            if request.minimal and plant.model.nh + plant.model.nv > 0:
                A, B, info = self._minimal(system, q, dq, u, list(request.independent))
                state_names = info.state_names
                response.message = (f"minimal coordinates: independent {list(info.state_names)}, "
                                    f"condition {info.condition_coordinates:.3g}/"
                                    f"{info.condition_speeds:.3g}")
            else:
                A, B = system.linearize(q, dq, u)
                if request.minimal:
                    response.message = "unconstrained system: all coordinates are independent"
            f = np.concatenate([dq, system.qdd(q, dq, u)])
            input_names = system.input_names
        response.a, response.b = cv.matrix_msg(A), cv.matrix_msg(B)
        response.f = cv.float_array(f)
        response.state_names, response.input_names = list(state_names), list(input_names)
        response.success = True
        return response

    @staticmethod
    def _minimal(system, q, dq, u, independent):
        try:
            from core.minimal import linearize_minimal
        except ImportError as exc:
            raise InputError("minimal coordinates need core.minimal, which this installation "
                             "lacks") from exc
        return linearize_minimal(system, q, dq, u, independent=independent or None)

    def _request_weights(self, plant, q, r, q_n, convention=STATE_Q_P) -> Weights:
        """Weights of a service request; empty matrices = the node's parameters (on [q, p, v],
        so with STATE_Q_QDOT q must be given)."""
        nx, nu = plant.nx, plant.nu
        Q = cv.matrix_from_msg(q, "q", (nx, nx), allow_empty=True)
        R = cv.matrix_from_msg(r, "r", (nu, nu), allow_empty=True)
        QN = cv.matrix_from_msg(q_n, "q_n", (nx, nx), allow_empty=True)
        base = self._current_weights()
        if Q is None:
            if convention == STATE_Q_QDOT:
                raise InputError("q must be given with state_convention STATE_Q_QDOT (the node's "
                                 "weights act on [q, p, v])")
            Q = base.Q
            QN = base.Q_N if QN is None else QN
        R = base.R if R is None else R
        return Weights.from_values(plant, Q.ravel(), R.ravel(), () if QN is None else QN.ravel())

    @_guard_service
    def _srv_compute_gains(self, request, response):
        plant = self._plant_for_dt(float(request.dt))
        conv = int(request.state_convention)
        if conv not in (STATE_Q_P, STATE_Q_QDOT):
            raise InputError(f"state_convention must be 0 (STATE_Q_P) or 1 (STATE_Q_QDOT), got {conv}")
        X = cv.matrix_from_msg(request.x_ref, "x_ref")
        knots, width = X.shape
        if knots < 2:
            raise InputError(f"x_ref needs at least 2 knots, got {knots}")
        jnames = self._joint_map.joint_names if self._joint_map else plant.config_names
        U = cv.matrix_from_msg(request.u_ref, "u_ref", (knots - 1, plant.nu), allow_empty=True)
        if width == plant.n:  # positions only: complete the state, make it feasible
            weights = self._request_weights(plant, request.q, request.r, request.q_n)
            dq0 = (X[1] - X[0]) / plant.dt
            opts = self._options_now()
            feas = make_feasible(plant, X, dq0, weights, opts.feasibility, opts.optimizer_method,
                                 opts.optimizer_tolerance, opts.optimizer_max_iterations,
                                 opts.feasibility_tolerance)
            sched = gain_schedule(plant, feas.X, feas.U, weights, jnames)
            response.message = (f"positions only: state completed by the discrete Legendre "
                                f"transform, feasibility {feas.method} {feas.message}".strip())
            if conv == STATE_Q_QDOT:
                response.message += "; schedule in STATE_Q_P (positions-only requests)"
        elif width == plant.nx:
            U = np.zeros((knots - 1, plant.nu)) if U is None else U
            weights = self._request_weights(plant, request.q, request.r, request.q_n, conv)
            if conv == STATE_Q_P:
                sched = gain_schedule(plant, X, U, weights, jnames)
            else:
                sched = schedule_in_qdot(plant, X, U, weights, jnames)
        else:
            raise InputError(f"x_ref must have {plant.nx} columns (state) or {plant.n} (positions "
                             f"only), got {width}")
        response.schedule = cv.schedule_to_msg(sched, 0)
        response.success = True
        return response

    @_guard_service
    def _srv_plan_trajectory(self, request, response):
        plant = self._plant_for_dt(float(request.dt))
        X = cv.matrix_from_msg(request.x_ref, "x_ref", (None, plant.nx))
        knots = X.shape[0]
        if knots < 2:
            raise InputError(f"x_ref needs at least 2 knots, got {knots}")
        U = cv.matrix_from_msg(request.u_ref, "u_ref", (knots - 1, plant.nu), allow_empty=True)
        U = np.zeros((knots - 1, plant.nu)) if U is None else U
        x0 = cv.as_vector(request.x0, "x0", plant.nx) if len(request.x0) else X[0]
        if not np.all(np.isfinite(x0)):
            raise InputError("x0 has non-finite entries")
        weights = self._request_weights(plant, request.q, request.r, request.q_n)
        method = {0: self._value("optimizer_method"), 1: "first_order", 2: "second_order"}.get(int(request.method))
        if method is None:
            raise InputError(f"method must be 0 (node default), 1 (FIRST_ORDER) or 2 (SECOND_ORDER), "
                             f"got {request.method}")
        iters = int(request.max_iterations) or int(self._value("optimizer_max_iterations"))
        tol = float(request.tolerance) or float(self._value("optimizer_tolerance"))
        QN = weights.Q_N if weights.Q_N is not None else weights.Q
        result = core.optimize_trajectory(plant.discrete_system(), x0, X, U, weights.Q, weights.R, QN,
                                          method=method, tol=tol, max_iterations=iters)
        jnames = self._joint_map.joint_names if self._joint_map else plant.config_names
        sched = gain_schedule(plant, result.x, result.u, weights, jnames)
        response.x, response.u = cv.matrix_msg(result.x), cv.matrix_msg(result.u)
        response.cost, response.iterations = float(result.cost), int(result.iterations)
        response.schedule = cv.schedule_to_msg(sched, 0)
        # every iterate is a rollout of the integrator: a usable, feasible trajectory even when
        # the iteration cap stops the optimizer before its tolerance
        response.success = True
        response.message = (f"{method}: {'converged' if result.converged else 'not converged'} "
                            f"after {result.iterations} iterations ({result.message})")
        return response
