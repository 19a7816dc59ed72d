"""The registry of file formats (one line per reader), and how a file's format is found."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from distsketch.errors import ConfigError
from distsketch.io.readers.base import Reader
from distsketch.io.readers.csv import CsvReader
from distsketch.io.readers.idx import IdxReader
from distsketch.io.readers.npy import NpyReader
from distsketch.io.readers.parquet import ParquetReader
from distsketch.io.readers.svmlight import SvmlightReader

__all__ = ["find_reader", "formats", "infer_format", "register_reader", "unregister_reader"]

_READERS: dict[str, Reader] = {}

_SNIFF_BYTES = 16


def register_reader(reader: Reader | type[Reader]) -> Reader:
    """Add a format (a :class:`Reader` or its class); its name must be new.

    Returns
    -------
    Reader
        The registered instance (so the call also works as a class decorator
        when the result is not needed).
    """
    inst = reader() if isinstance(reader, type) else reader
    if not isinstance(inst, Reader):
        raise TypeError(f"{inst!r} is not a distsketch.io.readers.Reader")
    names = (inst.name, *inst.aliases)
    taken = [n for n in names if any(n == r.name or n in r.aliases for r in _READERS.values())]
    if taken:
        raise ValueError(f"format name(s) {taken} are already registered")
    _READERS[inst.name] = inst
    return inst


def unregister_reader(name: str) -> None:
    """Remove the format ``name`` (for tests and plugins that replace a format)."""
    del _READERS[name]


register_reader(NpyReader)
register_reader(CsvReader)
register_reader(SvmlightReader)
register_reader(IdxReader)
register_reader(ParquetReader)  # pyarrow is imported when a Parquet file is opened


def formats() -> tuple[str, ...]:
    """Names of the registered formats, in registration order."""
    return tuple(_READERS)


def _by_name(format: str) -> Reader:
    key = str(format).lower()
    for r in _READERS.values():
        if key == r.name or key in r.aliases:
            return r
    raise ConfigError(f"unknown format {format!r}; use one of {list(formats())}.")


def _sniff(path: Path) -> bytes:
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as f:
            return f.read(_SNIFF_BYTES)
    except (OSError, EOFError):
        return b""


def find_reader(path: str | os.PathLike, format: str | None = None) -> Reader:
    """The reader for ``path``: by ``format``, else its name, else its first bytes.

    Raises
    ------
    ConfigError
        An unknown ``format``, or a file neither name nor content identifies.
    """
    if format is not None:
        return _by_name(format)
    p = Path(path)
    for r in _READERS.values():
        if r.guess_can_open(p):
            return r
    if p.is_file():
        head = _sniff(p)
        for r in _READERS.values():
            if r.guess_from_content(head):
                return r
    raise ConfigError(
        f"cannot tell the format of {path} from its name; pass format= one of {list(formats())} "
        "(CLI: --format)."
    )


def infer_format(path: str | os.PathLike) -> str:
    """The ingest format of a file from its name (``.gz`` is looked through), else its content.

    Raises
    ------
    ConfigError
        If neither tells the format.
    """
    return find_reader(path).name
