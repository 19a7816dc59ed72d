"""Nyström feature maps and streaming Nyström kernel PCA, blockwise and out of core.

Over 500 lines because Nystrom features and Nystrom kernel PCA share the landmark pass
and its parameter reference.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from distsketch.blas import blas_single_thread
from distsketch.errors import ConfigError, InputError
from distsketch.estimators.autosize import AutoSized, is_auto
from distsketch.estimators.base import (
    DistsketchEstimator,
    OperatorSize,
    RowMapTransformer,
    TransformerMixin,
    fit_context,
    to_numpy,
)
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_kernel_params
from distsketch.estimators.nystrom.fold import GramFolding, LandmarkFolding
from distsketch.estimators.nystrom.landmark_choice import (
    LANDMARK_CHOICES,
    choose_landmarks,
    fit_kmeans,
    landmark_choice_sizes,
    sample_landmarks,
)
from distsketch.footprint import Footprint
from distsketch.graph import declared_footprint, map_blocks, reduce_blocks
from distsketch.ops.kernels import KERNEL_NAMES, pairwise_kernel
from distsketch.ops.linalg import fix_signs
from distsketch.ops.namespace import densify, host_dtype
from distsketch.ops.nystrom import (
    centred_nystrom_map,
    centred_nystrom_map_footprint,
    ensemble_map,
    inv_sqrt_map,
    nystrom_gram_footprint,
    nystrom_map,
    nystrom_map_footprint,
    randomized_inv_sqrt_map,
)
from distsketch.summaries.covariance import Covariance
from distsketch.validation import Interval, Options
from distsketch.validation.finite import FiniteRows, check_finite_result

__all__ = ["NystromFeatures", "NystromKernelPCA", "fit_kmeans", "sample_landmarks"]

def _landmark_sizes(owner: str, m: int, d: int) -> list[OperatorSize]:
    # the landmarks (m x d) and their m x m kernel matrix, which a fit holds at once
    return [(f"{owner}: n_landmarks={m} on {d} input features: the landmarks ({m} x {d}) and "
             f"their kernel matrix ({m} x {m}, float64) that", 8 * m * (d + m),
             "lower n_landmarks or reduce the input's width first")]


class NystromFeatures(AutoSized, LandmarkFolding, RowMapTransformer):
    """Nyström feature map z(x) = K(x, L) · W_k^{+1/2}, blockwise and out of core.

    z(x)·z(y) is the Nyström approximation K(x, L) W_k⁺ K(L, y) of the kernel.

    Parameters
    ----------
    kernel : str or callable, default "rbf"
        Any kernel of :mod:`distsketch.ops.kernels` ("rbf", "laplacian",
        "cauchy", "polynomial", "linear", "arccos0", "arccos1", "ntk"), a callable
        ``f(A, B) -> (len(A), len(B))``, or ``"precomputed"``: then ``fit`` takes
        the m × m kernel matrix of the landmarks and ``transform`` takes rows of
        kernel values K(x, L) (n × m).
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features, "median" the median
        heuristic on a 1000-row sample (one more pass over X in ``fit``);
        the value used is ``gamma_``.
    degree, coef0 : int, float
        Polynomial kernel parameters.
    n_landmarks : int or "auto", default 100
        Number of landmarks m (sampled rows, k-means centres); "auto"
        chooses the smallest m whose relative kernel error reaches
        ``target_error`` (pilot maps on a 2000-row sample, so at most 2000;
        the error model's exponent is fitted, the decay of the spectrum tail).
    landmarks : {"uniform", "kmeans", "leverage", "rpcholesky"}, array of shape (m, d) or Zarr path
        "uniform": the bottom-m rows of priority hash(seed, row) (one pass,
        chunking-independent); "kmeans": k-means centres (k-means++ and Lloyd on
        a uniform sample of ``kmeans_sample`` rows; Zhang & Kwok); "leverage":
        rows drawn by approximate ridge leverage scores (three passes);
        "rpcholesky": block randomly pivoted Cholesky (six passes); or the
        landmarks themselves.  See
        :func:`~distsketch.estimators.nystrom.landmark_choice.choose_landmarks`.
    rank : int, optional
        Keep the top ``rank`` eigenpairs of W (per expert for "ensemble";
        required by "randomized", default ``n_landmarks // 2`` there).
    variant : {"standard", "ensemble", "randomized"}, default "standard"
        "ensemble": ``n_ensemble`` experts on disjoint landmark subsets with
        uniform weights (Kumar et al. 2009); "randomized": W_k from a randomized
        SVD (Li, Kwok, Lu 2010).
    n_ensemble : int, default 4
        "ensemble": the number of experts.
    n_oversamples : int, default 10
        "randomized": p, extra columns of the Gaussian test matrix.
    n_power_iter : int, default 1
        "randomized": q, power iterations, each two products with W (the
        range of W^{2q+1} Ω is used).  p = 10 and q = 1 are the MEKA
        paper's settings; ``n_oversamples=0, n_power_iter=0`` is the plain
        range finder.  As q grows the rank-k approximation approaches the
        best one (``eigh``'s) at O(m² (k + p)(2q + 1)) cost.
    kmeans_sample : int, default 20000
        Rows of the uniform sample k-means runs on (``landmarks="kmeans"``).
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    landmarks_ : ndarray of shape (m, d)
        (shape (0, m) for a precomputed kernel).
    landmark_indices_ : ndarray of int64
        Global rows of sampled landmarks (empty for k-means and given ones).
    normalization_ : ndarray of shape (m, r)
        The map W_k^{+1/2} (block-diagonal over experts for "ensemble").
    eigenvalues_ : ndarray of shape (r,)
        Kept eigenvalues of W (standard and randomized variants).
    kernel_params_ : dict
    n_landmarks_ : int
        The number of landmarks asked for (``n_landmarks``, or the one "auto"
        chose); ``partial_fit`` keeps it.
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_landmarks="auto"`` only;
        evaluation rows that are landmarks are left out of ``kernel_error_``).
    n_samples_seen_ : int
        Rows seen so far (``fit`` plus every ``partial_fit``).
    n_features_in_, n_output_features_ : int

    Notes
    -----
    Fit: one pass over X to sample landmarks (or the k-means sample), O(m³) on
    the driver.  Transform per task: the block, a 256 × (m + r) tile and the
    block × r output; the m × d landmarks and m × r map travel once per worker.
    Each output row is bitwise independent of the chunking (canonical tiles).
    Stored approximation: n × r floats of features (or m·(d + r) to recompute).

    References
    ----------
    Williams, Seeger. Using the Nyström method to speed up kernel machines. NIPS 2001.
    Kumar, Mohri, Talwalkar. Ensemble Nyström method. NIPS 2009.
    Zhang, Kwok. Clustered Nyström method for large scale manifold learning and
    dimension reduction. IEEE TNN 2010.
    Li, Kwok, Lu. Making large-scale Nyström approximation possible. ICML 2010.
    Halko, Martinsson, Tropp. Finding structure with randomness. SIAM Review 2011.
    Si, Hsieh, Dhillon. Memory efficient kernel approximation. ICML 2014 (Table 2).

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import NystromFeatures
    >>> X = np.random.default_rng(0).normal(size=(200, 5))
    >>> Z = NystromFeatures(gamma=0.2, n_landmarks=50, random_state=0).fit_transform(X)
    >>> Z.shape[0]
    200
    """

    _array_api_support = True

    _parameter_constraints = {
        "kernel": [Options(KERNEL_NAMES | {"precomputed"}), "callable"],
        "gamma": GAMMA_CONSTRAINT,
        "degree": [Interval(int, 1, None)],
        "coef0": [Interval(float, None, None)],
        "n_landmarks": [Interval(int, 1, None), Options({"auto"})],
        "landmarks": [Options(LANDMARK_CHOICES), "array-like", str, os.PathLike],
        "rank": [Interval(int, 1, None), None],
        "variant": [Options({"standard", "ensemble", "randomized"})],
        "n_ensemble": [Interval(int, 1, None)],
        "n_oversamples": [Interval(int, 0, None)],
        "n_power_iter": [Interval(int, 0, None)],
        "kmeans_sample": [Interval(int, 1, None)],
        "target_error": [Interval(float, 0, None, closed="neither"), None],
        "random_state": ["random_state"],
    }
    # "auto": landmarks from a 2000-row pilot sample, the error exponent fitted
    _size_param = "n_landmarks"
    _auto_start = 16
    _auto_slope = None
    _auto_fit_rows = 2000
    _auto_rows_cap = True

    def __init__(self, *, kernel: Any = "rbf", gamma: float | str | None = None, degree: int = 3,
                 coef0: float = 1.0, n_landmarks: int | str = 100, landmarks: Any = "uniform",
                 rank: int | None = None, variant: str = "standard", n_ensemble: int = 4,
                 kmeans_sample: int = 20000, random_state: Any = None,
                 n_oversamples: int = 10, n_power_iter: int = 1,
                 target_error: float | None = None):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.rank = rank
        self.variant = variant
        self.n_ensemble = n_ensemble
        self.kmeans_sample = kmeans_sample
        self.random_state = random_state
        self.n_oversamples = n_oversamples
        self.n_power_iter = n_power_iter
        self.target_error = target_error

    _accepts_sparse = True

    def _precomputed(self) -> bool:
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    @fit_context
    def fit(self, X: Any, y: Any = None) -> NystromFeatures:
        """Choose the landmarks and compute W_k^{+1/2}.

        Parameters
        ----------
        X : ndarray, sparse, dask array or Zarr path of shape (n, d)
            Training rows; for ``kernel="precomputed"`` the (m, m) landmark kernel.

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        self.landmark_indices_ = np.zeros(0, dtype=np.int64)
        if is_auto(self.n_landmarks) and (self._precomputed() or not (isinstance(self.landmarks, str)
                                                             and self.landmarks in LANDMARK_CHOICES)):
            raise ConfigError("NystromFeatures: n_landmarks='auto' draws landmarks from the rows of "
                              "X and measures their kernel error; with kernel='precomputed' or "
                              "landmarks given as an array pass n_landmarks as an integer.")
        self.n_landmarks_ = self._resolve_size(X) if not self._precomputed() else int(self.n_landmarks)
        if self._precomputed():
            W = np.asarray(to_numpy(densify(X)), dtype=np.float64)
            if W.shape[0] != W.shape[1]:
                raise InputError(
                    f"kernel='precomputed': fit expects the square m x m kernel matrix of the "
                    f"landmarks, got shape {W.shape}."
                )
            self.kernel_params_ = {}
            self.landmarks_ = np.zeros((0, W.shape[0]))
        else:
            name, params = fit_kernel_params(self, X)
            self.kernel_params_ = params
            self.landmarks_, self.landmark_indices_ = choose_landmarks(
                X, self.landmarks, self.n_landmarks_, seed, kernel=name, kernel_params=params,
                kmeans_sample=self.kmeans_sample)
            W = pairwise_kernel(self.landmarks_, None, name, **params)
        with blas_single_thread():
            self._fit_map(W, seed)
        self.n_samples_seen_ = int(X.shape[0])
        self._certify(X)
        return self

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        # with a precomputed kernel, X is the landmarks' kernel matrix itself
        return [] if self._precomputed() else _landmark_sizes(
            "NystromFeatures", self._size_for_check(), int(n_features)) + \
            landmark_choice_sizes("NystromFeatures", self.landmarks, self._size_for_check(),
                                  int(n_features))

    @fit_context
    def partial_fit(self, X: Any, y: Any = None) -> NystromFeatures:
        """Fold appended rows into the uniform landmark sample and refresh the map.

        The rows of X are numbered after the ``n_samples_seen_`` rows already seen;
        the bottom-k sample of the new rows is merged with the stored sample,
        so the result equals ``fit`` on all rows at once: ``fold(summarize(X,
        row_offset=n_samples_seen_))``.  Only ``landmarks="uniform"`` is
        mergeable this way.

        Parameters
        ----------
        X : ndarray, sparse, dask array or Zarr path of shape (n_new, d)

        Returns
        -------
        self
        """
        if not hasattr(self, "normalization_"):
            return self.fit(X)
        return self.fold(self.summarize(X, row_offset=self.n_samples_seen_))

    def _fit_map(self, W: np.ndarray, seed: int) -> None:
        m = W.shape[0]
        self.eigenvalues_ = np.zeros(0)
        if self.variant == "standard":
            self.normalization_, self.eigenvalues_ = inv_sqrt_map(W, self.rank)
        elif self.variant == "ensemble":
            if self.n_ensemble > m:
                raise ConfigError(
                    f"NystromFeatures: n_ensemble={self.n_ensemble} exceeds the {m} landmarks; "
                    "use fewer experts or more landmarks."
                )
            self.normalization_ = ensemble_map(W, self.n_ensemble, self.rank)
        else:
            rank = self.rank if self.rank is not None else max(1, m // 2)
            self.normalization_, self.eigenvalues_ = randomized_inv_sqrt_map(
                W, rank, seed, n_oversamples=self.n_oversamples, n_power_iter=self.n_power_iter)
        self.n_output_features_ = int(self.normalization_.shape[1])

    @property
    def _map_block(self) -> Any:
        # a partial of a module-level function: the graph carries no estimator
        return functools.partial(nystrom_map, kernel=self.kernel, params=self.kernel_params_)

    def _operands(self) -> tuple:
        return (self.landmarks_, self.normalization_)

    def _map_footprint(self) -> Footprint:
        return nystrom_map_footprint(self.n_features_in_, self.normalization_.shape[0],
                                     self.n_output_features_)

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """Approximate kernel block z(A) z(B)ᵀ (rows of kernel values if precomputed)."""
        return super().kernel_approx(A, B)

    def approximation_bytes(self, n_rows: int | None = None) -> int:
        """Bytes of the stored approximation: the n × r features (float64) when
        ``n_rows`` is given, else the operator (landmarks + map)."""
        self._check_is_fitted("normalization_")
        if n_rows is not None:
            return int(8 * n_rows * self.n_output_features_)
        return int(8 * (self.landmarks_.size + self.normalization_.size))


class NystromKernelPCA(TransformerMixin, GramFolding, DistsketchEstimator):
    """Streaming Nyström kernel PCA: top eigenvectors of the Nyström approximation.

    With Z = K(X, L) W^{+1/2} (n × r), G̃ = Z Zᵀ; its principal directions come
    from the r × r matrix ZᵀZ (= W^{+1/2} CᵀC W^{+1/2}, C = K(X, L)), which is
    tree-reduced over row blocks in one pass.

    Parameters
    ----------
    n_components : int, default 10
        Number of principal components k.
    kernel, gamma, degree, coef0
        As in :class:`NystromFeatures`.
    n_landmarks : int, default 200
        Uniform landmarks c.
    center : bool, default False
        Centre the features (kernel PCA of the centred kernel).  The streaming
        baseline (Ghashami et al.) does not centre.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    landmarks_ : ndarray of shape (c, d)
    normalization_ : ndarray of shape (c, r)
    components_ : ndarray of shape (n_components, r)
        Top eigenvectors of the (centred) ZᵀZ, one per row: the principal
        directions in the r-dimensional Nyström feature space, so that
        ``transform(X) = (z(X) - mean_) @ components_.T``.
    eigenvalues_ : ndarray of shape (k,)
        Eigenvalues of G̃ (of the centred G̃ when ``center``).
    mean_ : ndarray of shape (r,)
    gram_ : ndarray of shape (r, r)
        ZᵀZ over all rows seen (the mergeable state of ``partial_fit``).
    feature_sum_ : ndarray of shape (r,)
        Column sums of Z over all rows seen.
    n_samples_seen_, n_features_in_ : int

    Notes
    -----
    Two passes (landmark sample, then the tree-reduced r × r Gram matrix);
    ``partial_fit`` makes one pass over the new rows.
    Per task: the block, its block × r features and an r × r state;
    communication O(r²) per merge.

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016 (streaming Nyström baseline).
    Williams, Seeger. Using the Nyström method to speed up kernel machines. NIPS 2001.
    """

    _array_api_support = True

    _accepts_sparse = True
    # partial_fit keeps the first batch's landmarks: exact sums, but not a refit on all rows
    partial_fit_equals_fit = False

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None)],
        "kernel": [Options(KERNEL_NAMES), "callable"],
        "gamma": GAMMA_CONSTRAINT,
        "degree": [Interval(int, 1, None)],
        "coef0": [Interval(float, None, None)],
        "n_landmarks": [Interval(int, 1, None)],
        "center": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_components: int = 10, kernel: Any = "rbf", gamma: float | str | None = None,
                 degree: int = 3, coef0: float = 1.0, n_landmarks: int = 200, center: bool = False,
                 random_state: Any = None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_landmarks = n_landmarks
        self.center = center
        self.random_state = random_state

    @fit_context
    def fit(self, X: Any, y: Any = None) -> NystromKernelPCA:
        """Sample landmarks, tree-reduce ZᵀZ, and keep its top eigenvectors.

        Parameters
        ----------
        X : ndarray, sparse, dask array or Zarr path of shape (n, d)

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        _, params = fit_kernel_params(self, X)
        self.kernel_params_ = params
        self.landmark_indices_, self.landmarks_ = sample_landmarks(X, self.n_landmarks, seed)
        W = pairwise_kernel(self.landmarks_, None, self.kernel, **params)
        with blas_single_thread():
            self.normalization_, _ = inv_sqrt_map(W)
        state = self._gram_state(X)
        self.gram_, self.feature_sum_, self.n_samples_seen_ = state["ztz"], state["sum"], int(state["n"])
        self._solve()
        return self

    def _check_params(self) -> None:
        if self.n_components > self.n_landmarks:
            raise ConfigError(
                f"NystromKernelPCA: n_components={self.n_components} exceeds "
                f"n_landmarks={self.n_landmarks}; the r landmarks span at most r components: "
                "raise n_landmarks or lower n_components.")

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        """Refuse parameters that X's shape cannot satisfy (before any pass over X)."""
        self._check_params_once()
        if self.n_components > n_samples:
            raise InputError(
                f"NystromKernelPCA: n_components={self.n_components} exceeds the {n_samples} rows "
                f"of X (n_samples={n_samples}), which span at most that many components; lower "
                "n_components.")
        super()._check_params_for_shape(n_samples, n_features)

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        return _landmark_sizes("NystromKernelPCA", int(self.n_landmarks), int(n_features))

    @fit_context
    def partial_fit(self, X: Any, y: Any = None) -> NystromKernelPCA:
        """Fold new rows into the stored r × r Gram matrix and refresh the components.

        The first call fits (and samples the landmarks from that batch); later
        calls keep the landmarks, so the feature map z is fixed and ZᵀZ, the
        feature sums and the row count are exact sums: the result equals one
        pass over all rows with those landmarks.

        Parameters
        ----------
        X : ndarray, sparse, dask array or Zarr path of shape (n_new, d)

        Returns
        -------
        self

        Notes
        -----
        One pass over the new rows only; the landmarks of the first batch stay.
        To resample landmarks over all rows, call ``fit`` on all rows instead.
        """
        if not hasattr(self, "gram_"):
            return self.fit(X)
        return self.fold(self.summarize(X, row_offset=self.n_samples_seen_))

    def _gram_state(self, X: Any, row_start: int = 0) -> dict:
        r = self.normalization_.shape[1]
        summary = Covariance(transform=functools.partial(nystrom_map, kernel=self.kernel,
                                                         params=self.kernel_params_, dtype=np.float64),
                             n_columns=r)
        # the Gram state's own declaration and what the fused map adds to its task
        footprint = declared_footprint(summary, X) + nystrom_gram_footprint(
            X.shape[1], self.landmarks_.shape[0], r)
        return reduce_blocks(summary, X, self.landmarks_, self.normalization_, footprint=footprint,
                             row_start=row_start, name="nystrom-kpca")

    def _solve(self) -> None:
        r = self.normalization_.shape[1]
        n = self.n_samples_seen_
        self.mean_ = self.feature_sum_ / n if self.center else np.zeros(r)
        C = self.gram_ - n * np.outer(self.mean_, self.mean_)
        check_finite_result(C, stage="Nystrom KPCA covariance eigendecomposition")
        with blas_single_thread():
            vals, vecs = np.linalg.eigh(0.5 * (C + C.T))
        order = np.argsort(vals)[::-1][: min(self.n_components, r)]
        self.eigenvalues_ = np.maximum(vals[order], 0.0)
        V = vecs[:, order]
        self.components_ = np.ascontiguousarray(fix_signs(V, axis=0).T)

    def _projection(self) -> tuple[np.ndarray, np.ndarray]:
        # the transposed view of the C-ordered rows is the column-major (r, k) eigenvector
        # matrix that eigh returns, so the products round as they always have
        V = np.ascontiguousarray(self.components_).T
        return self.normalization_ @ V, self.mean_ @ V

    def transform(self, X: Any) -> Any:
        """Project rows onto the top kernel principal components.

        Parameters
        ----------
        X : ndarray, sparse or dask array of shape (n, d)

        Returns
        -------
        ndarray or dask array of shape (n, n_components)
            Same kind as X.
        """
        self._check_is_fitted("components_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        P, shift = self._projection()
        dt = host_dtype(X.dtype) if host_dtype(X.dtype) in (np.float32, np.float64) else np.float64
        return map_blocks(X, FiniteRows(centred_nystrom_map, "NystromKernelPCA transform"),
                          self.landmarks_, P, shift, n_out=P.shape[1], dtype=dt,
                          kwargs={"kernel": self.kernel, "params": self.kernel_params_},
                          footprint=centred_nystrom_map_footprint(
                              X.shape[1], self.landmarks_.shape[0], P.shape[1]),
                          name="nystrom-kpca-transform")

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        return self.fit(X).transform(X)

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """Rank-k approximation (K(A, L) P)(K(B, L) P)ᵀ with P = W^{+1/2} V_k."""
        self._check_is_fitted("components_")
        P, _ = self._projection()
        ZA = nystrom_map(np.asarray(A, dtype=np.float64), 0, self.landmarks_, P,
                         kernel=self.kernel, params=self.kernel_params_)
        ZB = ZA if B is None else nystrom_map(np.asarray(B, dtype=np.float64), 0, self.landmarks_,
                                              P, kernel=self.kernel, params=self.kernel_params_)
        return ZA @ ZB.T
