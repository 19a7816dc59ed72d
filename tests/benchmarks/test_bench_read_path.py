"""benchmarks/bench_read_path.py: its raw baseline decodes exactly what zarr reads, checksums included."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numcodecs
import numpy as np
import pytest

from distsketch.io.arrays.access import write_array

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
X = np.random.default_rng(3).standard_normal((1050, 10)).astype(np.float32)
CHUNK = 100


def _load():
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("bench_read_path_under_test",
                                                      BENCH / "bench_read_path.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path[:] = saved


@pytest.mark.parametrize("compressor", ["lz4", None])
def test_raw_baseline_decodes_every_chunk_bitwise(tmp_path, compressor):
    bench = _load()
    store = write_array(X, tmp_path / "s.zarr", chunk_rows=CHUNK, compressor=compressor)
    files = bench._chunk_files(Path(store))
    assert len(files) == 11  # ten full chunks and a short last one, stored whole
    buf = np.empty((CHUNK, X.shape[1]), np.float32)
    blosc = numcodecs.Blosc() if compressor else None
    for i, f in enumerate(files):
        buf[:] = np.nan
        bench.decode_chunk(f, buf, blosc)
        rows = X[i * CHUNK:(i + 1) * CHUNK]
        assert buf[:len(rows)].tobytes() == rows.tobytes()


@pytest.mark.parametrize("compressor", ["lz4", None])
def test_raw_baseline_refuses_a_flipped_byte(tmp_path, compressor):
    bench = _load()
    store = write_array(X, tmp_path / "s.zarr", chunk_rows=CHUNK, compressor=compressor)
    f = bench._chunk_files(Path(store))[4]
    body = bytearray(f.read_bytes())
    body[len(body) // 2] ^= 0x10
    f.write_bytes(bytes(body))
    buf = np.empty((CHUNK, X.shape[1]), np.float32)
    with pytest.raises(ValueError, match="checksum mismatch"):
        bench.decode_chunk(f, buf, numcodecs.Blosc() if compressor else None)


def test_every_case_is_timed_for_both_layouts(tmp_path, monkeypatch):
    bench = _load()
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["bench_read_path.py", "--rows", "3000", "--cols", "8",
                                      "--repeat", "1", "--dir", str(tmp_path),
                                      "--json", str(out)])
    bench.main()
    res = json.loads(out.read_text())
    assert set(res["stores"]) == {"lz4", "none"}
    for rec in res["stores"].values():
        names = [c["case"] for c in rec["cases"]]
        assert "distsketch dask, 1 thread [default]" in names
        assert "raw read + crc32c + decode, 1 thread" in names
        assert all(c["seconds"] > 0 and c["rows_per_s"] > 0 for c in rec["cases"])
    # bytes + CRC-32C: every stored chunk is its rows' bytes (the last one padded) and 4 more
    none, c = res["stores"]["none"], res["stores"]["none"]["chunk_rows"]
    assert none["bytes_on_disk"] == -(-3000 // c) * (c * 8 * 4 + 4)
    assert res["stores"]["lz4"]["bytes_on_disk"] < none["bytes_on_disk"]
