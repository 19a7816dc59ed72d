"""Reusable conformance tests for mergeable summaries (``distsketch.summaries``).

Subclass :class:`MergeableSummaryTests` in a test module and define the three
hooks; every summary then gets the same checks: determinism of ``chunk``,
associativity of ``merge``, the identity state, pickling, and chunking
independence of a real ``tree_reduce`` against the single-block NumPy result::

    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # tests/summaries
    from mergeable import MergeableSummaryTests

    class TestMySummary(MergeableSummaryTests):
        def make_summary(self):
            return MySummary(...)

        def make_data(self, rng):
            return rng.normal(size=(120, 5))       # the rows (at least 30)

        def assert_states_close(self, actual, expected, X):
            # default: every array/scalar equal within ``rtol``/``atol``;
            # override for summaries whose merge is associative only within a
            # guarantee (Frequent Directions, ...), using the data X
            super().assert_states_close(actual, expected, X)

Optional hooks: ``has_identity = False`` for summaries without ``empty()``,
``operands()`` (arrays passed to ``chunk`` after the offset),
``rtol``/``atol`` class attributes.
Tests in other folders insert ``tests/summaries`` into ``sys.path`` the same way.
"""

from __future__ import annotations

import itertools
import pickle
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch.graph import tree_reduce

__all__ = ["MergeableSummaryTests", "assert_states_equal", "states_allclose"]


def assert_states_equal(a: Any, b: Any, path: str = "state") -> None:
    """Bitwise equality of two (nested dict/list/array/scalar) states."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {set(a)} vs {set(b)}"
        for k in a:
            assert_states_equal(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_states_equal(x, y, f"{path}[{i}]")
    elif hasattr(a, "toarray"):
        np.testing.assert_array_equal(a.toarray(), b.toarray(), err_msg=path)
    elif isinstance(a, np.ndarray) or np.isscalar(a):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)
        assert np.asarray(a).dtype == np.asarray(b).dtype or np.isscalar(a), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def states_allclose(a: Any, b: Any, rtol: float, atol: float, path: str = "state") -> None:
    """Assert two states are equal within tolerances, recursively."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {set(a)} vs {set(b)}"
        for k in a:
            states_allclose(a[k], b[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            states_allclose(x, y, rtol, atol, f"{path}[{i}]")
    elif hasattr(a, "toarray"):
        np.testing.assert_allclose(a.toarray(), b.toarray(), rtol=rtol, atol=atol, err_msg=path)
    else:
        aa, bb = np.asarray(a), np.asarray(b)
        if aa.dtype.kind in "fc":
            np.testing.assert_allclose(aa, bb, rtol=rtol, atol=atol, err_msg=path)
        else:
            np.testing.assert_array_equal(aa, bb, err_msg=path)


def _blocks(n: int, cuts: set[int]) -> tuple[int, ...]:
    edges = [0, *sorted(c for c in cuts if 0 < c < n), n]
    return tuple(b - a for a, b in itertools.pairwise(edges))


class MergeableSummaryTests:
    """Conformance tests every mergeable summary should pass.

    Hooks: :meth:`make_summary`, :meth:`make_data`, optionally
    :meth:`operands` and :meth:`assert_states_close`.
    """

    has_identity: bool = True
    rtol: float = 1e-10
    atol: float = 1e-12

    # ------------------------------------------------------------------ hooks
    def make_summary(self) -> Any:
        raise NotImplementedError

    def make_data(self, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def operands(self) -> tuple:
        return ()

    def assert_states_close(self, actual: Any, expected: Any, X: np.ndarray) -> None:
        """Assert two states of the rows X agree (default: within rtol/atol)."""
        states_allclose(actual, expected, self.rtol, self.atol)

    # ---------------------------------------------------------------- helpers
    def _data(self) -> np.ndarray:
        return self.make_data(np.random.default_rng(20240601))

    def _chunk(self, summary: Any, X: np.ndarray, start: int, stop: int) -> Any:
        return summary.chunk(X[start:stop], start, *self.operands())

    # ------------------------------------------------------------------ tests
    def test_chunk_is_deterministic(self) -> None:
        X = self._data()
        s = self.make_summary()
        assert_states_equal(self._chunk(s, X, 0, X.shape[0]), self._chunk(s, X, 0, X.shape[0]))

    def test_merge_is_associative(self) -> None:
        X = self._data()
        n = X.shape[0]
        s = self.make_summary()
        a, b, c = (self._chunk(s, X, lo, hi) for lo, hi in
                   ((0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)))
        left = s.merge([s.merge([a, b]), c])
        right = s.merge([a, s.merge([b, c])])
        flat = s.merge([a, b, c])
        self.assert_states_close(left, right, X)
        self.assert_states_close(flat, left, X)
        self.assert_states_close(flat, self._chunk(s, X, 0, n), X)

    def test_merge_with_identity(self) -> None:
        X = self._data()
        s = self.make_summary()
        state = self._chunk(s, X, 0, X.shape[0])
        if not self.has_identity:
            # a summary without an identity must say so through the protocol
            with pytest.raises(NotImplementedError):
                s.empty()
            return
        empty = s.empty()
        self.assert_states_close(s.merge([empty, state]), state, X)
        self.assert_states_close(s.merge([state, empty]), state, X)

    def test_pickle_round_trip(self) -> None:
        X = self._data()
        s = self.make_summary()
        state = self._chunk(s, X, 0, X.shape[0])
        assert_states_equal(pickle.loads(pickle.dumps(state)), state)
        s2 = pickle.loads(pickle.dumps(s))
        assert_states_equal(self._chunk(s2, X, 0, X.shape[0]), state)

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cuts=st.sets(st.integers(1, 10_000), max_size=7), split_every=st.integers(2, 5))
    def test_tree_reduce_any_chunking_matches_single_block(self, cuts: set[int],
                                                           split_every: int) -> None:
        X = self._data()
        n = X.shape[0]
        chunks = _blocks(n, {c % n for c in cuts})
        s = self.make_summary()
        Xd = da.from_array(X, chunks=(chunks, X.shape[1]))
        with dask.config.set(scheduler="sync"):
            got = tree_reduce(s, Xd, *self.operands(), split_every=split_every).compute()
        self.assert_states_close(got, self._chunk(s, X, 0, n), X)
