"""Trajectories to and from .npz (core.io.trajectory): a round trip keeps every number and name,
a file is checked against the model it is loaded for, and nothing in a file is unpickled."""
from __future__ import annotations

import numpy as np
import pytest

import core


@pytest.fixture(scope="module")
def cartpole():
    s = core.load_system("cartpole.yaml")
    return s, core.MidpointVI(s, 0.01)


def _rollout(vi, steps=20):
    x = [vi.state([0.0, 0.1], [0.0, 0.0])]
    u = np.linspace(-1.0, 1.0, steps)[:, None] * np.ones((1, vi.nu))
    for k in range(steps):
        x.append(vi.step(x[-1], u[k]))
    return np.array(x), u


def test_discrete_round_trip_keeps_numbers_names_and_dt(cartpole, tmp_path):
    _, vi = cartpole
    x, u = _rollout(vi)
    path = tmp_path / "swing.npz"
    core.save_trajectory(path, vi, x, u)
    tr = core.load_trajectory(path, vi)
    assert np.array_equal(tr.x, x) and np.array_equal(tr.u, u)
    assert np.array_equal(tr.t, 0.01 * np.arange(21))
    assert tr.state_names == tuple(vi.state_names) and tr.input_names == tuple(vi.input_names)
    assert tr.dt == 0.01 and tr.system == vi.system.name
    # the file alone says what its columns are
    assert core.load_trajectory(path).state_names == tuple(vi.state_names)


def test_continuous_trajectory_needs_times_and_has_no_dt(cartpole, tmp_path):
    s, _ = cartpole
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="t is required"):
        core.save_trajectory(tmp_path / "c.npz", s, x, np.zeros((2, 1)))
    core.save_trajectory(tmp_path / "c.npz", s, x, np.zeros((2, 1)), t=[0.0, 0.5, 1.0])
    tr = core.load_trajectory(tmp_path / "c.npz", s)
    assert tr.dt is None and tr.state_names == tuple(s.state_names)
    assert tr.input_names == tuple(s.continuous_input_names)


def test_shapes_are_checked_with_the_names(cartpole, tmp_path):
    _, vi = cartpole
    with pytest.raises(ValueError, match=r"x must be \(N\+1, 4\) for the states \['x', 'theta', 'p_x'"):
        core.save_trajectory(tmp_path / "b.npz", vi, np.zeros((3, 3)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match=r"u must be \(2, 1\)"):
        core.save_trajectory(tmp_path / "b.npz", vi, np.zeros((3, 4)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="finite"):
        core.save_trajectory(tmp_path / "b.npz", vi, np.full((3, 4), np.nan), np.zeros((2, 1)))


def test_a_file_for_another_model_is_refused_naming_the_column(cartpole, tmp_path):
    _, vi = cartpole
    x, u = _rollout(vi, 3)
    core.save_trajectory(tmp_path / "cp.npz", vi, x, u)
    other = core.MidpointVI(core.load_system("pendulum.yaml"), 0.01)
    with pytest.raises(ValueError, match=r"state column 0 is 'x', the model's is"):
        core.load_trajectory(tmp_path / "cp.npz", other)
    with pytest.raises(ValueError, match=r"dt 0.01 in the file, 0.02 for the model"):
        core.load_trajectory(tmp_path / "cp.npz", core.MidpointVI(vi.system, 0.02))


def test_nothing_in_a_file_is_unpickled(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, format=np.array(core.io.trajectory.FORMAT), t=np.zeros(1), x=np.zeros((1, 1)),
             u=np.zeros((0, 0)), state_names=np.array([object()], dtype=object), input_names=np.array([]),
             dt=np.array(0.1), system=np.array("s"))
    with pytest.raises(ValueError, match="pickle"):
        core.load_trajectory(path)
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="not a trajectory file"):
        core.load_trajectory(tmp_path / "other.npz")
