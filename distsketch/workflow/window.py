"""Segments in flight: later segments' summaries compute while earlier ones commit.

The summaries of a mergeable estimator (``summarize`` / ``fold``) need only the fitted
operators, so a run computes several at once and merges them one by one, in segment
order: the state after k segments is bitwise that of a one-at-a-time fold.
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
    """Whether segments of ``cls`` can be summarised ahead and folded in order (a
    :class:`~distsketch.estimators.base.MergeableEstimator`)."""
    return is_mergeable(cls)


def segments_in_flight(requested: int | None) -> int:
    """``requested``, else one per task thread of the attached cluster plus one (busy while
    the driver checkpoints), at most :data:`MAX_IN_FLIGHT`; 1 without a cluster."""
    if requested is not None:
        return int(requested)
    from distsketch.graph import active_client, cluster_resources

    if active_client() is None:
        return 1
    return max(1, min(MAX_IN_FLIGHT, cluster_resources().threads + 1))


class SummaryWindow:
    """Driver threads that compute up to ``size`` segment summaries ahead of the in-order
    merge (each holds one state on the driver once computed)."""

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
