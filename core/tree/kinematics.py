"""Kinematics of a frame tree, evaluated by recursion in numba: poses, joint screws, velocities,
composite inertias and exact derivatives of world points.

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
                np.zeros((2, nq, 6)), np.zeros((6, 6)), np.zeros((8, 3)))


@njit(cache=True, nogil=True)
def copy_data(d):
    """Fresh scratch with the same shapes (for parallel evaluations)."""
    return Data(d.R.copy(), d.p.copy(), d.V.copy(), d.S.copy(), d.Vp.copy(), d.Ic.copy(),
                d.Hc.copy(), d.mc.copy(), d.mp.copy(), d.D.copy(), d.DD.copy(), d.dJ.copy(),
                d.IcS.copy(), d.IcD.copy(), d.dq.copy(), d.gravity.copy(), d.a.copy(), d.w.copy(),
                d.P.copy(), d.rows.copy(), d.dF.copy(), d.t6.copy(), d.t3.copy())


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


# ------------------------------------------------------------------------------ point jets
@njit(cache=True, nogil=True, inline="always")
def _frame_point(data, f, local, out):
    """World coordinates of the point with coordinates ``local`` in frame ``f`` (-1 = world)."""
    if f < 0:
        out[:] = local
    else:
        R, p = data.R[f], data.p[f]
        for i in range(3):
            out[i] = R[i, 0] * local[0] + R[i, 1] * local[1] + R[i, 2] * local[2] + p[i]


@njit(cache=True, nogil=True)
def joint_union(model, frames, pos, idx):
    """Union of the ancestor joints of ``frames`` (-1 entries ignored), in variable order.

    Writes the joints into ``idx`` and their compact positions into ``pos`` (``pos`` must be all
    -1 on entry; reset it with ``pos[idx[:k]] = -1`` after use). Returns the count ``k``.
    """
    k = 0
    for f in frames:
        if f < 0 or model.frame_joint[f] < 0:
            continue
        j = model.frame_joint[f]
        for ia in range(model.anc_ptr[j], model.anc_ptr[j + 1]):
            a = model.anc_idx[ia]
            if pos[a] < 0:
                pos[a] = 0
                idx[k] = a
                k += 1
    idx[:k].sort()
    for m in range(k):
        pos[idx[m]] = m
    return k


@njit(cache=True, nogil=True)
def point_jet(model, data, f, local, order, pos, x, X1, X2, X3):
    """World point attached to frame ``f`` and its exact derivatives in ``q``, on compact indices.

    ``X1[pa] = dx/dq_a``, ``X2[pa, pb] = d2x/dq_a dq_b``, ``X3[pa, pb, pc]`` up to ``order``
    (1..3), where ``pa = pos[a]`` (see :func:`joint_union`); rows of joints not above ``f`` are
    left untouched, so callers zero the arrays first.
    """
    _frame_point(data, f, local, x)
    if f < 0 or model.frame_joint[f] < 0:
        return
    j = model.frame_joint[f]
    lo, hi = model.anc_ptr[j], model.anc_ptr[j + 1]
    anc_idx, S = model.anc_idx, data.S
    x0, x1, x2 = x[0], x[1], x[2]
    # scalar code throughout: no temporaries and no array views in the inner loops (each view
    # costs reference counting; this runs per constraint and per spring on every evaluation).
    # Each derivative is computed once and copied to its symmetric slots.
    for ic in range(lo, hi):
        c = anc_idx[ic]
        pc = pos[c]
        y0 = S[c, 4] * x2 - S[c, 5] * x1 + S[c, 0]      # dx/dq_c = w_c x x + v_c
        y1 = S[c, 5] * x0 - S[c, 3] * x2 + S[c, 1]
        y2 = S[c, 3] * x1 - S[c, 4] * x0 + S[c, 2]
        X1[pc, 0], X1[pc, 1], X1[pc, 2] = y0, y1, y2
        if order < 2:
            continue
        for ib in range(lo, ic + 1):
            b = anc_idx[ib]
            pb = pos[b]
            t0 = S[b, 4] * y2 - S[b, 5] * y1             # d2x/dq_b dq_c = w_b x dx/dq_c, b <= c
            t1 = S[b, 5] * y0 - S[b, 3] * y2
            t2 = S[b, 3] * y1 - S[b, 4] * y0
            X2[pb, pc, 0], X2[pb, pc, 1], X2[pb, pc, 2] = t0, t1, t2
            X2[pc, pb, 0], X2[pc, pb, 1], X2[pc, pb, 2] = t0, t1, t2
            if order < 3:
                continue
            for ia in range(lo, ib + 1):
                a = anc_idx[ia]
                pa = pos[a]
                u0 = S[a, 4] * t2 - S[a, 5] * t1
                u1 = S[a, 5] * t0 - S[a, 3] * t2
                u2 = S[a, 3] * t1 - S[a, 4] * t0
                _store_symmetric3(X3, pa, pb, pc, u0, u1, u2)


@njit(cache=True, nogil=True, inline="always")
def _set_symmetric3(H3, a, b, c, s):
    """``H3[i, j, k] = s`` for the six orderings of ``(a, b, c)``."""
    for i, j, k in ((a, b, c), (a, c, b), (b, a, c), (b, c, a), (c, a, b), (c, b, a)):
        H3[i, j, k] = s


@njit(cache=True, nogil=True, inline="always")
def _store_symmetric3(X3, a, b, c, u0, u1, u2):
    """``X3[i, j, k] = u`` for the six orderings of ``(a, b, c)``."""
    for i, j, k in ((a, b, c), (a, c, b), (b, a, c), (b, c, a), (c, a, b), (c, b, a)):
        X3[i, j, k, 0], X3[i, j, k, 1], X3[i, j, k, 2] = u0, u1, u2


@njit(cache=True, nogil=True)
def _bilinear_jet(k, order, u, U1, U2, U3, w, W1, W2, W3, H1, H2, H3):
    """Derivatives of ``h = u . w`` from the jets of the 3-vectors ``u`` and ``w`` (compact
    indices ``0..k-1``); returns ``h`` and fills ``H1``, ``H2``, ``H3`` up to ``order``.
    (Written per component, without row views: this runs per constraint and per spring on
    every evaluation, where views and their reference counting cost more than the sums.)"""
    h = u[0] * w[0] + u[1] * w[1] + u[2] * w[2]
    for a in range(k):
        s = 0.0
        for i in range(3):
            s += U1[a, i] * w[i] + u[i] * W1[a, i]
        H1[a] = s
        if order < 2:
            continue
        for b in range(a + 1):
            s = 0.0
            for i in range(3):
                s += (U2[a, b, i] * w[i] + U1[a, i] * W1[b, i] + U1[b, i] * W1[a, i]
                      + u[i] * W2[a, b, i])
            H2[a, b] = s
            H2[b, a] = s
            if order < 3:
                continue
            for c in range(b + 1):
                s = 0.0
                for i in range(3):
                    s += (U3[a, b, c, i] * w[i] + u[i] * W3[a, b, c, i]
                          + U2[a, b, i] * W1[c, i] + U2[a, c, i] * W1[b, i]
                          + U2[b, c, i] * W1[a, i] + U1[a, i] * W2[b, c, i]
                          + U1[b, i] * W2[a, c, i] + U1[c, i] * W2[a, b, i])
                _set_symmetric3(H3, a, b, c, s)
    return h


@njit(cache=True, nogil=True)
def compose_scalar(k, order, f1, f2, f3, H1, H2, H3):
    """In place: derivatives of phi(h) from those of h, given phi', phi'' and phi''' at h."""
    if order >= 3:
        for a in range(k):
            for b in range(a + 1):
                for c in range(b + 1):
                    s = (f3 * H1[a] * H1[b] * H1[c]
                         + f2 * (H2[a, b] * H1[c] + H2[a, c] * H1[b] + H2[b, c] * H1[a])
                         + f1 * H3[a, b, c])
                    _set_symmetric3(H3, a, b, c, s)
    if order >= 2:
        for a in range(k):
            for b in range(a + 1):
                s = f2 * H1[a] * H1[b] + f1 * H2[a, b]
                H2[a, b] = s
                H2[b, a] = s
    for a in range(k):
        H1[a] *= f1


# Kinds of point-pair scalars, shared by constraints and springs.
PAIR_SQUARED_DISTANCE, PAIR_PLANE, PAIR_AXIS_DIFFERENCE = 0, 1, 2


@njit(cache=True, nogil=True)
def pair_work(kmax, order):
    """Work arrays of :func:`pair_jet` for up to ``kmax`` joints and derivatives up to ``order``:
    three point jets ``j`` = ``(x[j], X1[j], X2[j], X3[j])`` of shapes (3, 3), (3, kmax, 3),
    (3, kmax, kmax, 3), (3, kmax, kmax, kmax, 3) (orders not asked for have size 0).
    Allocated once for many pairs: this runs per constraint and per spring on every evaluation."""
    k2 = kmax if order >= 2 else 0
    k3 = kmax if order >= 3 else 0
    return (np.empty((3, 3)), np.empty((3, kmax, 3)), np.empty((3, k2, k2, 3)),
            np.empty((3, k3, k3, k3, 3)))


@njit(cache=True, nogil=True)
def scalar_jets(kmax, order):
    """``(H1, H2, H3)`` for scalar jets of up to ``kmax`` joints (a jet of ``k`` joints uses
    the leading ``[:k]`` entries of each axis)."""
    k2 = kmax if order >= 2 else 0
    k3 = kmax if order >= 3 else 0
    return np.empty(kmax), np.empty((k2, k2)), np.empty((k3, k3, k3))


@njit(cache=True, nogil=True)
def jets_max_joints(model, f1s, f2s):
    """An upper bound of ``joint_union`` over the frame pairs ``(f1s[r], f2s[r])``: the size to
    allocate per-pair work arrays once for all pairs."""
    kmax = 0
    for r in range(f1s.shape[0]):
        k = 0
        for f in (f1s[r], f2s[r]):
            if f >= 0 and model.frame_joint[f] >= 0:
                j = model.frame_joint[f]
                k += model.anc_ptr[j + 1] - model.anc_ptr[j]
        kmax = max(kmax, k)
    return min(kmax, model.nj)


@njit(cache=True, nogil=True)
def _subtract_jet(x, X1, X2, X3, i, j, k, k2, k3):
    """Point jet ``i`` -= point jet ``j`` in the work arrays of :func:`pair_work`."""
    for c in range(3):
        x[i, c] -= x[j, c]
    for a in range(k):
        for c in range(3):
            X1[i, a, c] -= X1[j, a, c]
    for a in range(k2):
        for b in range(k2):
            for c in range(3):
                X2[i, a, b, c] -= X2[j, a, b, c]
    for a in range(k3):
        for b in range(k3):
            for d in range(k3):
                for c in range(3):
                    X3[i, a, b, d, c] -= X3[j, a, b, d, c]


@njit(cache=True, nogil=True, inline="always")
def _ancestor_range(model, f):
    """``(lo, hi)``: the joints above frame ``f`` are ``model.anc_idx[lo:hi]``, root first
    (empty for the world and for frames without a joint above them)."""
    if f < 0 or model.frame_joint[f] < 0:
        return 0, 0
    j = model.frame_joint[f]
    return model.anc_ptr[j], model.anc_ptr[j + 1]


@njit(cache=True, nogil=True, inline="always")
def _cross_axis(w0, w1, w2, S, a):
    """``w x w_a`` with ``w_a`` the rotational part of joint ``a``'s world screw ``S[a]``."""
    return (w1 * S[a, 5] - w2 * S[a, 4], w2 * S[a, 3] - w0 * S[a, 5], w0 * S[a, 4] - w1 * S[a, 3])


