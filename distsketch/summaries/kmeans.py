"""k-means as mergeable sufficient statistics, and k-means++ on a sample.

One Lloyd iteration over an out-of-core array is a tree reduction: each block
assigns its rows to the nearest current centre and returns per-centre sums,
counts and the inertia; states merge by addition; the new centres are
sums / counts.  Seeding (k-means++) runs on an in-memory row sample, which is
also where the MEKA paper runs all of k-means for n > 20000.

The per-block statistics stay in the block's namespace (NumPy, or CuPy on a
GPU) and merge there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.blas import blas_single_thread
from distsketch.errors import InputError
from distsketch.footprint import Footprint
from distsketch.ops.meka import nearest_centre
from distsketch.ops.namespace import as_block, asarray, densify, device_of, namespace, to_host
from distsketch.summaries.base import Summary
from distsketch.summaries.sums import SumMerge, sum_states

__all__ = ["KMeansStats", "kmeans_on_sample", "lloyd_update"]


class KMeansStats(SumMerge, Summary):
    """Per-centre sums, counts and inertia of one Lloyd assignment step.

    Parameters
    ----------
    n_clusters : int
        c.

    Notes
    -----
    ``chunk(block, offset, centres)``: O(b·c·d) time; state c·d + c + 1
    float64 values.  Merge adds states, so it is associative up to
    floating-point summation order (labels are exactly chunking-invariant).
    """

    def __init__(self, n_clusters: int):
        self.n_clusters = int(n_clusters)

    def chunk(self, block: Any, row_offset: int, centres: np.ndarray) -> dict:
        X = as_block(densify(block), dtype=np.float64)
        xp = namespace(X)
        labels, dist = nearest_centre(X, centres, row_offset)
        if xp is not np:
            # a dense one-hot (c × b) product: one GEMM on the block's device
            onehot = labels[None, :] == xp.arange(self.n_clusters, dtype=xp.int64,
                                                  device=device_of(X))[:, None]
            return {"sum": xp.astype(onehot, xp.float64) @ X,
                    "count": xp.sum(xp.astype(onehot, xp.int64), axis=1),
                    "inertia": float(xp.sum(dist))}
        # one-hot (c × b) sparse product: rows added in row order, as np.add.at would, ~10x faster
        n = X.shape[0]
        onehot = sp.csc_matrix((np.ones(n), labels, np.arange(n + 1)), shape=(self.n_clusters, n))
        sums = np.asarray(onehot @ X)
        return {"sum": sums, "count": np.bincount(labels, minlength=self.n_clusters).astype(np.int64),
                "inertia": float(dist.sum())}

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """One Lloyd step's task and state (float64 whatever the input's ``itemsize``).

        Per row (measured): the float64 row, its c distances with two
        temporaries, the label and the one-hot index (8 values).  Fixed: the
        centres and the c × d sums.  State: sums, counts and inertia.
        """
        c, d = self.n_clusters, n_features
        return Footprint(per_row=8.0 * (d + 3 * c + 8), fixed=8.0 * c * d * 2,
                         state=8.0 * c * (d + 2))

    def merge(self, states: list[dict]) -> dict:
        # broadcasting lets the (c, 1) identity state meet any width d
        out = sum_states(states)
        out["inertia"] = float(out["inertia"])
        return out

    def empty(self, n_features: int = 1) -> dict:
        return {"sum": np.zeros((self.n_clusters, n_features)),
                "count": np.zeros(self.n_clusters, dtype=np.int64), "inertia": 0.0}


def lloyd_update(state: dict, centres: np.ndarray) -> np.ndarray:
    """New centres from merged statistics; an empty cluster keeps its centre.

    In the namespace of the statistics (the centres move there).
    """
    counts = state["count"]
    xp = namespace(state["sum"], counts)
    if xp is not np:
        sums = state["sum"]
        C = asarray(centres, like=sums, dtype=xp.float64)
        nz = counts > 0
        safe = xp.astype(xp.where(nz, counts, xp.ones_like(counts)), xp.float64)
        return xp.where(nz[:, None], sums / safe[:, None], C)
    new = np.array(centres, dtype=np.float64, copy=True)
    nz = counts > 0
    new[nz] = state["sum"][nz] / counts[nz, None]
    return new


def kmeans_on_sample(sample: np.ndarray, n_clusters: int, seed: int, *, max_iter: int = 100,
                     tol: float = 1e-4) -> tuple[np.ndarray, float]:
    """k-means++ seeding then Lloyd iterations on an in-memory sample (scikit-learn).

    Parameters
    ----------
    sample : ndarray of shape (s, d)
        Rows (e.g. a :class:`~distsketch.summaries.landmarks.UniformLandmarks`
        sample, in global row order).
    n_clusters : int
    seed : int
        Seeds k-means++.
    max_iter : int
    tol : float
        scikit-learn's relative tolerance: stop when the squared centre shift
        summed over centres is below ``tol`` times the mean feature variance.

    Returns
    -------
    centres : ndarray of shape (n_clusters, d)
    inertia : float
        On the sample.

    Notes
    -----
    Runs scikit-learn's compiled Lloyd (``KMeans(n_init=1)``) with BLAS and
    OpenMP pinned to one thread, so the centres are the same in any process.
    scikit-learn works on NumPy: a sample on another device (s × d, small) is
    moved to the host on purpose, and the centres are host NumPy.
    """
    from sklearn.cluster import KMeans

    X = np.asarray(to_host(sample), dtype=np.float64)
    if X.shape[0] < n_clusters:
        raise InputError(
            f"k-means needs at least n_clusters={n_clusters} rows; the sample has {X.shape[0]}. "
            "Use fewer clusters or more data."
        )
    km = KMeans(n_clusters=n_clusters, init="k-means++", n_init=1, max_iter=int(max_iter), tol=tol,
                algorithm="lloyd", random_state=int(seed % (2**32)))
    with blas_single_thread():
        km.fit(X)
    return np.asarray(km.cluster_centers_, dtype=np.float64), float(km.inertia_)
