"""k-Space approximate kernel PCA and approximate kernel principal component
regression for the polynomial kernel (Avron, Nguyen, Woodruff 2014).

k-Space (Algorithm 1): with two independent TensorSketches S (m columns) and
T (r columns),

1. compute φ(A)·S and φ(A)·T — here the tree-reduced products
   G = (φ(A)S)ᵀ(φ(A)S) (m × m) and C = (φ(A)S)ᵀ(φ(A)T) (m × r), one pass;
2. U = φ(A)·S·R⁻¹ is an orthonormal basis of the column space of φ(A)S, with
   R⁻¹ from the eigendecomposition of G (a pseudo-inverse square root, so a
   rank-deficient sketch is handled);
3. W = top-k left singular vectors of Uᵀφ(A)T = R⁻ᵀC;
4. V = U·W = φ(A)·S·R⁻¹·W.

The mapping x ↦ TensorSketch_S(x)·R⁻¹·W applies to new points (the paper's
experiments), so ``transform`` embeds any data.  ``sample`` fits the mapping on
a row sample (bottom-k hash priorities) and applies it to all rows.
Theorem 7's factorisation φ(A) ≈ V·U·φ(R) is computed on ``n_landmarks``
sampled rows R with U = Vᵀ K(A, R) K(R, R)⁺ (a second pass), which also
gives ``kernel_approx``.

Over 500 lines because k-Space kernel PCA and its PCR share one two-pass algorithm and
its parameter reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg
from sklearn.base import ClassifierMixin, RegressorMixin

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError, InputError, MemoryBudgetError, NotFittedError
from distsketch.estimators.base import (
    DistsketchEstimator,
    OperatorSize,
    TransformerMixin,
    fit_context,
    to_numpy,
)
from distsketch.estimators.features.polynomial import TensorSketch
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_gamma
from distsketch.graph import hstack_blocks, map_blocks, reduce_blocks
from distsketch.metrics import sample_rows
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.linalg import fix_signs, row_stable_matmul
from distsketch.ops.namespace import asarray, host_dtype, namespace, to_host
from distsketch.ops.projection import affine_map_footprint, affine_rows
from distsketch.ops.random import hash_uint64
from distsketch.summaries.covariance import Covariance
from distsketch.summaries.kspace import FactorCross, SketchGram
from distsketch.summaries.ridge import dense_float64
from distsketch.validation import Interval, check_targets, is_dask
from distsketch.validation.finite import FiniteRows, check_finite_result

__all__ = ["KSpaceKernelPCA", "KernelPCR"]


def _sub_seed(seed: int, purpose: str) -> int:
    return int(hash_uint64(seed, purpose, 0) >> np.uint64(1))


def _apply_affine(Z: Any, P: np.ndarray, b: np.ndarray | None = None) -> Any:
    dt = host_dtype(Z.dtype) if host_dtype(Z.dtype) in (np.float32, np.float64) else \
        np.dtype(np.float64)
    bias = np.zeros(P.shape[1]) if b is None else np.asarray(b)
    return map_blocks(Z, FiniteRows(affine_rows, "k-space projection"),
                      P.astype(dt), bias.astype(dt), n_out=P.shape[1], dtype=dt,
                      footprint=affine_map_footprint(Z.shape[1], P.shape[1]),
                      name="kspace-project")


@single_threaded_blas
def _inv_sqrt(G: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Columns Q Λ^{-1/2} over the eigenvalues above rtol·max (pseudo-inverse square root)."""
    check_finite_result(G, stage="k-space Gram eigendecomposition")
    lam, Q = scipy.linalg.eigh(0.5 * (G + G.T))
    keep = lam > rtol * max(lam.max(), 0.0) if lam.size and lam.max() > 0 else np.zeros(lam.size, bool)
    return Q[:, keep] / np.sqrt(lam[keep])


