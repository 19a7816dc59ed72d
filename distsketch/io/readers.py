"""Streaming files into row-chunked Zarr stores without loading them whole.

Supported formats (``.gz`` works for every one of them):

========== ================================= ==========================================
format     file names                        how it is read
========== ================================= ==========================================
npy        ``*.npy``                         ``np.load(mmap_mode="r")``; ``.npy.gz``
                                             by parsing the header then row blocks
csv        ``*.csv``, ``*.tsv``, ``*.txt``   ``chunk_rows`` lines at a time
svmlight   ``*.svm``, ``*.svmlight``,        two streaming passes (size, then rows),
           ``*.libsvm``                      ``chunk_rows`` lines at a time
idx        ``*-ubyte``, ``*.idx``,           MNIST idx: header, then record blocks
           ``*.idx3``/``*.idx1``...
========== ================================= ==========================================

Layout of the output (a Zarr group, committed atomically)::

    dest.zarr/
      zarr.json                    group
      X/                           (n, d) data, row chunks of ``chunk_rows``
      y/                           (n,) labels: svmlight labels, or the idx
                                   labels file given as ``labels=``
      distsketch-manifest.json     written last: source, size, format, rows

``distsketch.open_array("dest.zarr")`` picks ``X``; ``"dest.zarr::y"`` names
the labels.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import zarr

from distsketch.errors import ConfigError, InputError, StoreError
from distsketch.io.atomic import atomic_dir
from distsketch.io.zarr_io import _codecs, create_array, write_manifest

__all__ = ["FORMATS", "infer_format", "ingest"]

FORMATS = ("npy", "csv", "svmlight", "idx")

_ALIASES = {"npy": "npy", "csv": "csv", "tsv": "csv", "txt": "csv", "text": "csv",
            "svm": "svmlight", "svmlight": "svmlight", "libsvm": "svmlight", "idx": "idx",
            "mnist": "idx"}

# idx type codes -> big-endian dtypes
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

_CHUNK_BYTES = 8 * 2**20


def infer_format(path: str | os.PathLike) -> str:
    """The ingest format of a file from its name (``.gz`` is looked through).

    Raises
    ------
    ConfigError
        If the name does not tell the format.
    """
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix in ("npy",):
        return "npy"
    if suffix in ("csv", "tsv", "txt"):
        return "csv"
    if suffix in ("svm", "svmlight", "libsvm"):
        return "svmlight"
    if name.endswith("-ubyte") or suffix.startswith("idx") or "-idx" in name:
        return "idx"
    raise ConfigError(
        f"cannot tell the format of {path} from its name; pass format= one of {list(FORMATS)} "
        "(CLI: --format)."
    )


def _default_delimiter(path: Path) -> str | None:
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".csv"):
        return ","
    if name.endswith(".tsv"):
        return "\t"
    return None


# --------------------------------------------------------------------------- files


@contextlib.contextmanager
def _open_binary(path: Path) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """Yield (decoded stream, raw file): the raw file's position measures progress."""
    try:
        raw = open(path, "rb")  # closed in the finally clause
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc}. Check the path and permissions.") from exc
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                yield gz, raw
        else:
            yield raw, raw
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise StoreError(
            f"cannot read {path}: {type(exc).__name__}: {exc}. The file is truncated or not "
            "the compression its name says; re-download or re-compress it."
        ) from exc
    finally:
        raw.close()


