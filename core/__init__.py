"""mechnode core: exact linearization of tree-structured mechanical systems (numba).

Importing ``core`` never imports ROS. Main entry points:

* :func:`load_system` / :class:`System` — build a model from YAML, a dict or Python calls;
* ``System.qdd``, ``System.linearize``, ``System.momentum``, ``System.energy``,
  ``System.constraint``, ``System.lagrangian_derivatives`` — continuous dynamics;
* ``System.linearize_minimal`` — linearization in independent coordinates (:mod:`core.minimal`);
* :class:`Linearizer`, :func:`from_sympy` — general-form linearization of Kane/Lagrange
  equations from elsewhere (:mod:`core.linearizer`, :mod:`core.sympy_bridge`);
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
from .linearizer import Linearizer, LinearizerError
from .minimal import MinimalInfo
from .model import Model, ModelError, System, load_system

__all__ = ["System", "Model", "ModelError", "SingularMatrixError", "load_system", "MidpointVI",
           "IntegratorError", "tvlqr", "dlqr", "controllability", "optimize_trajectory",
           "simulate_closed_loop", "simulate_open_loop", "MinimalInfo", "Linearizer",
           "LinearizerError", "from_sympy"]


def from_sympy(method, *args, **kwargs):
    """A fast numeric :class:`Linearizer` from a SymPy ``KanesMethod``/``LagrangesMethod`` (same
    arguments as ``method.to_linearizer``); needs the ``mechnode[sympy]`` extra."""
    from .sympy_bridge import from_sympy as _from_sympy
    return _from_sympy(method, *args, **kwargs)
__version__ = "0.1.0"
