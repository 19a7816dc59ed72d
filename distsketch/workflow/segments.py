"""Segment folding: the rows ``[done, n)`` on a fixed global grid, one checkpoint each.

Segment boundaries are multiples of ``segment_rows`` (``[k·S, (k+1)·S)``),
whatever row the previous run stopped at, so an interrupted and resumed run
folds exactly the segments an undisturbed run folds, in the same order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distsketch.workflow.hooks import Segment, WorkflowHooks
from distsketch.workflow.methods import MethodAdapter
from distsketch.workflow.spec import WorkflowSpec
from distsketch.workflow.state import prefix_fingerprint, save_state

__all__ = ["SegmentFolder", "segment_bounds"]


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


@dataclasses.dataclass
class SegmentFolder:
    """Folds segments into a method's state and checkpoints after each one.

    Attributes
    ----------
    method : MethodAdapter
        Holds the running state.
    spec : WorkflowSpec
    state_dir : pathlib.Path
        The checkpoint folder (``outputs.dir/state``).
    hooks : WorkflowHooks
    say : callable
        Receives one progress line per segment.
    """

    method: MethodAdapter
    spec: WorkflowSpec
    state_dir: Path
    hooks: WorkflowHooks
    say: Callable[[str], None]

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
        1280 rows read) and one atomic checkpoint of the state.
        """
        n = int(X.shape[0])
        # an estimator without partial_fit is fitted in one segment holding every row
        seg = self.spec.segment_rows if self.method.incremental else n
        targets = None
        if self.spec.targets is not None:
            from distsketch.io.targets import open_targets

            targets = open_targets(self.spec.targets, n, allow_extra_rows=True)
        bounds = segment_bounds(done, n, seg)
        for index, (start, stop) in enumerate(bounds, 1):
            segment = Segment(index=index, start=start, stop=stop, n_rows=n)
            self.hooks.before_segment(segment)
            y = None if targets is None else targets.rows(start, stop)
            self.method.update(Xs[start:stop], start, y)
            meta.update(rows_done=stop, in_progress=stop < n,
                        prefix_fingerprint=prefix_fingerprint(X, stop, self.spec.seed))
            save_state(self.state_dir, self.method, meta)
            # keep the in-memory state identical to what a resumed run would load
            self.method.load(self.state_dir / "summary")
            self.say(f"segment rows {start}..{stop}: {stop}/{n} rows consumed, checkpointed")
            self.hooks.after_segment(segment)
        return len(bounds)
