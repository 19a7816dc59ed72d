"""Chunk codecs of the Zarr arrays distsketch writes.

LZ4 (Blosc) is the default, cheap to read; zstd is offered for archival
arrays.  Every chain ends with a CRC-32C checksum over each chunk's
compressed bytes (docs/security.md), so a changed byte fails its read.
"""

from __future__ import annotations

from typing import Any

import zarr
import zarr.codecs

from distsketch.errors import InputError

__all__ = ["COMPRESSORS", "codecs", "has_checksum", "is_checksum_error"]

COMPRESSORS = ("lz4", "zstd", None)


def codecs(compressor: str | None) -> tuple[Any, ...]:
    """The ``compressors=`` argument of :func:`zarr.create_array` for ``"lz4"``, ``"zstd"``,
    ``"none"`` or None (an InputError for another name).

    The compressor (if any), then the CRC-32C checksum: every writer of
    distsketch takes its codecs from here, so every chunk it writes carries
    a checksum.
    """
    if compressor in (None, "none"):
        chain: tuple[Any, ...] = ()
    elif compressor == "lz4":
        chain = (zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),)
    elif compressor == "zstd":
        chain = (zarr.codecs.ZstdCodec(level=3),)
    else:
        raise InputError(f"unknown compressor {compressor!r}; use 'lz4', 'zstd' or None.")
    # last in the chain: the checksum covers the compressed bytes as stored
    return (*chain, zarr.codecs.Crc32cCodec())


def has_checksum(arr: zarr.Array) -> bool:
    """Whether every chunk of ``arr`` is checked against a CRC-32C checksum on read.

    Looks at the codecs recorded in the array's own metadata, so an edit that
    removes the checksum codec is seen.  A sharded array counts when its inner
    chunks carry the checksum (Zarr's default for the shard index).
    """
    meta = arr.metadata
    found = getattr(meta, "codecs", ())
    for codec in found:
        if isinstance(codec, zarr.codecs.Crc32cCodec):
            return True
        inner = getattr(codec, "codecs", None)
        if isinstance(codec, zarr.codecs.ShardingCodec) and inner is not None:
            return any(isinstance(c, zarr.codecs.Crc32cCodec) for c in inner)
    return False


def is_checksum_error(exc: BaseException) -> bool:
    """Whether ``exc`` (from a chunk read) is Zarr's CRC-32C mismatch."""
    return isinstance(exc, ValueError) and "checksum do not match" in str(exc)