class _Progress:
    """Progress line on stderr, at most twice a second."""

    def __init__(self, label: str, total: int, unit: str, enabled: bool):
        self.label = label
        self.total = max(1, int(total))
        self.unit = unit
        self.enabled = enabled
        self._last = 0.0
        self._t0 = time.perf_counter()

    def update(self, done: int, rows: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.5:
            return
        self._last = now
        frac = min(1.0, done / self.total)
        sys.stderr.write(f"\r{self.label}: {100 * frac:5.1f}% of {self.unit}, {rows} rows, "
                         f"{now - self._t0:.1f} s")
        sys.stderr.flush()

    def close(self, rows: int) -> None:
        if self.enabled:
            sys.stderr.write(f"\r{self.label}: done, {rows} rows in "
                             f"{time.perf_counter() - self._t0:.1f} s{' ' * 20}\n")
            sys.stderr.flush()


class _RowWriter:
    """Append row blocks to a Zarr array in whole, row-aligned chunks.

    Rows are buffered until a full chunk is available, so every write covers
    complete chunks (the last one may be partial); nothing is written
    concurrently, so no row can be lost to unaligned writes.
    """

    def __init__(self, path: Path, n_cols: int | None, dtype: np.dtype, chunk_rows: int,
                 compressor: str | None, n_rows: int | None = None):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.chunk_rows = int(chunk_rows)
        self.n_cols = n_cols
        self.compressor = compressor
        self.n_known = n_rows
        self.rows = 0
        self.arr: zarr.Array | None = None
        self._buf: np.ndarray | None = None
        self._fill = 0

    def _create(self, n_cols: int | None) -> None:
        n0 = self.n_known if self.n_known is not None else 0
        if n_cols is None:  # 1-D labels
            self.arr = zarr.create_array(
                store=str(self.path), shape=(n0,), dtype=self.dtype,
                chunks=(self.chunk_rows,), compressors=_codecs(self.compressor),
                overwrite=True, config={"write_empty_chunks": True})
            self._buf = np.empty((self.chunk_rows,), dtype=self.dtype)
        else:
            self.arr = create_array(self.path, (n0, n_cols), self.dtype,
                                    chunk_rows=self.chunk_rows, compressor=self.compressor)
            self._buf = np.empty((self.chunk_rows, n_cols), dtype=self.dtype)

    def write(self, block: np.ndarray) -> None:
        if self.arr is None:
            self._create(None if block.ndim == 1 else block.shape[1])
        assert self._buf is not None
        pos = 0
        while pos < block.shape[0]:
            take = min(self.chunk_rows - self._fill, block.shape[0] - pos)
            self._buf[self._fill:self._fill + take] = block[pos:pos + take]
            self._fill += take
            pos += take
            if self._fill == self.chunk_rows:
                self._flush()

    def _flush(self) -> None:
        if not self._fill or self.arr is None or self._buf is None:
            return
        start, stop = self.rows, self.rows + self._fill
        if self.n_known is None:
            self.arr.resize((stop, *self.arr.shape[1:]))
        elif stop > self.n_known:
            raise StoreError(f"{self.path}: more rows ({stop}) than announced ({self.n_known}).")
        self.arr[start:stop] = self._buf[:self._fill]
        self.rows = stop
        self._fill = 0

    def close(self) -> zarr.Array | None:
        self._flush()
        return self.arr


def _verify(path: Path, expected_rows: int, source: Path, what: str) -> zarr.Array:
    """Re-open a written array and check that every row and chunk arrived."""
    arr = zarr.open_array(str(path), mode="r")
    if arr.shape[0] != expected_rows or arr.nchunks_initialized != arr.nchunks:
        raise StoreError(
            f"ingesting {source}: {what} has {arr.shape[0]} rows and {arr.nchunks_initialized} "
            f"of {arr.nchunks} chunks, expected {expected_rows} rows; nothing was committed. "
            "Retry; if it persists the output disk may be full."
        )
    return arr


def _chunk_rows_for(chunk_rows: int | None, n_cols: int, itemsize: int,
                    n_rows: int | None = None) -> int:
    if chunk_rows is not None:
        if int(chunk_rows) < 1:
            raise ConfigError(f"chunk_rows={chunk_rows} must be a positive number of rows.")
        return int(chunk_rows)
    rows = max(1, _CHUNK_BYTES // max(1, n_cols * itemsize))
    if n_rows is not None:
        rows = min(rows, max(1, n_rows))
    return int(rows)


def _check_finite(block: np.ndarray, first_row: int, source: Path, line_of: Any = None) -> None:
    if np.issubdtype(block.dtype, np.floating) and not np.all(np.isfinite(block)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(block.reshape(block.shape[0], -1)), axis=1))[0])
        where = f"row {first_row + bad}"
        if line_of is not None:
            where += f" (line {line_of(bad)})"
        raise InputError(
            f"{source}: NaN or Inf at {where}. Clean or impute the data before ingesting, or "
            "pass allow_nan=True (CLI: --allow-nan) to store it as is."
        )


