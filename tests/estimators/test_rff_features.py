"""RandomFourierFeatures: chunking invariance (bitwise), unbiasedness and
concentration against the exact kernel, parity with scikit-learn's RBFSampler,
the estimator contract."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.kernel_approximation import RBFSampler

import distsketch
from distsketch import RandomFourierFeatures
from distsketch.errors import ConfigError, InputError, NotFittedError
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.rff import rff_map


@pytest.fixture(scope="module")
def X8k():
    return np.random.default_rng(0).normal(size=(8000, 5)).astype(np.float32)


def test_features_of_a_row_identical_for_every_chunking(X8k):
    rff = RandomFourierFeatures(gamma=0.2, n_components=64, random_state=3).fit(X8k)
    one = rff.transform(X8k)                                  # NumPy path, one chunk here
    ref = rff.transform(da.from_array(X8k, chunks=(8000, 5)))
    with dask.config.set(scheduler="sync"):
        ref = ref.compute()
    np.testing.assert_array_equal(one, ref)
    for rows in (1000, 7919):
        got = rff.transform(da.from_array(X8k, chunks=(rows, 5))).compute(scheduler="sync")
        np.testing.assert_array_equal(got, ref)
    # chunks of a single row: the first 600 rows (a task per row)
    head = rff.transform(da.from_array(X8k[:600], chunks=(1, 5))).compute(scheduler="sync")
    np.testing.assert_array_equal(head, ref[:600])


def test_operator_depends_only_on_seed(X8k):
    a = RandomFourierFeatures(gamma=0.2, n_components=32, random_state=5).fit(X8k)
    b = RandomFourierFeatures(gamma=0.2, n_components=32, random_state=5).fit(
        da.from_array(X8k, chunks=(77, 5)))
    np.testing.assert_array_equal(a.random_weights_, b.random_weights_)
    np.testing.assert_array_equal(a.random_offset_, b.random_offset_)
    c = RandomFourierFeatures(gamma=0.2, n_components=32, random_state=6).fit(X8k)
    assert not np.array_equal(a.random_weights_, c.random_weights_)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cauchy"])
def test_unbiased_over_seeds(kernel):
    # Per feature, m·z_i(x)z_i(y) = cos(wᵀ(x−y)) + cos(wᵀ(x+y) + 2b) has variance ≤ 1.5,
    # so the mean over S seeds of m-feature estimates has sd ≤ sqrt(1.5/(mS)); allow 5 sd
    # (a Bonferroni-safe margin for the 15 pairs tested).
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 3)) * 0.7
    gamma, m, S = 0.5, 64, 300
    G = pairwise_kernel(X, X, kernel, gamma=gamma)
    est = np.zeros_like(G)
    for seed in range(S):
        # the fitted operator applied by the per-block kernel (what transform runs per block)
        rff = RandomFourierFeatures(kernel=kernel, gamma=gamma, n_components=m,
                                    random_state=seed).fit(X)
        Z = rff_map(X, rff.random_weights_, rff.random_offset_)
        est += Z @ Z.T
    est /= S
    iu = np.triu_indices(6, 1)
    tol = 5.0 * np.sqrt(1.5 / (m * S))
    assert np.max(np.abs(est[iu] - G[iu])) <= tol
    # and not trivially: a single seed is much farther off than the average
    assert np.max(np.abs(Z @ Z.T - G)[iu]) > np.max(np.abs(est[iu] - G[iu]))


@pytest.mark.parametrize(("kernel", "orthogonal"), [("rbf", False), ("rbf", True),
                                                     ("laplacian", False), ("cauchy", False)])
def test_within_hoeffding_tolerance(kernel, orthogonal):
    # m·z_i(x)z_i(y) ∈ [-2, 2]: Hoeffding gives P(|k̂ − k| ≥ t) ≤ 2 exp(−m t²/8); with the
    # union over P pairs at total failure probability 1e-6, t = sqrt(8 ln(2P/1e-6)/m).
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4)) * 0.5
    m = 4096
    Z = RandomFourierFeatures(kernel=kernel, gamma=0.3, n_components=m, orthogonal=orthogonal,
                              random_state=11).fit_transform(X)
    G = pairwise_kernel(X, X, kernel, gamma=0.3)
    P = 30 * 31 // 2
    t = np.sqrt(8 * np.log(2 * P / 1e-6) / m)
    assert np.max(np.abs(Z @ Z.T - G)) <= t


def test_comparable_to_sklearn_rbf_sampler():
    # Same distribution of (w, b) as RBFSampler: the mean Frobenius error over seeds must
    # agree within a factor 1.5 (each mean averages 5 × 200² entries).
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 8))
    gamma, m = 0.1, 256
    G = pairwise_kernel(X, X, "rbf", gamma=gamma)
    ours, theirs = [], []
    for seed in range(5):
        Z = RandomFourierFeatures(gamma=gamma, n_components=m, random_state=seed).fit_transform(X)
        ours.append(np.linalg.norm(Z @ Z.T - G))
        Zs = RBFSampler(gamma=gamma, n_components=m, random_state=seed).fit_transform(X)
        theirs.append(np.linalg.norm(Zs @ Zs.T - G))
    ratio = np.mean(ours) / np.mean(theirs)
    assert 1 / 1.5 <= ratio <= 1.5


def test_same_kind_out_and_dtype(X8k):
    rff = RandomFourierFeatures(gamma=0.2, n_components=16, random_state=0).fit(X8k)
    out = rff.transform(X8k[:100])
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (100, 16)
    lazy = rff.transform(da.from_array(X8k[:100], chunks=(30, 5)))
    assert isinstance(lazy, da.Array) and lazy.dtype == np.float32
    out64 = rff.transform(X8k[:100].astype(np.float64))
    assert out64.dtype == np.float64
    np.testing.assert_allclose(out64, out, atol=1e-5)


def test_contract_errors(X8k):
    with pytest.raises(ConfigError, match="n_components"):
        RandomFourierFeatures(n_components=0).fit(X8k)
    with pytest.raises(ConfigError, match="gamma"):
        RandomFourierFeatures(gamma=-1.0).fit(X8k)
    with pytest.raises(ConfigError, match="kernel"):
        RandomFourierFeatures(kernel="polynomial").fit(X8k)
    with pytest.raises(ConfigError, match="orthogonal"):
        RandomFourierFeatures(kernel="laplacian", orthogonal=True).fit(X8k)
    with pytest.raises(NotFittedError):
        RandomFourierFeatures().transform(X8k)
    rff = RandomFourierFeatures(n_components=8, random_state=0).fit(X8k)
    with pytest.raises(InputError, match="features"):
        rff.transform(np.ones((3, 4)))


def test_save_load_round_trip(tmp_path, X8k):
    rff = RandomFourierFeatures(kernel="cauchy", gamma=0.3, n_components=24,
                                random_state=9).fit(X8k)
    rff.save(tmp_path / "rff.zarr")
    back = distsketch.load(tmp_path / "rff.zarr")
    assert isinstance(back, RandomFourierFeatures)
    np.testing.assert_array_equal(back.transform(X8k[:500]), rff.transform(X8k[:500]))
