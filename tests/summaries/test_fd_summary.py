"""FrequentDirectionsSummary: mergeable-summary conformance (within the FD
guarantee), exact replay of the reduction tree, and the RFF row map."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.graph import tree_reduce
from distsketch.ops.fd import fd_block_formulation, fd_covariance_shrink, fd_sketch
from distsketch.ops.rff import rff_map, rff_operator
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary
from distsketch.testing import MergeableSummaryTests, assert_states_equal

ELL = 6


def _rff(block, offset, W, b):
    return rff_map(block, W, b, offset)


def check_fd_state(state: dict, Z: np.ndarray, ell: int) -> None:
    """The state is a valid FD sketch of the rows Z."""
    Z = np.asarray(Z, dtype=np.float64)
    B = state["sketch"]
    scale = float(np.sum(Z * Z))
    assert state["n"] == Z.shape[0]
    assert state["sq_frobenius"] == pytest.approx(scale, rel=1e-6)
    C = Z.T @ Z - B.T @ B
    err = np.linalg.norm(C, 2)
    s2 = np.linalg.svd(Z, compute_uv=False) ** 2
    bound = min(s2[k:].sum() / (ell - k) for k in range(ell))
    assert err <= bound + 1e-9 * scale
    assert err <= state["shrinkage"] + 1e-9 * scale
    assert np.linalg.eigvalsh(C).min() >= -1e-9 * scale


class TestFDSummaryRaw(MergeableSummaryTests):
    def make_summary(self):
        return FrequentDirectionsSummary(ELL, n_columns=10)

    def make_data(self, rng):
        return rng.normal(size=(150, 10)) * 0.8 ** np.arange(10)[None, :]

    # FD merge is associative only within its guarantee: every state must be a
    # valid sketch of the same rows
    exact = False

    def check_guarantee(self, state, X):
        check_fd_state(state, X, ELL)


class TestFDSummaryRFF(MergeableSummaryTests):
    W, b = rff_operator(11, "rbf", 0.5, 3, 24)

    def make_summary(self):
        return FrequentDirectionsSummary(ELL, transform=_rff, n_columns=24, map_rows=ELL)

    def operands(self):
        return (self.W, self.b)

    def make_data(self, rng):
        return rng.normal(size=(130, 3))

    exact = False

    def check_guarantee(self, state, X):
        check_fd_state(state, rff_map(X, self.W, self.b, 0), ELL)


def _replay(summary, X, chunks, split_every, *operands):
    """NumPy replay of dask's reduction tree: groups of split_every consecutive states."""
    offs = np.concatenate(([0], np.cumsum(chunks)[:-1]))
    states = [summary.chunk(X[o: o + c], int(o), *operands) for o, c in zip(offs, chunks,
                                                                              strict=True)]
    while len(states) > split_every:
        states = [summary.merge(states[i: i + split_every])
                  for i in range(0, len(states), split_every)]
    return summary.merge(states)


@pytest.mark.parametrize(("chunks", "split_every"), [
    ((200,), 8),                       # one block
    ((70, 70, 60), 2),                 # 3 blocks, two levels
    ((13, 50, 7, 30, 40, 1, 59), 3),   # ragged, three levels
    ((20,) * 10, 4),                   # 10 blocks, fan-in 4
])
def test_tree_reduce_equals_numpy_replay_bitwise(chunks, split_every):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(sum(chunks), 5)).astype(np.float32)
    W, b = rff_operator(5, "rbf", 0.2, 5, 32)
    s = FrequentDirectionsSummary(8, transform=_rff, map_rows=16)
    Xd = da.from_array(X, chunks=(chunks, 5))
    with dask.config.set(scheduler="sync"):
        got = tree_reduce(s, Xd, W, b, split_every=split_every).compute()
    assert_states_equal(got, _replay(s, X, chunks, split_every, W, b))


def test_same_chunking_bitwise_identical_sync_and_threads():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(3000, 6)).astype(np.float32)
    W, b = rff_operator(2, "rbf", 0.3, 6, 64)
    s = FrequentDirectionsSummary(10, transform=_rff)
    Xd = da.from_array(X, chunks=(250, 6))
    red = tree_reduce(s, Xd, W, b, split_every=3)
    with dask.config.set(scheduler="sync"):
        a = red.compute()
    with dask.config.set(scheduler="threads", num_workers=2):
        t1 = red.compute()
        t2 = red.compute()
    assert_states_equal(a, t1)
    assert_states_equal(a, t2)


