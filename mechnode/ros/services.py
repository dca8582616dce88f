"""The node's four services: ``~/get_model``, ``~/linearize``, ``~/compute_gains``,
``~/plan_trajectory``.

They exist from start-up, answer from the configured model (``success: false`` naming the reason
while unconfigured) and never raise: a bad request, a singular linearization or any other error
becomes ``success: false`` with a message. A result with a non-finite entry is never answered
with ``success: true``: the message names the entry, or, when the computation failed on an input
too large for double precision (:data:`core.validation.OVERFLOW_SCALE`), that input entry and its value. Every
answer is computed afresh; none of them changes the node's state.

Every request gets an answer, and none waits for another: the quick queries (get_model,
linearize) run concurrently; the heavy ones (compute_gains, plan_trajectory) one at a time, and a
heavy request that arrives while another is computing is answered at once with
``success: false``, "busy", what is running and for how long at most. Heavy requests are bounded
before their arrays are converted (``max_knots`` knots, ``max_request_iterations`` optimizer
iterations) and the optimizer stops after ``optimizer_time_limit`` seconds. The request queues
hold :data:`QUEUE_DEPTH` requests per service.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time
import traceback

import numpy as np
from mechnode_interfaces.srv import (  # type: ignore[attr-defined]  # generated services: no type info
    ComputeGains,
    GetModel,
    Linearize,
    PlanTrajectory,
)
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import QoSProfile, ReliabilityPolicy

import core
from mechnode.errors import InputError
from mechnode.logic.body import body_schedule
from mechnode.logic.feasibility import make_feasible
from mechnode.logic.gains import STATE_Q_P, STATE_Q_QDOT, STATE_TANGENT, gain_schedule, schedule_in_qdot
from mechnode.logic.legged import balance_hold
from mechnode.logic.resampling import Reference
from mechnode.logic.weights import Weights
from mechnode.ros import conversions as cv

#: What GetModel answers in ``conventions``: core's conventions (the one source, also in
#: docs/guide.md) followed by what only the node adds.
NODE_CONVENTIONS = (
    "Node: JointState/JointTrajectory map joints to q by name (joint_map). Linearize: continuous "
    "-> (A, B) of xdot = f(x, u); discrete -> (A, B) of x_next = F(x, u) with x = [q, p, v] "
    "(v = 0 is used, it does not enter F), second_order[i, a, b] = d2 x_next_i / dz_a dz_b with "
    "z = [x, u]. GainSchedule: u = u_ref[k] - K[k] (x - x_ref[k]), knots = N + 1, the last row "
    "of u_ref and K repeats row N - 1 (the law held after the end); weights Q, R, Q_N act on x "
    "in the schedule's state_convention (parameters: on [q, p, v]). Commands on the command "
    "topic: force inputs (command_mode effort) or the whole u (full). A floating base "
    "(floating_base: quaternion, contacts): JointState carries the joints, nav_msgs/Odometry the "
    "base (REP 105: pose of child_frame_id in header.frame_id, twist in child_frame_id); its "
    "GainSchedules are STATE_TANGENT: u = u_ref[k] - K[k] [q (-) q_ref[k]; v - v_ref[k]], x_ref rows "
    "[q_ref, v_ref], Q on the tangent state [dq, v] (2 nv), the knots dt apart (a body motion: "
    "body_step).")
CONVENTIONS = core.CONVENTIONS + "\n" + NODE_CONVENTIONS

class NonFiniteResult(ValueError):
    """A service computation gave NaN or infinite entries."""


def check_finite(**results) -> None:
    """Raise :class:`NonFiniteResult` naming the first non-finite entry of the named arrays."""
    for name, a in results.items():
        a = np.asarray(a, dtype=float)
        bad = np.flatnonzero(~np.isfinite(a))
        if bad.size:
            idx = tuple(int(i) for i in np.unravel_index(int(bad[0]), a.shape))
            raise NonFiniteResult(f"the result is not finite: {name}{list(idx)} = {a[idx]} "
                                  f"({bad.size} non-finite entries)")


@contextlib.contextmanager
def overflow_guard(*inputs):
    """Around a computation on ``inputs`` (see :func:`core.validation.too_large`): if it fails (a core error,
    a LinAlgError, an ArithmeticError, a non-finite result) and an input is too large, the error
    becomes an InputError about that input's size."""
    try:
        yield
    except (core.CoreError, np.linalg.LinAlgError, ArithmeticError, NonFiniteResult) as exc:
        big = core.validation.too_large(inputs)
        if big is None:
            raise
        raise InputError(f"{big}; the computation failed ({type(exc).__name__})") from None


