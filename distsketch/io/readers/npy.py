"""NumPy ``.npy`` files: memory-mapped, or parsed header-then-rows when ``.gz``."""

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
    open_binary,
    record_blocks,
)

__all__ = ["NpyReader"]

MAGIC = b"\x93NUMPY"


class NpyReader(Reader):
    """``*.npy`` (and ``*.npy.gz``): one 2-D numeric array saved by :func:`numpy.save`."""

    name = "npy"
    suffixes = ("npy",)

    def guess_from_content(self, head: bytes) -> bool:
        return head.startswith(MAGIC)

    @contextlib.contextmanager
    def open(self, source: Path, options: ReadOptions) -> Iterator[Stream]:
        if source.stat().st_size == 0:
            raise InputError(f"{source} is empty; nothing to ingest.")
        if not source.name.lower().endswith(".gz"):
            yield _mapped(source)
            return
        with open_binary(source) as (f, raw):
            shape, fortran, sdtype = _header(f, source)
            check_array(shape, sdtype, source)
            n, d = shape
            # a compressed file's header is not checked against its size: bound the width
            check_width(d, source, declared=False, itemsize=sdtype.itemsize,
                        what=f"the .npy header's shape {tuple(shape)}")
            if fortran and d > 1:
                raise InputError(
                    f"{source} is stored in Fortran (column) order, which cannot be streamed by "
                    "rows from a .gz file; decompress it (gunzip) or re-save it in C order."
                )

            def blocks(rows: int) -> Iterator[Block]:
                return record_blocks(f, raw, n, d, sdtype, rows, lambda got: (
                    f"{source} is truncated: the header announces {n} rows but the data "
                    f"ends at row {got}. Re-create or re-download the file."))

            yield Stream(Header(d, n, sdtype, source.stat().st_size,
                                info={"source_dtype": str(sdtype)}), blocks)


def _mapped(source: Path) -> Stream:
    with open(source, "rb") as f:
        magic = f.read(6)
    if magic != MAGIC:
        kind = " (it is a zip/.npz archive)" if magic[:2] == b"PK" else ""
        raise StoreError(f"{source} is not a valid .npy file{kind}: it does not start with the "
                         ".npy magic string. Save one array with numpy.save.")
    try:
        arr = np.load(source, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "object" in str(exc):
            raise InputError(f"{source} holds Python objects; save a numeric array.") from exc
        raise StoreError(f"{source} is not a valid .npy file ({exc}); re-save it "
                         "with numpy.save.") from exc
    except (OSError, EOFError) as exc:
        raise StoreError(f"cannot read {source} as .npy: {exc}.") from exc
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{source} is not a single .npy array (an .npz archive?); "
                         "save one array with numpy.save.")
    check_array(arr.shape, arr.dtype, source)
    n, d = arr.shape

    def blocks(rows: int) -> Iterator[Block]:
        for a in range(0, n, rows):
            # copy one block out of the memory map; the page cache holds the rest
            block = np.asarray(arr[a:a + rows])
            yield Block(block, None, a + block.shape[0])

    return Stream(Header(d, n, arr.dtype, n, progress_unit="rows",
                         info={"source_dtype": str(arr.dtype)}), blocks)


def _header(f: IO[bytes], source: Path) -> tuple[tuple[int, ...], bool, np.dtype]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            return fmt.read_array_header_1_0(f)
        return fmt.read_array_header_2_0(f)
    except (ValueError, OSError, EOFError) as exc:
        raise StoreError(
            f"{source} is not a valid .npy file ({exc}); re-save it with numpy.save."
        ) from exc


def check_array(shape: tuple, dtype: np.dtype, source: Path) -> None:
    """A .npy array must be 2-D, real numeric, with rows and columns."""
    if dtype.hasobject:
        raise InputError(
            f"{source} holds Python objects (dtype {dtype}); save a numeric array instead."
        )
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_) or \
            np.issubdtype(dtype, np.complexfloating):
        raise InputError(
            f"{source}: dtype {dtype} is not real numeric; convert it to float32/float64 first."
        )
    if len(shape) != 2:
        raise InputError(
            f"{source}: expected a 2-D array (rows are points), got shape {tuple(shape)}. "
            "Reshape it, e.g. X.reshape(len(X), -1), and save it again."
        )
    if shape[0] == 0:
        raise InputError(f"{source}: has 0 rows; nothing to ingest.")
    if shape[1] == 0:
        raise InputError(f"{source}: has 0 columns (shape {tuple(shape)}).")
