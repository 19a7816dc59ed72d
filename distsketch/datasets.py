"""Data sets: the RandomNoisy generator of Ghashami et al. (lazy, chunking-invariant)
and scikit-learn's bundled digits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError
from distsketch.graph.arrays import default_block_rows, generate_rows
from distsketch.ops.linalg import row_stable_matmul
from distsketch.ops.random import random_rows, resolve_seed

__all__ = ["load_digits_array", "make_random_noisy_zarr", "random_noisy",
           "random_noisy_rows"]


@single_threaded_blas
def _signal_basis(seed: int, signal_dim: int, n_features: int) -> np.ndarray:
    # U (s × d) with orthonormal rows: Q of a d × s Gaussian, transposed
    G = random_rows(seed, "random_noisy.U", 0, n_features, signal_dim)
    Q, R = np.linalg.qr(G)
    Q = Q * np.sign(np.diag(R))[None, :]
    scale = 1.0 - np.arange(signal_dim, dtype=np.float64) / n_features
    return np.ascontiguousarray(Q.T * scale[:, None])


def random_noisy_rows(seed: int, start: int, stop: int, n_features: int, signal_dim: int,
                      zeta: float, dtype: Any = np.float32,
                      basis: np.ndarray | None = None) -> np.ndarray:
    """Rows ``start:stop`` of the RandomNoisy matrix A = S·D·U + F/ζ.

    Parameters
    ----------
    seed : int
    start, stop : int
        Global row range.
    n_features, signal_dim : int
        d and s.
    zeta : float
        Noise divisor ζ.
    dtype : dtype
        Output dtype (computed in float64).
    basis : ndarray of shape (signal_dim, n_features), optional
        Precomputed D·U (from the same seed).

    Returns
    -------
    ndarray of shape (stop - start, n_features)
    """
    DU = _signal_basis(seed, signal_dim, n_features) if basis is None else basis
    S = random_rows(seed, "random_noisy.S", start, stop, signal_dim)
    F = random_rows(seed, "random_noisy.F", start, stop, n_features)
    A = row_stable_matmul(S, DU, start)
    A += F * (1.0 / zeta)
    return A.astype(dtype, copy=False)


class _RowBlock:
    """Picklable block generator for :func:`random_noisy`."""

    def __init__(self, seed: int, n_features: int, signal_dim: int, zeta: float, dtype: Any):
        self.seed = seed
        self.n_features = n_features
        self.signal_dim = signal_dim
        self.zeta = zeta
        self.dtype = np.dtype(dtype)

    def __call__(self, block_info: dict | None = None) -> np.ndarray:
        start, stop = block_info[None]["array-location"][0]  # type: ignore[index]
        return random_noisy_rows(self.seed, int(start), int(stop), self.n_features,
                                 self.signal_dim, self.zeta, self.dtype)


def random_noisy(n_samples: int, n_features: int = 100, *, signal_dim: int = 50,
                 zeta: float = 10.0, chunk_rows: int | None = None, dtype: Any = np.float32,
                 random_state: Any = 0) -> Any:
    """The RandomNoisy matrix A = S·D·U + F/ζ of Ghashami et al. (2016), lazily.

    S (n × s) and F (n × d) have i.i.d. N(0, 1) entries, D is diagonal with
    Dᵢᵢ = 1 − (i − 1)/d, and U (s × d) has orthonormal rows (a random
    rotation).  Row i depends only on (random_state, i): every chunking gives
    bitwise the same data.

    Parameters
    ----------
    n_samples : int
        n.
    n_features : int, default 100
        d.
    signal_dim : int, default 50
        s ≤ d.
    zeta : float, default 10.0
        ζ, the noise divisor (larger means less noise).
    chunk_rows : int, optional
        Rows per dask block (default about 64 MiB per block).
    dtype : dtype, default float32
    random_state : int, default 0

    Returns
    -------
    dask.array.Array of shape (n_samples, n_features)

    Notes
    -----
    Each block costs 2·rows·s·d flops and rows·(s + d) normal draws; memory
    per task is about 8·rows·(s + 2d) bytes.

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016, section 4.
    """
    for name, v in (("n_samples", n_samples), ("n_features", n_features),
                    ("signal_dim", signal_dim)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(f"random_noisy: {name} must be an int >= 1; got {v!r}.")
    if signal_dim > n_features:
        raise ConfigError(f"random_noisy: signal_dim={signal_dim} exceeds n_features="
                          f"{n_features}; the signal lives in a subspace of the features.")
    if not np.isfinite(zeta) or zeta <= 0:
        raise ConfigError(f"random_noisy: zeta must be a positive number; got {zeta!r}.")
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or chunk_rows < 1):
        raise ConfigError(f"random_noisy: chunk_rows must be >= 1; got {chunk_rows!r}.")
    seed = resolve_seed(random_state)
    dtype = np.dtype(dtype)
    rows = int(chunk_rows) if chunk_rows else default_block_rows(n_samples, n_features, 8)
    gen = _RowBlock(seed, int(n_features), int(signal_dim), float(zeta), dtype)
    return generate_rows(gen, n_samples, n_features, rows, dtype,
                         name=f"random-noisy-{seed}-{n_samples}-{n_features}-{signal_dim}-"
                              f"{zeta}-{dtype}-{rows}")


def make_random_noisy_zarr(path: str | os.PathLike, n_samples: int, n_features: int = 100, *,
                           chunk_rows: int = 100_000, overwrite: bool = False,
                           compressor: str | None = "lz4", progress: bool | None = None,
                           **kw: Any) -> Path:
    """Write a RandomNoisy matrix to a Zarr store (atomically, with a manifest).

    Parameters
    ----------
    path : path-like
        Output store.
    n_samples, n_features : int
        Shape.
    chunk_rows : int, default 100000
        Zarr row chunk (also the generation block).
    overwrite : bool
        Replace an existing store.
    compressor : {"lz4", "zstd", None}
        Zarr codec.
    progress : bool, optional
        Progress bar.
    **kw
        ``signal_dim``, ``zeta``, ``dtype``, ``random_state`` of :func:`random_noisy`.

    Returns
    -------
    pathlib.Path
    """
    from distsketch.io import write_array

    X = random_noisy(n_samples, n_features, chunk_rows=chunk_rows, **kw)
    info = {"generator": "random_noisy", "n_samples": int(n_samples),
            "n_features": int(n_features),
            "signal_dim": int(kw.get("signal_dim", 50)), "zeta": float(kw.get("zeta", 10.0)),
            "random_state": resolve_seed(kw.get("random_state", 0))}
    # data, as ingest stores it: X with dimensions (sample, feature)
    return write_array(X, path, chunk_rows=chunk_rows, compressor=compressor,
                       overwrite=overwrite, attrs=info, manifest=info, progress=progress,
                       dimension_names=("sample", "feature"))


def load_digits_array() -> np.ndarray:
    """scikit-learn's bundled 8×8 digits (1797 × 64) as float32 in [0, 1] (no download)."""
    from sklearn.datasets import load_digits

    return (load_digits().data / 16.0).astype(np.float32)