#: Requests kept per service until the executor takes them (rclpy's default keeps 10 and drops
#: the rest of a burst unanswered).
QUEUE_DEPTH = 256
SERVICE_QOS = QoSProfile(depth=QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE)


class Busy:
    """One heavy computation at a time; :meth:`claim` never waits."""

    def __init__(self):
        self._lock = threading.Lock()
        self._what, self._since = "", 0.0

    def claim(self, what: str, time_limit: float) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        self._what, self._since, self.time_limit = what, time.monotonic(), time_limit
        return True

    def release(self):
        self._lock.release()

    def describe(self) -> str:
        return (f"busy: {self._what} has been computing for {time.monotonic() - self._since:.2f} s "
                f"(its optimizer stops after {self.time_limit:g} s); try again later")


def service_guard(heavy: bool = False):
    """Service callbacks never raise: expected errors become success = false with a rate-limited
    warning, unexpected ones success = false with an error log; the seconds of the call are
    recorded in the stats (``<method name>_s``). With ``heavy``, a request that finds another
    heavy one computing is answered busy at once (:class:`Busy`). For methods of
    :class:`ModelServices`."""
    def decorate(method):
        name = method.__name__[5:]

        @functools.wraps(method)
        def wrapper(self, request, response):
            t0 = time.perf_counter()
            if heavy and not self.busy.claim(name, float(self._params.value("optimizer_time_limit"))):
                response.success = False
                response.message = self.busy.describe()
                self.health.count("requests_busy")
                return response
            try:
                result = method(self, request, response)
            except (InputError, ValueError, core.CoreError, np.linalg.LinAlgError) as exc:
                response.success = False
                response.message = f"{type(exc).__name__}: {exc}"
                self.health.warn_limited(f"srv:{name}:{response.message[:60]}", f"{name}: {response.message}")
                result = response
            except Exception as exc:  # noqa: BLE001 - the node must keep serving
                response.success = False
                response.message = f"internal error: {type(exc).__name__}: {exc}"
                self.health.logger.error(f"{name}: {response.message}\n{traceback.format_exc()}")
                result = response
            finally:
                if heavy:
                    self.busy.release()
            self.health.stats[f"{method.__name__}_s"] = time.perf_counter() - t0
            return result
        return wrapper
    return decorate


