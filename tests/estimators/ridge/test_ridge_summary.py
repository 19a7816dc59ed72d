"""The ridge summary's slice-by-slice state of float32 rows: maps that take ``out=`` write
every slice after the first into the first slice's features, with the same state."""

from __future__ import annotations

import numpy as np
import pytest

from distsketch import RandomFourierFeatures
from distsketch.estimators.ridge.defaults import StandardizedMap
from distsketch.footprint import Footprint
from distsketch.summaries.base import takes_out
from distsketch.summaries.ridge import SLICE_ROWS, sliced_state

N = 2 * SLICE_ROWS + 333  # two full slices and a short one


class _Recording:
    """A row map that records the ``out=`` buffers it was given (None: none)."""

    def __init__(self, fn, accepts_out=True):
        self.fn = fn
        self.accepts_out = accepts_out
        self.outs = []

    def __call__(self, block, offset, *operands, **out):
        self.outs.append(out.get("out"))
        return self.fn(block, offset, *operands, **out)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, 6)).astype(np.float32)
    y = rng.standard_normal((N, 2))
    rff = RandomFourierFeatures(n_components=48, random_state=0).fit(X[:100])
    return X, y, rff._map_block, tuple(rff._operands())


def test_maps_that_take_out(data):
    _, _, fn, _ = data
    assert takes_out(fn)
    # the standardising wrapper takes out= where the map it wraps does
    assert takes_out(StandardizedMap(fn, 2))
    assert not takes_out(StandardizedMap(lambda block, offset: block, 0))


@pytest.mark.parametrize("products", ["float32", "float64"])
def test_slices_reuse_the_first_slices_features(data, products):
    X, y, fn, ops = data
    rec, plain = _Recording(fn), _Recording(fn, accepts_out=False)
    f32 = products == "float32"
    got = sliced_state(rec, ops, X, y, 17, f32)
    ref = sliced_state(plain, ops, X, y, 17, f32)
    assert rec.outs[0] is None and len(rec.outs) == 3
    assert rec.outs[1].shape == (SLICE_ROWS, 48) and rec.outs[2].shape == (333, 48)
    assert rec.outs[1].dtype == np.float32
    assert np.shares_memory(rec.outs[1], rec.outs[2])
    assert all(o is None for o in plain.outs)
    for key in ("sum", "ztz", "zty", "ysum", "yty"):
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-12, atol=1e-12 * N)
    assert got["n"] == ref["n"] == N
    # and the state is that of the block's features, mapped in one piece
    Z = np.asarray(fn(X, 17, *ops), dtype=np.float64)
    tol = 1e-5 if f32 else 1e-12  # float32 products: within γ_b·|Z|ᵀ|Z| (b = 4096 rows)
    np.testing.assert_allclose(got["ztz"], Z.T @ Z, rtol=0, atol=tol * N)
    np.testing.assert_allclose(got["zty"], Z.T @ y, rtol=1e-12, atol=1e-12 * N)
    np.testing.assert_allclose(got["sum"], Z.sum(axis=0), rtol=1e-12, atol=1e-12 * N)


def test_standardized_map_passes_out_through(data):
    X, _, fn, ops = data
    mean, scale = X.mean(axis=0), X.std(axis=0)
    wrapped = StandardizedMap(fn, len(ops))
    buf = np.empty((100, 48), dtype=np.float32)
    Z = wrapped(X[:100], 5, *ops, mean, scale, out=buf)
    assert Z is buf
    np.testing.assert_array_equal(Z, wrapped(X[:100], 5, *ops, mean, scale))


def test_stacked_targets_keep_the_store_re_readable(tmp_path):
    # the ridge input [X | y] from a store: blocks split for parallelism over chunks
    # that do not spread evenly read X per block, with y cut to the same rows
    import dask
    import dask.array as da

    from distsketch.estimators.ridge.weights import stack_xy
    from distsketch.graph import plan_rows
    from distsketch.io import open_array, write_array

    X = np.random.default_rng(4).standard_normal((30_000, 8)).astype(np.float32)
    y = np.random.default_rng(5).standard_normal((30_000, 1))
    write_array(X, tmp_path / "x.zarr", chunk_rows=10_000)
    XY = stack_xy(open_array(str(tmp_path / "x.zarr")), da.from_array(y, chunks=(10_000, 1)))
    assert XY.dtype == np.float64
    with dask.config.set(scheduler="threads", num_workers=2):
        blocks = plan_rows(XY, footprint=Footprint(per_row=65536.0))
    assert blocks.plan.limit == "parallelism" and blocks.plan.n_blocks >= 8
    graph = dict(blocks.data.__dask_graph__())
    reads = {k for k in graph if isinstance(k, tuple) and str(k[0]).startswith("zarr-")}
    assert len(reads) == blocks.plan.n_blocks
    np.testing.assert_array_equal(blocks.data.compute(scheduler="sync"), np.hstack([X, y]))
