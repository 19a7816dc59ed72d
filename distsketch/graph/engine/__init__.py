"""A device pass engine: one task per device reads, moves and reduces its row blocks.

A reduction run on the engine (:func:`reduce_with_engine`, chosen by the dask
config ``distsketch.engine``) is **one task per device** instead of one dask
task per block and a tree of merge tasks:

* reader threads compute the planned blocks, each through the array's own
  optimised graph culled to it (:class:`BlockSource`: a store chunk is read
  and decoded through :class:`~distsketch.io.arrays.stores.ZarrRowReader` as
  in the dask path; a task several blocks share is computed once);
* at most ``ring`` blocks are in flight (being read, or read and not yet
  reduced): block ``i + ring`` is read after block ``i`` was reduced;
* the engine's thread moves each block to the device, calls the summary's
  own ``chunk`` with the block's global first row through
  :class:`~distsketch.graph.blocks.BlockTask` (the dask path's finite check
  and BLAS pinning) and folds the states into the tree
  :func:`~distsketch.graph.blocks.merge_tree` builds, with the same fan-in
  (:class:`TreeFold`), so the merged state is bitwise the dask path's;
* the merged state is copied to the host once, at the end.

On a ``distributed`` cluster each worker runs one engine task over ranges of
blocks aligned to the merge tree (:func:`range_level`) and returns the tree's
nodes at that level; the client merges the top levels: still the same tree.

CUDA parts, used only when the blocks are CuPy arrays (:class:`CudaStage`):
readers copy blocks into page-locked host buffers of the ring; host→device
copies go on a non-blocking copy stream into device buffers of the ring;
``chunk`` and ``merge`` run on a compute stream that waits on each copy's
event, so the copy of block ``i + 1`` overlaps the compute of block ``i``; a
slot is reused after the events of its previous copy and compute.  Blocks the
graph already gives on the device (a store opened with ``device="cuda"``
moves them in its read task) are used as they come.  **The CUDA functions
have not run on a GPU yet**: scheduling, reader pool, ring bound, tree order,
errors and the per-worker split are tested on the CPU with NumPy as the
device (:class:`HostStage`), bitwise against the dask path.
"""

from __future__ import annotations

from distsketch.graph.engine.choice import ENGINE_KEY, ENGINES, engine_choice, on_gpu, wants_engine
from distsketch.graph.engine.run import default_readers, reduce_with_engine, run_blocks
from distsketch.graph.engine.source import BlockSource
from distsketch.graph.engine.stages import CudaStage, HostStage
from distsketch.graph.engine.tree import TreeFold, merge_levels, range_level

__all__ = ["ENGINES", "ENGINE_KEY", "BlockSource", "CudaStage", "HostStage", "TreeFold",
           "default_readers", "engine_choice", "merge_levels", "on_gpu", "range_level",
           "reduce_with_engine", "run_blocks", "wants_engine"]
