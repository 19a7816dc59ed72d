"""Device blocks are checked without a host read per block (issue 38, item 2).

A counting stand-in for a GPU: ``array_api_strict`` arrays on a non-CPU device whose
every conversion to the host (``__bool__``, ``__float__``, ``__int__``, ``__index__``,
``__complex__``, ``__array__``, ``__dlpack__``, ``to_device``) is counted.  A pass
over 16 blocks must read back exactly what a pass over 4 blocks reads; a bad row in
any block still raises the NumPy path's message, naming the same row.
"""

from __future__ import annotations

import collections
import contextlib

import dask
import dask.array as da
import numpy as np
import pytest

import distsketch as ds
from distsketch.errors import InputError
from distsketch.graph import map_blocks, reduce_blocks
from distsketch.graph.planner import record_plans
from distsketch.io import write_array
from distsketch.ops.device import clear_operand_cache
from distsketch.ops.kernels import max_row_sqnorm
from distsketch.ops.namespace import namespace
from distsketch.summaries.base import Summary
from distsketch.testing import to_strict_device
from distsketch.validation.finite import (
    FiniteRows,
    FlaggedSummary,
    check_finite_rows,
    mark_checked,
)

xps = pytest.importorskip("array_api_strict")
Array = type(xps.asarray(0.0))

CONVERSIONS = ("__bool__", "__float__", "__int__", "__index__", "__complex__", "__array__",
               "__dlpack__", "to_device")
N, D = 4096, 5


@contextlib.contextmanager
def host_reads():
    """Count every conversion of a strict array to a host value."""
    counts: collections.Counter = collections.Counter()
    saved = {name: getattr(Array, name) for name in CONVERSIONS}

    def counted(name, method):
        def wrapper(self, *args, **kwargs):
            counts[name] += 1
            return method(self, *args, **kwargs)
        return wrapper

    for name, method in saved.items():
        setattr(Array, name, counted(name, method))
    try:
        yield counts
    finally:
        for name, method in saved.items():
            setattr(Array, name, method)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    return X, X[:, 0] + 0.1 * rng.normal(size=N)