@njit(cache=True, nogil=True)
def _squared_distance_jet(model, data, f1, f2, order, pos, k, H1, H2, H3, work):
    """``|p1 - p2|^2`` up to order 3 from point jets one order lower (constraints and springs
    are the common case, so this path skips the highest point jets).

    With ``w = p1 - p2``: ``h = w . w``, ``dh/dq_a = 2 w . W_a`` and ``d2h/dq_b dq_c =
    2 (W_b . W_c + w . d2w/dq_b dq_c)``, where for ``b`` above ``c`` (both above frame ``f``)
    ``d2p_f/dq_b dq_c = w_b x dp_f/dq_c`` (see :func:`point_jet`), so that
    ``w . d2p_f/dq_b dq_c = (w x w_b) . dp_f/dq_c``; ``f`` = ``f1`` adds, ``f2`` subtracts.
    Likewise ``d3h/dq_a dq_b dq_c = 2 (W_ab . W_c + W_ac . W_b + W_bc . W_a + w . W_abc)``
    with ``w . d3p_f/dq_a dq_b dq_c = (w x w_a) . d2p_f/dq_b dq_c`` for ``a`` above ``b``
    above ``c``.
    """
    x, X1, X2, X3 = work
    x[:2] = 0.0
    X1[:2, :k] = 0.0     # point_jet leaves rows of joints not above its frame untouched
    kj = k if order >= 3 else 0
    X2[:2, :kj, :kj] = 0.0
    origin = np.zeros(3)
    jet_order = 2 if order >= 3 else 1
    point_jet(model, data, f1, origin, jet_order, pos, x[0], X1[0], X2[0], X3[0])
    point_jet(model, data, f2, origin, jet_order, pos, x[1], X1[1], X2[1], X3[1])
    w0, w1, w2 = x[0, 0] - x[1, 0], x[0, 1] - x[1, 1], x[0, 2] - x[1, 2]
    for a in range(k):
        H1[a] = 2.0 * (w0 * (X1[0, a, 0] - X1[1, a, 0]) + w1 * (X1[0, a, 1] - X1[1, a, 1])
                       + w2 * (X1[0, a, 2] - X1[1, a, 2]))
    if order >= 2:
        for a in range(k):
            for b in range(a + 1):
                s = 0.0
                for i in range(3):
                    s += (X1[0, a, i] - X1[1, a, i]) * (X1[0, b, i] - X1[1, b, i])
                H2[a, b] = 2.0 * s
                H2[b, a] = 2.0 * s
        anc_idx = model.anc_idx
        for jet, f, sign in ((0, f1, 2.0), (1, f2, -2.0)):
            lo, hi = _ancestor_range(model, f)
            for ib in range(lo, hi):
                b = anc_idx[ib]
                pb = pos[b]
                c0, c1, c2 = _cross_axis(w0, w1, w2, data.S, b)     # w x w_b
                for ic in range(ib, hi):                # c at or below b
                    pc = pos[anc_idx[ic]]
                    t = sign * (c0 * X1[jet, pc, 0] + c1 * X1[jet, pc, 1] + c2 * X1[jet, pc, 2])
                    H2[pb, pc] += t
                    if pc != pb:
                        H2[pc, pb] += t
    if order >= 3:
        _squared_distance_third(model, data, f1, f2, pos, k, w0, w1, w2, X1, X2, X3, H3)
    return w0 * w0 + w1 * w1 + w2 * w2


