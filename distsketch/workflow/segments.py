"""Segment folding: the rows ``[done, n)`` on a fixed global grid, one checkpoint each.

Segment boundaries are multiples of ``segment_rows`` (``[k·S, (k+1)·S)``),
whatever row the previous run stopped at, so an interrupted and resumed run
folds exactly the segments an undisturbed run folds, in the same order.

Under a cluster several segments are in flight: their summaries compute
together (:mod:`~distsketch.workflow.window`) while the driver merges and
checkpoints them one by one, in order.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from distsketch.workflow.hooks import Segment, WorkflowHooks
from distsketch.workflow.methods import MethodAdapter, held_out
from distsketch.workflow.spec import WorkflowSpec
from distsketch.workflow.state import StateStore, prefix_fingerprint
from distsketch.workflow.window import SummaryWindow, folds_ahead, summary_bytes

__all__ = ["SegmentFolder", "plan_summary", "segment_bounds"]


def segment_bounds(done: int, n: int, segment_rows: int) -> list[tuple[int, int]]:
    """The segments ``[start, stop)`` that cover rows ``[done, n)`` on the global grid.

    Examples
    --------
    >>> segment_bounds(450, 1000, 200)
    [(450, 600), (600, 800), (800, 1000)]
    """
    out = []
    while done < n:
        stop = min(n, (done // segment_rows + 1) * segment_rows)
        out.append((done, stop))
        done = stop
    return out


def plan_summary(plans: list[Any]) -> list[dict[str, Any]]:
    """The block plans a run applied, as JSON-able dicts for its manifest and report.

    Plans of one stage with the same blocks (every full segment, typically)
    are listed once, at their first use, with ``count`` the times applied.

    Parameters
    ----------
    plans : list of BlockPlan
        From :func:`distsketch.graph.record_plans`, in the order applied.

    Returns
    -------
    list of dict
        ``stage``, ``block_rows`` (rows per block), ``tasks`` (row blocks, one
        task each), ``task_bytes`` (projected memory per task), ``budget``,
        ``limit`` (what set the block size), ``fan_in``, ``depth`` and
        ``merge_bytes`` of a reduction (None for a map), ``count``.
    """
    out: dict[tuple, dict[str, Any]] = {}
    for p in plans:
        row = {"stage": p.name, "block_rows": int(p.block_rows), "tasks": int(p.n_blocks),
               "task_bytes": int(p.task_bytes), "budget": p.budget, "limit": p.limit,
               "fan_in": p.fan_in, "depth": p.depth, "merge_bytes": p.merge_bytes}
        key = tuple(row.values())
        if key in out:
            out[key]["count"] += 1
        else:
            out[key] = row | {"count": 1}
    return list(out.values())


@dataclasses.dataclass
class SegmentFolder:
    """Folds segments into a method's state and checkpoints after each one.

    Attributes
    ----------
    method : MethodAdapter
        Holds the running state.
    spec : WorkflowSpec
    state : StateStore
        Where checkpoints are committed (``outputs.dir/state``).
    hooks : WorkflowHooks
    say : callable
        Receives one progress line per segment.
    in_flight : int, default 1
        Segment summaries computed at once (1: one segment after another).
    check_lock : callable, optional
        Raises when the run no longer holds its output's lock (called before
        each checkpoint).
    """

    method: MethodAdapter
    spec: WorkflowSpec
    state: StateStore
    hooks: WorkflowHooks
    say: Callable[[str], None]
    in_flight: int = 1
    check_lock: Callable[[], None] | None = None

    def fold(self, X: Any, Xs: Any, done: int, meta: dict) -> int:
        """Fold rows ``[done, n)`` of ``Xs`` into the state; return the segments folded.

        Parameters
        ----------
        X : dask array of shape (n, d)
            The raw input (fingerprinted after each segment).
        Xs : dask array of shape (n, d)
            The preprocessed input the method sees.
        done : int
            Rows already in the state.
        meta : dict
            ``state.json`` content; updated with the progress and saved per segment.

        Notes
        -----
        Each segment costs one pass over its rows, one fingerprint (at most
        1280 rows read) and one atomic checkpoint of the state.  With
        ``in_flight > 1`` and a method that splits into summary and merge,
        the summaries of up to ``in_flight`` segments compute at once; the
        merges and checkpoints stay in segment order, so the state after k
        segments is bitwise that of a one-at-a-time fold (a run killed
        mid-window resumes after its last checkpoint).
        """
        n = int(X.shape[0])
        # an estimator without partial_fit is fitted in one segment holding every row
        seg = self.spec.segment_rows if self.method.incremental else n
        targets = None
        if self.spec.targets is not None:
            from distsketch.io.targets import open_targets

            targets = open_targets(self.spec.targets, n, allow_extra_rows=True,
                                   storage_options=self.spec.storage_options)
        bounds = segment_bounds(done, n, seg)
        # summaries ahead of the in-order fold: the estimator implements the mergeable protocol
        ahead_ok = self.in_flight > 1 and self.method.incremental and folds_ahead(self.method.cls)
        window: SummaryWindow | None = None
        seed = self.spec.seed

        def rows(index: int) -> tuple[Any, Any, int, int]:
            start, stop = bounds[index - 1]
            y = None if targets is None else targets.rows(start, stop)
            return Xs[start:stop], y, start, stop

        offset = 0  # rows the state will have seen before the next segment submitted

        def ahead(operators: Any, index: int) -> Callable[[], tuple[Any, str]]:
            nonlocal offset
            X_seg, y, start, stop = rows(index)
            # partial_fit folds the rows the fit sees (all but method.holdout's), numbered after
            # those already seen
            X_seg, y = self._fitted_rows(X_seg, y, start, stop)
            first, offset = offset, offset + int(X_seg.shape[0])
            # the prefix fingerprint is independent of the state: computed ahead too
            return lambda: (operators.summarize(X_seg, y, row_offset=first)
                            if X_seg.shape[0] else None, prefix_fingerprint(X, stop, seed))

        try:
            operators = None
            for index, (start, stop) in enumerate(bounds, 1):
                if window is None and ahead_ok and self.method.state is not None:
                    # the operators are fitted (by the first segment or the checkpoint); the
                    # summaries read a private copy, never the state being merged into
                    operators = copy.deepcopy(self.method.state)
                    offset = int(operators.n_samples_seen_)
                    window = SummaryWindow(self.in_flight)
                if window is not None:
                    for later in range(index, min(index + window.size, len(bounds) + 1)):
                        if later not in window:
                            window.submit(later, ahead(operators, later))
                segment = Segment(index=index, start=start, stop=stop, n_rows=n)
                self.hooks.before_segment(segment)
                if window is not None:
                    fingerprint = self._merge(window, segment, targets)
                else:
                    X_seg, y, _, _ = rows(index)
                    self.method.update(X_seg, start, y)
                    fingerprint = prefix_fingerprint(X, stop, seed)
                meta.update(rows_done=stop, in_progress=stop < n, prefix_fingerprint=fingerprint)
                if self.check_lock is not None:
                    self.check_lock()
                self.state.save(self.method, meta)
                # keep the in-memory state identical to what a resumed run would load
                self.state.reload(self.method)
                self.say(f"segment rows {start}..{stop}: {stop}/{n} rows consumed, checkpointed")
                self.hooks.after_segment(segment)
        finally:
            if window is not None:
                window.close()
        return len(bounds)

    def _merge(self, window: SummaryWindow, segment: Segment, targets: Any) -> str:
        """Fold ``segment``'s summary into the state as ``partial_fit`` would; return the
        segment's prefix fingerprint."""
        from distsketch.graph import blas_single_thread

        if self.method.needs_classes and targets is not None:
            # refused in segment order, as the one-at-a-time fold refuses it
            _, y = self._fitted_rows(None, targets.rows(segment.start, segment.stop),
                                     segment.start, segment.stop)
            if len(y):
                self.method.check_labels(y, segment.start)
        summary, fingerprint = window.take(segment.index)
        if summary is None:  # every row of the segment is held out
            return fingerprint
        window.fit_memory(summary_bytes(summary))
        with blas_single_thread():  # partial_fit merges on one BLAS thread
            self.method.state.fold(summary)
        return fingerprint

    def _fitted_rows(self, X: Any, y: Any, start: int, stop: int) -> tuple[Any, Any]:
        """Rows ``[start, stop)`` and their targets less the held-out ones (``method.holdout``),
        as :meth:`MethodAdapter.update` leaves them out."""
        keep = ~held_out(self.method.seed, start, stop, self.method.holdout)
        if keep.all():
            return X, y
        return (None if X is None else X[keep]), (None if y is None else np.asarray(y)[keep])
