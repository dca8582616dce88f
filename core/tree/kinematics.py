"""Kinematics of a frame tree, evaluated by recursion in numba: poses, joint screws, velocities
and composite inertias (the exact derivatives of world points built on them: :mod:`core.tree.jets`).

Everything is expressed in the world frame. Twists are 6-vectors ``(v, w)``: ``w`` the angular
velocity and ``v`` the velocity of the (possibly fictitious) point of the moving body at the
world origin. For joint ``k`` (the configuration variable driving one frame) ``S[k]`` is its
world screw: ``dg_f/dq_k = S_k^ g_f`` for every frame ``f`` below the joint.

The two facts that make the derivatives exact and cheap (product-of-exponentials structure):

* a world point ``x`` attached at or below joints ``a <= b <= c`` (ordered root to leaf) has
  ``dx/dq_a = S_a * x``, ``d2x/dq_a dq_b = w_a x (S_b * x)`` and
  ``d3x/dq_a dq_b dq_c = w_a x (w_b x (S_c * x))`` where ``S * x = w x x + v``;
* in a body frame, a Jacobian column ``J_i`` changes only with joints ``a`` strictly below ``i``:
  ``dJ_i/dq_a = [J_i, J_a]`` (Lie bracket), so sums over the bodies below the deepest joint of an
  index tuple fold into composite inertias (see :mod:`core.tree.lagrangian`).

``ancestors(model, j)`` (root first, ``j`` last) are the joints whose variables move joint
``j``'s frame. Per-evaluation scratch lives in :class:`Data`, separate from the immutable model.
"""
from __future__ import annotations

import numpy as np

from core.base.jit import INTO_FLAT, njit
from core.base.records import record_type, set_constructor
from core.model.record import KIND_CONST, KIND_RX, KIND_TX, Model

DATA_FIELDS = [
    "R", "p", "V",           # per frame: world rotation (3x3), position (3), spatial velocity (6)
    "S", "Vp",               # per variable: world screw (6), spatial velocity of the joint's parent
    "Ic", "Hc", "mc", "mp",  # per frame: composite inertia (6x6), momentum (6), mass, first moment
    "D", "DD", "dJ",         # per joint / joint pair: velocity derivative tables (see lagrangian)
    "IcS", "IcD",            # per joint pair (m, j): Ic_m S_j and Ic_m D_j
    "dq",                    # per joint: the velocity of the last forward_kinematics (armature)
    "gravity",               # the gravity the kernels apply, in world coordinates: the model's,
                             # or per evaluation (a quaternion base evaluated in its own frame)
    # the scratch of the tree kernels, so that they allocate nothing per call (contents are
    # whatever the last kernel left; no kernel reads what another wrote here):
    "a", "w",                # per frame (6): accelerations and wrenches of a Newton-Euler pass
    "P",                     # per frame (6x6): composite velocity coupling (rnea's derivatives)
    "rows", "dF",            # per joint: packed rows (3, nj, 12) and wrench derivatives (2, nj, 6)
    "t6", "t3",              # small vectors: (6, 6) and (8, 3)
    # per holonomic row: the world direction and offset of a contact row (HC_DIRECTION),
    # h = hc_dir . (p1 - p2) - hc_off; set per evaluation (the contacts' anchors,
    # core.continuous.contacts), unused by the other kinds
    "hc_dir", "hc_off",
]
DataType, Data = record_type("Data", DATA_FIELDS, __name__)


@njit(cache=True)
def _new_data(*fields):
    return Data(*fields)


set_constructor(Data, _new_data)


def create_data(model: Model, pairs: bool = True):
    """Allocate per-evaluation scratch for ``model`` (one per thread); its gravity is the
    model's. ``pairs``: the per-joint-pair tables of the third order (``DD, dJ, IcS, IcD``,
    ``4 x 48 nj²`` bytes); without them (first and second order) they are empty, and the third
    order refuses such scratch."""
    nf, nq = model.nf, model.nj
    npair = nq if pairs else 0
    return Data(np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 6)),
                np.zeros((nq, 6)), np.zeros((nq, 6)),
                np.zeros((nf, 6, 6)), np.zeros((nf, 6)), np.zeros(nf), np.zeros((nf, 3)),
                np.zeros((nq, 6)), np.zeros((npair, npair, 6)), np.zeros((npair, npair, 6)),
                np.zeros((npair, npair, 6)), np.zeros((npair, npair, 6)), np.zeros(nq),
                np.array(model.gravity, float),
                np.zeros((nf, 6)), np.zeros((nf, 6)), np.zeros((nf, 6, 6)), np.zeros((3, nq, 12)),
                np.zeros((2, nq, 6)), np.zeros((6, 6)), np.zeros((8, 3)),
                np.zeros((model.nh, 3)), np.zeros(model.nh))


