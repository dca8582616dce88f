"""Small dense factorizations in numba that report *where* a matrix is singular instead of
raising deep inside LAPACK, so callers can name the matrix, the step and the row; and the small
loop kernels (products, runs) that the linearizations use where BLAS calls or views cost more
than the arithmetic."""
from __future__ import annotations

import numpy as np

from core.base.jit import INTO_FLAT, njit

PIVOT_TOLERANCE = 1e-12


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def _diagonal_tolerance(A, rel_tol):
    """Smallest acceptable Cholesky pivot: ``rel_tol`` times the largest diagonal entry."""
    scale = 0.0
    for i in range(A.shape[0]):
        scale = max(scale, abs(A[i, i]))
    return rel_tol * max(scale, 1e-300)


@njit(cache=True, nogil=True)
def cholesky_checked(A, L, rel_tol=PIVOT_TOLERANCE):
    """Cholesky factor ``A = L L^T``; returns -1, or the index of the first pivot that is not
    above ``rel_tol`` times the largest diagonal entry (the matrix is singular there)."""
    n = A.shape[0]
    tol = _diagonal_tolerance(A, rel_tol)
    L[:, :] = 0.0
    for j in range(n):
        d = A[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > tol:
            return j
        L[j, j] = np.sqrt(d)
        for i in range(j + 1, n):
            s = A[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / L[j, j]
    return -1


@njit(cache=True, nogil=True)
def cholesky_solve(L, B):
    """Solve ``L L^T X = B`` in place (B is n x m, C-ordered).

    Row-oriented substitutions: the inner loop runs along a contiguous row of ``B`` (all right-
    hand sides at once), several times faster than column by column for many right-hand sides.
    """
    n, m = B.shape
    for i in range(n):
        for k in range(i):
            lik = L[i, k]
            if lik != 0.0:
                for c in range(m):
                    B[i, c] -= lik * B[k, c]
        inv = 1.0 / L[i, i]
        for c in range(m):
            B[i, c] *= inv
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            lki = L[k, i]
            if lki != 0.0:
                for c in range(m):
                    B[i, c] -= lki * B[k, c]
        inv = 1.0 / L[i, i]
        for c in range(m):
            B[i, c] *= inv


def tree_index(parent) -> tuple:
    """Index arrays of the forest given by ``parent`` (-1 for a root), in the form that
    :func:`tree_cholesky` and :func:`tree_cholesky_solve` take: ``(order, anc_ptr, anc_idx,
    desc_ptr, desc_idx)`` with ``order`` parents-first (by depth), the strict ancestors of ``k``
    in ``anc_idx[anc_ptr[k]:anc_ptr[k + 1]]`` (root first) and its strict descendants in
    ``desc_idx[desc_ptr[k]:desc_ptr[k + 1]]``."""
    n = len(parent)
    ancestors = []
    for k in range(n):
        chain, i = [], int(parent[k])
        while i >= 0:
            chain.append(i)
            i = int(parent[i])
            if len(chain) > n:
                raise ValueError(f"parent array has a cycle through index {k}")
        ancestors.append(chain[::-1])
    descendants: list[list[int]] = [[] for _ in range(n)]
    for k in range(n):
        for i in ancestors[k]:
            descendants[i].append(k)

    def csr(lists):
        ptr = np.zeros(n + 1, np.int64)
        ptr[1:] = np.cumsum([len(x) for x in lists])
        return ptr, np.array([i for x in lists for i in x], np.int64)

    order = np.array(sorted(range(n), key=lambda k: len(ancestors[k])), np.int64)
    return (order, *csr(ancestors), *csr(descendants))


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def tree_cholesky(A, tree, L, rel_tol=PIVOT_TOLERANCE):
    """Factor ``A = L^T L`` for a matrix with the sparsity of a tree (Featherstone's LTL).

    ``A[i, k]`` may be nonzero only when ``i`` is ``k`` or an ancestor of ``k`` in ``tree`` (from
    :func:`tree_index`), as for the mass matrix of a kinematic tree. Eliminating leaves first keeps
    ``L``'s pattern equal to ``A``'s (no fill-in, O(n d^2) for depth d): ``L[k, i]`` is nonzero
    only for ``i`` at or above ``k``, and zero elsewhere. Returns -1, or the first index (leaves
    first) whose pivot is not above ``rel_tol`` times the largest diagonal entry.
    """
    order, anc_ptr, anc_idx = tree[0], tree[1], tree[2]
    n = A.shape[0]
    tol = _diagonal_tolerance(A, rel_tol)
    L[:, :] = 0.0
    Lf = L.reshape(n * n)          # (a view: L is C-contiguous)
    for k in range(n):
        L[k, k] = A[k, k]
        for t in range(anc_ptr[k], anc_ptr[k + 1]):
            L[k, anc_idx[t]] = A[k, anc_idx[t]]
    for idx in range(n - 1, -1, -1):
        k = order[idx]
        lo, hi = anc_ptr[k], anc_ptr[k + 1]
        d = L[k, k]
        if not d > tol:
            return k
        lkk = np.sqrt(d)
        L[k, k] = lkk
        inv = 1.0 / lkk           # one division per pivot, not per entry
        for t in range(lo, hi):
            L[k, anc_idx[t]] *= inv
        run = True                  # ancestors numbered consecutively (a chain of variables)?
        for t in range(lo + 1, hi):
            run = run and anc_idx[t] == anc_idx[t - 1] + 1
        for t in range(lo, hi):     # A_ij -= L_ki L_kj for i above k and j at or above i
            i = anc_idx[t]
            lki = L[k, i]
            L[i, i] -= lki * lki
            if run:                 # a contiguous run of row i: vectorized
                add_run(Lf, i * n + anc_idx[lo], Lf, k * n + anc_idx[lo], t - lo, -lki)
                continue
            for s in range(lo, t):
                j = anc_idx[s]
                L[i, j] -= lki * L[k, j]
    return -1


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def tree_cholesky_solve(L, tree, B):
    """Solve ``L^T L X = B`` in place from :func:`tree_cholesky` (B is n x m, C-ordered).

    Both substitutions gather: a row of ``B`` minus its solved descendants' rows (leaves first),
    then minus its ancestors' rows (root first), four source rows per sweep along the contiguous
    row, so the cost is the arithmetic and not the loop overhead.
    """
    order, anc_ptr, anc_idx, desc_ptr, desc_idx = tree
    n = B.shape[0]
    for idx in range(n - 1, -1, -1):      # L^T Y = B, leaves first
        k = order[idx]
        _subtract_rows(L, B, k, desc_idx, desc_ptr[k], desc_ptr[k + 1], True)
    for idx in range(n):                  # L X = Y, root first
        k = order[idx]
        _subtract_rows(L, B, k, anc_idx, anc_ptr[k], anc_ptr[k + 1], False)


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def _subtract_rows(L, B, k, rows, lo, hi, transposed, divide=True):
    """``B[k] = (B[k] - sum_r c_r B[r]) / L[k, k]`` over ``r`` in ``rows[lo:hi]``, where
    ``c_r = L[r, k]`` (``transposed``) or ``L[k, r]``; without ``divide``, a unit diagonal."""
    m = B.shape[1]
    t = lo
    while t + 3 < hi:
        r1, r2, r3, r4 = rows[t], rows[t + 1], rows[t + 2], rows[t + 3]
        if transposed:
            c1, c2, c3, c4 = L[r1, k], L[r2, k], L[r3, k], L[r4, k]
        else:
            c1, c2, c3, c4 = L[k, r1], L[k, r2], L[k, r3], L[k, r4]
        for c in range(m):
            B[k, c] -= c1 * B[r1, c] + c2 * B[r2, c] + c3 * B[r3, c] + c4 * B[r4, c]
        t += 4
    while t < hi:
        r1 = rows[t]
        c1 = L[r1, k] if transposed else L[k, r1]
        for c in range(m):
            B[k, c] -= c1 * B[r1, c]
        t += 1
    if divide:
        inv = 1.0 / L[k, k]
        for c in range(m):
            B[k, c] *= inv


#: :func:`tree_lu` gives up (the caller falls back to a pivoted LU) when a pivot is below this
#: fraction of the largest entry left in its row or column: a multiplier beyond 1e6 would be
#: the growth that partial pivoting exists to avoid.
TREE_LU_THRESHOLD = 1e-6


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def tree_lu(A, tree, F, rel_tol=PIVOT_TOLERANCE, threshold=TREE_LU_THRESHOLD):
    """Unpivoted LU factors of a (not necessarily symmetric) matrix with a tree's sparsity.

    ``A[i, k]`` and ``A[k, i]`` may be nonzero only when ``i`` is ``k`` or an ancestor of ``k``
    in ``tree`` (from :func:`tree_index`); other entries are not read. Gaussian elimination in
    the order leaves first has no fill-in (the update of pivot ``k`` touches only pairs of
    ``k``'s ancestors, which are comparable): O(n d^2) for depth d. ``F`` receives, on the
    pattern only, the pivots ``F[k, k]``, the multipliers ``F[i, k]`` and the rows of U
    ``F[k, i]`` (``i`` above ``k``) for :func:`tree_lu_solve`.

    Returns -1, or the first index (leaves first) whose pivot is not above ``rel_tol`` times
    the largest entry of ``A`` (singular there, :func:`lu_checked`'s test) or below
    ``threshold`` times the largest entry left in its row or column (unpivoted elimination
    would be unstable there): the caller then factors with :func:`lu_checked`, which pivots.
    """
    order, anc_ptr, anc_idx = tree[0], tree[1], tree[2]
    n = A.shape[0]
    scale = 0.0
    for k in range(n):
        F[k, k] = A[k, k]
        scale = max(scale, abs(A[k, k]))
        for t in range(anc_ptr[k], anc_ptr[k + 1]):
            i = anc_idx[t]
            F[k, i] = A[k, i]
            F[i, k] = A[i, k]
            scale = max(scale, abs(A[k, i]), abs(A[i, k]))
    tol = rel_tol * max(scale, 1e-300)
    for idx in range(n - 1, -1, -1):
        k = order[idx]
        lo, hi = anc_ptr[k], anc_ptr[k + 1]
        d = F[k, k]
        big = 0.0
        for t in range(lo, hi):
            i = anc_idx[t]
            big = max(big, abs(F[i, k]), abs(F[k, i]))
        if not abs(d) > tol or not abs(d) >= threshold * big:
            return k
        inv = 1.0 / d
        for t in range(lo, hi):     # A_ij -= l_ik A_kj for i, j above k (comparable pairs)
            i = anc_idx[t]
            lik = F[i, k] * inv
            F[i, k] = lik
            if lik != 0.0:
                for s in range(lo, hi):
                    j = anc_idx[s]
                    F[i, j] -= lik * F[k, j]
    return -1


@njit(cache=True, nogil=True, inline=INTO_FLAT)
def tree_lu_solve(F, tree, B):
    """Solve ``A X = B`` in place from :func:`tree_lu`'s factors (B is n x m, C-ordered):
    the multipliers leaves first (each row minus its descendants' rows), then U root first
    (each row minus its ancestors' rows, over its pivot)."""
    order, anc_ptr, anc_idx, desc_ptr, desc_idx = tree
    n = B.shape[0]
    for idx in range(n - 1, -1, -1):      # unit lower factor, leaves first
        k = order[idx]
        _subtract_rows(F, B, k, desc_idx, desc_ptr[k], desc_ptr[k + 1], False, False)
    for idx in range(n):                  # U, root first
        k = order[idx]
        _subtract_rows(F, B, k, anc_idx, anc_ptr[k], anc_ptr[k + 1], False, True)


@njit(cache=True, nogil=True)
def add_product(A, B, C, alpha):
    """``C += alpha A B`` in loops: for products with a few rows or columns, where a BLAS call
    and its temporaries cost more than the arithmetic. Any layouts (views welcome)."""
    for i in range(A.shape[0]):
        for k in range(A.shape[1]):
            f = alpha * A[i, k]
            for j in range(B.shape[1]):
                C[i, j] += f * B[k, j]


# Loops over offset indices (``dst[d0 + i]``) use unsigned integers: numba wraps negative
# signed indices with a select per element, and that keeps LLVM from vectorizing the loop
# (a segment copy went 4x faster).
@njit(cache=True, nogil=True, inline="always")
def add_run(dst, d0, src, s0, length, alpha):
    """``dst[d0:d0 + length] += alpha src[s0:s0 + length]`` for 1-d arrays, without views."""
    a, b = np.uint64(d0), np.uint64(s0)
    for i in range(np.uint64(length)):
        dst[a + i] += alpha * src[b + i]


@njit(cache=True, nogil=True, inline="always")
def copy_run(dst, d0, src, s0, length):
    """``dst[d0:d0 + length] = src[s0:s0 + length]`` for 1-d arrays, without views."""
    a, b = np.uint64(d0), np.uint64(s0)
    for i in range(np.uint64(length)):
        dst[a + i] = src[b + i]


@njit(cache=True, nogil=True, inline="always")
def symmetric_run(dst, d0, f, n, c, s0, length):
    """``dst[d0:d0 + length] = O[c, s0:s0 + length] + O[s0:s0 + length, c]`` for the n x n
    matrix ``O`` with elements ``f`` (``O.ravel()``; a view made once by the caller, not per
    run): a run of a row of ``O + O^T`` without forming it."""
    a, b, n, cc = np.uint64(d0), np.uint64(s0), np.uint64(n), np.uint64(c)
    for i in range(np.uint64(length)):
        dst[a + i] = f[cc * n + b + i] + f[(b + i) * n + cc]


@njit(cache=True, nogil=True)
def lu_checked(A, LU, piv):
    """LU factorization with partial pivoting, ``P A = L U`` stored in ``LU``; returns -1, or the
    first column whose pivot is zero relative to the largest entry of ``A`` (singular there)."""
    n = A.shape[0]
    LU[:, :] = A
    scale = 0.0
    for i in range(n):
        for j in range(n):
            scale = max(scale, abs(A[i, j]))
    tol = PIVOT_TOLERANCE * max(scale, 1e-300)
    for k in range(n):
        p = k
        for i in range(k + 1, n):
            if abs(LU[i, k]) > abs(LU[p, k]):
                p = i
        piv[k] = p
        if not abs(LU[p, k]) > tol:
            return k
        if p != k:
            for j in range(n):
                t = LU[k, j]
                LU[k, j] = LU[p, j]
                LU[p, j] = t
        for i in range(k + 1, n):
            LU[i, k] /= LU[k, k]
            f = LU[i, k]
            for j in range(k + 1, n):
                LU[i, j] -= f * LU[k, j]
    return -1


@njit(cache=True, nogil=True)
def lu_solve(LU, piv, B):
    """Solve ``A X = B`` in place from :func:`lu_checked`'s factors (B is n x m)."""
    n, m = B.shape
    for k in range(n):
        p = piv[k]
        if p != k:
            for c in range(m):
                t = B[k, c]
                B[k, c] = B[p, c]
                B[p, c] = t
    # row-oriented substitutions (contiguous inner loop over all right-hand sides)
    for i in range(n):
        for k in range(i):
            lik = LU[i, k]
            if lik != 0.0:
                for c in range(m):
                    B[i, c] -= lik * B[k, c]
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            uik = LU[i, k]
            if uik != 0.0:
                for c in range(m):
                    B[i, c] -= uik * B[k, c]
        inv = 1.0 / LU[i, i]
        for c in range(m):
            B[i, c] *= inv


@njit(cache=True, nogil=True)
def condition_from_lu(A, LU, piv, inv):
    """Exact 1-norm condition number ``|A|_1 |A^-1|_1`` of ``A`` from its LU factors; the
    inverse it needs is left in ``inv`` (n x n) for the caller."""
    n = A.shape[0]
    inv[:, :] = 0.0
    for i in range(n):
        inv[i, i] = 1.0
    lu_solve(LU, piv, inv)
    return norm1(A) * norm1(inv)


@njit(cache=True, nogil=True)
def norm1(A):
    """``|A|_1``, the largest absolute column sum (a NaN entry gives NaN), without the
    temporaries of ``np.abs(A).sum(axis=0).max()``."""
    best = 0.0
    for j in range(A.shape[1]):
        s = 0.0
        for i in range(A.shape[0]):
            s += abs(A[i, j])
        if s != s:
            return s
        best = max(best, s)
    return best
