"""The engine's pass: reader pool and ring, one task per device, per worker on a cluster."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import dask
import numpy as np

from distsketch.graph.blocks import BlockTask, row_offsets, whole_rows
from distsketch.graph.budget import check_task_memory
from distsketch.graph.engine.choice import on_gpu
from distsketch.graph.engine.report import engine_pass
from distsketch.graph.engine.source import BlockSource
from distsketch.graph.engine.stages import HostStage, stage_for
from distsketch.graph.engine.tree import TreeFold, merge_levels, range_level
from distsketch.graph.planner import choose_fan_in, log_plan
from distsketch.graph.runtime import active_client
from distsketch.ops.namespace import to_host
from distsketch.validation.finite import deferred_checks

__all__ = ["default_readers", "pump", "reduce_with_engine", "run_blocks", "worker_shares"]


def default_readers() -> int:
    """Reader threads of one engine: the host's cores, at most 16."""
    return max(1, min(16, os.cpu_count() or 1))


def pump(indices: Sequence[int], read: Callable[[int, int], Any],
         consume: Callable[[Any, int, int], None], *, readers: int, ring: int) -> None:
    """``read(i, slot)`` in ``readers`` threads, ``consume(value, i, slot)`` here, in order.

    The ``k``-th index goes to ring slot ``k % ring``; at most ``ring`` reads
    are submitted and not yet consumed.  A reader's exception is raised here,
    unchanged, after every reader thread has ended.
    """
    ring = max(1, int(ring))
    todo = iter(enumerate(indices))
    window: deque[tuple[int, int, Future]] = deque()
    pool = ThreadPoolExecutor(max(1, min(int(readers), ring)),
                              thread_name_prefix="distsketch-engine-reader")

    def submit() -> None:
        nxt = next(todo, None)
        if nxt is not None:
            slot = nxt[0] % ring
            window.append((slot, nxt[1], pool.submit(read, nxt[1], slot)))

    try:
        for _ in range(ring):
            submit()
        while window:
            slot, i, fut = window.popleft()
            consume(fut.result(), i, slot)
            submit()
    finally:
        for _, _, fut in window:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def run_blocks(source: BlockSource, indices: Sequence[int], starts: Sequence[int],
               chunk: Callable[..., Any], fold: TreeFold, stage: HostStage, *,
               readers: int, ring: int, tick: Callable[[], None] | None = None) -> None:
    """Read blocks ``indices`` with ``readers`` threads, reduce them in order into ``fold``.

    At most ``ring`` blocks are in flight (:func:`pump`); ``chunk(block, start)``
    runs in the calling thread inside ``stage.stream()``, then ``tick()``.  A
    reader's exception is raised here, unchanged, after every reader thread has ended.
    """

    def read(i: int, slot: int) -> Any:
        return stage.host(source.read(i), slot)

    def consume(staged: Any, i: int, slot: int) -> None:
        block = stage.to_device(staged, slot)
        with stage.stream():
            state = chunk(block, starts[i])
        stage.done(slot)
        del block
        fold.push(state)
        if tick is not None:
            tick()

    # device blocks: their checks' flags are read once, at the end of the pass (NumPy
    # blocks are checked as they come)
    with deferred_checks():
        pump(indices, read, consume, readers=readers, ring=ring)


def worker_shares(client: Any, n: int) -> list[tuple[str, list[int]]]:
    """Contiguous shares of ``range(n)``, one per worker of ``client`` (empty ones left out)."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    return [(w, [int(j) for j in idx])
            for w, idx in zip(workers, np.array_split(np.arange(n), len(workers))) if len(idx)]


def _operand_values(operands: Sequence[Any]) -> list[Any]:
    # the values the dask path's chunk tasks receive: host arrays (a dask operand computed)
    out = []
    for op in operands:
        if hasattr(op, "__dask_graph__"):
            op = dask.compute(op, scheduler="sync")[0]
        out.append(np.asarray(to_host(op)))
    return out


def _engine_task(source: BlockSource, starts: list[int], ranges: list[tuple[int, int]],
                 summary: Any, operands: list[Any], chunk_task: BlockTask, fan: int, level: int,
                 gpu: bool, readers: int, ring: int) -> list[Any]:
    """One worker's engine: the level-``level`` tree nodes of its ranges of blocks."""
    stage = stage_for(gpu, ring)
    nodes = []
    pos = 0
    for a, b in ranges:
        fold = TreeFold(summary.merge, fan, level)
        local = list(range(pos, pos + b - a))
        run_blocks(source, local, starts,
                   lambda block, s: chunk_task(block, s, *operands), fold, stage,
                   readers=readers, ring=ring)
        with stage.stream():
            (node,) = fold.result()
        nodes.append(stage.finish(node))
        pos += b - a
    return nodes


