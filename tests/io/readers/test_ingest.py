"""Ingest of every file format into row-chunked Zarr, and row-exact writes.

Exact level: every ingested store equals the NumPy array the file was made
from, bit for bit (float32 values are written to text with 9 significant
digits, which round-trips float32 exactly).  Streaming: peak Python-heap
memory during ingest of a large file stays far below the file size.
"""

from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from sklearn.datasets import dump_svmlight_file

from distsketch.errors import ConfigError, InputError, StoreError
from distsketch.io import open_array, read_manifest
from distsketch.io.readers import infer_format, ingest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

N, D = 1003, 7


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    return np.random.default_rng(42).normal(size=(N, D)).astype(np.float32)


def _gzip(path: Path) -> Path:
    gz = path.with_name(path.name + ".gz")
    with open(path, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    return gz


def _write_idx(path: Path, a: np.ndarray, code: int) -> Path:
    body = bytes([0, 0, code, a.ndim]) + struct.pack(">" + "I" * a.ndim, *a.shape) + \
        a.astype(a.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(body)
    return path


def _read(path: Path, name: str = "X") -> np.ndarray:
    return np.asarray(zarr.open_group(str(path), mode="r")[name][...])


def _no_leftovers(dest: Path) -> None:
    assert not dest.exists()
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}.")]


# ------------------------------------------------------------------ formats


def _make_source(kind: str, tmp: Path, X: np.ndarray) -> tuple[Path, np.ndarray, np.ndarray | None]:
    """(file, expected X, expected y) for one format variant."""
    if kind.startswith("npy"):
        p = tmp / "a.npy"
        np.save(p, X)
        return (_gzip(p) if kind.endswith("gz") else p), X, None
    if kind.startswith("csv"):
        p = tmp / "a.csv"
        np.savetxt(p, X, delimiter=",", fmt="%.9g", header=",".join(f"c{j}" for j in range(D)),
                   comments="")
        return (_gzip(p) if kind.endswith("gz") else p), X, None
    if kind == "tsv":
        p = tmp / "a.tsv"
        np.savetxt(p, X, delimiter="\t", fmt="%.9g")
        return p, X, None
    if kind == "txt":
        p = tmp / "a.txt"
        with open(p, "w") as f:  # whitespace separated, with comments and blank lines
            f.write("# generated\n\n")
            np.savetxt(f, X, fmt="%.9g")
        return p, X, None
    if kind.startswith("svm"):
        Xs = X.copy()
        Xs[Xs < 0.3] = 0.0  # sparse rows, some empty
        Xs[5] = 0.0
        y = (np.arange(N) % 3).astype(np.float64)
        p = tmp / "a.svm"
        dump_svmlight_file(Xs, y, str(p), zero_based=kind != "svm1")
        return (_gzip(p) if kind.endswith("gz") else p), Xs, y
    if kind.startswith("idx"):
        imgs = np.random.default_rng(1).integers(0, 256, size=(N, 4, 3), dtype=np.uint8)
        labels = (np.arange(N) % 10).astype(np.uint8)
        gz = ".gz" if kind.endswith("gz") else ""
        p = _write_idx(tmp / f"t-images-idx3-ubyte{gz}", imgs, 0x08)
        _write_idx(tmp / f"t-labels-idx1-ubyte{gz}", labels, 0x08)
        return p, imgs.reshape(N, -1).astype(np.float32), labels.astype(np.float32)
    raise AssertionError(kind)


KINDS = ["npy", "npy.gz", "csv", "csv.gz", "tsv", "txt", "svm0", "svm1", "svm.gz", "idx",
         "idx.gz"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunk_rows", [64, 5000])
def test_ingest_every_format_exact(tmp_path, X, kind, chunk_rows):
    src, expected, y = _make_source(kind, tmp_path, X)
    labels = None
    if kind.startswith("idx"):
        labels = src.with_name(src.name.replace("images-idx3", "labels-idx1"))
    dest = ingest(src, tmp_path / "out.zarr", chunk_rows=chunk_rows, labels=labels)
    got = _read(dest)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    arr = zarr.open_group(str(dest))["X"]
    assert arr.chunks[0] == chunk_rows and arr.nchunks_initialized == arr.nchunks
    if y is not None:
        np.testing.assert_array_equal(_read(dest, "y"), y)
    info = read_manifest(dest)
    assert info["rows"] == N and info["n_features"] == expected.shape[1]
    assert info["source"] == str(src) and info["source_bytes"] == src.stat().st_size
    assert info["format"] == infer_format(src)
    # the store reads back through open_array with any block size
    for block_rows in (17, 333):
        np.testing.assert_array_equal(open_array(str(dest), block_rows=block_rows).compute(),
                                      expected)


def test_ingest_keeps_source_dtype_when_asked(tmp_path):
    A = np.arange(60, dtype=np.int16).reshape(12, 5)
    np.save(tmp_path / "i.npy", A)
    dest = ingest(tmp_path / "i.npy", tmp_path / "i.zarr", dtype=None)
    got = _read(dest)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, A)


def test_ingest_svmlight_n_features_widens(tmp_path):
    (tmp_path / "s.svm").write_text("1 1:2.5 3:1\n-1 2:4\n")
    dest = ingest(tmp_path / "s.svm", tmp_path / "s.zarr", n_features=6, zero_based=False)
    np.testing.assert_array_equal(_read(dest), [[2.5, 0, 1, 0, 0, 0], [0, 4, 0, 0, 0, 0]])
    np.testing.assert_array_equal(_read(dest, "y"), [1, -1])


def test_ingest_overwrite_and_existing(tmp_path, X):
    np.save(tmp_path / "a.npy", X[:10])
    dest = ingest(tmp_path / "a.npy", tmp_path / "a.zarr")
    with pytest.raises(StoreError, match="already exists"):
        ingest(tmp_path / "a.npy", dest)
    np.save(tmp_path / "a.npy", X[:20])
    ingest(tmp_path / "a.npy", dest, overwrite=True)
    assert _read(dest).shape == (20, D)


# ------------------------------------------------------------------ bad files

BAD = [
    # (file name, content, error class, fragments the message must contain)
    ("ragged.csv", "1,2,3\n4,5,6\n7,8\n", InputError, ["ragged.csv", "line 3", "2 fields"]),
    ("tok.csv", "1,2\n3,abc\n", InputError, ["tok.csv", "line 2", "column 2", "'abc'"]),
    ("empty.csv", "", InputError, ["empty.csv", "empty"]),
    ("header.csv", "a,b\n", InputError, ["header.csv", "no data rows"]),
    ("nan.csv", "1,2\n\n2,nan\n", InputError, ["nan.csv", "row 1", "line 3", "NaN"]),
    ("inf.tsv", "1\t2\n2\tinf\n", InputError, ["inf.tsv", "row 1", "NaN or Inf"]),
    ("bad.svm", "1 1:2\n2 x:3\n", InputError, ["bad.svm", "line 2", "'x:3'"]),
    ("lab.svm", "1 1:2\nfoo 1:3\n", InputError, ["lab.svm", "line 2", "label"]),
    ("order.svm", "1 3:2 1:1\n", InputError, ["order.svm", "line 1", "increasing"]),
    ("empty.svm", "", InputError, ["empty.svm", "empty"]),
    ("bad-ubyte", b"\x01\x02\x03\x04rest", StoreError, ["bad-ubyte", "magic"]),
    ("empty-ubyte", b"", InputError, ["empty-ubyte", "empty"]),
    ("short-idx3-ubyte", bytes([0, 0, 8, 2]) + struct.pack(">II", 10, 4) + bytes(12),
     StoreError, ["short-idx3-ubyte", "truncated"]),
    ("junk.npy", b"not an npy file at all", StoreError, ["junk.npy", ".npy"]),
    ("empty.npy", b"", InputError, ["empty.npy", "empty"]),
    ("notgz.csv.gz", b"plain text, not gzip\n", StoreError, ["notgz.csv.gz"]),
]


@pytest.mark.parametrize(("name", "content", "cls", "fragments"), BAD,
                         ids=[b[0] for b in BAD])
def test_bad_files_raise_and_leave_nothing(tmp_path, name, content, cls, fragments):
    src = tmp_path / name
    if isinstance(content, bytes):
        src.write_bytes(content)
    else:
        src.write_text(content)
    dest = tmp_path / "out.zarr"
    with pytest.raises(cls) as info:
        ingest(src, dest, chunk_rows=1)
    for frag in fragments:
        assert frag in str(info.value), (frag, str(info.value))
    _no_leftovers(dest)


@pytest.mark.parametrize(("array", "fragment"), [
    (np.zeros((3, 4, 5), np.float32), "2-D"),
    (np.zeros((0, 4), np.float32), "0 rows"),
    (np.array([["a", "b"]]), "not real numeric"),
    (np.array([[1 + 2j]]), "not real numeric"),
])
def test_bad_npy_arrays(tmp_path, array, fragment):
    np.save(tmp_path / "b.npy", array)
    with pytest.raises(InputError, match=fragment):
        ingest(tmp_path / "b.npy", tmp_path / "b.zarr")
    _no_leftovers(tmp_path / "b.zarr")


def test_truncated_npy_gz_names_the_row(tmp_path):
    A = np.ones((100, 8), np.float32)
    np.save(tmp_path / "t.npy", A)
    raw = (tmp_path / "t.npy").read_bytes()
    with gzip.open(tmp_path / "t.npy.gz", "wb") as g:
        g.write(raw[: len(raw) - 8 * 4 * 30])  # drop the last 30 rows
    with pytest.raises(StoreError, match=r"truncated.*row 70"):
        ingest(tmp_path / "t.npy.gz", tmp_path / "t.zarr", chunk_rows=10)
    _no_leftovers(tmp_path / "t.zarr")


def test_labels_must_match_rows(tmp_path):
    _write_idx(tmp_path / "x-idx3-ubyte", np.zeros((10, 2, 2), np.uint8), 0x08)
    _write_idx(tmp_path / "y-idx1-ubyte", np.zeros(9, np.uint8), 0x08)
    with pytest.raises(InputError, match=r"expected \(10,\)"):
        ingest(tmp_path / "x-idx3-ubyte", tmp_path / "m.zarr", labels=tmp_path / "y-idx1-ubyte")
    _no_leftovers(tmp_path / "m.zarr")


def test_options_are_checked(tmp_path):
    (tmp_path / "a.dat").write_text("1\n")
    with pytest.raises(ConfigError, match="format"):
        ingest(tmp_path / "a.dat", tmp_path / "o.zarr")
    with pytest.raises(ConfigError, match="chunk_rows"):
        ingest(tmp_path / "a.dat", tmp_path / "o.zarr", format="csv", chunk_rows=0)
    with pytest.raises(StoreError, match="no file"):
        ingest(tmp_path / "missing.csv", tmp_path / "o.zarr")
    _no_leftovers(tmp_path / "o.zarr")


def test_allow_nan_stores_values(tmp_path):
    (tmp_path / "n.csv").write_text("1,nan\n2,3\n")
    dest = ingest(tmp_path / "n.csv", tmp_path / "n.zarr", allow_nan=True)
    got = _read(dest)
    assert np.isnan(got[0, 1]) and got[1, 1] == 3


# ------------------------------------------------------------------ streaming memory


def _traced_peak(src, warm, tmp_path, chunk_rows: int) -> int:
    """Peak traced memory of ``ingest(src)``, in a fresh process after an untraced ingest
    of ``warm`` (a few rows of the same format).

    tracemalloc traces every thread of a process: threads earlier tests leave running
    (a cluster closing, a thread pool) would count, and so would the lazy imports and
    one-time set-up of a process's first ingest (16 MB when these tests run alone);
    neither is what the peak measures.
    """
    code = ("import sys, tracemalloc\n"
            "from distsketch.io import ingest\n"
            "src, warm, out, rows = sys.argv[1:5]\n"
            "ingest(warm, out + '/warm.zarr', chunk_rows=int(rows))\n"
            "tracemalloc.start()\n"
            "ingest(src, out + '/big.zarr', chunk_rows=int(rows))\n"
            "print('peak', tracemalloc.get_traced_memory()[1])\n")
    proc = subprocess.run([sys.executable, "-c", code, str(src), str(warm), str(tmp_path),
                           str(chunk_rows)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split("peak")[-1].split()[0])


def test_large_csv_is_streamed(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "big.csv"
    with open(src, "w") as f:
        for _ in range(12):  # 60k rows x 16 columns, written in pieces
            np.savetxt(f, rng.normal(size=(5000, 16)).astype(np.float32), delimiter=",",
                       fmt="%.9g")
    size = src.stat().st_size
    assert size > 8 * 2**20
    small = tmp_path / "small.csv"
    np.savetxt(small, rng.normal(size=(10, 16)).astype(np.float32), delimiter=",", fmt="%.9g")
    peak = _traced_peak(src, small, tmp_path, 1000)
    # one 1000-row block of lines and its parse (about 0.4 MB): far below the whole file
    assert peak < size / 6, (peak, size)
    assert read_manifest(tmp_path / "big.zarr")["rows"] == 60_000


def test_large_npy_is_streamed(tmp_path):
    src = tmp_path / "big.npy"
    mm = np.lib.format.open_memmap(src, mode="w+", dtype=np.float64, shape=(200_000, 40))
    for a in range(0, 200_000, 50_000):
        mm[a:a + 50_000] = np.random.default_rng(a).normal(size=(50_000, 40))
    mm.flush()
    del mm
    size = src.stat().st_size
    small = tmp_path / "small.npy"
    np.save(small, np.zeros((10, 40)))
    peak = _traced_peak(src, small, tmp_path, 5000)
    assert peak < size / 10, (peak, size)
    ref = np.load(src, mmap_mode="r")
    got = zarr.open_group(str(tmp_path / "big.zarr"))["X"]
    np.testing.assert_array_equal(got[-7:], ref[-7:].astype(np.float32))
    np.testing.assert_array_equal(got[123_456], ref[123_456].astype(np.float32))
