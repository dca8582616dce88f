"""The command process: the 1 kHz command path (:mod:`mechnode.ros.command`) in a process of its own.

Why a process: rclpy holds the interpreter lock while it takes a message, and a 1,000,000-point
reference (56 MB) took 96-163 ms to take; services convert large requests and the collector
pauses for big allocations. In one process any of these stalls the JointState -> command path.
In its own process the path shares nothing with that work but the CPU.

The managed node starts the process (``python -m mechnode.ros.command_process``: a fresh
interpreter, nothing inherited but the environment) when it is created, and drives it over a
socket pair (:class:`multiprocessing.connection.Connection` messages), one request at a time:

==============================  =============================================================
``configure(plant, joint_map)``  the process builds the same model from the plant's text and
                                 loads the control kernel (at the node's configure)
``start(settings)``              the path's node, publishers, watchdog, subscription (activate)
``install(active)``              a new schedule in force (no answer awaited)
``clock_jump_acknowledged()``    the node has dropped what it timed before a clock jump
                                 (:mod:`mechnode.ros.clock_jumps`; no answer awaited)
``set_modes(mode, action)``      ``command_mode`` / ``timeout_action`` changed (no answer)
``status()``                     the path's report for the diagnostics
``first_state()``                the first state accepted since start (the idle hold's point)
``latest_state()``               the latest state accepted (the re-planner's starting point)
``stop()``                       nothing is published after the answer (deactivate)
``cleanup()``, ``close()``       drop the model; end the process (shutdown)
==============================  =============================================================

The pipe carries only what the node itself sends (model text, schedules, settings), never
anything from the network unread. The process ends when the pipe closes: if the node's process
dies, the command path first sends its timeout action (a zero command by default), then ends.
If the command process dies while the node is active, the node logs it, leaves ``active`` (it
deactivates itself) and reports ``command_process: not running`` at ERROR; the next activate
starts a new one. A shared heartbeat page (:class:`Heartbeat`, written every 10 ms) lets the
node see a stalled command process (stopped, starved): its diagnostics report ERROR while the
heartbeat is older than :data:`STALL_SECONDS`, and once for every stall that has ended.
"""
from __future__ import annotations

import argparse
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import cast

#: Seconds to wait for an answer: building the model and loading (or, on a cold cache,
#: compiling) the control kernel; anything else.
CONFIGURE_TIMEOUT, REQUEST_TIMEOUT = 900.0, 10.0


class CommandProcessError(RuntimeError):
    """The command process failed a request, did not answer, or is not running."""


