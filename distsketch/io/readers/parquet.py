"""Apache Parquet tables (``*.parquet``, ``*.pq``), read in record batches through pyarrow.

pyarrow is an optional dependency (``pip install "distsketch[parquet]"``).
Rows are read ``chunk_rows`` at a time, so memory stays one block whatever the
file's row groups.  Every column but the label column goes to ``X`` and must be
numeric (booleans read as 0 and 1, decimals as the nearest float64).  Dates and
times are refused: which number a date should be depends on the model.  Class
names in the label column are coded as CSV's are
(:class:`~distsketch.io.readers.csv.LabelColumn`).  A null anywhere is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError, StoreError
from distsketch.io.readers.base import Block, Header, Reader, ReadOptions, Stream
from distsketch.io.readers.csv import (
    BOOLEAN_WORDS,
    COLUMN_OPTIONS_HINT,
    NUMERIC_LABELS_HINT,
    LabelColumn,
    dropped_column_indices,
    label_column_index,
    selected_column_indices,
)
from distsketch.validation.finite import check_exact_integers, first_inexact_integer

__all__ = ["ParquetReader"]

_MAGIC = b"PAR1"


def _pyarrow() -> Any:
    """``pyarrow.parquet``, or a ConfigError naming the extra that installs it."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError('reading Parquet needs pyarrow: pip install "distsketch[parquet]" '
                          "(or convert the table to CSV or .npy).") from exc
    return pq


class ParquetReader(Reader):
    """A Parquet table: numeric feature columns, optionally one label column."""

    name = "parquet"
    aliases = ("pq",)
    suffixes = ("parquet", "pq")
    takes_label_column = True

    def guess_from_content(self, head: bytes) -> bool:
        return head.startswith(_MAGIC)

    @contextlib.contextmanager
    def open(self, source: Path, options: ReadOptions) -> Iterator[Stream]:
        pq = _pyarrow()
        import pyarrow as pa
        import pyarrow.compute as pc

        if source.name.lower().endswith(".gz"):
            raise InputError(f"{source}: a Parquet file compresses its columns itself and is not "
                             "read through gzip; decompress it first.")
        try:
            pf = pq.ParquetFile(source)
        except (OSError, pa.ArrowException) as exc:
            raise StoreError(f"cannot read {source} as Parquet: {exc}. Check that it is a "
                             "complete Parquet file (pass format= for another format).") from exc
        with contextlib.closing(pf):
            plan = _plan_columns(pf.schema_arrow, options, source, pa)
            n_rows = int(pf.metadata.num_rows)
            if n_rows == 0:
                raise InputError(f"{source}: the table has no rows; nothing to ingest.")
            labels = plan.labels
            yield Stream(Header(len(plan.features), n_rows, plan.dtype, n_rows,
                                labelled=labels is not None, progress_unit="rows",
                                info=_header_info(plan, int(pf.metadata.num_row_groups)),
                                label_dtype=None if labels is None else labels.dtype,
                                classes=labels.classes if labels and labels.classes_mode
                                else None), _Blocks(pf, plan, source, pa, pc))


@dataclasses.dataclass
class _Plan:
    """Which of a table's columns are the label, dropped, features and yes/no words."""

    names: list[str]
    label: int | None
    labels: LabelColumn | None
    #: the table's columns that become X, in order
    features: list[int]
    dropped: list[int]
    #: the text feature columns of yes/no words (boolean_columns="yes-no"), read as 1/0
    words: list[int]
    #: the dtype X is read as (all the feature columns' in one)
    dtype: np.dtype
    #: the columns read, by name: the features, then the label column (if any)
    columns: list[str]


