"""Measuring memory: the process tree (client, local cluster workers, nanny) and
the workers of a distributed cluster wherever they run (:class:`PeakMemory`,
:class:`WorkerMemory`).
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
import time
import weakref
from types import TracebackType
from typing import Any

import psutil

__all__ = ["PeakMemory", "WorkerMemory", "cpu_model", "format_bytes", "rss_tree_bytes",
           "worker_memory"]

logger = logging.getLogger(__name__)


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
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def _default_client() -> Any:
    """The running default ``distributed`` client, or None (distributed is not imported for it)."""
    if "distributed" not in sys.modules:
        return None  # no client can exist without distributed having been imported
    from distributed import default_client

    try:
        client = default_client()
    except ValueError:
        return None
    return client


def _distributed_is_the_scheduler() -> bool:
    """False while Dask's ``scheduler`` config names a local scheduler (sync, threads, ...)."""
    import dask

    return dask.config.get("scheduler", None) in (None, "dask.distributed", "distributed")


class WorkerMemory:
    """Peak memory of a ``distributed`` cluster's workers during a block of work.

    Samples, in a background thread, the memory of every worker as the
    scheduler knows it (each worker's process RSS, sent with its heartbeats)
    and, with an explicit client, distributed's own
    :class:`~distributed.diagnostics.MemorySampler` on the scheduler.  Works
    for workers on any machine.  Use :func:`worker_memory` to create one.

    Parameters
    ----------
    client : distributed.Client, optional
        The client whose cluster to watch; None follows the default client
        (the one most recently connected) of any cluster connected after this
        object was created, sampling nothing while there is none or while
        Dask's ``scheduler`` config names a local scheduler (sync, threads).
    interval : float, default 0.5
        Seconds between samples.  Workers report their memory with their
        heartbeats (every 0.5 s up to 10 workers, 1 s up to 50, then slower),
        so sampling faster gains nothing.

    Attributes
    ----------
    peak_bytes : int or None
        Largest sampled total over all workers (bytes); None when no cluster
        was seen.
    per_worker_peak_bytes : dict of str to int
        Largest sampled memory of each worker, by worker address.
    n_samples : int
        Number of samples taken from the scheduler.

    Notes
    -----
    One small request to the scheduler per interval (its identity, O(workers)
    bytes), from one background thread; nothing runs on the workers.  The
    peak is a lower bound: a spike shorter than a heartbeat is not seen.
    """

    def __init__(self, client: Any = None, interval: float = 0.5):
        self.client = client
        self.interval = float(interval)
        # following the default client: one that is already there belongs to someone else
        before = _default_client() if client is None else None
        self._before = weakref.ref(before) if before is not None else None
        self.peak_bytes: int | None = None
        self.per_worker_peak_bytes: dict[str, int] = {}
        self.n_samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler_key: str | None = None
        self._lock = threading.Lock()

    def _client(self) -> Any:
        if self.client is None and not _distributed_is_the_scheduler():
            return None  # e.g. a sync run while some other client is the default
        client = self.client if self.client is not None else _default_client()
        if client is not None and self._before is not None and client is self._before():
            return None
        if client is None or getattr(client, "asynchronous", False) or \
                str(getattr(client, "status", "")) != "running":
            return None
        return client

    def sample(self) -> None:
        """Take one sample now (skipped quietly when no running client is attached)."""
        client = self._client()
        if client is None:
            return
        try:
            info = client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=10)
        except Exception as exc:  # the client may close between the check and the call
            logger.debug("worker memory sample skipped: %s", exc)
            return
        per_worker = {str(addr): int((w.get("metrics") or {}).get("memory") or 0)
                      for addr, w in (info.get("workers") or {}).items()}
        with self._lock:
            self._record(sum(per_worker.values()))
            for addr, b in per_worker.items():
                if b > self.per_worker_peak_bytes.get(addr, -1):
                    self.per_worker_peak_bytes[addr] = b
            self.n_samples += 1

    def _record(self, total: int) -> None:
        if self.peak_bytes is None or total > self.peak_bytes:
            self.peak_bytes = int(total)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def _sampler(self, start: bool) -> None:
        """Start or stop distributed's MemorySampler (explicit client only)."""
        client = self._client() if self.client is not None else None
        if client is None:
            return
        try:
            if start:
                self._sampler_key = client.sync(client.scheduler.memory_sampler_start,
                                                client=client.id, measure="process",
                                                interval=self.interval, callback_timeout=10)
            elif self._sampler_key is not None:
                series = client.sync(client.scheduler.memory_sampler_stop,
                                     key=self._sampler_key, callback_timeout=10)
                with self._lock:
                    for _, nbytes in series:
                        self._record(int(nbytes))
        except Exception as exc:  # an old or busy scheduler: the identity samples remain
            logger.debug("MemorySampler unavailable: %s", exc)
        if not start:
            self._sampler_key = None

    def __enter__(self) -> WorkerMemory:
        self._stop.clear()
        self._sampler(start=True)
        self.sample()
        self._thread = threading.Thread(target=self._run, name="distsketch-worker-memory",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.sample()
        self._sampler(start=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: ``workers_peak_bytes``, ``per_worker_peak_bytes``, ``n_worker_samples``."""
        with self._lock:
            return {"workers_peak_bytes": self.peak_bytes,
                    "per_worker_peak_bytes": dict(self.per_worker_peak_bytes),
                    "n_worker_samples": self.n_samples}


def worker_memory(client: Any, interval: float = 0.5) -> WorkerMemory:
    """Context manager measuring the workers' peak memory during a block of work.

    Parameters
    ----------
    client : distributed.Client
        Connected client of the cluster to watch.
    interval : float, default 0.5
        Seconds between samples.

    Returns
    -------
    WorkerMemory
        Use as ``with worker_memory(client) as wm: ...``; afterwards
        ``wm.peak_bytes`` is the largest total over all workers,
        ``wm.per_worker_peak_bytes`` the largest per worker, and
        ``wm.as_dict()`` both, JSON-ready.

    Examples
    --------
    >>> from distributed import Client, LocalCluster  # doctest: +SKIP
    >>> with LocalCluster(n_workers=2) as c, Client(c) as client:  # doctest: +SKIP
    ...     with worker_memory(client) as wm:
    ...         client.submit(sum, range(10)).result()
    >>> wm.peak_bytes > 0  # doctest: +SKIP
    True
    """
    if client is None:
        raise ValueError("worker_memory needs a connected distributed.Client; use PeakMemory() "
                         "for the memory of this process tree.")
    return WorkerMemory(client, interval=interval)


class PeakMemory:
    """Context manager recording the peak RSS of this process tree, and of the workers.

    Parameters
    ----------
    interval : float, default 0.05
        Seconds between samples.  Short allocation spikes between two samples
        can be missed; the peak is a lower bound of the true peak.
    pid : int, optional
        Root process to watch (default: the current process).
    client : distributed.Client, "auto" or None, default "auto"
        Whose workers to measure as well (:class:`WorkerMemory`): a client,
        ``"auto"`` for the default client of a cluster connected inside the
        block (as the CLI and workflows do: ``connect()`` inside
        ``PeakMemory()``), or None for the process tree only.  A client that
        existed before the block is measured only when passed explicitly.
    worker_interval : float, default 0.5
        Seconds between samples of the workers' memory.

    Attributes
    ----------
    peak_bytes : int
        Largest sampled RSS of the tree (bytes).
    baseline_bytes : int
        RSS of the tree when the context was entered.
    samples : list of (float, int)
        ``(seconds since start, bytes)`` of every sample.
    workers_peak_bytes : int or None
        Largest sampled total memory of the workers of the attached cluster;
        None when no cluster was attached.  Workers of an embedded
        LocalCluster are also inside ``peak_bytes`` (they are children of
        this process), remote ones only here.
    per_worker_peak_bytes : dict of str to int
        Largest sampled memory of each worker, by address.

    Notes
    -----
    One background thread for the tree; each sample walks the process tree
    with psutil (about 0.1 ms per process).  Memory of the samples list grows
    by one tuple per sample (about 1.2 MB per hour at the default interval).
    With a client, a second thread asks the scheduler for the workers' memory
    every ``worker_interval`` seconds (see :class:`WorkerMemory`).

    Examples
    --------
    >>> import numpy as np
    >>> with PeakMemory() as pm:
    ...     a = np.ones(10_000_000)
    >>> pm.peak_bytes >= pm.baseline_bytes
    True
    """

    def __init__(self, interval: float = 0.05, pid: int | None = None, *, client: Any = "auto",
                 worker_interval: float = 0.5):
        self.interval = float(interval)
        self.pid = pid
        self.client = client
        self.worker_interval = float(worker_interval)
        self.peak_bytes = 0
        self.baseline_bytes = 0
        self.samples: list[tuple[float, int]] = []
        self.workers: WorkerMemory | None = None
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
        if self.client is not None:
            self.workers = WorkerMemory(None if isinstance(self.client, str) else self.client,
                                        interval=self.worker_interval).__enter__()
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
        if self.workers is not None:
            self.workers.__exit__(exc_type, exc, tb)

    def sample_now(self) -> None:
        """Sample the process tree and the workers now, e.g. before the cluster closes (a run
        shorter than one worker interval would otherwise see no worker sample)."""
        self._sample()
        if self.workers is not None:
            self.workers.sample()

    @property
    def increase_bytes(self) -> int:
        """Peak minus baseline (bytes)."""
        return max(0, self.peak_bytes - self.baseline_bytes)

    @property
    def workers_peak_bytes(self) -> int | None:
        """Largest sampled total memory of the attached cluster's workers (None: no cluster)."""
        return None if self.workers is None else self.workers.peak_bytes

    @property
    def per_worker_peak_bytes(self) -> dict[str, int]:
        """Largest sampled memory of each worker of the attached cluster, by address."""
        return {} if self.workers is None else dict(self.workers.per_worker_peak_bytes)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: peak, baseline and number of samples of the process tree, and
        ``workers_peak_bytes`` (None without a cluster), ``per_worker_peak_bytes``,
        ``n_worker_samples``."""
        workers = (self.workers.as_dict() if self.workers is not None else
                   {"workers_peak_bytes": None, "per_worker_peak_bytes": {},
                    "n_worker_samples": 0})
        return {"peak_bytes": int(self.peak_bytes), "baseline_bytes": int(self.baseline_bytes),
                "n_samples": len(self.samples)} | workers