@njit(cache=True, nogil=True)
def _squared_distance_third(model, data, f1, f2, pos, k, w0, w1, w2, X1, X2, X3, H3):
    """The third derivatives of :func:`_squared_distance_jet` from the point jets of order 2
    (``X1[f], X2[f]`` for f = 0, 1); ``X3[f][..., 0]`` holds frame f's ``w . W_abc`` term."""
    anc_idx = model.anc_idx
    for jet, f in ((0, f1), (1, f2)):
        D = X3[jet]
        for a in range(k):
            for b in range(k):
                for c in range(k):
                    D[a, b, c, 0] = 0.0
        lo, hi = _ancestor_range(model, f)
        for ia in range(lo, hi):
            a = anc_idx[ia]
            pa = pos[a]
            c0, c1, c2 = _cross_axis(w0, w1, w2, data.S, a)         # w x w_a
            for ib in range(ia, hi):
                pb = pos[anc_idx[ib]]
                for ic in range(ib, hi):
                    pc = pos[anc_idx[ic]]
                    t = (c0 * X2[jet, pb, pc, 0] + c1 * X2[jet, pb, pc, 1]
                         + c2 * X2[jet, pb, pc, 2])
                    # each triple once, written at its orderings (repeated indices: same slot)
                    for i, j2, l in ((pa, pb, pc), (pa, pc, pb), (pb, pa, pc), (pb, pc, pa),
                                     (pc, pa, pb), (pc, pb, pa)):
                        D[i, j2, l, 0] = t
    for a in range(k):
        for b in range(a + 1):
            for c in range(b + 1):
                s = X3[0, a, b, c, 0] - X3[1, a, b, c, 0]
                for i in range(3):   # W_ab . W_c + W_ac . W_b + W_bc . W_a
                    wa, wb = X1[0, a, i] - X1[1, a, i], X1[0, b, i] - X1[1, b, i]
                    wc = X1[0, c, i] - X1[1, c, i]
                    s += ((X2[0, a, b, i] - X2[1, a, b, i]) * wc
                          + (X2[0, a, c, i] - X2[1, a, c, i]) * wb
                          + (X2[0, b, c, i] - X2[1, b, c, i]) * wa)
                s *= 2.0
                _set_symmetric3(H3, a, b, c, s)