def _plan_columns(schema: Any, options: ReadOptions, source: Path, pa: Any) -> _Plan:
    """Plan the columns by the options and the table's schema, refusing columns not numbers."""
    names = [str(n) for n in schema.names]
    if not names:
        raise InputError(f"{source}: the table has no columns; nothing to ingest.")
    label = label_column_index(options, names, len(names), source)
    dropped = dropped_column_indices(options, names, len(names), source, label)
    features = [j for j in range(len(names)) if j != label and j not in dropped]
    if options.select_columns is not None:
        features = selected_column_indices(options.select_columns, names, source, label)
        dropped = [j for j in range(len(names)) if j != label and j not in features]
    if not features:
        raise InputError(f"{source}: no column is left for the features (the label "
                         "column and the dropped columns are all of them).")
    yes_no = options.boolean_columns is not None
    # with boolean_columns="yes-no", a text column holds yes/no words read as 1/0
    words = [j for j in features if yes_no and _is_text(schema.field(j).type)]
    for j in features:
        if j not in words:
            _check_feature(schema.field(j).type, names[j], source, pa)
    dtypes = [np.dtype(np.uint8) if j in words else
              _feature_dtype(schema.field(j).type, pa) for j in features]
    source_dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    labels = None if label is None else _label(schema.field(label).type, names[label],
                                               options.class_labels, source, pa)
    columns = [names[j] for j in features] + ([] if label is None else [names[label]])
    return _Plan(names, label, labels, features, dropped, words, source_dtype, columns)


def _header_info(plan: _Plan, row_groups: int) -> dict[str, Any]:
    """The header's ``info``: the feature names, row groups, and the other columns' names."""
    names = plan.names
    info: dict[str, Any] = {"feature_names": [names[j] for j in plan.features],
                            "row_groups": row_groups}
    if plan.dropped:
        info["dropped_columns"] = [names[j] for j in plan.dropped]
    if plan.words:
        info["yes_no_columns"] = [names[j] for j in plan.words]
    if plan.labels is not None:
        info["label_column"] = names[plan.label] if plan.label is not None else None
        info["labels"] = "classes" if plan.labels.classes_mode else "numbers"
    return info


class _Blocks:
    """A table's rows as blocks: ``blocks(rows)`` reads record batches of ``rows`` (lazily)."""

    def __init__(self, pf: Any, plan: _Plan, source: Path, pa: Any, pc: Any):
        self.pf, self.plan, self.source, self.pa, self.pc = pf, plan, source, pa, pc

    def __call__(self, rows: int) -> Iterator[Block]:
        """Blocks of ``rows`` rows (the last may be shorter)."""
        plan, source = self.plan, self.source
        done = 0
        try:
            batches = self.pf.iter_batches(batch_size=rows, columns=plan.columns)
            for batch in batches:
                k = batch.num_rows
                self._refuse_nulls(batch, done)
                X, ints = self._features(batch, done)
                y = None if plan.labels is None else \
                    _codes(batch.column(len(plan.features)), plan.labels, source, done, self.pc,
                           plan.names[plan.label] if plan.label is not None else "")
                done += k
                yield Block(X, y, done, inexact=_inexact(ints) if ints else None)
        except (OSError, self.pa.ArrowException) as exc:
            raise StoreError(f"cannot read {source} after row {done}: {exc}. The file is "
                             "truncated or damaged.") from exc

    def _refuse_nulls(self, batch: Any, done: int) -> None:
        """Refuse a null anywhere in the batch, naming its row and column."""
        for j, col in enumerate(batch.columns):
            if col.null_count:
                row = done + int(np.flatnonzero(
                    self.pc.is_null(col).to_numpy(zero_copy_only=False))[0])
                raise InputError(
                    f"{self.source}: row {row}, column {self.plan.columns[j]!r} is null; "
                    "fill or drop the rows with missing values before ingesting.")

    def _features(self, batch: Any, done: int) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """The batch's X, and the integer columns' exact values (for the rounding check)."""
        pa, plan = self.pa, self.plan
        X = np.empty((batch.num_rows, len(plan.features)), dtype=plan.dtype)
        ints: dict[int, np.ndarray] = {}
        for j in range(len(plan.features)):
            col = batch.column(j)
            if plan.features[j] in plan.words:
                X[:, j] = _yes_no(col, self.source, done, plan.columns[j])
                continue
            if pa.types.is_decimal(col.type):
                col = self.pc.cast(col, pa.float64())
            values = col.to_numpy(zero_copy_only=False)
            if values.dtype.kind in "iu" and plan.dtype.kind == "f":
                ints[j] = values  # the exact values, for the rounding check
            X[:, j] = values
        return X, ints


