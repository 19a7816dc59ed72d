"""Segments in flight: later segments' summaries compute while earlier ones commit.

A method's ``partial_fit`` on one segment is two steps: a *summary* of the
segment's rows (a tree reduction on the cluster, which needs only the fitted
operators and the segment's first global row) and a *merge* of that summary
into the running state (small, on the driver).  The summaries of several
segments are independent, so a run submits up to ``window`` of them at once
and merges them one by one, in segment order, with the same merge
``partial_fit`` uses: the state after k merged segments is bitwise the state
of a run that folds the segments one after another.

The split is the public mergeable-estimator protocol
(:class:`~distsketch.estimators.base.MergeableEstimator`: ``summarize``,
``merge_summaries``, ``fold``); an estimator that implements it folds this
way, every other one folds one segment at a time (:func:`folds_ahead` is
False).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from distsketch.estimators.base import is_mergeable

__all__ = ["MAX_IN_FLIGHT", "PENDING_BYTES", "SummaryWindow", "folds_ahead", "segments_in_flight",
           "summary_bytes"]

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


def folds_ahead(cls: type) -> bool:
    """Whether segments of ``cls`` can be summarised ahead and folded in order.

    True for an estimator that implements the mergeable-estimator protocol
    (:class:`~distsketch.estimators.base.MergeableEstimator`): its
    ``partial_fit`` is ``fold(summarize(X, y, row_offset=n_samples_seen_))``,
    so a segment's summary computes from a copy of the fitted operators
    (any thread, any order) and ``fold`` merges it into the state in order.
    """
    return is_mergeable(cls)


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
