"""The reader interface (:class:`Reader` opens a file as a :class:`Stream` of
:class:`Block` row blocks) and the helpers every format shares; casting, checks,
progress and writing are done once, by :func:`distsketch.io.ingest`, for every format.
"""

from __future__ import annotations

import contextlib
import gzip
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import numpy as np

from distsketch.errors import ConfigError, InputError, MemoryBudgetError, StoreError

# widest row a file may imply without its width being declared (n_features=): an index
# of 2**31 in a 25-byte svmlight file must not become a 16 GiB row
MAX_UNDECLARED_WIDTH = 2**24

__all__ = [
    "MAX_UNDECLARED_WIDTH",
    "Block",
    "Header",
    "ReadOptions",
    "Reader",
    "Stream",
    "check_width",
    "open_binary",
    "plain_name",
    "record_blocks",
    "target_dtype",
    "written_integer_rounds",
]


@dataclass(frozen=True)
class ReadOptions:
    """The format options of :func:`distsketch.io.ingest` a reader may use."""

    delimiter: str | None = None
    skip_header: int | None = None
    zero_based: bool | str = "auto"
    n_features: int | None = None
    header: bool | None = None
    label_column: int | str | None = None
    class_labels: bool | None = None
    #: table columns left out (header names or indices; ``""`` names an unnamed column)
    drop_columns: tuple[int | str, ...] = ()
    #: ``"yes-no"``: feature columns of yes/no (or true/false) words are read as 1/0
    boolean_columns: str | None = None
    #: the header names read into X, in this order (every other column is left out)
    select_columns: tuple[str, ...] | None = None


@dataclass
class Header:
    """What a reader knows before the first block.

    Attributes
    ----------
    n_features : int
        Width of ``X`` (1 for a 1-D source).
    n_rows : int or None
        Rows, when the header or a scan tells them; None when only the end of
        the file does (CSV).
    source_dtype : numpy.dtype or None
        The stored values' dtype (kept when ``dtype=None``); None for text
        formats, whose values are parsed as float64.
    labelled : bool
        Blocks carry labels ``y``.
    progress_total : int
        Total of :attr:`Block.position` (bytes of the file, or rows).
    progress_unit : str
        ``"file"`` (position is a byte offset) or ``"rows"``.
    info : dict
        Manifest entries (source dtype, shape, options the reader chose); a
        reader may add to it while its blocks are read.  ``feature_names``
        (a list of str) becomes the ``feature_names`` attribute of ``X``.
    label_dtype : numpy.dtype or None
        Stored dtype of ``y`` (default float64).
    classes : list of str or None
        Class names of ``y`` when ``y`` holds their codes (index into this
        list); the reader fills it while its blocks are read.
    """

    n_features: int
    n_rows: int | None
    source_dtype: np.dtype | None
    progress_total: int
    labelled: bool = False
    progress_unit: str = "file"
    info: dict[str, Any] = field(default_factory=dict)
    label_dtype: np.dtype | None = None
    classes: list[str] | None = None


@dataclass
class Block:
    """Consecutive rows: ``X`` of shape (k, n_features) and labels ``y`` of shape (k,).

    ``position`` is the progress so far (in :attr:`Header.progress_unit`);
    ``line_of(r)`` gives the file line of row ``r`` of the block, for
    messages, where the format has lines.  ``inexact(dtype)``, given by text
    formats, returns the first integer written in the file that ``dtype``
    cannot hold exactly, as ``(row, column, text)`` (None when there is none).
    """

    X: np.ndarray
    y: np.ndarray | None
    position: int
    line_of: Callable[[int], int] | None = None
    inexact: Callable[[np.dtype], tuple[int, int, str] | None] | None = None


@dataclass
class Stream:
    """An opened source: its header and a function of the rows per block."""

    header: Header
    blocks: Callable[[int], Iterator[Block]]


