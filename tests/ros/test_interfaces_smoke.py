"""Smoke tests of the ROS 2 layer: mechnode_interfaces over real rclpy + Fast DDS (loopback).

Skips only when rclpy is not importable and MECHNODE_REQUIRE_ROS is unset (see conftest.py).
Every wait is bounded and fails with a message naming what did not arrive.
"""

from __future__ import annotations

import array
import threading

import numpy as np
import pytest

TIMEOUT = 15.0  # seconds; discovery on loopback normally takes well under 1 s

# lark (used by rosidl_parser, imported by the generated message modules) imports deprecated sre_*.


def _matrix(msg_mod, a):
    a = np.ascontiguousarray(a, dtype=np.float64)
    return msg_mod.Matrix(rows=a.shape[0], cols=a.shape[1], data=array.array("d", a.tobytes()))


def _tensor(msg_mod, a):
    a = np.ascontiguousarray(a, dtype=np.float64)
    return msg_mod.Tensor(shape=array.array("I", a.shape), data=array.array("d", a.tobytes()))


def _as_array(m):
    """Matrix -> (rows, cols) ndarray; Tensor -> ndarray of its shape."""
    data = np.frombuffer(m.data, dtype=np.float64) if len(m.data) else np.zeros(0)
    shape = (m.rows, m.cols) if hasattr(m, "rows") else tuple(m.shape)
    return data.reshape(shape)


# --- field layout: the interface contract other code relies on -------------------------------

EXPECTED_FIELDS = {
    "msg.Matrix": {"rows": "uint32", "cols": "uint32", "data": "sequence<double>"},
    "msg.Tensor": {"shape": "sequence<uint32>", "data": "sequence<double>"},
    "msg.GainSchedule": {
        "header": "std_msgs/Header", "dt": "double", "state_names": "sequence<string>",
        "input_names": "sequence<string>", "joint_names": "sequence<string>",
        "times": "sequence<double>", "state_convention": "uint8",
        "x_ref": "mechnode_interfaces/Matrix", "u_ref": "mechnode_interfaces/Matrix",
        "k": "mechnode_interfaces/Tensor",
    },
    "srv.Linearize.Request": {
        "q": "sequence<double>", "dq": "sequence<double>", "p": "sequence<double>",
        "u": "sequence<double>", "discrete": "boolean", "order": "uint8", "minimal": "boolean",
        "independent": "sequence<string>",
    },
    "srv.Linearize.Response": {
        "success": "boolean", "message": "string", "a": "mechnode_interfaces/Matrix",
        "b": "mechnode_interfaces/Matrix", "second_order": "mechnode_interfaces/Tensor",
        "f": "sequence<double>", "state_names": "sequence<string>",
        "input_names": "sequence<string>",
    },
    "srv.ComputeGains.Request": {
        "dt": "double", "x_ref": "mechnode_interfaces/Matrix",
        "u_ref": "mechnode_interfaces/Matrix", "q": "mechnode_interfaces/Matrix",
        "r": "mechnode_interfaces/Matrix", "q_n": "mechnode_interfaces/Matrix",
        "state_convention": "uint8",
    },
    "srv.ComputeGains.Response": {
        "success": "boolean", "message": "string", "schedule": "mechnode_interfaces/GainSchedule",
    },
    "srv.PlanTrajectory.Request": {
        "dt": "double", "x_ref": "mechnode_interfaces/Matrix",
        "u_ref": "mechnode_interfaces/Matrix", "x0": "sequence<double>",
        "q": "mechnode_interfaces/Matrix", "r": "mechnode_interfaces/Matrix",
        "q_n": "mechnode_interfaces/Matrix", "method": "uint8", "max_iterations": "uint32",
        "tolerance": "double",
    },
    "srv.PlanTrajectory.Response": {
        "success": "boolean", "message": "string", "x": "mechnode_interfaces/Matrix",
        "u": "mechnode_interfaces/Matrix", "cost": "double", "iterations": "uint32",
        "schedule": "mechnode_interfaces/GainSchedule",
    },
    "srv.GetModel.Request": {},
    "srv.GetModel.Response": {
        "success": "boolean", "message": "string", "config_names": "sequence<string>",
        "dynamic_config_names": "sequence<string>", "kinematic_config_names": "sequence<string>",
        "input_names": "sequence<string>", "continuous_state_names": "sequence<string>",
        "discrete_state_names": "sequence<string>", "dt": "double", "conventions": "string",
        "position_lower": "sequence<double>", "position_upper": "sequence<double>",
        "velocity_limit": "sequence<double>", "effort_limit": "sequence<double>",
        "command_limit": "sequence<double>",
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED_FIELDS))
def test_interface_fields(ifaces, name):
    msg, srv = ifaces
    obj = {"msg": msg, "srv": srv}[name.split(".")[0]]
    for part in name.split(".")[1:]:
        obj = getattr(obj, part)
    from rclpy.type_support import check_for_type_support

    check_for_type_support(obj)  # loads the generated C extension
    assert obj.get_fields_and_field_types() == EXPECTED_FIELDS[name]


