"""graph is the one entry from data to blocks: the store block rule, the
constructors the layers above use, and the contract that nothing else builds
dask arrays."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import distsketch.io.arrays.access as io_arrays
from distsketch.graph import (
    LAZY_BLOCK_ROWS,
    UNKNOWN_STAGE_ROWS,
    as_lazy,
    choose_block_rows,
    hstack_blocks,
    store_block_rows,
)
from distsketch.io import open_array, write_array

ROOT = Path(__file__).resolve().parents[2]


def _load_contracts():
    spec = importlib.util.spec_from_file_location("import_contracts", ROOT / "import_contracts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("n, d, unit", [(10**6, 100, 1000), (10**7, 8, 4096), (500, 6, 100)])
def test_store_blocks_are_whole_units_of_about_the_input_block(n, d, unit):
    rows = store_block_rows(n, d, 8, unit)
    target = choose_block_rows(n, 8 * d).block_rows
    assert rows % unit == 0 and rows == max(unit, target // unit * unit)


@pytest.mark.parametrize("n, d, unit", [(10**6, 100, 1000), (10**7, 8, 4096), (500, 6, 100)])
def test_a_store_opened_for_any_stage_gets_the_unknown_stage_plan_when_smaller(n, d, unit):
    default = store_block_rows(n, d, 8, unit)
    plan = choose_block_rows(n, 8 * d, bytes_per_row=UNKNOWN_STAGE_ROWS * 8 * d,
                             align=unit).block_rows
    want = plan if plan < min(default, n) else default
    assert store_block_rows(n, d, 8, unit, any_stage=True) == want


def test_open_array_for_any_stage_opens_the_store_once(tmp_path, monkeypatch):
    X = np.random.default_rng(0).normal(size=(3000, 5))
    path = write_array(X, tmp_path / "x.zarr", chunk_rows=100)
    seen = []
    real = io_arrays.open_zarr
    monkeypatch.setattr(io_arrays, "open_zarr", lambda *a, **k: seen.append(a) or real(*a, **k))
    Xd = open_array(str(path), any_stage=True)
    assert len(seen) == 1
    assert Xd.chunks[0][0] == store_block_rows(3000, 5, 8, 100, any_stage=True)
    np.testing.assert_array_equal(Xd.compute(), X)


def test_as_lazy_cuts_memory_into_lazy_blocks_and_keeps_dask_as_is():
    X = np.arange(2 * (LAZY_BLOCK_ROWS + 10), dtype=np.float64).reshape(-1, 2)
    lazy = as_lazy(X)
    assert lazy.chunks == ((LAZY_BLOCK_ROWS, 10), (2,))
    np.testing.assert_array_equal(lazy.compute(), X)
    Xd = da.from_array(X, chunks=(1000, 1))
    assert as_lazy(Xd) is Xd


def test_hstack_blocks_appends_columns_on_the_row_blocks():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(8, 4))
    B = rng.normal(size=(8, 2))
    C = rng.normal(size=(8, 3))
    Ad = da.from_array(A, chunks=((3, 3, 2), (2, 2)))
    out = hstack_blocks(Ad, B, da.from_array(C, chunks=(5, 3)))
    # A's row blocks, each part's columns in one block
    assert out.chunks == ((3, 3, 2), (4, 2, 3))
    np.testing.assert_array_equal(out.compute(), np.hstack([A, B, C]))


@pytest.mark.parametrize("line, imports", [
    ("import dask.array as da", True),
    ("from dask.array import Array", True),
    ("from dask.array.core import normalize_chunks", True),
    ("from dask import array as da", True),
    ("import dask.config", False),
    ("from dask.base import tokenize", False),
    ("import dask", False),
    ("from dask.utils import format_bytes", False),
    ("import dask.arrayish", False),
])
def test_the_contract_reads_import_statements(line, imports):
    assert _load_contracts().imports_submodule(line, "dask.array") is imports


def test_only_graph_imports_dask_array():
    import grimp

    contracts = _load_contracts()
    graph = grimp.build_graph("distsketch", include_external_packages=True, cache_dir=None)
    outside = sorted(m for m in graph.find_descendants("distsketch")
                     if not m.startswith("distsketch.graph"))
    found = [(m, d["line_contents"]) for m in outside
             for d in graph.get_import_details(importer=m, imported="dask")
             if contracts.imports_submodule(d["line_contents"], "dask.array")]
    assert found == []
