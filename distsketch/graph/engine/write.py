"""Writers on the pass engine: reader threads compute row blocks, a writer pool stores them.

The mirror of a reduction (:func:`~distsketch.graph.engine.run.run_blocks`):
reader threads compute the blocks through the array's own graph
(:class:`~distsketch.graph.engine.source.BlockSource`), the engine's thread
moves each to the host through its stage (an asynchronous copy into a pinned
buffer on a GPU), and a pool of writer threads checks it and stores it at its
rows.  At most ``ring`` blocks are held at once: a ring slot is read into again
only after the write of its last block finished.  On ``distributed`` each
worker runs one engine writer over a contiguous share of the blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from distsketch.graph.blocks import row_offsets
from distsketch.graph.engine.choice import on_gpu
from distsketch.graph.engine.report import engine_pass
from distsketch.graph.engine.run import default_readers, pump, worker_shares
from distsketch.graph.engine.source import BlockSource
from distsketch.graph.engine.stages import HostStage, stage_for
from distsketch.graph.runtime import active_client

__all__ = ["write_blocks", "write_with_engine"]

#: ``check(block, first_row)``: raises when the host block may not be written
Check = Callable[[Any, int], None]


def write_blocks(source: BlockSource, starts: Sequence[int], target: Any, stage: HostStage, *,
                 check: Check | None, readers: int, writers: int, ring: int,
                 tick: Callable[[], None] | None = None) -> None:
    """Write every block of ``source`` into ``target[start:start + rows]``, block ``i`` at ``starts[i]``.

    ``check(block, start)`` runs on each host block before its write, in the
    writer thread; ``tick()`` after each write.  A reader's or writer's
    exception is raised unchanged after every reader and writer thread ended.
    """
    ring = max(1, int(ring))
    last: list[Future | None] = [None] * ring  # each slot's latest write
    futures: list[Future] = []
    pool = ThreadPoolExecutor(max(1, min(int(writers), ring)),
                              thread_name_prefix="distsketch-engine-writer")

    def read(i: int, slot: int) -> Any:
        previous = last[slot]
        if previous is not None:
            previous.result()  # the slot is free once its block is written (or raises its error)
        return stage.settle(source.read(i))

    def write(host: Any, i: int, slot: int) -> None:
        stage.landed(slot)
        start = int(starts[i])
        if check is not None:
            check(host, start)
        target[start:start + host.shape[0]] = host
        if tick is not None:
            tick()

    def consume(computed: Any, i: int, slot: int) -> None:
        fut = last[slot] = pool.submit(write, stage.to_host(computed, slot), i, slot)
        futures.append(fut)

    try:
        pump(range(len(source.keys)), read, consume, readers=readers, ring=ring)
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    finally:
        pool.shutdown(wait=True)
    for fut in futures:  # the first failed write, in row order
        fut.result()


def _write_task(source: BlockSource, starts: list[int], target: Any, check: Check | None,
                gpu: bool, readers: int, writers: int, ring: int) -> None:
    """One worker's engine writer over its share of the blocks."""
    write_blocks(source, starts, target, stage_for(gpu, ring), check=check, readers=readers,
                 writers=writers, ring=ring)


def write_with_engine(X: Any, target: Any, *, check: Check | None = None,
                      readers: int | None = None, writers: int | None = None,
                      ring: int | None = None, progress: bool | None = None,
                      name: str = "write") -> None:
    """Write the row blocks of dask array ``X`` into ``target`` on the pass engine.

    Each block goes to ``target[a:b]`` (its rows; every column), exactly as
    ``dask.array.store`` writes it, so the store is the dask path's.

    Parameters
    ----------
    X : dask array
        1-D or 2-D; one block per write (rechunk it to the target's row chunks).
    target : array-like
        Supports ``target[a:b] = block`` from several threads (a Zarr array).
    check : callable, optional
        ``check(block, first_row)`` on every host block before its write.
    readers, writers : int, optional
        Reader and writer threads per engine (default: the cores, at most 16).
    ring : int, optional
        Blocks held at once per engine (default ``readers + 2``).
    progress : bool, optional
        Show the pass (:func:`~distsketch.graph.engine.report.engine_pass`).
    name : str
        The pass's name in the progress report (``"<name>-engine"``).

    Notes
    -----
    On ``distributed`` each worker runs one engine writer over a contiguous
    share of the blocks; an error is raised once every worker's writer ended.
    """
    source = BlockSource.of_array(X)
    starts = [int(s) for s in row_offsets(X.chunks[0])]
    gpu = on_gpu(X._meta)
    r = readers or default_readers()
    w = writers or default_readers()
    ring = ring or r + 2
    client = active_client()
    if client is None:
        with engine_pass(f"{name}-engine", len(starts), progress) as tick:
            write_blocks(source, starts, target, stage_for(gpu, ring), check=check, readers=r,
                         writers=w, ring=ring, tick=tick)
        return
    from distributed import wait

    with engine_pass(f"{name}-engine", 0, progress):
        futures = [client.submit(_write_task, source.subset(idx), [starts[i] for i in idx],
                                 target, check, gpu, r, w, ring, workers=[worker],
                                 allow_other_workers=False, pure=False)
                   for worker, idx in worker_shares(client, len(starts))]
        wait(futures)  # every writer ended before an error is raised and the output removed
        client.gather(futures)
