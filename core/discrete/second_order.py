"""Second-order linearization of the midpoint variational integrator's one-step map: the
tensor ``H[i, a, b] = d2 x_k+1,i / dz_a dz_b`` (Johnson, Schultz & Murphey, Sec. V).

The next configuration and multipliers ``y = (q_k+1,dyn, lam)`` solve ``R(y, z) = 0``, so
``R_y y_zz = -R_ww(W, W)`` with ``W`` the first derivatives of every argument of ``R``. ``R``
depends on ``(q_k, q_k+1)`` only through the midpoint ``xi = (qm, v)``, so its second
derivatives are third derivatives of ``L`` at ``xi`` (and the constraint terms
``lam . D3h(q_k)``, ``D2h(q_k+1)``), taken in the slot variables ``w = (q_k, q_k+1)`` as one
packed symmetric ``2n x 2n`` matrix per residual row (:func:`_pair_tensors`), combined into
the output rows by one product and contracted with ``J = dw/dz`` (:func:`second_order`). The
docs/design.md describes the layout and the shortcuts.
"""
from __future__ import annotations

import numpy as np

from core.base.jit import njit
from core.base.linalg import add_run, copy_run, symmetric_run
from core.discrete.step import input_sources


@njit(cache=True, nogil=True)
def _packed_offsets(nw):
    """Row offsets of a symmetric nw x nw matrix stored as its upper triangle row by row (row
    s holds (s, s..nw-1), nw (nw + 1) / 2 numbers in all): entry (s, t) = (t, s) with s <= t
    is at ``off[s] + t``."""
    off = np.empty(nw, np.int64)
    for s in range(nw):
        off[s] = s * nw - (s * (s - 1)) // 2 - s
    return off


@njit(cache=True, nogil=True)
def _slot_order(n, dyn, kin):
    """Index of each slot variable ``w = (q0, q1)`` in the order of the pair tensors,
    ``w' = [q0, q1_kin, q1_dyn]``: the variables that ``J = dw/dz`` selects (q0 and the
    kinematic part of q1, the ``ns = n + nk`` "selected" ones) come first, the dense q1_dyn
    last. In the packed storage (:func:`_packed_offsets`) the blocks of the contraction are
    then contiguous runs: row s < ns holds its selected part ``(s, s..ns-1)`` followed by its
    q1_dyn part ``(s, ns..2n-1)``; rows from n on hold the q1-q1 block (the only block of the
    constraint rows), rows from ns on the q1_dyn-q1_dyn block."""
    pos = np.empty(2 * n, np.int64)
    for j in range(n):
        pos[j] = j
    for j in range(kin.shape[0]):
        pos[n + kin[j]] = n + j
    for a in range(dyn.shape[0]):
        pos[n + dyn[a]] = n + kin.shape[0] + a
    return pos


@njit(cache=True, nogil=True, inline="always")
def _pair_index(off, a, b):
    """Packed position of the pair (a, b) of reordered slot variables (either order)."""
    return off[a] + b if a <= b else off[b] + a


@njit(cache=True, nogil=True, inline="always")
def _unpack_block(T, off, s0, out):
    """``out`` (m x m) = the symmetric diagonal block of the packed ``T`` (see
    :func:`_packed_offsets`) on rows and columns ``s0 .. s0 + m - 1``."""
    m, flat = out.shape[0], out.ravel()
    for a in range(m):  # upper triangle: the start of each packed row, then its mirror
        copy_run(flat, a * m + a, T, off[s0 + a] + s0 + a, m - a)
    for a in range(m):
        for b in range(a):
            out[a, b] = out[b, a]


