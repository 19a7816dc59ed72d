"""Delimited text (``*.csv``, ``*.tsv``, ``*.txt``), read ``chunk_rows`` lines at a time.

A UTF-8 byte-order mark is not data.  Fields may be quoted with ``"`` (the
csv module's semantics, ``""`` inside a quoted field is one quote): a quoted
field holding the delimiter or ``#`` is one field, and it is refused as not
a number unless it is one.

Nothing is guessed silently: the first line is a header only by the rule of
:func:`is_header` (or ``header=``), numbers are ASCII decimals
(:func:`is_number`), and a label column (``label_column=``) holds numbers or
class names by its first label (or ``class_labels=``).

Over 500 lines because the delimited-text rules (header, quoting, labels, dropped and
yes/no columns) are one reader's.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from distsketch.errors import InputError
from distsketch.io.arrays.class_codes import MAX_CLASSES, class_name_clash, class_name_problem, nfc
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

__all__ = ["BOOLEAN_WORDS", "COLUMN_OPTIONS_HINT", "MAX_CLASSES", "CsvReader", "LabelColumn",
           "boolean_value", "dropped_column_indices", "is_header", "is_number",
           "is_row_names_header", "label_column_index", "selected_column_indices"]

#: the words a yes/no column holds (any case), read as 1 and 0 with boolean_columns="yes-no"
BOOLEAN_WORDS = {"yes": 1.0, "no": 0.0, "true": 1.0, "false": 0.0}

#: what to do with a column that is not numbers (the end of every such message)
COLUMN_OPTIONS_HINT = ("Leave the column out with drop_columns= (CLI: --drop-column NAME, "
                       "repeatable), read yes/no and true/false columns as 1/0 with "
                       "boolean_columns='yes-no' (CLI: --boolean-columns yes-no), or name the "
                       "labels with label_column= (CLI: --label-column).")


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
            head = _read_head(readline, options, delimiter, source)
            plan = _plan_columns(head, options, source)
            labels = plan.labels
            yield Stream(Header(len(plan.keep), None, None, size, labelled=labels is not None,
                                info=_header_info(head, plan),
                                label_dtype=None if labels is None else labels.dtype,
                                classes=labels.classes if labels and labels.classes_mode
                                else None),
                         _Blocks(head, plan, readline, raw, source))


@dataclasses.dataclass
class _Head:
    """A CSV's lines before its data, and its first data line."""

    #: as given, or ``","`` when the first lines are comma-separated
    delimiter: str | None
    #: the skipped lines and the header line, as written (the header info's ``header``)
    skipped: list[str]
    #: the header's names (None without a header line)
    names: list[str] | None
    first: str
    first_lineno: int
    first_tokens: list[str]


def _read_head(readline: Callable[[int], str], options: ReadOptions, delimiter: str | None,
               source: Path) -> _Head:
    """Read the skipped lines, the header line (declared or detected) and the first data line."""
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
        if names is None and (header_rule or (header_rule is None and (
                is_header(tokens) or is_row_names_header(tokens)))):
            names = tokens
            skipped.append(line.rstrip("\r\n"))
            continue
        first, first_lineno = line, lineno
        break
    if first is None:
        raise InputError(f"{source}: no data rows (only {lineno} header/blank/comment "
                         "line(s)); nothing to ingest.")
    first_tokens = _split_tokens(first, delimiter)
    if names is not None and len(names) != len(first_tokens):
        raise InputError(
            f"{source}: the header has {len(names)} names but line {first_lineno} has "
            f"{len(first_tokens)} fields. Fix the header, or pass header=False (CLI: --no-header) "
            "if that line is data.")
    return _Head(delimiter, skipped, names, first, first_lineno, first_tokens)


@dataclasses.dataclass
class _Plan:
    """Which of a CSV's columns are the label, dropped, kept (as X) and read as yes/no."""

    n_cols: int
    labels: LabelColumn | None
    #: the file's columns that become X, in order (X's column c is file column keep[c])
    keep: list[int]
    dropped: list[int]
    yes_no: list[int]
    #: the header's names (None without a header line), for messages
    names: list[str] | None
    #: boolean_columns= was given
    yes_no_option: bool

    def name(self, j: int) -> str:
        """``column 3 ('age')``: the 1-based position and the header name, if any."""
        named = f" ({self.names[j]!r})" if self.names is not None else ""
        return f"column {j + 1}{named}"


