#!/usr/bin/env bash
# The main job of README.md: set up .venv and ROS 2 (idempotent), then start the mechnode node
# with the embedded cart-pole model, a simulated robot and a reference over DDS on this host,
# printing the tracking error until it converges (exit 0) or times out (exit 1).
# --robot arm7 | panda: the 7-joint arm of core/data/arm7.urdf, or example-robot-data's Panda
# with its gripper locked (installed with the test extras by bootstrap.sh), held from activation.
# --robot solo12 [--plot FILE.png]: the quadruped balanced on its feet in MuJoCo, pushed sideways.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
bash "$root/scripts/setup_ros.sh"
cd "$root"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
exec .venv/bin/python -m mechnode.demo "$@"
