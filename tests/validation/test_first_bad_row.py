"""The one first-bad-row check and the messages built on it."""

import numpy as np
import pytest
import scipy.sparse as sp

from distsketch.errors import InputError
from distsketch.validation.finite import (
    check_finite_block,
    check_finite_rows,
    check_finite_stored,
    check_finite_targets,
    first_nonfinite_row,
)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_first_row_dense_sparse_and_shapes(bad):
    X = np.ones((12, 3))
    X[9, 0] = bad
    X[4, 2] = bad
    assert first_nonfinite_row(X) == 4
    assert first_nonfinite_row(sp.csr_matrix(X)) == 4
    assert first_nonfinite_row(sp.csc_matrix(X)) == 4
    assert first_nonfinite_row(X.reshape(12, 3, 1)) == 4
    assert first_nonfinite_row(X[:, 2]) == 4
    assert first_nonfinite_row(X.astype(np.float32)) == 4


def test_finite_integer_and_empty_have_no_bad_row():
    assert first_nonfinite_row(np.ones((5, 2))) is None
    assert first_nonfinite_row(np.arange(10).reshape(5, 2)) is None
    assert first_nonfinite_row(np.zeros((0, 3))) is None
    assert first_nonfinite_row(sp.csr_matrix((4, 3))) is None
    assert first_nonfinite_row(np.float64(np.nan)) == 0


def test_messages_name_the_global_row():
    X = np.zeros((5, 2))
    X[3, 1] = np.nan
    with pytest.raises(InputError, match=r"^X contains NaN or Inf: first bad row is 13 "
                                         r"\(block starting at row 10\)"):
        check_finite_rows(X, 10, "X")
    with pytest.raises(InputError, match=r"^est: y contains NaN or Inf \(first at row 3\); "
                                         "clean the targets"):
        check_finite_targets(X, "est: y")
    with pytest.raises(InputError, match=r"^a\.csv: NaN or Inf at row 8 \(line 10\)\. Clean or "
                                         "impute the data before appending"):
        check_finite_stored(X, 5, "a.csv", lambda i: i + 7, action="appending")
    with pytest.raises(InputError, match=r"stage 's' produced NaN at row 3"):
        check_finite_block(sp.csr_matrix(X), stage="s")


def test_finite_rows_still_refuse_oversized_rows():
    X = np.ones((3, 2))
    X[2] = 1e300
    with pytest.raises(InputError, match="row 7 is too large"):
        check_finite_rows(X, 5, "X")