def _reads(run, n_blocks, X, y=None):
    """Host reads of ``run(X_strict, y_strict)`` with the input cut into ``n_blocks`` blocks."""
    Xs = to_strict_device(X)
    ys = None if y is None else to_strict_device(y)
    with dask.config.set({"distsketch.block-bytes": N // n_blocks * D * 8}), \
            record_plans() as plans, host_reads() as counts:
        run(Xs, ys)
    return sum(counts.values()), max(p.n_blocks for p in plans)


def _same_reads(run, X, y=None):
    (few, n_few), (many, n_many) = _reads(run, 4, X, y), _reads(run, 16, X, y)
    assert n_few >= 4 and n_many >= 3 * n_few  # the passes really ran on those blocks
    assert few == many


def _rff():
    return ds.RandomFourierFeatures(n_components=64, gamma=0.5, random_state=0)


def _ridge_fit(Xs, ys):
    ds.SketchedKernelRidge(features=_rff(), alpha=1.0, standardize=False).fit(Xs, ys)


def _nystrom_fit(Xs, ys):
    ds.NystromFeatures(n_landmarks=20, gamma=0.5, random_state=0).fit(Xs)


def _kpca_fit(Xs, ys):
    ds.StreamingKernelPCA(n_components=3, n_random_features=64, method="rnca", gamma=0.5,
                          random_state=0).fit(Xs)


@pytest.mark.parametrize("run", [_ridge_fit, _nystrom_fit, _kpca_fit],
                         ids=["rff-ridge-fit", "nystrom-fit", "kpca-rnca-fit"])
def test_host_reads_of_a_fit_do_not_grow_with_the_blocks(run):
    X, y = _data()
    _same_reads(run, X, y)


def test_host_reads_of_an_rff_transform_do_not_grow_with_the_blocks():
    X, _ = _data()
    rff = _rff().fit(X[:10])
    _same_reads(lambda Xs, ys: rff.transform(Xs), X)


class _ColumnSums(Summary):
    def chunk(self, block, row_offset, *operands):
        return namespace(block).sum(block, axis=0)

    def merge(self, states):
        total = states[0]
        for s in states[1:]:
            total = total + s
        return total


def _message(run, X):
    with pytest.raises(InputError) as err:
        run(X)
    return str(err.value)


def _bad(kind, row):
    X, _ = _data()
    if kind == "nan":
        X[row, 2] = np.nan
    else:  # a finite row whose squared norm overflows float64
        X[row, :] = np.sqrt(max_row_sqnorm(np.float64))
    return X


@pytest.mark.parametrize("kind", ["nan", "oversized"])
@pytest.mark.parametrize("row", [300, 3000])  # in block 1 and in block 11 of 16
def test_a_bad_row_in_block_k_raises_the_numpy_message_with_constant_reads(kind, row):
    X = _bad(kind, row)
    runs = {
        "reduce": lambda A: reduce_blocks(_ColumnSums(), A, block_rows=256),
        "map": lambda A: map_blocks(A, lambda b, off: b[:, :2], n_out=2, dtype=np.float64,
                                    block_rows=256),
    }
    for run in runs.values():
        expected = _message(run, X)
        assert f" {row} " in expected
        with host_reads() as counts:
            assert _message(run, to_strict_device(X)) == expected
        # the flags are read once and only the flagged block is checked again: the reads do
        # not depend on how many clean blocks came before the bad one
        with host_reads() as early:
            _message(run, to_strict_device(_bad(kind, 5)))
        assert sum(counts.values()) == sum(early.values())


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_a_nan_output_names_its_stage_and_row_on_the_device():
    def halve_row_37(block, off):
        xp = namespace(block)
        rows = xp.arange(off, off + block.shape[0], device=block.device)
        return block[:, :1] / xp.astype(rows != 37, xp.float64)[:, None]  # 0/0 at row 37

    X, _ = _data()
    X[37, 0] = 0.0
    run = lambda A: map_blocks(A, FiniteRows(halve_row_37, "probe transform"),  # noqa: E731
                               n_out=1, dtype=np.float64, block_rows=16)
    expected = _message(run, X)
    assert "stage 'probe transform' produced NaN at row 37" in expected
    assert _message(run, to_strict_device(X)) == expected


def test_flagged_summary_reads_one_number_at_the_root():
    # the form dask reductions of device blocks use: flags ride with the states
    X = _bad("nan", 700)
    flagged = FlaggedSummary(_ColumnSums(), "X")
    blocks = [(s, to_strict_device(X[s:s + 256])) for s in range(0, N, 256)]
    with host_reads() as counts:
        states = [flagged.chunk(b, s) for s, b in blocks]
        root = flagged.merge([flagged.merge(states[:8]), flagged.merge(states[8:])])
    assert sum(counts.values()) == 0
    rechecked = []
    with host_reads() as counts:
        flagged.settle(root, rechecked.append)
    assert rechecked == [512] and sum(counts.values()) == 1  # the block holding row 700
    with pytest.raises(InputError, match="first bad row is 700 "):
        check_finite_rows(X[512:768], 512, "X")
    clean = FlaggedSummary(_ColumnSums(), "X")
    Xc, _ = _data()
    root = clean.merge([clean.chunk(to_strict_device(Xc[s:s + 256]), s) for s in range(0, N, 256)])
    np.testing.assert_allclose(np.from_dlpack(clean.settle(root, rechecked.append)),
                               Xc.sum(axis=0), rtol=1e-12)
    assert rechecked == [512]


def test_operands_are_uploaded_once_per_process(monkeypatch):
    clear_operand_cache()
    X, _ = _data()
    rff = _rff().fit(X[:10])
    W = rff.random_weights_ if hasattr(rff, "random_weights_") else None
    real = xps.asarray
    uploads = collections.Counter()

    def counting(obj, *args, **kwargs):
        if isinstance(obj, np.ndarray) and obj.ndim == 2 and obj.shape[1] == 64:
            uploads[obj.shape] += 1
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(xps, "asarray", counting)
    with dask.config.set({"distsketch.block-bytes": N // 16 * D * 8}):
        Z = rff.transform(to_strict_device(X))
        Z2 = rff.transform(to_strict_device(X))
    assert sum(uploads.values()) == 1, (W is None, dict(uploads))  # W, for 32 blocks
    np.testing.assert_allclose(np.from_dlpack(Z), rff.transform(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.from_dlpack(Z), np.from_dlpack(Z2))
    clear_operand_cache()


def test_the_writer_does_not_check_again_what_was_checked_where_it_was_made(tmp_path):
    X = da.from_array(np.array([[1.0, np.nan], [2.0, 3.0]]), chunks=(1, 2))
    with pytest.raises(InputError, match="first bad row 0"):
        write_array(X, tmp_path / "unchecked.zarr")
    # a marked array's blocks were checked by the task that made them (here: nothing did)
    write_array(mark_checked(X), tmp_path / "checked.zarr")
    assert (tmp_path / "checked.zarr").exists()
