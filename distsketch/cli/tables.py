"""Tables where a user has tables: CSV or Parquet inputs of ``predict``, ``transform`` and
``score`` (read as ``distsketch ingest`` would), and outputs of ``predict`` and ``transform``."""

from __future__ import annotations

import contextlib
import csv
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import ConfigError, DistsketchError, InputError, StoreError

__all__ = ["TABLE_SUFFIXES", "check_table_output", "column_names", "feature_names",
           "input_columns", "is_table_file", "model_columns", "require_table_writer",
           "table_input", "table_output_format", "write_table"]

#: file names read or written as tables, by format
TABLE_SUFFIXES = {"csv": (".csv", ".tsv", ".txt"), "parquet": (".parquet", ".pq")}

# rows of predictions computed and written at a time, at most (whole blocks of the input)
_WRITE_ROWS = 262144


def _table_format(name: str) -> str | None:
    plain = name.lower().removesuffix(".gz")
    for fmt, suffixes in TABLE_SUFFIXES.items():
        if plain.endswith(suffixes):
            return fmt
    return None


def is_table_file(spec: str) -> bool:
    """Whether a command's input ``spec`` is a local CSV or Parquet file (not a store)."""
    text = str(spec)
    if "://" in text or "::" in text or _table_format(Path(text).name) is None:
        return False
    return Path(text).expanduser().is_file()


def table_output_format(spec: str) -> str | None:
    """``"csv"`` or ``"parquet"`` when an output's name asks for a table, else None (Zarr)."""
    text = str(spec)
    fmt = _table_format(Path(text.rstrip("/")).name)
    if fmt is None:
        return None
    if text.lower().endswith(".gz"):
        raise ConfigError(f"output {text}: compressed tables are not written; name it "
                          f"{text[:-3]} (or compress it afterwards).")
    if "://" in text:
        raise ConfigError(f"output {text}: {fmt} outputs are written to local files only; write "
                          "a Zarr store to an object store (a name without the table suffix).")
    return fmt


def input_columns(spec: str, storage_options: dict | None = None) -> dict[str, Any] | None:
    """How the table behind an ingested store was read (its manifest's ``feature_names``,
    ``label_column``, ``yes_no_columns``, ``dtype``): what a model fitted on it records."""
    from distsketch.io import read_manifest
    from distsketch.io.storage.safety import split_array_path

    path, component = split_array_path(str(spec))
    if component not in (None, "X"):
        return None
    try:
        info = read_manifest(path, storage_options=storage_options)
    except DistsketchError:
        return None
    names = (info or {}).get("feature_names")
    if info is None or info.get("kind") != "ingest" or not isinstance(names, list) or \
            not all(isinstance(n, str) for n in names):
        return None
    keys = ("feature_names", "label_column", "yes_no_columns", "dtype")
    return {k: info[k] for k in keys if info.get(k) is not None}


def model_columns(model: Any, path: str, storage_options: dict | None = None
                  ) -> dict[str, Any] | None:
    """The columns a saved model was fitted on: the store's ``input_columns``, else the
    model's ``feature_names_in_``, else None."""
    import zarr

    from distsketch.io.storage.urls import resolve

    try:
        root = zarr.open_group(store=resolve(path, storage_options).zarr_store(read_only=True),
                               mode="r")
        info = root.attrs.get("info")
    except Exception:  # load() has read the store: no names is the answer
        info = None
    cols = info.get("input_columns") if isinstance(info, dict) else None
    if isinstance(cols, dict) and isinstance(cols.get("feature_names"), list):
        return cols
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        return {"feature_names": [str(n) for n in names]}
    return None


def _ingest_hint(src: str, cols: dict[str, Any] | None) -> str:
    label = (cols or {}).get("label_column")
    label_opt = f" --label-column {label}" if isinstance(label, str) else ""
    stem = Path(src).name.split(".")[0] or "input"
    return (f"ingest it first: `distsketch ingest {src} {stem}.zarr{label_opt}` (add "
            "--drop-column NAME for each column the model was not fitted on), then use "
            f"{stem}.zarr as the input")