@njit(cache=True, nogil=True)
def pair_jet(model, data, kind, f1, f2, axis, order, pos, k, H1, H2, H3, work):
    """Jet of a scalar of frame origins, on compact indices ``0..k-1`` (see ``joint_union``):

    * ``PAIR_SQUARED_DISTANCE``: ``|p1 - p2|^2``;
    * ``PAIR_PLANE``: ``n . (p1 - p2)`` with ``n`` the ``axis`` of frame ``f2`` (the plane frame);
    * ``PAIR_AXIS_DIFFERENCE``: ``(p1 - p2)[axis]`` in world coordinates.

    Returns the value; fills ``H1``, ``H2``, ``H3`` up to ``order``. ``work`` holds the point
    jets (:func:`pair_work`, for at least ``k`` joints and ``order``).
    """
    if kind == PAIR_SQUARED_DISTANCE:
        return _squared_distance_jet(model, data, f1, f2, order, pos, k, H1, H2, H3, work)
    x, X1, X2, X3 = work
    k2 = k if order >= 2 else 0
    k3 = k if order >= 3 else 0
    # point_jet leaves rows of joints not above its frame untouched: clear the three jets
    x[:, :] = 0.0
    X1[:, :k] = 0.0
    X2[:, :k2, :k2] = 0.0
    X3[:, :k3, :k3, :k3] = 0.0
    # jet 0: p1, then w = p1 - p2 in place; jet 1: p2. (Whole kmax-sized jets, of which the
    # first k rows are used: contiguous arrays index faster than sliced ones.)
    w, W1, W2, W3 = x[0], X1[0], X2[0], X3[0]
    origin = np.zeros(3)
    point_jet(model, data, f1, origin, order, pos, w, W1, W2, W3)
    point_jet(model, data, f2, origin, order, pos, x[1], X1[1], X2[1], X3[1])
    _subtract_jet(x, X1, X2, X3, 0, 1, k, k2, k3)
    # jet 2: a constant unit vector (axis difference) or the plane normal
    t, T1, T2, T3 = x[2], X1[2], X2[2], X3[2]
    if kind == PAIR_AXIS_DIFFERENCE:
        t[axis] = 1.0
        return _bilinear_jet(k, order, t, T1, T2, T3, w, W1, W2, W3, H1, H2, H3)
    # plane: n = tip - origin of the plane frame, tip at unit distance along its axis
    local = np.zeros(3)
    local[axis] = 1.0
    point_jet(model, data, f2, local, order, pos, t, T1, T2, T3)
    _subtract_jet(x, X1, X2, X3, 2, 1, k, k2, k3)
    return _bilinear_jet(k, order, t, T1, T2, T3, w, W1, W2, W3, H1, H2, H3)


