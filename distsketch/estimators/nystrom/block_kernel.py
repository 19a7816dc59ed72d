"""Block kernel approximation (BKA): exact kernel blocks within k-means clusters."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import DistsketchEstimator, OperatorSize, fit_context, to_numpy
from distsketch.estimators.kernel_params import fit_kernel_params
from distsketch.estimators.nystrom.features import fit_kmeans
from distsketch.estimators.nystrom.meka import DENSE_MAX_ROWS, MEKA
from distsketch.graph import map_blocks
from distsketch.ops.kernels import kernel_function
from distsketch.ops.meka import nearest_centre, nearest_centre_column
from distsketch.ops.namespace import densify, namespace, to_host
from distsketch.validation import is_dask

__all__ = ["BlockKernelApproximation"]


class BlockKernelApproximation(DistsketchEstimator):
    """Block kernel approximation (BKA, eq. 1 of Si, Hsieh, Dhillon 2014).

    G̃ = G⁽¹¹⁾ ⊕ … ⊕ G⁽ᶜᶜ⁾: exact kernel values between points of the same
    k-means cluster, zero between clusters.

    Parameters
    ----------
    n_clusters : int, default 8
        The number of clusters.
    kernel, gamma, degree, coef0
        As in :class:`MEKA`.
    kmeans_sample, kmeans_iter, kmeans_full_iter : int
        As in :class:`MEKA`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    centres_ : ndarray of shape (c, d)
    cluster_sizes_ : ndarray of int64, shape (c,)
    n_samples_seen_, n_features_in_ : int

    Notes
    -----
    Storage of the explicit approximation is Σ n_s² values, so BKA is a
    reference for large γ rather than a scalable method; ``kernel_approx``
    needs only the centres, ``matvec`` and ``to_dense`` the training rows in
    memory.

    References
    ----------
    Si, Hsieh, Dhillon. Memory efficient kernel approximation. ICML 2014, section 4.1.
    """

    _array_api_support = True

    _accepts_sparse = True

    # every parameter as in MEKA
    _parameter_constraints = {k: MEKA._parameter_constraints[k] for k in (
        "n_clusters", "kernel", "gamma", "degree", "coef0", "kmeans_sample", "kmeans_iter",
        "kmeans_full_iter", "random_state")}

    def __init__(self, *, n_clusters: int = 8, kernel: Any = "rbf", gamma: float | str | None = None,
                 degree: int = 3, coef0: float = 1.0, kmeans_sample: int = 20000,
                 kmeans_iter: int = 100, kmeans_full_iter: int = 0, random_state: Any = None):
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kmeans_sample = kmeans_sample
        self.kmeans_iter = kmeans_iter
        self.kmeans_full_iter = kmeans_full_iter
        self.random_state = random_state

    @fit_context
    def fit(self, X: Any, y: Any = None) -> BlockKernelApproximation:
        """Partition the rows by k-means.

        Parameters
        ----------
        X : ndarray, sparse, dask array or Zarr path of shape (n, d)

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        seed = self._init_seed()
        self._check_params_for_shape(*X.shape)
        _, self.kernel_params_ = fit_kernel_params(self, X)
        self.centres_, self.inertia_ = fit_kmeans(
            X, self.n_clusters, seed, sample_size=self.kmeans_sample, max_iter=self.kmeans_iter,
            full_iter=self.kmeans_full_iter)
        self._X_fit = X
        self.n_samples_seen_ = int(X.shape[0])
        labels = self._labels(X)
        if isinstance(labels, np.ndarray):
            self.cluster_sizes_ = np.bincount(labels, minlength=self.n_clusters).astype(np.int64)
        else:  # counted on the labels' device (no bincount in the array API); c numbers back
            xp = namespace(labels)
            hits = labels[:, None] == xp.arange(self.n_clusters, device=labels.device)[None, :]
            self.cluster_sizes_ = np.asarray(to_host(xp.sum(xp.astype(hits, xp.int64), axis=0)),
                                             dtype=np.int64)
        return self

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        """Refuse parameters that X's shape cannot satisfy (before any pass over X)."""
        if n_samples < self.n_clusters:
            raise InputError(f"BlockKernelApproximation: n_clusters={self.n_clusters} exceeds the "
                             f"{n_samples} rows of X (n_samples={n_samples}); use fewer clusters.")
        super()._check_params_for_shape(n_samples, n_features)

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        c, d = int(self.n_clusters), int(n_features)
        rows = min(int(self.kmeans_sample), max(1, int(n_samples)))
        return [(f"BlockKernelApproximation: n_clusters={c}, kmeans_sample={self.kmeans_sample} "
                 f"on {d} input features: the k-means sample ({rows} x {d}), its distances to "
                 f"the centres ({rows} x {c}) and the centres ({c} x {d}, float64) that",
                 8 * (rows * (d + c) + c * d), "lower n_clusters or kmeans_sample")]

    def _labels(self, X: Any) -> np.ndarray:
        lab = map_blocks(X, nearest_centre_column, self.centres_, n_out=1, dtype=np.int64, name="bka-labels")
        if not isinstance(lab, np.ndarray) and not is_dask(lab):
            return namespace(lab).reshape(lab, (-1,))  # an in-memory input's kind and device
        return np.asarray(to_numpy(lab)).ravel()

    def predict(self, X: Any) -> np.ndarray:
        """Cluster index (nearest centre) of each row, shape (n,)."""
        self._check_is_fitted("centres_")
        return self._labels(self._check_input(X, reset=False, allow_sparse=True))

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """K(A, B) where both rows share a cluster, else 0."""
        self._check_is_fitted("centres_")
        A = np.asarray(A, dtype=np.float64)
        B = A if B is None else np.asarray(B, dtype=np.float64)
        kfun = kernel_function(self.kernel, **self.kernel_params_)
        la, _ = nearest_centre(A, self.centres_)
        lb, _ = nearest_centre(B, self.centres_)
        return np.where(la[:, None] == lb[None, :], kfun(A, B), 0.0)

    def _train_rows(self) -> np.ndarray:
        X = getattr(self, "_X_fit", None)
        if X is None:
            raise ConfigError("BlockKernelApproximation: training rows unavailable (loaded model); "
                              "refit to use matvec/to_dense.")
        return np.asarray(to_numpy(densify(X)), dtype=np.float64)

    def to_dense(self) -> np.ndarray:
        """The n × n block-diagonal G̃ in the original row order (n ≤ 20000)."""
        self._check_is_fitted("centres_")
        if self.n_samples_seen_ > DENSE_MAX_ROWS:
            raise ConfigError(f"BlockKernelApproximation.to_dense: n={self.n_samples_seen_} is too "
                              "large; use matvec.")
        X = self._train_rows()
        return self.kernel_approx(X)

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """G̃ v, one diagonal block at a time in 4096-row tiles (training rows in memory)."""
        self._check_is_fitted("centres_")
        X = self._train_rows()
        v = np.asarray(v, dtype=np.float64)
        if v.shape[0] != X.shape[0]:
            raise InputError(f"BlockKernelApproximation.matvec: v has {v.shape[0]} rows, "
                             f"expected {X.shape[0]}.")
        kfun = kernel_function(self.kernel, **self.kernel_params_)
        labels, _ = nearest_centre(X, self.centres_)
        out = np.zeros_like(v)
        for s in range(self.n_clusters):
            idx = np.flatnonzero(labels == s)
            for a in range(0, len(idx), 4096):
                rows = idx[a:a + 4096]
                out[rows] = kfun(X[rows], X[idx]) @ v[idx]
        return out
