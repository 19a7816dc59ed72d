"""MEKA and BKA: exact identities, operator products, error vs Nyström at equal memory."""

from __future__ import annotations

import itertools

import dask.array as da
import numpy as np
import pytest
import scipy.sparse.linalg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits

from distsketch import MEKA, BlockKernelApproximation, NystromFeatures, load
from distsketch.errors import ConfigError, InputError, NotFittedError
from distsketch.io import write_array
from distsketch.metrics import relative_kernel_error
from distsketch.ops.kernels import pairwise_kernel


def _blobs(n_per=150, c=8, d=6, spread=3.0, std=1.0, seed=0):
    rng = np.random.default_rng(seed)
    C = rng.normal(scale=spread, size=(c, d))
    X = np.vstack([m + std * rng.normal(size=(n_per, d)) for m in C])
    return X[rng.permutation(X.shape[0])]


DIGITS = load_digits().data / 16.0
BLOBS = _blobs()
SMALL = _blobs(n_per=40, c=4, d=4, seed=1)


def _err(X, G_or_est, gamma):
    G = pairwise_kernel(X, X, "rbf", gamma=gamma)
    Gt = G_or_est if isinstance(G_or_est, np.ndarray) else G_or_est.to_dense()
    return np.linalg.norm(G - Gt) / np.linalg.norm(G)


def test_one_cluster_equals_nystrom():
    mk = MEKA(n_clusters=1, rank=12, n_landmarks=30, gamma=0.2, random_state=0).fit(SMALL)
    ny = NystromFeatures(gamma=0.2, landmarks=mk.landmarks_[0], rank=12).fit(SMALL)
    np.testing.assert_allclose(mk.to_dense(), ny.kernel_approx(SMALL), atol=1e-10)
    np.testing.assert_allclose(mk.kernel_approx(SMALL[:7], SMALL[7:20]),
                               ny.kernel_approx(SMALL[:7], SMALL[7:20]), atol=1e-10)


