"""Fixtures shared by the test modules.

The constrained double pendulum of Johnson & Murphey (2010), Sec. IV (two 1 m links with 1 kg
point masses, the lower mass held at 1 m from an anchor at x = 2 m, a torque on the base joint)
is written out once, in ``core/data/double_pendulum.yaml``; the tests take it from there as the
file's path, its YAML text, a plain dict or a loaded :class:`core.System`.

Random systems and the independent numpy reference model are in ``tests/randsys.py`` (a helper
module, imported by the tests that need it).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import core

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "core" / "data"
DOUBLE_PENDULUM_PATH = DATA_DIR / "double_pendulum.yaml"


@pytest.fixture(scope="session")
def double_pendulum_path() -> Path:
    """Path of ``core/data/double_pendulum.yaml``."""
    return DOUBLE_PENDULUM_PATH


@pytest.fixture(scope="session")
def double_pendulum_yaml() -> str:
    """The double pendulum's YAML text (q = [theta1, theta2], u = [theta1 torque])."""
    return DOUBLE_PENDULUM_PATH.read_text(encoding="utf-8")


@pytest.fixture
def double_pendulum_spec(double_pendulum_yaml) -> dict:
    """The double pendulum as a plain dict, a fresh copy for every test (tests may edit it)."""
    return yaml.safe_load(double_pendulum_yaml)


@pytest.fixture(scope="module")
def double_pendulum() -> core.System:
    """The double pendulum as a System, one per test module."""
    return core.load_system(DOUBLE_PENDULUM_PATH)
