"""The node's parameters: declaration (names, defaults, descriptors), validation when they are
set, and the typed values the rest of the node reads.

When they take effect: ``model``, ``dt`` and ``joint_map`` are read at configure and can only
change while unconfigured; the topic names and the safety limits (state bounds, command limits,
stamp checks, ``state_timeout``) are applied at activate and can only change while inactive;
``command_mode`` and ``timeout_action`` apply from the next state message; the weights and the
feasibility/optimizer settings from the next reference or request; the re-planning settings
(``replan_period``, ``replan_horizon``, ``replan_step``) at activate.

Numbers as users write them: every double parameter (and double array: ``Q``, ``R``, ``Q_N``,
the state and command limits) also takes integers (``Q: [10000, 1]``, ``dt: 1``), from a
parameter file or set at run time; they are stored and read as doubles. A value of the wrong
kind (a string where a number is meant) is refused naming the parameter and the value.

A value in the parameter file that is refused does not stop the node: the parameter keeps its
default, one log line names it with the value and the reason, and ``configure`` fails (one line)
until the parameter is set to a valid value (``ros2 param set``, ``SetParameters``).

``lock_parameters`` (launch time only, itself read-only): when true, every parameter of
:data:`LOCKABLE_PARAMETERS` is declared read-only, so nothing can change it at run time (its
value comes from the parameter file or ``-p`` overrides).
"""
from __future__ import annotations

import copy

import numpy as np
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.parameter import Parameter

from mechnode.errors import InputError
from mechnode.logic.joint_map import JointMap
from mechnode.logic.legged import parse_contacts
from mechnode.logic.limits import (
    DEFAULT_COMMAND_LIMIT,
    DEFAULT_POSITION_LIMIT,
    DEFAULT_STAMP_TOLERANCE,
    DEFAULT_VELOCITY_LIMIT,
    Limits,
    limit_values,
)
from mechnode.logic.plant import DEFAULT_MODEL, MAX_MODEL_BYTES, ModelSpecError, check_model_spec, parse_locked_joints
from mechnode.logic.schedule import Options
from mechnode.logic.weights import Weights, check_weight_values

COMMAND_MODES = ("effort", "full")
TIMEOUT_ACTIONS = ("zero", "hold")
IDLE_ACTIONS = ("hold", "balance", "none")
FLOATING_BASES = ("none", "quaternion")
FEASIBILITY_MODES = ("auto", "inverse_dynamics", "optimizer", "none")
OPTIMIZER_METHODS = ("first_order", "second_order")
CONFIGURE_PARAMETERS = ("model", "dt", "joint_map", "locked_joints", "robot_description_topic",
                        "robot_description_timeout", "max_model_variables", "use_sim_time",
                        "floating_base", "contacts")
TOPIC_PARAMETERS = ("state_topic", "reference_topic", "command_topic", "schedule_topic",
                    "diagnostics_topic", "command_echo_topic", "lfc_topic", "odometry_topic",
                    "odometry_frame", "base_frame")
REQUIRED_TOPICS = ("state_topic", "reference_topic", "command_topic", "schedule_topic")
LIMIT_PARAMETERS = ("state_position_limit", "state_velocity_limit", "command_limit",
                    "stamp_tolerance", "accept_unstamped", "state_timeout")
#: bounds on the work a message or request can cause (they may change while active)
WORK_LIMIT_PARAMETERS = ("max_knots", "max_reference_points", "optimizer_time_limit", "max_request_iterations")
#: read-only when the node is started with lock_parameters: true
LOCKABLE_PARAMETERS = CONFIGURE_PARAMETERS + TOPIC_PARAMETERS + LIMIT_PARAMETERS + WORK_LIMIT_PARAMETERS
CONTROL_PARAMETERS = ("command_mode", "state_timeout", "timeout_action")  # read at 1 kHz
#: doubles (integers accepted, stored as doubles), with their ranges [lo, hi]
DOUBLE_PARAMETERS = {"robot_description_timeout": (0.1, 600.0), "dt": (1e-5, 1.0),
                     "state_timeout": (1e-3, 3600.0), "stamp_tolerance": (0.0, 10.0),
                     "optimizer_tolerance": (1e-15, 1e6), "optimizer_time_limit": (0.01, 3600.0),
                     "diagnostics_period": (0.01, 3600.0), "replan_period": (0.0, 60.0),
                     "replan_horizon": (0.0, 3600.0), "body_step": (1e-4, 1.0)}