# ------------------------------------------------------------------------------ fourth order
@njit(cache=True, nogil=True)
def point_rate(model, data, f, pos, k, vk, x, X1, Y4):
    """``Y4[x, y] = d4p/dv dv dq_x dq_y`` of the world point of :func:`point_jet` (its value
    and first derivatives in ``x, X1``), as the rate along ``v`` of ``X3`` contracted with ``v``
    (``vk``: ``v`` on compact indices): for ``a <= b <= c``, ``X3[a, b, c] = w_a x (w_b x y_c)``
    with ``y_c = S_c * p``, whose rate along ``v`` takes ``dw/dv`` and ``dv_c/dv`` from
    ``D_j = [Vp_j, S_j]`` (:func:`core.tree.lagrangian.prepare`) and ``dp/dv = X1 . v``."""
    Y4[:k, :k, :] = 0.0
    if f < 0 or model.frame_joint[f] < 0:
        return
    lo, hi = _ancestor_range(model, f)
    anc_idx, S, D = model.anc_idx, data.S, data.D
    pd = np.zeros(3)
    for a in range(k):
        for i in range(3):
            pd[i] += X1[a, i] * vk[a]
    Xd = np.zeros((k, k, k, 3))
    y, yd, t, td, u = np.empty(3), np.empty(3), np.empty(3), np.empty(3), np.empty(3)
    for ic in range(lo, hi):
        c = anc_idx[ic]
        pc = pos[c]
        for i in range(3):
            y[i] = X1[pc, i]
        # yd = D_c * p + w_c x pd
        yd[0] = D[c, 4] * x[2] - D[c, 5] * x[1] + D[c, 0] + S[c, 4] * pd[2] - S[c, 5] * pd[1]
        yd[1] = D[c, 5] * x[0] - D[c, 3] * x[2] + D[c, 1] + S[c, 5] * pd[0] - S[c, 3] * pd[2]
        yd[2] = D[c, 3] * x[1] - D[c, 4] * x[0] + D[c, 2] + S[c, 3] * pd[1] - S[c, 4] * pd[0]
        for ib in range(lo, ic + 1):
            b = anc_idx[ib]
            pb = pos[b]
            omega_cross(S[b], y, t)             # t = w_b x y_c, td its rate
            omega_cross(D[b], y, td)
            omega_cross(S[b], yd, u)
            for i in range(3):
                td[i] += u[i]
            for ia in range(lo, ib + 1):
                a = anc_idx[ia]
                pa = pos[a]
                omega_cross(D[a], t, u)         # rate of w_a x t
                r0, r1, r2 = u[0], u[1], u[2]
                omega_cross(S[a], td, u)
                _store_symmetric3(Xd, pa, pb, pc, r0 + u[0], r1 + u[1], r2 + u[2])
    for c in range(k):
        if vk[c] != 0.0:
            for a in range(k):
                for b in range(k):
                    for i in range(3):
                        Y4[a, b, i] += vk[c] * Xd[c, a, b, i]


