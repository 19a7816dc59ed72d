"""Segment folding: the rows ``[done, n)`` on a fixed global grid (``[k·S, (k+1)·S)``), one
checkpoint each, so that a resumed run folds exactly the segments an undisturbed one does."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from distsketch.workflow.hooks import Segment, WorkflowHooks
from distsketch.workflow.methods import MethodAdapter
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
    """The block plans a run applied (:func:`distsketch.graph.record_plans`), as JSON-able dicts
    for its manifest and report; equal plans are listed once, with ``count``."""
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
class _Segments:
    """The segments one fold covers: their bounds, rows and targets."""

    X: Any
    Xs: Any
    bounds: list[tuple[int, int]]
    targets: Any

    def segment(self, index: int) -> Segment:
        start, stop = self.bounds[index - 1]
        return Segment(index=index, start=start, stop=stop, n_rows=int(self.X.shape[0]))

    def rows(self, index: int) -> tuple[Any, Any]:
        """Segment ``index``'s preprocessed rows and their targets (None without targets)."""
        start, stop = self.bounds[index - 1]
        return self.Xs[start:stop], None if self.targets is None else self.targets.rows(start, stop)


@dataclasses.dataclass
class SegmentFolder:
    """Folds segments into ``method``'s state and checkpoints after each one (``check_lock``
    first), ``in_flight`` summaries computed at once."""

    method: MethodAdapter
    spec: WorkflowSpec
    state: StateStore
    hooks: WorkflowHooks
    say: Callable[[str], None]
    in_flight: int = 1
    check_lock: Callable[[], None] | None = None

    def fold(self, X: Any, Xs: Any, done: int, meta: dict) -> int:
        """Fold rows ``[done, n)`` of the preprocessed ``Xs`` into the state (``X``, the raw input,
        is fingerprinted; ``meta`` is saved as ``state.json``); return the segments folded.

        Each segment costs one pass over its rows, one fingerprint (at most 1280 rows read)
        and one atomic checkpoint; merges and checkpoints stay in segment order.
        """
        segments = self._segments(X, Xs, done)
        count = len(segments.bounds)
        if not self._folds_ahead():
            self._fold_in_order(segments, meta, range(1, count + 1))
            return count
        first = 1
        if self.method.state is None and count:
            # the first segment fits the operators every summary ahead needs
            self._fold_in_order(segments, meta, range(1, 2))
            first = 2
        if first <= count:
            self._fold_ahead(segments, meta, first)
        return count

    def _segments(self, X: Any, Xs: Any, done: int) -> _Segments:
        n = int(X.shape[0])
        # an estimator without partial_fit is fitted in one segment holding every row
        seg = self.spec.segment_rows if self.method.incremental else n
        targets: Any = None
        if self.spec.targets is not None:
            from distsketch.io.arrays.targets import open_targets

            targets = open_targets(self.spec.targets, n, allow_extra_rows=True,
                                   storage_options=self.spec.storage_options)
            from distsketch.workflow.spec_targets import IntegerLabels, is_classifier_class

            if is_classifier_class(self.method.cls):
                # class numbers stored as floats (a CSV's 1..7) are fitted as the integers
                targets = IntegerLabels(targets)
        return _Segments(X, Xs, segment_bounds(done, n, seg), targets)

    def _folds_ahead(self) -> bool:
        """Whether summaries are computed ahead of the in-order fold."""
        return self.in_flight > 1 and self.method.incremental and folds_ahead(self.method.cls)

    def _fold_in_order(self, segments: _Segments, meta: dict, indices: range) -> None:
        """Fold segments ``indices`` one after another with the method's ``partial_fit``."""
        for index in indices:
            segment = segments.segment(index)
            self.hooks.before_segment(segment)
            X_seg, y = segments.rows(index)
            self.method.update(X_seg, segment.start, y)
            self._checkpoint(segment, prefix_fingerprint(segments.X, segment.stop, self.spec.seed),
                             meta)

    def _fold_ahead(self, segments: _Segments, meta: dict, first: int) -> None:
        """Fold segments ``first..`` in order, their summaries computed ahead in a window."""
        count, seed = len(segments.bounds), self.spec.seed
        # the operators are fitted (by the first segment or the checkpoint); the summaries
        # read a private copy, never the state being merged into
        operators = copy.deepcopy(self.method.state)
        offset = int(operators.n_samples_seen_)  # rows seen before the next segment submitted

        def summary(index: int) -> Callable[[], tuple[Any, str]]:
            nonlocal offset
            X_seg, y = segments.rows(index)
            start, stop = segments.bounds[index - 1]
            # partial_fit folds the rows the fit sees (all but method.holdout's), numbered after
            # those already seen
            X_seg, y = self.method.fitted_rows(X_seg, y, start, stop)
            first_row, offset = offset, offset + int(X_seg.shape[0])
            # the prefix fingerprint is independent of the state: computed ahead too
            return lambda: (operators.summarize(X_seg, y, row_offset=first_row)
                            if X_seg.shape[0] else None, prefix_fingerprint(segments.X, stop, seed))

        window = SummaryWindow(self.in_flight)
        try:
            for index in range(first, count + 1):
                for later in range(index, min(index + window.size, count + 1)):
                    if later not in window:
                        window.submit(later, summary(later))
                segment = segments.segment(index)
                self.hooks.before_segment(segment)
                self._checkpoint(segment, self._merge(window, segment, segments.targets), meta)
        finally:
            window.close()

    def _checkpoint(self, segment: Segment, fingerprint: str, meta: dict) -> None:
        """Commit the state after ``segment`` (``meta`` gains its progress)."""
        stop, n = segment.stop, segment.n_rows
        meta.update(rows_done=stop, in_progress=stop < n, prefix_fingerprint=fingerprint)
        if self.check_lock is not None:
            self.check_lock()
        # the method then holds the state as committed: what a resumed run loads
        self.state.save(self.method, meta)
        self.say(f"segment rows {segment.start}..{stop}: {stop}/{n} rows consumed, checkpointed")
        self.hooks.after_segment(segment)

    def _merge(self, window: SummaryWindow, segment: Segment, targets: Any) -> str:
        """Fold ``segment``'s summary as ``partial_fit`` would; returns its prefix fingerprint."""
        from distsketch.graph import blas_single_thread

        if self.method.needs_classes and targets is not None:
            # refused in segment order, as the one-at-a-time fold refuses it
            _, y = self.method.fitted_rows(None, targets.rows(segment.start, segment.stop),
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
