"""The device blocks are computed on, as the graph sees it: the default, moves and memory.

:func:`current_device` is the dask config ``distsketch.device`` (the one switch
of the API, the CLI's ``--device`` and a spec's ``device:``); the other functions
move a dask array's blocks inside the tasks that produce them, copy a pass's
operands to the device once per process, and give the per-task budget of a
``"cuda"`` run from each worker's device memory.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.utils import parse_bytes

from distsketch.errors import ConfigError
from distsketch.ops.device import (
    cache_operand,
    check_device,
    device_memory,
    device_meta,
    to_device,
)
from distsketch.ops.namespace import to_host

__all__ = ["DEVICE_KEY", "blocks_on_device", "blocks_on_host", "current_device",
           "device_memory_override", "device_resources", "operands_on_device"]

#: the dask config key of the default device
DEVICE_KEY = "distsketch.device"


def current_device() -> str:
    """The device of the blocks of a path opened now: dask config ``distsketch.device``
    (``"cpu"`` or ``"cuda"``, else :class:`~distsketch.errors.ConfigError`)."""
    return check_device(dask.config.get(DEVICE_KEY, "cpu"), f"dask config {DEVICE_KEY}")


def blocks_on_device(X: da.Array, device: str) -> da.Array:
    """``X`` with every block moved to ``device`` in the task that computes it."""
    if device == "cpu":
        return X
    return da.map_blocks(to_device, X, device, dtype=X.dtype,
                         meta=device_meta(X.dtype, device, X.ndim))


def blocks_on_host(X: da.Array) -> da.Array:
    """``X`` with every block a NumPy array (moved in its task); ``X`` itself when it is NumPy."""
    if type(X._meta) is np.ndarray or hasattr(X._meta, "tocsr"):
        return X
    return da.map_blocks(_on_host, X, dtype=X.dtype, meta=np.empty((0,) * X.ndim, dtype=X.dtype))


def _on_host(block: Any) -> np.ndarray:
    return np.asarray(to_host(block))


def operands_on_device(operands: tuple, block: Any) -> None:
    """Make sure every host operand of a pass has a cached copy on ``block``'s device.

    The operands stay host arrays (kernels may keep one there on purpose); those
    that move it (:func:`distsketch.ops.namespace.asarray`) find the one copy.
    """
    if isinstance(block, np.ndarray) or hasattr(block, "tocsr"):
        return
    for op in operands:
        cache_operand(op, block)


def device_memory_override() -> int | None:
    """Dask config ``distsketch.device-memory``: the memory of each GPU, bytes or ``"80GiB"``."""
    value = dask.config.get("distsketch.device-memory", None)
    if value is None:
        return None
    try:
        return int(parse_bytes(value)) if isinstance(value, str) else int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"distsketch.device-memory={value!r} is not a size; use bytes or e.g. "
                          "'80GiB'.") from exc


def _worker_device_memory() -> int:
    # runs on each worker (Client.run): the GPU dask-cuda gave it
    return device_memory()


def device_resources(client: Any, workers: list[dict], frac: float,
                     local_threads: int) -> tuple[int, int, str]:
    """``(task_bytes, threads, source)`` of a ``"cuda"`` run: device memory per task.

    Each GPU may give ``frac`` of its memory to the tasks running on it at
    once: under ``distributed`` the smallest worker GPU's memory x ``frac`` /
    a worker's threads (one GPU per worker, as dask-cuda starts them);
    locally this process's GPU shared by ``local_threads`` threads.
    """
    given = device_memory_override()
    source = "distsketch.device-memory" if given is not None else "GPU memory (CuPy mem_info)"
    if client is not None and workers:
        # the smallest GPU and the busiest worker: every worker can run every task
        mems = ([given] if given is not None
                else [int(v) for v in client.run(_worker_device_memory).values()])
        per_worker = max(max(1, int(w.get("nthreads", 1) or 1)) for w in workers)
        threads = sum(int(w.get("nthreads", 1) or 1) for w in workers)
        return (int(min(mems) * frac / per_worker), max(1, threads),
                f"workers' {source} x {frac:g} / threads")
    mem = given if given is not None else device_memory()
    threads = max(1, int(local_threads))
    return int(mem * frac / threads), threads, f"{source} x {frac:g} / {threads} threads"
