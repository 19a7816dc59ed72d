"""CountSketch: a sparse oblivious linear map R^d -> R^m.

Column ``j`` of the input goes to bucket ``h(j)`` with sign ``s(j)``; both are
pure functions of ``(seed, purpose, j)`` (:mod:`distsketch.ops.random`), so any
column range of the operator can be rebuilt on any worker, and a column block
of a wide matrix can be sketched on its own and the results summed.

Cost: O(nnz) per block for sparse input, O(n·d) for dense NumPy input.  The
array API has no scatter-add, so blocks of other namespaces (CuPy) are
sketched as dense products with the one-hot operator, ``_ONEHOT_COLS``
input columns at a time: O(n·w·m) flops, which a GPU runs as GEMMs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.ops.namespace import asarray, float_dtype, host_dtype, namespace
from distsketch.ops.random import hash_bucket, hash_sign

__all__ = ["countsketch", "countsketch_hashes", "countsketch_matrix", "countsketch_transposed"]

# input columns per one-hot operator slice on non-NumPy blocks (a 1024 × m dense slice)
_ONEHOT_COLS = 1024
# one-hot slices already on a device, most recently used last: a task sketches many
# blocks with the same slices, and rebuilding + copying one per block costs a host
# scatter and a host-to-device copy of w × m values each time
_DEVICE_ONEHOT: OrderedDict[tuple, Any] = OrderedDict()
_DEVICE_ONEHOT_MAX = 8
_DEVICE_ONEHOT_LOCK = threading.Lock()


@lru_cache(maxsize=64)
def _hashes(seed: int, purpose: str, start: int, stop: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(start, stop, dtype=np.int64)
    h = hash_bucket(seed, purpose + ".h", idx, m)
    s = hash_sign(seed, purpose + ".s", idx)
    h.setflags(write=False)
    s.setflags(write=False)
    return h, s


def countsketch_hashes(seed: int, purpose: str, start: int, stop: int,
                       m: int) -> tuple[np.ndarray, np.ndarray]:
    """Buckets and signs of input columns ``start:stop``.

    Parameters
    ----------
    seed, purpose
        Key of the hash family (distinct purposes give independent sketches).
    start, stop : int
        Global column range.
    m : int
        Number of buckets.

    Returns
    -------
    h : ndarray of int64, shape (stop - start,)
        Buckets in ``[0, m)``.
    s : ndarray of float64, shape (stop - start,)
        Signs ±1.
    """
    if m < 1:
        raise ConfigError(f"CountSketch needs at least one bucket; got m={m}.")
    return _hashes(int(seed), str(purpose), int(start), int(stop), int(m))


def countsketch_matrix(seed: int, purpose: str, start: int, stop: int, m: int,
                       dtype: Any = np.float64) -> sp.csr_matrix:
    """The operator restricted to columns ``start:stop`` as a sparse (stop-start) x m matrix."""
    h, s = countsketch_hashes(seed, purpose, start, stop, m)
    w = stop - start
    return sp.csr_matrix((s.astype(dtype), h, np.arange(w + 1, dtype=np.int64)), shape=(w, m))


@lru_cache(maxsize=64)
def _bucket_major(seed: int, purpose: str, start: int, stop: int, m: int, dtype: str) -> sp.csr_matrix:
    # Cᵀ (m × w) in CSR, built once per process: tasks sketch many row slices with it
    return countsketch_matrix(seed, purpose, start, stop, m, dtype=np.dtype(dtype)).T.tocsr()


def countsketch_transposed(XT: np.ndarray, seed: int, purpose: str, m: int,
                           col_offset: int = 0) -> np.ndarray:
    """``Cᵀ Xᵀ`` for a dense transposed block ``XT`` of shape (w, n): the sketch, (m, n).

    Each output entry sums its bucket's columns in a fixed order, the same for
    every row blocking (SciPy's CSR-times-dense kernel).
    """
    xp = namespace(XT)
    if xp is not np:
        return _onehot_apply(xp, XT, seed, purpose, m, col_offset, transposed=True)
    CT = _bucket_major(int(seed), str(purpose), int(col_offset), int(col_offset) + XT.shape[0], int(m),
                       XT.dtype.str)
    return CT @ XT


def countsketch(X: Any, seed: int, purpose: str, m: int, col_offset: int = 0,
                dtype: Any = None) -> np.ndarray:
    """CountSketch of the rows of X: ``out[i, h(j)] += s(j) X[i, j]``.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, w)
        Rows to sketch; column ``c`` of X is global input column ``col_offset + c``.
    seed, purpose
        Key of the hash family.
    m : int
        Sketch size.
    col_offset : int
        Global index of X's first column (for column blocks of wide data).
    dtype : dtype, optional
        Output dtype (default: X's float dtype).

    Returns
    -------
    ndarray of shape (n, m)
        Each row depends only on that row of X (chunking-invariant bitwise).

    Notes
    -----
    Memory: the n × m output plus the w-long hash arrays.
    """
    xp = namespace(X)
    dt = float_dtype(X, dtype)
    if sp.issparse(X):
        C = _bucket_major(int(seed), str(purpose), int(col_offset), int(col_offset) + X.shape[1], int(m),
                          dt.str).T
        return np.asarray((sp.csr_matrix(X).astype(dt, copy=False) @ C).toarray())
    if xp is not np:
        return _onehot_apply(xp, xp.astype(X, dt), seed, purpose, m, col_offset, transposed=False)
    # (Cᵀ Xᵀ)ᵀ runs as SciPy's sparse-times-dense kernel (several times faster than a
    # gather + reduceat here)
    Xd = np.asarray(X, dtype=dt)
    return np.ascontiguousarray(countsketch_transposed(Xd.T, seed, purpose, m, col_offset).T)


def _onehot_apply(xp: Any, X: Any, seed: int, purpose: str, m: int, col_offset: int,
                  transposed: bool) -> Any:
    """``X C`` (or ``Cᵀ X``) by dense one-hot slices of C, for namespaces without a scatter-add."""
    w = X.shape[0] if transposed else X.shape[1]
    n = X.shape[1] if transposed else X.shape[0]
    shape = (m, n) if transposed else (n, m)
    out = xp.zeros(shape, dtype=X.dtype, device=X.device)
    ht = host_dtype(X.dtype)
    for a in range(0, w, _ONEHOT_COLS):
        b = min(w, a + _ONEHOT_COLS)
        Cd = _onehot_slice(X, ht, int(seed), str(purpose), col_offset + a, col_offset + b, m)
        if transposed:
            out += xp.matrix_transpose(Cd) @ X[a:b, ...]
        else:
            out += X[:, a:b] @ Cd
    return out


def _onehot_slice(X: Any, ht: np.dtype, seed: int, purpose: str, start: int, stop: int,
                  m: int) -> Any:
    """The one-hot operator of columns ``start:stop`` on X's device (LRU-cached, read-only)."""
    key = (type(X).__module__.split(".")[0], str(X.device), ht.str, seed, purpose,
           int(start), int(stop), int(m))
    with _DEVICE_ONEHOT_LOCK:
        hit = _DEVICE_ONEHOT.get(key)
        if hit is not None:
            _DEVICE_ONEHOT.move_to_end(key)
            return hit
    h, s = countsketch_hashes(seed, purpose, start, stop, m)
    C = np.zeros((stop - start, m), dtype=ht)
    C[np.arange(stop - start), h] = s
    Cd = asarray(C, like=X)
    with _DEVICE_ONEHOT_LOCK:
        _DEVICE_ONEHOT[key] = Cd
        while len(_DEVICE_ONEHOT) > _DEVICE_ONEHOT_MAX:
            _DEVICE_ONEHOT.popitem(last=False)
    return Cd