def test_constants(ifaces):
    msg, srv = ifaces
    assert (msg.GainSchedule.STATE_Q_P, msg.GainSchedule.STATE_Q_QDOT) == (0, 1)
    assert (srv.PlanTrajectory.Request.FIRST_ORDER, srv.PlanTrajectory.Request.SECOND_ORDER) == (1, 2)


# --- pub/sub: GainSchedule over reliable + transient-local ----------------------------------

def test_gain_schedule_transient_local(rclpy_mod, ifaces, ros_context, spin_until, unique):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    msg, _ = ifaces
    qos = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
    topic = unique("gain_schedule")

    # Large enough to need fragmentation (~190 kB of gains).
    knots, nu, nx = 501, 4, 12
    rng = np.random.default_rng(0)
    x_ref, u_ref = rng.standard_normal((knots, nx)), rng.standard_normal((knots, nu))
    gains = rng.standard_normal((knots, nu, nx))
    times = 0.01 * np.arange(knots)

    pub_node = rclpy_mod.create_node(unique("gs_pub"), context=ros_context)
    sub_node = rclpy_mod.create_node(unique("gs_sub"), context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    try:
        out = msg.GainSchedule()
        out.header.stamp.sec, out.header.stamp.nanosec = 1234, 5678
        out.header.frame_id = "world"
        out.dt = 0.01
        out.state_names = [f"x{i}" for i in range(nx)]
        out.input_names = [f"u{i}" for i in range(nu)]
        out.joint_names = [f"q{i}" for i in range(nx // 2)]
        out.times = array.array("d", times.tobytes())
        out.state_convention = msg.GainSchedule.STATE_Q_QDOT
        out.x_ref, out.u_ref, out.k = _matrix(msg, x_ref), _matrix(msg, u_ref), _tensor(msg, gains)

        # Publish BEFORE the subscriber exists: transient-local must still deliver it.
        pub = pub_node.create_publisher(msg.GainSchedule, topic, qos)
        pub.publish(out)

        received = []
        sub_node.create_subscription(msg.GainSchedule, topic, received.append, qos)
        executor.add_node(pub_node)
        executor.add_node(sub_node)
        spin_until(executor, lambda: received, TIMEOUT, f"the latched GainSchedule on {topic}")

        got = received[0]
        assert (got.header.stamp.sec, got.header.stamp.nanosec) == (1234, 5678)
        assert got.header.frame_id == "world"
        assert got.dt == 0.01
        assert list(got.state_names) == list(out.state_names)
        assert list(got.input_names) == list(out.input_names)
        assert list(got.joint_names) == list(out.joint_names)
        assert got.state_convention == msg.GainSchedule.STATE_Q_QDOT
        np.testing.assert_array_equal(np.frombuffer(got.times), times)
        np.testing.assert_array_equal(_as_array(got.x_ref), x_ref)
        np.testing.assert_array_equal(_as_array(got.u_ref), u_ref)
        assert list(got.k.shape) == [knots, nu, nx]
        np.testing.assert_array_equal(_as_array(got.k), gains)
    finally:
        executor.shutdown()
        sub_node.destroy_node()
        pub_node.destroy_node()


# --- service: Linearize round trip ----------------------------------------------------------

def test_linearize_service_round_trip(rclpy_mod, ifaces, ros_context, spin_until, unique):
    from rclpy.executors import SingleThreadedExecutor

    msg, srv = ifaces
    name = unique("linearize")
    a_fixed = np.array([[0.0, 1.0], [-9.81, -0.1]])
    b_fixed = np.array([[0.0], [1.0]])
    requests = []

    def handle(request, response):
        requests.append(request)
        response.success = True
        response.message = "fixed"
        response.a = _matrix(msg, a_fixed)
        response.b = _matrix(msg, b_fixed)
        response.f = [request.dq[0], -9.81 * request.q[0]]
        response.state_names = ["theta", "dtheta"]
        response.input_names = ["torque"]
        return response

    server = rclpy_mod.create_node(unique("lin_server"), context=ros_context)
    client_node = rclpy_mod.create_node(unique("lin_client"), context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    try:
        server.create_service(srv.Linearize, name, handle)
        client = client_node.create_client(srv.Linearize, name)
        executor.add_node(server)
        executor.add_node(client_node)
        spin_until(executor, client.service_is_ready, TIMEOUT, f"service {name} to appear")

        req = srv.Linearize.Request(q=[0.5], dq=[0.25], u=[0.0], discrete=False, order=1,
                                    minimal=False, independent=["theta"])
        future = client.call_async(req)
        spin_until(executor, future.done, TIMEOUT, f"the {name} response")

        resp = future.result()
        assert resp is not None and resp.success and resp.message == "fixed"
        np.testing.assert_array_equal(_as_array(resp.a), a_fixed)
        np.testing.assert_array_equal(_as_array(resp.b), b_fixed)
        assert len(resp.second_order.data) == 0 and len(resp.second_order.shape) == 0
        assert list(resp.f) == [0.25, -9.81 * 0.5]
        assert list(resp.state_names) == ["theta", "dtheta"]
        assert list(resp.input_names) == ["torque"]
        assert len(requests) == 1
        assert list(requests[0].q) == [0.5] and list(requests[0].independent) == ["theta"]
    finally:
        executor.shutdown()
        client_node.destroy_node()
        server.destroy_node()


# --- lifecycle: configure + activate through the standard lifecycle services ------------------

def test_lifecycle_node_configure_activate(rclpy_mod, ifaces, ros_context, wait_until, unique):
    """A rclpy.lifecycle node driven by a manager-style client over lifecycle_msgs services,
    everything spun by a MultiThreadedExecutor in a background thread."""
    from lifecycle_msgs.msg import State, Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    msg, _ = ifaces
    calls = []
    node_name = unique("managed")
    topic = unique("managed_schedule")
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)

    class Managed(LifecycleNode):
        def on_configure(self, state):
            calls.append("configure")
            self.pub = self.create_lifecycle_publisher(msg.GainSchedule, topic, latched)
            return TransitionCallbackReturn.SUCCESS

        def on_activate(self, state):
            calls.append("activate")
            result = super().on_activate(state)  # activates the lifecycle publisher
            self.pub.publish(msg.GainSchedule(dt=0.02))
            return result

    managed = Managed(node_name, context=ros_context)
    manager = rclpy_mod.create_node(unique("manager"), context=ros_context)
    received = []
    manager.create_subscription(msg.GainSchedule, topic, received.append, latched)
    change = manager.create_client(ChangeState, f"/{node_name}/change_state")
    get = manager.create_client(GetState, f"/{node_name}/get_state")

    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(managed)
    executor.add_node(manager)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    def call(client, request, what):
        future = client.call_async(request)
        wait_until(future.done, TIMEOUT, what)
        return future.result()

    try:
        wait_until(lambda: change.service_is_ready() and get.service_is_ready(), TIMEOUT,
                   f"lifecycle services of /{node_name}")
        assert call(get, GetState.Request(), "get_state").current_state.id == State.PRIMARY_STATE_UNCONFIGURED

        for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
            req = ChangeState.Request()
            req.transition.id = transition
            assert call(change, req, f"change_state {transition}").success, f"transition {transition}"

        state = call(get, GetState.Request(), "get_state").current_state
        assert (state.id, state.label) == (State.PRIMARY_STATE_ACTIVE, "active")
        assert calls == ["configure", "activate"]
        wait_until(lambda: received, TIMEOUT, f"the GainSchedule published on activation ({topic})")
        assert received[0].dt == 0.02
    finally:
        executor.shutdown(timeout_sec=5.0)
        spinner.join(timeout=5.0)
        assert not spinner.is_alive(), "MultiThreadedExecutor did not stop"
        manager.destroy_node()
        managed.destroy_node()
