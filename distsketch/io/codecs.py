"""Chunk codecs of the Zarr arrays distsketch writes.

Measured here: zstd halves read throughput against no compression, while
Blosc/LZ4 costs little; so LZ4 is the default for scratch arrays and zstd is
offered for archival ones.
"""

from __future__ import annotations

from typing import Any

import zarr
import zarr.codecs

from distsketch.errors import InputError

__all__ = ["COMPRESSORS", "codecs"]

COMPRESSORS = ("lz4", "zstd", None)


def codecs(compressor: str | None) -> Any:
    """The ``compressors=`` argument of :func:`zarr.create_array` for a codec name.

    Parameters
    ----------
    compressor : {"lz4", "zstd", "none", None}

    Raises
    ------
    InputError
        An unknown name.
    """
    if compressor in (None, "none"):
        return None
    if compressor == "lz4":
        return zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    if compressor == "zstd":
        return zarr.codecs.ZstdCodec(level=3)
    raise InputError(f"unknown compressor {compressor!r}; use 'lz4', 'zstd' or None.")
