"""Segments in flight: later segments' summaries compute while earlier ones commit.

A method's ``partial_fit`` on one segment is two steps: a *summary* of the
segment's rows (a tree reduction on the cluster, which needs only the fitted
operators and the segment's first global row) and a *merge* of that summary
into the running state (small, on the driver).  The summaries of several
segments are independent, so a run submits up to ``window`` of them at once
and merges them one by one, in segment order, with the same merge
``partial_fit`` uses: the state after k merged segments is bitwise the state
of a run that folds the segments one after another.

Only estimators whose ``partial_fit`` splits this way have a splitter here;
every other method folds one segment at a time (:func:`splitter_for` returns
None).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from distsketch.errors import ConfigError, InputError

__all__ = ["MAX_IN_FLIGHT", "PENDING_BYTES", "SegmentSplitter", "SummaryWindow",
           "segments_in_flight", "splitter_for", "summary_bytes"]

#: most segment summaries a run keeps in flight (each holds one summary state
#: on the driver until it is merged)
MAX_IN_FLIGHT = 16
#: driver memory the pending summaries may hold together; the window shrinks
#: to fit once the first summary's size is known
PENDING_BYTES = 2**30


def summary_bytes(summary: Any) -> int:
    """Bytes of the arrays in a summary (dicts, lists and tuples of arrays and numbers)."""
    if isinstance(summary, dict):
        return sum(summary_bytes(v) for v in summary.values())
    if isinstance(summary, (list, tuple)):
        return sum(summary_bytes(v) for v in summary)
    return int(getattr(summary, "nbytes", 8))


class SegmentSplitter:
    """``partial_fit`` as summary (any thread, any order) then merge (in order).

    Subclasses name the estimator's own reduction and merge, so both halves
    run exactly the code of ``partial_fit``.
    """

    def summarize(self, est: Any, X: Any, y: Any, start: int) -> Any:
        """The summary of rows ``X`` (global rows from ``start``); reads only operators."""
        raise NotImplementedError

    def merge(self, est: Any, summary: Any) -> None:
        """Merge ``summary`` into ``est`` as ``partial_fit`` does."""
        raise NotImplementedError


class _SketchSplitter(SegmentSplitter):
    """StreamingKernelPCA and FrequentDirections: ``_summary().merge`` of states."""

    def __init__(self, reducer: str):
        self.reducer = reducer

    def summarize(self, est: Any, X: Any, y: Any, start: int) -> Any:
        X = est._check_input(X, reset=False, allow_sparse=True)
        return getattr(est, self.reducer)(X, row_start=start)

    def merge(self, est: Any, summary: Any) -> None:
        est._set_state(est._summary().merge([est._state(), summary]))


class _RidgeSplitter(SegmentSplitter):
    """SketchedKernelRidge (and its classifier): summed normal equations, then a solve."""

    def __init__(self, classifier: bool):
        self.classifier = classifier

    def summarize(self, est: Any, X: Any, y: Any, start: int) -> Any:
        w = None
        if self.classifier:
            y = est._encode(y, None, est.classes_)
            if isinstance(getattr(est, "class_weight", None), str):
                raise ConfigError(f"{type(est).__name__}: class_weight='balanced' needs the class "
                                  "counts of all rows, which an incremental segment does not "
                                  "see; pass a dict of weights.")
            # a dict of class weights weighs the new rows as fit would
            w = est._row_weights(None, y.shape[0], f"{type(est).__name__} segment")
        X = est._check_input(X, reset=False)
        Y, _ = est._prepare_targets(y, X.shape[0])
        if Y.shape[1] != est.n_targets_:
            raise InputError(f"{type(est).__name__}.partial_fit: y has {Y.shape[1]} targets, the "
                             f"model was fitted with {est.n_targets_}.")
        state = est._reduce(X, Y, [est.features_], 0, row_start=start, w=w)[0]
        # the state's n is a weight total with class weights: the rows are counted apart
        return {**state, "rows": int(X.shape[0])}

    def merge(self, est: Any, summary: Any) -> None:
        from distsketch.estimators.ridge import _add

        state = _add(est._state(), summary)
        est._store_state(state, rows=est.n_samples_seen_ + int(summary["rows"]))
        est._set_solution(state)


def splitter_for(cls: type) -> SegmentSplitter | None:
    """The splitter of an estimator class, or None when it folds one segment at a time."""
    from distsketch.estimators.frequent_directions import FrequentDirections
    from distsketch.estimators.ridge import SketchedKernelRidge
    from distsketch.estimators.ridge_classifier import SketchedKernelRidgeClassifier
    from distsketch.estimators.streaming_kpca import StreamingKernelPCA

    # exact classes: a subclass may change partial_fit
    if cls is StreamingKernelPCA:
        return _SketchSplitter("_reduce")
    if cls is FrequentDirections:
        return _SketchSplitter("_sketch_state")
    if cls is SketchedKernelRidge:
        return _RidgeSplitter(classifier=False)
    if cls is SketchedKernelRidgeClassifier:
        return _RidgeSplitter(classifier=True)
    return None


def segments_in_flight(requested: int | None) -> int:
    """How many segment summaries a run keeps in flight.

    ``requested`` (the spec's ``segments_in_flight``) wins; by default one per
    task thread of the attached cluster, plus one so the cluster stays busy
    while the driver commits a checkpoint, at most :data:`MAX_IN_FLIGHT`.
    Without a cluster (``sync``/``threads``) segments run one at a time.
    """
    if requested is not None:
        return int(requested)
    from distsketch.graph import active_client, cluster_resources

    if active_client() is None:
        return 1
    return max(1, min(MAX_IN_FLIGHT, cluster_resources().threads + 1))


class SummaryWindow:
    """Driver threads that compute segment summaries ahead of the in-order merge.

    Parameters
    ----------
    size : int
        Summaries in flight at most.

    Notes
    -----
    Each pending summary holds one state on the driver once computed; the
    cluster runs the blocks of all pending segments (its threads bound the
    tasks that run at once).
    """

    def __init__(self, size: int):
        self.size = max(1, int(size))
        self._pool = ThreadPoolExecutor(self.size, thread_name_prefix="distsketch-segment")
        self._pending: dict[int, Future] = {}

    def __contains__(self, index: int) -> bool:
        """Whether segment ``index``'s work is pending (submitted, not yet taken)."""
        return index in self._pending

    def submit(self, index: int, work: Callable[[], Any]) -> None:
        """Start ``work()`` (segment ``index``'s summary) unless it is pending."""
        if index in self._pending:
            return
        # a copy of the context per task: recorded block plans reach the run
        ctx = contextvars.copy_context()
        self._pending[index] = self._pool.submit(ctx.run, work)

    def take(self, index: int) -> Any:
        """What segment ``index``'s work returned (waits; re-raises its error)."""
        return self._pending.pop(index).result()

    def fit_memory(self, state_bytes: int, budget: int = PENDING_BYTES) -> None:
        """Keep at most ``budget`` bytes of pending summaries of ``state_bytes`` each."""
        self.size = max(1, min(self.size, budget // max(1, int(state_bytes))))

    def close(self) -> None:
        """Drop work not yet started; what runs ends with the run's client."""
        for fut in self._pending.values():
            fut.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