class _KSpaceChecks:
    """The parameter checks and sizes KSpaceKernelPCA and KernelPCR share."""

    n_components: int
    degree: int
    coef0: float
    sketch_dim: int | None
    embed_size: int | None
    sample: int | None
    n_landmarks: int | None

    def _check_params(self, n_samples: int | None = None, n_features: int | None = None) -> None:
        """n_components ≤ sketch_dim, ≤ the rows it is fitted on and ≤ the dimension of
        the polynomial feature space, C(d + q, q) (C(d + q − 1, q) for coef0 = 0)."""
        owner = type(self).__name__
        k = int(self.n_components)
        if self.sketch_dim is not None and self.sketch_dim < k:
            raise ConfigError(f"{owner}: sketch_dim={self.sketch_dim} must be >= n_components={k}.")
        if n_samples is None or n_features is None:
            return
        rows = min(n_samples, self.sample) if self.sample is not None else n_samples
        if k > rows:
            raise InputError(f"{owner}: n_components={k} exceeds the {rows} rows it is fitted on "
                             f"(n_samples={n_samples}); lower n_components.")
        q = int(self.degree)
        dim = math.comb(n_features + q, q) if self.coef0 > 0 else math.comb(n_features + q - 1, q)
        if k > dim:
            raise InputError(
                f"{owner}: n_components={k} exceeds the dimension {dim} of the degree-{q} "
                f"polynomial feature space of {n_features} features (C(d + q, q), or "
                "C(d + q - 1, q) for coef0=0); lower n_components or raise degree.")

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        self._check_params(n_samples, n_features)
        super()._check_params_for_shape(n_samples, n_features)  # type: ignore[misc]

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        """The sketch pass's state and one row's sketches; the landmarks and their kernel matrix."""
        owner, k, q, d = type(self).__name__, int(self.n_components), int(self.degree), int(n_features)
        m = int(self.sketch_dim or 2 * k)
        r = int(self.embed_size or 4 * k)
        sizes: list[OperatorSize] = [(
            f"{owner}: the sketch pass (sketch_dim m={m}, embed_size r={r}, degree {q}) on {d} "
            f"input features holds an m x (m + r) state and one row's sketches (float64) that",
            8 * m * (m + r) + 8 * (d + 4 * q * (m + r)),
            "lower sketch_dim/embed_size (default 2 and 4 x n_components) or n_components")]
        if self.n_landmarks is not None:
            rows = min(int(n_samples), int(self.sample)) if self.sample is not None else int(n_samples)
            nl = min(int(self.n_landmarks), max(1, rows))
            sizes.append((f"{owner}: n_landmarks={self.n_landmarks} on {d} input features: the "
                          f"landmarks ({nl} x {d}) and their kernel matrix ({nl} x {nl}, float64) "
                          "that", 8 * nl * (nl + d), "lower n_landmarks"))
        return sizes


