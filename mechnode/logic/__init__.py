"""The node's logic without ROS: the model (plant), joint names, references resampled and made
feasible, gain schedules, LFC's form, re-planning, state and command limits, wire counts.
Importable and testable without ROS 2 installed."""
