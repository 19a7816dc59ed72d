"""The one target reader, used by `distsketch fit --y` and by workflows."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from distsketch.errors import InputError, StoreError
from distsketch.io.targets import open_targets


@pytest.fixture
def y_store(tmp_path):
    y = np.arange(10, dtype=np.float64)
    arr = zarr.create_array(store=str(tmp_path / "y.zarr"), shape=y.shape, dtype=y.dtype,
                            chunks=(4,))
    arr[...] = y
    return tmp_path / "y.zarr", y


def test_rows_and_dask_view(y_store):
    path, y = y_store
    t = open_targets(path, 10)
    np.testing.assert_array_equal(t.rows(3, 7), y[3:7])
    np.testing.assert_array_equal(t.as_dask().compute(), y)


@pytest.mark.parametrize("n, extra, ok", [
    (10, False, True),
    (8, False, False),  # the CLI needs one target per input row
    (8, True, True),    # a workflow reads the rows it consumes
    (12, True, False),  # fewer targets than rows
])
def test_row_count_checked_against_the_input(y_store, n, extra, ok):
    path, _ = y_store
    if ok:
        assert open_targets(path, n, allow_extra_rows=extra).shape == (10,)
    else:
        with pytest.raises(InputError, match=f"the input has {n} rows"):
            open_targets(path, n, allow_extra_rows=extra, where="--y y.zarr")


def test_corrupt_chunk_names_the_rows(y_store):
    path, _ = y_store
    t = open_targets(path, 10)
    (path / "c" / "2").write_bytes(b"\x00garbage")  # rows 8..10
    with pytest.raises(StoreError, match=r"rows 8..10 of the targets"):
        t.rows(8, 10)


def test_missing_store_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="no Zarr store"):
        open_targets(tmp_path / "nope.zarr", 3)