class ModelServices:
    """Creates the four services on the managed ``node`` and answers them.

    ``node``: the MechNode (its ``config``, None while unconfigured, and ``lifecycle_label``);
    ``params``: its :class:`~mechnode.ros.parameters.NodeParameters`; ``health``: its
    :class:`~mechnode.ros.diagnostics.Health`. All four share a reentrant callback group; the heavy
    ones (compute_gains, plan_trajectory) take turns through :attr:`busy` without waiting.
    """

    def __init__(self, node, params, health):
        self._node = node
        self._params = params
        self.health = health
        self.busy = Busy()
        group = ReentrantCallbackGroup()
        for srv_type, name, callback in (
                (Linearize, "~/linearize", self._srv_linearize),
                (GetModel, "~/get_model", self._srv_get_model),
                (ComputeGains, "~/compute_gains", self._srv_compute_gains),
                (PlanTrajectory, "~/plan_trajectory", self._srv_plan_trajectory)):
            node.create_service(srv_type, name, callback, qos_profile=SERVICE_QOS, callback_group=group)

    def _need_config(self, floating: bool = False):
        """The node's configuration; an InputError while unconfigured, or for a floating base
        when the service does not take one (``floating``: it does)."""
        config = self._node.config
        if config is None:
            raise InputError(f"the node is {self._node.lifecycle_label}: configure it first "
                             "(no model loaded)")
        if not floating and getattr(config.plant, "floating", False):
            raise InputError("the model has a floating base (floating_base: quaternion): the node serves "
                             "get_model and compute_gains for it, no linearization or plan yet; the library "
                             "computes them (core.System.linearize_minimal, core.balance_lqr)")
        return config

    @staticmethod
    def _plant_for_dt(plant, dt: float):
        if dt == 0:
            return plant
        if not (np.isfinite(dt) and 0 < dt <= 1.0):
            raise InputError(f"dt must be 0 (node default) or in (0, 1] s, got {dt}")
        return plant.with_dt(dt)

    @service_guard()
    def _srv_get_model(self, request, response):
        config = self._need_config(floating=True)
        plant = config.plant
        response.success = True
        response.message = f"{plant.system.name} from {plant.source}: {plant.actuation}"
        response.config_names = list(plant.config_names)
        response.dynamic_config_names = list(plant.dynamic_names)
        response.kinematic_config_names = list(plant.kinematic_names)
        response.input_names = list(plant.input_names)
        response.continuous_state_names = list(plant.continuous_state_names)
        response.discrete_state_names = list(plant.state_names)
        response.dt = plant.dt
        lower, upper = plant.system.position_limits
        response.position_lower, response.position_upper = cv.float_array(lower), cv.float_array(upper)
        response.velocity_limit = cv.float_array(plant.system.velocity_limits)
        response.effort_limit = cv.float_array(plant.system.effort_limits)
        limits = self._params.limits(plant, config.joint_map.joint_names)
        response.command_limit = cv.float_array(limits.command[:plant.m])
        joints = config.joint_map.joint_names
        response.conventions = (CONVENTIONS + f" JointState/JointTrajectory joint names: "
                                f"{dict(zip(plant.config_names, joints, strict=True))}. Force inputs (command_mode "
                                f"effort): {plant.force_input_names}.")
        return response

    @service_guard()
    def _srv_linearize(self, request, response):
        plant = self._need_config().plant
        order = int(request.order) or 1
        if order not in (1, 2):
            raise InputError(f"order must be 1 or 2, got {request.order}")
        q = cv.as_vector(request.q, "q", plant.n)
        speed = (("p", request.p, plant.dynamic_names) if request.discrete
                 else ("dq", request.dq, plant.config_names))
        with overflow_guard(("q", q, plant.config_names), speed, ("u", request.u, None)):
            return self._linearize(plant, request, response, order, q)

    @staticmethod
    def _linearize(plant, request, response, order, q):
        H = None
        if request.discrete:
            if request.minimal:
                raise InputError("minimal coordinates are available for continuous "
                                 "linearizations only (discrete = false)")
            p = cv.as_vector(request.p, "p", plant.nd)
            u = cv.as_vector(request.u, "u", plant.nu)
            plant.system.check_configuration(q, what="the discrete linearization")
            x = np.concatenate([q, p, np.zeros(plant.nk)])
            if order == 2:
                A, B, H = plant.vi.linearize2(x, u)
            else:
                A, B = plant.vi.linearize(x, u)
            f = plant.vi.step(x, u)
            state_names, input_names = plant.state_names, plant.input_names
        else:
            if order == 2:
                raise InputError("second-order derivatives are available for discrete "
                                 "linearizations only (discrete = true)")
            system = plant.system
            dq = cv.as_vector(request.dq, "dq", plant.n)
            # continuous input: forces, then the kinematic variables' accelerations
            input_names = system.continuous_input_names
            u = cv.as_vector(request.u, "u", len(input_names))
            state_names = plant.continuous_state_names
            if request.minimal and plant.model.nh + plant.model.nv > 0:
                A, B, info = system.linearize_minimal(q, dq, u,
                                               independent=list(request.independent) or None)
                state_names = info.state_names
                response.message = (f"minimal coordinates: independent {list(info.state_names)}, "
                                    f"condition {info.condition_coordinates:.3g}/"
                                    f"{info.condition_speeds:.3g}")
            else:
                A, B = system.linearize(q, dq, u)
                if request.minimal:
                    response.message = "unconstrained system: all coordinates are independent"
            f = np.concatenate([dq, system.qdd(q, dq, u)])
        check_finite(A=A, B=B, f=f, second_order=() if H is None else H)
        if H is not None:
            response.second_order = cv.tensor_msg(H)
        response.a, response.b = cv.matrix_msg(A), cv.matrix_msg(B)
        response.f = cv.float_array(f)
        response.state_names, response.input_names = list(state_names), list(input_names)
        response.success = True
        return response

    def _request_weights(self, config, plant, q, r, q_n, convention=STATE_Q_P) -> Weights:
        """Weights of a service request; empty matrices = the node's parameters (on [q, p, v],
        so with STATE_Q_QDOT q must be given)."""
        nx, nu = plant.nx, plant.nu
        Q = cv.matrix_from_msg(q, "q", (nx, nx), allow_empty=True)
        R = cv.matrix_from_msg(r, "r", (nu, nu), allow_empty=True)
        QN = cv.matrix_from_msg(q_n, "q_n", (nx, nx), allow_empty=True)
        base = self._params.current_weights(config)
        if Q is None:
            if convention == STATE_Q_QDOT:
                raise InputError("q must be given with state_convention STATE_Q_QDOT (the node's "
                                 "weights act on [q, p, v])")
            Q = base.Q
            QN = base.Q_N if QN is None else QN
        R = base.R if R is None else R
        return Weights.from_values(plant, Q.ravel(), R.ravel(), () if QN is None else QN.ravel())

    def _bounded_knots(self, matrix, name: str = "x_ref") -> None:
        """Refuse a trajectory of more than ``max_knots`` rows before converting it."""
        limit = int(self._params.value("max_knots"))
        if matrix.rows > limit:
            raise InputError(f"{name} has {matrix.rows} knots; the limit (parameter max_knots) is {limit}")

    @service_guard(heavy=True)
    def _srv_compute_gains(self, request, response):
        config = self._need_config(floating=True)
        if getattr(config.plant, "floating", False):
            return self._floating_gains(config, request, response)
        plant = self._plant_for_dt(config.plant, float(request.dt))
        conv = int(request.state_convention)
        if conv not in (STATE_Q_P, STATE_Q_QDOT):
            raise InputError(f"state_convention must be 0 (STATE_Q_P) or 1 (STATE_Q_QDOT), got {conv}")
        self._bounded_knots(request.x_ref)
        X = cv.matrix_from_msg(request.x_ref, "x_ref")
        knots, width = X.shape
        if knots < 2:
            raise InputError(f"x_ref needs at least 2 knots, got {knots}")
        jnames = config.joint_map.joint_names
        U = cv.matrix_from_msg(request.u_ref, "u_ref", (knots - 1, plant.nu), allow_empty=True)
        with overflow_guard(("x_ref", X, None), ("u_ref", () if U is None else U, plant.input_names)):
            sched = self._compute_gains(config, plant, request, response, conv, X, U, knots, width,
                                        jnames)
            check_finite(K=sched.K, x_ref=sched.x_ref, u_ref=sched.u_ref)
        response.schedule = cv.schedule_to_msg(sched, 0)
        response.success = True
        return response

    def _compute_gains(self, config, plant, request, response, conv, X, U, knots, width, jnames):
        if width == plant.n:  # positions only: complete the state, make it feasible
            weights = self._request_weights(config, plant, request.q, request.r, request.q_n)
            dq0 = (X[1] - X[0]) / plant.dt
            opts = self._params.options()
            feas = make_feasible(plant, X, dq0, weights, opts.feasibility, opts.optimizer_method,
                                 opts.optimizer_tolerance, opts.optimizer_max_iterations,
                                 opts.feasibility_tolerance, opts.optimizer_time_limit)
            sched = gain_schedule(plant, feas.X, feas.U, weights, jnames)
            response.message = (f"positions only: state completed by the discrete Legendre "
                                f"transform, feasibility {feas.method} {feas.message}".strip())
            if conv == STATE_Q_QDOT:
                response.message += "; schedule in STATE_Q_P (positions-only requests)"
        elif width == plant.nx:
            U = np.zeros((knots - 1, plant.nu)) if U is None else U
            weights = self._request_weights(config, plant, request.q, request.r, request.q_n, conv)
            if conv == STATE_Q_P:
                sched = gain_schedule(plant, X, U, weights, jnames)
            else:
                sched = schedule_in_qdot(plant, X, U, weights, jnames)
        else:
            raise InputError(f"x_ref must have {plant.nx} columns (state) or {plant.n} (positions "
                             f"only), got {width}")
        return sched

    def _floating_gains(self, config, request, response):
        """compute_gains for a floating base on the node's contacts: ``x_ref`` rows are
        configurations ``q`` (nq columns). One row: the balance law standing at it
        (:func:`mechnode.logic.legged.balance_hold`). Several: the first is the stance (the
        contacts anchored where they are there), the rows' joints a joint reference ``dt`` apart
        (0: ``body_step``; a whole number of the node's ``dt``) and the answer the body motion's
        schedule (:func:`mechnode.logic.body.body_schedule`). Either in ``STATE_TANGENT``."""
        plant = config.plant
        system = plant.system
        conv = int(request.state_convention)
        if conv not in (STATE_Q_P, STATE_TANGENT):
            raise InputError(f"state_convention must be 0 (the default) or 2 (STATE_TANGENT) for a floating base, "
                             f"got {conv}: its schedules are in STATE_TANGENT")
        self._bounded_knots(request.x_ref)
        X = cv.matrix_from_msg(request.x_ref, "x_ref")
        knots, width = X.shape
        if width != system.nq:
            raise InputError(f"x_ref: a floating base's rows are configurations q, {system.nq} columns (base "
                             f"position, quaternion (x, y, z, w), the joints {plant.config_names}), got {width}")
        if request.u_ref.rows or len(request.u_ref.data):
            raise InputError("u_ref must be empty for a floating base: the inputs are solved on the contacts")
        if knots < 1:
            raise InputError("x_ref needs at least 1 knot (a stance)")
        weights = self._request_weights(config, plant, request.q, request.r, request.q_n)
        jnames = config.joint_map.joint_names
        contacts = ", ".join(f"{frame} ({kind})" for frame, kind in plant.contacts)
        with overflow_guard(("x_ref", X, None)):
            if knots == 1:
                sched = balance_hold(system, X[0], weights.Q, weights.R, plant.dt, jnames)
                response.message = f"the balance law standing at x_ref[0] on {contacts}; STATE_TANGENT"
            else:
                dt = float(request.dt) or float(self._params.value("body_step"))
                periods = dt / plant.dt
                if not (np.isfinite(dt) and periods >= 1.0 - 1e-9 and abs(periods - round(periods)) < 1e-6):
                    raise InputError(f"dt = {dt} s: a floating base's knots are a whole number of the node's dt "
                                     f"({plant.dt} s) apart")
                ref = Reference(dt * np.arange(knots), X[:, 7:].copy())
                sched = body_schedule(system, X[0], ref, weights.Q, weights.R, plant.dt, dt,
                                      int(self._params.value("max_knots")), jnames)
                response.message = (f"a body motion on {contacts} from the stance x_ref[0], knots {sched.dt:g} s "
                                    f"apart; STATE_TANGENT")
            check_finite(K=sched.K, x_ref=sched.x_ref, u_ref=sched.u_ref)
        response.schedule = cv.schedule_to_msg(sched, 0)
        response.success = True
        return response

    @service_guard(heavy=True)
    def _srv_plan_trajectory(self, request, response):
        config = self._need_config()
        plant = self._plant_for_dt(config.plant, float(request.dt))
        self._bounded_knots(request.x_ref)
        iteration_limit = int(self._params.value("max_request_iterations"))
        if int(request.max_iterations) > iteration_limit:
            raise InputError(f"max_iterations = {request.max_iterations}; the limit (parameter "
                             f"max_request_iterations) is {iteration_limit}")
        X = cv.matrix_from_msg(request.x_ref, "x_ref", (None, plant.nx))
        knots = X.shape[0]
        if knots < 2:
            raise InputError(f"x_ref needs at least 2 knots, got {knots}")
        U = cv.matrix_from_msg(request.u_ref, "u_ref", (knots - 1, plant.nu), allow_empty=True)
        U = np.zeros((knots - 1, plant.nu)) if U is None else U
        x0 = cv.as_vector(request.x0, "x0", plant.nx) if len(request.x0) else X[0]
        if not np.all(np.isfinite(x0)):
            raise InputError("x0 has non-finite entries")
        weights = self._request_weights(config, plant, request.q, request.r, request.q_n)
        method = {0: self._params.value("optimizer_method"), 1: "first_order",
                  2: "second_order"}.get(int(request.method))
        if method is None:
            raise InputError(f"method must be 0 (node default), 1 (FIRST_ORDER) or 2 (SECOND_ORDER), "
                             f"got {request.method}")
        iters = int(request.max_iterations) or int(self._params.value("optimizer_max_iterations"))
        tol = float(request.tolerance) or float(self._params.value("optimizer_tolerance"))
        QN = weights.Q_N if weights.Q_N is not None else weights.Q
        jnames = config.joint_map.joint_names
        with overflow_guard(("x0", x0, plant.state_names), ("x_ref", X, plant.state_names),
                            ("u_ref", U, plant.input_names)):
            result = core.optimize_trajectory(
                plant.vi, x0, X, U, weights.Q, weights.R, QN, method=method, tol=tol,
                max_iterations=iters, time_limit=float(self._params.value("optimizer_time_limit")))
            check_finite(x=result.x, u=result.u, cost=result.cost)
            sched = gain_schedule(plant, result.x, result.u, weights, jnames)
            check_finite(K=sched.K)
        response.x, response.u = cv.matrix_msg(result.x), cv.matrix_msg(result.u)
        response.cost, response.iterations = float(result.cost), int(result.iterations)
        response.schedule = cv.schedule_to_msg(sched, 0)
        # every iterate is a rollout of the integrator: a usable, feasible trajectory even when
        # the iteration cap stops the optimizer before its tolerance
        response.success = True
        response.message = (f"{method}: {'converged' if result.converged else 'not converged'} "
                            f"after {result.iterations} iterations ({result.message})")
        return response