@njit(cache=True, nogil=True)
def _pair_tensors(der, dt, dyn, Fqq, Fqv, H3lam, off, pos, TG, TP):
    """Second derivatives of G = D1 L_d + F_d^- and P = D2 L_d (dynamic rows) in the slot
    variables w = (q0, q1): ``TG[a, p] = d2 G_dyn[a] / dw_s dw_t`` at the packed position
    ``p`` of (``pos[s]``, ``pos[t]``) (see :func:`_slot_order`), likewise TP, each a
    symmetric 2n x 2n matrix.

    In the midpoint variables xi = (qm, v) (blocks qq, qv, vv; T_vq = T_qv^T) they are
    G: dt/2 Lqqq_i - Lqqv_.i + dt Fqq_i,  dt/2 Lqqv_i.. - Lqvv_.i. + dt Fqv_i,  dt/2 Lqvv_i..
    (P: + for -, no force; ``Fvv = 0``); with dqm/dq0 = dqm/dq1 = 1/2, dv/dq0 = -1/dt, dv/dq1 = 1/dt the slot blocks are
    T_00 = Tqq/4 - (Tqv + Tvq)/(2dt) + Tvv/dt^2, T_01 = Tqq/4 + (Tqv - Tvq)/(2dt) - Tvv/dt^2,
    T_11 = Tqq/4 + (Tqv + Tvq)/(2dt) + Tvv/dt^2. ``- lam . D3h(q0)`` enters G's q0 block.
    """
    n = der.Lqqq.shape[0]
    Lqqq, Lqqv, Lqvv = der.Lqqq, der.Lqqv, der.Lqvv
    constrained, forced = H3lam.shape[0] > 0, Fqq.shape[0] > 0    # (else they are empty)
    damped = Fqv.shape[0] > 0
    half, c1, c2 = 0.5 * dt, 0.5 / dt, 1.0 / (dt * dt)
    for a in range(dyn.shape[0]):
        i = dyn[a]
        G, P = TG[a], TP[a]
        for j in range(n):
            pj = pos[n + j]
            for k in range(j, n):
                lqq = half * Lqqq[i, j, k]
                lvv = half * Lqvv[i, j, k] * c2
                # qv blocks (j from qm, k from v) and their transposes (k from qm, j from v)
                qv_jk = half * Lqqv[i, j, k]
                qv_kj = half * Lqqv[i, k, j]
                pqv_jk, pqv_kj = (qv_jk + Lqvv[j, i, k]) * c1, (qv_kj + Lqvv[k, i, j]) * c1
                if damped:
                    qv_jk += dt * Fqv[i, j, k]
                    qv_kj += dt * Fqv[i, k, j]
                gqv_jk, gqv_kj = (qv_jk - Lqvv[j, i, k]) * c1, (qv_kj - Lqvv[k, i, j]) * c1
                gqq = 0.25 * (lqq - Lqqv[j, k, i] + (dt * Fqq[i, j, k] if forced else 0.0))
                pqq = 0.25 * (lqq + Lqqv[j, k, i])
                # blocks 00, 11, 01 (j in q0, k in q1) and 10 (j in q1, k in q0); q0 comes
                # first in w', so only the 11 pair needs ordering (unsigned positions: see
                # core.base.linalg.add_run)
                pk = pos[n + k]
                s00, s11 = np.uint64(off[j] + k), np.uint64(_pair_index(off, pj, pk))
                s01, s10 = np.uint64(off[j] + pk), np.uint64(off[k] + pj)
                G[s00] = gqq - gqv_jk - gqv_kj + lvv - (H3lam[i, j, k] if constrained else 0.0)
                G[s11] = gqq + gqv_jk + gqv_kj + lvv
                G[s01] = gqq + gqv_jk - gqv_kj - lvv
                G[s10] = gqq + gqv_kj - gqv_jk - lvv
                P[s00] = pqq - pqv_jk - pqv_kj + lvv
                P[s11] = pqq + pqv_jk + pqv_kj + lvv
                P[s01] = pqq + pqv_jk - pqv_kj - lvv
                P[s10] = pqq + pqv_kj - pqv_jk - lvv


