"""Memory Efficient Kernel Approximation (MEKA); the block-diagonal BKA is in
:mod:`distsketch.estimators.nystrom.block_kernel`.

Over 500 lines because MEKA's clustering, per-cluster bases and link matrices are one
fit whose stages share its state.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from distsketch.blas import blas_single_thread
from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import (
    DistsketchEstimator,
    OperatorSize,
    TransformerMixin,
    fit_context,
    to_numpy,
)
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_kernel_params
from distsketch.estimators.nystrom.features import fit_kmeans
from distsketch.graph import as_lazy, hstack_blocks, map_blocks, reduce_blocks
from distsketch.ops.kernels import KERNEL_NAMES, kernel_diagonal, kernel_function
from distsketch.ops.meka import (
    basis_block,
    basis_block_footprint,
    choose_ranks,
    expand_basis_rows,
    scatter_basis,
    scattered_basis_block,
    scattered_basis_footprint,
)
from distsketch.ops.nystrom import inv_sqrt_map, link_matrix
from distsketch.summaries.landmarks import ClusterLandmarks
from distsketch.summaries.meka import Projection
from distsketch.validation import Interval, Options, is_dask
from distsketch.validation.finite import FiniteRows

__all__ = ["MEKA"]

# Dense forms (to_dense, in-memory caches) are refused above these sizes.
DENSE_MAX_ROWS = 20000
_CACHE_BYTES = 256 * 2**20


def _source_path(X: Any) -> str | None:
    if isinstance(X, (str, os.PathLike)):
        return str(Path(os.fspath(X)).expanduser().absolute()) if "://" not in str(X) else str(X)
    return None


class MEKA(TransformerMixin, DistsketchEstimator):
    """Memory Efficient Kernel Approximation G ≈ W L Wᵀ (Si, Hsieh, Dhillon 2014).

    k-means partitions the rows in input space; each cluster s gets a rank-k_s
    Nyström basis W⁽ˢ⁾ (rows z_s(x) = K(x, L_s) M_s from m landmarks of the
    cluster, M_s an eigenvalue-truncated W_k^{+1/2}); diagonal link blocks are
    the identity and each off-diagonal link block L⁽ˢᵗ⁾ is the least-squares fit
    of a sampled kernel block (rows: the m landmarks of each cluster plus
    (1+ρ)k further uniform rows), set to zero when
    K(m_s, m_t) ≤ link_threshold for the centres m_s, m_t (thresholding).

    Parameters
    ----------
    n_clusters : int, default 8
        c, the number of clusters.
    rank : int, default 32
        k, the rank per cluster (the average rank with ``rank_rule="spectrum"``).
    kernel : str or callable, default "rbf"
        Meant for shift-invariant kernels (rbf, laplacian, cauchy); any kernel
        of :mod:`distsketch.ops.kernels` or a callable works.
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features, "median" the median
        heuristic on a 1000-row sample (one more pass over X in ``fit``);
        the value used is ``gamma_``.
    degree, coef0 : int, float
        Polynomial kernel parameters.
    n_landmarks : int, optional
        Nyström landmarks m per cluster (default 2k).
    link_threshold : float, default 0.0
        Threshold on K(m_s, m_t) below which a link block is zero.
    rho : float, default 2.0
        Link blocks are fitted on (1+ρ)k sampled rows of each cluster.
    rank_rule : {None, "spectrum"}
        None: k_s = k; "spectrum": k_s from the top c·k eigenvalues of the
        block-diagonal landmark matrix (section 4.2).
    kmeans_sample : int, default 20000
        Rows of the uniform sample k-means++ and Lloyd run on.
    kmeans_iter : int, default 100
        Lloyd iterations on the sample.
    kmeans_full_iter : int, default 0
        Further Lloyd iterations over all rows (one tree-reduced pass each).
    link_rcond : float, default 1e-6
        Singular values of the sampled bases below ``link_rcond`` · sqrt(p · K_max)
        are ignored in the link least squares (K_max the largest kernel diagonal).
    basis_path : str or path, optional
        Write the basis coordinates W (n × (max k_s + 1), labels last) to this
        Zarr store in fit; ``matvec`` then streams it instead of re-evaluating
        kernels.  Without it the basis is recomputed blockwise from the stored
        landmarks and maps (in-memory training data is cached as a sparse W
        when it is small).
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    centres_ : ndarray of shape (c, d)
    landmarks_ : ndarray of shape (c, m, d)
        Cluster s uses ``landmarks_[s, :landmark_counts_[s]]``.
    landmark_counts_ : ndarray of int64, shape (c,)
    maps_ : ndarray of shape (c, m, max k_s)
    ranks_ : ndarray of int64, shape (c,)
    offsets_ : ndarray of int64, shape (c,)
        Column offset of cluster s in W.
    link_ : ndarray of shape (Σ k_s, Σ k_s)
    cluster_sizes_ : ndarray of int64, shape (c,)
    n_link_blocks_ : int
        Off-diagonal link blocks fitted (pairs s < t above the threshold).
    link_seconds_ : float
    n_samples_seen_, n_features_in_ : int
    basis_path_, train_path_ : str or None

    Notes
    -----
    Passes over X: the k-means sample (skipped for small in-memory X), one
    tree reduction collecting per-cluster landmarks and link samples (state
    c·(m + p)·d floats), and optionally ``kmeans_full_iter`` Lloyd passes and
    one basis write.  Driver work O(c m³ + c² p k²).  Storage
    O(n k + (c k)²): the basis (n k_s values, recomputable from c·m·(d + k)
    floats) plus the link matrix.  ``matvec`` costs two passes over the basis
    with O(c k) communication per block.

    References
    ----------
    Si, Hsieh, Dhillon. Memory efficient kernel approximation. ICML 2014,
    Algorithm 1, eq. (4), section 4.2.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import MEKA
    >>> X = np.random.default_rng(0).normal(size=(300, 4))
    >>> mk = MEKA(n_clusters=3, rank=8, gamma=0.5, random_state=0).fit(X)
    >>> mk.matvec(np.ones(300)).shape
    (300,)
    >>> mk.kernel_approx(X[:5], X[:7]).shape
    (5, 7)
    """

    _array_api_support = True

    _accepts_sparse = True

    _parameter_constraints = {
        "n_clusters": [Interval(int, 1, None)],
        "rank": [Interval(int, 1, None)],
        "kernel": [Options(KERNEL_NAMES), "callable"],
        "gamma": GAMMA_CONSTRAINT,
        "degree": [Interval(int, 1, None)],
        "coef0": [Interval(float, None, None)],
        "n_landmarks": [Interval(int, 1, None), None],
        "link_threshold": [Interval(float, None, None)],
        "rho": [Interval(float, 0, None)],
        "rank_rule": [Options({"spectrum"}), None],
        "kmeans_sample": [Interval(int, 1, None)],
        "kmeans_iter": [Interval(int, 0, None)],
        "kmeans_full_iter": [Interval(int, 0, None)],
        "link_rcond": [Interval(float, 0, None)],
        "basis_path": [str, os.PathLike, None],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_clusters: int = 8, rank: int = 32, kernel: Any = "rbf",
                 gamma: float | str | None = None, degree: int = 3, coef0: float = 1.0,
                 n_landmarks: int | None = None, link_threshold: float = 0.0, rho: float = 2.0,
                 rank_rule: str | None = None, kmeans_sample: int = 20000, kmeans_iter: int = 100,
                 kmeans_full_iter: int = 0, link_rcond: float = 1e-6, basis_path: Any = None,
                 random_state: Any = None):
        self.n_clusters = n_clusters
        self.rank = rank
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_landmarks = n_landmarks
        self.link_threshold = link_threshold
        self.rho = rho
        self.rank_rule = rank_rule
        self.kmeans_sample = kmeans_sample
        self.kmeans_iter = kmeans_iter
        self.kmeans_full_iter = kmeans_full_iter
        self.link_rcond = link_rcond
        self.basis_path = basis_path
        self.random_state = random_state

    @fit_context
    def fit(self, X: Any, y: Any = None) -> MEKA:
        """Cluster, build per-cluster Nyström bases and fit the link matrix.

        Parameters
        ----------
        X : ndarray, sparse, dask array or Zarr path of shape (n, d)

        Returns
        -------
        self
        """
        self.train_path_ = _source_path(X)
        X = self._check_input(X, reset=True, allow_sparse=True)
        seed = self._init_seed()
        n, d = X.shape
        self._check_params_for_shape(n, d)
        c = int(self.n_clusters)
        name, params = fit_kernel_params(self, X)
        self.kernel_params_ = params
        kfun = kernel_function(name, **params)
        k, m, p = self._sample_sizes()

        self.centres_, self.inertia_ = fit_kmeans(
            X, c, seed, sample_size=self.kmeans_sample, max_iter=self.kmeans_iter,
            full_iter=self.kmeans_full_iter)
        summary = ClusterLandmarks(c, [("meka.landmarks", m), ("meka.link", p)], seed)
        state = reduce_blocks(summary, X, self.centres_, name="meka-samples")
        res = summary.finalize(state)
        self.cluster_sizes_ = np.asarray(res["count"], dtype=np.int64)
        L_idx, L_rows, L_cnt = res["meka.landmarks"]
        V_idx, V_rows, V_cnt = res["meka.link"]
        # the least squares rows are the cluster's landmarks plus (1+ρ)k further
        # uniform rows: the landmarks anchor the fit where the basis carries its
        # energy, so nearly-zero sampled blocks (large γ) are never inverted into
        # huge link entries
        V_rows, V_cnt = _link_rows(L_idx, L_rows, L_cnt, V_idx, V_rows, V_cnt)

        # small dense driver work: multi-threaded BLAS is far slower at these sizes
        with blas_single_thread():
            eig = []
            for s in range(c):
                cnt = int(L_cnt[s])
                if cnt == 0:
                    eig.append((np.zeros(0), np.zeros((0, 0))))
                    continue
                M_s, vals = inv_sqrt_map(kfun(L_rows[s, :cnt], L_rows[s, :cnt]))
                eig.append((vals, M_s))
            ranks = choose_ranks([v for v, _ in eig], k, self.rank_rule)
            width = max(1, int(ranks.max()) if ranks.size else 1)
            self.ranks_ = ranks.astype(np.int64)
            self.offsets_ = np.concatenate(([0], np.cumsum(ranks)[:-1])).astype(np.int64)
            self.landmark_counts_ = np.asarray(L_cnt, dtype=np.int64)
            self.landmarks_ = np.where(np.arange(m)[None, :, None] < L_cnt[:, None, None], L_rows, 0.0)
            self.maps_ = np.zeros((c, m, width))
            for s, (_, M_s) in enumerate(eig):
                ks = int(ranks[s])
                if ks:
                    self.maps_[s, : M_s.shape[0], :ks] = M_s[:, :ks]

            t0 = time.perf_counter()
            self.link_ = self._fit_links(kfun, V_rows, V_cnt)
            self.link_seconds_ = time.perf_counter() - t0
        self.n_samples_seen_ = int(n)
        self._X_fit = X
        self._W_cache = None
        self.basis_path_ = None
        if self.basis_path is not None:
            from distsketch.io import write_array

            self.basis_path_ = str(write_array(self._basis(X, np.float32), self.basis_path, overwrite=True,
                                               manifest={"what": "MEKA basis", "seed": seed}))
        return self

    def _fit_links(self, kfun: Any, V_rows: np.ndarray, V_cnt: np.ndarray) -> np.ndarray:
        c = int(self.n_clusters)
        total = int(self.ranks_.sum())
        link = np.zeros((total, total))
        A = []
        kmax = 0.0
        for s in range(c):
            ks, cnt = int(self.ranks_[s]), int(V_cnt[s])
            if ks and cnt:
                V = V_rows[s, :cnt]
                A.append(kfun(V, self._landmarks(s)) @ self.maps_[s, : self.landmark_counts_[s], :ks])
                kmax = max(kmax, float(np.max(kernel_diagonal(V, self.kernel, **self.kernel_params_))))
            else:
                A.append(None)
            o = int(self.offsets_[s])
            link[o:o + ks, o:o + ks] = np.eye(ks)
        centre_k = kfun(self.centres_, self.centres_)
        self.n_link_blocks_ = 0
        for s in range(c):
            for t in range(s + 1, c):
                if A[s] is None or A[t] is None or not centre_k[s, t] > self.link_threshold:
                    continue
                G = kfun(V_rows[s, : V_cnt[s]], V_rows[t, : V_cnt[t]])
                tol = self.link_rcond * np.sqrt(max(A[s].shape[0], A[t].shape[0]) * max(kmax, 0.0))
                Lst = link_matrix(A[s], G, A[t], tol=tol)
                os_, ot = int(self.offsets_[s]), int(self.offsets_[t])
                link[os_:os_ + Lst.shape[0], ot:ot + Lst.shape[1]] = Lst
                link[ot:ot + Lst.shape[1], os_:os_ + Lst.shape[0]] = Lst.T
                self.n_link_blocks_ += 1
        return link

    def _landmarks(self, s: int) -> np.ndarray:
        return self.landmarks_[s, : int(self.landmark_counts_[s])]

    def _basis_operands(self) -> tuple:
        return (self.centres_, self.landmarks_, self.maps_, self.landmark_counts_, self.ranks_)

    def _basis_kwargs(self) -> dict:
        return {"kernel": self.kernel, "params": self.kernel_params_, "width": self.maps_.shape[2]}

    def _basis(self, X: Any, dtype: Any) -> Any:
        # the basis coordinates of X's rows, the cluster label last
        return map_blocks(as_lazy(X), basis_block, *self._basis_operands(), n_out=self.maps_.shape[2] + 1,
                          dtype=dtype, kwargs=self._basis_kwargs(),
                          footprint=basis_block_footprint(self.n_features_in_, self.n_clusters,
                                                          self.landmarks_.shape[1], self.maps_.shape[2]),
                          name="meka-basis")

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        """Refuse parameters that X's shape cannot satisfy (before any pass over X)."""
        c = int(self.n_clusters)
        if n_samples < c:
            raise InputError(f"MEKA: n_clusters={c} exceeds the {n_samples} rows of X "
                             f"(n_samples={n_samples}); use fewer clusters.")
        super()._check_params_for_shape(n_samples, n_features)

    def _sample_sizes(self) -> tuple[int, int, int]:
        """(rank k, landmarks m, least-squares rows p) per cluster, as fit draws them."""
        k = int(self.rank)
        m = int(self.n_landmarks) if self.n_landmarks is not None else 2 * k
        if self.rank_rule == "spectrum":
            m = max(m, 2 * k)  # room for clusters that get more than k
        try:
            p = max(1, math.ceil((1.0 + self.rho) * k))
        except OverflowError:  # a rank beyond a float's range: k itself bounds p from below
            p = k
        return k, m, p

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        c, d = int(self.n_clusters), int(n_features)
        k, m, p = self._sample_sizes()
        given = (f"MEKA: n_clusters={c}, rank={k}, n_landmarks={self.n_landmarks}, "
                 f"rho={self.rho} on {d} input features:")
        return [(f"{given} the per-cluster samples ({c} x {m + p} rows of {d + 2}, float64) that",
                 8 * c * (m + p) * (d + 2),
                 "lower rank, n_landmarks or n_clusters (or rho)"),
                (f"{given} the link matrix ({c * k} x {c * k}, float64) that", 8 * (c * k) ** 2,
                 "lower rank or n_clusters")]

    def _n_features_out(self) -> int:
        return int(self.ranks_.sum())

    def transform(self, X: Any) -> Any:
        """Rows of the block-diagonal basis W for (new) points.

        Each row is assigned to its nearest centre s and gets the Nyström
        extension z_s(x) in the columns of cluster s (zeros elsewhere), so that
        G̃(A, B) = transform(A) · link_ · transform(B)ᵀ.

        Parameters
        ----------
        X : ndarray, sparse or dask array of shape (n, d)

        Returns
        -------
        ndarray or dask array of shape (n, Σ k_s)
            Same kind as X.
        """
        self._check_is_fitted("link_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        n_out = int(self.ranks_.sum())
        return map_blocks(X, FiniteRows(scattered_basis_block, "MEKA transform"),
                          *self._basis_operands(), self.offsets_, n_out=n_out, dtype=np.float64,
                          kwargs=self._basis_kwargs(),
                          footprint=scattered_basis_footprint(
                              self.n_features_in_, self.n_clusters, self.landmarks_.shape[1],
                              self.maps_.shape[2], n_out),
                          name="meka-transform")

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """Approximate kernel block G̃(A, B) = W(A) L W(B)ᵀ for small in-memory rows.

        Parameters
        ----------
        A : ndarray of shape (a, d)
        B : ndarray of shape (b, d), default A

        Returns
        -------
        ndarray of shape (a, b)
        """
        WA = np.asarray(self.transform(np.asarray(A)))
        WB = WA if B is None else np.asarray(self.transform(np.asarray(B)))
        return WA @ self.link_ @ WB.T

    def _training_basis(self) -> Any:
        """Basis coordinates of the training rows: a NumPy array when cached or
        small and in memory, else a lazy dask array."""
        from distsketch.io import open_array

        if self.basis_path_ is not None:
            return open_array(self.basis_path_)
        X = getattr(self, "_X_fit", None)
        if X is None and self.train_path_ is not None:
            X = self._X_fit = open_array(self.train_path_)
        if X is None:
            raise ConfigError(
                "MEKA: the training rows are not available (the model was loaded and was fitted "
                "from an in-memory array); refit with basis_path=... or from a Zarr path to use "
                "matvec/matmat/to_dense."
            )
        return self._basis(X, np.float64)

    def _sparse_W(self) -> scipy.sparse.csr_matrix | None:
        cache = getattr(self, "_W_cache", None)
        if cache is not None:
            return cache
        n, width = self.n_samples_seen_, self.maps_.shape[2]
        X = getattr(self, "_X_fit", None)
        if self.basis_path_ is None and (X is None or is_dask(X) or n * (width + 1) * 8 > _CACHE_BYTES):
            return None
        coords = np.asarray(to_numpy(self._training_basis()), dtype=np.float64)
        if n * (width + 1) * 8 > _CACHE_BYTES:
            return None
        labels = coords[:, width].astype(np.int64)
        ks = self.ranks_[labels]
        rows = np.repeat(np.arange(n), ks)
        cols_in = np.concatenate([np.arange(k) for k in ks]) if n else np.zeros(0, np.int64)
        cols = self.offsets_[labels][rows] + cols_in
        W = scipy.sparse.csr_matrix((coords[rows, cols_in], (rows, cols)),
                                    shape=(n, int(self.ranks_.sum())))
        self._W_cache = W
        return W

    def matmat(self, V: np.ndarray) -> np.ndarray:
        """G̃ V = W L Wᵀ V for the training rows, blockwise.

        Parameters
        ----------
        V : ndarray of shape (n, p)

        Returns
        -------
        ndarray of shape (n, p)

        Notes
        -----
        Small in-memory training data: a cached sparse W (n k_s values).
        Otherwise two passes over the basis (streamed from ``basis_path`` or
        recomputed from X): a tree-reduced Wᵀ V ((Σ k_s) × p per task), then
        W (L Wᵀ V) row block by row block.
        """
        self._check_is_fitted("link_")
        V = np.asarray(V, dtype=np.float64)
        vec = V.ndim == 1
        V2 = V.reshape(-1, 1) if vec else V
        if V2.ndim != 2 or V2.shape[0] != self.n_samples_seen_:
            raise InputError(
                f"MEKA.matmat: V has shape {V.shape} but the approximation is "
                f"{self.n_samples_seen_} x {self.n_samples_seen_}; pass one row per training point."
            )
        W = self._sparse_W()
        if W is not None:
            out = W @ (self.link_ @ (W.T @ V2))
        else:
            B = self._training_basis()
            width = self.maps_.shape[2]
            BV = hstack_blocks(B.astype(np.float64), V2)
            U = reduce_blocks(Projection(width, self.offsets_, self.ranks_), BV,
                              name="meka-project")
            Y = map_blocks(B, expand_basis_rows, self.link_ @ U, self.offsets_, self.ranks_,
                           n_out=V2.shape[1], dtype=np.float64, name="meka-expand")
            out = np.asarray(to_numpy(Y))
        return out.ravel() if vec else out

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """G̃ v for a vector of length n (see :meth:`matmat`)."""
        return self.matmat(np.asarray(v, dtype=np.float64).reshape(-1))

    def as_linear_operator(self) -> scipy.sparse.linalg.LinearOperator:
        """G̃ as a symmetric SciPy ``LinearOperator`` of shape (n, n) (for CG)."""
        self._check_is_fitted("link_")
        n = self.n_samples_seen_
        return scipy.sparse.linalg.LinearOperator(
            (n, n), matvec=self.matvec, rmatvec=self.matvec, matmat=self.matmat,
            rmatmat=self.matmat, dtype=np.float64)

    def to_dense(self) -> np.ndarray:
        """The n × n matrix G̃ (only for n ≤ 20000)."""
        self._check_is_fitted("link_")
        n = self.n_samples_seen_
        if n > DENSE_MAX_ROWS:
            raise ConfigError(
                f"MEKA.to_dense: n={n} rows would need {8 * n * n / 2**30:.1f} GiB; use "
                "matvec/matmat or kernel_approx on a sample instead."
            )
        coords = np.asarray(to_numpy(self._training_basis()), dtype=np.float64)
        W = scatter_basis(coords, self.offsets_, self.ranks_)
        return W @ self.link_ @ W.T

    def approximation_bytes(self) -> int:
        """Bytes of the stored approximation (float64): Σ n_s k_s basis values,
        the non-zero link blocks, and the landmarks and maps that regenerate W."""
        self._check_is_fitted("link_")
        basis = int(np.sum(self.cluster_sizes_ * self.ranks_))
        link = int(np.count_nonzero(self.link_))
        ops = int(np.sum(self.landmark_counts_ * (self.n_features_in_ + self.ranks_)))
        return 8 * (basis + link + ops + self.centres_.size)


def _link_rows(L_idx: np.ndarray, L_rows: np.ndarray, L_cnt: np.ndarray, V_idx: np.ndarray,
               V_rows: np.ndarray, V_cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster union of landmark rows and link-sample rows (no duplicates)."""
    c = L_rows.shape[0]
    out = np.zeros((c, L_rows.shape[1] + V_rows.shape[1], L_rows.shape[2]))
    cnt = np.zeros(c, dtype=np.int64)
    for s in range(c):
        idx = np.concatenate([L_idx[s, :L_cnt[s]], V_idx[s, :V_cnt[s]]])
        rows = np.concatenate([L_rows[s, :L_cnt[s]], V_rows[s, :V_cnt[s]]])
        _, first = np.unique(idx, return_index=True)
        first = np.sort(first)
        out[s, :len(first)] = rows[first]
        cnt[s] = len(first)
    return out, cnt
