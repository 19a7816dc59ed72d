"""The mergeable-estimator protocols of the Nyström estimators.

Nyström kernel PCA: with the landmarks fixed by the first batch, the feature
map z is fixed and the state is the exact sums ``{n, sum, ztz}`` of z over the
rows seen (:class:`~distsketch.summaries.covariance.Covariance`): a summary of
rows is those sums, summaries add, and folding one adds it and re-solves.

Nyström features with uniform landmarks: the state is the bottom-k sample of
the rows seen by priority hash(seed, global row)
(:class:`~distsketch.summaries.landmarks.UniformLandmarks`): a summary of
rows is their own bottom-k sample, samples merge exactly, and folding one
merges it into the landmarks and refits the map on the driver (m x m).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distsketch.blas import blas_single_thread
from distsketch.errors import ConfigError
from distsketch.estimators.base import MergeableEstimator, fit_context, summary_context
from distsketch.graph import reduce_blocks
from distsketch.ops.kernels import pairwise_kernel, resolve_kernel_params
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.summaries.sums import sum_states

__all__ = ["GramFolding", "LandmarkFolding"]


class GramFolding(MergeableEstimator):
    """``summarize`` / ``merge_summaries`` / ``fold`` of :class:`NystromKernelPCA`."""

    gram_: np.ndarray
    feature_sum_: np.ndarray

    @summary_context
    def summarize(self, X: Any, y: Any = None, *, row_offset: int) -> dict:
        """The sums ``{n, sum, ztz}`` of the features of rows X (global rows from
        ``row_offset``); changes nothing.  ``y`` is ignored."""
        self._check_is_fitted("gram_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        return self._gram_state(X, row_start=row_offset)  # type: ignore[attr-defined]

    @fit_context(validate=False)
    def merge_summaries(self, summaries: Sequence[dict]) -> dict:
        """The sum of ``summaries`` (associative up to float64 rounding)."""
        return sum_states(list(summaries))

    @fit_context(validate=False)
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


class LandmarkFolding(MergeableEstimator):
    """``summarize`` / ``merge_summaries`` / ``fold`` of :class:`NystromFeatures`
    with ``landmarks="uniform"`` (the only mergeable landmark choice)."""

    landmark_indices_: np.ndarray
    landmarks_: np.ndarray

    def _sampler(self) -> UniformLandmarks:
        if not (isinstance(self.landmarks, str) and self.landmarks == "uniform"):  # type: ignore[attr-defined]
            raise ConfigError(
                f"{type(self).__name__} folds rows only with landmarks='uniform' (a mergeable "
                f"sample); landmarks={self.landmarks!r} must be refitted on all rows "  # type: ignore[attr-defined]
                "with fit.")
        return UniformLandmarks(self._sample_size(), self.seed_, "landmarks")  # type: ignore[attr-defined]

    def _sample_size(self) -> int:
        # the number fit chose (n_landmarks="auto") or was given; folding keeps it
        size: Any = getattr(self, "n_landmarks_", None)
        return int(self.n_landmarks if size is None else size)  # type: ignore[attr-defined]

    @summary_context
    def summarize(self, X: Any, y: Any = None, *, row_offset: int) -> dict:
        """The bottom-k landmark sample of rows X (global rows from ``row_offset``) and
        their count; changes nothing.  ``y`` is ignored."""
        self._check_is_fitted("normalization_")
        sampler = self._sampler()
        X = self._check_input(X, reset=False, allow_sparse=True)
        state = reduce_blocks(sampler, X, row_start=row_offset, name="landmarks")
        return {"sample": state, "rows": int(X.shape[0])}

    @fit_context(validate=False)
    def merge_summaries(self, summaries: Sequence[dict]) -> dict:
        """One sample of the rows of ``summaries`` (exact: the bottom-k of their union)."""
        summaries = list(summaries)
        return {"sample": self._sampler().merge([s["sample"] for s in summaries]),
                "rows": sum(int(s["rows"]) for s in summaries)}

    @fit_context(validate=False)
    def fold(self, summary: dict) -> Any:
        """Merge ``summary``'s sample into the landmarks and refit the map; returns self."""
        self._check_is_fitted("normalization_")
        sampler = self._sampler()
        previous = sampler.state_of(self.landmark_indices_, self.landmarks_)
        idx, rows = sampler.finalize(sampler.merge([previous, summary["sample"]]))
        self.landmark_indices_, self.landmarks_ = idx, rows
        name, _ = resolve_kernel_params(self.kernel, self.n_features_in_, None,  # type: ignore[attr-defined]
                                        self.degree, self.coef0)  # type: ignore[attr-defined]
        W = pairwise_kernel(rows, None, name, **self.kernel_params_)  # type: ignore[attr-defined]
        with blas_single_thread():
            self._fit_map(W, self.seed_)  # type: ignore[attr-defined]
        self.n_samples_seen_ += int(summary["rows"])
        return self
