"""Per-task runtime hygiene and computing with progress.

* BLAS threads are pinned to one per task (nested BLAS threading inside Dask
  threads is slow and makes results depend on thread counts).  BLAS thread
  limits are process-global, so a per-task "set then restore" would race
  between concurrent tasks; instead :func:`compute` pins BLAS for the whole
  local computation, and tasks running in pool threads (a user's own
  ``.compute()``, ``distributed`` workers) pin it once for their process.
  The pinning itself lives in :mod:`distsketch.blas` (re-exported here).
* :func:`compute` runs collections on the active scheduler with a progress bar
  that works both locally (``dask.diagnostics.ProgressBar``) and under
  ``distributed`` (``distributed.progress``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import dask
import numpy as np

from distsketch.blas import blas_single_thread, pin_blas_for_tasks, single_threaded_blas, task_blas

__all__ = ["active_client", "blas_single_thread", "compute", "compute_array", "pin_blas_for_tasks",
           "progress_enabled", "single_threaded_blas", "task_blas"]

def active_client() -> Any | None:
    """The current ``distributed.Client`` if Dask is set to use one, else None."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a required dependency
        return None
    try:
        client = default_client()
    except ValueError:
        return None
    scheduler = dask.config.get("scheduler", None)
    if scheduler not in (None, "dask.distributed", "distributed"):
        return None
    return client


def progress_enabled(progress: bool | None) -> bool:
    """Resolve a ``progress`` argument: None means on when stderr is a terminal
    or ``DISTSKETCH_PROGRESS=1``."""
    if progress is not None:
        return bool(progress)
    env = os.environ.get("DISTSKETCH_PROGRESS")
    if env is not None:
        return env not in ("", "0", "false", "no")
    return sys.stderr.isatty()


def compute(*collections: Any, progress: bool | None = None, **kwargs: Any) -> tuple[Any, ...]:
    """``dask.compute`` with a progress bar suited to the active scheduler.

    Parameters
    ----------
    *collections
        Dask collections (arrays, delayed) to compute together.
    progress : bool or None
        Show progress on stderr; None follows :func:`progress_enabled`.
    **kwargs
        Passed to ``dask.compute`` (``scheduler=...``).

    Returns
    -------
    tuple
        The computed results, in order.
    """
    show = progress_enabled(progress)
    client = active_client() if "scheduler" not in kwargs else None
    if client is not None:
        if not show:
            return tuple(client.compute(list(collections), sync=True))
        from distributed import progress as dprogress

        futures = client.compute(list(collections))
        dprogress(futures, multi=False)
        print(file=sys.stderr)
        return tuple(client.gather(futures))
    with blas_single_thread():
        if show:
            from dask.diagnostics import ProgressBar

            with ProgressBar(out=sys.stderr, minimum=1.0):
                return dask.compute(*collections, **kwargs)
        return dask.compute(*collections, **kwargs)


def compute_array(arr: Any, progress: bool | None = None) -> np.ndarray:
    """Compute a dask array into one NumPy array.

    On local schedulers every block is written straight into a preallocated
    result (``dask.array.store``), which saves the concatenation copy and the
    second set of page faults a plain ``compute`` costs; under ``distributed``
    blocks must travel back anyway and are gathered by :func:`compute`.

    Parameters
    ----------
    arr : dask array
    progress : bool or None
        As in :func:`compute`.

    Returns
    -------
    ndarray of arr's shape and dtype
    """
    if active_client() is not None:
        return compute(arr, progress=progress)[0]
    import dask.array as da

    out = np.empty(arr.shape, dtype=arr.dtype)
    compute(da.store(arr, out, lock=False, compute=False), progress=progress)
    return out