def _plan_columns(head: _Head, options: ReadOptions, source: Path) -> _Plan:
    """Plan the columns by the options, the header's names and the first data line."""
    names, first_tokens = head.names, head.first_tokens
    n_cols = len(first_tokens)
    label = label_column_index(options, names, n_cols, source)
    dropped = dropped_column_indices(options, names, n_cols, source, label)
    labels = None if label is None else LabelColumn(
        label, first_tokens[label], options.class_labels, head.first_lineno)
    keep = [j for j in range(n_cols) if j != label and j not in dropped]
    if options.select_columns is not None:
        keep = selected_column_indices(options.select_columns, names, source, label)
        dropped = [j for j in range(n_cols) if j != label and j not in keep]
    if not keep:
        raise InputError(f"{source}: every column is dropped or is the label column, "
                         "which leaves no features.")
    # yes/no columns are told by their first value, as a label column's kind is
    yes_no = [] if options.boolean_columns is None else \
        [j for j in keep if first_tokens[j].strip().lower() in BOOLEAN_WORDS]
    return _Plan(n_cols, labels, keep, dropped, yes_no, names, options.boolean_columns is not None)


def _header_info(head: _Head, plan: _Plan) -> dict[str, Any]:
    """The header's ``info``: delimiter, header lines, and the columns' names or indices."""
    names = head.names
    info: dict[str, Any] = {"delimiter": head.delimiter, "header": head.skipped}
    if names is not None:
        info["feature_names"] = [names[j] for j in plan.keep]
    if plan.dropped:
        info["dropped_columns"] = [names[j] if names is not None else j for j in plan.dropped]
    if plan.yes_no:
        info["yes_no_columns"] = [names[j] if names is not None else j for j in plan.yes_no]
    if plan.labels is not None:
        info["label_column"] = names[plan.labels.column] if names is not None else \
            plan.labels.column
        info["labels"] = "classes" if plan.labels.classes_mode else "numbers"
    return info


class _Blocks:
    """A CSV's rows from its first data line on, as blocks: ``blocks(rows)`` (lazily)."""

    def __init__(self, head: _Head, plan: _Plan, readline: Callable[[int], str],
                 raw: IO[bytes], source: Path):
        self.head, self.plan, self.readline, self.raw, self.source = \
            head, plan, readline, raw, source
        labels, names = plan.labels, head.names
        self.label_name = None if labels is None else (
            repr(names[labels.column]) if names is not None else str(labels.column))

    def __call__(self, rows: int) -> Iterator[Block]:
        """Blocks of ``rows`` lines (fewer rows where lines are blank or comments)."""
        delimiter, keep = self.head.delimiter, self.plan.keep
        pending = [self.head.first]
        block_first_line = self.head.first_lineno
        done = 0
        while True:
            self._read_lines(pending, rows, block_first_line)
            if not pending:
                break
            block = self._parse(pending, block_first_line)
            line_of = _line_numbers(pending, block_first_line, delimiter)
            y = self._labels(block, pending, done, line_of)
            if len(keep) != self.plan.n_cols:
                block = block[:, keep]
            yield Block(block, y, self.raw.tell(), line_of,
                        _inexact(block, pending, delimiter, keep))
            block_first_line += len(pending)
            done += block.shape[0]
            last = len(pending) < rows
            pending = []
            if last:
                break

    def _read_lines(self, pending: list[str], rows: int, block_first_line: int) -> None:
        """Append the block's next lines to ``pending``, up to ``rows`` lines in all."""
        try:
            while len(pending) < rows:
                line = self.readline(block_first_line + len(pending))
                if not line:
                    break
                pending.append(line)
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.source}: not UTF-8 text after line "
                             f"{block_first_line} ({exc}); is it a binary file?") from exc

    def _converters(self) -> dict[int | str, Callable[[str], Any]]:
        """loadtxt's converters: class names to codes, yes/no to 1/0, dropped fields unread."""
        labels = self.plan.labels
        conv: dict[int | str, Callable[[str], Any]] = \
            {} if labels is None or not labels.classes_mode else {labels.column: labels.code}
        # a dropped column is never parsed: any text there is fine
        conv.update(dict.fromkeys(self.plan.dropped, _ignored))
        conv.update(dict.fromkeys(self.plan.yes_no, boolean_value))
        return conv

    def _parse(self, pending: list[str], block_first_line: int) -> np.ndarray:
        """The block's lines as float64, every column of the file (a bad line named)."""
        delimiter, n_cols, plan = self.head.delimiter, self.plan.n_cols, self.plan
        conv = self._converters()
        try:
            # a block of only blank/comment lines is legitimately empty
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.filterwarnings("ignore", "loadtxt: input contained no data")
                block = np.loadtxt(pending, dtype=np.float64, delimiter=delimiter,
                                   comments="#", ndmin=2, quotechar='"',
                                   converters=conv or None)
        except ValueError:
            raise _diagnose(pending, block_first_line, delimiter, self.source, plan) from None
        if block.size and block.shape[1] != n_cols:
            raise _diagnose(pending, block_first_line, delimiter, self.source, plan)
        if not block.shape[0]:
            block = np.empty((0, n_cols))
        return block

    def _labels(self, block: np.ndarray, pending: list[str], done: int,
                line_of: Callable[[int], int]) -> np.ndarray | None:
        """The block's labels: class codes as int32, numbers as float64 (checked exact)."""
        labels = self.plan.labels
        if labels is None:
            return None
        y = block[:, labels.column]
        if labels.classes_mode:
            return y.astype(np.int32)
        y = y.copy()
        # numeric labels are float64: 2**60 + 1 and 2**60 + 2 must not become one label
        check_exact_integers(
            y, np.float64, where=str(self.source), row_start=done,
            line_of=line_of, column=lambda _: f"label column {self.label_name}",
            inexact=_inexact(y[:, None], pending, self.head.delimiter, [labels.column]),
            hint=NUMERIC_LABELS_HINT)
        return y


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