def test_bka_is_block_diagonal_of_kernel():
    bka = BlockKernelApproximation(n_clusters=4, gamma=0.3, random_state=0).fit(SMALL)
    G = pairwise_kernel(SMALL, SMALL, "rbf", gamma=0.3)
    lab = bka.predict(SMALL)
    assert len(np.unique(lab)) == 4
    np.testing.assert_array_equal(bka.to_dense(), np.where(lab[:, None] == lab[None, :], G, 0.0))
    v = np.random.default_rng(0).normal(size=SMALL.shape[0])
    np.testing.assert_allclose(bka.matvec(v), bka.to_dense() @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(bka.cluster_sizes_, np.bincount(lab, minlength=4))


def test_operator_products_match_dense():
    mk = MEKA(n_clusters=4, rank=8, gamma=0.3, random_state=0).fit(SMALL)
    D = mk.to_dense()
    np.testing.assert_allclose(D, D.T, atol=1e-12)
    np.testing.assert_allclose(mk.kernel_approx(SMALL), D, atol=1e-10)
    V = np.random.default_rng(1).normal(size=(SMALL.shape[0], 3))
    np.testing.assert_allclose(mk.matmat(V), D @ V, atol=1e-9)
    np.testing.assert_allclose(mk.matvec(V[:, 0]), D @ V[:, 0], atol=1e-9)
    op = mk.as_linear_operator()
    assert op.shape == (SMALL.shape[0],) * 2
    np.testing.assert_allclose(op @ V[:, 1], D @ V[:, 1], atol=1e-9)
    # CG on the regularised operator solves the dense system
    A = scipy.sparse.linalg.LinearOperator(op.shape, matvec=lambda x: op @ x + 0.5 * x)
    x, info = scipy.sparse.linalg.cg(A, V[:, 2], rtol=1e-10, maxiter=500)
    assert info == 0
    np.testing.assert_allclose((D + 0.5 * np.eye(len(D))) @ x, V[:, 2], atol=1e-6)
    with pytest.raises(InputError, match="one row per training point"):
        mk.matvec(np.ones(3))


def test_out_of_core_products_dask_and_basis_store(tmp_path):
    Xd = da.from_array(SMALL, chunks=(37, 4))
    ref = MEKA(n_clusters=4, rank=8, gamma=0.3, random_state=0).fit(SMALL)
    lazy = MEKA(n_clusters=4, rank=8, gamma=0.3, random_state=0).fit(Xd)
    stored = MEKA(n_clusters=4, rank=8, gamma=0.3, random_state=0,
                  basis_path=str(tmp_path / "W.zarr")).fit(Xd)
    V = np.random.default_rng(2).normal(size=(SMALL.shape[0], 2))
    D = ref.to_dense()
    np.testing.assert_allclose(lazy.matmat(V), D @ V, atol=1e-9)
    # the basis store is float32: products agree to float32 rounding
    np.testing.assert_allclose(stored.matmat(V), D @ V, atol=1e-4 * np.abs(D @ V).max())
    Wd = ref.transform(Xd)
    assert isinstance(Wd, da.Array)
    np.testing.assert_allclose(Wd.compute(), ref.transform(SMALL), atol=1e-12)


def test_fit_from_zarr_path_and_save_load(tmp_path):
    path = write_array(SMALL, tmp_path / "X.zarr", chunk_rows=50)
    mk = MEKA(n_clusters=4, rank=8, gamma=0.3, random_state=0).fit(str(path))
    mk.save(tmp_path / "m.zarr")
    back = load(tmp_path / "m.zarr")
    np.testing.assert_array_equal(back.link_, mk.link_)
    np.testing.assert_allclose(back.kernel_approx(SMALL[:20]), mk.kernel_approx(SMALL[:20]),
                               atol=1e-12)
    v = np.random.default_rng(0).normal(size=SMALL.shape[0])
    np.testing.assert_allclose(back.matvec(v), mk.matvec(v), atol=1e-9)  # reopens the Zarr input
    mem = MEKA(n_clusters=4, rank=8, gamma=0.3, random_state=0).fit(SMALL)
    mem.save(tmp_path / "m2.zarr")
    with pytest.raises(ConfigError, match="basis_path"):
        load(tmp_path / "m2.zarr").matvec(v)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(block=st.integers(5, 160))
def test_fit_independent_of_chunking(block):
    ref = MEKA(n_clusters=4, rank=6, gamma=0.3, random_state=3).fit(SMALL)
    got = MEKA(n_clusters=4, rank=6, gamma=0.3, random_state=3).fit(
        da.from_array(SMALL, chunks=(block, 4)))
    np.testing.assert_array_equal(got.centres_, ref.centres_)
    np.testing.assert_array_equal(got.landmarks_, ref.landmarks_)
    np.testing.assert_array_equal(got.link_, ref.link_)
    np.testing.assert_array_equal(got.cluster_sizes_, ref.cluster_sizes_)


@pytest.mark.parametrize("X,gamma,c,k", [
    (DIGITS, 0.5, 5, 20),   # digits at a large gamma (paper Fig. 1(c) / Table 2 pattern)
    (BLOBS, 0.2, 8, 20),    # synthetic clustered set
])
def test_meka_beats_nystrom_at_equal_memory(X, gamma, c, k):
    mk = MEKA(n_clusters=c, rank=k, gamma=gamma, random_state=0).fit(X)
    e_meka = relative_kernel_error(X, mk, gamma=gamma, n_sample=None)
    # Nyström features of the same stored size (n x r values, r >= MEKA's bytes / n)
    r = int(np.ceil(mk.approximation_bytes() / (8 * X.shape[0])))
    errs = []
    for seed in range(3):
        ny = NystromFeatures(gamma=gamma, n_landmarks=2 * r, rank=r, random_state=seed).fit(X)
        assert ny.approximation_bytes(X.shape[0]) >= mk.approximation_bytes() - 8 * X.shape[0]
        errs.append(relative_kernel_error(X, ny, gamma=gamma, n_sample=None))
    assert e_meka < 0.85 * min(errs)


def test_error_decreases_with_rank():
    errs = [_err(BLOBS, MEKA(n_clusters=8, rank=k, gamma=0.2, random_state=0).fit(BLOBS), 0.2)
            for k in (5, 10, 20, 40)]
    assert all(a > b for a, b in itertools.pairwise(errs)), errs


def test_threshold_trades_error_for_link_blocks():
    fits = [MEKA(n_clusters=8, rank=15, gamma=0.2, link_threshold=eps, random_state=0).fit(BLOBS)
            for eps in (0.0, 1e-4, 1e-2, 0.1, 1.0)]
    blocks = [f.n_link_blocks_ for f in fits]
    errs = [_err(BLOBS, f, 0.2) for f in fits]
    assert blocks[0] == 8 * 7 // 2 and blocks[-1] == 0
    assert all(a >= b for a, b in itertools.pairwise(blocks)), blocks
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(errs)), errs
    assert errs[0] < errs[-1]
    # zeroed blocks are not stored
    assert fits[-1].approximation_bytes() < fits[0].approximation_bytes()


