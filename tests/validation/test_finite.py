"""Finiteness and range rules: the magnitude bound, narrowing casts, kernel parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from distsketch.errors import ConfigError, InputError
from distsketch.ops.kernels import (
    MAGNITUDE_HEADROOM,
    first_oversized_row,
    max_row_sqnorm,
    pairwise_kernel,
)
from distsketch.validation import MAX_GAMMA, Interval, check_kernel_params
from distsketch.validation.finite import first_out_of_range, narrows


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_magnitude_bound_sits_exactly_at_the_stated_limit(dtype):
    limit = float(np.finfo(dtype).max) / MAGNITUDE_HEADROOM
    assert max_row_sqnorm(dtype) == limit
    width = 4
    # a row of equal entries with squared norm just below / above the limit
    below = np.full((1, width), math.sqrt(limit / width) * 0.999, dtype=dtype)
    above = np.full((1, width), math.sqrt(limit / width) * 1.001, dtype=dtype)
    block = np.vstack([np.zeros((3, width), dtype=dtype), below, above, below])
    assert first_oversized_row(block)[0] == 4
    assert first_oversized_row(block[:4]) is None
    assert first_oversized_row(sp.csr_matrix(block))[0] == 4


def test_rows_below_the_bound_give_finite_exact_kernels():
    # the largest admitted rows still give finite rbf and linear kernels in float64
    d = 3
    x = np.full((2, d), math.sqrt(max_row_sqnorm(np.float64) / d) * 0.99)
    x[1] *= -1
    assert first_oversized_row(x) is None
    for kernel in ("rbf", "linear", "cauchy"):
        K = pairwise_kernel(x, kernel=kernel, gamma=1.0)
        assert np.all(np.isfinite(K)), kernel


def test_integer_and_nonfinite_blocks_are_left_to_other_checks():
    assert first_oversized_row(np.full((2, 2), 2**62, dtype=np.int64)) is None
    assert first_oversized_row(np.array([[np.nan, 1e300]])) is None


@pytest.mark.parametrize("src,dst,expected", [
    (np.float64, np.float32, True), (np.float32, np.float64, False),
    (np.int64, np.float32, False), (np.int64, np.int32, True), (np.int8, np.int16, False),
    (np.uint16, np.int16, True), (np.float32, np.int64, True), (np.bool_, np.uint8, False),
])
def test_narrows_is_about_range_not_precision(src, dst, expected):
    assert narrows(src, dst) is expected


def test_first_out_of_range_agrees_with_numpy_round_trip():
    rng = np.random.default_rng(0)
    values = rng.integers(-40_000, 40_000, size=(50, 3))
    found = first_out_of_range(values, np.int16)
    changed = np.flatnonzero((values.astype(np.int16).astype(np.int64) != values).any(axis=1))
    assert found is not None and found[0] == changed[0]
    assert first_out_of_range(np.clip(values, -32768, 32767), np.int16) is None


def test_interval_refuses_infinity_unless_asked():
    assert not Interval(float, 0, None).accepts(np.inf)
    assert not Interval(float, None, None).accepts(-np.inf)
    assert Interval(float, 0, None, finite=False).accepts(np.inf)
    assert Interval(float, 0, None).accepts(1e300)


def test_kernel_parameter_bounds():
    check_kernel_params({"gamma": MAX_GAMMA, "coef0": 1.0, "degree": 1}, "f")
    with pytest.raises(ConfigError, match="gamma="):
        check_kernel_params({"gamma": MAX_GAMMA * 1.01}, "f")
    # (gamma + coef0) ** degree at the float64 limit / 16
    ok_degree = int(math.log(np.finfo(np.float64).max / 16) / math.log(10.0))
    check_kernel_params({"gamma": 9.0, "coef0": 1.0, "degree": ok_degree}, "f")
    with pytest.raises(ConfigError, match="invalid together"):
        check_kernel_params({"gamma": 9.0, "coef0": 1.0, "degree": ok_degree + 1}, "f")
    check_kernel_params({"kernel": "rbf", "gamma": 9.0, "coef0": 1.0, "degree": 10**6}, "f")
    check_kernel_params({"gamma": None, "coef0": 1.0, "degree": 3}, "f")
    check_kernel_params({"gamma": "median"}, "f")


def test_magnitude_error_names_row_and_fix():
    from distsketch.validation import check_input

    X = np.ones((10, 2))
    X[6, 0] = 1e300
    with pytest.raises(InputError, match=r"row 6 is too large .* Scale the data"):
        check_input(X)


@pytest.mark.parametrize("kw", [{"gamma": np.inf}, {"coef0": -np.inf}, {"gamma": np.nan}])
def test_kernel_errors_refuse_non_finite_kernel_parameters(kw):
    from distsketch.metrics import kernel_errors

    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ConfigError, match="must be finite"):
        kernel_errors(X, None, kernel="polynomial", **kw)