@njit(cache=True, nogil=True, inline="always")
def _contracted(J1, J2, J3, Y4, vk, k, nv, a, b, out):
    """The derivative of a point jet along ``nv`` copies of ``v`` and the compact joints
    ``a`` and ``b`` (-1: absent), from its jets (``Y4`` for ``nv`` = 2 with both joints)."""
    out[:] = 0.0
    na = (a >= 0) + (b >= 0)
    if nv + na == 0:
        return
    if nv == 2 and na == 2:
        for i in range(3):
            out[i] = Y4[a, b, i]
        return
    if nv == 0:
        if na == 1:
            e = a if a >= 0 else b
            for i in range(3):
                out[i] = J1[e, i]
        else:
            for i in range(3):
                out[i] = J2[a, b, i]
        return
    for c in range(k):
        if vk[c] == 0.0:
            continue
        if nv == 1:
            if na == 0:
                for i in range(3):
                    out[i] += vk[c] * J1[c, i]
            elif na == 1:
                e = a if a >= 0 else b
                for i in range(3):
                    out[i] += vk[c] * J2[c, e, i]
            else:
                for i in range(3):
                    out[i] += vk[c] * J3[c, a, b, i]
        else:
            for d in range(k):
                if na == 0:
                    for i in range(3):
                        out[i] += vk[c] * vk[d] * J2[c, d, i]
                else:
                    e = a if a >= 0 else b
                    for i in range(3):
                        out[i] += vk[c] * vk[d] * J3[c, d, e, i]


