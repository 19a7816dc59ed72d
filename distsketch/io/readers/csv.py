"""Delimited text (``*.csv``, ``*.tsv``, ``*.txt``), read ``chunk_rows`` lines at a time.

A UTF-8 byte-order mark is not data.  Fields may be quoted with ``"`` (the
csv module's semantics, ``""`` inside a quoted field is one quote): a quoted
field holding the delimiter or ``#`` is one field, and it is refused as not
a number unless it is one.

Nothing is guessed silently: the first line is a header only by the rule of
:func:`is_header` (or ``header=``), numbers are ASCII decimals
(:func:`is_number`), and a label column (``label_column=``) holds numbers or
class names by its first label (or ``class_labels=``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import InputError
from distsketch.io.class_codes import MAX_CLASSES, class_name_clash, class_name_problem, nfc
from distsketch.io.readers.base import (
    Block,
    Header,
    Reader,
    ReadOptions,
    Stream,
    open_binary,
    plain_name,
    written_integer_rounds,
)
from distsketch.io.readers.lines import line_reader
from distsketch.validation.finite import check_exact_integers

__all__ = ["MAX_CLASSES", "CsvReader", "LabelColumn", "is_header", "is_number",
           "label_column_index"]


class CsvReader(Reader):
    """Numbers separated by a delimiter, one row per line; ``#`` starts a comment.

    The first data line decides the width and whether it is a header (see
    :func:`is_header`); a label column (``label_column``) is stored as ``y``.
    """

    name = "csv"
    aliases = ("tsv", "txt", "text")
    suffixes = ("csv", "tsv", "txt")
    takes_label_column = True

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
            # skipped lines are not names; otherwise a header is declared or detected
            header_rule = options.header if options.header is not None else \
                (False if skip is not None else None)
            skipped: list[str] = []
            names: list[str] | None = None
            first: str | None = None
            first_lineno = 0
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
                    skipped.append(line.rstrip("\r\n"))
                    continue
                tokens = _split_tokens(line, delimiter)
                if not tokens:
                    continue
                if delimiter is None and "," in line and not all(map(is_number, tokens)):
                    delimiter = ","
                    tokens = _split_tokens(line, delimiter)
                if names is None and (header_rule or (header_rule is None and is_header(tokens))):
                    names = tokens
                    skipped.append(line.rstrip("\r\n"))
                    continue
                first, first_lineno = line, lineno
                break
            if first is None:
                raise InputError(f"{source}: no data rows (only {lineno} header/blank/comment "
                                 "line(s)); nothing to ingest.")
            first_tokens = _split_tokens(first, delimiter)
            n_cols = len(first_tokens)
            if names is not None and len(names) != n_cols:
                raise InputError(
                    f"{source}: the header has {len(names)} names but line {first_lineno} has "
                    f"{n_cols} fields. Fix the header, or pass header=False (CLI: --no-header) "
                    "if that line is data.")
            label = label_column_index(options, names, n_cols, source)
            labels = None if label is None else LabelColumn(
                label, first_tokens[label], options.class_labels, first_lineno)
            n_x = n_cols - (label is not None)

            label_name = None if labels is None else (
                repr(names[labels.column]) if names is not None else str(labels.column))

            def blocks(rows: int) -> Iterator[Block]:
                pending = [first]
                block_first_line = first_lineno
                done = 0
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
                    conv: dict[int | str, Callable[[str], Any]] = \
                        {} if labels is None or not labels.classes_mode else \
                        {labels.column: labels.code}
                    try:
                        # a block of only blank/comment lines is legitimately empty
                        with np.errstate(all="ignore"), warnings.catch_warnings():
                            warnings.filterwarnings("ignore", "loadtxt: input contained no data")
                            block = np.loadtxt(pending, dtype=np.float64, delimiter=delimiter,
                                               comments="#", ndmin=2, quotechar='"',
                                               converters=conv or None)
                    except ValueError:
                        raise _diagnose(pending, block_first_line, delimiter, n_cols,
                                        source, labels) from None
                    if block.size and block.shape[1] != n_cols:
                        raise _diagnose(pending, block_first_line, delimiter, n_cols, source,
                                        labels)
                    if not block.shape[0]:
                        block = np.empty((0, n_cols))
                    y = None
                    line_of = _line_numbers(pending, block_first_line, delimiter)
                    if labels is not None:
                        y = block[:, labels.column]
                        if labels.classes_mode:
                            y = y.astype(np.int32)
                        else:
                            y = y.copy()
                            # numeric labels are float64: 2**60 + 1 and 2**60 + 2 must not
                            # become one label
                            check_exact_integers(
                                y, np.float64, where=str(source), row_start=done,
                                line_of=line_of, column=lambda _: f"label column {label_name}",
                                inexact=_inexact(y[:, None], pending, block_first_line,
                                                 delimiter, None, labels.column),
                                hint=NUMERIC_LABELS_HINT)
                        block = np.delete(block, labels.column, axis=1)
                    yield Block(block, y, raw.tell(), line_of,
                                _inexact(block, pending, block_first_line, delimiter,
                                         None if labels is None else labels.column))
                    block_first_line += len(pending)
                    done += block.shape[0]
                    last = len(pending) < rows
                    pending = []
                    if last:
                        break

            info: dict[str, Any] = {"delimiter": delimiter, "header": skipped}
            if names is not None:
                info["feature_names"] = [n for j, n in enumerate(names) if j != label]
            if labels is not None:
                info["label_column"] = names[labels.column] if names is not None else labels.column
                info["labels"] = "classes" if labels.classes_mode else "numbers"
            yield Stream(Header(n_x, None, None, size, labelled=labels is not None, info=info,
                                label_dtype=None if labels is None else labels.dtype,
                                classes=labels.classes if labels and labels.classes_mode else None), blocks)


def is_number(token: str) -> bool:
    """Whether ``token`` is a decimal number as the parser reads it (ASCII digits only).

    ``1_000``, full-width digits, ``0x10`` and ``1,000`` are not numbers, although
    Python's ``float`` accepts some of them.
    """
    return _NUMBER.match(token.strip()) is not None


def is_header(tokens: list[str]) -> bool:
    """The documented header rule: every field is a name (not a number, starts with a letter
    or ``_``).  A line mixing names and numbers is data (and refused as not a number)."""
    return all(t and (t[0].isalpha() or t[0] == "_") and not is_number(t) for t in tokens)


_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)\Z",
                     re.IGNORECASE | re.ASCII)


def label_column_index(options: ReadOptions, names: list[str] | None, n_cols: int,
                       source: Path) -> int | None:
    """The index of ``options.label_column`` (a header name, or an index; negative from the end).

    Shared by the readers of tables with a label column (CSV, Parquet).
    """
    col = options.label_column
    if col is None:
        return None
    if isinstance(col, str):
        if names is None:
            raise InputError(f"{source}: label_column={col!r} names a column, but the file has no "
                             "header line of names; give the column's index (0 is the first), or "
                             "pass header=True (CLI: --header) if line 1 holds the names.")
        if col not in names:
            raise InputError(f"{source}: no column named {col!r}; the header names "
                             f"{', '.join(map(repr, names[:20]))}{' ...' if len(names) > 20 else ''}.")
        where = [j for j, n in enumerate(names) if n == col]
        if len(where) > 1:
            # the first of them would be a guess: say which columns, and how to pick one
            raise InputError(
                f"{source}: label_column={col!r} is ambiguous: the header names "
                f"{len(where)} columns {col!r} (columns {', '.join(map(str, where[:-1]))} and "
                f"{where[-1]}; 0 is the first). Give the column's index instead (e.g. "
                f"label_column={where[0]}, CLI: --label-column {where[0]}), or rename the "
                "duplicate columns.")
        return where[0]
    if not -n_cols <= col < n_cols:
        raise InputError(f"{source}: label_column={col} is out of range: the rows have {n_cols} "
                         f"fields (indices 0..{n_cols - 1}, or -1 for the last).")
    if n_cols < 2:
        raise InputError(f"{source}: the rows have one field, so a label column leaves no "
                         "features.")
    return col % n_cols


class LabelColumn:
    """A label column: numbers (targets), or class names coded in order of first appearance.

    Shared by the readers of tables with a label column (CSV, Parquet): the
    codes and ``classes`` it builds become ``y`` and its ``classes`` attribute.
    """

    def __init__(self, column: int, first: str, class_labels: bool | None, line: int):
        self.column = column
        self.first_line = line
        self.classes_mode = bool(class_labels) if class_labels is not None else \
            not is_number(first)
        self.dtype = np.dtype(np.int32) if self.classes_mode else np.dtype(np.float64)
        self.classes: list[str] = []
        self._codes: dict[str, int] = {}
        self._nfc: dict[str, str] = {}  # the names by their NFC form (class_name_clash)

    def code(self, text: str) -> float:
        """The code of a class name (a new one gets the next code).

        Raises ValueError for a name :meth:`problem` refuses (the parser
        then names the line).
        """
        name = text.strip()
        code = self._codes.get(name)
        if code is None:
            if class_name_problem(name) is not None or len(self.classes) >= MAX_CLASSES or \
                    class_name_clash(name, self._nfc) is not None:
                raise ValueError(name)
            code = self._codes[name] = len(self.classes)
            self.classes.append(name)
            self._nfc[nfc(name)] = name
        return float(code)

    def problem(self, token: str) -> str | None:
        """Why ``token`` is not a label of this column (None when it is one)."""
        if not self.classes_mode:
            if is_number(token):
                return None
            return (f"label {token!r} is not a number, but the first label (line "
                    f"{self.first_line}) is, so the column holds numeric targets. Pass "
                    "class_labels=True (CLI: --class-labels) to store every label as a class "
                    "name, or fix the value.")
        name = token.strip()
        if name in self._codes:
            return None
        problem = class_name_problem(name) or class_name_clash(name, self._nfc)
        if problem is not None:
            return problem
        if len(self.classes) >= MAX_CLASSES:
            return (f"more than {MAX_CLASSES} distinct labels: is this an ID column? Pass "
                    "class_labels=False (CLI: --no-class-labels) for numeric targets.")
        return None


#: what to do with integer labels float64 would round
NUMERIC_LABELS_HINT = ("Numeric labels are stored as float64, which holds integers up to 2**53 "
                       "exactly; pass class_labels=True (CLI: --class-labels) to store them as "
                       "class names.")


def _inexact(X: np.ndarray, lines: list[str], first_line: int, delimiter: str | None,
             label: int | None, only: int | None = None):
    """The block's check for integers written in the file that a float dtype would round.

    ``X`` is the block without the label column ``label``; with ``only``,
    ``X`` is that one column of the file (the labels).
    """
    def first_inexact(dtype: np.dtype) -> tuple[int, int, str] | None:
        limit = 2.0 ** (np.finfo(dtype).nmant + 1)  # every integer up to here is exact
        with np.errstate(invalid="ignore"):
            cand = np.abs(X) > limit  # NaN compares False; the common case stops here
            if not cand.any():
                return None
            cand &= np.isfinite(X) & (X == np.round(X))
        data = [ln for ln in lines if _split_tokens(ln, delimiter)]
        for r, c in zip(*np.nonzero(cand)):
            tokens = _split_tokens(data[r], delimiter)
            text = tokens[only if only is not None else
                          c + (label is not None and c >= label)].strip()
            # written as a float (1e30), rounding it is the cast's ordinary job
            if written_integer_rounds(text, dtype):
                return int(r), int(c), text
        return None
    return first_inexact


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


def _diagnose(lines: list[str], first_line: int, delimiter: str | None, n_cols: int | None,
              source: Path, labels: LabelColumn | None = None) -> InputError:
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
            if labels is not None and j == labels.column:
                problem = labels.problem(t)
                if problem is not None:
                    return InputError(f"{source}, line {lineno}, column {j + 1}: {problem}")
                continue
            if not is_number(t):
                quoted = f" (a quoted field holding the delimiter {delimiter!r} is one field)" \
                    if delimiter and delimiter in t else ""
                return InputError(
                    f"{source}, line {lineno}, column {j + 1}: {t!r} is not a number{quoted}. "
                    "Numbers are ASCII decimals such as -1.5e3 (no digit separators, no other "
                    "digits). Fix the value, or check the delimiter; a header line is a line "
                    "of names only (else pass header=True, CLI: --header), and a label column "
                    "is named with label_column= (CLI: --label-column)."
                )
        if n_cols is None:
            n_cols = len(tokens)
    return InputError(f"{source}: cannot parse lines {first_line}..{first_line + len(lines) - 1} "
                      "as numbers; check the delimiter and the file's encoding.")
