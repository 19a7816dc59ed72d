"""Hooks: points of a run where instrumentation and tests step in.

A run calls its hooks at fixed points; production code never reads fault
switches from the environment.  Tests subclass :class:`WorkflowHooks` to count
calls, raise, or end the process (``os._exit``) at a point and check that the
next run recovers.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

__all__ = ["Segment", "WorkflowHooks"]


@dataclasses.dataclass(frozen=True)
class Segment:
    """One segment of the global row grid folded by a run.

    Attributes
    ----------
    index : int
        1 for the first segment this run folds, 2 for the next, ...
    start, stop : int
        Its global rows ``[start, stop)``.
    n_rows : int
        Rows of the input (the run ends when ``stop == n_rows``).
    """

    index: int
    start: int
    stop: int
    n_rows: int


class WorkflowHooks:
    """No-op hooks; override the points you need and pass ``run_workflow(..., hooks=...)``.

    Points, in the order a run reaches them:

    * :meth:`before_segment` — before a segment is folded into the state
      (with segments in flight its summary may already be computing);
    * :meth:`after_segment` — after its state is checkpointed (a run killed
      here resumes after this segment);
    * :meth:`before_outputs` — the state covers every row, no output is
      written yet;
    * :meth:`before_commit` — every output is in the uncommitted result
      folder, the manifest (which marks it complete) is not;

    (``result_tmp`` is a :class:`pathlib.Path` for a local ``outputs.dir``,
    the temporary prefix's :class:`~distsketch.io.storage.urls.Location` on an
    object store.)
    * :meth:`on_error` — the run raised; the exception propagates afterwards.
    """

    def before_segment(self, segment: Segment) -> None:
        """Called before ``segment`` is folded into the state, in segment order."""

    def after_segment(self, segment: Segment) -> None:
        """Called once ``segment`` is folded and its checkpoint committed."""

    def before_outputs(self, result_tmp: Path | Any) -> None:
        """Called with the (still empty) uncommitted result folder."""

    def before_commit(self, result_tmp: Path | Any) -> None:
        """Called before the manifest is written and the result folder renamed into place."""

    def on_error(self, exc: BaseException) -> None:
        """Called with the exception that ends a run (then re-raised)."""
