"""The one target reader, used by `distsketch fit --y` and by workflows."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from distsketch.errors import InputError, StoreError
from distsketch.io.arrays.targets import open_targets


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


def test_open_array_opens_1d_targets_in_a_group(tmp_path):
    import zarr

    from distsketch.io import open_array

    y = np.arange(30, dtype=np.int64) % 3
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    g.create_array("y", data=y, chunks=(8,))
    Y = open_array(f"{tmp_path / 'd.zarr'}::y", targets=True)
    assert Y.shape == (30,) and Y.chunks[0][0] == 8
    np.testing.assert_array_equal(Y.compute(), y)
    np.testing.assert_array_equal(open_array(tmp_path / "d.zarr", component="y",
                                             targets=True).compute(), y)
    # as an input, a 1-D array is refused with the way to open it as targets
    with pytest.raises(InputError, match="targets=True"):
        open_array(f"{tmp_path / 'd.zarr'}::y")


def test_targets_use_the_input_path_rule(tmp_path):
    import zarr

    from distsketch.io.arrays.targets import targets_argument

    # a folder whose name holds '::' is a path as written (split_array_path's rule)
    y = np.linspace(0, 1, 12)
    arr = zarr.create_array(store=zarr.storage.LocalStore(tmp_path / "a::b"), shape=y.shape,
                            dtype=y.dtype, chunks=(5,))
    arr[...] = y
    np.testing.assert_array_equal(open_targets(tmp_path / "a::b", 12).rows(0, 12), y)
    np.testing.assert_array_equal(targets_argument(str(tmp_path / "a::b")).compute(), y)
    assert targets_argument(y) is y  # in-memory targets pass through
    with pytest.raises(StoreError, match="no Zarr store"):
        targets_argument(str(tmp_path / "nope.zarr::y"))


# ------------------------------------------------------------------ class names


@pytest.fixture
def coded(tmp_path):
    """Class labels as ``distsketch ingest`` stores strings: int32 codes, names in attributes."""
    arr = zarr.create_array(store=str(tmp_path / "c.zarr"), shape=(5,), dtype=np.int32,
                            chunks=(2,), attributes={"classes": ["T", "A", "N"]})
    arr[...] = [0, 1, 0, 2, 1]
    return tmp_path / "c.zarr", arr


def test_class_codes_are_read_as_their_names(coded):
    from distsketch.io import open_array

    path, _ = coded
    t = open_targets(path, 5)
    assert t.rows(1, 4).tolist() == ["A", "T", "N"]
    assert t.as_dask().compute().tolist() == list("TATNA")
    assert t.distinct(5).tolist() == ["A", "N", "T"]
    assert open_array(path, targets=True).compute().tolist() == list("TATNA")


@pytest.mark.parametrize("code", [3, -1])
def test_a_code_outside_the_classes_is_refused(coded, code):
    path, arr = coded
    arr[3] = code  # -1 would wrap around to the last name if it were used as an index
    with pytest.raises(StoreError, match=f"row 3 holds the code {code}, outside the 3 class"):
        open_targets(path, 5).as_dask().compute()
    with pytest.raises(StoreError, match=f"row 3 holds the code {code}"):
        open_targets(path, 5).rows(2, 5)


@pytest.mark.parametrize("classes", [["T", "T", "N"], ["T", 1, "N"], [], "TAN"])
def test_damaged_class_names_are_refused(coded, classes):
    path, arr = coded
    arr.attrs["classes"] = classes
    with pytest.raises(StoreError, match="'classes' attribute must be a list of distinct"):
        open_targets(path, 5).rows(0, 2)


@pytest.mark.parametrize(("dtype", "values", "classes", "ok"), [
    (str, ["b", "a", "b"], ["a", "b"], True),      # a classifier's predictions of names
    (np.int64, [2, 0, 2], [0, 2], True),           # ... of numeric labels
    (str, ["b", "a", "b"], [0, 1], False),          # names beside numbers: damage
    (np.float64, [2.0, 0.0, 2.0], ["a", "b"], False),  # names beside non-codes: damage
])
def test_predictions_with_their_classes_read_as_the_labels(tmp_path, dtype, values, classes, ok):
    arr = zarr.create_array(store=str(tmp_path / "p.zarr"), shape=(3,), dtype=dtype, chunks=(2,),
                            attributes={"classes": classes})
    arr[...] = np.asarray(values)
    if ok:
        assert open_targets(tmp_path / "p.zarr", 3).rows(0, 3).tolist() == values
    else:
        with pytest.raises(StoreError, match="'classes' attribute must be a list of distinct"):
            open_targets(tmp_path / "p.zarr", 3).rows(0, 3)