def is_row_names_header(tokens: list[str]) -> bool:
    """A header whose first field is empty and the others names: R's ``write.csv`` writes one,
    the empty-named first column holding row names (``"1"``, ``"2"``, ...), which is dropped."""
    return len(tokens) > 1 and tokens[0] == "" and is_header(tokens[1:])


def boolean_value(token: str) -> float:
    """1.0 for yes/true, 0.0 for no/false (any case); ValueError for anything else."""
    return BOOLEAN_WORDS[token.strip().lower()]


def _ignored(token: str) -> float:
    """The value of a dropped column's field: never used, so never parsed."""
    return 0.0


def dropped_column_indices(options: ReadOptions, names: list[str] | None, n_cols: int,
                           source: Path, label: int | None = None) -> list[int]:
    """The sorted indices of ``options.drop_columns`` (header names or indices), plus an
    empty-named first column (:func:`is_row_names_header`); shared by CSV and Parquet."""
    out: set[int] = set()
    for col in options.drop_columns:
        if isinstance(col, str) and not (names is None and _is_index(col)):
            if names is None:
                raise InputError(f"{source}: drop column {col!r} is a name, but the file has no "
                                 "header line of names; give the column's index (0 is the "
                                 "first).")
            where = [j for j, n in enumerate(names) if n == col]
            if not where:
                raise InputError(f"{source}: no column named {col!r} to drop; the header names "
                                 f"{', '.join(map(repr, names[:20]))}"
                                 f"{' ...' if len(names) > 20 else ''}.")
            out.update(where)  # every column of that name: none of them is wanted
            continue
        j = int(col)
        if not -n_cols <= j < n_cols:
            raise InputError(f"{source}: drop column {j} is out of range: the rows have "
                             f"{n_cols} fields (indices 0..{n_cols - 1}, or -1 for the last).")
        out.add(j % n_cols)
    if names is not None and names and names[0] == "":
        out.add(0)  # R's row names: an unnamed first column is never a feature
    if label is not None and label in out:
        raise InputError(f"{source}: column {label} is both the label column and dropped; "
                         "drop another column or name another label column.")
    return sorted(out)


