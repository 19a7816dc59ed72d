"""Streaming kernel PCA: random Fourier features + Frequent Directions (SKPCA) or
an exact feature covariance (RNCA), both out of core and mergeable."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError
from distsketch.estimators.base import (
    DistsketchEstimator,
    MergeableEstimator,
    OperatorSize,
    TransformerMixin,
    fit_context,
    summary_context,
)
from distsketch.estimators.decomposition.frequent_directions import fd_state_of, store_fd_state
from distsketch.estimators.features.rff import RandomFourierFeatures
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_kernel_params
from distsketch.graph import map_blocks, reduce_blocks
from distsketch.ops.fd import FD_STATES, fd_covariance_state_bytes, fd_state
from distsketch.ops.kernels import SHIFT_INVARIANT_NAMES
from distsketch.ops.linalg import fix_signs
from distsketch.ops.namespace import host_dtype, to_host
from distsketch.ops.rff import RFF_FORMS, rff_embed, rff_embed_footprint, rff_operands_footprint
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary
from distsketch.summaries.rff_covariance import MAP_ROWS, BlockedCovariance, RFFRows
from distsketch.validation import Interval, Options
from distsketch.validation.finite import FiniteRows, check_finite_result, is_array_api

__all__ = ["StreamingKernelPCA"]


@single_threaded_blas
def _eig_components(ztz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    check_finite_result(ztz, stage="streaming KPCA covariance eigendecomposition")
    lam, V = np.linalg.eigh(np.asarray(ztz, dtype=np.float64))
    lam = np.maximum(lam[::-1], 0.0)
    return fix_signs(V[:, ::-1].T, axis=1), np.sqrt(lam)


class StreamingKernelPCA(TransformerMixin, MergeableEstimator, DistsketchEstimator):
    """Kernel PCA of data too large for memory, in one pass (Ghashami et al. 2016).

    Rows are mapped blockwise to m random Fourier features z(x) (float32 for
    float32 data), and the n × m feature matrix Z, never materialised, is
    summarised either by a Frequent Directions sketch B (ℓ × m, ``method="fd"``,
    SKPCA) or by the exact m × m matrix ZᵀZ (``method="rnca"``, randomized
    nonlinear component analysis).  The k kernel principal directions Vₖ are the
    top right singular vectors of B (or eigenvectors of ZᵀZ); the embedding of
    x is Vₖ z(x), and the approximate kernel is G̃ = Z Vₖᵀ Vₖ Zᵀ.

    Parameters
    ----------
    n_components : int, default 10
        k, the output width: the number of principal components (≤
        ``sketch_size`` for "fd", ≤ ``n_random_features``).
    kernel : {"rbf", "laplacian", "cauchy"}, default "rbf"
        Shift-invariant kernel (see :class:`~distsketch.RandomFourierFeatures`).
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features_in_, "median" the median
        heuristic on a 1000-row sample (one more pass over X in ``fit``).
    n_random_features : int, default 1024
        m, the width of the inner random Fourier feature map (the
        ``n_components`` of its :class:`~distsketch.RandomFourierFeatures`).
    sketch_size : int, default 64
        ℓ, rows of the Frequent Directions sketch (``method="fd"``).
    method : {"fd", "rnca"}, default "fd"
        "fd": SKPCA; "rnca": exact covariance of the features.
    orthogonal : bool, default False
        Orthogonal random features.
    rff_form : {"offset", "paired"}, default "offset"
        ``form`` of the inner :class:`~distsketch.RandomFourierFeatures`;
        "paired" (cos, sin per frequency, lower variance at equal width)
        needs an even ``n_random_features``.
    split_every : int, default 8
        Merge fan-in of the fit's tree reductions: states are merged
        ``split_every`` at a time, more where a tree would be over three merges
        deep (more than ``split_every³`` blocks), fewer where a merge task
        would exceed the memory budget (:func:`~distsketch.graph.choose_fan_in`).
    random_state : int, Generator or None
        Seed of the random features.
    state : {"auto", "sketch", "covariance"}, default "auto"
        What ``method="fd"`` accumulates: "sketch", the streaming FD sketch;
        "covariance", the exact ZᵀZ summed over blocks and shrunk once at the
        end (the guarantee of :class:`~distsketch.FrequentDirections`' Notes);
        "auto", "covariance" for input of another array namespace (CuPy on a
        GPU) with ``n_random_features`` ≤ 2048, else "sketch".  Unused by
        "rnca".

    Attributes
    ----------
    features_ : RandomFourierFeatures
        The fitted feature map (m features).
    gamma_ : float
        The kernel scale used.
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    components_ : ndarray of shape (n_components, n_random_features)
        Vₖ, orthonormal rows in feature space:
        ``transform(X) = features_.transform(X) @ components_.T`` (uncentred).
    explained_variance_ : ndarray of shape (n_components,)
        σᵢ²/n: the (uncentred) second moment of the rows of Z along each
        component, as captured by the sketch.
    singular_values_ : ndarray of shape (min(sketch_size, n_random_features),) or (n_random_features,)
        All singular values of B ("fd") or of Z ("rnca").
    sketch_ : ndarray of shape (sketch_size, n_random_features)
        The Frequent Directions sketch ("fd" only).
    shrinkage_ : float
        Δ ≥ ‖ZᵀZ − BᵀB‖₂ ("fd" only).
    state_ : {"sketch", "covariance"}
        The state ``state`` resolved to in ``fit`` ("fd" only).
    covariance_ : ndarray of shape (n_random_features, n_random_features)
        ZᵀZ ("rnca", and "fd" with ``state_ == "covariance"``).
    feature_sum_ : ndarray of shape (n_random_features,)
        Column sums of Z ("rnca" only).
    sq_frobenius_ : float
        ‖Z‖_F².
    n_samples_seen_ : int
        Rows seen so far (``fit`` plus every ``partial_fit``).
    n_features_in_ : int
    seed_ : int
    fingerprint_ : dict
        Identity of the input when fitted from a Zarr path.

    Notes
    -----
    Per row: 2·d·m flops and m cos for the features, then about 12·ℓ·m
    flops for FD or 2·m² for RNCA; FD folds a large block (m ≤ 2048) through
    its m × m covariance instead, at RNCA's 2·m² plus one top-ℓ
    eigendecomposition per block, when that is cheaper
    (:func:`~distsketch.ops.fd.fd_block_formulation`).  Per-task memory: the
    input block, at most 2048 × m mapped features and an O(ℓ·m) (FD; O(m²)
    while a block is folded through its covariance) or O(m²) (RNCA) state,
    independent of n.  Communication: the d × m operator once per worker and
    one state per block (ℓ·m or m² float64), merged ``split_every`` at a time.

    With ``state_ == "covariance"`` FD sums ZᵀZ exactly (2·m² flops per
    row, one GEMM per block on a GPU, an m × m state, no eigendecomposition
    per block or merge) and shrinks it once: the sketch's top ℓ − 1
    directions are then RNCA's, its error ‖ZᵀZ − BᵀB‖₂ = λ_ℓ(ZᵀZ), at most
    the streaming sketch's, and it does not depend on the chunking.

    Centring is not applied: as in the paper, G̃ approximates the kernel matrix
    itself.  The FD sketch depends on the chunking and merge order; the FD
    guarantee ‖ZᵀZ − BᵀB‖₂ ≤ ‖Z − Z_k‖_F²/(ℓ − k) does not.  The features and
    the embedding of a given row are bitwise identical for every chunking.

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016.
    Lopez-Paz, Sra, Smola, Ghahramani, Schölkopf. Randomized nonlinear component
    analysis. ICML 2014 (RNCA).

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import StreamingKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(2000, 10)).astype(np.float32)
    >>> kpca = StreamingKernelPCA(n_components=5, n_random_features=256, sketch_size=32,
    ...                           random_state=0).fit(X)
    >>> kpca.transform(X).shape
    (2000, 5)
    """

    _array_api_support = True

    _accepts_sparse = True

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None)],
        "kernel": [Options(SHIFT_INVARIANT_NAMES)],
        "gamma": GAMMA_CONSTRAINT,
        "n_random_features": [Interval(int, 1, None)],
        "sketch_size": [Interval(int, 1, None)],
        "method": [Options({"fd", "rnca"})],
        "orthogonal": ["boolean"],
        "rff_form": [Options(RFF_FORMS)],
        "split_every": [Interval(int, 2, None)],
        "random_state": ["random_state"],
        "state": [Options(set(FD_STATES))],
    }

    def __init__(self, *, n_components: int = 10, kernel: str = "rbf", gamma: float | str | None = None,
                 n_random_features: int = 1024, sketch_size: int = 64, method: str = "fd",
                 orthogonal: bool = False, split_every: int = 8, random_state: Any = None,
                 rff_form: str = "offset", state: str = "auto"):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.n_random_features = n_random_features
        self.sketch_size = sketch_size
        self.method = method
        self.orthogonal = orthogonal
        self.split_every = split_every
        self.random_state = random_state
        self.rff_form = rff_form
        self.state = state

    def _check_params(self) -> None:
        m = self.n_random_features
        limit = min(self.sketch_size, m) if self.method == "fd" else m
        if self.n_components > limit:
            what = ("min(sketch_size, n_random_features)" if self.method == "fd"
                    else "n_random_features")
            raise ConfigError(
                f"StreamingKernelPCA: n_components={self.n_components} exceeds {what}={limit}; "
                "lower n_components or raise sketch_size/n_random_features.")
        if self.rff_form == "paired" and m % 2:
            raise ConfigError(
                f"StreamingKernelPCA: rff_form='paired' needs an even n_random_features (a cos "
                f"and a sin per frequency); got {m}. Use {m + 1} or {m - 1}.")

    def _summary(self) -> Any:
        if self.method == "fd":
            # a model saved before ``state_`` existed holds a streaming sketch
            return FrequentDirectionsSummary(self.sketch_size, transform=RFFRows(),
                                             n_columns=self.n_random_features, map_rows=MAP_ROWS,
                                             state=getattr(self, "state_", "sketch"))
        return BlockedCovariance(transform=RFFRows(), n_columns=self.n_random_features)

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        # the feature map's weights (said as RandomFourierFeatures says them), then the summary
        weights = RandomFourierFeatures(n_components=self.n_random_features)
        m, l = int(self.n_random_features), int(self.sketch_size)
        # "fd" keeps a streaming sketch unless its state is (before fit: asks for) the covariance
        sketch = self.method == "fd" and getattr(self, "state_", self.state) != "covariance"
        shape = (f"sketch_size={self.sketch_size}, n_random_features={self.n_random_features}: "
                 "the FD sketch and its merge buffers" if sketch else
                 f"n_random_features={self.n_random_features}: the covariance ZᵀZ and its "
                 "merge buffer")
        state_bytes = 4 * l * m * 8 + 8 * (2 * l) ** 2 if sketch else 2 * fd_covariance_state_bytes(m)
        return [*weights._operator_sizes(n_samples, n_features),
                (f"StreamingKernelPCA(method={self.method!r}) with {shape} (float64) that",
                 state_bytes, "lower n_random_features" +
                 (" or sketch_size" if sketch else
                  " or use state='sketch'" if self.method == "fd" else " or use method='fd'"))]

    def _reduce(self, X: Any, row_start: int = 0) -> dict:
        d = int(X.shape[1])
        summary = self._summary()
        # the summary's chunk maps the rows itself: it also holds the map's operator
        footprint = (summary.footprint(d, host_dtype(X.dtype).itemsize)
                     + rff_operands_footprint(d, int(self.n_random_features)))
        return reduce_blocks(summary, X, *self.features_._operands(),
                             split_every=self.split_every, footprint=footprint,
                             row_start=row_start, name=f"skpca-{self.method}")

    def _set_state(self, state: dict) -> None:
        k = int(self.n_components)
        self.n_samples_seen_ = int(state["n"])
        if self.method == "fd":
            Vt, s = store_fd_state(self, state)
        else:
            self.covariance_ = np.asarray(to_host(state["ztz"]), dtype=np.float64)
            self.feature_sum_ = np.asarray(to_host(state["sum"]), dtype=np.float64)
            self.sq_frobenius_ = float(np.trace(self.covariance_))
            Vt, s = _eig_components(self.covariance_)
        self.components_ = np.ascontiguousarray(Vt[:k])
        self.singular_values_ = s
        self.explained_variance_ = s[:k] ** 2 / max(1, self.n_samples_seen_)

    def _state(self) -> dict:
        if self.method == "fd":
            return fd_state_of(self)
        return {"n": self.n_samples_seen_, "sum": self.feature_sum_, "ztz": self.covariance_}

    @fit_context
    def fit(self, X: Any, y: Any = None) -> StreamingKernelPCA:
        """Learn the kernel principal components of X in one pass.

        Parameters
        ----------
        X : ndarray, sparse matrix, dask array or Zarr path of shape (n_samples, n_features_in)
        y : ignored

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        if self.method == "fd":
            self.state_ = fd_state(self.state, int(self.n_random_features),
                                   on_device=is_array_api(getattr(X, "_meta", X)))
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        _, params = fit_kernel_params(self, X)
        self.kernel_params_ = params
        self.features_ = RandomFourierFeatures(
            kernel=self.kernel, gamma=params["gamma"], n_components=self.n_random_features,
            orthogonal=self.orthogonal, form=self.rff_form, random_state=seed).fit(X[:1, :])
        self._set_state(self._reduce(X))
        return self

    @fit_context
    def partial_fit(self, X: Any, y: Any = None) -> StreamingKernelPCA:
        """Fold new rows into the stored summary.

        The new rows' summary (FD sketch or ZᵀZ) is merged with the stored one.
        New rows are numbered after the rows already seen, so their features are
        bitwise those of ``fit`` on the concatenation: for "rnca" the result
        equals that fit up to summation order (float32 features: the rounding
        of their float32 products, docs/architecture.md "Precision"); for "fd"
        the FD guarantee holds for all rows seen.

        Parameters
        ----------
        X : ndarray, sparse matrix, dask array or Zarr path of shape (n_samples, n_features_in)
        y : ignored

        Returns
        -------
        self
        """
        if not hasattr(self, "features_"):
            return self.fit(X)
        return self.fold(self.summarize(X, row_offset=self.n_samples_seen_))

    @summary_context
    def summarize(self, X: Any, y: Any = None, *, row_offset: int) -> dict:
        """The FD sketch ("fd") or ZᵀZ ("rnca") state of rows X (global rows from ``row_offset``).

        See :class:`~distsketch.estimators.base.MergeableEstimator`; reads only
        ``features_``, changes nothing.
        """
        self._check_is_fitted("features_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        return self._reduce(X, row_start=row_offset)

    def transform(self, X: Any) -> Any:
        """Embed rows: Vₖ z(x) for each row x.

        Parameters
        ----------
        X : ndarray, sparse matrix, dask array or Zarr path of shape (n_samples, n_features_in)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_components)
            NumPy for NumPy input, a lazy dask array for dask or Zarr input;
            float32 for float32 input.
        """
        self._check_is_fitted("components_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        dt = host_dtype(X.dtype) if host_dtype(X.dtype) in (np.float32, np.float64) else \
            np.dtype(np.float64)
        k = int(self.components_.shape[0])
        V = np.ascontiguousarray(self.components_.T)
        return map_blocks(X, FiniteRows(rff_embed, "StreamingKernelPCA transform"),
                          *self.features_._operands(), V, n_out=k, dtype=dt,
                          footprint=rff_embed_footprint(X.shape[1], int(self.n_random_features),
                                                        k, dt.itemsize),
                          name="skpca-transform")

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        """``fit(X)`` then ``transform(X)`` (two passes over X)."""
        return self.fit(X).transform(X)

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """Approximate kernel block G̃(A, B) = (Vₖ z(A))ᵀ-products, float64.

        Parameters
        ----------
        A : ndarray of shape (a, n_features_in)
        B : ndarray of shape (b, n_features_in), optional (default A)

        Returns
        -------
        ndarray of shape (a, b)
        """
        EA = np.asarray(self.transform(np.asarray(A)), dtype=np.float64)
        EB = EA if B is None else np.asarray(self.transform(np.asarray(B)), dtype=np.float64)
        return EA @ EB.T
