"""RandomNoisy generator (chunking-invariant, the paper's distribution), its Zarr
writer, and the bundled digits."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from distsketch.datasets import (
    load_digits_array,
    make_random_noisy_zarr,
    random_noisy,
    random_noisy_rows,
)
from distsketch.errors import ConfigError, StoreError
from distsketch.io import open_array, read_manifest


def test_identical_for_every_chunking():
    ref = random_noisy(9000, 12, signal_dim=5, chunk_rows=9000, random_state=3).compute()
    for rows in (1, 1000, 7919):
        X = random_noisy(9000, 12, signal_dim=5, chunk_rows=rows, random_state=3)
        if rows == 1:
            X = X[:200]
        got = X.compute(scheduler="sync")
        np.testing.assert_array_equal(got, ref[: got.shape[0]])
    np.testing.assert_array_equal(random_noisy_rows(3, 4000, 4010, 12, 5, 10.0), ref[4000:4010])


def test_seed_and_dtype():
    a = random_noisy(100, 8, signal_dim=4, random_state=0).compute()
    b = random_noisy(100, 8, signal_dim=4, random_state=1).compute()
    assert a.dtype == np.float32 and a.shape == (100, 8)
    assert not np.array_equal(a, b)
    c = random_noisy(100, 8, signal_dim=4, dtype=np.float64, random_state=0).compute()
    assert c.dtype == np.float64
    np.testing.assert_allclose(c, a, rtol=1e-6, atol=1e-6)


def test_distribution_matches_sdu_plus_noise():
    # A = S D U + F/ζ has covariance E[aᵀa] = Uᵀ D² U + I/ζ²: eigenvalues (1 − (i−1)/d)² + 1/ζ²
    # for i ≤ s and 1/ζ² beyond.  With n = 40000 rows, relative sampling error of each
    # eigenvalue is about sqrt(2/n) ≈ 0.007; allow 0.05.
    n, d, s, zeta = 40_000, 30, 10, 10.0
    X = random_noisy(n, d, signal_dim=s, zeta=zeta, random_state=5).compute().astype(np.float64)
    lam = np.linalg.eigvalsh(X.T @ X / n)[::-1]
    expect = np.concatenate([(1 - np.arange(s) / d) ** 2 + zeta ** -2, np.full(d - s, zeta ** -2)])
    np.testing.assert_allclose(lam, expect, rtol=0.05)
    # the mean of all entries has variance ≤ λ_max/(n·d) (rows are independent)
    assert abs(X.mean()) < 5 * np.sqrt(lam[0] / (n * d))


def test_write_zarr_store(tmp_path):
    path = make_random_noisy_zarr(tmp_path / "rn.zarr", 2500, 7, chunk_rows=600, signal_dim=3,
                                  random_state=2)
    arr = zarr.open_array(str(path), path="X", mode="r")
    assert arr.shape == (2500, 7) and arr.chunks == (600, 7) and arr.dtype == np.float32
    np.testing.assert_array_equal(
        open_array(path).compute(),
        random_noisy(2500, 7, signal_dim=3, random_state=2).compute())
    info = read_manifest(path)
    assert info["generator"] == "random_noisy" and info["signal_dim"] == 3
    with pytest.raises(StoreError, match="exists"):
        make_random_noisy_zarr(path, 10, 7, chunk_rows=5, signal_dim=3)
    make_random_noisy_zarr(path, 10, 7, chunk_rows=5, signal_dim=3, overwrite=True)
    assert zarr.open_array(str(path), path="X", mode="r").shape == (10, 7)


def test_bad_parameters():
    with pytest.raises(ConfigError, match="signal_dim"):
        random_noisy(10, 5, signal_dim=6)
    with pytest.raises(ConfigError, match="n_samples"):
        random_noisy(0, 5, signal_dim=2)
    with pytest.raises(ConfigError, match="zeta"):
        random_noisy(10, 5, signal_dim=2, zeta=0.0)
    with pytest.raises(ConfigError, match="chunk_rows"):
        random_noisy(10, 5, signal_dim=2, chunk_rows=0)


def test_digits():
    X = load_digits_array()
    assert X.shape == (1797, 64) and X.dtype == np.float32
    assert X.min() == 0.0 and X.max() == 1.0
