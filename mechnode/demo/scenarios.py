"""The demo's scenarios: for each robot (cart-pole, arm7, Panda) the node's parameter file, the
model the simulated robot steps, its joint names, the reference and the start (see
:mod:`mechnode.demo`)."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

REFERENCE_SECONDS = 5.0
MOVE = (0.5, 2.5, 0.5)      # start [s], end [s], distance [m] of the cart motion
ROBOT_START = {"cart_joint": -0.1, "pole_joint": 0.15}
def smoothstep(s):
    s = np.clip(s, 0.0, 1.0)
    return s ** 3 * (10 - 15 * s + 6 * s ** 2)


def reference_points(step: float = 0.1):
    """(joint names, times, positions): the cart moves by MOVE[2] m, the pole stays up."""
    t = np.arange(0.0, REFERENCE_SECONDS + 1e-9, step)
    cart = MOVE[2] * smoothstep((t - MOVE[0]) / (MOVE[1] - MOVE[0]))
    return ["pole_joint", "cart_joint"], t, np.stack([np.zeros_like(t), cart], axis=1)


#: The arm (core/data/arm7.urdf): from a bent pose, the lift rises 0.1 m and the shoulder pitch and
#: elbow turn (rad) between 0.5 s and 3 s; every joint starts ARM_START_OFFSET off the reference.
ARM_POSE = (0.15, 0.3, 0.6, -0.4, -1.2, 0.5, 0.2)
ARM_MOVE = {"arm_joint1": 0.1, "arm_joint3": 0.3, "arm_joint5": -0.4}
ARM_START_OFFSET = 0.03     # [m or rad]


def _joint_motion(names, pose, move, step):
    """(names, times, positions): from ``pose``, joints ``move`` turn by their value between
    0.5 s and 3 s (smoothstep), then rest until REFERENCE_SECONDS."""
    t = np.arange(0.0, REFERENCE_SECONDS + 1e-9, step)
    s = smoothstep((t - 0.5) / 2.5)
    return names, t, np.stack([q + move.get(j, 0.0) * s for j, q in zip(names, pose, strict=True)], axis=1)


def arm_reference_points(step: float = 0.1):
    """(joint names, times, positions) of the arm, positions only."""
    return _joint_motion([f"arm_joint{i}" for i in range(1, 8)], ARM_POSE, ARM_MOVE, step)


#: The Panda (example-robot-data): from its "ready" pose, joints 1, 2, 4 and 6 turn (rad); it
#: starts PANDA_START_OFFSET off the first pose in every joint, held there by the node.
PANDA_POSE = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
PANDA_MOVE = {"panda_joint1": 0.4, "panda_joint2": 0.3, "panda_joint4": 0.4, "panda_joint6": -0.3}
PANDA_START_OFFSET = 0.05   # [rad]
PANDA_LOCKED = {"panda_finger_joint1": 0.04}     # as in config/panda_params.yaml
PANDA_URDF = "panda_description/urdf/panda.urdf"
#: Seconds the demo watches the node hold a robot (Scenario.hold) before it sends the reference.
HOLD_WATCH = 1.0


def panda_reference_points(step: float = 0.1):
    """(joint names, times, positions) of the Panda's arm, positions only."""
    return _joint_motion([f"panda_joint{i}" for i in range(1, 8)], PANDA_POSE, PANDA_MOVE, step)


def example_robot_file(relative: str, needed_by: str = "this demo") -> str:
    """The path of ``relative`` in the installed ``example-robot-data`` distribution (a data-only
    wheel: found from its file list, nothing imported). Raises RuntimeError saying how to
    install it (``needed_by`` names who needs it)."""
    from importlib import metadata
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        raise RuntimeError(f"{needed_by} needs the example-robot-data package ({relative}): "
                           "scripts/bootstrap.sh installs it with the test extras, or "
                           ".venv/bin/pip install example-robot-data") from None
    for f in dist.files or ():
        if str(f).replace(os.sep, "/").endswith(relative):
            path = str(dist.locate_file(f))
            if os.path.isfile(path):
                return path
    raise RuntimeError(f"example-robot-data {dist.version} is installed but has no {relative}")


def panda_urdf() -> str:
    """The path of ``panda_description/urdf/panda.urdf`` (:func:`example_robot_file`)."""
    return example_robot_file(PANDA_URDF, "--robot panda")


@dataclass(frozen=True)
class Scenario:
    """What the demo drives: the node's parameter file, the model the simulated robot steps
    (the node's own), the JointState names and the reference; ``robot_description``: the
    model is handed to the node on ``<namespace>/robot_description`` (as robot_state_publisher
    publishes a URDF), not through its parameters."""
    name: str
    params: str                 # in config/
    model: str | Callable[[], str]      # packaged with core (core/data/), or () -> a model file's path
    joint_map: tuple            # the node's joint_map entries (the simulated robot's names)
    reference: object           # () -> (joint names, times, positions)
    start: object               # (joint names in model order, reference at t = 0) -> start positions
    robot_description: bool = False
    #: joints locked in the node's model (its locked_joints) and so in the simulated robot's
    locked: tuple = ()
    #: the node holds the robot from activation (idle_action: hold): watched before the reference
    hold: bool = False

    def model_file(self) -> str:
        return self.model() if callable(self.model) else self.model


def _cartpole_start(joint_names, q_ref0):
    return np.array([ROBOT_START[j] for j in joint_names])


def _arm_start(joint_names, q_ref0):
    return q_ref0 + ARM_START_OFFSET


def _panda_start(joint_names, q_ref0):
    return q_ref0 + PANDA_START_OFFSET


SCENARIOS = {
    "cartpole": Scenario("cartpole", "cartpole_params.yaml", "cartpole.yaml",
                         ("x:cart_joint", "theta:pole_joint"), reference_points, _cartpole_start),
    "arm7": Scenario("arm7", "arm7_params.yaml", "arm7.urdf", (), arm_reference_points, _arm_start,
                     robot_description=True),
    "panda": Scenario("panda", "panda_params.yaml", panda_urdf, (), panda_reference_points, _panda_start,
                      robot_description=True, locked=tuple(PANDA_LOCKED.items()), hold=True),
}
