"""A device pass engine: one task per device reads, moves and reduces its row blocks.

A reduction run on the engine (:func:`reduce_with_engine`, chosen by the dask
config ``distsketch.engine``) is one task per device instead of one dask task
per block and a tree of merge tasks: reader threads compute the planned blocks
(:class:`BlockSource`), at most ``ring`` blocks are in flight, and the engine's
thread moves each block to the device, runs the summary's ``chunk`` and folds
the states into the same merge tree as the dask path (:class:`TreeFold`), so the
merged state is bitwise the dask path's.  On ``distributed`` each worker runs
one engine task over block ranges aligned to the tree (:func:`range_level`).

Writers mirror it (:func:`write_with_engine`): reader threads compute the
blocks, the engine's thread moves each to the host, a pool of writer threads
stores them, at most ``ring`` blocks held at once; one writer task per worker
on ``distributed``.  Every engine pass is reported (:func:`engine_pass`): as a
numbered pass of a fit that reports, else on stderr with progress on.

CUDA parts (:class:`CudaStage`) overlap the copy of block ``i + 1`` with the
compute of block ``i`` through pinned buffers and streams.  **The CUDA functions
have not run on a GPU yet**: everything else is tested on the CPU with NumPy as
the device (:class:`HostStage`), bitwise against the dask path.
"""

from __future__ import annotations

from distsketch.graph.engine.choice import ENGINE_KEY, ENGINES, engine_choice, on_gpu, wants_engine
from distsketch.graph.engine.report import PassBar, engine_pass
from distsketch.graph.engine.run import default_readers, pump, reduce_with_engine, run_blocks
from distsketch.graph.engine.source import BlockSource
from distsketch.graph.engine.stages import CudaStage, HostStage
from distsketch.graph.engine.tree import TreeFold, merge_levels, range_level
from distsketch.graph.engine.write import write_blocks, write_with_engine

__all__ = ["ENGINES", "ENGINE_KEY", "BlockSource", "CudaStage", "HostStage", "PassBar",
           "TreeFold", "default_readers", "engine_choice", "engine_pass", "merge_levels",
           "on_gpu", "pump", "range_level", "reduce_with_engine", "run_blocks", "wants_engine",
           "write_blocks", "write_with_engine"]
