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
