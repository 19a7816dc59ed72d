"""The ``meta`` of graph outputs follows the input's block type (no hard-coded NumPy).

Dask cannot hold ``array_api_strict`` arrays as blocks, so the input here is a
dask array whose meta is a NumPy *masked* array: a graph builder that derives
its ``meta`` from the input reports a masked meta, one that hard-codes
``numpy.empty`` reports a plain ndarray.  Sparse inputs map to dense blocks,
so their outputs' meta is a dense NumPy array.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import scipy.sparse as sp

from distsketch.graph import map_rows
from distsketch.graph.tiles import row_matvec, tile_matvec

X = np.arange(24.0).reshape(8, 3)


def _masked():
    return da.from_array(np.ma.masked_array(X), chunks=(4, 3), asarray=False)


def _double(block, offset):
    return block[:, :2] * 2.0


def _unused(*args, **kwargs):  # the graphs below are built, never run
    raise AssertionError("not computed")


def test_map_rows_meta_follows_the_input():
    out = map_rows(_double, _masked(), n_out=2, dtype=np.float64)
    assert isinstance(out._meta, np.ma.MaskedArray) and out._meta.ndim == 2
    np.testing.assert_array_equal(np.asarray(out.compute()), X[:, :2] * 2.0)
    plain = map_rows(_double, da.from_array(X, chunks=(4, 3)), n_out=2, dtype=np.float32)
    assert type(plain._meta) is np.ndarray and plain._meta.dtype == np.float32
    sparse = da.from_array(sp.csr_matrix(X), chunks=(4, 3), asarray=False)
    dense = map_rows(_unused, sparse, n_out=2, dtype=np.float64)
    assert type(dense._meta) is np.ndarray and dense._meta.ndim == 2


def test_matvec_meta_follows_the_input():
    for build in (tile_matvec, row_matvec):
        out = build(_masked(), _masked(), np.ones(8), _unused)
        assert isinstance(out._meta, np.ma.MaskedArray), build.__name__
        plain = build(da.from_array(X, chunks=(4, 3)), X, np.ones(8), _unused)
        assert type(plain._meta) is np.ndarray and plain._meta.dtype == np.float64
