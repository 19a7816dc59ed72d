"""Apache Parquet tables (``*.parquet``, ``*.pq``), read in record batches through pyarrow.

pyarrow is an optional dependency (``pip install "distsketch[parquet]"``).
Rows are read ``chunk_rows`` at a time (:meth:`pyarrow.parquet.ParquetFile.iter_batches`),
so memory stays one block whatever the file's row groups.  Every column but
the label column (``label_column=``) goes to ``X`` and must be numeric:
integer or floating point, boolean (read as 0 and 1) or decimal (read as the
nearest float64); the column names become ``X``'s ``feature_names``.  Dates,
times and timestamps are refused, naming the column: which number a date
should be (days since an epoch, a year, a weekday, a season) depends on the
model, so it is converted by the caller before ingesting.  The label column
holds numbers, or class names (text, or ``class_labels=True``) coded as
CSV's are (:class:`~distsketch.io.readers.csv.LabelColumn`).
A null anywhere is refused, naming its row and column.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError, StoreError
from distsketch.io.readers.base import Block, Header, Reader, ReadOptions, Stream
from distsketch.io.readers.csv import NUMERIC_LABELS_HINT, LabelColumn, label_column_index
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
            schema = pf.schema_arrow
            names = [str(n) for n in schema.names]
            if not names:
                raise InputError(f"{source}: the table has no columns; nothing to ingest.")
            label = label_column_index(options, names, len(names), source)
            features = [j for j in range(len(names)) if j != label]
            if not features:
                raise InputError(f"{source}: the label column {names[0]!r} is the only column, "
                                 "which leaves no features.")
            for j in features:
                _check_feature(schema.field(j).type, names[j], source, pa)
            dtypes = [_feature_dtype(schema.field(j).type, pa) for j in features]
            source_dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
            labels = None if label is None else _label(schema.field(label).type, names[label],
                                                       options.class_labels, source, pa)
            n_rows = int(pf.metadata.num_rows)
            if n_rows == 0:
                raise InputError(f"{source}: the table has no rows; nothing to ingest.")
            columns = [names[j] for j in features] + ([] if label is None else [names[label]])

            def blocks(rows: int) -> Iterator[Block]:
                done = 0
                try:
                    batches = pf.iter_batches(batch_size=rows, columns=columns)
                    for batch in batches:
                        k = batch.num_rows
                        for j, col in enumerate(batch.columns):
                            if col.null_count:
                                row = done + int(np.flatnonzero(
                                    pc.is_null(col).to_numpy(zero_copy_only=False))[0])
                                raise InputError(
                                    f"{source}: row {row}, column {columns[j]!r} is null; "
                                    "fill or drop the rows with missing values before ingesting.")
                        X = np.empty((k, len(features)), dtype=source_dtype)
                        ints: dict[int, np.ndarray] = {}
                        for j in range(len(features)):
                            col = batch.column(j)
                            if pa.types.is_decimal(col.type):
                                col = pc.cast(col, pa.float64())
                            values = col.to_numpy(zero_copy_only=False)
                            if values.dtype.kind in "iu" and source_dtype.kind == "f":
                                ints[j] = values  # the exact values, for the rounding check
                            X[:, j] = values
                        y = None if labels is None else \
                            _codes(batch.column(len(features)), labels, source, done, pc,
                                   names[label] if label is not None else "")
                        done += k
                        yield Block(X, y, done, inexact=_inexact(ints) if ints else None)
                except (OSError, pa.ArrowException) as exc:
                    raise StoreError(f"cannot read {source} after row {done}: {exc}. The file is "
                                     "truncated or damaged.") from exc

            info: dict[str, Any] = {"feature_names": [names[j] for j in features],
                                    "row_groups": int(pf.metadata.num_row_groups)}
            if labels is not None:
                info["label_column"] = names[label] if label is not None else None
                info["labels"] = "classes" if labels.classes_mode else "numbers"
            yield Stream(Header(len(features), n_rows, source_dtype, n_rows,
                                labelled=labels is not None, progress_unit="rows", info=info,
                                label_dtype=None if labels is None else labels.dtype,
                                classes=labels.classes if labels and labels.classes_mode
                                else None), blocks)


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
        "goes to X. Drop or encode it, or name it with label_column= (CLI: --label-column) if "
        "it holds the labels.")


def _feature_dtype(t: Any, pa: Any) -> np.dtype:
    """The NumPy dtype a feature column is read as: booleans as uint8, decimals as float64."""
    if pa.types.is_boolean(t):
        return np.dtype(np.uint8)
    if pa.types.is_decimal(t):
        return np.dtype(np.float64)
    return np.dtype(t.to_pandas_dtype())


def _label(t: Any, name: str, class_labels: bool | None, source: Path, pa: Any) -> LabelColumn:
    """The label column of type ``t``: class names for text (or ``class_labels=True``)."""
    text = pa.types.is_string(t) or pa.types.is_large_string(t) or (
        pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type)
                                       or pa.types.is_large_string(t.value_type)))
    number = pa.types.is_integer(t) or pa.types.is_floating(t)
    if not (text or number) or (text and class_labels is False):
        raise InputError(f"{source}: the label column {name!r} is {t}; it must hold numbers, or "
                         "text (class names) without class_labels=False.")
    # the first label decides in CSV; a Parquet column's type says it
    return LabelColumn(0, "" if class_labels or text else "0", class_labels, 0)


def _inexact(ints: dict[int, np.ndarray]):
    """The block's check for integers of integer columns a float dtype would round.

    A table mixing integer and float columns is read as one float64 block:
    the integer columns' own values say whether that (or the stored dtype)
    rounded one.
    """
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
