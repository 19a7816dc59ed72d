"""Chunk sizes of ingested stores, and the warning for inputs in more tiny chunks
(:data:`MAX_SMALL_CHUNKS` under :data:`MIN_CHUNK_BYTES`) than ``ingest`` accepts.
"""

from __future__ import annotations

import math
import warnings

import zarr

from distsketch.errors import PerformanceWarning

__all__ = ["MAX_SMALL_CHUNKS", "MIN_CHUNK_BYTES", "chunk_rows_for", "warn_small_chunks"]


_CHUNK_BYTES = 8 * 2**20
# a store may have at most this many chunks smaller than MIN_CHUNK_BYTES: each chunk is a
# file and a task in every later pass, so a million one-row chunks take hours, not seconds
MIN_CHUNK_BYTES = 64 * 2**10
MAX_SMALL_CHUNKS = 1000


def chunk_rows_for(chunk_rows: int | None, n_cols: int, itemsize: int,
                   n_rows: int | None = None) -> int:
    """Rows per Zarr chunk: ``chunk_rows``, or about 8 MiB of rows (at most ``n_rows``)."""
    if chunk_rows is not None:
        return int(chunk_rows)
    rows = max(1, _CHUNK_BYTES // max(1, n_cols * itemsize))
    if n_rows is not None:
        rows = min(rows, max(1, n_rows))
    return int(rows)


def warn_small_chunks(arr: zarr.Array, where: str) -> None:
    """Warn (:class:`~distsketch.errors.PerformanceWarning`, naming the rechunk to run) when
    an input is stored in more tiny chunks than ``ingest`` would write.

    A store written by another tool may have them (1-row chunks of
    ``zarr.create_array(chunks=(1, d))``): it is valid, so it is read, but every
    chunk is a file or object fetched and decoded on its own, and each pass over
    it takes minutes where it could take seconds.
    """
    unit = tuple(int(c) for c in (arr.shards or arr.chunks))
    unit_bytes = math.prod(unit) * arr.dtype.itemsize
    if unit_bytes >= MIN_CHUNK_BYTES or not arr.shape:
        return
    count = math.prod(-(-int(s) // max(1, c)) for s, c in zip(arr.shape, unit))
    if count <= MAX_SMALL_CHUNKS:
        return
    n_cols = int(math.prod(arr.shape[1:]))
    rows = chunk_rows_for(None, n_cols, arr.dtype.itemsize, int(arr.shape[0]))
    kind = "shards" if arr.shards else "chunks"
    warnings.warn(PerformanceWarning(
        f"Zarr array {where} is stored in {count} {kind} of shape {unit} ({unit_bytes} bytes "
        f"each): every one is a file or object read and decoded on its own, so each pass over "
        f"this input is slow (ingest refuses more than {MAX_SMALL_CHUNKS} chunks under "
        f"{MIN_CHUNK_BYTES // 1024} KiB). It is read as it is; rechunk it once to {rows} rows "
        f"per chunk (ingest's default, about 8 MiB per chunk) and read the copy instead: "
        f"python -c \"from distsketch.io import open_array, write_array; "
        f"write_array(open_array({where!r}), 'DST.zarr', chunk_rows={rows})\"."), stacklevel=2)
