"""The reader registry: formats found by name, file name and content; new formats plug in."""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from distsketch.errors import ConfigError
from distsketch.io import ingest, read_manifest
from distsketch.io.readers import (
    FORMATS,
    Block,
    Header,
    Reader,
    ReadOptions,
    Stream,
    find_reader,
    formats,
    infer_format,
    register_reader,
    unregister_reader,
)


class _PairsReader(Reader):
    """A toy format: ``*.pairs`` text, each line 'label a b', read two lines per block."""

    name = "pairs"
    suffixes = ("pairs",)

    def guess_from_content(self, head: bytes) -> bool:
        return head.startswith(b"PAIRS")

    @contextlib.contextmanager
    def open(self, source: Path, options: ReadOptions) -> Iterator[Stream]:
        rows = [line.split() for line in source.read_text().splitlines()[1:] if line.strip()]
        values = np.asarray([[float(a), float(b)] for _, a, b in rows])
        labels = np.asarray([float(lab) for lab, _, _ in rows])

        def blocks(k: int) -> Iterator[Block]:
            for s in range(0, len(rows), 2):  # the reader's own block size
                yield Block(values[s:s + 2], labels[s:s + 2], s + 2)

        yield Stream(Header(2, len(rows), None, len(rows), labelled=True, progress_unit="rows",
                            info={"toy": True}), blocks)


@pytest.fixture
def pairs_format():
    register_reader(_PairsReader)
    try:
        yield
    finally:
        unregister_reader("pairs")


def _pairs_file(path: Path) -> Path:
    path.write_text("PAIRS v1\n1 0.5 1.5\n0 2.5 3.5\n1 4.5 5.5\n")
    return path


def test_registered_reader_is_found_by_ingest(tmp_path, pairs_format):
    src = _pairs_file(tmp_path / "toy.pairs")
    out = ingest(src, tmp_path / "toy.zarr", chunk_rows=2)
    root = zarr.open_group(str(out), mode="r")
    np.testing.assert_array_equal(root["X"][...], np.float32([[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]]))
    np.testing.assert_array_equal(root["y"][...], [1.0, 0.0, 1.0])
    info = read_manifest(out)
    assert info["format"] == "pairs" and info["rows"] == 3 and info["toy"] is True
    assert "pairs" in formats() and "pairs" not in FORMATS


def test_registered_reader_found_by_content_and_by_name(tmp_path, pairs_format):
    src = _pairs_file(tmp_path / "unnamed.dat")
    assert infer_format(src) == "pairs"
    out = ingest(src, tmp_path / "c.zarr")
    assert read_manifest(out)["format"] == "pairs"
    assert find_reader(tmp_path / "x.csv", format="pairs").name == "pairs"


def test_unregistered_format_is_unknown_again(tmp_path):
    src = _pairs_file(tmp_path / "toy.pairs")
    with pytest.raises(ConfigError, match="cannot tell the format"):
        ingest(src, tmp_path / "o.zarr")
    with pytest.raises(ConfigError, match="unknown format 'pairs'"):
        ingest(src, tmp_path / "o.zarr", format="pairs")


def test_names_cannot_be_registered_twice():
    class Csv2(Reader):
        name = "csv2"
        aliases = ("tsv",)

    with pytest.raises(ValueError, match="tsv"):
        register_reader(Csv2)
    assert "csv2" not in formats()


@pytest.mark.parametrize(("name", "fmt"), [
    ("a.npy", "npy"), ("a.npy.gz", "npy"), ("a.CSV", "csv"), ("a.tsv.gz", "csv"),
    ("a.txt", "csv"), ("a.svm", "svmlight"), ("a.libsvm", "svmlight"),
    ("train-images-idx3-ubyte.gz", "idx"), ("t10k-labels.idx1", "idx"),
])
def test_builtin_formats_by_name(name, fmt):
    assert infer_format(name) == fmt


def test_builtin_binary_formats_by_content(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((3, 2), np.float32))
    (tmp_path / "blob").write_bytes((tmp_path / "a.npy").read_bytes())
    with gzip.open(tmp_path / "blob2.gz", "wb") as g:
        g.write(bytes([0, 0, 8, 2, 0, 0, 0, 3, 0, 0, 0, 2]) + bytes(6))
    assert infer_format(tmp_path / "blob") == "npy"
    assert infer_format(tmp_path / "blob2.gz") == "idx"
    out = ingest(tmp_path / "blob2.gz", tmp_path / "i.zarr")
    assert zarr.open_group(str(out))["X"].shape == (3, 2)