def test_nearly_block_diagonal_kernel_does_not_blow_up():
    # tight, far-apart clusters and a large gamma: off-diagonal kernel ~ 1e-100
    X = _blobs(n_per=60, c=5, d=4, spread=10.0, std=0.1, seed=2)
    gamma = 2.0
    mk = MEKA(n_clusters=5, rank=10, gamma=gamma, random_state=0).fit(X)
    bka = BlockKernelApproximation(n_clusters=5, gamma=gamma, random_state=0).fit(X)
    nolink = MEKA(n_clusters=5, rank=10, gamma=gamma, link_threshold=1.0, random_state=0).fit(X)
    D = mk.to_dense()
    assert np.all(np.isfinite(D)) and np.abs(D).max() <= 1.0 + 1e-6
    e_bka, e_meka, e_nolink = _err(X, bka.to_dense(), gamma), _err(X, D, gamma), _err(X, nolink, gamma)
    assert e_bka < 1e-6  # the kernel is block-diagonal to working precision
    # MEKA is at the level of exact diagonal blocks: only its rank-10 diagonal error remains
    assert e_meka <= e_nolink + 1e-9
    assert e_meka < 0.05
    # and at an extreme gamma (G ~ identity) on real data: no blow-up either
    g = 50.0
    ext = MEKA(n_clusters=5, rank=20, gamma=g, random_state=0).fit(DIGITS[:600])
    De = ext.to_dense()
    assert np.all(np.isfinite(De)) and np.abs(De).max() <= 1.0 + 1e-6
    assert _err(DIGITS[:600], De, g) <= 1.0


def test_spectrum_rank_rule():
    mk = MEKA(n_clusters=8, rank=10, gamma=0.2, rank_rule="spectrum", random_state=0).fit(BLOBS)
    assert mk.ranks_.sum() == 80 and mk.link_.shape == (80, 80)
    fixed = MEKA(n_clusters=8, rank=10, gamma=0.2, random_state=0).fit(BLOBS)
    assert not np.array_equal(mk.ranks_, fixed.ranks_)
    assert _err(BLOBS, mk, 0.2) < 1.0


def test_errors():
    with pytest.raises(NotFittedError):
        MEKA().matvec(np.ones(3))
    with pytest.raises(ConfigError, match="rank_rule"):
        MEKA(rank_rule="svd").fit(SMALL)
    with pytest.raises(InputError, match="n_clusters"):
        MEKA(n_clusters=500).fit(SMALL)
    mk = MEKA(n_clusters=2, rank=4, random_state=0).fit(SMALL)
    with pytest.raises(InputError, match="features"):
        mk.transform(SMALL[:, :2])
