"""The types that ``core``'s calls take and return, for annotations and ``isinstance``.

A user calls the functions and classes of ``core.__all__`` and reads what they return; these are
the classes of those results, in one public place (``from core.datatypes import Model``):

* :class:`Model` — the immutable compiled model (``System.model``);
* :class:`Workspace` — a model's per-thread scratch (``System.workspace``);
* :class:`ModelText` — a model argument read, not parsed (:func:`core.read_model`);
* :class:`MinimalInfo` — the coordinates chosen by ``System.linearize_minimal``;
* :class:`Controllability` — :func:`core.controllability`'s result;
* :class:`Trajectory` — :func:`core.load_trajectory`'s result;
* :class:`TrajectoryOptimizationResult` — :func:`core.optimize_trajectory`'s result;
* :class:`DiscreteSystem` — what the optimizer needs of a discrete system (a ``Protocol``;
  :class:`core.MidpointVI` is one).
"""
from __future__ import annotations

from core.continuous.minimal import MinimalInfo
from core.control.costs import DiscreteSystem
from core.control.optimal import TrajectoryOptimizationResult
from core.control.riccati import Controllability
from core.io.loader import ModelText
from core.io.trajectory import Trajectory
from core.model.record import Model
from core.tree.workspace import Workspace

__all__ = ["Model", "Workspace", "ModelText", "MinimalInfo", "Controllability", "Trajectory",
           "TrajectoryOptimizationResult", "DiscreteSystem"]