def _cast(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return block if block.dtype == dtype else block.astype(dtype)


def _target_dtype(dtype: Any, source_dtype: np.dtype | None) -> np.dtype:
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


# --------------------------------------------------------------------------- npy


def _npy_header(f: IO[bytes], source: Path) -> tuple[tuple[int, ...], bool, np.dtype]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            return fmt.read_array_header_1_0(f)
        return fmt.read_array_header_2_0(f)
    except (ValueError, OSError, EOFError) as exc:
        raise StoreError(
            f"{source} is not a valid .npy file ({exc}); re-save it with numpy.save."
        ) from exc


def _check_npy_array(shape: tuple, dtype: np.dtype, source: Path) -> None:
    if dtype.hasobject:
        raise InputError(
            f"{source} holds Python objects (dtype {dtype}); save a numeric array instead."
        )
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_) or \
            np.issubdtype(dtype, np.complexfloating):
        raise InputError(
            f"{source}: dtype {dtype} is not real numeric; convert it to float32/float64 first."
        )
    if len(shape) != 2:
        raise InputError(
            f"{source}: expected a 2-D array (rows are points), got shape {tuple(shape)}. "
            "Reshape it, e.g. X.reshape(len(X), -1), and save it again."
        )
    if shape[0] == 0:
        raise InputError(f"{source}: has 0 rows; nothing to ingest.")
    if shape[1] == 0:
        raise InputError(f"{source}: has 0 columns (shape {tuple(shape)}).")


