"""Recursive Newton-Euler inverse dynamics of the frame tree and its exact first derivatives.

Used by the continuous dynamics (:mod:`core.continuous.dynamics`): the mass matrix from composite inertias,
the bias forces by one Newton-Euler pass, and the derivatives of the inverse dynamics

    tau(q, dq, ddq) = M(q) ddq + L_vq dq - dL/dq        (kinetic energy and gravity only)

with respect to ``q`` and ``dq`` at fixed ``ddq`` (Sec. III of Johnson & Murphey 2010 needs
exactly these). The derivatives cost O(n d) for n variables and tree depth d (O(n^2) along a
chain), instead of the O(n d^2) of contracting third derivatives of L.

Everything is in world coordinates, with twists ``(v, w)`` and wrenches ``(f, n)`` (force, moment
about the world origin) as in :mod:`core.tree.kinematics`. Gravity enters as the acceleration
``(-g, 0)`` of the world (the usual Newton-Euler trick).

Why the derivative along ``q_a`` is cheap: moving ``q_a`` moves the whole subtree below joint
``a`` rigidly with the twist ``S_a``; attached quantities change by ``S_a x .`` (motions) or
``S_a x* .`` (wrenches, inertias as ``S_a x* I - I S_a x``), while the velocity ``Vp_a`` and
acceleration ``Ap_a`` of the joint's parent do not move. So for every frame ``f`` below ``a``
(``W = V_f - Vp_a``)::

    dV_f = S_a x W
    dA_f = S_a x (A_f - Ap_a) - (S_a x Vp_a) x W
    d(I_f X)  = S_a x* (I_f X) + I_f (dX - S_a x X)

and the composite wrench derivative ``dF`` is summed up the subtree; above ``a`` it passes
through unchanged. Along ``dq_a``: ``dV_f = S_a``, ``dA_f = S_a x V_f + 2 Vp_a x S_a``.
"""
from __future__ import annotations

from core.base.jit import INTO_FLAT, njit
from core.tree.kinematics import bracket, cross_force, dot6, matvec6