@njit(cache=True, nogil=True)
def second_order_scratch(n, nd, nc):
    """Length of the work space of the second-order linearization: the packed symmetric
    (2n)^2 pair tensors of the nd G rows, of P's nd rows and of the 2 nd output rows, and the
    q1-q1 blocks (n (n + 1) / 2 numbers) of the nc constraint rows."""
    return 4 * nd * n * (2 * n + 1) + nc * ((n * (n + 1)) // 2)


@njit(cache=True, nogil=True)
def contracted_scratch(n, nc):
    """Length of the work space of :func:`contracted_second_order`: one packed pair tensor
    and the constraint rows' q1-q1 blocks."""
    return n * (2 * n + 1) + nc * ((n * (n + 1)) // 2)


@njit(cache=True, nogil=True)
def _combination_weights(nd, Ry_inv, Pq1d):
    """``N`` (2 nd x ny): output row ``o`` (q1_dyn, then p1) is ``N[o] . RHS`` (see
    :func:`second_order`): ``N = [-R_y^-1[:nd]; Pq1 (-R_y^-1[:nd])]``."""
    Nc = np.empty((2 * nd, Ry_inv.shape[0]))
    Nc[:nd] = -Ry_inv[:nd]
    Nc[nd:] = Pq1d @ np.ascontiguousarray(Nc[:nd])
    return Nc


@njit(cache=True, nogil=True)
def costate_directions(n, dt, dyn, Ry_inv, Pq1d, w):
    """For the contraction ``W = sum_i w_i H[i]`` (``w`` over x_k+1's rows): the residual
    rows' weights ``ell = w_out N`` (1 x ny; ``w_out`` = w on the q1_dyn and p1 rows) and the
    direction ``(wq, wv)`` along which the Lagrangian's Hessian is differentiated. With
    ``s = ell_G + w_p`` and ``d = w_p - ell_G`` on the dynamic rows (G and P weighted as in
    :func:`_pair_tensors`), every Lagrangian term of ``sum ell_G T_G + w_p T_P`` is an entry
    of ``dLqq, dLqv, dLvv`` along ``wq = dt/2 s``, ``wv = d``."""
    nd = dyn.shape[0]
    # ell = w_q N[:nd] + w_p N[nd:] = -(w_q + Pq1^T w_p) R_y^-1[:nd] (a vector, no N)
    c = np.empty((1, nd))
    for a in range(nd):
        s = w[dyn[a]]
        for b in range(nd):
            s += Pq1d[b, a] * w[n + b]
        c[0, a] = -s
    ell = c @ np.ascontiguousarray(Ry_inv[:nd])
    wq, wv = np.zeros(n), np.zeros(n)
    for a in range(nd):
        i = dyn[a]
        wq[i] = 0.5 * dt * (ell[0, a] + w[n + a])
        wv[i] = w[n + a] - ell[0, a]
    return ell, wq, wv


@njit(cache=True, nogil=True)
def _layout(n, nc, scratch, rows):
    """Packed sizes (:func:`_packed_offsets`), the slot order's offsets and the views of
    ``scratch`` for ``rows`` packed tensors and the constraint rows' q1-q1 tails."""
    nw = 2 * n
    size = n * (nw + 1)
    tail0 = n * nw - (n * (n - 1)) // 2       # = off[n] + n
    ntail = size - tail0
    need = rows * size + nc * ntail
    if scratch.shape[0] < need:
        scratch = np.empty(need)
    T = scratch[:rows * size].reshape(rows, size)
    Tc = scratch[rows * size:need].reshape(nc, ntail)
    return _packed_offsets(nw), T, Tc, tail0


@njit(cache=True, nogil=True)
def _add_constraint_tails(D2h1, weights, off, pos, tail0, Tc, Tout):
    """``Tout[o] += sum_r weights[o, r] T_r``, ``T_r`` the pair tensor of constraint row
    ``r`` (its q1-q1 block ``D2h_r(q_k+1)``, the packed storage's tail from row n on)."""
    nc, n = D2h1.shape[0], D2h1.shape[1]
    if nc == 0:
        return
    for r in range(nc):
        for j in range(n):
            for k in range(j, n):
                Tc[r, _pair_index(off, pos[n + j], pos[n + k]) - tail0] = D2h1[r, j, k]
    tail = np.ascontiguousarray(weights) @ Tc
    for o in range(Tout.shape[0]):
        add_run(Tout[o], tail0, tail[o], 0, Tc.shape[1], 1.0)


@njit(cache=True, nogil=True)
def second_order(der, dt, dyn, kin, Fqq, Fqv, Fqu, Gu, H3lam, D2h0, D2h1, Ry_inv, Rzq, Pq1d, Q1, Lam,
                  H, scratch):
    """Second derivatives of ``x_k+1`` (see the module docstring); H's kinematic rows are 0.

    The unknowns y = (q1_dyn, lam) solve R(y, z) = 0, R = [G + p0 - Dh(q0)^T lam; h(q1)]; so
    ``q1_dyn,zz = N RHS`` with ``N = -(R_y^-1)[:nd]`` and ``RHS_b = R_b,ww(J, J)`` + cross terms,
    ``J = d(q0, q1)/dz``; and ``p1_zz = P_ww(J, J) + Pq1 q1_dyn,zz``. Every output row is thus
    a combination of the pair tensors (packed symmetric, in the slot order of
    :func:`_slot_order`), formed first in the small (2n)^2 space (one product; the constraint
    rows only have a q1-q1 block) and contracted once. J's rows for q0 and the kinematic part
    of q1 select a column of z; only its nd rows for q1_dyn are dense, joined by the nc rows
    of dlam/dz for the multipliers' q0-lam cross term (together ``Y``), so per output row the
    work is two products with Y (:func:`_contract`; without constraints and kinematic variables
    :func:`_contract_plain`, using ``Rzq``, the G_q0 block of R's first-order derivative).
    The contraction works in z' = [q0, rho1, p0, u] (the selected columns first; v_k, on
    which nothing depends, left out), and :func:`_expand` writes z' into z's order. Inputs
    that act as ``p0 + dt Fu u`` with constant ``Fu`` are left out of z' too and copied from
    the p0 rows and columns afterwards.
    The pair tensors live in ``scratch`` (see :func:`second_order_scratch`; reallocated if too
    small): allocating megabytes per call made glibc return them to the OS and fault them
    back in, which cost as much as the arithmetic.
    """
    n, nd, nk = Q1.shape[0], dyn.shape[0], kin.shape[0]
    for j in range(nk):  # q1_kin = rho1 and v1 are linear in z
        H[kin[j]] = 0.0
        H[n + nd + j] = 0.0
    if nd == 0:  # everything prescribed: x_k+1 is linear in z
        H[:, :, :] = 0.0
        return
    # combination weights: rows 0..nd-1 give q1_dyn, rows nd..2nd-1 give p1
    Nc = _combination_weights(nd, Ry_inv, Pq1d)
    # pair tensors of every residual row: G rows, then P's (symmetric: stored packed, which
    # halves the memory traffic of the combination product), combined into the output rows
    off, T, Tc, tail0 = _layout(n, Lam.shape[0], scratch, 4 * nd)
    Tin, TP, Tout = T[:nd], T[nd:2 * nd], T[2 * nd:]
    pos = _slot_order(n, dyn, kin)
    _pair_tensors(der, dt, dyn, Fqq, Fqv, H3lam, off, pos, Tin, TP)
    Ncg = np.ascontiguousarray(Nc[:, :nd])
    np.dot(Ncg, Tin, Tout)
    _add_constraint_tails(D2h1, Nc[:, nd:], off, pos, tail0, Tc, Tout)
    Tout[nd:] += TP
    rows = np.empty(2 * nd, np.int64)
    for a in range(nd):
        rows[a], rows[nd + a] = dyn[a], n + a
    _contract_rows(Tout, Ncg, off, dt, dyn, kin, Fqu, Gu, D2h0, Rzq, Q1, Lam, H, rows)


@njit(cache=True, nogil=True)
def contracted_second_order(der, dt, dyn, kin, Fqq, Fqv, Fqu, Gu, H3lam, D2h0, D2h1, Rzq, Q1, Lam,
                            ell, W, scratch):
    """``W = sum_i w_i H[i]`` (nz x nz) without forming ``H``: the output rows' combination
    of :func:`second_order` taken first, with the weights ``ell`` of
    :func:`costate_directions`, so that one pair tensor is built and contracted instead of
    2 nd. Its Lagrangian part comes from ``der.dLqq, dLqv, dLvv`` differentiated along that
    function's ``(wq, wv)``; forces and constraints enter as in :func:`_pair_tensors`."""
    n, nd = Q1.shape[0], dyn.shape[0]
    if nd == 0:
        W[:, :] = 0.0
        return
    off, T, Tc, tail0 = _layout(n, Lam.shape[0], scratch, 1)
    pos = _slot_order(n, dyn, kin)
    lg = ell[0, :nd]
    _contracted_pair_tensor(der, dt, dyn, lg, Fqq, Fqv, H3lam, off, pos, T[0])
    _add_constraint_tails(D2h1, ell[:, nd:], off, pos, tail0, Tc, T)
    nz = W.shape[0]
    _contract_rows(T, np.ascontiguousarray(ell[:, :nd]), off, dt, dyn, kin, Fqu, Gu, D2h0, Rzq, Q1,
                   Lam, W.reshape(1, nz, nz), np.zeros(1, np.int64))


@njit(cache=True, nogil=True)
def _contracted_pair_tensor(der, dt, dyn, lg, Fqq, Fqv, H3lam, off, pos, T):
    """``T = sum_a lg[a] TG[a] + w_p[a] TP[a]`` (the terms of :func:`_pair_tensors`, packed
    alike) from the directional derivatives ``dLqq, dLqv, dLvv`` (which carry the weights of
    both row kinds, see :func:`costate_directions`) and the G rows' forcing and constraint
    terms contracted with ``lg``."""
    n = der.dLqq.shape[0]
    DQQ, DQV, DVV = der.dLqq, der.dLqv, der.dLvv
    forced, damped, constrained = Fqq.shape[0] > 0, Fqv.shape[0] > 0, H3lam.shape[0] > 0
    FQQ, FQV, H3C = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    for a in range(dyn.shape[0]):
        i, c = dyn[a], lg[a]
        if forced:
            FQQ += (c * dt) * Fqq[i]
        if damped:
            FQV += (c * dt) * Fqv[i]
        if constrained:
            H3C += c * H3lam[i]
    c1, c2 = 0.5 / dt, 1.0 / (dt * dt)
    for j in range(n):
        pj = pos[n + j]
        for k in range(j, n):
            qq = 0.25 * (DQQ[j, k] + FQQ[j, k])
            qv_jk = (DQV[j, k] + FQV[j, k]) * c1
            qv_kj = (DQV[k, j] + FQV[k, j]) * c1
            vv = DVV[j, k] * c2
            pk = pos[n + k]
            s00, s11 = np.uint64(off[j] + k), np.uint64(_pair_index(off, pj, pk))
            s01, s10 = np.uint64(off[j] + pk), np.uint64(off[k] + pj)
            T[s00] = qq - qv_jk - qv_kj + vv - H3C[j, k]
            T[s11] = qq + qv_jk + qv_kj + vv
            T[s01] = qq + qv_jk - qv_kj - vv
            T[s10] = qq + qv_kj - qv_jk - vv


@njit(cache=True, nogil=True)
def _contract_rows(Tout, Ncg, off, dt, dyn, kin, Fqu, Gu, D2h0, Rzq, Q1, Lam, outs, rows):
    """``outs[rows[o]] = J^T Tout[o] J`` plus the cross terms, for each combined pair tensor
    ``Tout[o]`` whose G rows were weighted by ``Ncg[o]`` (see :func:`second_order`)."""
    n, nd, nk, nc = Q1.shape[0], dyn.shape[0], kin.shape[0], Lam.shape[0]
    nz, m, no = Q1.shape[1], Fqu.shape[2], Tout.shape[0]
    cp, cu = n, n + nd + nk          # columns of z where p0 and u start
    cr = cu + m                      # and rho1
    # cross terms of the G rows, combined the same way: forcing dt Fqu(dqm/dz, du/dz) and the
    # multipliers' -(D2h_r(q0) dq0/dz) x dlam_r/dz (both symmetrized)
    force_cross = m > 0 and np.any(Fqu != 0.0)
    # Without a forcing cross term the inputs enter the residual only as p0 + Gu u (Gu = dt Fu
    # constant here: torques on variables), so H's u columns are combinations of its p0
    # columns; when each input drives at most one dynamic variable they are scaled copies. The
    # contraction then runs without the u columns (for a chain with a torque on every joint a
    # third fewer columns) and the u rows and columns are copied in afterwards.
    u_src, u_gain = np.empty(m, np.int64), np.empty(m)
    reduce_u = input_sources(Gu, dyn, u_src, u_gain) and m > 0 and not force_cross
    mr = 0 if reduce_u else m            # u columns kept in z'
    ns = n + nk                          # selected columns of z' (q0, rho1)
    nzr = ns + nd + mr
    # z' -> z: segments (start in z', start in z, length)
    seg = np.array([[0, 0, n], [n, cr, nk], [ns, cp, nd], [ns + nd, cu, mr]])
    # forcing: C[o, r] = (sum_a Nc[o, a] dt Fqu[dyn a, :, r]) . dqm/dz (Fu depends on q only
    # through inputs at frames)
    C = np.empty((no, m, nz))
    if force_cross:
        Xq = 0.5 * Q1  # dqm/dz = (dq0/dz + Q1)/2, dq0/dz selects the q0 columns
        for i in range(n):
            Xq[i, i] += 0.5
        Fd = np.empty((nd, m * n))
        for a in range(nd):
            Fd[a] = dt * np.ascontiguousarray(Fqu[dyn[a]].T).ravel()
        C = ((Ncg @ Fd).reshape(no * m, n) @ Xq).reshape(no, m, nz)
    # multipliers: E[o, j, r] = sum_a Nc[o, a] D2h_r(q0)[dyn a, j]
    E = np.empty((no, n, nc))
    if nc > 0:
        Ed = np.empty((nd, n * nc))
        for a in range(nd):
            for j in range(n):
                for r in range(nc):
                    Ed[a, j * nc + r] = D2h0[r, dyn[a], j]
        E = (Ncg @ Ed).reshape(no, n, nc)
    # the dense rows of J in z': [q1_dyn; lam] (the multipliers' cross term is a q0-lam block
    # of T, so their rows Lam join)
    nl = nd + nc
    Y = np.empty((nl, nzr))
    for g in range(4):
        for c in range(seg[g, 2]):
            cy, cz = seg[g, 0] + c, seg[g, 1] + c
            for a in range(nd):
                Y[a, cy] = Q1[dyn[a], cz]
            for r in range(nc):
                Y[nd + r, cy] = Lam[r, cz]
    YT = np.ascontiguousarray(Y.T)
    Yh = 0.5 * Y[:nd]
    TLL, K = np.empty((nd, nd)), np.zeros((nl, nzr))
    # no constraints, no kinematic variables, no inputs left in z': z' = [q0, p0] and
    # dq1/dz' = Yp [G, I] (Yp = -M^-1, G = dG/dq0), which _contract_plain exploits
    plain = nc == 0 and nk == 0 and nzr == n + nd
    direct = plain and nzr == nz         # z' = z: the products write H's rows themselves
    O = np.empty((0, 0)) if direct else np.empty((nzr, nzr))
    if plain:
        Yp, G = np.ascontiguousarray(Y[:, n:]), Rzq
        YpT = np.ascontiguousarray(Yp.T)
        plain_work = np.empty((6, n, n))
    for o in range(no):
        out = outs[rows[o]]
        T = Tout[o]
        if plain:  # (no u columns in z', so no forcing cross term either)
            _contract_plain(T, off, n, Yp, G, YpT, plain_work, out if direct else O)
        else:
            _contract(T, off, ns, E[o], Yh, YT, TLL, K, O)
        if not direct:
            _expand(O, not plain, seg, cp, cu, reduce_u, u_src, u_gain, out)
        if force_cross:
            for c in range(nz):
                for r in range(m):
                    out[c, cu + r] += C[o, r, c]
            for r in range(m):
                out[cu + r] += C[o, r]


@njit(cache=True, nogil=True)
def _contract(T, off, ns, E, Yh, YT, TLL, K, O):
    """``O`` with ``O + O^T = J^T T J`` (``T`` packed in the order of :func:`_slot_order`) for
    J = [[I, 0], Y] in z' (its first ``ns`` columns selected by the q0 and q1_kin rows),
    ``Y`` the dense rows of L = (q1_dyn, lam) (``Yh`` = Y's q1_dyn rows / 2, ``YT`` = Y^T),
    ``T`` having the multipliers' cross term ``-E`` as its q0-lam block (``E`` n x nc).
    J^T T J = Y^T T_LL Y + Y^T T_LS Sel + Sel^T T_SL Y + Sel^T T_SS Sel; the middle two are
    each other's transpose, so with K = T_LL Y / 2 + T_LS Sel it is Y^T K + (Y^T K)^T +
    Sel^T T_SS Sel: one product for both cross terms (and T_SS's upper triangle, half its
    diagonal, added to O; :func:`_expand` adds the transpose). T_LL = [[T_DD, 0], [0, 0]],
    T_LS = [T_DS; -E^T] (q0 columns). ``K``'s lam rows must be zero outside the q0 columns
    (they are never written there)."""
    nd, nc, n = Yh.shape[0], E.shape[1], E.shape[0]
    _unpack_block(T, off, ns, TLL)          # T_DD: rows ns.. of the packed storage
    np.dot(TLL, Yh, K[:nd])
    for s in range(ns):  # T_SD: the end of row s
        rs = off[s] + ns
        for b in range(nd):
            K[b, s] += T[rs + b]
    for r in range(nc):
        for j in range(n):
            K[nd + r, j] = -E[j, r]
    np.dot(YT, K, O)
    nzr, flat = O.shape[0], O.ravel()
    for s in range(ns):  # T_SS: the start of row s (upper triangle, as O + O^T will add)
        rs = off[s]
        O[s, s] += 0.5 * T[rs + s]
        add_run(flat, s * nzr + s + 1, T, rs + s + 1, ns - s - 1, 1.0)


@njit(cache=True, nogil=True)
def _contract_plain(T, off, n, Yp, G, YpT, work, O):
    """``O = J^T T J`` (``T`` packed, see :func:`_packed_offsets`) for ``J = dw/dz'`` with
    ``z' = [q0, p0]`` and ``q1 = q1(q0, p0)``: ``J = [[I, 0], [Yp G, Yp]] = D E`` with
    ``D = diag(I, Yp)``, ``E = [[I, 0], [G, I]]``. With ``X01 = T01 Yp``, ``X11 = Yp^T T11 Yp``,
    ``R = X11 G`` and ``V = X01 + R^T / 2`` the blocks are (q0, q0)
    ``T00 + X01 G + G^T X01^T + G^T X11 G = T00 + V G + (V G)^T``, (q0, p0) ``X01 + R^T`` and
    (p0, p0) ``X11``: five n x n x n products instead of the general path's eight, in four
    BLAS calls (``work`` (6, n, n) holds T01 and T11 adjacent: one call for both times Yp)."""
    w2, flat = work.reshape(6 * n, n), work.ravel()
    for j in range(n):  # T01 row j
        copy_run(flat, j * n, T, off[j] + n, n)
    _unpack_block(T, off, n, work[1])
    np.dot(w2[:2 * n], Yp, w2[2 * n:4 * n])      # work[2] = X01, work[3] = T11 Yp
    X11, X01, R, V, VG = work[1], work[2], work[4], work[5], work[3]
    np.dot(YpT, work[3], X11)                     # (T11 is spent)
    np.dot(X11, G, R)
    for j in range(n):
        for k in range(n):
            V[j, k] = X01[j, k] + 0.5 * R[k, j]
    np.dot(V, G, VG)                              # (T11 Yp is spent)
    for j in range(n):
        row, prow = O[j], O[n + j]
        copy_run(row, j, T, off[j] + j, n - j)    # T00's upper triangle, then its lower
        for k in range(j):
            row[k] = T[np.uint64(off[k] + j)]
        for k in range(n):
            row[k] += VG[j, k] + VG[k, j]
            row[n + k] = X01[j, k] + R[k, j]
            prow[k] = X01[k, j] + R[j, k]
            prow[n + k] = X11[j, k]


@njit(cache=True, nogil=True)
def _expand(O, symmetrize, seg, cp, cu, reduce_u, u_src, u_gain, out):
    """``out`` (z x z) from ``O`` (z' x z'), or from ``O + O^T`` with ``symmetrize``. z' goes
    to z in the segments ``seg`` (rows: start in z', start in z, length; q0, rho1, p0, u);
    z's v_k rows and columns [cp + nd, cu) are zero and, with ``reduce_u``, input r acts as
    ``u_gain[r]`` times the momentum of dynamic variable ``u_src[r]`` (column
    ``cp + u_src[r]``; -1: no effect). Rows are addressed in the flat arrays (a row view
    per row cost more than the copy)."""
    m, nzr, nz = u_src.shape[0], O.shape[0], out.shape[1]
    flat, dst = O.ravel(), out.ravel()
    v0 = cp + seg[2, 2]
    for g in range(seg.shape[0]):
        for c in range(seg[g, 2]):
            cs, row = seg[g, 0] + c, (seg[g, 1] + c) * nz
            for h in range(seg.shape[0]):
                if symmetrize:
                    symmetric_run(dst, row + seg[h, 1], flat, nzr, cs, seg[h, 0], seg[h, 2])
                else:
                    copy_run(dst, row + seg[h, 1], flat, cs * nzr + seg[h, 0], seg[h, 2])
            for d in range(v0, cu):
                dst[row + d] = 0.0
            if reduce_u:
                for r in range(m):
                    u = u_gain[r] * dst[row + cp + u_src[r]] if u_src[r] >= 0 else 0.0
                    dst[row + cu + r] = u
    for d in range(v0, cu):
        out[d, :] = 0.0
    if reduce_u:
        for r in range(m):
            u_row = out[cu + r]
            if u_src[r] >= 0:
                gain, src = u_gain[r], out[cp + u_src[r]]
                for d in range(nz):
                    u_row[d] = gain * src[d]
            else:
                u_row[:] = 0.0