def _check_feature(t: Any, name: str, source: Path, pa: Any) -> None:
    """Refuse a feature column of type ``t`` that is not numbers, saying what to do."""
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or \
            pa.types.is_decimal(t):
        return
    if pa.types.is_temporal(t):
        raise InputError(
            f"{source}: column {name!r} is {t} (dates or times), which is not read as numbers: "
            "which number a date should be (days since an epoch, year, weekday, ...) depends on "
            "the model. Convert it to numbers before ingesting (e.g. days since 1970-01-01, or "
            "year, month and weekday columns), or drop it.")
    raise InputError(
        f"{source}: column {name!r} is {t}, not numbers; every column but the label column "
        f"goes to X. {COLUMN_OPTIONS_HINT}")


def _yes_no(col: Any, source: Path, first_row: int, name: str) -> np.ndarray:
    """A text column of yes/no (true/false) words, any case, as 1.0/0.0."""
    text = np.char.lower(np.char.strip(np.asarray(col.to_numpy(zero_copy_only=False), dtype=str)))
    out = np.zeros(text.shape[0], dtype=np.float64)
    known = np.zeros(text.shape[0], dtype=bool)
    for word, value in BOOLEAN_WORDS.items():
        hit = text == word
        out[hit] = value
        known |= hit
    if not known.all():
        row = int(np.flatnonzero(~known)[0])
        raise InputError(f"{source}: row {first_row + row}, column {name!r}: "
                         f"{str(col[row].as_py())!r} is not yes/no or true/false, and "
                         "boolean_columns='yes-no' reads the column's text as 1/0. Fix the "
                         "value, or leave the column out with drop_columns= (CLI: --drop-column).")
    return out


def _feature_dtype(t: Any, pa: Any) -> np.dtype:
    """The NumPy dtype a feature column is read as: booleans as uint8, decimals as float64."""
    if pa.types.is_boolean(t):
        return np.dtype(np.uint8)
    if pa.types.is_decimal(t):
        return np.dtype(np.float64)
    return np.dtype(t.to_pandas_dtype())


def _label(t: Any, name: str, class_labels: bool | None, source: Path, pa: Any) -> LabelColumn:
    """The label column of type ``t``: class names for text (or ``class_labels=True``)."""
    text = _is_text(t) or (pa.types.is_dictionary(t) and _is_text(t.value_type))
    number = pa.types.is_integer(t) or pa.types.is_floating(t)
    if not (text or number) or (text and class_labels is False):
        raise InputError(f"{source}: the label column {name!r} is {t}; it must hold numbers, or "
                         "text (class names) without class_labels=False.")
    # the first label decides in CSV; a Parquet column's type says it
    return LabelColumn(0, "" if class_labels or text else "0", class_labels, 0)


def _inexact(ints: dict[int, np.ndarray]):
    """The block's check for integers of integer columns a float dtype would round: a table
    mixing integer and float columns is read as one float64 block, so the integer columns'
    own values say whether that (or the stored dtype) rounded one."""
    def first_inexact(dtype: np.dtype) -> tuple[int, int, str] | None:
        found: tuple[int, int, str] | None = None
        for j, values in ints.items():
            hit = first_inexact_integer(values, dtype)
            if hit is not None and (found is None or hit[0] < found[0]):
                found = (hit[0], j, str(int(values[hit[0]])))
        return found
    return first_inexact


def _codes(col: Any, labels: LabelColumn, source: Path, first_row: int, pc: Any,
           name: str = "") -> np.ndarray:
    """The labels of one batch: numbers as float64, class names as their int32 codes."""
    if not labels.classes_mode:
        values = col.to_numpy(zero_copy_only=False)
        # numeric labels are float64: integers beyond 2**53 must not collapse into one label
        check_exact_integers(values, np.float64, where=str(source), row_start=first_row,
                             column=lambda _: f"label column {name!r}", hint=NUMERIC_LABELS_HINT)
        return np.asarray(values, dtype=np.float64)
    # each distinct name once, in order of first appearance (as CSV numbers them)
    enc = pc.dictionary_encode(col.cast("string") if not _is_text(col.type) else col)
    names = enc.dictionary.to_pylist()
    codes = np.empty(len(names), dtype=np.int32)
    for i, value in enumerate(names):
        problem = labels.problem(str(value))
        if problem is not None:
            row = first_row + int(np.flatnonzero(enc.indices.to_numpy(zero_copy_only=False)
                                                 == i)[0])
            raise InputError(f"{source}: row {row}, label column: {problem}")
        codes[i] = int(labels.code(str(value)))
    return codes[enc.indices.to_numpy(zero_copy_only=False)]


def _is_text(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))