def _on_cluster(client: Any, source: BlockSource, starts: list[int], summary: Any,
                operands: list[Any], chunk_task: BlockTask, fan: int, gpu: bool,
                readers: int | None, ring: int | None) -> Any:
    """One engine task per worker over contiguous, tree-aligned ranges; the top merged here."""
    n = len(source.keys)
    level = range_level(n, fan, len(client.scheduler_info(n_workers=-1)["workers"]))
    size = fan ** level
    ranges = [(a, min(n, a + size)) for a in range(0, n, size)]
    futures = []
    for worker, idx in worker_shares(client, len(ranges)):
        mine = [ranges[j] for j in idx]
        blocks = list(range(mine[0][0], mine[-1][1]))
        r = readers or default_readers()
        futures.append(client.submit(
            _engine_task, source.subset(blocks), [starts[i] for i in blocks], mine, summary, operands,
            chunk_task, fan, level, gpu, r, ring or r + 2, workers=[worker],
            allow_other_workers=False, pure=False))
    fold = TreeFold(summary.merge, fan, merge_levels(n, fan))
    for nodes in client.gather(futures):
        for node in nodes:
            fold.push(node, level)
    return fold.root()


def reduce_with_engine(blocks: Any, summary: Any, *operands: Any, split_every: int = 8,
                       name: str | None = None, check_finite: bool = True, where: str = "input",
                       state_bytes: float | None = None, readers: int | None = None,
                       ring: int | None = None, progress: bool | None = None) -> Any:
    """``blocks.reduce(summary, *operands, ...)`` run on the pass engine (module docstring).

    The planned blocks are kept, so the states are those of the dask path; the
    merged state comes back on the host.  ``readers`` reader threads per engine
    (default: the cores, at most 16) keep ``ring`` blocks in flight (default
    ``readers + 2``).  The pass is reported as :func:`engine_pass` says
    (``progress``: None follows the dask config ``distsketch.progress``).
    """
    data = whole_rows(blocks.data)
    label = name or type(summary).__name__.lower()
    plan = blocks.plan
    fan, depth = choose_fan_in(plan.n_blocks, split_every, state_bytes, budget=plan.budget,
                               what=label)
    merge = int((fan + 1) * state_bytes) if state_bytes else None
    blocks.plan = log_plan(replace(plan, fan_in=fan, depth=depth, merge_bytes=merge),
                           label + "-engine")
    # the fan-in of tree_reduce (without the budget): the same merges as the dask tree
    fan, _ = choose_fan_in(data.numblocks[0], split_every, state_bytes, what=label)
    if blocks.bytes_per_row is not None:
        check_task_memory(label, max(data.chunks[0]), blocks.bytes_per_row, blocks.fixed_bytes)
    chunk_task = BlockTask(summary.chunk, {}, check_finite, where, blocks.bytes_per_row,
                           blocks.fixed_bytes)
    starts = [int(s) for s in row_offsets(data.chunks[0], blocks.row_start)]
    values = _operand_values(operands)
    source = BlockSource.of_array(data)
    client = active_client() if blocks.lazy else None
    if client is not None:
        with engine_pass(label + "-engine", 0, progress):
            return _on_cluster(client, source, starts, summary, values, chunk_task, fan,
                               on_gpu(data._meta), readers, ring)
    readers = readers or default_readers()
    ring = ring or readers + 2
    stage = stage_for(on_gpu(data._meta), ring)
    fold = TreeFold(summary.merge, fan, merge_levels(len(starts), fan))
    with engine_pass(label + "-engine", len(starts), progress) as tick:
        run_blocks(source, range(len(starts)), starts,
                   lambda block, s: chunk_task(block, s, *values), fold, stage,
                   readers=readers, ring=ring, tick=tick)
        with stage.stream():
            root = fold.root()
        return stage.finish(root)
