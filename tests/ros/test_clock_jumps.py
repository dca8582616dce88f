"""A simulator that resets its clock (``use_sim_time: true``), end to end: a real node process and
a real ``/clock`` publisher over real DDS on this run's private domain.

A stand-in simulator publishes ``/clock`` and the arm's JointState (at rest, stamped with the
simulated time) every 5 ms. The node holds the arm, then tracks a reference; the simulated time
is then reset backwards (from about 110 s to 20 s) and later skipped forwards (by 3 s, more than
``state_timeout``). At each jump: a zero command (``timeout_action: zero``) on the command
topic, the schedule dropped (the diagnostics say ``holding``, no schedule in force), the jump
counted and logged, the hold computed anew about a fresh state on the new clock, and commands
again. States stamped on the old clock that arrive after the reset are refused: the command
echo (which carries the stamp of the state each command was computed from) never shows them.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from nodeproc import NodeProcess, diagnostics, write_params

pytestmark = pytest.mark.slow

ARM_Q = [2500.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
ARM_R = [1.1e-5, 1.6e-4, 1.6e-4, 6.3e-4, 6.3e-4, 4.4e-3, 1.0e-2]
PERIOD_NS = 5_000_000       # the stand-in simulator's step (simulated and wall time)
START_NS = 100_000_000_000  # simulated time at its start
RESET_TO_NS = 20_000_000_000
SKIP_NS = 3_000_000_000
#: states stamped on the old clock that arrive after the reset (1 ms apart: never a tick's stamp)
LATE_OFFSETS_NS = (1_000_000, 2_000_000, 3_000_000)


class StandIn:
    """``/clock`` and the arm's JointState at rest, every 5 ms, from ``h.client``'s process."""

    def __init__(self, h, names, q):
        from rclpy.qos import qos_profile_sensor_data
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from mechnode.ros import conversions as cv
        from mechnode.ros.qos import COMMAND_QOS
        self.cv, self.names, self.q = cv, list(names), np.asarray(q, dtype=float)
        self.sim_ns = START_NS
        self.lock = threading.Lock()
        self.commands: list[tuple[float, np.ndarray]] = []      # (monotonic, command)
        self.echo_stamps: list[int] = []
        self.late: list[int] = []           # stamps to send once more, after the next tick
        self._clock_msg = Clock
        self._clock_pub = h.client.create_publisher(Clock, "/clock", 10)
        self._state_pub = h.client.create_publisher(JointState, f"{h.ns}/joint_states", qos_profile_sensor_data)
        h.client.create_subscription(Float64MultiArray, f"{h.ns}/effort_controller/commands", self._on_command,
                                     COMMAND_QOS)
        h.client.create_subscription(JointState, f"{h.ns}/command_echo", self._on_echo, qos_profile_sensor_data)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _on_command(self, msg):
        self.commands.append((time.monotonic(), np.array(msg.data)))

    def _on_echo(self, msg):
        self.echo_stamps.append(self.cv.stamp_ns(msg.header.stamp))

    def _state(self, stamp_ns):
        self._state_pub.publish(self.cv.joint_state(self.names, self.q, np.zeros_like(self.q), stamp_ns))

    def _loop(self):
        while not self._stop.is_set():
            with self.lock:
                t, late, self.late = self.sim_ns, self.late, []
                self.sim_ns += PERIOD_NS
            clock = self._clock_msg()
            clock.clock.sec, clock.clock.nanosec = divmod(t, 1_000_000_000)
            self._clock_pub.publish(clock)
            self._state(t)
            for stamp in late:
                self._state(stamp)
            time.sleep(PERIOD_NS * 1e-9)

    def jump(self, to_ns):
        """Set the simulated time to ``to_ns``; the monotonic time of the jump."""
        with self.lock:
            self.sim_ns = to_ns
            return time.monotonic()

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=2.0)


def test_describe_tells_a_jump_from_the_clock_starting():
    from rclpy.clock import ClockChange

    from mechnode.ros.clock_jumps import describe
    assert describe(ClockChange.ROS_TIME_NO_CHANGE, 5_000_000_000, 5_000_000_000) is None
    assert describe(ClockChange.ROS_TIME_NO_CHANGE, -80_000_000_000, 20_000_000_000) == (
        "the clock jumped backwards by 80.000 s, from 100.000 s to 20.000 s")
    assert "forwards by 3.000 s" in describe(ClockChange.ROS_TIME_NO_CHANGE, 3_000_000_000, 23_000_000_000)
    assert "switched off" in describe(ClockChange.ROS_TIME_DEACTIVATED, 0, 7)


def test_a_simulator_reset_and_skip(rclpy_mod, ifaces, tmp_path):
    from trajectory_msgs.msg import JointTrajectory

    from mechnode.demo.scenarios import ARM_POSE, arm_reference_points
    from mechnode.ros import conversions as cv
    from mechnode.ros.qos import LATCHED
    params = {"model": "arm7.urdf", "dt": 0.01, "Q": ARM_Q, "R": ARM_R, "state_timeout": 0.25,
              "diagnostics_period": 0.2, "feasibility": "auto", "use_sim_time": True,
              "command_echo_topic": "command_echo"}
    h = NodeProcess(rclpy_mod, write_params(tmp_path / "params.yaml", params), f"/test_jumps_{os.getpid()}",
                    tmp_path / "mechnode.log")
    names = [f"arm_joint{i}" for i in range(1, 8)]
    sim = None
    try:
        status = diagnostics(h)
        sim = StandIn(h, names, ARM_POSE)
        h.bring_up()
        sim.start()
        h.wait(lambda: status.get("mode") == "holding" and len(sim.commands) > 20, "the hold's commands",
               timeout=60.0)
        assert np.abs(sim.commands[-1][1]).max() > 1.0         # the arm's weight is held

        # a reference: tracking, on the simulated clock
        names_ref, times, pos = arm_reference_points()
        pub = h.client.create_publisher(JointTrajectory, f"{h.fqn}/reference", LATCHED)
        h.wait(lambda: pub.get_subscription_count() > 0, "the node's reference subscription")
        pub.publish(cv.joint_trajectory(names_ref, times, pos))
        h.wait(lambda: status.get("mode") == "tracking", "mode tracking", timeout=30.0)

        log_at = len(h.log())
        with sim.lock:
            old = sim.sim_ns
        late = [old + d for d in LATE_OFFSETS_NS]
        t_reset = sim.jump(RESET_TO_NS)
        h.wait(lambda: int(status.get("clock_jumps", 0)) == 1, "the reset counted in the diagnostics")
        with sim.lock:
            sim.late = late             # states stamped on the old clock, arriving after the reset
        h.wait(lambda: status.get("mode") == "holding" and status.get("schedule_active") == "False",
               "the schedule dropped and the robot held again", timeout=30.0)
        h.wait_log(r"the clock jumped backwards by \d+\.\d{3} s, from 1\d\d\.\d{3} s to 20\.000 s", after=log_at)
        h.wait_log(r"holding the robot at the state measured after the clock jump", after=log_at)
        after = [u for t, u in list(sim.commands) if t >= t_reset]
        zero = next((i for i, u in enumerate(after) if not u.any()), None)
        assert zero is not None, f"no zero command after the reset: {[np.round(u, 2) for u in after[:5]]}"
        h.wait(lambda: len([t for t, _ in sim.commands if t >= t_reset]) > zero + 20, "commands again")
        assert np.abs(sim.commands[-1][1]).max() > 1.0
        # the late states, stamped on the old clock, were refused: no command came from them
        h.wait(lambda: int(status.get("states_stamp_future", 0)) >= len(late), "the late states refused")
        assert not set(late) & set(sim.echo_stamps)
        new_clock = [s for s in sim.echo_stamps if RESET_TO_NS <= s < START_NS]
        assert new_clock, "no command computed from a state on the new clock"

        # a skip forwards beyond state_timeout
        log_at, n_before = len(h.log()), len(sim.commands)
        with sim.lock:
            ahead = sim.sim_ns + SKIP_NS
        t_skip = sim.jump(ahead)
        h.wait(lambda: int(status.get("clock_jumps", 0)) == 2, "the skip counted in the diagnostics")
        h.wait_log(r"the clock jumped forwards by 3\.\d{3} s", after=log_at)
        h.wait_log(r"holding the robot at the state measured after the clock jump", after=log_at)
        h.wait(lambda: len(sim.commands) > n_before + 40, "commands after the skip")
        after = [u for t, u in list(sim.commands) if t >= t_skip]
        assert any(not u.any() for u in after), "no zero command after the skip"
        h.wait(lambda: status.get("mode") == "holding", "mode holding in the diagnostics after the skip")
        assert np.abs(sim.commands[-1][1]).max() > 1.0
        assert int(status.get("commands_not_finite", 0)) == 0 and int(status.get("callback_errors", 0)) == 0
        print(f"reset: zero command, then {len(new_clock)} commands from states on the new clock; "
              f"{status.get('states_stamp_future')} old-clock states refused; skip: zero command, hold again")
    finally:
        if sim is not None:
            sim.stop()
        h.close()
