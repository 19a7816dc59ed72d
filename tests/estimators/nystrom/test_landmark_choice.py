"""choose_landmarks: every landmark choice, and NystromFeatures wired through it."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch import NystromFeatures
from distsketch.errors import ConfigError
from distsketch.estimators.nystrom.landmark_choice import (
    choose_landmarks,
    fit_kmeans,
    leverage_landmarks,
    rpcholesky_landmarks,
    sample_landmarks,
)
from distsketch.ops.kernels import pairwise_kernel

X = np.random.default_rng(0).normal(size=(300, 4))
KW = {"kernel": "rbf", "kernel_params": {"gamma": 0.3}}


def test_uniform_is_the_bottom_k_sample():
    rows, idx = choose_landmarks(X, "uniform", 25, 3, **KW)
    ref_idx, ref_rows = sample_landmarks(X, 25, 3, "landmarks")
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(rows, ref_rows)


def test_kmeans_is_fit_kmeans_with_the_sample_size():
    rows, idx = choose_landmarks(X, "kmeans", 6, 3, kmeans_sample=200, **KW)
    ref, _ = fit_kmeans(X, 6, 3, sample_size=200)
    np.testing.assert_array_equal(rows, ref)
    assert idx.shape == (0,) and idx.dtype == np.int64


def test_given_landmarks_come_back_as_float64():
    rows, idx = choose_landmarks(X, X[:7].astype(np.float32), 100, 0, **KW)
    np.testing.assert_array_equal(rows, X[:7].astype(np.float32).astype(np.float64))
    assert len(idx) == 0


@pytest.mark.parametrize("how", ["leverage", "rpcholesky"])
def test_sampled_choices_return_rows_of_x(how):
    rows, idx = choose_landmarks(X, how, 25, 3, **KW)
    assert len(idx) == 25 and len(np.unique(idx)) == 25
    np.testing.assert_array_equal(idx, np.sort(idx))
    np.testing.assert_array_equal(rows, X[idx])
    ref = (leverage_landmarks(X, 25, 3, **KW)[0] if how == "leverage"
           else rpcholesky_landmarks(X, 25, 3, **KW)[0])
    np.testing.assert_array_equal(idx, ref)


@pytest.mark.parametrize("how", ["leverage", "rpcholesky"])
def test_nystrom_features_use_the_choice(how):
    f = NystromFeatures(gamma=0.3, n_landmarks=40, landmarks=how, random_state=2).fit(X)
    rows, idx = choose_landmarks(X, how, 40, f.seed_, **KW)
    np.testing.assert_array_equal(f.landmark_indices_, idx)
    np.testing.assert_array_equal(f.landmarks_, rows)
    # the map is the Nyström approximation on those rows: exact on the landmarks' own Gram
    Z = f.transform(X[idx])
    np.testing.assert_allclose(Z @ Z.T, pairwise_kernel(X[idx], None, "rbf", gamma=0.3),
                               atol=1e-8)
    # and the same landmarks for a chunked dask input
    g = NystromFeatures(gamma=0.3, n_landmarks=40, landmarks=how, random_state=2).fit(
        da.from_array(X, chunks=(70, 4)))
    np.testing.assert_array_equal(g.landmark_indices_, f.landmark_indices_)


def test_rpcholesky_beats_uniform_on_clustered_rows():
    # 8 tight clusters of very different sizes: uniform landmarks miss the small ones,
    # pivots drawn by residual cover them, on average
    rng = np.random.default_rng(5)
    sizes = [400, 200, 100, 50, 20, 10, 5, 5]
    centres = rng.normal(scale=6.0, size=(8, 4))
    Xc = np.vstack([c + 0.3 * rng.normal(size=(s, 4)) for c, s in zip(centres, sizes)])
    K = pairwise_kernel(Xc, None, "rbf", gamma=0.5)

    def err(idx):
        C = K[:, idx]
        return np.linalg.norm(K - C @ np.linalg.pinv(K[np.ix_(idx, idx)], rcond=1e-10) @ C.T)

    rp = [err(rpcholesky_landmarks(Xc, 24, s, kernel="rbf", kernel_params={"gamma": 0.5})[0])
          for s in range(4)]
    un = [err(sample_landmarks(Xc, 24, s)[0]) for s in range(4)]
    # (4 fixed seeds: RPCholesky 19.6 to 24.1, uniform 20.1 to 44.4)
    assert np.mean(rp) < 0.8 * np.mean(un)


def test_unknown_choice_is_refused_by_validation():
    with pytest.raises(ConfigError, match="landmarks"):
        NystromFeatures(landmarks=3).fit(X)


def test_leverage_sizes_name_the_pilot():
    sizes = NystromFeatures(n_landmarks=50, landmarks="leverage")._operator_sizes(1000, 4)
    assert len(sizes) == 2 and "pilot" in sizes[1][0]
    assert sizes[1][1] == 8 * 100 * (4 + 300)
    assert len(NystromFeatures(n_landmarks=50)._operator_sizes(1000, 4)) == 1


def test_partial_fit_still_refuses_weighted_landmarks():
    f = NystromFeatures(gamma=0.3, n_landmarks=10, landmarks="leverage", random_state=0).fit(X)
    with pytest.raises(ConfigError, match="landmarks='uniform'"):
        f.partial_fit(X[:20])


@pytest.mark.parametrize("how", ["leverage", "rpcholesky"])
def test_sparse_input_gives_the_dense_choice(how):
    import scipy.sparse as sp

    Xs = X.copy()
    Xs[np.abs(Xs) < 0.8] = 0.0
    dense = choose_landmarks(Xs, how, 15, 1, **KW)
    sparse = choose_landmarks(sp.csr_matrix(Xs), how, 15, 1, **KW)
    np.testing.assert_array_equal(sparse[1], dense[1])
    np.testing.assert_array_equal(sparse[0], dense[0])


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(block=st.integers(1, 300))
def test_rpcholesky_pivots_do_not_depend_on_the_block_size(block):
    ref, _ = rpcholesky_landmarks(X, 20, 9, rounds=4, **KW)
    got, _ = rpcholesky_landmarks(da.from_array(X, chunks=(block, 4)), 20, 9, rounds=4, **KW)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("how", ["leverage", "rpcholesky"])
def test_multi_pass_choices_read_a_store_once_with_the_same_landmarks(how, tmp_path, chunk_reads):
    # leverage: three passes, rpcholesky: one a round; held rows answer all but the first
    import dask

    from distsketch import NystromFeatures
    from distsketch.io import ingest, open_array

    rows = np.random.default_rng(5).normal(size=(4000, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", rows)
    store = ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=500)
    fitted = {}
    for setting in ("off", "auto"):
        chunk_reads.clear()
        # a small task budget: the planner cuts each chunk into several blocks
        with dask.config.set({"distsketch.cache-rows": setting, "distsketch.task-memory": "600KiB",
                              "num_workers": 2}):
            fitted[setting] = NystromFeatures(n_landmarks=48, landmarks=how, gamma=0.2,
                                              random_state=0).fit(open_array(store))
        counts = set(chunk_reads.values())
        assert len(chunk_reads) == 8 and (counts == {1} if setting == "auto" else min(counts) >= 3)
    lazy, held = fitted["off"], fitted["auto"]
    np.testing.assert_array_equal(held.landmark_indices_, lazy.landmark_indices_)
    np.testing.assert_array_equal(held.landmarks_, lazy.landmarks_)
    np.testing.assert_array_equal(held.transform(rows[:100]), lazy.transform(rows[:100]))
