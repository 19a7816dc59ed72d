"""svmlight/libsvm text (``*.svm``, ``*.svmlight``, ``*.libsvm``): ``label index:value ...``.

Read in two streaming passes: the first learns the number of rows, the index
range (hence the width and the index base) and checks the syntax; the second
yields dense row blocks and their labels.  The width is checked between the two,
so an absurd index is refused before any dense row is allocated.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from distsketch.errors import InputError
from distsketch.io.readers.base import (
    Block,
    Header,
    Reader,
    ReadOptions,
    Stream,
    check_width,
    open_binary,
    written_integer_rounds,
)
from distsketch.validation.finite import check_exact_integers

__all__ = ["SvmlightReader"]

_SCAN_ROWS = 4096
_BOM = b"\xef\xbb\xbf"
_MAX_INDEX = 2**62  # far past any width check_width lets through; keeps int64 arithmetic exact


class SvmlightReader(Reader):
    """svmlight/libsvm: labelled sparse rows, stored dense as ``X`` plus ``y``."""

    name = "svmlight"
    aliases = ("svm", "libsvm")
    suffixes = ("svm", "svmlight", "libsvm")

    @contextlib.contextmanager
    def open(self, source: Path, options: ReadOptions) -> Iterator[Stream]:
        if source.stat().st_size == 0:
            raise InputError(f"{source} is empty; nothing to ingest.")
        # pass 1: rows, index range, syntax (a streaming scan; memory O(_SCAN_ROWS))
        n = 0
        lo, hi = None, -1
        with open_binary(source) as (f, _raw):
            for linenos, lines in _lines(f, _SCAN_ROWS):
                _, cols, _ = _parse_block(lines, linenos[0], source)
                n += len(cols)
                for c in cols:
                    if c.size:
                        lo = int(c[0]) if lo is None else min(lo, int(c[0]))
                        hi = max(hi, int(c[-1]))
        if n == 0:
            raise InputError(f"{source}: no data rows; nothing to ingest.")
        zero_based = options.zero_based
        if zero_based == "auto":
            zero_based = lo == 0
        base = 0 if zero_based else 1
        if not zero_based and lo == 0:
            raise InputError(f"{source}: feature index 0 found but zero_based=False; pass "
                             "zero_based=True or 'auto'.")
        d_file = hi + 1 - base if hi >= 0 else 0
        d = options.n_features if options.n_features is not None else d_file
        if d < 1:
            raise InputError(f"{source}: no feature has a value; pass n_features= to set the "
                             "width.")
        if d < d_file:
            raise InputError(
                f"{source}: feature index {hi} needs at least {d_file} features but "
                f"n_features={d}; raise n_features or omit it."
            )
        check_width(d, source, declared=options.n_features is not None,
                    what=f"feature index {hi}")
        with open_binary(source) as (f, raw):

            def blocks(rows: int) -> Iterator[Block]:
                done = 0
                for linenos, lines in _lines(f, rows):
                    y, cols, vals = _parse_block(lines, linenos[0], source)
                    block = np.zeros((len(cols), d), dtype=np.float64)
                    for i, (c, v) in enumerate(zip(cols, vals)):
                        block[i, c - base] = v
                    line_of = linenos.__getitem__
                    # labels are float64: integers beyond 2**53 must not collapse into one
                    check_exact_integers(y, np.float64, where=str(source), row_start=done,
                                         line_of=line_of, column=lambda _: "the label",
                                         inexact=_inexact(y[:, None], lines, None),
                                         hint=_LABELS_HINT)
                    yield Block(block, y, raw.tell(), line_of, _inexact(block, lines, base))
                    done += len(cols)

            header = Header(d, n, None, source.stat().st_size, labelled=True,
                            info={"zero_based": bool(zero_based), "labels": True})
            yield Stream(header, blocks)


_LABELS_HINT = ("Labels are read as float64, which holds integers up to 2**53 exactly; map "
                "them to smaller numbers (e.g. their rank) before ingesting.")


def _lines(f: IO[bytes], rows: int) -> Iterator[tuple[list[int], list[bytes]]]:
    """Blocks of up to ``rows`` data lines, with the file line number of each."""
    lineno = 0
    block: list[bytes] = []
    numbers: list[int] = []
    for line in f:
        lineno += 1
        if lineno == 1 and line.startswith(_BOM):
            line = line[len(_BOM):]
        if not line.split(b"#", 1)[0].strip():
            continue
        block.append(line)
        numbers.append(lineno)
        if len(block) == rows:
            yield numbers, block
            block, numbers = [], []
    if block:
        yield numbers, block


def _inexact(values: np.ndarray, lines: list[bytes], base: int | None):
    """The block's check for integers written in the file that a float dtype would round, of
    its features (``base``: the index base) or its labels as one column (``base`` None)."""
    def first_inexact(dtype: np.dtype) -> tuple[int, int, str] | None:
        limit = 2.0 ** (np.finfo(dtype).nmant + 1)  # every integer up to here is exact
        with np.errstate(invalid="ignore"):
            cand = np.abs(values) > limit  # the common case stops here
            if not cand.any():
                return None
            cand &= np.isfinite(values) & (values == np.round(values))
        for r, c in zip(*np.nonzero(cand)):
            tokens = lines[r].decode("utf-8", "replace").split("#", 1)[0].split()
            if base is None:
                text = tokens[0]
            else:
                text = next((t.partition(":")[2] for t in tokens[1:]
                             if t.partition(":")[0].strip().isdigit()
                             and int(t.partition(":")[0]) == c + base), "")
            if written_integer_rounds(text, dtype):
                return int(r), int(c), text
        return None
    return first_inexact


def _parse_python(lines: list[bytes], first: int, source: Path
                  ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Reference parser used to locate errors the fast parser only reports vaguely."""
    labels, cols, vals = [], [], []
    lineno = first - 1
    for raw_line in lines:
        lineno += 1
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{source}, line {lineno}: not UTF-8 text ({exc}).") from exc
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        try:
            labels.append(float(tokens[0]))
        except ValueError:
            raise InputError(
                f"{source}, line {lineno}: label {tokens[0]!r} is not a number (multi-label "
                "rows are not supported). Fix the line or convert the labels."
            ) from None
        c, v = [], []
        for pos, t in enumerate(tokens[1:]):
            if t.startswith("qid:"):
                if pos == 0:  # the format's query id: right after the label, not a feature
                    continue
                raise InputError(f"{source}, line {lineno}: 'qid:' must follow the label, before "
                                 f"any feature; got {t!r} after features. Fix the line.")
            idx, sep, val = t.partition(":")
            try:
                if not sep:
                    raise ValueError
                ci, vi = int(idx), float(val)
            except ValueError:
                raise InputError(
                    f"{source}, line {lineno}: token {t!r} is not index:value. Fix the line "
                    "(svmlight rows are 'label index:value index:value ...')."
                ) from None
            if ci < 0:
                raise InputError(f"{source}, line {lineno}: negative feature index {ci}.")
            if ci > _MAX_INDEX:
                raise InputError(f"{source}, line {lineno}: feature index {ci} is beyond any "
                                 "usable width; the line is corrupt.")
            c.append(ci)
            v.append(vi)
        if len(c) > 1 and np.any(np.diff(c) <= 0):
            raise InputError(
                f"{source}, line {lineno}: feature indices are not strictly increasing; sort "
                "them (svmlight requires increasing indices)."
            )
        cols.append(np.asarray(c, dtype=np.int64))
        vals.append(np.asarray(v, dtype=np.float64))
    return np.asarray(labels, dtype=np.float64), cols, vals


def _parse_block(lines: list[bytes], first: int, source: Path
                 ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    from sklearn.datasets import load_svmlight_file

    try:
        Xs, y = load_svmlight_file(io.BytesIO(b"".join(lines)), zero_based=True,
                                   dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        return _parse_python(lines, first, source)  # raises with the line
    Xs = Xs.tocsr()
    Xs.sort_indices()
    if Xs.shape[0] != len(lines):
        return _parse_python(lines, first, source)
    cols = [Xs.indices[Xs.indptr[i]:Xs.indptr[i + 1]].astype(np.int64) for i in range(Xs.shape[0])]
    vals = [Xs.data[Xs.indptr[i]:Xs.indptr[i + 1]] for i in range(Xs.shape[0])]
    return np.asarray(y, dtype=np.float64), cols, vals
