"""The tracking law of a gain schedule on the integrator's exact state, in one compiled call:
``x = legendre(q, qdot)`` (:mod:`core.discrete.legendre`), ``u = u_ref - K (x - x_ref)`` (the 1 kHz
path of a controller). Front-end: :meth:`core.MidpointVI.feedback`."""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.discrete.legendre import legendre


@njit(cache=True, nogil=True)
def feedback(model, data, der, dyn, kin, q, dq, x_ref, u_ref, K, x, u):
    """The tracking law on the exact discrete state: ``x = legendre(q, qdot)``,
    ``u = u_ref - K (x - x_ref)``. Returns False if an entry of ``u`` is not finite."""
    legendre(model, data, der, dyn, kin, q, dq, x)
    nx, nu = x.shape[0], u.shape[0]
    ok = True
    for r in range(nu):
        s = u_ref[r]
        for j in range(nx):
            s -= K[r, j] * (x[j] - x_ref[j])
        u[r] = s
        if not np.isfinite(s):
            ok = False
    return ok
