"""Small dense factorizations in numba that report *where* a matrix is singular instead of
raising deep inside LAPACK, so callers can name the matrix, the step and the row."""
from __future__ import annotations

import numpy as np
from numba import njit

PIVOT_TOLERANCE = 1e-12


@njit(cache=True, nogil=True)
def cholesky_checked(A, L, rel_tol=PIVOT_TOLERANCE):
    """Cholesky factor ``A = L L^T``; returns -1, or the index of the first pivot that is not
    above ``rel_tol`` times the largest diagonal entry (the matrix is singular there)."""
    n = A.shape[0]
    scale = 0.0
    for i in range(n):
        scale = max(scale, abs(A[i, i]))
    tol = rel_tol * max(scale, 1e-300)
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


@njit(cache=True, nogil=True)
def tree_cholesky(A, parent, order, L, rel_tol=PIVOT_TOLERANCE):
    """Factor ``A = L^T L`` for a matrix with the sparsity of a tree (Featherstone's LTL).

    ``A[i, k]`` may be nonzero only when ``i`` is ``k`` or an ancestor of ``k`` in the tree given by
    ``parent`` (-1 for a root), as the mass matrix of a kinematic tree is; ``order`` lists the
    indices parents-first. Eliminating leaves first keeps ``L``'s pattern equal to ``A``'s (no
    fill-in, O(n d^2) for depth d): ``L[k, i]`` is nonzero only for ``i`` at or above ``k``.
    Returns -1, or the first index (leaves first) whose pivot is not above ``rel_tol`` times
    the largest diagonal entry. ``L`` is zero outside the pattern.
    """
    n = A.shape[0]
    scale = 0.0
    for i in range(n):
        scale = max(scale, abs(A[i, i]))
    tol = rel_tol * max(scale, 1e-300)
    L[:, :] = 0.0
    for k in range(n):
        i = k
        while i >= 0:
            L[k, i] = A[k, i]
            i = parent[i]
    for idx in range(n - 1, -1, -1):
        k = order[idx]
        d = L[k, k]
        if not d > tol:
            return k
        lkk = np.sqrt(d)
        L[k, k] = lkk
        i = parent[k]
        while i >= 0:
            L[k, i] /= lkk
            i = parent[i]
        i = parent[k]
        while i >= 0:          # A_ij -= L_ki L_kj for i, j above k (j at or above i)
            lki = L[k, i]
            j = i
            while j >= 0:
                L[i, j] -= lki * L[k, j]
                j = parent[j]
            i = parent[i]
    return -1


@njit(cache=True, nogil=True)
def tree_cholesky_solve(L, parent, order, B):
    """Solve ``L^T L X = B`` in place from :func:`tree_cholesky` (B is n x m, C-ordered): the
    two substitutions walk each index's ancestors only, a row of ``B`` at a time."""
    n, m = B.shape
    for idx in range(n - 1, -1, -1):      # L^T Y = B, leaves first
        k = order[idx]
        inv = 1.0 / L[k, k]
        for c in range(m):
            B[k, c] *= inv
        i = parent[k]
        while i >= 0:
            lki = L[k, i]
            for c in range(m):
                B[i, c] -= lki * B[k, c]
            i = parent[i]
    for idx in range(n):                  # L X = Y, root first
        k = order[idx]
        i = parent[k]
        while i >= 0:
            lki = L[k, i]
            for c in range(m):
                B[k, c] -= lki * B[i, c]
            i = parent[i]
        inv = 1.0 / L[k, k]
        for c in range(m):
            B[k, c] *= inv


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
def condition_from_lu(A, LU, piv):
    """Exact 1-norm condition number ``|A|_1 |A^-1|_1`` of ``A`` from its LU factors."""
    n = A.shape[0]
    inv = np.eye(n)
    lu_solve(LU, piv, inv)
    return np.abs(A).sum(axis=0).max() * np.abs(inv).sum(axis=0).max()


@njit(cache=True, nogil=True)
def condition_1norm(A):
    """Exact 1-norm condition number ``|A|_1 |A^-1|_1`` (inf when singular)."""
    n = A.shape[0]
    if n == 0:
        return 1.0
    LU = np.empty((n, n))
    piv = np.empty(n, np.int64)
    if lu_checked(A, LU, piv) >= 0:
        return np.inf
    return condition_from_lu(A, LU, piv)