@njit(cache=True, nogil=True)
def copy_data(d):
    """Fresh scratch with the same shapes (for parallel evaluations)."""
    return Data(d.R.copy(), d.p.copy(), d.V.copy(), d.S.copy(), d.Vp.copy(), d.Ic.copy(),
                d.Hc.copy(), d.mc.copy(), d.mp.copy(), d.D.copy(), d.DD.copy(), d.dJ.copy(),
                d.IcS.copy(), d.IcD.copy(), d.dq.copy(), d.gravity.copy(), d.a.copy(), d.w.copy(),
                d.P.copy(), d.rows.copy(), d.dF.copy(), d.t6.copy(), d.t3.copy(), d.hc_dir.copy(),
                d.hc_off.copy())


# ------------------------------------------------------------------------------ small algebra
# Inlined into their callers (inline="always"): they are called on rows of arrays, and a row
# view passed to a separate function costs reference counting that the compiler removes only
# once the call is inlined (prepare(): 10.2 -> 5.8 us on the marionette).
@njit(cache=True, nogil=True, inline="always")
def bracket(x, y, out):
    """Lie bracket of twists ``out = [x, y] = ad_x y`` for twists ``(v, w)``."""
    vx0, vx1, vx2, wx0, wx1, wx2 = x[0], x[1], x[2], x[3], x[4], x[5]
    vy0, vy1, vy2, wy0, wy1, wy2 = y[0], y[1], y[2], y[3], y[4], y[5]
    out[0] = wx1 * vy2 - wx2 * vy1 - (wy1 * vx2 - wy2 * vx1)
    out[1] = wx2 * vy0 - wx0 * vy2 - (wy2 * vx0 - wy0 * vx2)
    out[2] = wx0 * vy1 - wx1 * vy0 - (wy0 * vx1 - wy1 * vx0)
    out[3] = wx1 * wy2 - wx2 * wy1
    out[4] = wx2 * wy0 - wx0 * wy2
    out[5] = wx0 * wy1 - wx1 * wy0


@njit(cache=True, nogil=True, inline="always")
def cross_force(x, F, out):
    """Dual action of twist ``x = (v, w)`` on wrench ``F = (f, n)``: ``(w x f, v x f + w x n)``."""
    v0, v1, v2, w0, w1, w2 = x[0], x[1], x[2], x[3], x[4], x[5]
    f0, f1, f2, n0, n1, n2 = F[0], F[1], F[2], F[3], F[4], F[5]
    out[0] = w1 * f2 - w2 * f1
    out[1] = w2 * f0 - w0 * f2
    out[2] = w0 * f1 - w1 * f0
    out[3] = v1 * f2 - v2 * f1 + w1 * n2 - w2 * n1
    out[4] = v2 * f0 - v0 * f2 + w2 * n0 - w0 * n2
    out[5] = v0 * f1 - v1 * f0 + w0 * n1 - w1 * n0


@njit(cache=True, nogil=True, inline="always")
def dot3(x, y):
    """``x . y`` for 3-vectors (``@`` would call BLAS: ~50 ns of overhead for 3 products)."""
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


@njit(cache=True, nogil=True, inline="always")
def dot6(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3] + x[4] * y[4] + x[5] * y[5]


@njit(cache=True, nogil=True, inline="always")
def matvec6(M, x, out):
    for i in range(6):
        s = 0.0
        for j in range(6):
            s += M[i, j] * x[j]
        out[i] = s


@njit(cache=True, nogil=True, inline="always")
def omega_cross(S, x, out):
    """Rotational part only: ``w x x``."""
    out[0] = S[4] * x[2] - S[5] * x[1]
    out[1] = S[5] * x[0] - S[3] * x[2]
    out[2] = S[3] * x[1] - S[4] * x[0]


@njit(cache=True, nogil=True, inline="always")
def _axis_rotation(axis, angle, out):
    c, s = np.cos(angle), np.sin(angle)
    for i in range(3):
        for j in range(3):
            out[i, j] = 0.0
    a, b = (axis + 1) % 3, (axis + 2) % 3
    out[axis, axis] = 1.0
    out[a, a] = c
    out[b, b] = c
    out[a, b] = -s
    out[b, a] = s


