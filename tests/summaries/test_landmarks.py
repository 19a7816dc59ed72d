"""Bottom-k landmark reservoirs: conformance, brute-force reference, uniformity."""

from __future__ import annotations

import dask.array as da
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch.graph import reduce_blocks
from distsketch.ops.meka import nearest_centre
from distsketch.ops.random import hash_uniform
from distsketch.summaries.landmarks import ClusterLandmarks, UniformLandmarks
from distsketch.testing import MergeableSummaryTests

CENTRES = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 5.0], [-5.0, 5.0, 0.0]])


def _brute_bottom_k(n: int, k: int, seed: int, purpose: str) -> np.ndarray:
    pri = hash_uniform(seed, purpose, np.arange(n))
    return np.sort(np.argsort(pri, kind="stable")[:k])


class TestUniformLandmarks(MergeableSummaryTests):
    rtol = 0.0
    atol = 0.0

    def make_summary(self):
        return UniformLandmarks(17, seed=5)

    def make_data(self, rng):
        return rng.normal(size=(203, 4))

    def test_equals_bottom_k_of_all_priorities(self):
        X = self._data()
        s = self.make_summary()
        idx, rows = s.finalize(s.chunk(X, 0))
        expect = _brute_bottom_k(X.shape[0], 17, 5, "landmarks")
        np.testing.assert_array_equal(idx, expect)
        np.testing.assert_array_equal(rows, X[expect])

    def test_fewer_rows_than_k(self):
        X = self._data()[:5]
        s = UniformLandmarks(17, seed=5)
        idx, rows = s.finalize(s.chunk(X, 0))
        np.testing.assert_array_equal(idx, np.arange(5))
        np.testing.assert_array_equal(rows, X)

    def test_inclusion_is_uniform(self):
        # each row is kept with probability k/n; over 400 seeds the counts are
        # Binomial(400, 0.1): mean 40, sd 6 -> all within 40 +- 6 sd
        n, k, trials = 50, 5, 400
        hits = np.zeros(n)
        s_rows = np.zeros((n, 1))
        for seed in range(trials):
            s = UniformLandmarks(k, seed=seed)
            hits[s.finalize(s.chunk(s_rows, 0))[0]] += 1
        assert hits.sum() == k * trials
        assert np.all(np.abs(hits - trials * k / n) < 6 * np.sqrt(trials * 0.1 * 0.9))


class TestClusterLandmarks(MergeableSummaryTests):
    rtol = 0.0
    atol = 0.0

    def make_summary(self):
        return ClusterLandmarks(3, [("a", 6), ("b", 4)], seed=11)

    def make_data(self, rng):
        return np.vstack([c + 0.8 * rng.normal(size=(60, 3)) for c in CENTRES])[rng.permutation(180)]

    def operands(self):
        return (CENTRES,)

    def test_matches_per_cluster_bottom_k(self):
        X = self._data()
        s = self.make_summary()
        out = s.finalize(s.chunk(X, 0, CENTRES))
        labels, _ = nearest_centre(X, CENTRES)
        np.testing.assert_array_equal(out["count"], np.bincount(labels, minlength=3))
        for purpose, k in (("a", 6), ("b", 4)):
            idx, rows, cnt = out[purpose]
            pri = hash_uniform(11, purpose, np.arange(X.shape[0]))
            for c in range(3):
                members = np.flatnonzero(labels == c)
                expect = np.sort(members[np.argsort(pri[members], kind="stable")[:k]])
                assert cnt[c] == len(expect)
                np.testing.assert_array_equal(idx[c, : cnt[c]], expect)
                np.testing.assert_array_equal(rows[c, : cnt[c]], X[expect])

    def test_priority_ties_broken_by_row_index(self, monkeypatch):
        # coarse priorities force many ties at the k-th place; the reservoir must keep the
        # rows of smallest (priority, index), as a full sort would
        import distsketch.summaries.landmarks as mod

        def coarse(seed, purpose, idx):
            return np.floor(hash_uniform(seed, purpose, idx) * 5) / 5

        monkeypatch.setattr(mod, "hash_uniform", coarse)
        X = self._data()
        s = self.make_summary()
        out = s.finalize(s.chunk(X, 7, CENTRES))
        labels, _ = nearest_centre(X, CENTRES)
        for purpose, k in (("a", 6), ("b", 4)):
            idx, _, cnt = out[purpose]
            pri = coarse(11, purpose, np.arange(7, 7 + X.shape[0]))
            for c in range(3):
                members = np.flatnonzero(labels == c)
                expect = np.sort(members[np.lexsort((members, pri[members]))[:k]]) + 7
                np.testing.assert_array_equal(idx[c, : cnt[c]], expect)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(block=st.integers(1, 300))
def test_reduce_blocks_same_landmarks_for_any_block_size(block):
    X = np.random.default_rng(1).normal(size=(257, 3))
    s = UniformLandmarks(20, seed=3)
    ref = s.finalize(s.chunk(X, 0))
    got = s.finalize(reduce_blocks(s, da.from_array(X, chunks=(block, 3)), progress=False))
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
