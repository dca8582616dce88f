"""mechnode core: exact linearization of tree-structured mechanical systems (numba).

Importing ``core`` never imports ROS. Main entry points:

* :func:`load_system` / :class:`System` — build a model from YAML, a dict or Python calls;
* ``System.qdd``, ``System.linearize``, ``System.momentum``, ``System.energy``,
  ``System.constraint``, ``System.lagrangian_derivatives`` — continuous dynamics;
* :class:`ModelError`, :class:`SingularMatrixError` — what goes wrong, with names.
"""
from .dynamics import SingularMatrixError
from .integrator import DiscreteSystem, IntegratorError, MidpointVI
from .model import Model, ModelError, System, load_system

__all__ = ["System", "Model", "ModelError", "SingularMatrixError", "load_system", "MidpointVI",
           "DiscreteSystem", "IntegratorError"]
__version__ = "0.1.0"
