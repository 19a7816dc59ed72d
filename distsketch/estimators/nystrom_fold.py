"""The mergeable-estimator protocol of Nyström kernel PCA.

With the landmarks fixed by the first batch, the feature map z is fixed and
the state is the exact sums ``{n, sum, ztz}`` of z over the rows seen
(:class:`~distsketch.summaries.covariance.Covariance`): a summary of rows
is those sums, summaries add, and folding one adds it and re-solves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distsketch.estimators.base import MergeableEstimator
from distsketch.summaries.sums import sum_states

__all__ = ["GramFolding"]


class GramFolding(MergeableEstimator):
    """``summarize`` / ``merge_summaries`` / ``fold`` of :class:`NystromKernelPCA`."""

    gram_: np.ndarray
    feature_sum_: np.ndarray

    def summarize(self, X: Any, y: Any = None, *, row_offset: int) -> dict:
        """The sums ``{n, sum, ztz}`` of the features of rows X (global rows from
        ``row_offset``); changes nothing.  ``y`` is ignored."""
        self._check_is_fitted("gram_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        return self._gram_state(X, row_start=row_offset)  # type: ignore[attr-defined]

    def merge_summaries(self, summaries: Sequence[dict]) -> dict:
        """The sum of ``summaries`` (associative up to float64 rounding)."""
        return sum_states(list(summaries))

    def fold(self, summary: dict) -> Any:
        """Add ``summary`` to ``gram_``, ``feature_sum_`` and ``n_samples_seen_``, re-solve;
        returns self."""
        self._check_is_fitted("gram_")
        state = self.merge_summaries([{"n": self.n_samples_seen_, "sum": self.feature_sum_,
                                       "ztz": self.gram_}, summary])
        self.gram_, self.feature_sum_ = state["ztz"], state["sum"]
        self.n_samples_seen_ = int(state["n"])
        self._solve()  # type: ignore[attr-defined]
        return self