# ------------------------------------------------------------------------------ forward pass
@njit(cache=True, nogil=True, inline=INTO_FLAT)
def forward_kinematics(model, q, dq, data):
    """World poses, spatial velocities of all frames and world screws of all joints."""
    R, p, V, S, Vp = data.R, data.p, data.V, data.S, data.Vp
    frame_parent, frame_kind, frame_qindex = model.frame_parent, model.frame_kind, model.frame_qindex
    frame_offset_R, frame_offset_p, frame_value = model.frame_offset_R, model.frame_offset_p, model.frame_value
    t3 = data.t3
    Rpre, Rloc, ppre = t3[:3], t3[3:6], t3[6]
    S[:, :] = 0.0
    Vp[:, :] = 0.0
    for f in range(model.nf):
        par = frame_parent[f]
        oR, op = frame_offset_R[f], frame_offset_p[f]
        if par < 0:
            for i in range(3):
                for j in range(3):
                    Rpre[i, j] = oR[i, j]
                ppre[i] = op[i]
            for i in range(6):
                V[f, i] = 0.0
        else:
            for i in range(3):
                ppre[i] = p[par, i]
                for j in range(3):
                    s = 0.0
                    for k in range(3):
                        s += R[par, i, k] * oR[k, j]
                    Rpre[i, j] = s
                for k in range(3):
                    ppre[i] += R[par, i, k] * op[k]
            for i in range(6):
                V[f, i] = V[par, i]
        kind = frame_kind[f]
        qi = frame_qindex[f]
        value = q[qi] if qi >= 0 else frame_value[f]
        # (element loops, here and below: slice assignments build views, whose reference
        # counting costs more than these few copies)
        for i in range(3):
            for j in range(3):
                R[f, i, j] = Rpre[i, j]
            p[f, i] = ppre[i]
        if kind == KIND_CONST:
            continue
        if kind < KIND_RX:  # translation along an axis of the offset frame
            axis = kind - KIND_TX
            for i in range(3):
                p[f, i] += value * Rpre[i, axis]
            screw = (Rpre[0, axis], Rpre[1, axis], Rpre[2, axis], 0.0, 0.0, 0.0)
        else:  # rotation about an axis of the offset frame, through its origin
            axis = kind - KIND_RX
            _axis_rotation(axis, value, Rloc)
            for i in range(3):
                for j in range(3):
                    R[f, i, j] = Rpre[i, 0] * Rloc[0, j] + Rpre[i, 1] * Rloc[1, j] + Rpre[i, 2] * Rloc[2, j]
            w0, w1, w2 = Rpre[0, axis], Rpre[1, axis], Rpre[2, axis]
            screw = (ppre[1] * w2 - ppre[2] * w1, ppre[2] * w0 - ppre[0] * w2,
                     ppre[0] * w1 - ppre[1] * w0, w0, w1, w2)
        if qi >= 0:
            for i in range(6):
                S[qi, i] = screw[i]
                Vp[qi, i] = V[f, i]
                V[f, i] += screw[i] * dq[qi]
    qd = data.dq
    for j in range(qd.shape[0]):
        qd[j] = dq[j]


@njit(cache=True, nogil=True, inline="always")
def spatial_inertia(m, I_body, R, p, out):
    """World-frame spatial inertia of a mass ``m`` at ``p`` with body inertia ``I_body``:
    ``KE = 1/2 V^T out V`` for the world twist ``V = (v, w)``, i.e.
    ``[[m 1, -m p^], [m p^, R I R^T - m p^ p^]]`` with ``-p^ p^ = |p|^2 1 - p p^T`` (written
    out: no temporaries; ``I_body R^T`` first, then the symmetric lower-right block's upper
    triangle, mirrored: 45 products where the direct double sum takes 162). ``I_body`` must be
    exactly symmetric, as the model's are (``MergedBody.mass_com_inertia`` makes them so)."""
    for k in range(3):      # I_body R^T, held in out's upper right block until that is set
        for j in range(3):
            out[k, 3 + j] = I_body[k, 0] * R[j, 0] + I_body[k, 1] * R[j, 1] + I_body[k, 2] * R[j, 2]
    p0, p1, p2 = p[0], p[1], p[2]
    pp = p0 * p0 + p1 * p1 + p2 * p2
    for i in range(3):
        for j in range(i, 3):
            s = R[i, 0] * out[0, 3 + j] + R[i, 1] * out[1, 3 + j] + R[i, 2] * out[2, 3 + j]
            s += m * ((pp if i == j else 0.0) - p[i] * p[j])
            out[3 + i, 3 + j] = s
            out[3 + j, 3 + i] = s
    mp0, mp1, mp2 = m * p0, m * p1, m * p2
    for i in range(3):
        for j in range(3):
            out[i, j] = m if i == j else 0.0
    out[0, 3], out[0, 4], out[0, 5] = 0.0, mp2, -mp1
    out[1, 3], out[1, 4], out[1, 5] = -mp2, 0.0, mp0
    out[2, 3], out[2, 4], out[2, 5] = mp1, -mp0, 0.0
    out[3, 0], out[3, 1], out[3, 2] = 0.0, -mp2, mp1
    out[4, 0], out[4, 1], out[4, 2] = mp2, 0.0, -mp0
    out[5, 0], out[5, 1], out[5, 2] = -mp1, mp0, 0.0