def selected_column_indices(selected: tuple[str, ...], names: list[str] | None, source: Path,
                            label: int | None = None) -> list[int]:
    """The indices of the header names ``selected``, in that order (a table's columns read
    by name, e.g. the columns a model was fitted on)."""
    if names is None:
        raise InputError(f"{source}: the columns are chosen by name ({', '.join(selected[:5])}"
                         f"{' ...' if len(selected) > 5 else ''}), but the file has no header "
                         "line of names; add one, or pass header=True (CLI: --header) if line 1 "
                         "holds the names.")
    missing = [c for c in selected if c not in names]
    if missing:
        raise InputError(f"{source}: no column named {', '.join(map(repr, missing[:10]))}"
                         f"{' ...' if len(missing) > 10 else ''}; the columns needed are "
                         f"{', '.join(map(repr, selected[:20]))}{' ...' if len(selected) > 20 else ''}"
                         f" and the header names {', '.join(map(repr, names[:20]))}"
                         f"{' ...' if len(names) > 20 else ''}.")
    twice = [c for c in selected if names.count(c) > 1]
    if twice:
        raise InputError(f"{source}: the header names {twice[0]!r} more than once, so the column "
                         "to read is ambiguous; rename the duplicate columns.")
    keep = [names.index(c) for c in selected]
    if label is not None and label in keep:
        raise InputError(f"{source}: column {names[label]!r} is both the label column and a "
                         "feature column.")
    return keep


def _is_index(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def label_column_index(options: ReadOptions, names: list[str] | None, n_cols: int,
                       source: Path) -> int | None:
    """The index of ``options.label_column`` (a header name, or an index; negative from the end);
    shared by CSV and Parquet."""
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
            if self.problem(name) is not None:
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


def _inexact(X: np.ndarray, lines: list[str], delimiter: str | None, columns: list[int]):
    """The block's check for integers written in the file that a float dtype would round
    (``X``'s column ``c`` is the file's ``columns[c]``)."""
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
            text = tokens[columns[c]].strip()
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


def _diagnose(lines: list[str], first_line: int, delimiter: str | None, source: Path,
              plan: _Plan) -> InputError:
    """Find the first bad line of a block that NumPy refused and describe it."""
    n_cols, labels = plan.n_cols, plan.labels
    dropped, yes_no = set(plan.dropped), set(plan.yes_no)
    for i, line in enumerate(lines):
        tokens = _split_tokens(line, delimiter)
        if not tokens:
            continue
        lineno = first_line + i
        if len(tokens) != n_cols:
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
            if j in dropped:
                continue
            where = f"{source}, line {lineno}, {plan.name(j)}"
            if j in yes_no:
                if t.strip().lower() in BOOLEAN_WORDS:
                    continue
                return InputError(
                    f"{where}: {t!r} is not yes/no or true/false, but the column's first value "
                    "is, so it is read as 1/0 (boolean_columns='yes-no'). Fix the value, or "
                    "leave the column out with drop_columns= (CLI: --drop-column).")
            if not is_number(t):
                quoted = f" (a quoted field holding the delimiter {delimiter!r} is one field)" \
                    if delimiter and delimiter in t else ""
                if t.strip().lower() in BOOLEAN_WORDS:
                    if plan.yes_no_option:
                        return InputError(
                            f"{where}: {t!r} is a yes/no value, but the column's first value is "
                            "a number, so the column holds numbers. Fix the value, or leave the "
                            "column out with drop_columns= (CLI: --drop-column).")
                    return InputError(
                        f"{where}: {t!r} is a yes/no (true/false) value, not a number. Pass "
                        "boolean_columns='yes-no' (CLI: --boolean-columns yes-no) to read such "
                        "columns as 1/0, or leave the column out with drop_columns= (CLI: "
                        "--drop-column NAME, repeatable).")
                return InputError(
                    f"{where}: {t!r} is not a number{quoted}. "
                    "Numbers are ASCII decimals such as -1.5e3 (no digit separators, no other "
                    "digits). Fix the value, or check the delimiter; a header line is a line "
                    "of names only (else pass header=True, CLI: --header). "
                    + COLUMN_OPTIONS_HINT
                )
    return InputError(f"{source}: cannot parse lines {first_line}..{first_line + len(lines) - 1} "
                      "as numbers; check the delimiter and the file's encoding.")
