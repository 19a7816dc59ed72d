"""BLAS thread control: one thread for tasks and for every factorisation that
becomes model state.

Two reasons.  Multi-threaded OpenBLAS inside Dask's own threads is slow and
oversubscribes the cores.  And LAPACK results (``eigh``, ``svd``, ``qr``,
Cholesky) change in the last bits with the number of BLAS threads, so a model
fitted in a process whose BLAS runs several threads would differ from one
fitted where BLAS is pinned; determinism requires one thread everywhere.

BLAS limits are process-global (threadpoolctl): :func:`blas_single_thread`
holds the limit for a block and is free when it is already held;
:func:`pin_blas_for_tasks` pins a process's pool threads once for good, and
:func:`task_blas` chooses between the two for one Dask task.  This is the only
place that sets BLAS limits; it depends on threadpoolctl only, so
``distsketch.ops`` can use it without importing Dask (``distsketch.graph``
re-exports it).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from threadpoolctl import threadpool_limits

__all__ = ["blas_single_thread", "pin_blas_for_tasks", "single_threaded_blas", "task_blas"]

_PINNED = False
_DEPTH = 0
_DEPTH_LOCK = threading.Lock()


@contextlib.contextmanager
def blas_single_thread() -> Iterator[None]:
    """Limit BLAS/OpenMP pools to one thread for the duration of the block.

    Besides speed, this is part of the determinism contract: LAPACK results
    (``eigh``, ``svd``, ``qr``, Cholesky) change in the last bits with the
    number of BLAS threads, so every dense factorisation whose result becomes
    model state runs on one thread, in any process.  Re-entrant, and free when
    the limit is already held (nested use, pinned pool threads).
    """
    global _DEPTH
    if _PINNED or _DEPTH:
        yield
        return
    with threadpool_limits(limits=1):
        with _DEPTH_LOCK:
            _DEPTH += 1
        try:
            yield
        finally:
            with _DEPTH_LOCK:
                _DEPTH -= 1


def single_threaded_blas(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: run ``func`` under :func:`blas_single_thread`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with blas_single_thread():
            return func(*args, **kwargs)

    return wrapper


def pin_blas_for_tasks() -> None:
    """Pin BLAS to one thread, once per process, when running in a pool thread.

    Called at the start of every distsketch task.  In the main thread (the
    synchronous scheduler) nothing is changed: :func:`compute` already holds
    the limit there.
    """
    global _PINNED
    if not _PINNED and threading.current_thread() is not threading.main_thread():
        threadpool_limits(limits=1)
        _PINNED = True


def task_blas() -> contextlib.AbstractContextManager:
    """Context for one task: BLAS on one thread.

    In the main thread (the synchronous scheduler, also a bare ``.compute()``)
    the limit is set and restored around the task; in pool threads it is set
    once for the process, because set-and-restore would race between threads.
    """
    if threading.current_thread() is threading.main_thread():
        return blas_single_thread()
    pin_blas_for_tasks()
    return contextlib.nullcontext()
