"""From a reference to a gain schedule: the node's work for one JointTrajectory (ROS-free).

::

    JointMap.reference(...)      joint names -> model order (mechnode.logic.joint_map)
    resample(reference, dt)      knots t_k = t_first + k dt (mechnode.logic.resampling)
    make_feasible(plant, ...)    a dynamically feasible (X, U) near it (mechnode.logic.feasibility)
    gain_schedule(plant, X, U, weights)
                                 exact linearization along (X, U), backward Riccati pass
                                 -> Schedule (mechnode.logic.gains)

:class:`Options` are the node's parameters of the same names.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from mechnode.logic.feasibility import make_feasible
from mechnode.logic.gains import Schedule, gain_schedule
from mechnode.logic.joint_map import JointMap
from mechnode.logic.resampling import Reference, resample
from mechnode.logic.weights import Weights


@dataclass(frozen=True)
class Options:
    """How references become schedules (the node's parameters of the same names)."""
    feasibility: str = "auto"
    optimizer_method: str = "first_order"
    optimizer_tolerance: float = 1e-6
    optimizer_max_iterations: int = 30
    feasibility_tolerance: float = 1e-9
    max_knots: int = 100000
    optimizer_time_limit: float | None = None


def schedule_from_reference(plant, joint_map: JointMap, ref: Reference, weights: Weights,
                            options: Options = Options()) -> Schedule:
    """Resample, make feasible, linearize, Riccati: the node's work for one JointTrajectory.
    ``info`` records the seconds of every stage and how feasibility was obtained."""
    t0 = time.perf_counter()
    t, Q, dQ = resample(ref, plant.dt, options.max_knots)
    t1 = time.perf_counter()
    feas = make_feasible(plant, Q, dQ[0], weights, options.feasibility, options.optimizer_method,
                         options.optimizer_tolerance, options.optimizer_max_iterations,
                         options.feasibility_tolerance, options.optimizer_time_limit)
    info = {"resample_s": t1 - t0, "feasibility_s": feas.seconds, "feasibility": feas.method,
            "feasibility_message": feas.message, "del_residual": feas.residual,
            "optimizer_iterations": feas.iterations, "optimizer_converged": feas.converged,
            "ignored_joints": list(ref.ignored_joints)}
    sched = gain_schedule(plant, feas.X, feas.U, weights, joint_map.joint_names, t, info)
    sched.info["total_s"] = time.perf_counter() - t0
    return sched
