"""End-to-end demo over real DDS: the mechnode node balances a simulated cart-pole while it
tracks a reference, and the tracking error is printed as it converges.

    python -m mechnode.demo [--robot cartpole|arm7|panda] [--timeout 20] [--threshold 0.01] [--in-process]
                            [--replan-period 0.05] [--push 2.0 4.0 -0.5]
    python -m mechnode.demo --robot solo12 [--push 5.0 0.3] [--plot FILE.png]

``--robot solo12``: the node balances the quadruped Solo12 simulated by MuJoCo and recovers from
a lateral push (:mod:`mechnode.demo.legged`).

``--robot arm7`` runs the same loop with the 7-joint arm of ``core/data/arm7.urdf`` instead: the
demo publishes the URDF on ``<namespace>/robot_description`` (std_msgs/String, latched, as
robot_state_publisher does), the node (``config/arm7_params.yaml``) takes its model from
there, joint names and command limits from the URDF; the arm starts 0.03 off a bent pose in every
joint and tracks a lift and shoulder/elbow motion under the node's gains.

``--robot panda`` does the same with ``example-robot-data``'s Panda (the package's
``panda_description/urdf/panda.urdf``; installed by ``scripts/bootstrap.sh`` with the test extras)
and its gripper locked (``config/panda_params.yaml``: ``locked_joints:
["panda_finger_joint1=0.04"]``): the node's model, the simulated robot's model, its JointState
and the effort command have the 7 arm joints. The arm starts 0.05 rad off the reference's first
pose in every joint; the node holds it there from activation (``idle_action: hold``), the demo
checks for a second that it stays, then sends the reference (joints 1, 2, 4 and 6 turn between
0.5 and 3 s). The rest of this docstring describes the cart-pole (whose tilted start no input
can hold: the node refuses the hold, says so in its log, and waits for the reference).

What runs:
* the node, started as its own process exactly as a user would start it
  (``python -m mechnode --ros-args --params-file config/cartpole_params.yaml``, the embedded
  default model ``core/data/cartpole.yaml``) and driven through its lifecycle services
  (configure, activate; at the end deactivate, cleanup, shutdown) — or, with ``--in-process``,
  in this process on its own executor;
* a simulated robot (:class:`mechnode.testing.sim.SimRobot`: the variational integrator stepping at
  ``dt`` in real time against absolute deadlines, publishing ``JointState`` stamped with its
  simulated time, applying the ``Float64MultiArray`` commands), starting with the pole tilted by
  0.15 rad and the cart 0.1 m off the reference. It spins its own single-threaded executor in a
  thread of its own, besides its step thread; the demo's own node (lifecycle client, schedule
  subscription, reference publisher) is spun by another single-threaded executor, and the node
  with ``--in-process`` by a multi-threaded one of its own;
* a reference ``JointTrajectory`` (positions only, stamp zero = start when the gains are ready):
  move the cart by 0.5 m while keeping the pole upright — not dynamically feasible for the
  underactuated cart-pole, so the node makes it feasible with the trajectory optimizer before
  the Riccati pass.

Prints the tracking error ``|q - q_ref(t)|`` every 0.5 s (q_ref from the published
GainSchedule) and exits 0 once the reference has been run through and the error has stayed
below ``--threshold`` for a second, 1 if that does not happen within ``--timeout`` seconds of
activation. At the end it prints the robot's summary line: steps (and their rate), steps with a
fresh command (one that arrived since the previous step; %), commands received, overruns (ticks
started more than a period dt after their deadline) and the maximal lateness of a tick, from the
robot's start (steps from the first command) to the end of the tracking, before the node is
deactivated. DDS discovery is kept on this host (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) on a
private ROS_DOMAIN_ID (the current one if set, else derived from the process id).
"""
from __future__ import annotations

from mechnode.demo.loop import main, run
from mechnode.demo.scenarios import SCENARIOS, arm_reference_points, panda_reference_points, reference_points

__all__ = ["run", "main", "SCENARIOS", "reference_points", "arm_reference_points", "panda_reference_points"]
