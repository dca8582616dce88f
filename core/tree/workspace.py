"""Per-evaluation scratch, made from a model (Pinocchio's ``model.createData()``).

A :class:`Workspace` belongs to one compiled :class:`core.model.record.Model` and hands each thread its
own scratch, so evaluations of one model from several threads never share arrays::

    ws = system.workspace            # made when the system is compiled
    data, der = ws.get()             # this thread's kinematics Data and Lagrangian derivatives
    data, der = ws.get(third_order=True)   # with the (n, n, n) third-derivative arrays
    ev = ws.evaluation()             # this thread's Evaluation: model, data, work, indices, status
    buf = ws.buffer("second_order", size)  # this thread's named work array of that size

Kernels write into these arrays and callers copy what they hand out; nothing in a workspace is
ever returned to a user.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from core.base.jit import njit
from core.base.records import record_type, set_constructor, typed_address
from core.model.record import Model
from core.tree.kinematics import create_data
from core.tree.lagrangian import create_derivs

#: The intermediate results of one tree evaluation (Pinocchio's ``data.M``, ``data.dtau_dq``):
#: allocated once per thread, so that a microsecond kernel allocates nothing. ``n`` variables,
#: ``nf`` frames, ``nj`` joints, ``m`` force inputs, ``nk`` kinematic variables:
#: ``Ib`` (nf, 6, 6) world inertia of each frame's body and ``has_mass`` (nf); ``M``, ``L``
#: (n, n) the mass matrix and its tree factor; ``Vs_q`` (n), ``Ks`` (n, n) the springs' gradient
#: and Hessian; ``Ap`` (nj, 6), ``Ff`` (nf, 6), ``tau`` (n) a Newton-Euler pass (parent
#: accelerations, composite wrenches, bias torques); ``F`` (n), ``Fq``, ``Fv`` (n, n), ``Fu``
#: (n, m) the generalized forces and their derivatives; ``dtau_dq``, ``dtau_dv`` (n, n) the
#: inverse dynamics' derivatives; ``X`` (n, 2n + m + nk) the right-hand sides of the
#: linearization, solved in place; ``ddq`` (n); ``zeros`` (n), kept zero. The articulated-body
#: algorithm's (:func:`core.tree.rnea.articulated_body`): ``IA`` (nf, 6, 6) articulated inertias,
#: ``pA``, ``Af`` (nf, 6) bias wrenches and accelerations, ``live`` (nf) subtrees with a body,
#: ``U``, ``cj`` (nj, 6) and ``Dj``, ``uj`` (nj) per joint, ``v6`` (2, 6) two 6-vectors.
#: ``e2`` (0, 0) and ``e3`` (0, 0, 0), always empty: the outputs a kernel is asked to leave out.
WORK_FIELDS = ["Ib", "has_mass", "M", "L", "Vs_q", "Ks", "Ap", "Ff", "tau", "F", "Fq", "Fv", "Fu",
               "dtau_dq", "dtau_dv", "X", "ddq", "zeros",
               "IA", "pA", "Af", "live", "U", "cj", "Dj", "uj", "v6", "e2", "e3"]
WorkType, Work = record_type("Work", WORK_FIELDS, __name__)

#: What one call of a continuous-dynamics kernel needs besides its arguments, in one record (a
#: record argument costs numba about 0.45 us to dispatch, an array 0.04 us): the model, this
#: thread's Data and Work, the dynamic and kinematic variable indices, and the status the kernel
#: writes (``status[0]`` a code of :mod:`core.errors`, ``status[1]`` the index it concerns).
EVALUATION_FIELDS = ["model", "data", "work", "dyn", "kin", "status"]
EvaluationType, Evaluation = record_type("Evaluation", EVALUATION_FIELDS, __name__)

#: The numba type of every Evaluation (read-only Model arrays, writable Data and Work: the same
#: for every model), which the kernels that take an Evaluation by address
#: (:func:`core.base.records.record_at`) are typed with. Set when the process makes its first one,
#: before any such kernel can compile.
EVALUATION = None


@njit(cache=True)
def _new_work(*fields):
    return Work(*fields)


@njit(cache=True)
def _new_evaluation(*fields):
    return Evaluation(*fields)


set_constructor(Work, _new_work)
set_constructor(Evaluation, _new_evaluation)


def create_work(model: Model, nk: int = 0):
    """A :class:`Work` record sized for ``model`` with ``nk`` kinematic variables."""
    n, nf, nj, m = int(model.nq), int(model.nf), int(model.nj), int(model.nu)
    e = np.empty
    return Work(e((nf, 6, 6)), np.zeros(nf, np.bool_), e((n, n)), e((n, n)), e(n), e((n, n)), e((nj, 6)),
                e((nf, 6)), e(n), e(n), e((n, n)), e((n, n)), e((n, m)), e((n, n)), e((n, n)),
                e((n, 2 * n + m + nk)), e(n), np.zeros(n),
                e((nf, 6, 6)), e((nf, 6)), e((nf, 6)), np.zeros(nf, np.bool_), e((nj, 6)), e((nj, 6)), e(nj), e(nj),
                e((2, 6)), e((0, 0)), e((0, 0, 0)))


class Workspace:
    """Thread-local scratch for evaluations of ``model``: Pinocchio's ``Data``, one per thread,
    made on first use (the model itself never changes).

    Parameters
    ----------
    model : Model
        The compiled model (:attr:`core.System.model`).
    dyn, kin : array_like of int, optional
        Indices of the dynamic and the kinematic configuration variables (default: every
        variable dynamic, none kinematic).
    """

    def __init__(self, model: Model, dyn=None, kin=None):
        self.model = model
        self.dyn = np.arange(model.nq, dtype=np.int64) if dyn is None else np.asarray(dyn, np.int64)
        self.kin = np.zeros(0, np.int64) if kin is None else np.asarray(kin, np.int64)
        #: sizes read on every call (plain attributes: a record field read from Python costs more)
        self.n, self.nu = int(model.nq), int(model.nu) + len(self.kin)
        #: the shapes of ``System.linearize``'s ``A`` and ``B``, made once (building the two
        #: tuples costs about half a microsecond a call)
        self.shape_A, self.shape_B = (2 * self.n, 2 * self.n), (2 * self.n, self.nu)
        #: no constraints: linearize has no multipliers and no consistency check to make
        self.plain = int(model.nh) + int(model.nv) == 0
        self._local = threading.local()

    def evaluation(self):
        """This thread's :class:`Evaluation` record (made once per thread)."""
        ev = self._local.__dict__.get("ev")
        if ev is None:
            ev = Evaluation(self.model, self.get()[0], create_work(self.model, len(self.kin)),
                            self.dyn, self.kin, np.zeros(2, np.int64))
            self._local.address = typed_address(ev, sys.modules[__name__], "EVALUATION")
            self._local.ev = ev
        return ev

    def address(self) -> int:
        """The address of this thread's :class:`Evaluation` (:func:`core.base.records.address`)."""
        try:
            return self._local.address
        except AttributeError:      # (this thread's first evaluation)
            self.evaluation()
            return self._local.address

    def get(self, third_order: bool = False):
        """``(data, der)`` of the calling thread: kinematics scratch and Lagrangian derivative
        arrays (with ``third_order``, also the third derivatives and the joint-pair tables they
        need: ``O(n³)`` and ``O(n²)`` memory that first-order work does not allocate)."""
        local = self._local.__dict__
        key = "third" if third_order else "second"
        pair = local.get(key)
        if pair is None:
            pair = local[key] = (create_data(self.model, third_order), create_derivs(self.model.nq, third_order))
        return pair

    def data_records(self) -> list:
        """The calling thread's kinematics scratch records (:meth:`get`'s, first and third order),
        those made so far and at least the first-order one: what per-evaluation settings (a
        quaternion base's gravity, the contacts' anchors) are written to."""
        self.get()
        local = self._local.__dict__
        return [local[key][0] for key in ("second", "third") if key in local]

    def buffer(self, name: str, shape, dtype=np.float64) -> np.ndarray:
        """The calling thread's work array ``name`` with this shape (reallocated only when the
        shape or type changes; its contents are whatever the last user left)."""
        local = self._local.__dict__
        arr = local.get(name)
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        if arr is None or arr.shape != shape or arr.dtype != dtype:
            arr = local[name] = np.empty(shape, dtype)
        return arr
