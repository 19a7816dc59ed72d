"""Kernel approximation error metrics, exact for small n and on a row sample
for large n, computed blockwise.

Both functions take an *approximation*: any object with
``kernel_approx(A, B=None) -> ndarray`` returning the approximate kernel
block G̃(A, B) for small in-memory row sets (every distsketch feature map,
kernel PCA and MEKA model has it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError
from distsketch.ops.kernels import pairwise_kernel, resolve_kernel_params
from distsketch.ops.random import resolve_seed
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.validation import check_input, is_dask

__all__ = ["kernel_errors", "relative_kernel_error", "sample_rows"]

_DENSE_LIMIT = 4096


def sample_rows(X: Any, n_sample: int | None, random_state: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows of X chosen uniformly without replacement (all rows if n is small).

    The choice keeps the ``n_sample`` rows of smallest priority
    ``hash(seed, row)`` (:class:`~distsketch.summaries.landmarks.UniformLandmarks`,
    one pass over X): deterministic and independent of chunking.

    Returns
    -------
    index : ndarray of int64, sorted
    rows : ndarray of shape (len(index), d), float64
    """
    n = X.shape[0]
    if n_sample is not None and n_sample < n:
        sampler = UniformLandmarks(n_sample, resolve_seed(random_state), "metrics.sample")
        if is_dask(X):
            from distsketch.graph import compute, tree_reduce

            state = compute(tree_reduce(sampler, X, name="metrics-sample"), progress=False)[0]
        else:
            state = sampler.chunk(X, 0)
        return sampler.finalize(state)
    rows = X
    if is_dask(rows):
        from distsketch.graph import compute

        rows = compute(rows, progress=False)[0]
    rows = rows.toarray() if hasattr(rows, "toarray") else np.asarray(rows)
    return np.arange(n), rows.astype(np.float64)


def _tiles(n: int, step: int):
    for a in range(0, n, step):
        yield a, min(n, a + step)


def _diff_block(S: np.ndarray, kfun: Callable, approx: Any, a: slice, b: slice) -> np.ndarray:
    return kfun(S[a], S[b]) - np.asarray(approx.kernel_approx(S[a], S[b]), dtype=np.float64)


@single_threaded_blas
def _errors(S: np.ndarray, kfun: Callable, approx: Any, tile: int) -> tuple[float, float, float]:
    n = S.shape[0]
    if n <= _DENSE_LIMIT:
        G = kfun(S, S)
        E = G - np.asarray(approx.kernel_approx(S, S), dtype=np.float64)
        E = 0.5 * (E + E.T)
        spec = float(np.max(np.abs(scipy.linalg.eigvalsh(E))))
        return spec, float(np.linalg.norm(E)), float(np.linalg.norm(G))
    fro2 = 0.0
    g2 = 0.0
    for a0, a1 in _tiles(n, tile):
        for b0, b1 in _tiles(n, tile):
            G = kfun(S[a0:a1], S[b0:b1])
            E = G - np.asarray(approx.kernel_approx(S[a0:a1], S[b0:b1]), dtype=np.float64)
            fro2 += float(np.sum(E * E))
            g2 += float(np.sum(G * G))

    def matvec(v: np.ndarray) -> np.ndarray:
        out = np.zeros(n)
        for a0, a1 in _tiles(n, tile):
            for b0, b1 in _tiles(n, tile):
                out[a0:a1] += _diff_block(S, kfun, approx, slice(a0, a1), slice(b0, b1)) @ v[b0:b1]
        return out

    op = scipy.sparse.linalg.LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    vals = scipy.sparse.linalg.eigsh(op, k=1, which="LM", return_eigenvectors=False, tol=1e-4)
    return float(abs(vals[0])), float(np.sqrt(fro2)), float(np.sqrt(g2))