#: double arrays (integer arrays accepted, stored as double arrays)
DOUBLE_ARRAY_PARAMETERS = ("Q", "R", "Q_N")
#: a double or a double array (integers accepted)
NUMBER_OR_ARRAY_PARAMETERS = ("state_position_limit", "state_velocity_limit", "command_limit")


def _range(name):
    lo, hi = DOUBLE_PARAMETERS[name]
    return [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def as_doubles(name, value):
    """``value`` of a double parameter (``name`` in DOUBLE_PARAMETERS, DOUBLE_ARRAY_PARAMETERS
    or NUMBER_OR_ARRAY_PARAMETERS) with integers made doubles: a float, a list of floats, or
    None (unset); raises InputError naming the parameter and the value if it is not numbers."""
    if value is None:
        return None
    scalar_ok = name not in DOUBLE_ARRAY_PARAMETERS
    array_ok = name not in DOUBLE_PARAMETERS
    if scalar_ok and _is_number(value):
        return float(value)
    if array_ok and not isinstance(value, (str, bytes)) and hasattr(value, "__len__") \
            and all(_is_number(x) for x in value):
        return [float(x) for x in value]
    kind = ("a number" if not array_ok else "a list of numbers" if not scalar_ok
            else "a number or a list of numbers")
    raise InputError(f"{name} must be {kind}, got {value!r}")


def _coerce(param: Parameter) -> Parameter:
    """An integer (array) set on a double (array) parameter, as a double (array); else as is."""
    name, v = param.name, param.value
    if name in DOUBLE_PARAMETERS or name in NUMBER_OR_ARRAY_PARAMETERS:
        if param.type_ == Parameter.Type.INTEGER:
            return Parameter(name, Parameter.Type.DOUBLE, float(v))
    if name in DOUBLE_ARRAY_PARAMETERS or name in NUMBER_OR_ARRAY_PARAMETERS:
        if param.type_ == Parameter.Type.INTEGER_ARRAY:
            return Parameter(name, Parameter.Type.DOUBLE_ARRAY, [float(x) for x in v])
    return param


def declare_parameters(node, declare=None) -> None:
    """Declare every parameter of the node with its default and descriptor; ``declare(name,
    default, descriptor)`` declares one (default: ``node.declare_parameter``)."""
    declare = declare or node.declare_parameter
    declare("lock_parameters", False, ParameterDescriptor(
        description="Launch time only: true declares the model, dt, joint_map, the topics and the "
                    "safety limits read-only (nothing can change them at run time)",
        read_only=True))
    locked = bool(node.get_parameter("lock_parameters").value)

    def D(name=None, **kwargs):
        """A descriptor; read-only for the lockable parameters when lock_parameters is true;
        dynamically typed for the double parameters (so that rclpy takes integers, which the
        parameter callbacks check and store as doubles) with their range."""
        if name in DOUBLE_PARAMETERS or name in DOUBLE_ARRAY_PARAMETERS or name in NUMBER_OR_ARRAY_PARAMETERS:
            kwargs["dynamic_typing"] = True
            kwargs.setdefault("additional_constraints", "double" if name in DOUBLE_PARAMETERS else
                              "double array" if name in DOUBLE_ARRAY_PARAMETERS else "double or double array")
        if name in DOUBLE_PARAMETERS:
            kwargs["floating_point_range"] = _range(name)
        return ParameterDescriptor(read_only=locked and name in LOCKABLE_PARAMETERS, **kwargs)

    declare("model", DEFAULT_MODEL, D(
        "model",
        description=f"Model: a YAML or URDF file (absolute, relative to the working directory, or "
                    f"the name of a model packaged with core: core/data/) or YAML or URDF model text "
                    f"(several lines, a flow mapping in braces, or XML), at most {MAX_MODEL_BYTES} "
                    f"bytes. Data only: nothing named in it is imported or run. Read at configure.",
        additional_constraints="change only while unconfigured"))
    declare("robot_description_topic", "", D(
        "robot_description_topic",
        description="If set (e.g. /robot_description), configure takes the model from this "
                    "std_msgs/String topic (URDF, as robot_state_publisher publishes it: reliable, "
                    "transient local) instead of the parameter model; at most "
                    f"{MAX_MODEL_BYTES} bytes, checked before conversion. Read at configure.",
        additional_constraints="change only while unconfigured"))
    declare("robot_description_timeout", 10.0, D(
        "robot_description_timeout",
        description="Seconds configure waits for the robot description before it fails"))
    declare("dt", 0.01, D("dt", description="Variational integrator time step [s]; "
                                         "read at configure"))
    for name, text in (("Q", "State weight on x = [q, p, v] (a floating base: [q - q_ref, v]): nx diagonal "
                             "entries or nx*nx row-major; unset = identity"),
                       ("R", "Input weight: nu diagonal entries or nu*nu; unset = identity"),
                       ("Q_N", "Terminal state weight (as Q); unset = DARE solution at the "
                               "last step")):
        declare(name, None, D(name, description=text))
    declare("joint_map", Parameter.Type.STRING_ARRAY, D(
        "joint_map", description="'model_variable:joint_name' entries; unmapped variables use their own "
                    "name. Read at configure."))
    declare("max_model_variables", 200, D(
        "max_model_variables", integer_range=[IntegerRange(from_value=1, to_value=2000, step=1)],
        description="Largest number of configuration variables a model may have: checked at configure "
                    "right after the model is read, before anything grows with its size (the "
                    "integrator's second order takes about 300 n^3 bytes). Read at configure."))
    declare("locked_joints", Parameter.Type.STRING_ARRAY, D(
        "locked_joints", description="'joint=value' entries: joints of the model frozen at these values "
                    "(a gripper left to its own driver); they leave the state and the commands, and "
                    "JointStates may omit them. Read at configure."))
    declare("floating_base", "none", D(
        "floating_base",
        description="'quaternion': the model (a URDF) gets a free-flying base (its root link), held on "
                    "the ground by the contacts; its pose and twist come from odometry_topic. 'none': "
                    "the root link is fixed. Read at configure.",
        additional_constraints="none | quaternion; change only while unconfigured"))
    declare("contacts", Parameter.Type.STRING_ARRAY, D(
        "contacts",
        description="With floating_base 'quaternion': the frames the robot stands on, 'frame' (a point "
                    "contact: a foot's sphere) or 'frame=point' / 'frame=frame' (a flat foot: its whole "
                    "pose held); required with a floating base. Read at configure.",
        additional_constraints="change only while unconfigured"))
    default: str | float            # the topics' defaults (str), then the limits' (float)
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
                                       "(effort = u, stamp = the state's stamp); empty = off"),
            ("lfc_topic", "", "optional linear_feedback_controller_msgs/Control output: the schedule "
                              "knot by knot in the form of LAAS's linear_feedback_controller "
                              "(tau = feedforward + feedback_gain ([q, qdot]_ref - [q, qdot]), one "
                              "effort per joint; reliable); empty = off"),
            ("odometry_topic", "odom", "nav_msgs/Odometry input of a floating base (sensor-data QoS): the "
                                       "pose of child_frame_id in header.frame_id and the twist in "
                                       "child_frame_id (REP 105), from the robot's state estimator; used "
                                       "with floating_base 'quaternion' only"),
            ("odometry_frame", "", "the header.frame_id an Odometry must carry (the world frame, e.g. "
                                   "odom); empty = any"),
            ("base_frame", "", "the child_frame_id an Odometry must carry; empty = the model's root "
                               "link")):
        declare(name, default, D(name, description=text + "; applied at activate"))
    declare("state_timeout", 0.5, D(
        "state_timeout",
        description="Watchdog [s]: seconds without an accepted JointState before commanding "
                    "stops; also the oldest accepted state stamp (now - stamp). Applied at activate"))
    declare("stamp_tolerance", DEFAULT_STAMP_TOLERANCE, D(
        "stamp_tolerance",
        description="JointState stamps more than this many seconds ahead of the node's clock are "
                    "refused (clock offset allowed between the sender and the node) [s]. Applied "
                    "at activate"))
    declare("accept_unstamped", False, D(
        "accept_unstamped",
        description="true: a JointState with a zero stamp is used with its receipt time; false: "
                    "refused (default). Applied at activate"))
    for name, default, text in (
            ("state_position_limit", DEFAULT_POSITION_LIMIT,
             "Largest accepted |position| of a JointState [model units: m or rad]"),
            ("state_velocity_limit", DEFAULT_VELOCITY_LIMIT,
             "Largest accepted |velocity| of a JointState [m/s or rad/s]"),
            ("command_limit", DEFAULT_COMMAND_LIMIT,
             "Commands saturate to +-limit [N or N m] per force input")):
        declare(name, float(default), D(
            name, description=f"{text}: one number for all, or one per "
                        f"{'force input' if name == 'command_limit' else 'configuration variable'} "
                        f"in the model's order (get_model); > 0 and finite. Applied at activate",
))
    declare("timeout_action", "zero", D(
        description="On state timeout send once 'zero' (zeros) or 'hold' (last command), "
                    "then stop commanding", additional_constraints="zero | hold"))
    declare("idle_action", "hold", D(
        description="While no schedule is in force (from activation to the first schedule): 'hold' "
                    "regulates about the first state measured after activation (the inputs that hold "
                    "it against gravity and the constraints, and LQR gains with Q, R there; refused "
                    "with a log line when they cannot be computed, e.g. an underactuated robot off "
                    "its equilibria); 'balance' (a floating base) holds the robot standing where it is "
                    "on its contacts (the contact-consistent LQR gain about that stance with Q, R on "
                    "[q - q_ref, v] and the holding torques); 'none' sends nothing. Read at activate",
        additional_constraints="hold | balance | none"))
    declare("idle_after_schedule", False, D(
        description="With idle_action 'hold': true switches to the hold about the last knot's "
                    "configuration once a schedule has ended; false keeps the last knot's law "
                    "(tracking the final state). Read for every new schedule"))
    declare("command_mode", "effort", D(
        description="'effort': publish the force inputs u (forward_command_controller with "
                    "effort interfaces); 'full': the whole integrator input",
        additional_constraints="effort | full"))
    declare("feasibility", "auto", D(
        description="How references are made dynamically feasible: auto | inverse_dynamics | "
                    "optimizer | none"))
    declare("optimizer_method", "first_order", D(
        description="core.optimize_trajectory method: first_order | second_order"))
    declare("optimizer_max_iterations", 10, D(
        description="Iteration cap of the trajectory optimizer (0 = closed-loop rollout only)",
        integer_range=[IntegerRange(from_value=0, to_value=10000, step=1)]))
    declare("optimizer_tolerance", 1e-6, D(
        "optimizer_tolerance", description="Optimizer stopping tolerance on |dJ along the descent direction| "
                    "(core.optimize_trajectory, stop='slope')"))
    declare("max_knots", 20000, D(
        "max_knots",
        description="Longest accepted schedule, in knots (references, compute_gains, plan_trajectory)",
        integer_range=[IntegerRange(from_value=2, to_value=10_000_000, step=1)]))
    declare("max_reference_points", 20000, D(
        "max_reference_points",
        description="Most points a JointTrajectory reference may have; a larger message is "
                    "refused from its serialized size, before it is converted",
        integer_range=[IntegerRange(from_value=2, to_value=10_000_000, step=1)]))
    declare("optimizer_time_limit", 5.0, D(
        "optimizer_time_limit",
        description="Seconds after which the trajectory optimizer (references, compute_gains, "
                    "plan_trajectory) starts no further iteration; its last iterate is used"))
    declare("max_request_iterations", 1000, D(
        "max_request_iterations",
        description="Most optimizer iterations a plan_trajectory request may ask for",
        integer_range=[IntegerRange(from_value=0, to_value=1_000_000, step=1)]))
    declare("replan_period", 0.0, D(
        "replan_period",
        description="Re-planning while a schedule is in force [s]: every period the schedule is re-planned "
                    "from the latest accepted state (the closed loop predicted from it, linearized exactly "
                    "along the prediction, the Riccati pass along it; mechnode.ros.replanner); a re-plan that "
                    "takes longer than the period is dropped and counted. 0 = off (the default), else at "
                    "least 0.001. Applied at activate; set at configure, the re-plan's kernels load "
                    "with the warm-up (else the first re-plan loads them and is dropped)"))
    declare("replan_horizon", 0.0, D(
        "replan_horizon",
        description="Seconds of the reference each re-plan covers from the measured state; 0 = the rest "
                    "of the reference. Applied at activate"))
    declare("replan_step", True, D(
        description="true: each re-plan also takes one Gauss-Newton step of the tracking cost towards the "
                    "reference (a new feed-forward, as real-time iteration does); false: the gains only. "
                    "Applied at activate"))
    declare("body_step", 0.01, D(
        "body_step",
        description="A floating base's JointTrajectory: seconds between the knots of the body motion and its "
                    "gains (rounded to a whole number of dt; mechnode.logic.body): each knot costs a few ms "
                    "of exact solves"))
    declare("diagnostics_period", 1.0, D(
        "diagnostics_period", description="Seconds between diagnostics; applied at activate"))
    declare("warm_up", True, D(description="Load (cold cache: compile) the numba kernels of the command path, "
                                           "schedules and hold at configure; the rest in the background"))
    declare("autostart", False, D(
        description="Configure and activate at start-up (read by the mechnode command)"))


