"""Per-task memory budget: what one task may really use, checked before anything runs.

The budget is the dask config ``distsketch.task-memory`` when set (else the
deprecated ``DISTSKETCH_TASK_MEMORY``); under ``distributed``, the smallest
worker's share of what its process leaves free below the pause threshold; locally
the machine's (or cgroup's) memory per core; each at most
``distsketch.task-memory-fraction`` of the limit, and a GPU's memory in place of
the host's for the device ``"cuda"``.  :func:`cluster_resources` is looked up once
per :func:`resources_scope` (every fit runs in one): each look-up is a scheduler
query or a walk through the cgroup files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import dask
from dask.utils import format_bytes, parse_bytes

from distsketch.errors import ConfigError, MemoryBudgetError
from distsketch.graph.devices import current_device, device_resources
from distsketch.graph.runtime import active_client

__all__ = [
    "DEFAULT_TASK_MEMORY",
    "MEMORY_FRACTION",
    "Resources",
    "check_operator_memory",
    "check_task_memory",
    "cluster_resources",
    "describe_bytes",
    "memory_fraction",
    "resources_scope",
    "rows_for_budget",
    "task_memory_budget",
]

DEFAULT_TASK_MEMORY = 2 * 2**30
MEMORY_FRACTION = 0.5
PAUSE_FRACTION = 0.8  # distributed's default worker pause threshold
MIN_FREE_FRACTION = 0.1
#: deprecated alias of the dask config ``distsketch.task-memory``
#: (``DASK_DISTSKETCH__TASK_MEMORY``), read where that is unset
DEPRECATED_TASK_MEMORY_VARIABLE = "DISTSKETCH_TASK_MEMORY"


@dataclass(frozen=True)
class Resources:
    """What the tasks of one computation may use.

    Attributes
    ----------
    task_bytes : int
        Memory one task may use (the budget).
    threads : int
        Threads running tasks at once (all workers' threads, or local cores).
    source : str
        Where ``task_bytes`` comes from, for messages and the plan.
    """

    task_bytes: int
    threads: int
    source: str


def _override() -> int | None:
    # one route: the dask config; the old variable is read only where the config is unset
    value = dask.config.get("distsketch.task-memory", None)
    if value is None:
        value = os.environ.get(DEPRECATED_TASK_MEMORY_VARIABLE)
    if value is None:
        return None
    try:
        return int(parse_bytes(value)) if isinstance(value, str) else int(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"distsketch.task-memory={value!r} is not a size; use bytes or e.g. '2GiB'."
        ) from exc


def memory_fraction() -> float:
    value = dask.config.get("distsketch.task-memory-fraction", MEMORY_FRACTION)
    try:
        frac = float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"distsketch.task-memory-fraction={value!r} is not a number; "
                          "use a fraction such as 0.5.") from exc
    if not 0.0 < frac <= 1.0:
        raise ConfigError(f"distsketch.task-memory-fraction={value!r} must be in (0, 1].")
    return frac


def _workers(client) -> list[dict]:
    # recent distributed lists only a few workers unless asked for all of them
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # pragma: no cover - older distributed
        info = client.scheduler_info()
    return list(info.get("workers", {}).values())


def _worker_task_bytes(worker: dict, frac: float) -> float:
    # The worker process itself (interpreter, libraries, cached data) already
    # uses memory, and distributed pauses a worker at 80 % of its limit: a
    # task gets its share of what is left below that, and never more than
    # `frac` of the limit per thread.
    limit = float(worker["memory_limit"])
    threads = max(1, int(worker.get("nthreads", 1) or 1))
    used = float((worker.get("metrics") or {}).get("memory", 0) or 0)
    free = max(PAUSE_FRACTION * limit - used, MIN_FREE_FRACTION * limit)
    return min(frac * limit, free) / threads


def _local_memory() -> int:
    # host total, every cgroup limit on this process's path, rlimits
    from distsketch.graph.host_memory import host_memory_limit

    return host_memory_limit()


#: the look-ups of the innermost :func:`resources_scope`: key -> (client, Resources)
_SCOPE: ContextVar[dict[tuple, tuple[Any, Resources]] | None] = ContextVar(
    "distsketch_resources_scope", default=None)


@contextlib.contextmanager
def resources_scope() -> Iterator[None]:
    """Look :func:`cluster_resources` up once for the block (one fit), not at every stage.

    Each distinct setting (client, overrides, memory fraction, device, dask's
    ``num_workers``) is looked up once, so a fit plans all its stages with the
    resources of its start.  Re-entrant; per context (a ``ContextVar``), so
    concurrent fits do not share look-ups.
    """
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def cluster_resources() -> Resources:
    """The per-task memory and the task threads of the active scheduler.

    Under ``distributed`` one small message to the scheduler (with no worker
    yet, the local rule); inside :func:`resources_scope` the answer for the
    same settings is reused.
    """
    override = _override()
    frac = memory_fraction()
    client = active_client()
    device = current_device() if override is None else None  # an override holds on any device
    cache = _SCOPE.get()
    if cache is None:
        return _lookup(override, frac, client, device)
    key = (override, frac, id(client), device, dask.config.get("num_workers", None),
           dask.config.get("distsketch.device-memory", None) if device == "cuda" else None)
    hit = cache.get(key)
    # the client is kept with its answer, so its id cannot be reused by another one meanwhile
    if hit is None or hit[0] is not client:
        hit = cache[key] = (client, _lookup(override, frac, client, device))
    return hit[1]


def _lookup(override: int | None, frac: float, client: Any, device: str | None) -> Resources:
    # the look-up itself: a scheduler query, or the host's memory limits
    if device == "cuda":
        return _device_resources(client, frac)
    if client is not None:
        workers = _workers(client)
        threads = sum(int(w.get("nthreads", 1) or 1) for w in workers)
        limits = [_worker_task_bytes(w, frac) for w in workers if w.get("memory_limit")]
        if override is not None:
            return Resources(override, max(1, threads), "distsketch.task-memory")
        if limits:
            return Resources(int(min(limits)), max(1, threads),
                             "workers' memory_limit/threads, less their own memory")
        if workers:
            return Resources(DEFAULT_TASK_MEMORY, max(1, threads), "default (no worker limit)")
    cores = int(dask.config.get("num_workers", None) or os.cpu_count() or 1)
    if override is not None:
        return Resources(override, cores, "distsketch.task-memory")
    per_core = int(_local_memory() / max(1, os.cpu_count() or 1) * frac)
    if per_core < DEFAULT_TASK_MEMORY:
        return Resources(per_core, cores, f"local memory/cores x {frac:g}")
    return Resources(DEFAULT_TASK_MEMORY, cores, "default")


def _device_resources(client, frac: float) -> Resources:
    # device="cuda": the GPU's memory in place of the host's (graph.devices)
    workers = _workers(client) if client is not None else []
    cores = int(dask.config.get("num_workers", None) or os.cpu_count() or 1)
    return Resources(*device_resources(client, workers, frac, cores))


def task_memory_budget() -> int:
    """The per-task memory budget in bytes (see :func:`cluster_resources`)."""
    return cluster_resources().task_bytes


def check_task_memory(what: str, max_block_rows: int, bytes_per_row: float,
                      fixed_bytes: float = 0.0, budget: int | None = None) -> int:
    """Raise if one task of ``what`` would exceed the budget.

    Parameters
    ----------
    what : str
        Name of the operation, for the message.
    max_block_rows : int
        Rows in the largest block.
    bytes_per_row : float
        Working memory per row of a block (inputs, outputs, temporaries).
    fixed_bytes : float
        Memory independent of the block size (operators, summaries).
    budget : int, optional
        Override of :func:`task_memory_budget`.

    Returns
    -------
    int
        The projected bytes of one task.

    Raises
    ------
    MemoryBudgetError
        Naming the rows per block that would fit (``block_rows=`` in the API,
        ``--block-rows`` on the command line), or, when no block size fits, the
        operator size to reduce.
    """
    budget = task_memory_budget() if budget is None else int(budget)
    need = int(max_block_rows * bytes_per_row + fixed_bytes)
    if need > budget:
        fit_rows = rows_for_budget(bytes_per_row, fixed_bytes, budget)
        raise MemoryBudgetError(
            f"{what}: one task needs {format_bytes(need)} "
            f"({max_block_rows} rows x {format_bytes(int(bytes_per_row))}/row + "
            f"{format_bytes(int(fixed_bytes))} fixed) but the per-task budget is "
            f"{format_bytes(budget)}. Fix: {fix_hint(fit_rows, bytes_per_row, fixed_bytes, budget)}"
        )
    return need


def check_operator_memory(what: str, n_bytes: float, fix: str, budget: int | None = None,
                          resources: Resources | None = None) -> None:
    """Refuse an operator larger than the per-task budget before it is allocated.

    Every task that applies an operator (random weights, landmarks) holds a
    copy; allocating one that fits no task would end in a MemoryError instead
    of this message, which names ``what`` (the operator and its shape), its
    size ``n_bytes`` (any Python int), the budget and ``fix`` (what to lower).
    ``resources`` is a budget already looked up, ``budget`` an override.
    """
    if resources is not None:
        res = resources
    else:
        res = cluster_resources() if budget is None else Resources(int(budget), 1, "given")
    if n_bytes > res.task_bytes:
        raise MemoryBudgetError(
            f"{what} need {describe_bytes(n_bytes)}, more than the per-task budget of "
            f"{format_bytes(res.task_bytes)} ({res.source}); every task holds them. Fix: {fix}, "
            "or raise the budget with dask.config.set({'distsketch.task-memory': '...'}) / "
            "DASK_DISTSKETCH__TASK_MEMORY if the workers have that much memory.")


#: above this, a size is only said to be "over" it (format_bytes's largest unit is PiB)
_LARGEST_STATED = 2**70


def describe_bytes(n_bytes: float) -> str:
    """``format_bytes`` for any size, including Python ints too large for a float."""
    if n_bytes >= _LARGEST_STATED:
        return f"over {format_bytes(_LARGEST_STATED)}"
    return format_bytes(int(n_bytes))


def fix_hint(fit_rows: int, bytes_per_row: float, fixed_bytes: float, budget: int) -> str:
    """The fix named in a budget error: smaller blocks, or a smaller operator."""
    raise_it = ("or raise the budget with dask.config.set({'distsketch.task-memory': '...'}) "
                "/ DASK_DISTSKETCH__TASK_MEMORY (or give workers more memory per thread).")
    if fit_rows > 0:
        return (f"use at most {fit_rows} rows per block (block_rows={fit_rows} in the API, "
                f"--block-rows {fit_rows} on the command line, X.rechunk({{0: {fit_rows}}}) "
                f"for a dask array), {raise_it}")
    what = (f"the operator itself needs {format_bytes(int(fixed_bytes))}"
            if fixed_bytes >= budget else
            f"one row needs {format_bytes(int(bytes_per_row))} beside "
            f"{format_bytes(int(fixed_bytes))} of operator")
    return (f"no block size fits: {what} of the {format_bytes(budget)} budget; reduce the "
            f"operator size (n_components, sketch size, landmarks), {raise_it}")


def rows_for_budget(bytes_per_row: float, fixed_bytes: float = 0.0,
                    budget: int | None = None) -> int:
    """Largest number of rows per block that fits the budget (0 if none)."""
    budget = task_memory_budget() if budget is None else int(budget)
    free = budget - fixed_bytes
    if free <= 0 or bytes_per_row <= 0:
        return 0 if free <= 0 else 2**31
    return int(free // bytes_per_row)
