"""The small factorizations of core.base.linalg, checked against numpy on random matrices: the tree
Cholesky (``M = L^T L`` without fill-in) on random trees whose indices are not parents-first,
and the pivots it names when the matrix is singular; the unpivoted tree LU of non-symmetric
matrices with that pattern, and where it gives up to the pivoted dense LU."""
from __future__ import annotations

import numpy as np
import pytest

from core.base.linalg import (
    cholesky_checked,
    cholesky_solve,
    lu_checked,
    tree_cholesky,
    tree_cholesky_solve,
    tree_index,
    tree_lu,
    tree_lu_solve,
)


def random_tree(rng, n):
    """``parent`` (-1 for roots, possibly several) with shuffled labels, and its tree_index."""
    labels = rng.permutation(n)
    parent = -np.ones(n, np.int64)
    for pos in range(1, n):
        if rng.random() < 0.85:
            parent[labels[pos]] = labels[rng.integers(pos)]
    return parent, tree_index(parent)


def test_tree_index_lists_ancestors_descendants_and_a_parents_first_order():
    parent = np.array([2, -1, 1, 2, -1], np.int64)      # 1 -> 2 -> {0, 3}; 4 alone
    order, anc_ptr, anc_idx, desc_ptr, desc_idx = tree_index(parent)
    assert [list(anc_idx[anc_ptr[k]:anc_ptr[k + 1]]) for k in range(5)] == [[1, 2], [], [1], [1, 2], []]
    assert [sorted(desc_idx[desc_ptr[k]:desc_ptr[k + 1]]) for k in range(5)] == [[], [0, 2, 3], [0, 3], [], []]
    position = {int(k): i for i, k in enumerate(order)}
    assert all(position[int(parent[k])] < position[k] for k in range(5) if parent[k] >= 0)
    with pytest.raises(ValueError, match="cycle"):
        tree_index(np.array([1, 0]))


def ancestors_or_self(parent, k):
    out = []
    while k >= 0:
        out.append(k)
        k = parent[k]
    return out


def tree_factor(rng, parent):
    """A random ``L`` with the tree pattern (L[k, i] != 0 only for i at or above k)."""
    n = parent.shape[0]
    L = np.zeros((n, n))
    for k in range(n):
        for i in ancestors_or_self(parent, k):
            L[k, i] = rng.uniform(0.5, 2.0) if i == k else rng.normal()
    return L