class NodeParameters:
    """Declares the node's parameters, validates every change, reads them typed.

    ``plant`` and ``is_active`` tell the validation what state the node is in: a callable that
    returns the configured Plant (None while unconfigured) and one that says whether the node is
    active. The values the command path reads (``command_mode``, ``state_timeout``,
    ``timeout_action``) are kept in plain attributes, updated after every successful set, and
    ``on_control()`` is called after they change.
    """

    def __init__(self, node, plant, is_active, on_control=None):
        self._node = node
        self._plant = plant
        self._is_active = is_active
        self._on_control = on_control
        #: parameter name -> why its value from the parameter file was refused (the parameter
        #: has its default; configure fails until it is set)
        self.refused: dict[str, str] = {}
        self._refusal = None                # (name, value, reason) of the last refused set
        # registered before the declarations: values from parameter files are validated too
        # (the pre-set callback, integers as doubles, runs for sets after the declarations)
        node.add_pre_set_parameters_callback(lambda params: [_coerce(p) for p in params])
        node.add_on_set_parameters_callback(self._on_set)
        node.add_post_set_parameters_callback(self._after_set)
        declare_parameters(node, self._declare)
        self.command_mode = self.value("command_mode")
        self.state_timeout = self.value("state_timeout")
        self.timeout_action = self.value("timeout_action")

    def _declare(self, name, default, descriptor) -> None:
        """Declare ``name`` with the parameter file's value; if that is refused (wrong type,
        out of range, invalid), with ``default`` instead, recorded in :attr:`refused` and
        logged in one line naming the parameter and the value."""
        node, self._refusal = self._node, None
        # declared writable first: an integer given for a double is then redeclared as a double
        # (and a read-only parameter made read-only), without the file's value
        probe = copy.deepcopy(descriptor)
        probe.read_only = False
        try:
            param = node.declare_parameter(name, default, probe)
            coerced = _coerce(param)
            if coerced is not param or descriptor.read_only:
                node.undeclare_parameter(name)
                value = default if coerced.value is None else coerced.value     # None: unset (a type)
                node.declare_parameter(name, value, descriptor, ignore_override=True)
            return
        except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
            if self._refusal is not None and self._refusal[0] == name:
                _, value, reason = self._refusal
                message = f"{name} = {value!r}: {reason}"
            else:                           # refused by rclpy (type, range): it names the value
                message = str(exc.args[0]) if exc.args else str(exc)
        node.declare_parameter(name, default, descriptor, ignore_override=True)
        self.refused[name] = message
        node.get_logger().error(
            f"parameter file: {message}; {name} is left at its default ({default!r}) and configure "
            f"fails until {name} is set to a valid value")

    def check_refused(self) -> None:
        """Raise InputError naming every parameter whose file value was refused and not set since."""
        if self.refused:
            raise InputError("parameter file value(s) refused at start-up, set them first: "
                             + "; ".join(self.refused.values()))

    def value(self, name):
        """The parameter's value (doubles as floats, double arrays as lists of floats, also
        when written as integers); None for a parameter that was never set."""
        try:
            value = self._node.get_parameter(name).value
        except ParameterUninitializedException:
            return None
        if name in DOUBLE_PARAMETERS or name in DOUBLE_ARRAY_PARAMETERS or name in NUMBER_OR_ARRAY_PARAMETERS:
            return as_doubles(name, value)
        return value

    def weights(self, plant, **override) -> Weights:
        """The weights of the parameters for ``plant`` (``override``: values to use instead):
        unset or empty Q, R = identity; unset Q_N = DARE at the last step."""
        vals = {n: override.get(n, self.value(n)) for n in ("Q", "R", "Q_N")}
        Q = vals["Q"] if vals["Q"] is not None and len(vals["Q"]) else np.ones(plant.nx)
        R = vals["R"] if vals["R"] is not None and len(vals["R"]) else np.ones(plant.nu)
        Q_N = vals["Q_N"] if vals["Q_N"] is not None else ()
        return Weights.from_values(plant, Q, R, Q_N)

    def limits(self, plant, joint_names, **override) -> Limits:
        """The state bounds, command limits and stamp checks of the parameters for ``plant``
        (``override``: values to use instead); raises InputError naming a bad entry."""
        v = {n: override.get(n, self.value(n)) for n in LIMIT_PARAMETERS}
        return Limits.for_plant(plant, joint_names, v["state_position_limit"],
                                v["state_velocity_limit"], v["command_limit"],
                                float(v["state_timeout"]), float(v["stamp_tolerance"]),
                                bool(v["accept_unstamped"]))

    def current_weights(self, config) -> Weights:
        """The weights of the parameters for the configured model, or those checked at configure
        if the parameters do not fit it."""
        try:
            return self.weights(config.plant)
        except InputError:
            return config.weights

    def options(self) -> Options:
        """How references become schedules, from the current parameter values."""
        return Options(feasibility=self.value("feasibility"),
                       optimizer_method=self.value("optimizer_method"),
                       optimizer_tolerance=float(self.value("optimizer_tolerance")),
                       optimizer_max_iterations=int(self.value("optimizer_max_iterations")),
                       max_knots=int(self.value("max_knots")),
                       optimizer_time_limit=float(self.value("optimizer_time_limit")))

    def _on_set(self, params) -> SetParametersResult:
        """rclpy's parameter callback: a refusal names the reason; nothing escapes (an exception
        here would end the executor, and with it every service and subscription)."""
        try:
            for p in params:
                self.check(p.name, p.value)
        except (InputError, ModelSpecError, ValueError, TypeError) as exc:
            self._refusal = (p.name, p.value, str(exc))
            return SetParametersResult(successful=False, reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - anything else: refused, never raised into rclpy
            self._refusal = (p.name, p.value, f"{type(exc).__name__}: {exc}")
            return SetParametersResult(successful=False, reason=f"{type(exc).__name__}: {exc}")
        return SetParametersResult(successful=True)

    def _after_set(self, params) -> None:
        changed = False
        for p in params:
            self.refused.pop(p.name, None)      # set to a valid value since
            if p.name in CONTROL_PARAMETERS:
                setattr(self, p.name, as_doubles(p.name, p.value) if p.name in DOUBLE_PARAMETERS else p.value)
                changed = True
        if changed and self._on_control is not None:
            self._on_control()

    def check(self, name, value) -> None:
        """Raise InputError (ModelSpecError, ValueError) if ``value`` cannot be set now."""
        plant = self._plant()
        if name in CONFIGURE_PARAMETERS and plant is not None:
            raise InputError(f"{name} can only change while unconfigured (cleanup first)")
        if name in TOPIC_PARAMETERS + LIMIT_PARAMETERS and self._is_active():
            raise InputError(f"{name} can only change while inactive (deactivate first)")
        if name in DOUBLE_PARAMETERS or name in DOUBLE_ARRAY_PARAMETERS or name in NUMBER_OR_ARRAY_PARAMETERS:
            if value is None and self._node.has_parameter(name):
                raise InputError(f"{name} cannot be unset (set a value)")
            value = as_doubles(name, value)     # integers as doubles; anything else refused
            if name in DOUBLE_PARAMETERS and value is not None:
                lo, hi = DOUBLE_PARAMETERS[name]
                if not lo <= value <= hi:
                    raise InputError(f"{name} = {value!r} is outside [{lo}, {hi}]")
        if name == "replan_period" and value is not None and 0.0 < value < 0.001:
            raise InputError(f"replan_period must be 0 (off) or at least 0.001 s, got {value!r}")
        if name == "model":
            check_model_spec(value)
        elif name == "joint_map" and value is not None:
            JointMap(JointMap.parse(value).keys(), value)     # format, duplicate joint names
        elif name == "locked_joints" and value is not None:
            parse_locked_joints(value)
        elif name == "contacts" and value is not None:
            parse_contacts(value)
        elif name == "floating_base" and value not in FLOATING_BASES:
            raise InputError(f"floating_base must be one of {FLOATING_BASES}, got {value!r}")
        elif name in ("Q", "R", "Q_N") and value is not None:
            check_weight_values(value, name, allow_empty=True, definite=name == "R")
            if plant is not None:
                self.weights(plant, **{name: value})
        elif name in ("state_position_limit", "state_velocity_limit", "command_limit"):
            limit_values(value, name)
            if plant is not None:
                self.limits(plant, plant.config_names, **{name: value})
        elif name in REQUIRED_TOPICS:
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{name} must be a non-empty topic name")
        elif name == "timeout_action" and value not in TIMEOUT_ACTIONS:
            raise InputError(f"timeout_action must be one of {TIMEOUT_ACTIONS}, got {value!r}")
        elif name == "idle_action" and value not in IDLE_ACTIONS:
            raise InputError(f"idle_action must be one of {IDLE_ACTIONS}, got {value!r}")
        elif name == "command_mode" and value not in COMMAND_MODES:
            raise InputError(f"command_mode must be one of {COMMAND_MODES}, got {value!r}")
        elif name == "feasibility" and value not in FEASIBILITY_MODES:
            raise InputError(f"feasibility must be one of {FEASIBILITY_MODES}, got {value!r}")
        elif name == "optimizer_method" and value not in OPTIMIZER_METHODS:
            raise InputError(f"optimizer_method must be one of {OPTIMIZER_METHODS}, got {value!r}")