class CommandProcess:
    """The managed node's handle on its command process (see the module docstring).

    ``node_name``, ``namespace``: of the managed node (the path's node is ``<name>_control``
    there); ``use_sim_time``: the path's clock; ``logger``: where failures are logged.
    Thread-safe: one request at a time.
    """

    def __init__(self, node_name: str, namespace: str, use_sim_time: bool, logger):
        self._args = (f"{node_name}_control", namespace, bool(use_sim_time))
        self._logger = logger
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        # the heartbeat page the process writes (Heartbeat) and this one reads
        self._beat_fd = os.memfd_create("mechnode-heartbeat")
        os.ftruncate(self._beat_fd, Heartbeat.SIZE)
        self._beat = Heartbeat(mmap.mmap(self._beat_fd, Heartbeat.SIZE))
        self._spawn()

    def heartbeat(self):
        """``(age, stalls, longest)``: seconds since the process's last heartbeat, how many
        times it stalled (a gap above :data:`STALL_SECONDS`) and the longest gap [s]."""
        return self._beat.read()

    def _spawn(self):
        self._beat.write(time.monotonic(), 0, 0.0)
        here, there = socket.socketpair()
        name, namespace, sim = self._args
        env = dict(os.environ)
        # the same mechnode as this process's, wherever it was imported from
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "mechnode.ros.command_process", "--fd", str(there.fileno()),
               "--heartbeat-fd", str(self._beat_fd),
               "--name", name, "--namespace", namespace] + (["--use-sim-time"] if sim else [])
        proc = subprocess.Popen(cmd, pass_fds=(there.fileno(), self._beat_fd), env=env, stdin=subprocess.DEVNULL)
        there.close()
        self._proc, self._conn = proc, Connection(here.detach())

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    # ------------------------------------------------------------------ requests
    def _send(self, *message):
        """Send under the lock held by the caller; a broken pipe is a dead process."""
        try:
            self._conn.send(message)
        except (OSError, ValueError) as exc:
            raise self._failed(f"cannot reach it ({type(exc).__name__}: {exc})") from None

    def _request(self, *message, timeout=REQUEST_TIMEOUT):
        with self._lock:
            if not self.alive:
                raise self._failed("it is not running")
            self._send(*message)
            try:
                ready = self._conn.poll(timeout)
                answer = self._conn.recv() if ready else None
            except (EOFError, OSError) as exc:
                raise self._failed(f"it exited ({type(exc).__name__})") from None
            if answer is None:
                raise self._failed(f"no answer to {message[0]!r} within {timeout} s")
        ok, value = answer
        if not ok:
            raise CommandProcessError(f"command process: {message[0]} failed: {value}")
        return value

    def _failed(self, why: str) -> CommandProcessError:
        """End a process that cannot serve (so that no stale answer is ever read) and say why."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(timeout=0.5)          # it may be exiting on its own
                how = _exit_status(proc.returncode)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5.0)
                how = "killed by this node"
            why += f"; {how}"
        return CommandProcessError(f"command process (pid {proc.pid if proc else '-'}): {why}")

    def configure(self, plant, joint_map_entries, generation: int, use_sim_time: bool | None = None):
        """Build ``plant`` in the process (from ``plant.text``) with the node's ``joint_map``
        entries; a new process if the last one is gone, or if ``use_sim_time`` (the node's
        clock now) differs from the process's: both processes always run on one clock."""
        if use_sim_time is not None and bool(use_sim_time) != self._args[2]:
            self.close()
            self._args = self._args[:2] + (bool(use_sim_time),)
            self._logger.info(f"command process: use_sim_time is now {bool(use_sim_time)}; starting it anew")
        with self._lock:
            if not self.alive:
                if self._proc is not None:
                    self._proc.wait(timeout=5.0)
                self._spawn()
                # _spawn has just set it
                self._logger.warning(f"command process restarted (pid {cast(subprocess.Popen, self._proc).pid})")
        t0 = time.perf_counter()
        self._request("configure", plant.text, plant.dt, plant.source, list(joint_map_entries or ()),
                      plant.locked, getattr(plant, "contacts", None), timeout=CONFIGURE_TIMEOUT)
        return time.perf_counter() - t0

    def start(self, settings):
        self._request("start", settings)

    def install(self, active):
        """Send the schedule in force; logged (not raised) if the process is gone."""
        with self._lock:
            if not self.alive:
                return
            try:
                self._send("install", active)
            except CommandProcessError as exc:
                self._logger.error(str(exc))

    def clock_jump_acknowledged(self):
        """Tell the path that the node has dropped what it timed on the clock before a jump
        (:meth:`CommandPath.clock_jump_acknowledged`); logged (not raised) if the process is gone."""
        with self._lock:
            if not self.alive:
                return
            try:
                self._send("clock_jump_acknowledged")
            except CommandProcessError as exc:
                self._logger.error(str(exc))

    def set_modes(self, command_mode: str, timeout_action: str):
        with self._lock:
            if self.alive:
                try:
                    self._send("set_modes", command_mode, timeout_action)
                except CommandProcessError as exc:
                    self._logger.error(str(exc))

    def status(self) -> dict | None:
        """The path's report (:meth:`CommandPath.status`), or None if the process cannot give it
        (logged once, when that is found)."""
        if self._proc is None:
            return None
        try:
            return self._request("status")
        except CommandProcessError as exc:
            self._logger.error(str(exc))
            return None

    def first_state(self):
        """``(q, qdot, stamp_ns)`` of the first state the path accepted since it was started, or
        None (none yet). Raises :class:`CommandProcessError`."""
        return self._request("first_state")

    def latest_state(self):
        """``(q, qdot, stamp_ns)`` of the latest state the path accepted since it was started,
        or None. Raises :class:`CommandProcessError`."""
        return self._request("latest_state")

    def stop(self):
        """Nothing is published once this returns (or the process is gone)."""
        if self.alive:
            try:
                self._request("stop")
            except CommandProcessError as exc:
                self._logger.error(f"{exc}: ended it")

    def cleanup(self):
        if self.alive:
            try:
                self._request("cleanup")
            except CommandProcessError as exc:
                self._logger.error(str(exc))

    def close(self):
        """End the process (asked first; killed after 2 s)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None:
                return
            try:
                self._conn.send(("close",))
            except (OSError, ValueError):
                pass
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5.0)
            self._conn.close()


def _exit_status(code: int) -> str:
    if code < 0:
        try:
            return f"ended by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"ended by signal {-code}"
    return f"exit status {code}"


# ==================================================================== the heartbeat
#: A heartbeat gap above this is a stall of the command process (it beats every 10 ms).
STALL_SECONDS = 0.2
HEARTBEAT_PERIOD = 0.01


class Heartbeat:
    """A page shared by the two processes: the command process's last beat (``time.monotonic``,
    one clock for every process of the host), its stall count and its longest gap."""
    SIZE = 24

    def __init__(self, page):
        self._page = page
        #: gaps count as stalls only while the path is started (configure holds the interpreter
        #: for seconds while it builds the model: not a stall of the command path)
        self.armed = False

    def write(self, beat: float, stalls: int, longest: float) -> None:
        struct.pack_into("3d", self._page, 0, beat, float(stalls), longest)

    def read(self):
        beat, stalls, longest = struct.unpack_from("3d", self._page, 0)
        return time.monotonic() - beat, int(stalls), longest

    def run(self) -> None:
        """Beat every :data:`HEARTBEAT_PERIOD` (in a thread of the command process); a gap above
        :data:`STALL_SECONDS` (the process was stopped) is counted when it ends."""
        last, stalls, longest = time.monotonic(), 0, 0.0
        was_armed = False
        while True:
            now = time.monotonic()
            gap = now - last
            armed, was_armed = was_armed and self.armed, self.armed
            if armed and gap > STALL_SECONDS:
                stalls += 1
                longest = max(longest, gap)
            self.write(now, stalls, longest)
            last = now
            time.sleep(HEARTBEAT_PERIOD)


# ==================================================================== the process itself
def serve(conn, node_name: str, namespace: str, use_sim_time: bool, heartbeat=None):
    """The command process's main: an rclpy context of its own and a command path, driven by
    the requests on ``conn`` until it closes or asks to close. If the node's main process goes
    away (the connection breaks), the path first applies its timeout action (a zero command by
    default), so the robot is not left with the last torque."""
    import gc

    import numpy as np
    import rclpy
    from rclpy.logging import get_logger

    from mechnode.logic.joint_map import JointMap
    from mechnode.logic.legged import LeggedPlant
    from mechnode.logic.plant import Plant
    from mechnode.ros.command import CommandPath
    from mechnode.ros.diagnostics import Health
    from mechnode.ros.middleware import middleware_environment

    middleware_environment()
    rclpy.init(args=[])          # not the node's arguments: names arrive resolved
    health = Health(get_logger(node_name))
    path = CommandPath(rclpy.get_default_context(), node_name, namespace, health, use_sim_time)
    plant = joint_map = None
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                if path.fail_safe("the node's main process is gone"):
                    time.sleep(0.1)         # (the command leaves before the writer is destroyed)
                break
            kind, args = message[0], message[1:]
            if heartbeat is not None:
                heartbeat.armed = kind in ("start", "install", "set_modes", "status", "first_state",
                                              "latest_state", "clock_jump_acknowledged") and (
                    kind == "start" or heartbeat.armed)
            if kind == "install":
                path.install(args[0])
                continue
            if kind == "set_modes":
                path.set_modes(*args)
                continue
            if kind == "clock_jump_acknowledged":
                path.clock_jump_acknowledged()
                continue
            if kind == "close":
                break
            try:
                value = None
                if kind == "configure":
                    text, dt, source, entries, locked, contacts = args
                    path.close()
                    plant = joint_map = None
                    built: Plant | LeggedPlant
                    if contacts is None:
                        built = Plant.from_text(text, dt, source, locked)
                        # load (or compile) the control kernel now, not at the first state
                        z = np.zeros(built.n)
                        built.vi.feedback(z, z, np.zeros(built.nx), np.zeros(built.nu),
                                          np.zeros((built.nu, built.nx)))
                    else:
                        built = LeggedPlant.from_text(text, dt, source, locked, contacts)
                        built.warm_up()
                    plant = built
                    joint_map = JointMap(built.config_names, entries, built.follower_names)
                    gc.collect()
                    gc.freeze()
                elif kind == "start":
                    if plant is None:
                        raise RuntimeError("not configured")
                    path.start(plant, joint_map, args[0])
                elif kind == "stop":
                    path.stop()
                elif kind == "cleanup":
                    path.close()
                    plant = joint_map = None
                elif kind == "status":
                    value = path.status()
                elif kind == "first_state":
                    value = path.first_state()
                elif kind == "latest_state":
                    value = path.latest_state()
                else:
                    raise ValueError(f"unknown request {kind!r}")
                conn.send((True, value))
            except Exception as exc:  # noqa: BLE001 - every request is answered
                conn.send((False, f"{type(exc).__name__}: {exc}"))
    except KeyboardInterrupt:
        pass
    finally:
        path.close()
        rclpy.try_shutdown()


def main(argv=None) -> int:
    """``python -m mechnode.ros.command_process --fd N --name NAME --namespace NS [--use-sim-time]``:
    started by :class:`CommandProcess`, never by hand (``--fd`` is its end of the socket pair)."""
    ap = argparse.ArgumentParser(prog="mechnode.ros.command_process", description=main.__doc__)
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--use-sim-time", action="store_true")
    ap.add_argument("--heartbeat-fd", type=int)
    args = ap.parse_args(argv)
    beat = None
    if args.heartbeat_fd is not None:
        beat = Heartbeat(mmap.mmap(args.heartbeat_fd, Heartbeat.SIZE))
        threading.Thread(target=beat.run, daemon=True, name="mechnode_heartbeat").start()
    serve(Connection(args.fd), args.name, args.namespace, args.use_sim_time, beat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
