import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from distsketch import RandomFourierFeatures
from distsketch.errors import InputError
from distsketch.validation import check_input, check_targets


@pytest.mark.parametrize("X,match", [
    (np.ones(5), "expected a 2-D array"),
    (np.ones((2, 2, 2)), "expected a 2-D array"),
    (np.array([["a", "b"]]), "not real numeric"),
    (np.ones((2, 2), dtype=complex), "not real numeric"),
    (np.ones((0, 3)), "has 0 rows"),
    (np.ones((3, 0)), "0 features"),
])
def test_bad_inputs(X, match):
    with pytest.raises(InputError, match=match):
        check_input(X)


def test_nan_in_numpy_and_sparse_names_row():
    X = np.ones((10, 2))
    X[6, 0] = np.nan
    with pytest.raises(InputError, match="first bad row is 6"):
        check_input(X)
    S = sp.csr_matrix(X)
    with pytest.raises(InputError, match="first bad row is 6"):
        check_input(S, allow_sparse=True)
    with pytest.raises(InputError, match="sparse input is not supported"):
        check_input(S)


def test_dtypes_kept_or_promoted():
    assert check_input(np.ones((2, 2), dtype=np.float32)).dtype == np.float32
    assert check_input(np.ones((2, 2), dtype=np.int16)).dtype == np.float64
    assert check_input(da.ones((4, 2), dtype=np.int8, chunks=2)).dtype == np.float64


def test_targets():
    with pytest.raises(InputError, match="y has 3 rows but X has 4"):
        check_targets(np.ones(3), 4)
    with pytest.raises(InputError, match="NaN or Inf \\(first at row 1\\)"):
        check_targets(np.array([0.0, np.nan, 1.0]), 3)


def test_feature_count_mismatch():
    rff = RandomFourierFeatures(n_components=4, random_state=0).fit(np.ones((5, 3)))
    with pytest.raises(InputError,
                       match="X has 2 features, but RandomFourierFeatures is expecting 3 features"):
        rff.transform(np.ones((5, 2)))


def test_paths_are_opened_by_io_not_here(tmp_path):
    from distsketch.io import open_array, write_array

    path = write_array(np.ones((4, 2), np.float32), tmp_path / "a.zarr")
    with pytest.raises(InputError, match=r"open it with distsketch\.open_array"):
        check_input(str(path))
    assert check_input(open_array(str(path))).shape == (4, 2)


def test_validation_does_not_import_io():
    import subprocess
    import sys

    code = ("import sys, distsketch.validation; "
            "print(sorted(m for m in sys.modules if m.startswith('distsketch.io')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
