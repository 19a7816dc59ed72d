"""BLAS thread control: one thread for tasks and for every factorisation that
becomes model state.

Multi-threaded BLAS inside Dask's threads is slow and oversubscribes the cores,
and LAPACK results change in the last bits with the number of BLAS threads, so
determinism requires one thread everywhere.  Limits are process-global.  This
is the only place that sets BLAS limits; it needs threadpoolctl only, so
``distsketch.ops`` can use it without Dask.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from threadpoolctl import ThreadpoolController

__all__ = ["blas_single_thread", "pin_blas_for_tasks", "single_threaded_blas", "task_blas"]

_CONTROLLER: ThreadpoolController | None = None
_CONTROLLER_MODULES = -1  # len(sys.modules) when _CONTROLLER scanned the loaded libraries
_DEPTH = 0
_DEPTH_LOCK = threading.Lock()
_SCAN_LOCK = threading.Lock()


def _controller() -> ThreadpoolController:
    """The process's one controller, rescanned only after an import."""
    global _CONTROLLER, _CONTROLLER_MODULES
    # scanning the loaded libraries takes milliseconds: rescan only after imports,
    # which is how a new BLAS (SciPy's own OpenBLAS, say) enters the process
    with _SCAN_LOCK:
        if _CONTROLLER is None or len(sys.modules) != _CONTROLLER_MODULES:
            # counted before the scan: an import racing with it makes the next call rescan
            _CONTROLLER_MODULES = len(sys.modules)
            _CONTROLLER = ThreadpoolController()
        return _CONTROLLER


def _limit_to_one() -> Any:
    """Set every BLAS/OpenMP pool to one thread; the returned limiter restores them."""
    return _controller().limit(limits=1)


def _single_threaded_now() -> bool:
    """Whether every BLAS/OpenMP pool of the process runs one thread right now."""
    return all(lib.num_threads == 1 for lib in _controller().lib_controllers)


@contextlib.contextmanager
def blas_single_thread() -> Iterator[None]:
    """Limit BLAS/OpenMP pools to one thread for the duration of the block.

    Besides speed, this is part of the determinism contract: LAPACK results
    (``eigh``, ``svd``, ``qr``, Cholesky) change in the last bits with the
    number of BLAS threads, so every dense factorisation whose result becomes
    model state runs on one thread, in any process.  Re-entrant, and free when
    the limit is already in force.  In a pool thread the limit is set and
    left in place (:func:`pin_blas_for_tasks`).
    """
    global _DEPTH
    if threading.current_thread() is not threading.main_thread():
        pin_blas_for_tasks()
        yield
        return
    if _DEPTH or _single_threaded_now():
        yield
        return
    with _limit_to_one():
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
    """Pin BLAS to one thread when running in a pool thread.

    Called at the start of every distsketch task.  The limit is set (and never
    restored) whenever it is not in force, also after a main-thread block
    restored a larger one.  In the main thread (the synchronous scheduler)
    nothing is changed: :func:`compute` already holds the limit there.
    """
    if threading.current_thread() is not threading.main_thread() and not _single_threaded_now():
        _limit_to_one()  # left in force: a restore would race with the other pool threads


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