def _kernel_fn(kernel: Any, d: int, gamma: float | None, degree: int, coef0: float) -> Callable:
    if callable(kernel):
        return lambda A, B: np.asarray(kernel(A, B), dtype=np.float64)
    name, params = resolve_kernel_params(kernel, d, gamma, degree, coef0)
    return lambda A, B: pairwise_kernel(A, B, name, **params)


def kernel_errors(
    X: Any,
    approx: Any,
    kernel: Any = "rbf",
    *,
    gamma: float | None = None,
    degree: int = 3,
    coef0: float = 1.0,
    n_sample: int | None = 2000,
    random_state: Any = 0,
    tile: int = 2048,
) -> dict[str, float]:
    """Kernel spectral and Frobenius errors as normalised in Ghashami et al. (2016).

    Parameters
    ----------
    X : array_like, dask array or Zarr path of shape (n, d)
        Data whose Gram matrix G is approximated.
    approx : object with ``kernel_approx``
        A fitted approximation (feature map, kernel PCA, MEKA, ...).
    kernel : str or callable, default "rbf"
        The exact kernel, with ``gamma``/``degree``/``coef0``.
    n_sample : int or None, default 2000
        Rows sampled uniformly (None: all rows).  G is then the kernel matrix of
        the sample, and errors are normalised by the sample size.
    random_state : int
        Seed of the row sample.
    tile : int
        Tile size for blockwise evaluation when the sample exceeds 4096 rows.

    Returns
    -------
    dict
        ``spectral`` = ‖G − G̃‖₂ / s, ``frobenius`` = ‖G − G̃‖_F / s²,
        ``relative_frobenius`` = ‖G − G̃‖_F / ‖G‖_F, and ``n_sample`` = s.

    Notes
    -----
    Memory: O(s·d + tile²) beyond a dense s × s matrix when s ≤ 4096.  The
    spectral norm of a large sample comes from Lanczos on tile-wise products.

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016, section 4 (error measures).
    """
    if n_sample is not None and n_sample < 2:
        raise ConfigError(f"n_sample must be >= 2 or None; got {n_sample}.")
    X = check_input(X, where="kernel_errors X", allow_sparse=True)
    _, S = sample_rows(X, n_sample, random_state)
    kfun = _kernel_fn(kernel, S.shape[1], gamma, degree, coef0)
    spec, fro, gnorm = _errors(S, kfun, approx, tile)
    s = S.shape[0]
    return {"spectral": spec / s, "frobenius": fro / s**2,
            "relative_frobenius": fro / gnorm if gnorm > 0 else 0.0, "n_sample": s}


def relative_kernel_error(X: Any, approx: Any, kernel: Any = "rbf", *,
                          gamma: float | None = None, degree: int = 3, coef0: float = 1.0,
                          n_sample: int | None = 20000, random_state: Any = 0,
                          tile: int = 2048) -> float:
    """‖G − G̃‖_F / ‖G‖_F, exact for small n, on sampled rows for large n.

    This is the error measure of the MEKA paper (Si, Hsieh, Dhillon, ICML
    2014).  Parameters as in :func:`kernel_errors`; computed tile by tile with
    O(tile²) memory.
    """
    if n_sample is not None and n_sample < 2:
        raise ConfigError(f"n_sample must be >= 2 or None; got {n_sample}.")
    X = check_input(X, where="relative_kernel_error X", allow_sparse=True)
    _, S = sample_rows(X, n_sample, random_state)
    kfun = _kernel_fn(kernel, S.shape[1], gamma, degree, coef0)
    n = S.shape[0]
    num = 0.0
    den = 0.0
    for a0, a1 in _tiles(n, tile):
        for b0, b1 in _tiles(n, tile):
            G = kfun(S[a0:a1], S[b0:b1])
            E = G - np.asarray(approx.kernel_approx(S[a0:a1], S[b0:b1]), dtype=np.float64)
            num += float(np.sum(E * E))
            den += float(np.sum(G * G))
    return float(np.sqrt(num / den)) if den > 0 else 0.0
