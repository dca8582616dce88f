"""The node's idle hold law (ROS-free): :func:`mechnode.logic.gains.hold_schedule`."""
import numpy as np
import pytest

import core
from mechnode.logic.gains import HoldError, hold_schedule
from mechnode.logic.plant import Plant
from mechnode.logic.weights import Weights

ARM_POSE = [0.15, 0.3, 0.6, -0.4, -1.2, 0.5, 0.2]


def _hold(model, q, Q=None, R=None):
    plant = Plant.load(model, 0.01)
    w = Weights.from_values(plant, Q or np.ones(plant.nx), R or np.ones(plant.nu))
    return plant, hold_schedule(plant, q, w, plant.config_names)


def test_the_hold_is_a_fixed_point_with_stabilizing_gains():
    """Arm: the rest state is kept by the holding inputs (gravity held), and the law brings a
    kicked arm back to rest there."""
    plant, s = _hold("arm7.urdf", ARM_POSE, [2500.0] + [100.0] * 6 + [1.0] * 7,    # arm7_params.yaml
                     [1.1e-5, 1.6e-4, 1.6e-4, 6.3e-4, 6.3e-4, 4.4e-3, 1.0e-2])
    assert s.knots == 1 and s.fits(plant) and s.info["kind"] == "hold"
    x, u = s.x_ref[0], s.u_ref[0]
    np.testing.assert_allclose(x[:plant.n], ARM_POSE)
    np.testing.assert_allclose(plant.vi.step(x, u), x, atol=1e-9)
    assert np.abs(u).max() > 1.0                    # gravity is held, not zero torque
    A, B = plant.vi.linearize(x, u)
    assert np.abs(np.linalg.eigvals(A - B @ s.K[0])).max() < 1.0
    xk = plant.vi.discrete_state(np.array(ARM_POSE), 0.3 * np.ones(7))
    for _ in range(500):
        q, dq = plant.vi.continuous_state(xk)
        xk = plant.vi.step(xk, s.command(plant, 123.0, q, dq)[0])   # any time: one knot
    np.testing.assert_allclose(xk[:plant.n], ARM_POSE, atol=1e-6)


def test_a_constrained_model_is_held_on_its_constraints():
    """The constrained double pendulum: q is moved onto the constraint first; the hold's rest
    state is a fixed point (the constraint forces held)."""
    system = core.load_system("double_pendulum.yaml")
    q = core.satisfy_constraints(system, np.full(system.nq, 0.3))
    plant, s = _hold("double_pendulum.yaml", q + 1e-4)
    x, u = s.x_ref[0], s.u_ref[0]
    assert np.abs(system.constraint(x[:plant.n], 0)).max() < 1e-10
    np.testing.assert_allclose(plant.vi.step(x, u), x, atol=1e-8)


def test_holds_that_cannot_be_computed_are_refused_naming_why():
    with pytest.raises(HoldError, match=r"cannot hold q = \[0.1, 0.15\]: an unbalanced generalized force"):
        _hold("cartpole.yaml", [0.1, 0.15])         # underactuated, pole tilted
    _, s = _hold("cartpole.yaml", [0.1, 0.0])       # pole up: an equilibrium, held by LQR
    assert np.all(np.isfinite(s.K))
    with pytest.raises(HoldError, match="not 7 finite numbers"):
        _hold("arm7.urdf", [np.nan] + ARM_POSE[1:])
    with pytest.raises(HoldError, match="not 7 finite numbers"):
        _hold("arm7.urdf", ARM_POSE[1:])
