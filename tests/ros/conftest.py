"""Fixtures for the ROS 2 tests (real rclpy + Fast DDS, no mocks).

Skipping rule: the ROS tests skip only when rclpy cannot be imported AND the environment variable
MECHNODE_REQUIRE_ROS is unset (or empty / "0"). With MECHNODE_REQUIRE_ROS set, a missing rclpy or a
missing mechnode_interfaces build is a test failure, so CI cannot pass by silently skipping.
If rclpy imports but mechnode_interfaces does not, the tests fail (run scripts/setup_ros.sh).

Isolation: every pytest process uses its own ROS_DOMAIN_ID in 1..100 derived from its pid (set in
the environment at import time, before any rclpy.init, and passed to rclpy.init explicitly), keeps
discovery on this host (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST: no packets leave loopback), and
gives every test its own rclpy Context.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import pytest

REQUIRE_ROS = os.environ.get("MECHNODE_REQUIRE_ROS", "").strip().lower() not in ("", "0", "false", "no")

# Own domain per test run, set before rclpy.init anywhere in this process.
TEST_DOMAIN_ID = 1 + os.getpid() % 100
os.environ["ROS_DOMAIN_ID"] = str(TEST_DOMAIN_ID)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_STATIC_PEERS", None)

# Unique suffix for node / topic / service names, in case two runs share a domain id.
NAME_SUFFIX = f"_{os.getpid()}"

SETUP_HINT = "run scripts/setup_ros.sh (after scripts/bootstrap.sh) to install ROS 2 into .venv"


def _import_rclpy():
    try:
        import rclpy  # noqa: F401
    except Exception as exc:  # ImportError, or a shared library that fails to load
        return None, exc
    return rclpy, None


_rclpy, _rclpy_error = _import_rclpy()


@pytest.hookimpl(tryfirst=True)   # before -m deselects by mark
def pytest_collection_modifyitems(config, items):
    """Every test under tests/ros/ is marked ``ros`` (deselect them with ``-m "not ros"``).

    The hook sees the whole session's items, so it marks only those collected from this
    directory."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in item.path.resolve().parents:
            item.add_marker(pytest.mark.ros)


def pytest_report_header(config):
    if _rclpy is None:
        state = f"rclpy NOT importable ({_rclpy_error!r})"
    else:
        state = "rclpy importable"
    return (f"mechnode ROS tests: {state}; MECHNODE_REQUIRE_ROS={'set' if REQUIRE_ROS else 'unset'}; "
            f"ROS_DOMAIN_ID={TEST_DOMAIN_ID}")


@pytest.fixture(scope="session")
def rclpy_mod():
    """The rclpy module; skips (or fails when MECHNODE_REQUIRE_ROS is set) if it is missing."""
    if _rclpy is None:
        msg = f"rclpy is not importable ({_rclpy_error!r}); {SETUP_HINT}"
        if REQUIRE_ROS:
            pytest.fail("MECHNODE_REQUIRE_ROS is set but " + msg, pytrace=False)
        pytest.skip(msg)
    return _rclpy


@pytest.fixture(scope="session")
def ifaces(rclpy_mod):
    """(mechnode_interfaces.msg, mechnode_interfaces.srv); fails if rclpy is there but they are not."""
    try:
        import mechnode_interfaces.msg as msg
        import mechnode_interfaces.srv as srv
    except Exception as exc:
        pytest.fail(f"rclpy imports but mechnode_interfaces does not ({exc!r}); {SETUP_HINT}",
                    pytrace=False)
    return msg, srv


@pytest.fixture
def ros_context(rclpy_mod):
    """A fresh, initialized rclpy Context on the test domain; shut down after the test."""
    from rclpy.context import Context

    ctx = Context()
    rclpy_mod.init(context=ctx, domain_id=TEST_DOMAIN_ID)
    try:
        yield ctx
    finally:
        rclpy_mod.try_shutdown(context=ctx)


def _spin_until(executor, predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Spin `executor` until predicate() is true; fail clearly after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} "
                        f"(ROS_DOMAIN_ID={TEST_DOMAIN_ID})", pytrace=False)
        executor.spin_once(timeout_sec=0.05)


def _wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait (no spinning: another thread spins) until predicate() is true, bounded."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} "
                        f"(ROS_DOMAIN_ID={TEST_DOMAIN_ID})", pytrace=False)
        time.sleep(0.01)


@pytest.fixture
def spin_until():
    """spin_until(executor, predicate, timeout, what): bounded spinning, clear failure."""
    return _spin_until


@pytest.fixture
def wait_until():
    """wait_until(predicate, timeout, what): bounded wait while another thread spins."""
    return _wait_until


@pytest.fixture
def unique():
    """unique("name") -> "name_<pid>": node/topic/service names that differ between runs."""
    return lambda name: name + NAME_SUFFIX