def _ingest_npy(source: Path, xw_factory: Any, opts: dict) -> dict:
    if source.stat().st_size == 0:
        raise InputError(f"{source} is empty; nothing to ingest.")
    if not source.name.lower().endswith(".gz"):
        with open(source, "rb") as f:
            magic = f.read(6)
        if magic != b"\x93NUMPY":
            kind = " (it is a zip/.npz archive)" if magic[:2] == b"PK" else ""
            raise StoreError(f"{source} is not a valid .npy file{kind}: it does not start with the "
                             ".npy magic string. Save one array with numpy.save.")
        try:
            arr = np.load(source, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            if "allow_pickle" in str(exc) or "object" in str(exc):
                raise InputError(f"{source} holds Python objects; save a numeric array.") from exc
            raise StoreError(f"{source} is not a valid .npy file ({exc}); re-save it "
                             "with numpy.save.") from exc
        except (OSError, EOFError) as exc:
            raise StoreError(f"cannot read {source} as .npy: {exc}.") from exc
        if not isinstance(arr, np.ndarray):
            raise InputError(f"{source} is not a single .npy array (an .npz archive?); "
                             "save one array with numpy.save.")
        _check_npy_array(arr.shape, arr.dtype, source)
        n, d = arr.shape
        dtype = _target_dtype(opts["dtype"], arr.dtype)
        rows = _chunk_rows_for(opts["chunk_rows"], d, dtype.itemsize, n)
        xw = xw_factory(d, dtype, rows, n)
        prog = _Progress(f"ingest {source.name}", n, "rows", opts["progress"])
        for a in range(0, n, rows):
            # copy one block out of the memory map; the page cache holds the rest
            block = _cast(np.asarray(arr[a:a + rows]), dtype)
            if not opts["allow_nan"]:
                _check_finite(block, a, source)
            xw.write(block)
            prog.update(a + block.shape[0], a + block.shape[0])
        prog.close(n)
        return {"rows": n, "n_features": d, "source_dtype": str(arr.dtype)}
    with _open_binary(source) as (f, raw):
        shape, fortran, sdtype = _npy_header(f, source)
        _check_npy_array(shape, sdtype, source)
        n, d = shape
        if fortran and d > 1:
            raise InputError(
                f"{source} is stored in Fortran (column) order, which cannot be streamed by "
                "rows from a .gz file; decompress it (gunzip) or re-save it in C order."
            )
        dtype = _target_dtype(opts["dtype"], sdtype)
        rows = _chunk_rows_for(opts["chunk_rows"], d, dtype.itemsize, n)
        xw = xw_factory(d, dtype, rows, n)
        size = source.stat().st_size
        prog = _Progress(f"ingest {source.name}", size, "file", opts["progress"])
        row_bytes = d * sdtype.itemsize
        for a in range(0, n, rows):
            k = min(rows, n - a)
            buf = f.read(k * row_bytes)
            if len(buf) != k * row_bytes:
                got = a + len(buf) // row_bytes
                raise StoreError(
                    f"{source} is truncated: the header announces {n} rows but the data ends "
                    f"at row {got}. Re-create or re-download the file."
                )
            block = _cast(np.frombuffer(buf, dtype=sdtype).reshape(k, d), dtype)
            if not opts["allow_nan"]:
                _check_finite(block, a, source)
            xw.write(block)
            prog.update(raw.tell(), a + k)
        prog.close(n)
    return {"rows": n, "n_features": d, "source_dtype": str(sdtype)}


# --------------------------------------------------------------------------- idx


def _idx_header(f: IO[bytes], source: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    head = f.read(4)
    if len(head) == 0:
        raise InputError(f"{source} is empty; nothing to ingest.")
    if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_TYPES or head[3] < 1:
        raise StoreError(
            f"{source} is not an idx file: bad magic number {head.hex()} (expected 0000 then a "
            "type code 08/09/0b/0c/0d/0e and the number of dimensions). Check that it is an "
            "MNIST-style *-ubyte file, or pass the right format."
        )
    ndim = head[3]
    raw_dims = f.read(4 * ndim)
    if len(raw_dims) != 4 * ndim:
        raise StoreError(f"{source}: idx header is truncated (dimension sizes missing).")
    dims = tuple(int(x) for x in np.frombuffer(raw_dims, dtype=">u4"))
    return dims, np.dtype(_IDX_TYPES[head[2]]), 4 + 4 * ndim


def _read_idx_blocks(source: Path, rows_hint: int | None, opts: dict, dtype_req: Any,
                     xw_factory: Any, label: str, one_d: bool) -> dict:
    with _open_binary(source) as (f, raw):
        dims, sdtype, header_bytes = _idx_header(f, source)
        n = dims[0]
        d = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        if n == 0:
            raise InputError(f"{source}: has 0 records; nothing to ingest.")
        expected = header_bytes + n * d * sdtype.itemsize
        if not source.name.lower().endswith(".gz") and source.stat().st_size != expected:
            raise StoreError(
                f"{source}: the idx header announces {n} records of {dims[1:] or '1 value'} "
                f"({expected} bytes with the header) but the file has {source.stat().st_size} "
                "bytes; the file is truncated or corrupt. Re-download it."
            )
        dtype = _target_dtype(dtype_req, sdtype)
        rows = rows_hint or _chunk_rows_for(opts["chunk_rows"], d, dtype.itemsize, n)
        w = xw_factory(None if one_d else d, dtype, rows, n)
        prog = _Progress(f"ingest {source.name}", source.stat().st_size, "file",
                         opts["progress"])
        rec = d * sdtype.itemsize
        for a in range(0, n, rows):
            k = min(rows, n - a)
            buf = f.read(k * rec)
            if len(buf) != k * rec:
                raise StoreError(
                    f"{source} is truncated: the header announces {n} records but the data "
                    f"ends at record {a + len(buf) // rec}. Re-download the file."
                )
            block = np.frombuffer(buf, dtype=sdtype)
            block = block.reshape(k) if one_d else block.reshape(k, d)
            block = _cast(block, dtype)
            if not opts["allow_nan"]:
                _check_finite(block.reshape(k, -1), a, source)
            w.write(block)
            prog.update(raw.tell(), a + k)
        if f.read(1):
            raise StoreError(
                f"{source} has data after the {n} records its idx header announces; the file "
                "is corrupt or not an idx file."
            )
        prog.close(n)
    return {"rows": n, "n_features": d, "source_dtype": str(sdtype.newbyteorder("=")),
            "source_shape": list(dims), "chunk_rows": rows}


# --------------------------------------------------------------------------- csv


def _split_tokens(line: str, delimiter: str | None) -> list[str]:
    body = line.split("#", 1)[0].strip()
    if not body:
        return []
    parts = body.split(delimiter) if delimiter is not None else body.split()
    return [p.strip().strip('"') for p in parts]


def _looks_numeric(tokens: list[str]) -> bool:
    try:
        for t in tokens:
            float(t)
    except ValueError:
        return False
    return True


def _diagnose_csv(lines: list[str], first_line: int, delimiter: str | None, n_cols: int | None,
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
                return InputError(
                    f"{source}, line {lineno}, column {j + 1}: {t!r} is not a number. Fix the "
                    "value, pass skip_header= if it is a header line (CLI: --skip-header), or "
                    "check the delimiter."
                )
        if n_cols is None:
            n_cols = len(tokens)
    return InputError(f"{source}: cannot parse lines {first_line}..{first_line + len(lines) - 1} "
                      "as numbers; check the delimiter and the file's encoding.")


def _ingest_csv(source: Path, xw_factory: Any, opts: dict) -> dict:
    delimiter = opts["delimiter"] if opts["delimiter"] is not None else _default_delimiter(source)
    size = source.stat().st_size
    if size == 0:
        raise InputError(f"{source} is empty; nothing to ingest.")
    with _open_binary(source) as (fb, raw):
        f = io.TextIOWrapper(fb, encoding="utf-8", errors="strict", newline=None)
        lineno = 0
        skip = opts["skip_header"]
        header: list[str] = []
        first: str | None = None
        # the first data line decides the header (when auto) and the width
        while True:
            try:
                line = f.readline()
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
        dtype = _target_dtype(opts["dtype"], None)
        rows = _chunk_rows_for(opts["chunk_rows"], n_cols, dtype.itemsize)
        xw = xw_factory(n_cols, dtype, rows, None)
        prog = _Progress(f"ingest {source.name}", size, "file", opts["progress"])
        n = 0
        pending = [first]
        block_first_line = lineno
        while True:
            try:
                while len(pending) < rows:
                    line = f.readline()
                    if not line:
                        break
                    pending.append(line)
            except UnicodeDecodeError as exc:
                raise InputError(f"{source}: not UTF-8 text after line {block_first_line} "
                                 f"({exc}); is it a binary file?") from exc
            if not pending:
                break
            try:
                with np.errstate(all="ignore"):
                    block = np.loadtxt(pending, dtype=np.float64, delimiter=delimiter,
                                       comments="#", ndmin=2, quotechar='"')
            except ValueError:
                raise _diagnose_csv(pending, block_first_line, delimiter, n_cols,
                                    source) from None
            if block.size and block.shape[1] != n_cols:
                raise _diagnose_csv(pending, block_first_line, delimiter, n_cols, source)
            if block.shape[0]:
                block = _cast(block, dtype)
                if not opts["allow_nan"]:
                    data_lines = [block_first_line + i for i, ln in enumerate(pending)
                                  if _split_tokens(ln, delimiter)] \
                        if not np.all(np.isfinite(block)) else []
                    _check_finite(block, n, source,
                                  (lambda r, dl=data_lines: dl[r]) if data_lines else None)
                xw.write(block)
                n += block.shape[0]
            block_first_line += len(pending)
            done = len(pending) < rows
            pending = []
            prog.update(raw.tell(), n)
            if done:
                break
        prog.close(n)
    return {"rows": n, "n_features": n_cols, "delimiter": delimiter, "header": header}


# --------------------------------------------------------------------------- svmlight


def _svm_lines(f: IO[bytes], rows: int) -> Iterator[tuple[int, list[bytes]]]:
    """Blocks of up to ``rows`` data lines, with the file line number of the first."""
    lineno = 0
    block: list[bytes] = []
    first = 1
    for line in f:
        lineno += 1
        if not line.split(b"#", 1)[0].strip():
            continue
        if not block:
            first = lineno
        block.append(line)
        if len(block) == rows:
            yield first, block
            block = []
    if block:
        yield first, block


def _parse_svm_python(lines: list[bytes], first: int, source: Path
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
        for t in tokens[1:]:
            if t.startswith("qid:"):
                continue
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


def _parse_svm_block(lines: list[bytes], first: int, source: Path
                     ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    from sklearn.datasets import load_svmlight_file

    try:
        Xs, y = load_svmlight_file(io.BytesIO(b"".join(lines)), zero_based=True,
                                   dtype=np.float64)
    except (ValueError, TypeError):
        return _parse_svm_python(lines, first, source)  # raises with the line
    Xs = Xs.tocsr()
    Xs.sort_indices()
    if Xs.shape[0] != len(lines):
        return _parse_svm_python(lines, first, source)
    cols = [Xs.indices[Xs.indptr[i]:Xs.indptr[i + 1]].astype(np.int64) for i in range(Xs.shape[0])]
    vals = [Xs.data[Xs.indptr[i]:Xs.indptr[i + 1]] for i in range(Xs.shape[0])]
    return np.asarray(y, dtype=np.float64), cols, vals


def _ingest_svmlight(source: Path, xw_factory: Any, yw_factory: Any, opts: dict) -> dict:
    if source.stat().st_size == 0:
        raise InputError(f"{source} is empty; nothing to ingest.")
    scan_rows = 4096
    # pass 1: rows, index range, syntax (a streaming scan; memory O(scan_rows))
    n = 0
    lo, hi = None, -1
    with _open_binary(source) as (f, _raw):
        for first, lines in _svm_lines(f, scan_rows):
            _, cols, _ = _parse_svm_block(lines, first, source)
            n += len(cols)
            for c in cols:
                if c.size:
                    lo = int(c[0]) if lo is None else min(lo, int(c[0]))
                    hi = max(hi, int(c[-1]))
    if n == 0:
        raise InputError(f"{source}: no data rows; nothing to ingest.")
    zero_based = opts["zero_based"]
    if zero_based == "auto":
        zero_based = lo == 0
    base = 0 if zero_based else 1
    if not zero_based and lo == 0:
        raise InputError(f"{source}: feature index 0 found but zero_based=False; pass "
                         "zero_based=True or 'auto'.")
    d_file = hi + 1 - base if hi >= 0 else 0
    d = opts["n_features"] if opts["n_features"] is not None else d_file
    if d < 1:
        raise InputError(f"{source}: no feature has a value; pass n_features= to set the width.")
    if d < d_file:
        raise InputError(
            f"{source}: feature index {hi} needs at least {d_file} features but "
            f"n_features={d}; raise n_features or omit it."
        )
    dtype = _target_dtype(opts["dtype"], None)
    rows = _chunk_rows_for(opts["chunk_rows"], d, dtype.itemsize, n)
    xw = xw_factory(d, dtype, rows, n)
    yw = yw_factory(None, np.dtype(np.float64), rows, n)
    prog = _Progress(f"ingest {source.name}", source.stat().st_size, "file", opts["progress"])
    done = 0
    with _open_binary(source) as (f, raw):
        for first, lines in _svm_lines(f, rows):
            y, cols, vals = _parse_svm_block(lines, first, source)
            block = np.zeros((len(cols), d), dtype=np.float64)
            for i, (c, v) in enumerate(zip(cols, vals)):
                block[i, c - base] = v
            block = _cast(block, dtype)
            if not opts["allow_nan"]:
                _check_finite(block, done, source)
            xw.write(block)
            yw.write(y)
            done += len(cols)
            prog.update(raw.tell(), done)
    prog.close(done)
    if done != n:
        raise StoreError(f"{source} changed while being ingested ({n} rows, then {done}); "
                         "retry when it is no longer being written.")
    return {"rows": n, "n_features": d, "zero_based": bool(zero_based), "labels": True}


# --------------------------------------------------------------------------- entry point


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
    labels: str | os.PathLike | None = None,
    zero_based: bool | str = "auto",
    allow_nan: bool = False,
    compressor: str | None = "lz4",
    overwrite: bool = False,
    progress: bool | None = None,
) -> Path:
    """Stream a file into a row-chunked Zarr store, never holding the whole file.

    Parameters
    ----------
    source : path-like
        ``.npy``, ``.csv``/``.tsv``/``.txt``, ``.svm``/``.svmlight``/``.libsvm``
        or an MNIST idx file (``*-ubyte``), each optionally ``.gz``.
    dest : path-like
        Output directory: a Zarr group with ``X`` (n, d) and, for labelled
        inputs, ``y`` (n,).  Committed atomically; nothing is left on failure.
    format : {"npy", "csv", "svmlight", "idx"}, optional
        Default: inferred from the file name.
    chunk_rows : int, optional
        Rows per Zarr chunk (default: about 8 MiB per chunk).
    dtype : dtype, default "float32"
        Stored dtype of ``X``; None keeps the source dtype (npy, idx).
    n_features : int, optional
        svmlight only: width of ``X`` (default: the largest index in the file).
    delimiter : str, optional
        CSV field separator (default: "," for .csv, tab for .tsv, otherwise
        whitespace, or "," if the first data line has commas).
    skip_header : int, optional
        CSV lines to skip at the top.  Default: one header line is skipped if
        the first non-blank line is not numeric.
    labels : path-like, optional
        A 1-D idx (e.g. ``train-labels-idx1-ubyte.gz``) or ``.npy`` file of
        labels stored as ``y``; it must have as many records as ``source``.
    zero_based : bool or "auto", default "auto"
        svmlight feature indices start at 0 (True) or 1 (False); "auto" picks
        0 if any index is 0.
    allow_nan : bool, default False
        Store NaN/Inf as they are instead of raising.
    compressor : {"lz4", "zstd", None}, default "lz4"
        Codec of the chunks.
    overwrite : bool, default False
        Replace an existing ``dest``.
    progress : bool, optional
        Progress line on stderr (default: when stderr is a terminal).

    Returns
    -------
    pathlib.Path
        The committed store (``open_array(path)`` gives ``X``).

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
    fmt = _ALIASES.get(str(format).lower()) if format is not None else infer_format(src)
    if fmt is None:
        raise ConfigError(f"unknown format {format!r}; use one of {list(FORMATS)}.")
    if zero_based not in (True, False, "auto"):
        raise ConfigError(f"zero_based={zero_based!r}; use True, False or 'auto'.")
    if n_features is not None and (not isinstance(n_features, int) or n_features < 1):
        raise ConfigError(f"n_features={n_features!r} must be a positive int.")
    if skip_header is not None and (not isinstance(skip_header, int) or skip_header < 0):
        raise ConfigError(f"skip_header={skip_header!r} must be a non-negative int.")
    _codecs(compressor)  # fail early on an unknown codec
    _target_dtype(dtype, None)
    from distsketch.graph.runtime import progress_enabled

    opts = {"chunk_rows": chunk_rows, "dtype": dtype, "n_features": n_features,
            "delimiter": delimiter, "skip_header": skip_header, "zero_based": zero_based,
            "allow_nan": allow_nan, "progress": progress_enabled(progress)}
    with atomic_dir(dest, overwrite=overwrite) as tmp:
        zarr.open_group(store=str(tmp), mode="w")
        writers: dict[str, _RowWriter] = {}

        def factory(name: str) -> Any:
            def make(n_cols: int | None, dt: np.dtype, rows: int, n: int | None) -> _RowWriter:
                w = _RowWriter(tmp / name, n_cols, dt, rows, compressor, n)
                writers[name] = w
                return w
            return make

        if fmt == "npy":
            info = _ingest_npy(src, factory("X"), opts)
        elif fmt == "csv":
            info = _ingest_csv(src, factory("X"), opts)
        elif fmt == "svmlight":
            info = _ingest_svmlight(src, factory("X"), factory("y"), opts)
        else:
            info = _read_idx_blocks(src, None, opts, dtype, factory("X"), "X", one_d=False)
        n = int(info["rows"])
        cr = writers["X"].chunk_rows
        if labels is not None:
            if "y" in writers:
                raise ConfigError(f"{src} has labels of its own; do not pass labels=.")
            info["labels_source"] = str(_ingest_labels(Path(labels).expanduser().absolute(),
                                                       n, cr, opts, factory("y")))
        for w in writers.values():
            w.close()
        for name in writers:
            _verify(tmp / name, n, src, name)
        st = src.stat()
        manifest = {"kind": "ingest", "source": str(src), "source_bytes": st.st_size,
                    "source_mtime": st.st_mtime, "format": fmt, "arrays": sorted(writers),
                    "dtype": str(np.dtype(writers["X"].dtype)), "chunk_rows": cr,
                    "compressor": compressor, "seconds": round(time.perf_counter() - t0, 3)}
        manifest.update({k: v for k, v in info.items() if k != "chunk_rows"})
        root = zarr.open_group(store=str(tmp), mode="r+")
        root.attrs["ingest"] = {k: manifest[k] for k in ("source", "format", "rows", "n_features")}
        write_manifest(tmp, manifest)
    return Path(dest).expanduser().absolute()


def _ingest_labels(path: Path, n: int, chunk_rows: int, opts: dict, factory: Any) -> Path:
    if not path.exists():
        raise StoreError(f"no labels file at {path}; check the path.")
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".npy"):
        if path.name.lower().endswith(".gz"):
            raise InputError(f"{path}: labels from .npy.gz are not supported; decompress it.")
        y = np.load(path, mmap_mode="r", allow_pickle=False)
        if y.ndim != 1 or y.shape[0] != n:
            raise InputError(f"labels {path} have shape {y.shape}; expected ({n},) to match "
                             "the rows of the data.")
        w = factory(None, _target_dtype(None, y.dtype), chunk_rows, n)
        for a in range(0, n, chunk_rows):
            w.write(np.asarray(y[a:a + chunk_rows]))
        w.close()
        return path
    if infer_format(path) != "idx":
        raise ConfigError(f"labels {path}: use a 1-D idx (*-ubyte) or .npy file.")
    with _open_binary(path) as (f, _raw):
        dims, _, _ = _idx_header(f, path)
    if len(dims) != 1 or dims[0] != n:
        raise InputError(f"labels {path} have idx shape {dims}; expected ({n},) to match the "
                         f"{n} rows of the data. Pair images and labels of the same split.")
    info = _read_idx_blocks(path, chunk_rows, opts, None, factory, "y", one_d=True)
    assert info["rows"] == n
    return path
