"""Delimited text (``*.csv``, ``*.tsv``, ``*.txt``), read ``chunk_rows`` lines at a time.

A UTF-8 byte-order mark is not data.  Fields may be quoted with ``"`` (the
csv module's semantics, ``""`` inside a quoted field is one quote): a quoted
field holding the delimiter or ``#`` is one field, and it is refused as not
a number unless it is one.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from distsketch.errors import InputError
from distsketch.io.readers.base import (
    Block,
    Header,
    Reader,
    ReadOptions,
    Stream,
    open_binary,
    plain_name,
)
from distsketch.io.readers.lines import line_reader

__all__ = ["CsvReader"]


class CsvReader(Reader):
    """Numbers separated by a delimiter, one row per line; ``#`` starts a comment.

    The first data line decides the width and, unless ``skip_header`` is
    given, whether one header line is skipped (when it is not numeric).
    """

    name = "csv"
    aliases = ("tsv", "txt", "text")
    suffixes = ("csv", "tsv", "txt")

    @contextlib.contextmanager
    def open(self, source: Path, options: ReadOptions) -> Iterator[Stream]:
        delimiter = options.delimiter if options.delimiter is not None else \
            _default_delimiter(source)
        size = source.stat().st_size
        if size == 0:
            raise InputError(f"{source} is empty; nothing to ingest.")
        with open_binary(source) as (fb, raw):
            # utf-8-sig: a byte-order mark at the start is dropped, not read as part of a number
            f = io.TextIOWrapper(fb, encoding="utf-8-sig", errors="strict", newline=None)
            readline = line_reader(f, source)  # a line longer than the budget allows is refused
            lineno = 0
            skip = options.skip_header
            header: list[str] = []
            first: str | None = None
            # the first data line decides the header (when auto) and the width
            while True:
                try:
                    line = readline(lineno + 1)
                except UnicodeDecodeError as exc:
                    raise InputError(f"{source}: not UTF-8 text near line {lineno + 1} ({exc}); "
                                     "is it a binary file? pass format=.") from exc
                if not line:
                    break
                lineno += 1
                if skip is not None and lineno <= skip:
                    header.append(line.rstrip("\r\n"))
                    continue
                tokens = _split_tokens(line, delimiter)
                if not tokens:
                    continue
                if delimiter is None and "," in line and not _looks_numeric(tokens):
                    delimiter = ","
                    tokens = _split_tokens(line, delimiter)
                if skip is None and not header and not _looks_numeric(tokens):
                    header.append(line.rstrip("\r\n"))
                    continue
                first = line
                break
            if first is None:
                raise InputError(f"{source}: no data rows (only {lineno} header/blank/comment "
                                 "line(s)); nothing to ingest.")
            n_cols = len(_split_tokens(first, delimiter))

            def blocks(rows: int) -> Iterator[Block]:
                pending = [first]
                block_first_line = lineno
                while True:
                    try:
                        while len(pending) < rows:
                            line = readline(block_first_line + len(pending))
                            if not line:
                                break
                            pending.append(line)
                    except UnicodeDecodeError as exc:
                        raise InputError(f"{source}: not UTF-8 text after line "
                                         f"{block_first_line} ({exc}); is it a binary file?") \
                            from exc
                    if not pending:
                        break
                    try:
                        # a block of only blank/comment lines is legitimately empty
                        with np.errstate(all="ignore"), warnings.catch_warnings():
                            warnings.filterwarnings("ignore", "loadtxt: input contained no data")
                            block = np.loadtxt(pending, dtype=np.float64, delimiter=delimiter,
                                               comments="#", ndmin=2, quotechar='"')
                    except ValueError:
                        raise _diagnose(pending, block_first_line, delimiter, n_cols,
                                        source) from None
                    if block.size and block.shape[1] != n_cols:
                        raise _diagnose(pending, block_first_line, delimiter, n_cols, source)
                    if not block.shape[0]:
                        block = np.empty((0, n_cols))
                    yield Block(block, None, raw.tell(),
                                _line_numbers(pending, block_first_line, delimiter))
                    block_first_line += len(pending)
                    done = len(pending) < rows
                    pending = []
                    if done:
                        break

            info = {"delimiter": delimiter, "header": header}
            yield Stream(Header(n_cols, None, None, size, info=info), blocks)


def _line_numbers(lines: list[str], first_line: int, delimiter: str | None):
    """row of a block -> file line; worked out only when a message needs it."""
    def line_of(row: int) -> int:
        data = [first_line + i for i, ln in enumerate(lines) if _split_tokens(ln, delimiter)]
        return data[row]
    return line_of


def _default_delimiter(path: Path) -> str | None:
    name = plain_name(path)
    if name.endswith(".csv"):
        return ","
    if name.endswith(".tsv"):
        return "\t"
    return None


# a quoted field (quotes doubled inside) or a run of non-blank characters
_WS_TOKEN = re.compile(r'"(?:[^"]|"")*"?|[^\s"]+')


def _strip_comment(line: str) -> str:
    """``line`` up to the first ``#`` outside a quoted field."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


def _split_tokens(line: str, delimiter: str | None) -> list[str]:
    """The fields of one line as NumPy's loadtxt sees them (quotes respected)."""
    if '"' not in line:
        body = line.split("#", 1)[0].strip()
        if not body:
            return []
        parts = body.split(delimiter) if delimiter is not None else body.split()
        return [p.strip() for p in parts]
    body = _strip_comment(line).strip()
    if not body:
        return []
    if delimiter is None:
        parts = [p[1:-1].replace('""', '"') if len(p) > 1 and p[0] == p[-1] == '"' else p
                 for p in _WS_TOKEN.findall(body)]
    elif len(delimiter) == 1:
        parts = next(csv.reader([body], delimiter=delimiter, quotechar='"', strict=False))
    else:
        parts = body.split(delimiter)
    return [p.strip() for p in parts]


def _looks_numeric(tokens: list[str]) -> bool:
    try:
        for t in tokens:
            float(t)
    except ValueError:
        return False
    return True


def _diagnose(lines: list[str], first_line: int, delimiter: str | None, n_cols: int | None,
              source: Path) -> InputError:
    """Find the first bad line of a block that NumPy refused and describe it."""
    for i, line in enumerate(lines):
        tokens = _split_tokens(line, delimiter)
        if not tokens:
            continue
        lineno = first_line + i
        if n_cols is not None and len(tokens) != n_cols:
            return InputError(
                f"{source}, line {lineno}: has {len(tokens)} fields but earlier rows have "
                f"{n_cols} (ragged rows). Fix or drop that line"
                f"{'' if delimiter else ', or pass the right delimiter= (CLI: --delimiter)'}."
            )
        for j, t in enumerate(tokens):
            try:
                float(t)
            except ValueError:
                quoted = f" (a quoted field holding the delimiter {delimiter!r} is one field)" \
                    if delimiter and delimiter in t else ""
                return InputError(
                    f"{source}, line {lineno}, column {j + 1}: {t!r} is not a number{quoted}. Fix the "
                    "value, pass skip_header= if it is a header line (CLI: --skip-header), or "
                    "check the delimiter."
                )
        if n_cols is None:
            n_cols = len(tokens)
    return InputError(f"{source}: cannot parse lines {first_line}..{first_line + len(lines) - 1} "
                      "as numbers; check the delimiter and the file's encoding.")