@pytest.mark.parametrize("seed", range(10))
def test_tree_cholesky_recovers_the_factor_and_solves(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    parent, tree = random_tree(rng, n)
    L0 = tree_factor(rng, parent)
    A = L0.T @ L0
    # the product has the tree pattern: entries only between an index and its ancestors
    for k in range(n):
        for i in range(n):
            if i not in ancestors_or_self(parent, k) and k not in ancestors_or_self(parent, i):
                assert A[k, i] == 0.0
    L = np.full((n, n), np.nan)
    assert tree_cholesky(A, tree, L) == -1
    np.testing.assert_allclose(L, L0, rtol=1e-9, atol=1e-9)   # unique with a positive diagonal
    B = rng.normal(size=(n, 7))
    X = B.copy()
    tree_cholesky_solve(L, tree, X)
    np.testing.assert_allclose(A @ X, B, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(X, np.linalg.solve(A, B), rtol=1e-8, atol=1e-8)


def test_tree_cholesky_names_the_singular_pivot():
    rng = np.random.default_rng(4)
    parent = np.array([-1, 0, 1, 0, 3], np.int64)   # two branches under 0
    tree = tree_index(parent)
    A = tree_factor(rng, parent)
    A = A.T @ A
    for leaf in (2, 4):                              # a leaf that moves nothing
        S = A.copy()
        S[leaf, :] = S[:, leaf] = 0.0
        assert tree_cholesky(S, tree, np.empty((5, 5))) == leaf
        assert cholesky_checked(S, np.empty((5, 5))) == leaf
    S = A.copy()                                     # rank deficient only through the subtree
    S[1] = S[2]
    S[:, 1] = S[:, 2]
    S[1, 1] = S[2, 2]
    assert tree_cholesky(S, tree, np.empty((5, 5))) == 1


def tree_patterned(rng, parent):
    """A random non-symmetric matrix with the tree pattern and a dominant diagonal (as the DEL
    Newton matrix, -M/dt plus smaller terms); NaN off the pattern (the LU must not read it)."""
    n = parent.shape[0]
    A = np.full((n, n), np.nan)
    for k in range(n):
        for i in ancestors_or_self(parent, k):
            A[k, i], A[i, k] = rng.normal(), rng.normal()
        A[k, k] = rng.choice([-1.0, 1.0]) * rng.uniform(n, 2 * n)
    return A


@pytest.mark.parametrize("seed", range(10))
def test_tree_lu_solves_like_numpy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    parent, tree = random_tree(rng, n)
    A = tree_patterned(rng, parent)
    dense = np.nan_to_num(A, nan=0.0)
    F = np.full((n, n), np.nan)
    assert tree_lu(A, tree, F) == -1
    B = rng.normal(size=(n, 5))
    X = B.copy()
    tree_lu_solve(F, tree, X)
    np.testing.assert_allclose(X, np.linalg.solve(dense, B), rtol=1e-10, atol=1e-12)


def test_tree_lu_gives_up_where_pivoting_is_needed():
    """A singular matrix: the index of the vanishing pivot (leaves first), as the dense LU
    reports one; a regular matrix whose leaf pivot is tiny next to its column (unpivoted
    elimination would grow by 1e8): the index too, and the pivoted LU then factors it."""
    rng = np.random.default_rng(3)
    parent = np.array([-1, 0, 1, 0, 3], np.int64)
    tree = tree_index(parent)
    A = np.nan_to_num(tree_patterned(rng, parent), nan=0.0)
    S = A.copy()
    S[4, :] = S[:, 4] = 0.0
    assert tree_lu(S, tree, np.empty((5, 5))) == 4
    assert lu_checked(S, np.empty((5, 5)), np.empty(5, np.int64)) >= 0
    T = A.copy()
    T[2, 2] = 1e-7
    T[1, 2] = T[2, 1] = 10.0
    assert tree_lu(T, tree, np.empty((5, 5))) == 2
    F, piv = np.empty((5, 5)), np.empty(5, np.int64)
    assert lu_checked(T, F, piv) == -1


def test_dense_cholesky_solve_agrees():
    rng = np.random.default_rng(1)
    G = rng.normal(size=(9, 9))
    A = G @ G.T + 9 * np.eye(9)
    L = np.empty((9, 9))
    assert cholesky_checked(A, L) == -1
    B = rng.normal(size=(9, 4))
    X = B.copy()
    cholesky_solve(L, X)
    np.testing.assert_allclose(X, np.linalg.solve(A, B), rtol=1e-10, atol=1e-12)


def test_add_product_on_views_matches_numpy():
    """C += alpha A B on strided views (as the Schur-complement blocks use it)."""
    from core.base.linalg import add_product
    rng = np.random.default_rng(4)
    big = rng.normal(size=(9, 9))
    A, B = big[:6, 6:], big[6:, :5]           # 6 x 3 and 3 x 5 views of one matrix
    C = rng.normal(size=(8, 8))
    expected = C.copy()
    expected[2:8, 1:6] += -0.5 * A @ B
    add_product(A, B, C[2:8, 1:6], -0.5)
    np.testing.assert_allclose(C, expected, rtol=1e-14, atol=1e-14)


def test_norm1_matches_numpy_and_keeps_nan():
    from core.base.linalg import norm1
    rng = np.random.default_rng(5)
    A = rng.normal(size=(7, 4))
    assert norm1(A) == pytest.approx(np.abs(A).sum(axis=0).max(), rel=1e-15)
    A[3, 2] = np.nan
    assert np.isnan(norm1(A))


def test_runs_match_numpy():
    """The unsigned-index loops: segment copy and add (any offsets, the rest untouched) and a
    run of a row of M + M^T (the O + O^T of the second-order expansion)."""
    from numba import njit

    from core.base.linalg import add_run, copy_run, symmetric_run

    @njit
    def runs(dst, src, M):  # (inline="always" helpers: called from jitted code)
        copy_run(dst, 3, src, 5, 4)
        add_run(dst, 10, src, 0, 6, -2.0)
        copy_run(dst, 0, src, 0, 0)          # empty run
        symmetric_run(dst, 16, M.ravel(), 7, 2, 3, 4)   # row 2, columns 3..6

    rng = np.random.default_rng(6)
    src, dst, M = rng.normal(size=12), rng.normal(size=21), rng.normal(size=(7, 7))
    expected = dst.copy()
    expected[3:7] = src[5:9]
    expected[10:16] += -2.0 * src[:6]
    expected[16:20] = (M + M.T)[2, 3:7]
    runs(dst, src, M)
    np.testing.assert_array_equal(dst, expected)
