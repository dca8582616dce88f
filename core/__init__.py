"""mechnode core: exact linearization of tree-structured mechanical systems (numba).

Importing ``core`` never imports ROS. The public API is :data:`__all__`, the calls a user makes,
and four public modules, each with its own ``__all__``: :mod:`core.errors` (the error and
warning classes; their base :class:`CoreError` is also here), :mod:`core.datatypes` (the
classes of what the calls take and return: ``Model``, ``Workspace``, ``Trajectory``, the
results), :mod:`core.validation` (the input checks and bounded YAML reading, for code built on
core) and :mod:`core.data` (the packaged models: ``model_file``, ``model_names``). Everything else
is internal. The calls:

* :func:`load_system` / :class:`System` — build a model from YAML, a dict or Python calls;
  ``System.qdd``, ``linearize``, ``momentum``, ``energy``, ``constraint``,
  ``lagrangian_derivatives``, ``input_matrix`` — continuous dynamics; ``System.workspace`` —
  its per-thread scratch;
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
* :func:`optimize_trajectory` (or :class:`TrackingProblem` with :class:`OptimizerOptions`:
  ``problem.cost``, ``problem.cost_and_gradient``, ``problem.solve``), :func:`linearize_trajectory`
  (:mod:`core.control.optimal`);
* :func:`satisfy_constraints`, :func:`project_velocity`, :func:`holding_inputs` — consistent
  states and static equilibria; ``MidpointVI.rest_state`` / ``rest_input`` — the integrator's
  discrete rest state (:mod:`core.continuous.equilibrium`);
* :func:`save_trajectory`, :func:`load_trajectory` — trajectories in ``.npz`` files with their
  state and input names (:mod:`core.io.trajectory`);
* :data:`CONVENTIONS` — state and input order, units, signs, tensor index order;
* :class:`CoreError` — the base of what goes wrong, with names (the rest: :mod:`core.errors`).
"""
from core import cache as _cache  # noqa: I001 - first: drops stale compiled kernels before any is loaded

from core.conventions import CONVENTIONS
from core.continuous.contacts import find_feet
from core.continuous.standing import standing
from core.continuous.equilibrium import holding_inputs, project_velocity, satisfy_constraints
from core.errors import CoreError
from core.general.linearizer import Linearizer
from core.io.loader import load_system, read_model
from core.control.riccati import controllability, dlqr, lqr, tracking_step, tvlqr
from core.control.balance import balance_lqr
from core.control.body_motion import balance_schedule, body_motion
from core.discrete.midpoint import MidpointVI
from core.io.trajectory import load_trajectory, save_trajectory
from core.control.optimal import OptimizerOptions, TrackingProblem, linearize_trajectory, optimize_trajectory
from core.control.simulation import simulate_closed_loop, simulate_open_loop
from core.system import System
from core.io.urdf import load_urdf
from core import data, datatypes, errors, validation  # noqa: F401 - the public modules (PUBLIC_MODULES)

__version__ = "0.1.0"

__all__ = [
    "System", "load_system", "load_urdf", "read_model",
    "MidpointVI", "Linearizer", "from_sympy",
    "tvlqr", "dlqr", "lqr", "tracking_step", "controllability",
    "simulate_open_loop", "simulate_closed_loop",
    "optimize_trajectory", "TrackingProblem", "OptimizerOptions", "linearize_trajectory",
    "satisfy_constraints", "project_velocity", "holding_inputs", "find_feet", "standing", "balance_lqr",
    "body_motion", "balance_schedule",
    "save_trajectory", "load_trajectory",
    "CONVENTIONS", "CoreError",
]

#: The public modules (each with its own ``__all__``) besides ``core`` itself.
PUBLIC_MODULES = ("errors", "datatypes", "validation", "data")

#: Names that left ``core``'s namespace: old name -> (module now holding it, the name there, how
#: to replace it when not by that module's name). Reading ``core.<old name>`` still works, with a
#: DeprecationWarning.
_MOVED = {
    **{name: ("core.validation", name, "") for name in ("check_vector", "too_large", "weight_matrix", "read_yaml")},
    **{name: ("core.errors", name, "") for name in errors.__all__ if name != "CoreError"},
    **{name: ("core.datatypes", name, "") for name in datatypes.__all__},
    **{name: ("core.data", name, "") for name in data.__all__},
    "TREP_ARMIJO": ("core.control.optimal", "TREP_ARMIJO", "use core.OptimizerOptions.TREP_ARMIJO"),
    "trajectory_cost": ("core.control.optimal", "trajectory_cost",
                        "use core.TrackingProblem(system, x0, x_ref, u_ref, Q, R, Q_N).cost(x, u)"),
    "cost_and_gradient": ("core.control.optimal", "cost_and_gradient",
                          "use core.TrackingProblem(system, x0, x_ref, u_ref, Q, R, Q_N).cost_and_gradient(u)"),
}


def __getattr__(name):
    if name in _MOVED:
        import importlib
        import warnings
        module, attr, instead = _MOVED[name]
        warnings.warn(f"core.{name} is deprecated: {instead or f'use {module}.{attr}'}", DeprecationWarning,
                      stacklevel=2)
        return getattr(importlib.import_module(module), attr)
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
