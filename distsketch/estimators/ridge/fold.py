"""The mergeable-estimator protocol of sketched kernel ridge regression (and its classifier).

A summary of rows is their normal-equation state ``{n, sum, ztz, zty, ysum,
yty}`` (``n`` is their total weight) with ``rows`` (their number) and
``sample`` (the rows the classifier keeps to calibrate ``predict_proba``;
None for the regressor).  Summaries add; folding one adds it to the fitted
state and solves again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distsketch.errors import InputError
from distsketch.estimators.base import MergeableEstimator, fit_context, summary_context
from distsketch.estimators.ridge.weights import check_sample_weight
from distsketch.summaries.ridge import STATE_KEYS, add_ridge_states
from distsketch.summaries.sums import sum_states

__all__ = ["RidgeFolding"]


class RidgeFolding(MergeableEstimator):
    """``summarize`` / ``merge_summaries`` / ``fold`` of :class:`SketchedKernelRidge`.

    The hooks ``_row_sampler``, ``_sampled_rows`` and ``_keep_sample`` draw,
    summarise and keep a row sample in the summary pass (the classifier's
    calibration rows); the regressor draws none.
    """

    def _device_targets(self, X: Any, Y: Any) -> Any:
        """The targets as the passes take them (a classifier moves its encoded ones to X's device)."""
        return Y

    @summary_context
    def summarize(self, X: Any, y: Any = None, *, row_offset: int,
                  sample_weight: Any = None) -> dict:
        """The normal equations of rows X, y (global rows from ``row_offset``); changes nothing.

        Parameters
        ----------
        X : array of shape (n_rows, n_features_in_)
        y : array of shape (n_rows,) or (n_rows, n_targets_)
        row_offset : int
            Global index of the first row of X.
        sample_weight : array of shape (n_rows,), optional
            Row weights, as in ``fit``.

        Returns
        -------
        dict
            See the module docstring.
        """
        self._check_is_fitted("coef_")
        name = type(self).__name__
        X = self._check_input(X, reset=False)
        Y, _ = self._prepare_targets(y, X.shape[0])  # type: ignore[attr-defined]
        Y = self._device_targets(X, Y)
        if Y.shape[1] != self.n_targets_:  # type: ignore[attr-defined]
            raise InputError(f"{name}.partial_fit: y has {Y.shape[1]} targets, the model was "
                             f"fitted with {self.n_targets_}.")  # type: ignore[attr-defined]
        w = None if sample_weight is None else check_sample_weight(
            sample_weight, X.shape[0], f"{name}.partial_fit")
        states, sample = self._pass(X, Y, [self.features_], 0,  # type: ignore[attr-defined]
                                    row_start=row_offset, w=w, sample=True)
        return {**states[0], "rows": int(X.shape[0]), "sample": sample}

    @fit_context(validate=False)
    def merge_summaries(self, summaries: Sequence[dict]) -> dict:
        """The sum of ``summaries`` (associative up to float64 rounding)."""
        state = sum_states([{k: s[k] for k in STATE_KEYS} for s in summaries])
        samples = [s["sample"] for s in summaries if s.get("sample") is not None]
        return {**state, "rows": sum(int(s["rows"]) for s in summaries),
                "sample": self._merge_samples(samples) if samples else None}

    @fit_context(validate=False)
    def fold(self, summary: dict) -> Any:
        """Add ``summary`` to the fitted normal equations and solve again; returns self."""
        self._check_is_fitted("coef_")
        self._keep_sample(summary.get("sample"))
        state = add_ridge_states(self._state(), summary)
        rows = self.n_samples_seen_ + int(summary["rows"])
        self._store_state(state, rows=rows)  # type: ignore[attr-defined]
        self._set_solution(state)  # type: ignore[attr-defined]
        return self

    # ------------------------------------------------------------ row sample hooks
    def _row_sampler(self) -> Any:
        """The sampler of rows kept from the summary pass (None: the regressor keeps none)."""
        return None

    def _sampled_rows(self, sampler: Any, state: Any, weighted: bool, x_dtype: str) -> Any:
        """The summary's part of the sampled rows (with ``_row_sampler`` set)."""
        raise NotImplementedError

    def _merge_samples(self, samples: list[Any]) -> Any:
        """One sample of several ``_sampled_rows`` results."""
        raise NotImplementedError

    def _keep_sample(self, sample: Any) -> None:
        """Merge a summary's sampled rows into the model (None: nothing sampled)."""

