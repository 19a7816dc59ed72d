""":func:`ingest`: any registered format into a row-chunked Zarr store, streamed.

Over 500 lines because ingest's options, chunk sizing, label handling and commit are one
streamed pass.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError, StoreError
from distsketch.io.arrays.class_codes import class_name_clash, class_name_problem, nfc
from distsketch.io.arrays.small_chunks import (
    MAX_SMALL_CHUNKS,
    MIN_CHUNK_BYTES,
    chunk_rows_for,
)
from distsketch.io.readers.base import (
    Header,
    ReadOptions,
    Stream,
    open_binary,
    plain_name,
    target_dtype,
)
from distsketch.io.readers.csv import MAX_CLASSES
from distsketch.io.readers.idx import read_header as idx_header
from distsketch.io.readers.progress import Progress
from distsketch.io.readers.registry import find_reader
from distsketch.io.readers.sink import RowWriter, ZarrSink
from distsketch.io.storage.codecs import COMPRESSORS
from distsketch.io.storage.urls import resolve
from distsketch.validation.finite import cast_checked, check_exact_integers, check_finite_stored
from distsketch.validation.params import Interval, StrOptions, validate_params

__all__ = ["ingest"]

_PATH = [str, os.PathLike]


@validate_params({
    "source": _PATH,
    "dest": _PATH,
    "format": [str, None],
    "chunk_rows": [Interval(int, 1, None), None],
    "n_features": [Interval(int, 1, None), None],
    "delimiter": [str, None],
    "skip_header": [Interval(int, 0, None), None],
    "header": ["boolean", None],
    "label_column": [Interval(int, None, None), str, None],
    "class_labels": ["boolean", None],
    "drop_columns": ["array-like", str, None],
    "boolean_columns": [StrOptions({"yes-no"}), None],
    "columns": ["array-like", None],
    "labels": [*_PATH, None],
    "zero_based": ["boolean", StrOptions({"auto"})],
    "allow_nan": ["boolean"],
    "compressor": [StrOptions({c for c in COMPRESSORS if c} | {"none"}), None],
    "overwrite": ["boolean"],
    "append": ["boolean"],
    "progress": ["boolean", None],
    "storage_options": [dict, None],
})
def ingest(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    format: str | None = None,
    chunk_rows: int | None = None,
    dtype: Any = "float32",
    n_features: int | None = None,
    delimiter: str | None = None,
    skip_header: int | None = None,
    header: bool | None = None,
    label_column: int | str | None = None,
    class_labels: bool | None = None,
    drop_columns: Sequence[int | str] | None = None,
    boolean_columns: str | None = None,
    columns: Sequence[str] | None = None,
    labels: str | os.PathLike | None = None,
    zero_based: bool | str = "auto",
    allow_nan: bool = False,
    compressor: str | None = "lz4",
    overwrite: bool = False,
    append: bool = False,
    progress: bool | None = None,
    storage_options: dict | None = None,
) -> Path | str:
    """Stream a file into a row-chunked Zarr store, never holding the whole file.

    Parameters
    ----------
    source : path-like
        ``.npy``, ``.csv``/``.tsv``/``.txt``, ``.svm``/``.svmlight``/``.libsvm``
        or an MNIST idx file (``*-ubyte``), each optionally ``.gz``, a Parquet
        table (``.parquet``, with ``pip install "distsketch[parquet]"``), or any
        format registered with :func:`~distsketch.io.readers.register_reader`.
    dest : path-like or URL
        Output directory or URL (``s3://bucket/data.zarr``): a Zarr group with
        ``X`` (n, d) and, for labelled inputs, ``y`` (n,), dimensions
        ``("sample", "feature")`` and ``("sample",)``, consolidated metadata.
        Committed atomically (on an object store: by its manifest, written
        last); nothing is left on failure.
    format : str, optional
        A registered format name ("npy", "csv", "svmlight", "idx") or alias.
        Default: recognised from the file name, else from its first bytes.
    chunk_rows : int, optional
        Rows per Zarr chunk (default: about 8 MiB per chunk).  Chunks under
        64 KiB are refused when the store would have more than 1000 of them
        (the message gives the least rows that are accepted).
    dtype : dtype, default "float32"
        Stored dtype of ``X``; None keeps the source dtype (npy, idx).  An
        integer the dtype cannot hold exactly (above 2**24 for float32, 2**53
        for float64) is refused, never rounded.
    n_features : int, optional
        svmlight only: width of ``X`` (default: the largest index in the file).
    delimiter : str, optional
        CSV field separator (default: "," for .csv, tab for .tsv, otherwise
        whitespace, or "," if the first data line has commas).
    skip_header : int, optional
        CSV lines to skip at the top (not read as names).
    header : bool, optional
        CSV: the first non-blank line holds the column names (True), or is
        data (False).  Default: it is a header exactly when every field is a
        name (starts with a letter or ``_`` and is not a number, e.g.
        ``a,b,c``); a line mixing names and numbers (``x1,2,3``) is data, and
        refused as not a number.  With ``skip_header`` the default is False.
        Header names become the ``feature_names`` attribute of ``X``.
    label_column : int or str, optional
        CSV or Parquet: the column stored as ``y`` instead of in ``X``, by
        header (column) name or index (0 is the first, -1 the last).  A name
        the header holds twice is refused as ambiguous (give the index).
        Numeric labels are float64 (an integer beyond 2**53 is refused);
        class names are non-empty, at most
        :data:`~distsketch.io.arrays.class_codes.MAX_CLASS_NAME` characters, and
        never a spelling of NaN (a missing label, refused).
    class_labels : bool, optional
        Label column: True stores every label as a class name, False as a
        number.  Default: class names when the first label is not a number
        (CSV), when the column holds text (Parquet).
        Class names are stored as int32 codes in ``y`` with the names in its
        ``classes`` attribute; ``fit``/``predict``/``score`` read them as the
        names (predictions are the names).
    drop_columns : sequence of int or str, optional
        CSV or Parquet: columns left out of ``X`` (never parsed), by header
        name or index (0 is the first, -1 the last), e.g. an ID column.  A CSV
        whose header's first field is empty (R's ``write.csv``: that column
        holds row names) has that column dropped without being named; the
        manifest lists the dropped columns (``dropped_columns``).
    boolean_columns : {"yes-no"}, optional
        CSV or Parquet: read feature columns of yes/no or true/false words
        (any case) as 1/0.  A CSV column is one when its first value is such a
        word; a Parquet column when it holds text.  The manifest lists them
        (``yes_no_columns``).  Default: such words are refused as not numbers.
    columns : sequence of str, optional
        CSV or Parquet with column names: exactly these columns go to ``X``,
        in this order (e.g. the columns a model was fitted on); every other
        column but the label column is left out.  A name the table lacks, or
        holds twice, is refused.
    labels : path-like, optional
        A 1-D idx (e.g. ``train-labels-idx1-ubyte.gz``) or ``.npy`` file of
        labels stored as ``y``; it must have as many records as ``source``.
        Numbers (NaN/Inf refused unless ``allow_nan``) or strings (stored as
        class names, as for ``class_labels``).
    zero_based : bool or "auto", default "auto"
        svmlight feature indices start at 0 (True) or 1 (False); "auto" picks
        0 if any index is 0.
    allow_nan : bool, default False
        Store NaN/Inf as they are instead of raising.
    compressor : {"lz4", "zstd", "none", None}, default "lz4"
        Codec of the chunks.
    overwrite : bool, default False
        Replace an existing ``dest``; only a store distsketch wrote is ever
        replaced (never a file, the working directory or a parent of it, or
        the source).
    append : bool, default False
        Append the rows of ``source`` to the existing store ``dest`` (written
        by ``ingest``) instead of creating it: ``X`` and ``y`` grow together,
        atomically (:func:`distsketch.io.append`); the rows are cast to the
        store's dtype (``dtype`` is not used; an integer it would round is
        refused, as in ingest) and must have its width, and labels are
        required exactly when the store has ``y``.  A file with column names
        is matched to the store's ``feature_names`` by name (reordered when
        the names are the same, refused when they are not).
    progress : bool, optional
        Progress line on stderr (default: when stderr is a terminal).
    storage_options : dict, optional
        fsspec options for a URL ``dest`` (merged over the dask config
        ``distsketch.storage-options``).  The source is a local file.

    Returns
    -------
    pathlib.Path or str
        The committed store (``open_array(path)`` gives ``X``); a URL for a
        URL ``dest``.

    Raises
    ------
    InputError
        Empty file, ragged or non-numeric CSV rows, malformed svmlight lines,
        NaN/Inf, not 2-D — naming the file and the line or row.
    StoreError
        Unreadable or corrupt files (bad idx magic, truncated data), an
        existing ``dest`` without ``overwrite``.
    ConfigError
        Unknown format or invalid option.

    Notes
    -----
    Memory: one chunk of rows (plus the parser's temporaries for it) at a
    time; a ``.npy`` file is memory-mapped and copied a block at a time.
    svmlight files are read twice (first to learn n, the width and the index
    base).  Writes are sequential and chunk-aligned, and the row and chunk
    counts are verified before the store is committed with its manifest
    (source path, size, modification time, format, rows).
    """
    t0 = time.perf_counter()
    src = Path(source).expanduser().absolute()
    if not src.exists():
        raise StoreError(f"no file at {src}; check the path.")
    if src.is_dir():
        raise StoreError(f"{src} is a directory; ingest reads one file.")
    reader = find_reader(src, format)
    target_dtype(dtype, None)  # fail early on a bad dtype
    from distsketch.graph.progress import progress_enabled

    show = progress_enabled(progress)
    options = ReadOptions(delimiter=delimiter, skip_header=skip_header, zero_based=zero_based,
                          n_features=n_features, header=header, label_column=label_column,
                          class_labels=class_labels,
                          drop_columns=_drop_columns(drop_columns),
                          boolean_columns=boolean_columns,
                          select_columns=None if columns is None else tuple(map(str, columns)))
    if header is not None and reader.name != "csv":
        raise ConfigError(f"{src}: header= applies to CSV files, not {reader.name}.")
    if (label_column is not None or class_labels is not None) and \
            not getattr(reader, "takes_label_column", False):
        raise ConfigError(f"{src}: label_column= and class_labels= apply to tables with "
                          f"columns (CSV, Parquet), not {reader.name}.")
    if (options.drop_columns or boolean_columns is not None or columns is not None) and \
            not getattr(reader, "takes_label_column", False):
        raise ConfigError(f"{src}: drop_columns=, boolean_columns= and columns= apply to tables with "
                          f"columns (CSV, Parquet), not {reader.name}.")
    out = resolve(dest, storage_options)
    if append:
        if overwrite:
            raise ConfigError("ingest: append=True adds rows to dest and overwrite=True replaces "
                              "it; pass one of them.")
        return _append_file(src, reader, options, out, labels, allow_nan, show)
    with ZarrSink.open(out, compressor=compressor, overwrite=overwrite,
                       inputs=[src, labels], storage_options=storage_options) as sink:
        with reader.open(src, options) as stream:
            info = _copy(stream, sink, src, dtype, chunk_rows, allow_nan, show)
        n = int(info["rows"])
        xw = sink.writers["X"]
        if labels is not None:
            if "y" in sink.writers:
                raise ConfigError(f"{src} has labels of its own (a label column, or "
                                  f"{reader.name} labels); do not pass labels=.")
            info["labels_source"] = str(_ingest_labels(
                Path(labels).expanduser().absolute(), n, xw.chunk_rows,
                sink, allow_nan, show))
        st = src.stat()
        manifest = {"kind": "ingest", "source": str(src), "source_bytes": st.st_size,
                    "source_mtime": st.st_mtime, "format": reader.name,
                    "arrays": sorted(sink.writers), "dtype": str(np.dtype(xw.dtype)),
                    "chunk_rows": xw.chunk_rows, "compressor": compressor,
                    "seconds": round(time.perf_counter() - t0, 3)}
        manifest.update(info)
        sink.commit(n, src, manifest)
    return out.user_path()


def _drop_columns(columns: Sequence[int | str] | None) -> tuple[int | str, ...]:
    """``drop_columns=`` as a tuple; a bare string is one column, not its characters."""
    if columns is None:
        return ()
    if isinstance(columns, (str, int)):
        return (columns,)
    out = tuple(columns)
    bad = [c for c in out if not isinstance(c, (str, int)) or isinstance(c, bool)]
    if bad:
        raise ConfigError(f"drop_columns= holds {bad[0]!r}; give header names (str) or column "
                          "indices (int).")
    return out


def _append_file(src: Path, reader: Any, options: ReadOptions, out: Any,
                 labels: str | os.PathLike | None, allow_nan: bool, show: bool) -> Path | str:
    """``ingest(..., append=True)``: the rows of ``src`` appended to the store ``out``."""
    from distsketch.io.arrays.appending import StoreAppender

    with StoreAppender.open(out) as app:
        if app.classes is not None and options.label_column is not None and \
                options.class_labels is None and reader.name == "csv":
            # the store holds class names: so does the text of a CSV label column (a first
            # label "NaN" or "3" is a name here, checked as one, not a number).  A typed
            # column (Parquet) says what it holds: numbers stay numbers, and are refused
            options = dataclasses.replace(options, class_labels=True)
        with reader.open(src, options) as stream:
            _append_stream(src, app, stream, labels, allow_nan, show, out.url)
    return out.user_path()


def _append_stream(src: Path, app: Any, stream: Stream, labels: str | os.PathLike | None,
                   allow_nan: bool, show: bool, url: str) -> None:
    """Append the rows of ``stream`` (the file ``src``) through the appender ``app``."""
    hdr: Header = stream.header
    if labels is not None and hdr.labelled:
        raise ConfigError(f"{src} has labels of its own; do not pass labels=.")
    y_all = None if labels is None else _labels_in_memory(Path(labels).expanduser().absolute())
    order = _column_order(src, hdr, app.manifest, app.arrays["X"], url)
    xdt = np.dtype(app.arrays["X"].dtype)
    rows = int(app.arrays["X"].chunks[0])
    prog = Progress(f"append {src.name}", hdr.progress_total, hdr.progress_unit, show)
    done = 0
    for block in stream.blocks(rows):
        k = int(block.X.shape[0])
        # ingest's rule, checked against the file's own text (its rows, lines and columns)
        check_exact_integers(block.X, xdt, where=str(src), row_start=done, line_of=block.line_of,
                             inexact=block.inexact)
        X = block.X if order is None else block.X[:, order]
        y = block.y if hdr.labelled else None
        if y is not None and hdr.classes is not None:
            # the file's own codes (in order of first appearance in this file) as names:
            # the store maps them to its codes
            y = np.asarray(hdr.classes, dtype=str)[y]
        if y_all is not None:
            if done + k > y_all.shape[0]:
                raise InputError(f"labels {labels} have {y_all.shape[0]} records, fewer than "
                                 f"the rows of {src}; pair the data and labels of one batch.")
            y = y_all[done:done + k]
        app.write(X, y, allow_nan=allow_nan, line_of=block.line_of)
        done += k
        prog.update(block.position, done)
    prog.close(done)
    if y_all is not None and y_all.shape[0] != done:
        raise InputError(f"labels {labels} have {y_all.shape[0]} records for the {done} rows "
                         f"of {src}; pair the data and labels of one batch.")
    app.commit(source=str(src))


def _column_order(src: Path, hdr: Header, manifest: dict, xa: Any, url: str) -> list[int] | None:
    """Columns of ``src`` in the store's feature order (matched by name), or None to keep them."""
    from distsketch.io.arrays.appending import match_columns

    given = hdr.info.get("feature_names")
    if not isinstance(given, list) or not all(isinstance(n, str) for n in given):
        return None
    label = hdr.info.get("label_column")
    return match_columns(given, label if isinstance(label, str) else None, manifest, xa,
                         str(src), url)


def _labels_in_memory(path: Path) -> np.ndarray:
    """A 1-D .npy or idx labels file as an array (labels are one value per row)."""
    if not path.exists():
        raise StoreError(f"no labels file at {path}; check the path.")
    if plain_name(path).endswith(".npy") and not path.name.lower().endswith(".gz"):
        y = np.load(path, mmap_mode="r", allow_pickle=False)
    elif find_reader(path).name == "idx":
        with find_reader(path).open(path, ReadOptions()) as stream:
            y = np.concatenate([b.X.reshape(-1) for b in stream.blocks(65536)])
    else:
        raise ConfigError(f"labels {path}: use a 1-D idx (*-ubyte) or .npy file.")
    if y.ndim != 1:
        raise InputError(f"labels {path} have shape {y.shape}; expected one label per row (1-D).")
    return y


def _copy(stream: Stream, sink: ZarrSink, source: Path, dtype: Any, chunk_rows: int | None,
          allow_nan: bool, show: bool) -> dict:
    """Cast, check and write every block of ``stream``; the reader's manifest entries."""
    hdr: Header = stream.header
    dt = target_dtype(dtype, hdr.source_dtype)
    rows = chunk_rows_for(chunk_rows, hdr.n_features, dt.itemsize, hdr.n_rows)
    small = _small_chunks(rows, hdr.n_features * dt.itemsize, source)
    if small is not None and hdr.n_rows is not None and -(-hdr.n_rows // rows) > MAX_SMALL_CHUNKS:
        raise small
    xw = sink.array("X", dt, rows, hdr.n_rows)
    if hdr.info.get("feature_names"):
        sink.attrs["X"] = {"feature_names": list(hdr.info["feature_names"])}
    yw = sink.array("y", hdr.label_dtype or np.dtype(np.float64), rows, hdr.n_rows) \
        if hdr.labelled else None
    prog = Progress(f"ingest {source.name}", hdr.progress_total, hdr.progress_unit, show)
    done = 0
    for block in stream.blocks(rows):
        check_exact_integers(block.X, dt, where=str(source), row_start=done,
                             line_of=block.line_of, inexact=block.inexact)
        X = cast_checked(block.X, dt, where=str(source), row_start=done, line_of=block.line_of)
        if not allow_nan:
            check_finite_stored(X, done, source, block.line_of)
        xw.write(X)
        if yw is not None:
            assert block.y is not None
            if not allow_nan:
                check_finite_stored(block.y.reshape(-1, 1), done, Path(f"{source} (labels)"),
                                    block.line_of)
            yw.write(block.y)
        done += X.shape[0]
        if small is not None and done > rows * MAX_SMALL_CHUNKS:
            raise small
        prog.update(block.position, done)
    prog.close(done)
    if hdr.n_rows is not None and done != hdr.n_rows:
        raise StoreError(f"{source} changed while being ingested ({hdr.n_rows} rows, then "
                         f"{done}); retry when it is no longer being written.")
    if hdr.classes is not None:
        sink.attrs["y"] = {"classes": list(hdr.classes)}
    info = {"rows": done, "n_features": hdr.n_features} | hdr.info
    if hdr.classes is not None:
        info["n_classes"] = len(hdr.classes)
    return info


def _small_chunks(rows: int, row_bytes: int, source: Path) -> ConfigError | None:
    """The error for chunks under :data:`MIN_CHUNK_BYTES` (raised if there are too many)."""
    if rows * row_bytes >= MIN_CHUNK_BYTES:
        return None
    least = -(-MIN_CHUNK_BYTES // max(1, row_bytes))
    return ConfigError(
        f"chunk_rows={rows} makes chunks of {rows * row_bytes} bytes, and {source} needs more "
        f"than {MAX_SMALL_CHUNKS} of them: every chunk is a file and a task in each later pass, "
        f"so tiny chunks make ingest and fit slow. Use chunk_rows >= {least} (64 KiB per "
        "chunk; CLI: --chunk-rows), or leave it out for about 8 MiB per chunk.")


def _npy_labels(path: Path, n: int) -> np.ndarray:
    """A 1-D ``.npy`` of ``n`` labels, memory-mapped; numbers, booleans or strings."""
    if path.name.lower().endswith(".gz"):
        raise InputError(f"{path}: labels from .npy.gz are not supported; decompress it.")
    try:
        y = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise InputError(f"labels {path}: {exc}. Save the labels as numbers or strings "
                         "(numpy.save of a numeric or str array, not objects).") from exc
    except (OSError, EOFError) as exc:
        raise StoreError(f"cannot read labels {path} as .npy: {exc}.") from exc
    if not isinstance(y, np.ndarray):
        raise InputError(f"labels {path} are not a single .npy array; save one with numpy.save.")
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"labels {path} have shape {y.shape}; expected ({n},) to match "
                         "the rows of the data.")
    if not (np.issubdtype(y.dtype, np.number) or y.dtype.kind in "bUS") or \
            np.issubdtype(y.dtype, np.complexfloating):
        raise InputError(f"labels {path}: dtype {y.dtype} is neither real numbers nor strings; "
                         "save numeric or str labels.")
    return y


def _ingest_labels(path: Path, n: int, chunk_rows: int, sink: ZarrSink, allow_nan: bool,
                   show: bool) -> Path:
    """Store a 1-D .npy or idx labels file of ``n`` records as ``y``."""
    if not path.exists():
        raise StoreError(f"no labels file at {path}; check the path.")
    if plain_name(path).endswith(".npy"):
        y = _npy_labels(path, n)
        names = y.dtype.kind in "US"
        classes: dict[str, int] = {}
        w: RowWriter = sink.array("y", np.dtype(np.int32) if names else target_dtype(None, y.dtype),
                                  chunk_rows, n)
        for a in range(0, n, chunk_rows):
            part = np.asarray(y[a:a + chunk_rows])
            if names:
                part = _class_codes(part, classes, a, path)
            elif not allow_nan:
                check_finite_stored(part.reshape(-1, 1), a, path)
            w.write(part)
        w.close()
        if names:
            sink.attrs["y"] = {"classes": list(classes)}
        return path
    reader = find_reader(path)
    if reader.name != "idx":
        raise ConfigError(f"labels {path}: use a 1-D idx (*-ubyte) or .npy file.")
    with open_binary(path) as (f, _raw):
        dims, _, _ = idx_header(f, path)
    if len(dims) != 1 or dims[0] != n:
        raise InputError(f"labels {path} have idx shape {dims}; expected ({n},) to match the "
                         f"{n} rows of the data. Pair images and labels of the same split.")
    with reader.open(path, ReadOptions()) as stream:
        dt = target_dtype(None, stream.header.source_dtype)
        w = sink.array("y", dt, chunk_rows, n)
        prog = Progress(f"ingest {path.name}", stream.header.progress_total, "file", show)
        done = 0
        for block in stream.blocks(chunk_rows):
            y = block.X.reshape(-1)
            y = y if y.dtype == dt else y.astype(dt)
            if not allow_nan:
                check_finite_stored(y.reshape(-1, 1), done, path)
            w.write(y)
            done += y.shape[0]
            prog.update(block.position, done)
        prog.close(done)
    return path


def _class_codes(block: np.ndarray, classes: dict[str, int], first_row: int,
                 path: Path) -> np.ndarray:
    """int32 codes of string labels; names not seen before get the next codes (sorted within a block)."""
    try:
        text = block.astype(str) if block.dtype.kind == "S" else block
    except UnicodeDecodeError as exc:
        raise InputError(f"labels {path}: a label of rows {first_row}..{first_row + len(block) - 1} "
                         f"is not ASCII text ({exc.reason}); save the names as str (Unicode), "
                         "not bytes.") from None
    names, inverse = np.unique(text, return_inverse=True)
    codes = np.empty(names.shape[0], dtype=np.int32)
    by_nfc = {nfc(n): n for n in classes}
    for i, name in enumerate(names.tolist()):
        name = name.strip()
        problem = None if name in classes else \
            class_name_problem(name) or class_name_clash(name, by_nfc)
        if problem is not None:
            row = first_row + int(np.flatnonzero(inverse == i)[0])
            raise InputError(f"labels {path}: row {row}: {problem}")
        if name not in classes:
            if len(classes) >= MAX_CLASSES:
                raise InputError(f"labels {path}: more than {MAX_CLASSES} distinct labels; is it "
                                 "an ID column? Store numeric targets instead.")
            classes[name] = len(classes)
            by_nfc[nfc(name)] = name
        codes[i] = classes[name]
    return codes[inverse.reshape(-1)]
