"""``partial_fit`` numbers new rows from the rows already seen (the graph's
``row_start``), so two halves give the model of ``fit`` on the concatenation.

Row-position dependent maps: every map through ``row_stable_matmul`` (RFF,
Nyström: GEMM tiles aligned to global rows, so a split off a 256-row boundary
shows a wrong numbering in the last bits), landmark priorities and fold hashes
(hash of the global row).  A test map with a hashed sign per global row makes
a wrong numbering visible in every row.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from distsketch import RandomFourierFeatures, SketchedKernelRidge, StreamingKernelPCA
from distsketch.estimators.base import RowMapTransformer
from distsketch.estimators.nystrom.features import NystromFeatures, NystromKernelPCA
from distsketch.ops.random import hash_bucket

N, HALF = 600, 300  # HALF is not a multiple of the 256-row GEMM tiles


class RowSignedFeatures(RowMapTransformer):
    """z(x) = (x, s(row)·x) with a sign hashed from the global row index."""

    def __init__(self, *, random_state: int = 0):
        self.random_state = random_state

    def fit(self, X, y=None):
        self.n_features_in_ = int(X.shape[1])
        self.n_output_features_ = 2 * self.n_features_in_
        return self

    def _map_block(self, block, offset):
        rows = np.arange(offset, offset + block.shape[0], dtype=np.int64)
        sign = 2.0 * hash_bucket(self.random_state, "test.rows", rows, 2) - 1.0
        X = np.asarray(block, dtype=np.float64)
        return np.hstack([X, sign[:, None] * X])


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, 4))
    y = X @ rng.standard_normal(4) + 0.1 * rng.standard_normal(N)
    return X, y


def _halves(X):
    # fit on the concatenation with the halves as its blocks: same blocks, same merge order
    return da.from_array(X, chunks=(HALF, X.shape[1]))


@pytest.mark.parametrize("features", [None, "row-signed"])
def test_ridge_partial_fit_numbers_rows_after_those_seen(data, features):
    X, y = data
    fmap = None if features is None else RowSignedFeatures().fit(X)
    # raw columns and a fixed width: partial_fit standardises with its first batch's
    # moments and the default map's width depends on the rows fit sees
    fmap = fmap or RandomFourierFeatures(n_components=100)
    full = SketchedKernelRidge(alpha=0.1, features=fmap, standardize=False, random_state=3).fit(
        _halves(X), da.from_array(y, chunks=HALF))
    inc = SketchedKernelRidge(alpha=0.1, features=fmap, standardize=False, random_state=3)
    inc.partial_fit(X[:HALF], y[:HALF]).partial_fit(X[HALF:], y[HALF:])
    assert inc.gram_.tobytes() == full.gram_.tobytes()
    assert inc.zty_.tobytes() == full.zty_.tobytes()
    assert np.asarray(inc.coef_).tobytes() == np.asarray(full.coef_).tobytes()


def test_ridge_row_signed_map_is_row_dependent(data):
    # the map above really depends on the global row: numbering from 0 would differ
    X, _ = data
    f = RowSignedFeatures().fit(X)
    assert not np.array_equal(f._map_block(X[HALF:], 0), f._map_block(X[HALF:], HALF))


@pytest.mark.parametrize("method", ["fd", "rnca"])
def test_streaming_kpca_partial_fit_equals_fit(data, method):
    X, _ = data
    kw = dict(n_components=2, n_random_features=64, sketch_size=16, method=method, random_state=1)
    full = StreamingKernelPCA(**kw).fit(_halves(X))
    inc = StreamingKernelPCA(**kw).partial_fit(X[:HALF]).partial_fit(X[HALF:])
    assert inc.components_.tobytes() == full.components_.tobytes()


def test_nystrom_kpca_partial_fit_keeps_the_landmarks_and_numbers_rows(data):
    X, _ = data
    first = NystromKernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X[:HALF])
    # reference: the same landmarks, one pass over all rows in the same two blocks
    ref_state = first._gram_state(_halves(X))
    inc = NystromKernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X[:HALF])
    inc.partial_fit(X[HALF:])
    assert inc.gram_.tobytes() == ref_state["ztz"].tobytes()


def test_nystrom_features_partial_fit_samples_as_one_pass(data):
    X, _ = data
    full = NystromFeatures(n_landmarks=30, random_state=0).fit(X)
    inc = NystromFeatures(n_landmarks=30, random_state=0).partial_fit(X[:HALF])
    inc.partial_fit(X[HALF:])
    np.testing.assert_array_equal(inc.landmark_indices_, full.landmark_indices_)
