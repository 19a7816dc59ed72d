"""MNIST-style idx files (``*-ubyte``, ``*.idx3``...): a header, then fixed-size records."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from distsketch.errors import InputError, StoreError
from distsketch.io.readers.base import (
    Block,
    Header,
    Reader,
    ReadOptions,
    Stream,
    check_width,
    file_suffix,
    open_binary,
    plain_name,
    record_blocks,
)

__all__ = ["IdxReader"]

# idx type codes -> big-endian dtypes
TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IdxReader(Reader):
    """idx: records of ``prod(dims[1:])`` values, one row each (a 1-D file: one column)."""

    name = "idx"
    aliases = ("mnist",)

    def guess_can_open(self, path: Path) -> bool:
        name = plain_name(path)
        return name.endswith("-ubyte") or file_suffix(path).startswith("idx") or "-idx" in name

    def guess_from_content(self, head: bytes) -> bool:
        return len(head) >= 4 and head[0] == 0 and head[1] == 0 and head[2] in TYPES \
            and head[3] >= 1

    @contextlib.contextmanager
    def open(self, source: Path, options: ReadOptions) -> Iterator[Stream]:
        with open_binary(source) as (f, raw):
            dims, sdtype, header_bytes = read_header(f, source)
            n = dims[0]
            d = int(np.prod(dims[1:])) if len(dims) > 1 else 1
            if n == 0:
                raise InputError(f"{source}: has 0 records; nothing to ingest.")
            if d == 0:
                raise InputError(f"{source}: its records have 0 values (idx dimensions "
                                 f"{list(dims)}); nothing to ingest.")
            check_width(d, source, declared=False, itemsize=sdtype.itemsize,
                        what=f"the idx header's record shape {dims[1:]}")
            expected = header_bytes + n * d * sdtype.itemsize
            if not source.name.lower().endswith(".gz") and source.stat().st_size != expected:
                raise StoreError(
                    f"{source}: the idx header announces {n} records of {dims[1:] or '1 value'} "
                    f"({expected} bytes with the header) but the file has "
                    f"{source.stat().st_size} bytes; the file is truncated or corrupt. "
                    "Re-download it."
                )

            def blocks(rows: int) -> Iterator[Block]:
                yield from record_blocks(f, raw, n, d, sdtype, rows, lambda got: (
                    f"{source} is truncated: the header announces {n} records but the "
                    f"data ends at record {got}. Re-download the file."))
                if f.read(1):
                    raise StoreError(
                        f"{source} has data after the {n} records its idx header announces; the "
                        "file is corrupt or not an idx file."
                    )

            info = {"source_dtype": str(sdtype.newbyteorder("=")), "source_shape": list(dims)}
            yield Stream(Header(d, n, sdtype, source.stat().st_size, info=info), blocks)


def read_header(f: IO[bytes], source: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """(dims, big-endian dtype, header bytes) of an idx file."""
    head = f.read(4)
    if len(head) == 0:
        raise InputError(f"{source} is empty; nothing to ingest.")
    if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in TYPES or head[3] < 1:
        raise StoreError(
            f"{source} is not an idx file: bad magic number {head.hex()} (expected 0000 then a "
            "type code 08/09/0b/0c/0d/0e and the number of dimensions). Check that it is an "
            "MNIST-style *-ubyte file, or pass the right format."
        )
    ndim = head[3]
    raw_dims = f.read(4 * ndim)
    if len(raw_dims) != 4 * ndim:
        raise StoreError(f"{source}: idx header is truncated (dimension sizes missing).")
    dims = tuple(int(x) for x in np.frombuffer(raw_dims, dtype=">u4"))
    return dims, np.dtype(TYPES[head[2]]), 4 + 4 * ndim
