"""Property-based fuzzing of every reader: valid rows, or a DistsketchError — nothing else.

Each example ingests into a fresh folder and asserts one of two outcomes:

* the store holds exactly the rows a reference parser reads from the same
  bytes (the generating matrix for CSV dialects, scikit-learn's
  ``load_svmlight_file`` for svmlight lines, ``numpy.load`` / the idx layout
  for binary files), or
* a :class:`~distsketch.errors.DistsketchError` was raised and the folder
  holds nothing but the source file (no partial store, no temporary sibling).

Any other exception fails the test.
"""

from __future__ import annotations

import csv
import gzip
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from distsketch.errors import DistsketchError
from distsketch.io import ingest, open_array

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SUFFIX = {"csv": "data.csv", "svmlight": "data.svm", "npy": "data.npy", "idx": "data-idx2-ubyte"}


def _run(name: str, content: bytes, **kwargs) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Ingest ``content`` as file ``name``; (X, y) or (None, None) after a clean refusal."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        src = folder / name
        src.write_bytes(content)
        out = folder / "out.zarr"
        try:
            path = ingest(src, out, progress=False, **kwargs)
        except DistsketchError:
            assert sorted(p.name for p in folder.iterdir()) == [name], "partial output left"
            return None, None
        X = np.asarray(open_array(path)[:])
        group = zarr.open_group(str(path), mode="r")
        y = np.asarray(group["y"][:]) if "y" in group else None
        assert X.ndim == 2 and X.shape[0] >= 1 and X.shape[1] >= 1
        if not kwargs.get("allow_nan"):
            assert np.all(np.isfinite(X))
        return X, y


# ------------------------------------------------------------- random bytes


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
@FUZZ
@given(content=st.binary(min_size=0, max_size=200))
def test_random_bytes_give_rows_or_a_distsketch_error(fmt, content):
    _run(SUFFIX[fmt], content, format=fmt, dtype="float64")


@FUZZ
@given(content=st.binary(max_size=120),
       prefix=st.sampled_from([b"\x93NUMPY\x01\x00", b"\x00\x00\x08\x02", b"\x00\x00\x0d\x01",
                               b"\x1f\x8b\x08\x00"]))
def test_random_bytes_behind_a_valid_magic_number(prefix, content):
    for fmt in ("npy", "idx"):
        _run(SUFFIX[fmt], prefix + content, format=fmt, dtype="float64")


# --------------------------------------------------------------- CSV dialects

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def csv_files(draw):
    n_cols = draw(st.integers(1, 5))
    rows = draw(st.lists(st.lists(finite, min_size=n_cols, max_size=n_cols),
                         min_size=1, max_size=8))
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    header = draw(st.booleans())
    bom = draw(st.booleans())
    blanks = draw(st.lists(st.integers(0, len(rows)), max_size=3))
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, quoting=quoting, lineterminator=newline)
    if header:
        writer.writerow([f"col{j}" for j in range(n_cols)])
    lines = []
    for r in rows:
        one = io.StringIO()
        csv.writer(one, delimiter=delimiter, quoting=quoting, lineterminator=newline).writerow(r)
        lines.append(one.getvalue())
    for at in sorted(blanks, reverse=True):
        lines.insert(at, newline)
    text = buf.getvalue() + "".join(lines)
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode(), delimiter, np.asarray(rows)


@FUZZ
@given(case=csv_files(), chunk_rows=st.integers(2, 6))
def test_csv_dialects_read_exactly_the_written_rows(case, chunk_rows):
    content, delimiter, expected = case
    X, _ = _run("data.csv", content, delimiter=delimiter, dtype="float64", chunk_rows=chunk_rows)
    assert X is not None, "a well-formed CSV file was refused"
    assert X.shape == expected.shape and np.array_equal(X, expected)


@FUZZ
@given(case=csv_files(), at=st.integers(0, 10_000),
       junk=st.sampled_from(['"', '""', ",", "#", "\x00", "\r", "nan", "1e999", "\ufeff", "x"]))
def test_damaged_csv_gives_rows_or_a_distsketch_error(case, at, junk):
    content, delimiter, _ = case
    text = content.decode()
    at = at % (len(text) + 1)
    damaged = (text[:at] + junk + text[at:]).encode()
    X, _ = _run("data.csv", damaged, delimiter=delimiter, dtype="float64")
    if X is not None:
        text = damaged.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")[_header_lines(text, delimiter):]
        ref = np.loadtxt(lines, delimiter=delimiter, comments="#", quotechar='"', ndmin=2,
                         dtype=np.float64)
        assert np.array_equal(X, ref)


