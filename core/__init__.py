"""mechnode core: exact linearization of tree-structured mechanical systems (numba).

Importing ``core`` never imports ROS. Main entry points:

* :func:`load_system` / :class:`System` — build a model from YAML, a dict or Python calls;
* ``System.qdd``, ``System.linearize``, ``System.momentum``, ``System.energy``,
  ``System.constraint``, ``System.lagrangian_derivatives`` — continuous dynamics;
* :class:`MidpointVI` — the midpoint variational integrator, its exact first- and second-order
  linearizations (``linearize``, ``linearize2``, ``linearize_trajectory``);
* :func:`tvlqr`, :func:`dlqr`, :func:`controllability`, :func:`optimize_trajectory` — discrete
  LQR and trajectory optimization (:mod:`core.control`);
* :class:`ModelError`, :class:`SingularMatrixError`, :class:`IntegratorError` — what goes
  wrong, with names.
"""
from .dynamics import SingularMatrixError
from .control import (controllability, dlqr, optimize_trajectory, simulate_closed_loop,
                      simulate_open_loop, tvlqr)
from .integrator import IntegratorError, MidpointVI
from .model import Model, ModelError, System, load_system

__all__ = ["System", "Model", "ModelError", "SingularMatrixError", "load_system", "MidpointVI",
           "IntegratorError", "tvlqr", "dlqr", "controllability", "optimize_trajectory",
           "simulate_closed_loop", "simulate_open_loop"]
__version__ = "0.1.0"
