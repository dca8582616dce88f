"""mechnode core: exact linearization of tree-structured mechanical systems (numba).

Importing ``core`` never imports ROS. The public API is :data:`__all__` (with the input checks
of :mod:`core.validation`, its own ``__all__``); everything else is internal. Main entry points:

* :func:`load_system` / :class:`System` — build a model from YAML, a dict or Python calls;
  ``System.qdd``, ``linearize``, ``momentum``, ``energy``, ``constraint``,
  ``lagrangian_derivatives``, ``input_matrix`` — continuous dynamics; ``System.workspace`` —
  its per-thread scratch (:class:`Workspace`);
* :func:`load_urdf` — a :class:`System` from a URDF file or ``/robot_description`` text
  (:mod:`core.io.urdf`);
* :func:`read_model` — what a model argument names (a file, a packaged model, YAML or URDF
  text), read within its size limit: the one resolver of the loader, the CLI and the node;
* ``System.linearize_minimal`` — linearization in independent coordinates (:mod:`core.continuous.minimal`);
* :class:`Linearizer`, :func:`from_sympy` — general-form linearization of Kane/Lagrange
  equations from elsewhere (:mod:`core.general.linearizer`, :mod:`core.general.sympy_bridge`);
* :class:`MidpointVI` — the midpoint variational integrator: ``step``, ``linearize``,
  ``linearize2``, ``step_linearize``, ``linearize_trajectory``, the exact state transforms
  (``discrete_state``, ``continuous_state``, ``state_jacobian``, ``discrete_momenta``), DEL
  inverse dynamics and the tracking law ``feedback`` (:mod:`core.discrete.midpoint`);
* :func:`tvlqr`, :func:`dlqr`, :func:`lqr`, :func:`tracking_step`, :func:`controllability`
  (:mod:`core.control.riccati`);
  :func:`simulate_open_loop`, :func:`simulate_closed_loop` (:mod:`core.control.simulation`);
  :func:`optimize_trajectory`, :func:`linearize_trajectory` (:mod:`core.control.optimal`);
* :func:`satisfy_constraints`, :func:`project_velocity`, :func:`holding_inputs` — consistent
  states and static equilibria; ``MidpointVI.rest_state`` / ``rest_input`` — the integrator's
  discrete rest state (:mod:`core.continuous.equilibrium`);
* :func:`save_trajectory`, :func:`load_trajectory` — trajectories in ``.npz`` files with their
  state and input names (:mod:`core.io.trajectory`);
* :data:`CONVENTIONS` — state and input order, units, signs, tensor index order;
* :class:`CoreError` and its subclasses — what goes wrong, with names (:mod:`core.errors`).
"""
from core import cache as _cache  # noqa: I001 - first: drops stale compiled kernels before any is loaded

from core.conventions import CONVENTIONS
from core.data import model_file, model_names
from core.continuous.equilibrium import holding_inputs, project_velocity, satisfy_constraints
from core.errors import (CoreError, EquilibriumError, InertiaWarning, IntegratorError, LinearizerError, ModelError,
                     ModelWarning, NonFiniteError, ResourceLimitError, RiccatiError, SingularMatrixError,
                     SingularStepError)
from core.general.linearizer import Linearizer
from core.io.loader import ModelText, load_system, read_model, read_yaml
from core.control.riccati import Controllability, controllability, dlqr, lqr, tracking_step, tvlqr
from core.discrete.midpoint import MidpointVI
from core.continuous.minimal import MinimalInfo
from core.model.record import Model
from core.io.trajectory import Trajectory, load_trajectory, save_trajectory
from core.control.optimal import (TREP_ARMIJO, DiscreteSystem, OptimizerOptions, TrackingProblem,
                      TrajectoryOptimizationResult, cost_and_gradient, linearize_trajectory,
                      optimize_trajectory, trajectory_cost)
from core.control.simulation import simulate_closed_loop, simulate_open_loop
from core.system import System
from core.io.urdf import load_urdf
from core import validation
from core.tree.workspace import Workspace

__version__ = "0.1.0"

__all__ = [
    "System", "Model", "Workspace", "load_system", "read_model", "ModelText", "load_urdf", "read_yaml",
    "MidpointVI", "MinimalInfo",
    "Linearizer", "from_sympy",
    "tvlqr", "dlqr", "lqr", "tracking_step", "controllability", "Controllability",
    "simulate_open_loop", "simulate_closed_loop",
    "optimize_trajectory", "TrackingProblem", "OptimizerOptions", "linearize_trajectory",
    "trajectory_cost", "cost_and_gradient",
    "TREP_ARMIJO", "DiscreteSystem", "TrajectoryOptimizationResult",
    "validation", "CONVENTIONS", "model_file", "model_names",
    "CoreError", "ModelError", "SingularMatrixError", "RiccatiError", "IntegratorError",
    "SingularStepError", "NonFiniteError", "LinearizerError", "EquilibriumError", "ModelWarning",
    "InertiaWarning", "ResourceLimitError",
    "satisfy_constraints", "project_velocity", "holding_inputs",
    "save_trajectory", "load_trajectory", "Trajectory", "__version__",
]


#: Names that moved out of ``core``'s namespace (old name -> where it is now); reading
#: ``core.<old name>`` still works, with a DeprecationWarning.
_MOVED = {"check_vector": "validation", "too_large": "validation", "weight_matrix": "validation"}


def __getattr__(name):
    if name in _MOVED:
        import warnings
        warnings.warn(f"core.{name} moved to core.{_MOVED[name]}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(globals()[_MOVED[name]], name)
    raise AttributeError(f"module 'core' has no attribute {name!r}")


def from_sympy(method, *args, **kwargs):
    """A fast numeric linearizer from a SymPy ``KanesMethod``/``LagrangesMethod``; needs the
    ``mechnode[sympy]`` extra. What it generates, and how it differs from SymPy's linearizer:
    ``core/general/sympy_bridge.py``.

    Parameters
    ----------
    method : KanesMethod, LagrangesMethod or sympy.physics.mechanics.Linearizer
        The equations (a ``sympy.physics.mechanics.Linearizer`` is used as it is).
    *args, **kwargs
        The same arguments as ``method.to_linearizer``, and the keyword ``backend``
        (``"python"``, the default, or ``"numba"``).

    Returns
    -------
    core.general.sympy_bridge.SympyLinearizer
        Its ``linearize`` takes the arguments of SymPy's, with a numeric operating point; its
        ``linearizer`` is the numeric :class:`Linearizer` doing the work.

    Raises
    ------
    ImportError
        SymPy is not installed.
    ValueError
        An unknown ``backend``.
    TypeError
        ``method`` is none of these, or ``to_linearizer`` arguments come with a
        ``sympy.physics.mechanics.Linearizer``.
    LinearizerError
        The SymPy equations do not fit the general form (e.g. dynamic symbols that are none of
        its variables, or a part that depends on variables its form does not allow).
    """
    from core.general.sympy_bridge import from_sympy as _from_sympy
    return _from_sympy(method, *args, **kwargs)


del _cache
