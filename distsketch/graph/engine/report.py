"""An engine pass in the progress report: a numbered pass of the fit, or a bar on stderr.

Engine passes do not go through :func:`distsketch.graph.runtime.compute`, so
dask's callbacks and progress bars do not see them; :func:`engine_pass` reports
them instead: inside a reporting fit as one of its passes, with the block count
and per-block progress (local) or its duration (cluster); otherwise, with
progress on, as dask's ``ProgressBar`` draws a computation.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from distsketch.graph.progress import active_fit_progress, progress_enabled

__all__ = ["PassBar", "engine_pass"]


class PassBar:
    """One engine pass on stderr, drawn as dask's ``ProgressBar`` draws a computation.

    On a terminal the bar is redrawn as blocks finish; elsewhere only the
    finished line is written.  It has :class:`~distsketch.graph.progress.FitProgress`'s
    pass methods, for one pass at a time.
    """

    width = 40  # dask's ProgressBar's

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()
        self._lock = threading.Lock()
        self._label, self._total, self._unit, self._done = "", 0, "block", 0
        self._t0 = self._drawn = time.perf_counter()

    def _draw(self, frac: float, end: str = "") -> None:
        from dask.utils import format_time

        what = (f"{self._label}: {self._total} {self._unit}(s)" if self._total
                else f"{self._label} on the cluster")
        text = (f"[{'#' * int(self.width * frac):<{self.width}}] | {int(100 * frac)}% "
                f"Completed | {format_time(time.perf_counter() - self._t0)} | {what}")
        with contextlib.suppress(ValueError, OSError):  # a closed stream: nothing to report to
            sys.stderr.write(("\r" if self.live else "") + text + end)
            sys.stderr.flush()

    def pass_started(self, token: int, label: str, total: int = 0, unit: str = "block") -> None:
        self._label, self._total, self._unit = label, int(total), unit
        self._t0 = self._drawn = time.perf_counter()

    def task_done(self, token: int, done: int, total: int) -> None:
        with self._lock:
            self._done = max(self._done, int(done))
            now = time.perf_counter()
            if self.live and total and now - self._drawn >= 0.1:
                self._drawn = now
                self._draw(self._done / total)

    def pass_finished(self, token: int, failed: bool = False) -> None:
        with self._lock:
            if self._total:
                frac = self._done / self._total
            else:  # on a cluster: no count, done or not
                frac = 0.0 if failed else 1.0
            self._draw(frac, "\n")


def _ignore() -> None:
    pass


@contextlib.contextmanager
def engine_pass(label: str, blocks: int, progress: bool | None = None
                ) -> Iterator[Callable[[], None]]:
    """Report one engine pass of ``blocks`` blocks (``0``: on a cluster, its duration only).

    Yields ``tick()``, to be called once per finished block (from any thread).
    Inside a fit that reports (:func:`~distsketch.graph.progress.active_fit_progress`)
    the pass is one of the fit's numbered passes; otherwise, with ``progress``
    on (:func:`~distsketch.graph.progress.progress_enabled`), a :class:`PassBar`.
    """
    report: Any = active_fit_progress()
    if report is None:
        if not progress_enabled(progress):
            yield _ignore
            return
        report = PassBar()
    alive = object()  # held for the pass: its id names the pass among those running
    token = id(alive)
    lock = threading.Lock()
    done = [0]

    def tick() -> None:
        with lock:
            done[0] += 1
            count = done[0]
        report.task_done(token, count, blocks)

    report.pass_started(token, label, blocks, unit="block")
    failed = True
    try:
        yield tick
        failed = False
    finally:
        report.pass_finished(token, failed=failed)