def _header_lines(text: str, delimiter: str) -> int:
    """Lines up to and including the first data line when it is a header by the documented
    rule: fields split as the csv module does, every one a name (it starts with a letter or
    ``_`` and is not a number).  Any other first line is data."""
    for i, line in enumerate(text.split("\n")):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        try:
            fields = [t.strip() for t in next(csv.reader([body], delimiter=delimiter))]
        except StopIteration:
            return 0
        return i + 1 if all(map(_is_name, fields)) else 0
    return 0


def _is_name(field: str) -> bool:
    if not field or not (field[0].isalpha() or field[0] == "_"):
        return False
    try:
        float(field)
    except ValueError:
        return True
    return False


# ------------------------------------------------------------ svmlight lines


@st.composite
def svmlight_lines(draw):
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        label = draw(st.one_of(st.integers(-3, 3), st.floats(-5, 5, allow_nan=False)))
        idx = sorted(draw(st.sets(st.integers(1, 25), max_size=6)))
        vals = [draw(st.floats(-1e6, 1e6, allow_nan=False)) for _ in idx]
        tokens = [repr(float(label))] + [f"{i}:{v!r}" for i, v in zip(idx, vals)]
        if draw(st.booleans()):
            tokens.append("# a comment")
        lines.append(" ".join(tokens))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "")
    noise = draw(st.sampled_from(["", "0:1.5", "-2:1", "1:", "x:1", ":3", "99999999999999999999:1",
                                  "2147483648:1", "3:nan", "1:1 1:2", "qid:3"]))
    if noise:
        k = draw(st.integers(0, len(lines) - 1))
        lines[k] = lines[k] + " " + noise
    bom = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    return bom + ("\n".join(lines) + "\n").encode()


@FUZZ
@given(content=svmlight_lines(), chunk_rows=st.integers(1, 4))
def test_svmlight_lines_match_scikit_learn_or_give_a_distsketch_error(content, chunk_rows):
    X, y = _run("data.svm", content, format="svmlight", dtype="float64", chunk_rows=chunk_rows)
    if X is None:
        return
    body = content.removeprefix(b"\xef\xbb\xbf")
    Xs, ys = load_svmlight_file(io.BytesIO(body), zero_based="auto", dtype=np.float64)
    ref = Xs.toarray()
    assert X.shape[0] == ref.shape[0] and np.array_equal(y, ys)
    # the reader's width is the largest index; scikit-learn's the same, both from the file
    assert np.array_equal(X[:, :ref.shape[1]], ref[:, :X.shape[1]])
    assert not np.any(X[:, ref.shape[1]:]) and not np.any(ref[:, X.shape[1]:])


# ---------------------------------------------------------- binary formats

dtypes = st.sampled_from(["<f8", ">f4", "<i4", "|u1", "<i2", "|b1"])


@FUZZ
@given(shape=st.tuples(st.integers(0, 6), st.integers(0, 4)) | st.tuples(st.integers(1, 5)),
       dtype=dtypes, seed=st.integers(0, 2**16), gz=st.booleans(), fortran=st.booleans())
def test_npy_files_match_numpy_load(shape, dtype, seed, gz, fortran):
    arr = (np.random.default_rng(seed).normal(size=shape) * 100).astype(dtype)
    if fortran:
        arr = np.asfortranarray(arr)
    buf = io.BytesIO()
    np.save(buf, arr)
    content = gzip.compress(buf.getvalue()) if gz else buf.getvalue()
    X, _ = _run("data.npy.gz" if gz else "data.npy", content, dtype=None)
    if X is not None:
        # dtype=None keeps a numeric source dtype (native order); booleans are stored as float64
        kept = np.float64 if arr.dtype == np.bool_ else arr.dtype.newbyteorder("=")
        assert arr.ndim == 2 and np.array_equal(X, arr) and X.dtype == kept


@FUZZ
@given(dims=st.lists(st.integers(0, 5), min_size=1, max_size=3),
       code=st.sampled_from([0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E]), seed=st.integers(0, 2**16),
       cut=st.integers(-3, 3))
def test_idx_files_match_their_layout(dims, code, seed, cut):
    dtype = np.dtype({0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
                      0x0E: ">f8"}[code])
    values = (np.random.default_rng(seed).normal(size=int(np.prod(dims))) * 50).astype(dtype)
    header = bytes([0, 0, code, len(dims)]) + np.asarray(dims, dtype=">u4").tobytes()
    body = values.tobytes()
    body = body[:len(body) + cut] if cut < 0 else body + b"\x01" * cut   # truncated or trailing
    X, _ = _run("data-idx3-ubyte", header + body, dtype=None)
    if X is not None:
        assert cut == 0
        d = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        assert np.array_equal(X, values.reshape(dims[0], d))
