"""Progress of a whole fit on stderr: every pass over the data and the work between passes.

While :func:`fit_progress` is active (the outermost ``fit`` or ``partial_fit``
reports) and progress is on, every graph computation is a numbered pass with its
task count and duration, local or on ``distributed``; the time in this process
between passes is reported as such, and the last line gives the fit's totals.  On
a terminal one status line is redrawn; elsewhere only finished steps are written.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

import dask

#: dask config key of the default of every ``progress=None`` (the CLI's --progress sets it)
PROGRESS_KEY = "distsketch.progress"
#: deprecated alias of the dask config ``distsketch.progress``, read where that is unset
DEPRECATED_PROGRESS_VARIABLE = "DISTSKETCH_PROGRESS"


def _is_on(value: Any) -> bool:
    # a config value from YAML or DASK_DISTSKETCH__PROGRESS (bool, 0/1, or a word)
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def progress_enabled(progress: bool | None) -> bool:
    """Resolve a ``progress`` argument.

    None means: the dask config ``distsketch.progress`` where set (the CLI's
    ``--progress`` / ``--no-progress`` set it while a command runs; from the
    environment ``DASK_DISTSKETCH__PROGRESS=1``), else the deprecated
    variable ``DISTSKETCH_PROGRESS``, else on when stderr is a terminal.
    """
    if progress is not None:
        return bool(progress)
    value = dask.config.get(PROGRESS_KEY, None)
    if value is None:
        value = os.environ.get(DEPRECATED_PROGRESS_VARIABLE)
    if value is not None:
        return _is_on(value)
    return sys.stderr.isatty()


__all__ = ["DEPRECATED_PROGRESS_VARIABLE", "PROGRESS_KEY", "FitProgress", "active_fit_progress",
           "fit_progress", "pass_label", "progress_enabled"]

#: in-process stretches shorter than this are not worth a line of their own
_SHORT_SECONDS = 0.05
#: seconds between redraws of a terminal's status line
_REDRAW_SECONDS = 0.2
_WIDTH = 24

_ACTIVE: contextvars.ContextVar[FitProgress | None] = contextvars.ContextVar(
    "distsketch_fit_progress", default=None)


#: suffixes of the graph layer's task names that say which step of a pass a task is
_STEPS = ("-chunk", "-merge", "-aggregate", "-partial")


def pass_label(keys: Any) -> str:
    """A readable name for a computation from the keys of its results.

    ``("ridge-summary-merge-3f2a...", 0)`` gives ``ridge-summary``: the name
    the graph layer gave the pass, without dask's token or the step.
    """
    from collections import Counter

    from dask.utils import key_split

    counts: Counter[str] = Counter()
    for key in keys:
        try:
            name = key_split(key)
        except Exception:  # a key dask cannot split: not worth failing a fit over
            continue
        for step in _STEPS:
            name = name.removesuffix(step)
        counts[name] += 1
    return counts.most_common(1)[0][0] if counts else "graph"


def _unwrapped(keys: list, state: dict) -> list:
    # dask's "finalize" task (concatenating an array's blocks) stands for what it finalises
    from dask.utils import key_split

    out: list = []
    for key in keys:
        inner = state["dependencies"].get(key, ()) if str(key_split(key)).startswith(
            "finalize") else ()
        out.extend(inner or [key])
    return out


class FitProgress:
    """The progress report of one fit ``name`` (see the module docstring).

    Written to ``out`` (default ``sys.stderr`` at the time of each write), with a
    redrawn status line when ``live`` (default: whether ``out`` is a terminal).
    """

    def __init__(self, name: str, out: IO[str] | None = None, live: bool | None = None):
        self.name = name
        self._out = out
        self.live = self._stream().isatty() if live is None else bool(live)
        self.passes = 0
        self.pass_seconds = 0.0
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self._idle_since = self._t0
        self._running: dict[int, list[Any]] = {}  # id -> [label, t0, done, total, unit]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._callback: Any = None

    # ------------------------------------------------------------------ output

    def _stream(self) -> IO[str]:
        return self._out if self._out is not None else sys.stderr

    def _write(self, text: str) -> None:
        with contextlib.suppress(ValueError, OSError):  # a closed stream: nothing to report to
            stream = self._stream()
            stream.write(text)
            stream.flush()

    def _line(self, text: str) -> None:
        # a finished step: on a terminal it replaces the status line
        self._write(("\r\x1b[K" if self.live else "") + f"{self.name}: {text}\n")

    def _status(self) -> str:
        elapsed = time.perf_counter() - self._t0
        with self._lock:
            running = list(self._running.values())
        if not running:
            return (f"{self.name}: {elapsed:6.1f} s | working in this process after "
                    f"{self.passes} pass(es)")
        label, t0, done, total, unit = running[-1]
        head = f"{self.name}: {elapsed:6.1f} s | pass {self.passes + 1} {label}"
        if not total:  # on a cluster: the pass's own time
            return f"{head} running for {time.perf_counter() - t0:.1f} s"
        bar = "#" * int(_WIDTH * done / total)
        return f"{head} [{bar:<{_WIDTH}}] {done}/{total} {unit}s"

    def _redraw(self) -> None:
        while not self._stop.wait(_REDRAW_SECONDS):
            self._write("\r\x1b[K" + self._status())

    # ------------------------------------------------------------------ passes

    def _in_process(self, now: float) -> None:
        gap = now - self._idle_since
        if gap >= _SHORT_SECONDS:
            self._line(f"work in this process: {gap:.2f} s")

    def pass_started(self, token: int, label: str, total: int = 0, unit: str = "task") -> None:
        """A computation starts (``token`` identifies it until :meth:`pass_finished`).

        ``total`` counts its ``unit``: dask's tasks, or an engine pass's blocks.
        """
        now = time.perf_counter()
        with self._lock:
            if not self._running:
                self._in_process(now)
            self._running[token] = [label, now, 0, int(total), unit]

    def task_done(self, token: int, done: int, total: int) -> None:
        with self._lock:
            entry = self._running.get(token)
            if entry is not None:
                entry[2], entry[3] = int(done), int(total)

    def pass_finished(self, token: int, failed: bool = False) -> None:
        now = time.perf_counter()
        with self._lock:
            entry = self._running.pop(token, None)
            if entry is None:
                return
            label, t0, _, total, unit = entry
            self.passes += 1
            self.pass_seconds += now - t0
            number = self.passes
            if not self._running:
                self._idle_since = now
        state = "failed after" if failed else "in"
        tasks = f"{total} {unit}(s) " if total else ""
        self._line(f"pass {number} ({label}): {tasks}{state} {now - t0:.2f} s")

    # ------------------------------------------------------------------ scope

    def __enter__(self) -> FitProgress:
        from dask.callbacks import Callback

        progress = self

        class Passes(Callback):
            # a local scheduler's computation (the threaded, synchronous or process one)
            def _start_state(self, dsk: Any, state: Any) -> None:
                total = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
                # named after its results: the keys nothing else in the graph needs
                results = [k for k, needed_by in state["dependents"].items() if not needed_by]
                progress.pass_started(id(state), pass_label(_unwrapped(results, state)), total)

            def _posttask(self, key: Any, result: Any, dsk: Any, state: Any,
                          worker_id: Any) -> None:
                done = len(state["finished"])
                total = done + sum(len(state[k]) for k in ("ready", "waiting", "running"))
                progress.task_done(id(state), done, total)

            def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
                progress.pass_finished(id(state), failed=bool(errored))

        self._callback = Passes()
        self._callback.register()
        if self.live:
            self._thread = threading.Thread(target=self._redraw, name="distsketch-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._callback.unregister()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        now = time.perf_counter()
        self._in_process(now)
        total = now - self._t0
        verb = "stopped" if exc_type is not None else "fitted"
        self._line(f"{verb} in {total:.2f} s: {self.passes} pass(es) over the data "
                   f"({self.pass_seconds:.2f} s), {max(0.0, total - self.pass_seconds):.2f} s "
                   "of work in this process")


def active_fit_progress() -> FitProgress | None:
    """The report of the fit running in this context, if it reports."""
    return _ACTIVE.get()


@contextlib.contextmanager
def fit_progress(name: str) -> Iterator[FitProgress | None]:
    """Report the progress of a fit while the context is active (see the module docstring).

    Only the outermost fit of a context reports (an estimator fitting others
    inside its own ``fit`` reports their passes as its own), and only with
    progress on (:func:`~distsketch.graph.runtime.progress_enabled`);
    otherwise this does nothing.
    """
    if _ACTIVE.get() is not None or not progress_enabled(None):
        yield None
        return
    with FitProgress(name) as report:
        token = _ACTIVE.set(report)
        try:
            yield report
        finally:
            _ACTIVE.reset(token)