class Reader:
    """One file format.  Subclasses set the class attributes and implement :meth:`open`.

    Register a new format with
    :func:`distsketch.io.readers.register_reader`.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    suffixes: ClassVar[tuple[str, ...]] = ()
    #: a table whose columns have names: ``label_column=`` and ``class_labels=`` apply
    takes_label_column: ClassVar[bool] = False

    def guess_can_open(self, path: Path) -> bool:
        """Whether the file name (``.gz`` looked through) says this format."""
        return file_suffix(path) in self.suffixes

    def guess_from_content(self, head: bytes) -> bool:
        """Whether the first bytes (decompressed) say this format."""
        return False

    def open(self, source: Path, options: ReadOptions) -> contextlib.AbstractContextManager[Stream]:
        """Open ``source`` and return its :class:`Stream` (a context manager)."""
        raise NotImplementedError


def plain_name(path: Path) -> str:
    """The lower-case file name without a ``.gz`` suffix."""
    return path.name.lower().removesuffix(".gz")


def file_suffix(path: Path) -> str:
    """The last dotted part of :func:`plain_name` ("" when there is none)."""
    name = plain_name(path)
    return name.rsplit(".", 1)[-1] if "." in name else ""


@contextlib.contextmanager
def open_binary(path: Path) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """Yield (decoded stream, raw file): the raw file's position measures progress."""
    try:
        raw = open(path, "rb")  # closed in the finally clause
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc}. Check the path and permissions.") from exc
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                yield gz, raw  # type: ignore[misc]
        else:
            yield raw, raw
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise StoreError(
            f"cannot read {path}: {type(exc).__name__}: {exc}. The file is truncated or not "
            "the compression its name says; re-download or re-compress it."
        ) from exc
    finally:
        raw.close()


def record_blocks(f: IO[bytes], raw: IO[bytes], n: int, d: int, dtype: np.dtype, rows: int,
                  truncated: Callable[[int], str]) -> Iterator[Block]:
    """``n`` records of ``d`` values after a binary header, ``rows`` a block;
    ``truncated(record)`` is the message when the data ends early."""
    size = d * dtype.itemsize
    for a in range(0, n, rows):
        k = min(rows, n - a)
        buf = f.read(k * size)
        if len(buf) != k * size:
            raise StoreError(truncated(a + len(buf) // size))
        yield Block(np.frombuffer(buf, dtype=dtype).reshape(k, d), None, raw.tell())


def target_dtype(dtype: Any, source_dtype: np.dtype | None) -> np.dtype:
    """The stored dtype: ``dtype``, or the source's in native byte order when None."""
    if dtype is None:
        if source_dtype is None or not np.issubdtype(source_dtype, np.number):
            return np.dtype(np.float64)
        return np.dtype(source_dtype).newbyteorder("=")
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ConfigError(f"dtype={dtype!r} is not a NumPy dtype; use 'float32' or 'float64'.") \
            from exc
    if not (np.issubdtype(dt, np.number) or dt == np.bool_):
        raise ConfigError(f"dtype={dtype!r} is not numeric; use 'float32' or 'float64'.")
    return dt


_INTEGER = re.compile(r"[+-]?\d+\Z", re.ASCII)


def written_integer_rounds(text: str, dtype: np.dtype) -> bool:
    """Whether ``text`` is an integer (as written in a text file) that ``dtype`` rounds.

    ``1e30`` or ``2.0`` are floats as written: rounding them is the cast's
    ordinary job.  Only integers written with digits are held to be exact.
    """
    text = text.strip()
    if _INTEGER.match(text) is None:
        return False
    value = int(text)
    with np.errstate(over="ignore"):
        near = dtype.type(float(value)) if abs(value) < 2**1000 else dtype.type(np.inf)
    return not np.isfinite(near) or int(near) != value


def check_width(width: int, source: Path, *, declared: bool, itemsize: int = 8,
                what: str = "the file") -> None:
    """Refuse a row width that would allocate absurd memory, before anything is allocated.

    A width the user ``declared`` (``n_features=``) is limited by the memory
    budget only, any other also by :data:`MAX_UNDECLARED_WIDTH`; ``itemsize``
    is the bytes per value of a block row, ``what`` names what implies the
    width in messages (e.g. "feature index 2147483647").
    """
    from distsketch.graph import task_memory_budget

    if not declared and width > MAX_UNDECLARED_WIDTH:
        raise InputError(
            f"{source}: {what} implies {width} features, more than the {MAX_UNDECLARED_WIDTH} "
            "accepted without a declared width; the index is likely corrupt. If the width is "
            "real, pass n_features= (CLI: --n-features)."
        )
    budget = task_memory_budget()
    if width * itemsize > budget:
        raise MemoryBudgetError(
            f"{source}: one row of {width} features needs {width * itemsize} bytes, more than "
            f"the per-task memory budget of {budget} bytes; nothing was allocated. Check the "
            "width, or raise the budget (dask config distsketch.task-memory)."
        )