@pytest.mark.parametrize("m", [20, 120])
def test_chunk_does_not_depend_on_map_rows(m):
    rng = np.random.default_rng(9)
    X = rng.normal(size=(333, 4))
    W, b = rff_operator(1, "rbf", 0.4, 4, m)
    formulation = fd_block_formulation(333, m, 5)
    assert formulation == ("covariance" if m == 20 else "buffer")
    states = [FrequentDirectionsSummary(5, transform=_rff, map_rows=r).chunk(X, 17, W, b)
              for r in (5, 13, 4096)]
    scale = states[0]["sq_frobenius"]
    for st in states[1:]:
        if formulation == "buffer":
            np.testing.assert_array_equal(st["sketch"], states[0]["sketch"])
            assert st["shrinkage"] == states[0]["shrinkage"]
        else:
            # the block's covariance is summed slice by slice: map_rows groups that
            # float64 sum, so only rounding (a few ulps of ‖Z‖_F²) depends on it
            np.testing.assert_allclose(st["sketch"].T @ st["sketch"],
                                       states[0]["sketch"].T @ states[0]["sketch"],
                                       rtol=0, atol=1e-12 * scale)
            assert st["shrinkage"] == pytest.approx(states[0]["shrinkage"], abs=1e-12 * scale)
        assert st["n"] == states[0]["n"]
        # only the float64 sum of squares depends on the summation grouping
        assert st["sq_frobenius"] == pytest.approx(states[0]["sq_frobenius"], rel=1e-13)
    # and equals the FD sketch of the mapped rows in the chosen formulation
    Z = rff_map(X, W, b, 17)
    B, _ = fd_sketch(Z, 5) if formulation == "buffer" else fd_covariance_shrink(Z.T @ Z, 5)
    np.testing.assert_allclose(states[-1]["sketch"].T @ states[-1]["sketch"], B.T @ B,
                               rtol=0, atol=1e-12 * scale)
    if formulation == "buffer":
        np.testing.assert_array_equal(states[0]["sketch"], B)


def test_empty_needs_width_and_bad_size():
    with pytest.raises(ConfigError, match="n_columns"):
        FrequentDirectionsSummary(4).empty()
    with pytest.raises(ConfigError, match="sketch_size"):
        FrequentDirectionsSummary(0)


class _RecordingRFF:
    """An RFF row map that takes ``out=`` and records the buffers it wrote."""

    accepts_out = True

    def __init__(self):
        self.outs = []

    def __call__(self, block, offset, W, b, out=None):
        self.outs.append(out)
        return rff_map(block, W, b, offset, out=out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_covariance_formulation_reuses_one_feature_buffer(dtype):
    # a transform that takes out= maps every slice after the first into the first one's
    # features; the state equals that of fresh features slice by slice
    rng = np.random.default_rng(4)
    X = rng.normal(size=(333, 4)).astype(dtype)
    W, b = rff_operator(2, "rbf", 0.4, 4, 20)
    assert fd_block_formulation(333, 20, 5) == "covariance"
    rec = _RecordingRFF()
    got = FrequentDirectionsSummary(5, transform=rec, map_rows=100).chunk(X, 3, W, b)
    fresh = FrequentDirectionsSummary(5, transform=_rff, map_rows=100).chunk(X, 3, W, b)
    assert rec.outs[0] is None and len(rec.outs) == 4
    assert all(o is not None and o.dtype == dtype for o in rec.outs[1:])
    assert len({o.__array_interface__["data"][0] for o in rec.outs[1:]}) == 1
    assert rec.outs[-1].shape == (33, 20)  # the short last slice: a view of the buffer
    scale = fresh["sq_frobenius"]
    np.testing.assert_allclose(got["sketch"].T @ got["sketch"],
                               fresh["sketch"].T @ fresh["sketch"], rtol=0, atol=1e-12 * scale)
    assert got["shrinkage"] == pytest.approx(fresh["shrinkage"], abs=1e-12 * scale)
    assert got["sq_frobenius"] == pytest.approx(scale, rel=1e-12)
    # the per-ℓ-rows formulation keeps each slice's own features (a sketch may hold rows)
    W2, b2 = rff_operator(2, "rbf", 0.4, 4, 120)
    rec = _RecordingRFF()
    FrequentDirectionsSummary(5, transform=rec, map_rows=100).chunk(X, 3, W2, b2)
    assert all(o is None for o in rec.outs)
