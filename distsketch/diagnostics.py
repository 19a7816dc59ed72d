"""Measuring memory of a whole process tree (client, local cluster workers, nanny).

:class:`PeakMemory` samples the resident set size (RSS) of the current process
plus all of its descendants in a background thread, so it sees the memory of
the workers of an embedded ``LocalCluster`` too.  Benchmarks, the quickstart
report and the workflow runner use it.
"""

from __future__ import annotations

import platform
import threading
import time
from types import TracebackType
from typing import Any

import psutil

__all__ = ["PeakMemory", "cpu_model", "format_bytes", "rss_tree_bytes"]


def cpu_model() -> str:
    """The CPU's model name (from ``/proc/cpuinfo`` on Linux), for benchmark reports."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def rss_tree_bytes(pid: int | None = None) -> int:
    """Resident memory in bytes of process ``pid`` (default: this one) and all its children.

    Processes that exit while being measured are skipped.
    """
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = [root]
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return int(total)


def format_bytes(n: float) -> str:
    """``1536 -> '1.50 KiB'``: a short binary-unit size for reports."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"  # pragma: no cover - loop always returns


class PeakMemory:
    """Context manager recording the peak RSS of this process tree.

    Parameters
    ----------
    interval : float, default 0.05
        Seconds between samples.  Short allocation spikes between two samples
        can be missed; the peak is a lower bound of the true peak.
    pid : int, optional
        Root process to watch (default: the current process).

    Attributes
    ----------
    peak_bytes : int
        Largest sampled RSS of the tree (bytes).
    baseline_bytes : int
        RSS of the tree when the context was entered.
    samples : list of (float, int)
        ``(seconds since start, bytes)`` of every sample.

    Notes
    -----
    One background thread; each sample walks the process tree with psutil
    (about 0.1 ms per process).  Memory of the samples list grows by one tuple
    per sample (about 1.2 MB per hour at the default interval).

    Examples
    --------
    >>> import numpy as np
    >>> with PeakMemory() as pm:
    ...     a = np.ones(10_000_000)
    >>> pm.peak_bytes >= pm.baseline_bytes
    True
    """

    def __init__(self, interval: float = 0.05, pid: int | None = None):
        self.interval = float(interval)
        self.pid = pid
        self.peak_bytes = 0
        self.baseline_bytes = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _sample(self) -> None:
        b = rss_tree_bytes(self.pid)
        self.samples.append((time.perf_counter() - self._t0, b))
        if b > self.peak_bytes:
            self.peak_bytes = b

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakMemory:
        self._t0 = time.perf_counter()
        self._stop.clear()
        self.samples = []
        self.peak_bytes = 0
        self._sample()
        self.baseline_bytes = self.peak_bytes
        self._thread = threading.Thread(target=self._run, name="distsketch-peak-memory",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._sample()

    @property
    def increase_bytes(self) -> int:
        """Peak minus baseline (bytes)."""
        return max(0, self.peak_bytes - self.baseline_bytes)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: peak, baseline and number of samples."""
        return {"peak_bytes": int(self.peak_bytes), "baseline_bytes": int(self.baseline_bytes),
                "n_samples": len(self.samples)}