@njit(cache=True, nogil=True, inline="always")
def _inherit_acceleration(g, parent, A, f):
    """``A[f]`` = its parent frame's acceleration ``A[parent]``, or at a root the world's
    ``(-g, 0)`` (gravity as an acceleration of the world)."""
    if parent < 0:
        A[f, 0], A[f, 1], A[f, 2] = -g[0], -g[1], -g[2]
        A[f, 3] = A[f, 4] = A[f, 5] = 0.0
    else:
        for i in range(6):
            A[f, i] = A[parent, i]


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def mass_matrix(model, data, M):
    """``M[a, b] = S_a . Ic_b S_b`` for ``a`` at or above ``b``, plus the armature on the
    diagonal (needs :func:`composites`)."""
    M[:, :] = 0.0
    IS = data.t6[0]
    # fields read into locals once: each read of a record's field inside a loop costs
    # reference counting (about 1 us per kernel here)
    S, Ic = data.S, data.Ic
    joint_frame, anc_ptr, anc_idx = model.joint_frame, model.anc_ptr, model.anc_idx
    for b in range(model.nj):
        fb = joint_frame[b]
        if fb < 0:
            continue
        matvec6(Ic[fb], S[b], IS)
        for ia in range(anc_ptr[b], anc_ptr[b + 1]):
            a = anc_idx[ia]
            M[a, b] = dot6(S[a], IS)
            M[b, a] = M[a, b]
    armature = model.armature
    for b in range(model.nj):
        M[b, b] += armature[b]


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def newton_euler(model, data, Ib, has_mass, dq, ddq, Ap, F, tau):
    """One Newton-Euler pass: the acceleration ``Ap[j]`` of each joint's parent (gravity
    included), composite wrenches ``F`` and ``tau[j] = S_j . F_(frame of j) + armature_j ddq_j``
    (the rotor's term only for a variable that drives no frame)."""
    g = data.gravity
    frame_parent, frame_qindex, joint_frame = model.frame_parent, model.frame_qindex, model.joint_frame
    S, V, Vp = data.S, data.V, data.Vp
    A, t6 = data.a, data.t6          # frame accelerations; three 6-vectors
    h, tmp, vxs = t6[0], t6[1], t6[2]     # h: body momentum I V
    for f in range(model.nf):
        _inherit_acceleration(g, frame_parent[f], A, f)
        j = frame_qindex[f]
        if j >= 0:
            for i in range(6):
                Ap[j, i] = A[f, i]
            bracket(Vp[j], S[j], vxs)
            for i in range(6):
                A[f, i] += S[j, i] * ddq[j] + vxs[i] * dq[j]
    for f in range(model.nf):
        if has_mass[f]:
            matvec6(Ib[f], V[f], h)
            matvec6(Ib[f], A[f], F[f])
            cross_force(V[f], h, tmp)
            for i in range(6):
                F[f, i] += tmp[i]
        else:
            F[f, :] = 0.0
    for f in range(model.nf - 1, -1, -1):
        par = frame_parent[f]
        if par >= 0:
            for i in range(6):
                F[par, i] += F[f, i]
    armature = model.armature
    for j in range(model.nj):
        fj = joint_frame[j]
        tau[j] = (dot6(S[j], F[fj]) if fj >= 0 else 0.0) + armature[j] * ddq[j]


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def add_joint_accelerations(model, data, Ib, has_mass, ddq, Ap, F):
    """Turn a :func:`newton_euler` pass at ``ddq = 0`` into the pass at ``ddq``: both outputs
    are affine in ``ddq``, so add the joint accelerations ``a_f = Σ_(j above f) S_j ddq_j`` to
    ``Ap`` and the composite wrenches ``Σ_(g below f) I_g a_g`` to ``F`` (a third of a pass)."""
    frame_parent, frame_qindex, S = model.frame_parent, model.frame_qindex, data.S
    nf = model.nf
    a, W = data.a, data.w
    for f in range(nf):
        par = frame_parent[f]
        for i in range(6):
            a[f, i] = a[par, i] if par >= 0 else 0.0
        j = frame_qindex[f]
        if j >= 0:
            for i in range(6):
                Ap[j, i] += a[f, i]
                a[f, i] += S[j, i] * ddq[j]
    for f in range(nf):
        if has_mass[f]:
            matvec6(Ib[f], a[f], W[f])
        else:
            W[f, :] = 0.0
    for f in range(nf - 1, -1, -1):
        par = frame_parent[f]
        if par >= 0:
            for i in range(6):
                W[par, i] += W[f, i]
        for i in range(6):
            F[f, i] += W[f, i]


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def _composite_velocity_coupling(model, data, Ib, has_mass, P):
    """``P_f = Σ_(g below f) I_g (V_g ×)`` for every frame (composite, like ``Ic``).

    Row ``r = (r_a, r_b)`` of ``I`` times ``V× = [[w^, v^], [0, w^]]`` is
    ``(r_a × w, r_a × v + r_b × w)`` (as ``r w^ = (r × w)ᵀ``): three cross products a row
    instead of a dense 6x6 product."""
    frame_parent, Vall = model.frame_parent, data.V
    for f in range(model.nf):
        if has_mass[f]:
            V = Vall[f]
            v0, v1, v2, w0, w1, w2 = V[0], V[1], V[2], V[3], V[4], V[5]
            for i in range(6):
                a0, a1, a2 = Ib[f, i, 0], Ib[f, i, 1], Ib[f, i, 2]
                b0, b1, b2 = Ib[f, i, 3], Ib[f, i, 4], Ib[f, i, 5]
                P[f, i, 0] = a1 * w2 - a2 * w1
                P[f, i, 1] = a2 * w0 - a0 * w2
                P[f, i, 2] = a0 * w1 - a1 * w0
                P[f, i, 3] = a1 * v2 - a2 * v1 + b1 * w2 - b2 * w1
                P[f, i, 4] = a2 * v0 - a0 * v2 + b2 * w0 - b0 * w2
                P[f, i, 5] = a0 * v1 - a1 * v0 + b0 * w1 - b1 * w0
        else:
            P[f, :, :] = 0.0
    for f in range(model.nf - 1, -1, -1):
        par = frame_parent[f]
        if par >= 0:
            for i in range(6):
                for k in range(6):
                    P[par, i, k] += P[f, i, k]


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def inverse_dynamics_derivatives(model, data, Ib, has_mass, Ap, F, dtau_dq, dtau_dv):
    """``dtau_dq[j, a] = dtau_j/dq_a`` and ``dtau_dv[j, a] = dtau_j/d dq_a`` at fixed ``ddq``,
    for the state of the last :func:`newton_euler` pass (its ``Ap`` and composite ``F``; the
    composites ``Ic, Hc`` of :func:`core.tree.kinematics.composites`).

    With the composites ``Ic_j``, ``Hc_j`` and ``P_j = Σ I_f (V_f ×)`` over the subtree of
    joint ``j`` (note ``Σ V_f ×* I_f = -P_jᵀ``), and per joint ``a``: ``c1 = S_a × Ap_a``,
    ``c2 = S_a × Vp_a``, ``c3 = c2 × Vp_a``, summing the per-body derivatives of the module
    docstring over a subtree gives, for ``j`` at or below ``a``
    (the moving-screw term ``(S_a × S_j)·F_j`` cancels ``S_j·(S_a ×* F_j)``)::

        dtau_j/dq_a   = (Ic_j S_j)·(c3 - c1) + G_j·c2
        dtau_j/d dq_a = -G_j·S_a - 2 (Ic_j S_j)·c2,    G_j = P_jᵀ S_j + P_j S_j + S_j ×* Hc_j

    and for ``j`` strictly above ``a``: ``S_j·dF_a`` with the subtree wrench derivatives
    ``dF_a = S_a ×* F_a - Ic_a (c1 - c3) + (P_a + P_aᵀ) c2 - c2 ×* Hc_a`` and
    ``dFv_a = -(P_a + P_aᵀ) S_a - 2 Ic_a c2 + S_a ×* Hc_a``. Four dot products per comparable
    pair: O(n d).
    """
    n = model.nj
    dtau_dq[:, :] = 0.0
    dtau_dv[:, :] = 0.0
    P = data.P
    _composite_velocity_coupling(model, data, Ib, has_mass, P)
    # Per joint, packed so that every pair costs two 12-long and two 6-long dot products:
    #   row_j = (Ic_j S_j, G_j),  col_q_a = (c3 - c1, c2)_a,  col_v_a = (-2 c2, -S)_a
    # (in the Data's scratch: an allocation costs about as much as a joint pair here)
    rows, dFs, t6 = data.rows, data.dF, data.t6
    row, col_q, col_v = rows[0], rows[1], rows[2]
    dF, dFv = dFs[0], dFs[1]                            # subtree wrench derivatives per joint
    c1, c2, c3, t2, SxH = t6[0], t6[1], t6[2], t6[3], t6[4]
    S, Ic, Hc, Vp = data.S, data.Ic, data.Hc, data.Vp
    joint_frame, anc_ptr, anc_idx = model.joint_frame, model.anc_ptr, model.anc_idx
    for j in range(n):
        fj = joint_frame[j]
        if fj < 0:      # (a variable that drives no frame: zero rows)
            for i in range(12):
                row[j, i] = col_q[j, i] = col_v[j, i] = 0.0
            for i in range(6):
                dF[j, i] = dFv[j, i] = 0.0
            continue
        Sj, Icj, Pj, Hcj, Vpj = S[j], Ic[fj], P[fj], Hc[fj], Vp[j]
        bracket(Sj, Ap[j], c1)
        bracket(Sj, Vpj, c2)
        bracket(c2, Vpj, c3)
        cross_force(Sj, Hcj, SxH)
        cross_force(Sj, F[fj], dF[j])
        cross_force(c2, Hcj, t2)
        for i in range(6):
            col_q[j, i] = c3[i] - c1[i]
            col_q[j, 6 + i] = c2[i]
            col_v[j, i] = -2.0 * c2[i]
            col_v[j, 6 + i] = -Sj[i]
        # The five products with Ic_j and P_j + P_jᵀ in one sweep over their entries (each
        # read once, P + Pᵀ never stored), each sum in the order of a plain matrix-vector product:
        #   G_j   = (P_j + P_jᵀ) S_j + S_j ×* Hc_j
        #   dF_j  = S_j ×* F_j - Ic_j (c1 - c3) + (P_j + P_jᵀ) c2 - c2 ×* Hc_j
        #   dFv_j = -(P_j + P_jᵀ) S_j - 2 Ic_j c2 + S_j ×* Hc_j = 2 S_j ×* Hc_j - G_j - 2 Ic_j c2
        d = col_q[j]
        for i in range(6):
            g = SxH[i]
            iS = iD = iC = pC = 0.0
            for k in range(6):
                ic, ps = Icj[i, k], Pj[i, k] + Pj[k, i]
                iS += ic * Sj[k]
                iD += ic * d[k]
                iC += ic * c2[k]
                g += ps * Sj[k]
                pC += ps * c2[k]
            row[j, i] = iS
            row[j, 6 + i] = g
            dF[j, i] += pC + iD - t2[i]
            dFv[j, i] = 2.0 * (SxH[i] - iC) - g
    for j in range(n):
        if joint_frame[j] < 0:
            continue
        # j's packed vectors in locals (registers): the stores into dtau_* below could alias the
        # arrays, so indexing them inside the loop would reload them for every pair
        r0, r1, r2, r3, r4, r5 = row[j, 0], row[j, 1], row[j, 2], row[j, 3], row[j, 4], row[j, 5]
        g0, g1, g2, g3, g4, g5 = row[j, 6], row[j, 7], row[j, 8], row[j, 9], row[j, 10], row[j, 11]
        f0, f1, f2, f3, f4, f5 = dF[j, 0], dF[j, 1], dF[j, 2], dF[j, 3], dF[j, 4], dF[j, 5]
        h0, h1, h2, h3, h4, h5 = dFv[j, 0], dFv[j, 1], dFv[j, 2], dFv[j, 3], dFv[j, 4], dFv[j, 5]
        for ia in range(anc_ptr[j], anc_ptr[j + 1]):
            a = anc_idx[ia]
            cq, cv = col_q[a], col_v[a]
            dtau_dq[j, a] = ((r0 * cq[0] + r1 * cq[1] + r2 * cq[2]) + (r3 * cq[3] + r4 * cq[4] + r5 * cq[5])
                             + (g0 * cq[6] + g1 * cq[7] + g2 * cq[8]) + (g3 * cq[9] + g4 * cq[10] + g5 * cq[11]))
            dtau_dv[j, a] = ((r0 * cv[0] + r1 * cv[1] + r2 * cv[2]) + (r3 * cv[3] + r4 * cv[4] + r5 * cv[5])
                             + (g0 * cv[6] + g1 * cv[7] + g2 * cv[8]) + (g3 * cv[9] + g4 * cv[10] + g5 * cv[11]))
            if a != j:      # (S[a, i], not a view S[a]: a view in a branch costs a reference count)
                s0, s1, s2, s3, s4, s5 = S[a, 0], S[a, 1], S[a, 2], S[a, 3], S[a, 4], S[a, 5]
                dtau_dq[a, j] = ((s0 * f0 + s1 * f1 + s2 * f2) + (s3 * f3 + s4 * f4 + s5 * f5))
                dtau_dv[a, j] = ((s0 * h0 + s1 * h1 + s2 * h2) + (s3 * h3 + s4 * h4 + s5 * h5))


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def articulated_body(model, data, work, dq, tau, ddq, rel_tol):
    """Forward dynamics ``ddq = M^-1 (tau - bias)`` in O(n): Featherstone's articulated-body
    algorithm, in world coordinates (no transforms between frames: every quantity already shares
    one frame). Needs :func:`core.tree.kinematics.forward_kinematics` and the body inertias
    ``work.Ib``, ``work.has_mass`` (``work`` a :class:`core.tree.workspace.Work`, whose arrays hold
    the recursion's intermediates: nothing is allocated); ``tau`` is the applied generalized
    force (gravity and velocity terms are added here).

    Backward pass, leaves first, with articulated inertias ``IA`` and bias wrenches ``pA`` that
    start as each body's ``I_f`` and ``V_f ×* I_f V_f``; for the frame of joint ``j``::

        U = IA S_j,  D_j = S_j·U + armature_j,  u_j = tau_j - S_j·pA,  c_j = [Vp_j, S_j] dq_j
        parent += (IA - U Uᵀ / D_j,  pA + (IA - U Uᵀ / D_j) c_j + U u_j / D_j)

    Forward pass, root first, from the world's acceleration ``(-g, 0)``: with ``a = A_parent +
    c_j``, ``ddq_j = (u_j - U·a) / D_j`` and ``A_f = a + S_j ddq_j``.

    ``D_j`` is the pivot of ``M``'s leaves-first (tree) factorization at ``j``; returns a ``j``
    whose ``D_j`` is not above ``rel_tol`` times the largest pivot (a scale of ``M``'s diagonal
    that costs nothing more to find; ``ddq`` is then unset), or -1. A variable that drives no
    frame has a zero row in ``M``: it is returned as singular. (Callers name the offending
    pivot by factoring ``M`` itself.)
    """
    nf, n = model.nf, model.nj
    frame_parent, frame_qindex, joint_frame = model.frame_parent, model.frame_qindex, model.joint_frame
    S, V, Vp = data.S, data.V, data.Vp
    g, armature = data.gravity, model.armature
    for j in range(n):
        if joint_frame[j] < 0:
            return j
    Ib, has_mass = work.Ib, work.has_mass
    IA, pA, U, D, uj, c = work.IA, work.pA, work.U, work.Dj, work.uj, work.cj
    h, t = work.v6[0], work.v6[1]
    live = work.live      # frames whose subtree has a body
    for f in range(nf):
        live[f] = has_mass[f]
        if has_mass[f]:
            for i in range(6):
                for k in range(6):
                    IA[f, i, k] = Ib[f, i, k]
            matvec6(Ib[f], V[f], h)
            cross_force(V[f], h, pA[f])
        else:
            IA[f, :, :] = 0.0
            pA[f, :] = 0.0
    mdiag = 0.0
    for f in range(nf - 1, -1, -1):
        j = frame_qindex[f]
        par = frame_parent[f]
        if j >= 0:
            Sj, IAf = S[j], IA[f]
            matvec6(IAf, Sj, U[j])
            d = dot6(Sj, U[j]) + armature[j]
            D[j] = d
            uj[j] = tau[j] - dot6(Sj, pA[f])
            mdiag = max(mdiag, d)
            bracket(Vp[j], Sj, c[j])
            for i in range(6):
                c[j, i] *= dq[j]
            if par >= 0 and d != 0.0:
                inv = 1.0 / d
                Uj = U[j]
                for i in range(6):       # IA <- IA - U Uᵀ / D (in place), then its action on c
                    for k in range(6):
                        IAf[i, k] -= Uj[i] * Uj[k] * inv
                matvec6(IAf, c[j], t)
                for i in range(6):
                    pA[f, i] += t[i] + Uj[i] * uj[j] * inv
        if par >= 0 and (live[f] or j >= 0):     # (nothing to add from a subtree without bodies)
            live[par] = True
            for i in range(6):
                for k in range(6):
                    IA[par, i, k] += IA[f, i, k]
                pA[par, i] += pA[f, i]
    tol = rel_tol * max(mdiag, 1e-300)
    for j in range(n):
        if not D[j] > tol:
            return j
    A = work.Af
    for f in range(nf):
        _inherit_acceleration(g, frame_parent[f], A, f)
        j = frame_qindex[f]
        if j >= 0:
            for i in range(6):
                A[f, i] += c[j, i]
            x = (uj[j] - dot6(U[j], A[f])) / D[j]
            ddq[j] = x
            for i in range(6):
                A[f, i] += S[j, i] * x
    return -1
