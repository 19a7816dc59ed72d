"""Smoke runs of ``benchmarks/bench_scaling.py --quick`` and its hand block loops."""

from __future__ import annotations

import importlib
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def modules():
    saved = list(sys.path)
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("roofline"), importlib.import_module("bench_scaling")
    finally:
        sys.path[:] = saved
        sys.modules.pop("roofline", None)
        sys.modules.pop("bench_scaling", None)


def _store(tmp_path: Path, n: int, d: int, chunk: int) -> tuple[str, np.ndarray]:
    import zarr

    X = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
    g = zarr.open_group(str(tmp_path / "x.zarr"), mode="w")
    g.create_array("X", shape=X.shape, chunks=(chunk, d), dtype=np.float32)[:] = X
    return str(tmp_path / "x.zarr"), X


@pytest.mark.parametrize("workers", [1, 3])
def test_hand_rff_zarr_writes_every_row_mapped(modules, tmp_path, workers):
    # output chunks (700 rows) straddle the store's chunks (1000 rows): each is
    # written once, whole, by one process, and every row holds its features
    import zarr

    roofline, _ = modules
    path, X = _store(tmp_path, 3500, 5, 1000)
    m = 16
    out = str(tmp_path / "z.zarr")
    zarr.create_array(out, shape=(3500, m), chunks=(700, m), dtype=np.float32)
    parts = roofline.row_ranges(3500, workers, 700)
    rows = sum(roofline._run_rows("rff-zarr", path, path, lo, hi, m, 4, out, 700)
               for lo, hi in parts)
    assert rows == 3500
    W, b = roofline._operators(5, m)
    ref = np.sqrt(2.0 / m) * np.cos(X.astype(np.float64) @ W + b)
    np.testing.assert_allclose(zarr.open_array(out)[:], ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("n", "workers", "align"),
                         [(4_000_000, 16, 1), (4_000_000, 16, 14_286), (3500, 3, 700),
                          (10, 4, 1), (5, 8, 1)])
def test_row_ranges_split_rows_evenly(modules, n, workers, align):
    # the hand loops' shares: contiguous, covering every row once, bounds on
    # multiples of align, and no process more than one align unit over another
    roofline, _ = modules
    parts = roofline.row_ranges(n, workers, align)
    assert len(parts) == workers
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    assert all(lo % align == 0 and lo <= hi for lo, hi in parts)
    sizes = [hi - lo for lo, hi in parts[:-1]]
    assert not sizes or max(sizes) - min(sizes) <= align
    assert parts[-1][1] - parts[-1][0] <= max(sizes, default=n) + align


def test_hand_loop_parts_read_rows_exactly(modules, tmp_path):
    # a range that starts and ends inside store chunks reads exactly its rows
    roofline, _ = modules
    path, _ = _store(tmp_path, 3500, 5, 1000)
    for lo, hi in [(0, 3500), (250, 2750), (999, 1001), (3000, 3500)]:
        assert roofline._run_rows("read", path, path, lo, hi, 16, 4, "", 1000) == hi - lo


def test_hand_rnca_loop_reads_every_row(modules, tmp_path):
    roofline, _ = modules
    path, _ = _store(tmp_path, 2500, 5, 1000)
    for loop in ("read", "skpca-rnca", "skpca-rnca-f64", "skpca-fd"):
        r = roofline.hand_loop(loop, path, path, 1, tmp_path, m=16, ell=4)
        assert r["rows"] == 2500 and r["rows_per_s"] > 0, loop


def test_quick_run_reports_roofline_and_profile(modules, tmp_path):
    _, bench = modules
    doc = bench.main(["--quick", "--workers", "1", "--pipelines", "skpca-rnca,rff-zarr",
                      "--profile", "--workdir", str(tmp_path)])
    res = {r["pipeline"]: r for r in doc["results"]}
    assert set(res) == {"skpca-rnca", "rff-zarr"}
    assert set(res["skpca-rnca"]["hand"]) == {"skpca-rnca", "skpca-rnca-f64"}
    assert set(res["rff-zarr"]["hand"]) == {"rff-zarr"}
    assert all(v > 0 for r in res.values() for v in r["hand"].values())
    assert doc["reads"][1] > 0
    table = bench.roofline_table(doc["results"], doc["reads"])
    assert "| skpca-rnca | 1 |" in table and "| rff-zarr | 1 |" in table
    for p in doc["profiles"]:
        # cProfile's own times partition the profiled time: they cannot exceed the wall
        assert 0 < sum(p["parts"].values()) <= p["wall_s"] * 1.05