@njit(cache=True, nogil=True)
def pair_fourth(model, data, kind, f1, f2, axis, pos, k, vk, Q4):
    """``Q4[x, y] = d4h/dv dv dq_x dq_y`` of :func:`pair_jet`'s scalar ``h = t . w`` (compact
    indices; ``vk``: the velocity on them; after :func:`core.tree.lagrangian.prepare`): the product
    rule over the 16 ways to share the four directions between ``t`` and ``w``, with each
    point's jets to order 3 (:func:`point_jet`) and its fourth (:func:`point_rate`)."""
    x, X1, X2, X3 = np.zeros((3, 3)), np.zeros((3, k, 3)), np.zeros((3, k, k, 3)), np.zeros((3, k, k, k, 3))
    Y4 = np.zeros((3, k, k, 3))
    tmp = np.zeros((k, k, 3))
    origin = np.zeros(3)
    point_jet(model, data, f1, origin, 3, pos, x[0], X1[0], X2[0], X3[0])
    point_rate(model, data, f1, pos, k, vk, x[0], X1[0], Y4[0])
    point_jet(model, data, f2, origin, 3, pos, x[1], X1[1], X2[1], X3[1])
    point_rate(model, data, f2, pos, k, vk, x[1], X1[1], tmp)
    _subtract_jet(x, X1, X2, X3, 0, 1, k, k, k)
    Y4[0] -= tmp
    jt = 0                          # t's jet: w itself (squared distance)
    if kind == PAIR_AXIS_DIFFERENCE:
        jt = 2
        x[2, axis] = 1.0            # a constant vector: every derivative zero
    elif kind == PAIR_PLANE:
        jt = 2
        local = np.zeros(3)
        local[axis] = 1.0
        point_jet(model, data, f2, local, 3, pos, x[2], X1[2], X2[2], X3[2])
        point_rate(model, data, f2, pos, k, vk, x[2], X1[2], Y4[2])
        _subtract_jet(x, X1, X2, X3, 2, 1, k, k, k)
        Y4[2] -= tmp
    tv, wv = np.empty(3), np.empty(3)
    for a in range(k):
        for b in range(a + 1):
            s = 0.0
            for nv in range(3):             # copies of v on t's side (binomial weight)
                weight = 1.0 if nv != 1 else 2.0
                for ta in range(2):
                    for tb in range(2):
                        _contracted(X1[jt], X2[jt], X3[jt], Y4[jt], vk, k, nv, a if ta else -1,
                                    b if tb else -1, tv)
                        if nv + ta + tb == 0:
                            tv[:] = x[jt]
                        _contracted(X1[0], X2[0], X3[0], Y4[0], vk, k, 2 - nv, -1 if ta else a,
                                    -1 if tb else b, wv)
                        if 2 - nv + (1 - ta) + (1 - tb) == 0:
                            wv[:] = x[0]
                        s += weight * (tv[0] * wv[0] + tv[1] * wv[1] + tv[2] * wv[2])
            Q4[a, b] = s
            Q4[b, a] = s