class KSpaceKernelPCA(_KSpaceChecks, TransformerMixin, DistsketchEstimator):
    """Approximate polynomial-kernel PCA by k-Space (Algorithm 1 of Avron et al. 2014).

    Kernel k(x, y) = (γ⟨x, y⟩ + c)^q with feature map φ.  Finds V = U·W with
    orthonormal columns spanning a rank-k (1 + ε)-approximation of φ(A) and
    the mapping x ↦ TensorSketch_S(x)·R⁻¹·W that produces it.

    Parameters
    ----------
    n_components : int, default 10
        k.
    degree : int, default 3
        Degree q of the polynomial kernel (γ⟨x, y⟩ + c)^q.
    gamma : float, "median" or None, default None
        Scale of the inner product; None means 1 / n_features, "median" the
        median heuristic on a 1000-row sample (one more pass over X).
    coef0 : float, default 1.0
        Offset c of the polynomial kernel.
    sketch_dim : int or None, default None
        m, the output dimension of the TensorSketch S (its columns; default 2k, the
        paper's experiments).
    embed_size : int or None, default None
        r, columns of T (default 4k).
    sample : int or None, default None
        Fit the mapping on this many rows (uniform, without replacement,
        chunking-independent) instead of all rows.
    n_landmarks : int or None, default None
        Rows R of Theorem 7's factorisation V·U·φ(R) (a second pass); needed
        for ``kernel_approx``.  None skips it.
    split_every : int, default 8
        Merge fan-in of the fit's tree reductions: states are merged
        ``split_every`` at a time, more where a tree would be over three merges
        deep (more than ``split_every³`` blocks), fewer where a merge task
        would exceed the memory budget (:func:`~distsketch.graph.choose_fan_in`).
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    gamma_ : float
        The kernel scale used.
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    sketch_S_, sketch_T_ : TensorSketch
        The fitted sketches S and T.
    components_ : ndarray of shape (n_components, m)
        (R⁻¹·W)ᵀ, the principal directions in the m-dimensional sketch
        space of S: ``transform(X) = sketch_S_.transform(X) @ components_.T``.
    singular_values_ : ndarray of shape (k,)
        Top singular values of Uᵀφ(A)T (estimates of those of φ(A)).
    n_samples_seen_ : int
        Rows the mapping was fitted on (``sample`` of them when set).
    landmarks_ : ndarray of shape (l, d)
        R (with ``n_landmarks``).
    factor_ : ndarray of shape (k, l)
        U of Theorem 7 (with ``n_landmarks``).
    feature_map_ : ndarray of shape (l, k)
        Uᵀ (U K(R, R) Uᵀ)^{-1/2}: ``kernel_approx`` features are K(x, R) @ feature_map_.
    n_features_in_ : int

    Notes
    -----
    Pass 1 (``tree_reduce``): per task q CountSketches + FFTs of the block for
    both sketches and two products, O(rows·(m + r)·m); state m² + m·r float64,
    merged ``split_every`` at a time.  Driver: O(m³ + m²r).  Pass 2 (Theorem 7):
    per task rows × l kernel block; state k × l.  Communication: the states
    only.

    References
    ----------
    Avron, Nguyen, Woodruff. Subspace embeddings for the polynomial kernel. NIPS
    2014 (Algorithm 1, Theorems 6–7, Section 5).

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import KSpaceKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(200, 5))
    >>> V = KSpaceKernelPCA(n_components=4, random_state=0).fit_transform(X)
    >>> V.shape
    (200, 4)
    """

    _array_api_support = True

    _accepts_sparse = True

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None)],
        "degree": [Interval(int, 1, None)],
        "gamma": GAMMA_CONSTRAINT,
        "coef0": [Interval(float, 0, None, closed="left")],
        "sketch_dim": [Interval(int, 1, None), None],
        "embed_size": [Interval(int, 1, None), None],
        "sample": [Interval(int, 2, None), None],
        "n_landmarks": [Interval(int, 1, None), None],
        "split_every": [Interval(int, 2, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_components: int = 10, degree: int = 3, gamma: float | str | None = None,
                 coef0: float = 1.0, sketch_dim: int | None = None, embed_size: int | None = None,
                 sample: int | None = None, n_landmarks: int | None = None, split_every: int = 8,
                 random_state: Any = None):
        self.n_components = n_components
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.sketch_dim = sketch_dim
        self.embed_size = embed_size
        self.sample = sample
        self.n_landmarks = n_landmarks
        self.split_every = split_every
        self.random_state = random_state

    def _kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return pairwise_kernel(A, B, "polynomial", gamma=self.gamma_, coef0=self.coef0,
                               degree=self.degree)

    @fit_context
    def fit(self, X: Any, y: Any = None) -> KSpaceKernelPCA:
        """Run k-Space on X (or on a row sample of it).

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        k = int(self.n_components)
        m = int(self.sketch_dim or 2 * k)
        r = int(self.embed_size or 4 * k)
        A = X
        if self.sample is not None and self.sample < X.shape[0]:
            _, A = sample_rows(X, self.sample, _sub_seed(seed, "kspace.sample"), self.split_every)
        common: dict[str, Any] = {"degree": self.degree, "gamma": fit_gamma(self, X),
                                  "coef0": self.coef0}
        self.sketch_S_ = TensorSketch(n_components=m, random_state=_sub_seed(seed, "kspace.S"),
                                      **common).fit(A)
        self.sketch_T_ = TensorSketch(n_components=r, random_state=_sub_seed(seed, "kspace.T"),
                                      **common).fit(A)
        state = self._sketch_gram(A, m, r)
        Rinv = _inv_sqrt(state["ss"])          # m × rank
        UtT = Rinv.T @ state["st"]             # rank × r  = Uᵀ φ(A) T
        if Rinv.shape[1] < k:
            raise InputError(
                f"KSpaceKernelPCA: the sketch φ(A)·S has numerical rank {Rinv.shape[1]} < "
                f"n_components={k} ({state['n']} rows; φ of degree {self.degree} on {A.shape[1]} "
                "features spans at most C(d + q, q) dimensions); lower n_components or fit on more rows.")
        Wl, sig, _ = scipy.linalg.svd(UtT, full_matrices=False)
        P = Rinv @ Wl[:, :k]
        # fix the sign of each component (largest entry positive) so that fits on
        # differently chunked data give the same embedding, not a sign flip of it
        self.components_ = np.ascontiguousarray(fix_signs(P, axis=0).T)
        self.singular_values_ = sig[:k]
        self.n_samples_seen_ = int(state["n"])
        self.kernel_params_ = dict(self.sketch_S_.kernel_params_)
        if self.n_landmarks is not None:
            self._fit_factorisation(A, seed)
        return self

    def _sketch_gram(self, A: Any, m: int, r: int) -> dict:
        # blocks are planned from the per-row sketch memory: only what no block size fixes raises
        gram = SketchGram(self.sketch_S_._map_block, self.sketch_T_._map_block, n_s=m, n_t=r,
                          degree=self.degree)
        try:
            return reduce_blocks(gram, A, split_every=self.split_every, name="kspace-gram")
        except MemoryBudgetError as exc:
            raise MemoryBudgetError(
                f"KSpaceKernelPCA: the sketch pass (sketch_dim m={m}, embed_size r={r}, degree "
                f"{self.degree}) does not fit one task even at the smallest block: {exc} "
                "Here the fix is a smaller sketch_dim/embed_size or a larger "
                "distsketch.task-memory; rechunking cannot help when sample= is set "
                "(the blocks are cut from the sample).") from exc

    def _embed_block(self, block: Any, row_offset: int) -> np.ndarray:
        Z = dense_float64(self.sketch_S_._map_block(block, row_offset))
        return row_stable_matmul(Z, asarray(self._projection(), like=Z), row_offset)

    def _projection(self) -> np.ndarray:
        # the C-ordered (m, k) matrix R⁻¹·W: GEMM rounds as it did when it was stored so
        return np.ascontiguousarray(self.components_.T)

    def _fit_factorisation(self, A: Any, seed: int) -> None:
        _, R = sample_rows(A, self.n_landmarks, _sub_seed(seed, "kspace.landmarks"),
                           self.split_every)
        self.landmarks_ = R
        VtK = reduce_blocks(FactorCross(self._embed_block, self._kernel, R), A,
                            split_every=self.split_every, name="kspace-factor")
        Krr = self._kernel(R, R)
        self.factor_ = VtK @ np.linalg.pinv(Krr, rcond=1e-10, hermitian=True)
        C = self.factor_ @ Krr @ self.factor_.T
        self.feature_map_ = self.factor_.T @ _inv_sqrt(C)   # l × rank

    def transform(self, X: Any) -> Any:
        """Embed rows: TensorSketch_S(X)·R⁻¹·W (equal to V for the fit rows).

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_components)
        """
        self._check_is_fitted("components_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        return _apply_affine(self.sketch_S_.transform(X), self._projection())

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        return self.fit(X).transform(X)

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """The kernel of φ projected on the rank-k subspace of Theorem 7: f(A) f(B)ᵀ.

        f(x) = K(x, R) Uᵀ (U K(R, R) Uᵀ)^{-1/2}; requires ``n_landmarks``.
        """
        self._check_is_fitted("components_")
        if not hasattr(self, "factor_"):
            raise NotFittedError("KSpaceKernelPCA.kernel_approx needs Theorem 7's factorisation: "
                                 "set n_landmarks (e.g. 4 * n_components) and fit again.")
        fa = self._kernel(np.asarray(A, dtype=np.float64), self.landmarks_) @ self.feature_map_
        fb = fa if B is None else self._kernel(np.asarray(B, dtype=np.float64),
                                               self.landmarks_) @ self.feature_map_
        return fa @ fb.T


class KernelPCR(_KSpaceChecks, RegressorMixin, DistsketchEstimator):
    """Approximate polynomial-kernel principal component regression (Theorem 9).

    k-Space gives V, orthonormal columns spanning a rank-k (1 + ε)
    approximation of φ(A); the coefficients solve min_x ‖V x − b‖ (plus an
    optional ridge α‖x‖² and an intercept).  For classification use
    :class:`~distsketch.estimators.decomposition.kspace_classifier.KernelPCRClassifier`.

    Parameters
    ----------
    n_components : int, default 50
        k, the number of approximate principal components.
    degree, gamma, coef0 : kernel (γ⟨x, y⟩ + c)^q, defaults 3, None, 1.0
        ``gamma=None`` means 1 / n_features, "median" the median heuristic.
    sketch_dim, embed_size, sample, split_every : as in :class:`KSpaceKernelPCA`
    alpha : float, default 0.0
        Ridge added to the k × k normal equations.
    fit_intercept : bool, default True
        Fit an unpenalised intercept.
    n_landmarks : int or None, default None
        Passed to the k-Space model (enables ``kernel_approx``).
    random_state : int, Generator or None

    Attributes
    ----------
    kspace_ : KSpaceKernelPCA
    gamma_ : float
        The kernel scale used.
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    coef_ : ndarray of shape (k, n_targets)
    intercept_ : ndarray of shape (n_targets,)
    single_target_ : bool
        y was 1-D (``predict`` then returns shape (n_samples,)).
    n_samples_seen_ : int
        Rows of the least-squares fit (all rows of X).
    n_features_in_ : int

    Notes
    -----
    Two passes: k-Space's sketch Gram, then the exact k × k summary
    (VᵀV, Vᵀy) of the embedded rows, tree-reduced; memory per task the block
    and rows × (m + k) features.

    References
    ----------
    Avron, Nguyen, Woodruff. Subspace embeddings for the polynomial kernel. NIPS
    2014 (Definition 8, Theorem 9, Table 1).

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import KernelPCR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = X[:, 0] * X[:, 1]
    >>> pcr = KernelPCR(n_components=10, degree=2, random_state=0).fit(X, y)
    >>> pcr.predict(X[:3]).shape
    (3,)
    """

    _array_api_support = True

    _accepts_sparse = True

    _parameter_constraints = {
        **KSpaceKernelPCA._parameter_constraints,
        "alpha": [Interval(float, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
    }

    def __init__(self, *, n_components: int = 50, degree: int = 3, gamma: float | str | None = None,
                 coef0: float = 1.0, sketch_dim: int | None = None, embed_size: int | None = None,
                 sample: int | None = None, alpha: float = 0.0, fit_intercept: bool = True,
                 n_landmarks: int | None = None, split_every: int = 8,
                 random_state: Any = None):
        self.n_components = n_components
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.sketch_dim = sketch_dim
        self.embed_size = embed_size
        self.sample = sample
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.n_landmarks = n_landmarks
        self.split_every = split_every
        self.random_state = random_state

    def _targets(self, y: Any, n: int) -> np.ndarray:
        """The (n, n_targets) float64 matrix the least squares fit."""
        y = check_targets(y, n)
        if is_dask(y):
            y = to_numpy(y)
        # the targets are read on the host, as the ones of a dask input (they move to the
        # embedding's device for the normal equations)
        y = np.asarray(to_host(y), dtype=np.float64)
        self.single_target_ = y.ndim == 1
        return y.reshape(n, -1)

    @fit_context
    def fit(self, X: Any, y: Any) -> KernelPCR:
        """Fit k-Space on X, then least squares of y on the embedding.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        y : array_like of shape (n_samples,) or (n_samples, n_targets)
            Real targets.

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        Y = self._targets(y, X.shape[0])
        params = {k: getattr(self, k) for k in ("n_components", "degree", "coef0",
                                                "sketch_dim", "embed_size", "sample",
                                                "n_landmarks", "split_every")}
        self.kspace_ = KSpaceKernelPCA(random_state=seed, gamma=fit_gamma(self, X), **params).fit(X)
        V = self.kspace_.transform(X)
        if is_dask(V):
            VY: Any = hstack_blocks(V, asarray(Y, like=V._meta))  # host Y to V's blocks' device
        elif not isinstance(V, np.ndarray):
            xp = namespace(V)
            VY = xp.concat([xp.astype(V, xp.float64), asarray(Y, like=V)], axis=1)
        else:
            VY = np.hstack([np.asarray(V, dtype=np.float64), Y])
        t = Y.shape[1]
        st = reduce_blocks(Covariance(n_targets=t), VY, split_every=self.split_every,
                           name="kernelpcr-normal")
        n = st["n"]
        ztz, zty = st["ztz"], st["zty"]
        if self.fit_intercept:
            mu, ybar = st["sum"] / n, st["ysum"] / n
            ztz = ztz - n * np.outer(mu, mu)
            zty = zty - n * np.outer(mu, ybar)
        k = ztz.shape[0]
        check_finite_result(ztz, zty, stage="KernelPCR normal equations")
        coef = scipy.linalg.lstsq(ztz + self.alpha * np.eye(k), zty)[0]
        self.coef_ = coef
        self.intercept_ = (ybar - mu @ coef) if self.fit_intercept else np.zeros(Y.shape[1])
        self.n_samples_seen_ = int(n)
        self.kernel_params_ = dict(self.kspace_.kernel_params_)
        return self

    def _decision(self, X: Any) -> Any:
        self._check_is_fitted("coef_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        return _apply_affine(self.kspace_.transform(X), self.coef_, self.intercept_)

    def predict(self, X: Any) -> Any:
        """Predicted targets.

        Returns
        -------
        ndarray or dask array of shape (n_samples,) or (n_samples, n_targets)
        """
        S = self._decision(X)
        return S[:, 0] if getattr(self, "single_target_", False) else S

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # 2-D y is several targets solved from one summary
        tags.target_tags.multi_output = not isinstance(self, ClassifierMixin)
        return tags

    def score(self, X: Any, y: Any) -> float:
        """The coefficient of determination R²."""
        from sklearn.metrics import r2_score

        return float(r2_score(to_numpy(y), to_numpy(self.predict(X))))

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """Kernel approximation of the underlying k-Space model (needs ``n_landmarks``)."""
        self._check_is_fitted("kspace_")
        return self.kspace_.kernel_approx(A, B)
