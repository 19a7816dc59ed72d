import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from distsketch.errors import ConfigError
from distsketch.ops.random import (
    TILE_ROWS,
    hash_bucket,
    hash_sign,
    hash_uniform,
    random_rows,
    resolve_seed,
)


@settings(max_examples=30, deadline=None)
@given(start=st.integers(0, 3 * TILE_ROWS), length=st.integers(0, 2 * TILE_ROWS))
def test_random_rows_slices_agree_with_the_whole(start, length):
    whole = random_rows(7, "t", 0, 5 * TILE_ROWS + 10, 3)
    part = random_rows(7, "t", start, start + length, 3)
    np.testing.assert_array_equal(part, whole[start:start + length])


def test_random_rows_distribution_and_independence():
    a = random_rows(1, "a", 0, 20_000, 1)[:, 0]
    b = random_rows(1, "b", 0, 20_000, 1)[:, 0]
    c = random_rows(2, "a", 0, 20_000, 1)[:, 0]
    assert stats.kstest(a, "norm").pvalue > 1e-3
    # different purpose or seed: uncorrelated (|r| < 5 / sqrt(n))
    for other in (b, c):
        assert abs(np.corrcoef(a, other)[0, 1]) < 5 / np.sqrt(a.size)
    u = random_rows(3, "u", 0, 20_000, 1, kind="uniform")[:, 0]
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    r = random_rows(3, "r", 0, 20_000, 1, kind="rademacher")[:, 0]
    assert set(np.unique(r)) == {-1.0, 1.0}
    assert abs(r.mean()) < 5 / np.sqrt(r.size)


def test_hash_functions_uniform_and_pure():
    idx = np.arange(100_000)
    u = hash_uniform(5, "p", idx)
    np.testing.assert_array_equal(u, hash_uniform(5, "p", idx))
    np.testing.assert_array_equal(u[1234:1300], hash_uniform(5, "p", idx[1234:1300]))
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    counts = np.bincount(hash_bucket(5, "h", idx, 16), minlength=16)
    assert stats.chisquare(counts).pvalue > 1e-3
    s = hash_sign(5, "s", idx)
    assert set(np.unique(s)) == {-1.0, 1.0}
    assert abs(s.mean()) < 5 / np.sqrt(s.size)
    # pairs: symmetric use is up to the caller; order matters here
    assert not np.array_equal(hash_uniform(5, "p", idx[:50], idx[50:100]),
                              hash_uniform(5, "p", idx[50:100], idx[:50]))


def test_resolve_seed():
    assert resolve_seed(12) == 12
    assert resolve_seed(np.random.default_rng(0)) == resolve_seed(np.random.default_rng(0))
    assert 0 <= resolve_seed(None) < 2**63
    with pytest.raises(ConfigError):
        resolve_seed(-1)
    with pytest.raises(ConfigError):
        resolve_seed("seven")