@contextlib.contextmanager
def table_input(src: str, model: Any, model_path: str,
                storage_options: dict | None = None, *, labels: bool = False,
                progress: bool | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """A CSV or Parquet input ingested as ``distsketch ingest`` would: yields ``(store, info)``
    of a temporary store (with ``y`` when ``labels`` and the table holds the label column)."""
    from distsketch.io.readers import ingest
    from distsketch.io.readers.registry import find_reader

    cols = model_columns(model, model_path, storage_options)
    width = getattr(model, "n_features_in_", None)
    kwargs: dict[str, Any] = {"dtype": (cols or {}).get("dtype", "float32")}
    if cols is not None:
        kwargs["columns"] = list(cols["feature_names"])
        if cols.get("yes_no_columns"):
            kwargs["boolean_columns"] = "yes-no"
    if labels and isinstance((cols or {}).get("label_column"), str):
        label = cols["label_column"]  # type: ignore[index]
        if label in _table_names(Path(src), find_reader(src).name):
            kwargs["label_column"] = label
    with tempfile.TemporaryDirectory(prefix="distsketch-table-") as tmp:
        store = os.path.join(tmp, "input.zarr")
        try:
            ingest(src, store, progress=progress, **kwargs)
        except InputError as exc:
            why = (f"reading {src} with the columns {model_path} was fitted on" if cols else
                   f"model {model_path} records no column names to choose {src}'s columns by")
            raise InputError(f"{exc} ({why}); to read it, {_ingest_hint(src, cols)}.") \
                from exc
        from distsketch.io import read_manifest

        info = read_manifest(store) or {}
        if cols is None and width is not None and info.get("n_features") != width:
            raise InputError(
                f"{src} has {info.get('n_features')} columns but model {model_path} was fitted "
                f"on {width}, and the model records no column names to choose them by (a model "
                "fitted on a store ingested from a table with a header records them). To read "
                f"it, {_ingest_hint(src, cols)}.")
        yield store, {"columns": info.get("feature_names"),
                      "dropped_columns": info.get("dropped_columns", []),
                      "label_column": kwargs.get("label_column"),
                      "yes_no_columns": info.get("yes_no_columns", [])}


def _table_names(src: Path, fmt: str) -> list[str]:
    """The column names of a table's header (empty when it has none)."""
    from distsketch.io.readers.base import ReadOptions
    from distsketch.io.readers.registry import find_reader

    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            return [str(n) for n in pq.read_schema(src).names]
        except Exception:  # ingest reports an unreadable file itself
            return []
    try:
        with find_reader(src, fmt).open(src, ReadOptions()) as stream:
            info = stream.header.info
            return list(info.get("feature_names") or []) + list(info.get("dropped_columns") or [])
    except DistsketchError:
        return []


def check_table_output(path: str, *, overwrite: bool, inputs: list[str]) -> Path:
    """The absolute path of a table output, checked before any work as stores are."""
    out = Path(path).expanduser().absolute()
    for other in inputs:
        if other and "://" not in str(other) and \
                Path(str(other).split("::")[0]).expanduser().absolute() == out:
            raise StoreError(f"output {out} is also an input of the command; choose another "
                             "output path.")
    if not out.parent.is_dir():
        raise StoreError(f"output {out}: the folder {out.parent} does not exist; create it or "
                         "choose another output path.")
    if os.path.lexists(out):
        if out.is_symlink() or not out.is_file():
            raise StoreError(f"output {out} exists and is not a plain file (a "
                             f"{'link' if out.is_symlink() else 'folder'}); it is never "
                             "replaced. Remove it yourself or choose another output path.")
        if not overwrite:
            raise StoreError(f"output {out} already exists; pass --overwrite to replace it.")
    return out


def _parquet() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError('writing Parquet needs pyarrow: pip install "distsketch[parquet]", '
                          "or name the output .csv.") from exc
    return pa, pq


def require_table_writer(fmt: str) -> None:
    """Refuse a Parquet output without pyarrow, before any work is done."""
    if fmt == "parquet":
        _parquet()


def column_names(P: Any) -> list[str]:
    """The header of predictions ``P``: ``prediction``, or ``prediction_<j>`` per target."""
    if P.ndim == 1:
        return ["prediction"]
    return [f"prediction_{j}" for j in range(int(np.prod(P.shape[1:])))]


def feature_names(model: Any, Z: Any) -> list[str]:
    """The header of a transform ``Z``: the model's ``get_feature_names_out()``
    (``<classname>0`` ...: the names ``set_output(transform="pandas")`` gives), else
    ``feature_<j>``."""
    width = len(column_names(Z))
    get = getattr(model, "get_feature_names_out", None)
    if callable(get):
        try:
            names = [str(n) for n in get()]
        except Exception:  # a model that cannot name its outputs gets numbered names
            names = []
        if len(names) == width:
            return names
    return [f"feature_{j}" for j in range(width)]


def write_table(P: Any, path: Path, fmt: str, *, names: list[str] | None = None,
                metadata: dict[str, str] | None = None) -> int:
    """Write ``P`` (dask or NumPy) to the table ``path`` a few blocks at a time, atomically,
    floats with the digits that read back the same; returns the rows written."""
    from distsketch.graph import compute

    width = column_names(P)
    if names is None:
        names = width
    elif len(names) != len(width):
        raise ConfigError(f"table {path}: {len(names)} column names for {len(width)} columns.")
    # a new name beside the output (same file system: the rename is atomic); created by the
    # writer with the ordinary permissions of new files
    tmp = str(path.parent / f".{path.name}.{secrets.token_hex(8)}.partial")
    rows = 0
    try:
        with _TableWriter(tmp, fmt, names, P.dtype, metadata) as writer:
            for part in _row_parts(P):
                block = np.asarray(compute(part, progress=False)[0]) if hasattr(part, "dask") \
                    else np.asarray(part)
                writer.write(block.reshape(block.shape[0], -1))
                rows += block.shape[0]
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return rows


def _row_parts(P: Any) -> Iterator[Any]:
    """Consecutive row ranges of ``P``: whole blocks, about :data:`_WRITE_ROWS` rows each."""
    if not hasattr(P, "chunks"):
        yield P
        return
    start = 0
    stop = 0
    for size in P.chunks[0]:
        stop += size
        if stop - start >= _WRITE_ROWS:
            yield P[start:stop]
            start = stop
    if stop > start or stop == 0:
        yield P[start:stop]


class _TableWriter:
    """Row blocks into one CSV or Parquet file (``write`` then close)."""

    def __init__(self, path: str, fmt: str, names: list[str], dtype: Any,
                 metadata: dict[str, str] | None):
        self.fmt = fmt
        self.names = names
        self.dtype = np.dtype(dtype)
        if fmt == "csv":
            self.file = open(path, "x", newline="", encoding="utf-8")
            self.csv = csv.writer(self.file)
            self.csv.writerow(names)
        else:
            pa, pq = _parquet()
            self.pa = pa
            fields = [pa.field(n, pa.from_numpy_dtype(self.dtype) if self.dtype.kind not in "USO"
                               else pa.string()) for n in names]
            schema = pa.schema(fields, metadata={f"distsketch.{k}": v
                                                 for k, v in (metadata or {}).items()})
            self.writer = pq.ParquetWriter(path, schema)

    def write(self, block: np.ndarray) -> None:
        if self.fmt == "csv":
            if self.dtype.kind in "fiub":
                # numbers need no quoting: one %-format of the whole block (3x np.char.mod);
                # 9 / 17 significant digits read back as the same float32 / float64
                one = "%d" if self.dtype.kind in "iub" else \
                    f"%.{9 if self.dtype.itemsize <= 4 else 17}g"
                row = ",".join([one] * block.shape[1]) + "\r\n"  # the csv module's line end
                self.file.write((row * block.shape[0]) % tuple(block.ravel().tolist()))
            else:
                self.csv.writerows(block.tolist())  # text is quoted where it needs it
            return
        pa = self.pa
        arrays = [pa.array(block[:, j].tolist() if self.dtype.kind in "USO" else block[:, j])
                  for j in range(block.shape[1])]
        self.writer.write_table(pa.Table.from_arrays(arrays, names=self.names))

    def __enter__(self) -> _TableWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fmt == "csv":
            self.file.close()
        else:
            self.writer.close()
