"""The one identity of an input: :func:`fingerprint`.

Recorded in manifests, in fitted models (``fingerprint_``) and, for a prefix
of rows, in workflow checkpoints to detect that consumed rows changed.

A manifest's fingerprint describes the rows the computation read: callers
pass the array they read (with ``path=`` for the record), not the path a
second time — a store appended to or replaced meanwhile would otherwise be
described instead — and ``n_rows=`` when only a prefix was read.  ``rows``
always says how many rows are described.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.graph import compute, is_dask
from distsketch.io.arrays.access import open_array
from distsketch.ops.namespace import densify, to_host

__all__ = ["fingerprint"]

_ENDS = 1024        # rows hashed at each end of a whole input
_PREFIX_ENDS = 512  # rows hashed at each end of a prefix
_PROBES = 16        # hashed 16-row probes inside a prefix longer than 2 * _PREFIX_ENDS


def fingerprint(X: Any, *, n_rows: int | None = None, seed: int = 0,
                path: str | os.PathLike | None = None,
                storage_options: dict | None = None) -> dict:
    """A cheap identity of an input: shape, dtype and a hash of a few rows.

    Parameters
    ----------
    X : path-like, ndarray, sparse matrix or dask array of shape (n, d)
        A Zarr path (opened with :func:`distsketch.io.open_array`) or an array.
    n_rows : int, optional
        Fingerprint only the first ``n_rows`` rows (a prefix that later
        appends must leave unchanged).  Default: the whole input.
    seed : int, default 0
        Seed of the probe positions inside a prefix (``n_rows`` given).
    path : path-like, optional
        Where an already opened ``X`` came from, recorded as ``"path"``.
    storage_options : dict, optional
        fsspec options when ``X`` is a URL.

    Returns
    -------
    dict
        ``shape``, ``dtype``, ``rows`` (the rows described: ``n_rows``, or
        all of them) and ``sample_hash`` (hex); ``path`` for a path input.  ``sample_hash`` is
        ``"empty"`` for a prefix of no rows.

    Notes
    -----
    Whole input: the first and last 1024 rows are hashed — for a Zarr path
    two chunk reads.  Prefix: the length, width and dtype, the first and last
    512 rows of the prefix and, past 1024 rows, 16 probes of 16 rows at
    positions hashed from ``seed`` — at most 18 chunk reads, independent of
    ``n_rows``.
    """
    if isinstance(X, (str, os.PathLike)):
        path = X if path is None else path
        X = open_array(X, storage_options=storage_options)
    h = hashlib.blake2b(digest_size=16)
    if n_rows is None:
        n = int(X.shape[0])
        parts = [_rows(X, 0, min(n, _ENDS)), _rows(X, max(0, n - _ENDS), n)]
    else:
        n = int(n_rows)
        parts = _prefix_parts(X, n, seed)
        h.update(f"{n}:{X.shape[1]}:{X.dtype}".encode())
    if any(is_dask(p) for p in parts):
        parts = list(compute(*parts, progress=False))
    for part in parts:
        part = np.asarray(to_host(densify(part)))  # a GPU block (device="cuda") hashes on the host
        h.update(np.ascontiguousarray(part).tobytes())
    out: dict[str, Any] = {"shape": [int(s) for s in X.shape], "dtype": str(X.dtype),
           "sample_hash": h.hexdigest() if parts or n_rows is None else "empty"}
    out["rows"] = n
    if path is not None:
        p = str(path)
        out["path"] = p if "://" in p else str(Path(p).expanduser().absolute())
    return out


def _rows(X: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of X, indexed on every axis (array-API arrays refuse ``X[a:b]``)."""
    return X[start:stop] if X.ndim == 1 else X[start:stop, :]


def _prefix_parts(X: Any, n: int, seed: int) -> list[Any]:
    if n <= 0:
        return []
    parts = [_rows(X, 0, min(n, _PREFIX_ENDS)), _rows(X, max(0, n - _PREFIX_ENDS), n)]
    if n > 2 * _PREFIX_ENDS:
        from distsketch.ops.random import hash_bucket

        starts = hash_bucket(seed, "workflow.fingerprint", np.arange(_PROBES, dtype=np.int64),
                             max(1, n - _PROBES))
        parts += [_rows(X, int(s), int(s) + _PROBES) for s in np.sort(starts)]
    return parts
