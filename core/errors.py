"""What goes wrong, in one place: the error classes of ``core`` and the status codes its kernels
report.

Every error is a :class:`CoreError` and also the standard exception a caller would expect
(``ModelError`` and ``LinearizerError`` are ``ValueError``\\ s, ``SingularMatrixError`` and
``RiccatiError`` are ``numpy.linalg.LinAlgError``\\ s, ``IntegratorError`` is an
``ArithmeticError``, ``SingularStepError`` both an ``IntegratorError`` and a
``SingularMatrixError``), so ``except core.CoreError`` catches all of them and existing handlers
keep working. Messages name the offending element (variable, constraint row, step, matrix) and
its value.

Compiled kernels cannot raise with a message; they write one of the status codes below into a
``status`` array (``status[0]`` the code, ``status[1]`` the index it concerns) and the Python
front-end turns it into an exception. The codes are one table for every kernel.

The classes (:data:`__all__`) are public: ``from core.errors import ModelError``. The status
codes are core's own.
"""
from __future__ import annotations

import numpy as np

__all__ = ["CoreError", "ModelError", "SingularMatrixError", "RiccatiError", "IntegratorError",
           "SingularStepError", "NonFiniteError", "EquilibriumError", "ResourceLimitError", "LinearizerError",
           "ModelWarning", "InertiaWarning"]

#: Status codes written by the kernels (``status[0]``); ``status[1]`` names the index concerned.
OK = 0
NONFINITE_INPUT = 1        # an input entry is NaN or infinite (index: its position)
SINGULAR_MASS = 2          # the mass matrix M(q) is singular (index: the variable)
SINGULAR_CONSTRAINTS = 3   # A M^-1 A^T is singular: redundant constraints (index: the row)
NEWTON_FAILED = 4          # the DEL solve did not converge
SINGULAR_JACOBIAN = 5      # the DEL Newton Jacobian is singular (index: the row)
SINGULAR_M_NEXT = 6        # Sec. VII-A: M_k+1 = D2 D1 L_d + D2 F_d^- is singular
SINGULAR_CONSTRAINT_STEP = 7  # Sec. VII-B: Dh(q_k+1) M_k+1^-1 Dh(q_k)^T is singular
OVERFLOW = 8               # the DEL solve converged but its result is not finite (too large)
NONFINITE_INTERMEDIATE = 9  # finite inputs gave a NaN/inf matrix or result (overflow)
BAD_SIZE = 10              # an argument has the wrong length (the front-end's check names it)


class CoreError(Exception):
    """Base class of every error ``core`` raises on purpose."""


class ModelError(CoreError, ValueError):
    """A malformed model; the message names the offending element."""


class SingularMatrixError(CoreError, np.linalg.LinAlgError):
    """A matrix that must be inverted is singular (or numerically so) at the given state.

    ``matrix`` names it; ``index`` is the variable or row where the factorization broke down
    (-1 where no single one is to blame)."""

    def __init__(self, message, matrix: str, index: int = -1):
        super().__init__(message)
        self.matrix = matrix
        self.index = index


class RiccatiError(SingularMatrixError):
    """``R_k + B_kᵀ P_(k+1) B_k`` is singular or not positive definite at step ``step``."""

    def __init__(self, step: int, what: str = "R_k + B_kᵀ P_(k+1) B_k"):
        self.step = step
        super().__init__(f"{what} is singular or not positive definite at step k={step}; "
                         f"check that R is positive definite and Q, Q_N are positive semi-definite",
                         what, step)


class IntegratorError(CoreError, ArithmeticError):
    """The DEL solve failed or the one-step map is singular; ``step``, ``matrix``, ``residual``
    and ``iterations`` say where and how. An ``ArithmeticError``, so callers that try steps
    (line searches) treat it as a failed trial."""

    def __init__(self, message, step=None, matrix=None, residual=None, iterations=None):
        super().__init__(message)
        self.step, self.matrix, self.residual, self.iterations = step, matrix, residual, iterations


class SingularStepError(IntegratorError, SingularMatrixError):
    """The one-step map of the variational integrator is singular at a step (Sec. VII-A:
    ``M_k+1``; VII-B: ``Dh(q_k+1) M_k+1^-1 Dh(q_k)^T``): both an :class:`IntegratorError` (a
    failed trial step) and a :class:`SingularMatrixError` (``matrix`` names which);
    ``measure`` is the scale-aware singularity measure that exceeded the limit."""

    def __init__(self, message, step=None, matrix=None, measure=None):
        Exception.__init__(self, message)
        self.step, self.matrix, self.residual, self.iterations = step, matrix, None, None
        self.index, self.measure = -1, measure


class NonFiniteError(CoreError, ArithmeticError):
    """Finite inputs gave NaN or infinite intermediates (an overflow: an input far too large
    for the model), as opposed to a singular matrix; the message names the largest input."""


class EquilibriumError(CoreError, ArithmeticError):
    """A consistent configuration or a static equilibrium was not found (:mod:`core.continuous.equilibrium`):
    Gauss-Newton did not reach ``h(q) = 0``, or no input holds the configuration; ``residual``
    says how far off (the largest ``|h_r|``, or the unbalanced generalized force)."""

    def __init__(self, message, residual=None):
        super().__init__(message)
        self.residual = residual


class ResourceLimitError(CoreError, MemoryError):
    """A computation would allocate more than its documented limit
    (:data:`core.validation.SECOND_ORDER_MEMORY_LIMIT`): refused before anything is allocated,
    the message says how much and which limit."""


class ModelWarning(UserWarning):
    """A model loaded despite a defect in its description, worked around as the message says
    (the element named); filter it with the ``warnings`` module, or make it an error."""


class InertiaWarning(ModelWarning):
    """A body's inertia is not physical beyond round-off (a negative principal moment, or one
    larger than the sum of the other two) and was loaded as written or repaired, as the inertia
    policy says (:mod:`core.model.inertia`); the message names the body and its principal moments."""


class LinearizerError(CoreError, ValueError):
    """Bad input to :class:`core.Linearizer` (sizes, names, operating points)."""