@njit(cache=True, nogil=True, inline="always")
def body_com(frame_com, R, p, f, out):
    """World position ``p_f + R_f c_f`` of frame ``f``'s centre of mass (``frame_com[f] = c_f``)."""
    c0, c1, c2 = frame_com[f, 0], frame_com[f, 1], frame_com[f, 2]
    for i in range(3):
        out[i] = p[f, i] + R[f, i, 0] * c0 + R[f, i, 1] * c1 + R[f, i, 2] * c2


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def body_inertias(model, data, Ib, has_mass):
    """World spatial inertia ``Ib[f]`` of every frame's own body (needs forward kinematics): the
    inertia about the centre of mass placed at ``p_f + R_f c_f`` (see :func:`body_com`);
    ``has_mass[f]`` is False (and ``Ib[f]`` unset) for frames without mass or inertia."""
    frame_mass, frame_inertia, frame_com, R, p = (model.frame_mass, model.frame_inertia, model.frame_com,
                                                  data.R, data.p)
    pc = data.t3[7]
    for f in range(model.nf):
        m = frame_mass[f]
        has_mass[f] = m > 0.0
        for i in range(3):
            for j in range(3):
                if frame_inertia[f, i, j] != 0.0:
                    has_mass[f] = True
        if has_mass[f]:
            body_com(frame_com, R, p, f, pc)
            spatial_inertia(m, frame_inertia[f], R[f], pc, Ib[f])


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def composites_from_bodies(model, data, Ib, has_mass):
    """Composite inertia, momentum, mass and first moment (``Σ m (p + R c)``) of the subtree
    under every frame, from the body inertias ``Ib`` (which may be ``data.Ic`` itself)."""
    Ic, Hc, mc, mp, V, p, R = data.Ic, data.Hc, data.mc, data.mp, data.V, data.p, data.R
    frame_mass, frame_parent, frame_com = model.frame_mass, model.frame_parent, model.frame_com
    pc = data.t3[7]
    for f in range(model.nf):
        m = frame_mass[f]
        for i in range(6):
            s = 0.0
            for j in range(6):
                Ic[f, i, j] = Ib[f, i, j] if has_mass[f] else 0.0
                s += Ic[f, i, j] * V[f, j]
            Hc[f, i] = s
        mc[f] = m
        body_com(frame_com, R, p, f, pc)
        for i in range(3):
            mp[f, i] = m * pc[i]
    subtree_sums(frame_parent, Ic, Hc, mp)
    for f in range(model.nf - 1, -1, -1):
        if frame_parent[f] >= 0:
            mc[frame_parent[f]] += mc[f]


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def subtree_sums(frame_parent, I, h, m):
    """Each frame's entries of ``I`` (nf, 6, 6), ``h`` (nf, 6) and ``m`` (nf, 3) summed over its
    subtree, in place (frames are numbered parents first). Explicit loops: numba's slice-wise
    += costs more than the arithmetic at this size."""
    for f in range(frame_parent.shape[0] - 1, -1, -1):
        par = frame_parent[f]
        if par >= 0:
            for i in range(6):
                for j in range(6):
                    I[par, i, j] += I[f, i, j]
                h[par, i] += h[f, i]
            for i in range(3):
                m[par, i] += m[f, i]


@njit(cache=True, nogil=True)
def composites(model, data):
    """Composite inertia, momentum, mass and first moment of the subtree under every frame.
    (The body inertias are formed in ``data.Ic`` itself, which composites_from_bodies then
    accumulates in place: no per-call (nf, 6, 6) temporary.)"""
    has_mass = np.empty(model.nf, np.bool_)
    body_inertias(model, data, data.Ic, has_mass)
    composites_from_bodies(model, data, data.Ic, has_mass)
