"""Oblivious sketches for linear and polynomial kernels: CountSketch, SRHT,
TensorSketch, TensorSRHT and the recursive-squaring PolySketch.

Each is a :class:`~distsketch.estimators.features.linear_stage.LinearStageSketch`.  All
hashes, signs and sampled coordinates are pure functions of (seed, purpose, global
column/coordinate), so the features of a row do not depend on the row or column chunking.

The polynomial kernel is k(x, y) = (γ⟨x, y⟩ + c)^q.  It is the degree-q
tensor power of x' = (sqrt(γ)·x, sqrt(c)): the input is scaled by sqrt(γ) and
an extra coordinate sqrt(c) is appended as global column d (``n_features_in_``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.estimators.autosize import is_auto
from distsketch.estimators.features.linear_stage import LinearStageSketch
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT
from distsketch.ops.countsketch import countsketch
from distsketch.ops.hadamard import next_pow2, srht
from distsketch.ops.namespace import typed_scalar
from distsketch.ops.poly_sketch import (
    BASES,
    leaf_sketch,
    poly_sketch_combine,
    tensor_srht_combine,
    tensor_srht_linear,
)
from distsketch.ops.tensor_sketch import (
    tensor_sketch_combine,
    tensor_sketch_dense,
    tensor_sketch_linear,
)
from distsketch.validation import Interval, Options

__all__ = ["SRHT", "CountSketch", "PolySketch", "TensorSRHT", "TensorSketch"]

_POLY_CONSTRAINTS: dict[str, list[Any]] = {
    "degree": [Interval(int, 1, None)],
    "gamma": GAMMA_CONSTRAINT,
    "coef0": [Interval(float, 0, None, closed="left")],
    "n_components": [Interval(int, 1, None), Options({"auto"})],
    "target_error": [Interval(float, 0, None, closed="neither"), None],
    "random_state": ["random_state"],
}


class _LinearKernelMixin:
    """Parameters of the sketches of the plain inner product ⟨x, y⟩ (CountSketch, SRHT)."""

    #: the exact kernel the features approximate (no kernel parameter names it);
    #: :func:`distsketch.metrics.model_kernel` compares against it
    _kernel_of_features = "linear"

    _parameter_constraints: dict[str, list[Any]] = {
        "n_components": [Interval(int, 1, None), Options({"auto"})],
        "target_error": [Interval(float, 0, None, closed="neither"), None],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_components: int | str = 100, target_error: float | None = None,
                 random_state: Any = None):
        self.n_components = n_components
        self.target_error = target_error
        self.random_state = random_state


class _PolynomialMixin:
    """Scaling and the constant coordinate of (γ⟨x, y⟩ + c)^q.

    A subclass gives ``_sketch(block, col_offset, dtype=None, row_offset=0)``, its
    unscaled linear stage; the constant coordinate is global column d.
    """

    _approximates: str | None = "polynomial"
    _parameter_constraints = dict(_POLY_CONSTRAINTS)
    gamma_: float
    coef0: float
    n_features_in_: int
    _output_dtype: Callable[[Any], np.dtype]

    def _sketch(self, block: Any, col_offset: int, dtype: Any = None,
                row_offset: int = 0) -> np.ndarray:
        raise NotImplementedError

    def _linear(self, block: Any, row_offset: int, col_offset: int) -> np.ndarray:
        return self._scaled(self._sketch(block, col_offset, self._output_dtype(block), row_offset))

    def _bias(self) -> np.ndarray | None:
        if not self._extra():
            return None
        return self._sketch(self._constant_row(), self.n_features_in_)[0]

    def _extra(self) -> int:
        return 1 if self.coef0 > 0 else 0

    def _scaled(self, L: np.ndarray) -> np.ndarray:
        if self.gamma_ != 1.0:
            L *= typed_scalar(np.sqrt(self.gamma_), L.dtype)
        return L

    def _constant_row(self) -> np.ndarray:
        return np.array([[np.sqrt(self.coef0)]], dtype=np.float64)


class _PaddedPolynomialMixin(_PolynomialMixin):
    """Sketches over the Hadamard-padded width D = next_pow2(d + constant coordinate)."""

    n_components_: int

    def _setup(self, X: Any) -> None:
        self._padded_dim = next_pow2(X.shape[1] + self._extra())
        self.n_output_features_ = int(self.n_components_)

    def _D(self) -> int:
        return next_pow2(self.n_features_in_ + self._extra())

    def _padded_width(self, n_features: int) -> int:
        return next_pow2(n_features + self._extra())


class CountSketch(_LinearKernelMixin, LinearStageSketch):
    """CountSketch (sparse JL) feature map for the linear kernel ⟨x, y⟩.

    z(x)_b = Σ_{j: h(j)=b} s(j) x_j with bucket h and sign s hashed from the
    global input column, so E⟨z(x), z(y)⟩ = ⟨x, y⟩.

    Parameters
    ----------
    n_components : int or "auto", default 100
        Sketch size m; "auto" chooses it for ``target_error`` (as in
        :class:`RandomFourierFeatures`).
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None
        Seed of the hash functions.

    Attributes
    ----------
    seed_ : int
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The sketch size used (``n_components``, or the one "auto" chose).
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` only).
    n_features_in_ : int
    n_output_features_ : int

    Notes
    -----
    Cost per task: O(nnz) for sparse blocks, O(rows·d) for dense ones; memory
    the block plus rows × m output; hashes are regenerated from the seed
    (O(d) per task, cached per process).  Column-chunked dask input is
    sketched per column block and summed.

    References
    ----------
    Charikar, Chen, Farach-Colton. Finding frequent items in data streams. ICALP 2002.
    Avron, Nguyen, Woodruff. Subspace embeddings for the polynomial kernel. NIPS 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import CountSketch
    >>> X = np.random.default_rng(0).normal(size=(10, 50))
    >>> CountSketch(n_components=16, random_state=0).fit_transform(X).shape
    (10, 16)
    """

    def _linear(self, block: Any, row_offset: int, col_offset: int) -> np.ndarray:
        return countsketch(block, self.seed_, "countsketch", self.n_components_, col_offset,
                           self._output_dtype(block))


class SRHT(_LinearKernelMixin, LinearStageSketch):
    """Subsampled randomized Hadamard transform (Definition 2.7 of Song et al. 2021).

    z(x) = sqrt(D/m) · P · H · D_s · x with D = 2^⌈log2 d⌉ (input zero-padded),
    H the orthonormal Hadamard matrix, D_s random signs and P a uniform sample
    of m distinct coordinates, so the operator has orthogonal rows
    (S Sᵀ = (D/m) I) and E⟨z(x), z(y)⟩ = ⟨x, y⟩.

    Parameters
    ----------
    n_components : int or "auto", default 100
        Sketch size m; must be at most D.  "auto" chooses it for
        ``target_error`` (at most D, where the transform is exact).
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    coordinates_ : ndarray of int64, shape (n_components,)
        The sampled Hadamard coordinates.
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The sketch size used (``n_components``, or the one "auto" chose).
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` only).
    n_features_in_ : int
    n_output_features_ : int

    Notes
    -----
    Dense blocks: one FWHT per row, O(D log D), with a rows × D buffer.
    Sparse blocks and column blocks of wide data: the explicit sampled rows of
    H, O(nnz·m) resp. O(width·m) per row.

    References
    ----------
    Song, Woodruff, Yu, Zhang. Fast sketching of polynomial kernels of polynomial
    degree. ICML 2021 (Definition 2.7).
    """

    def _padded_width(self, n_features: int) -> int:
        return next_pow2(n_features)

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        """n_components ≤ the padded width D, then the sizes (before any pass over X)."""
        D = next_pow2(int(n_features))
        if not is_auto(self.n_components) and int(self.n_components) > D:
            raise ConfigError(
                f"SRHT: n_components={self.n_components} exceeds the padded input dimension "
                f"D={D} (next power of two >= n_features={n_features}); choose n_components "
                f"<= {D}.")
        super()._check_params_for_shape(n_samples, n_features)

    def _setup(self, X: Any) -> None:
        D = next_pow2(X.shape[1])
        from distsketch.ops.hadamard import srht_coordinates

        self._padded_dim = D
        self.coordinates_ = np.array(srht_coordinates(self.seed_, "srht", D, self.n_components_))
        self.n_output_features_ = int(self.n_components_)

    def _auto_cap(self, n_samples: int, n_features: int) -> int:
        # m = D samples every coordinate: an orthogonal transform, exact inner products
        return min(super()._auto_cap(n_samples, n_features), next_pow2(int(n_features)))

    def _linear(self, block: Any, row_offset: int, col_offset: int) -> np.ndarray:
        D = next_pow2(self.n_features_in_)
        return srht(block, self.seed_, "srht", self.n_components_, D, col_offset,
                    dtype=self._output_dtype(block), row_offset=row_offset)


class TensorSketch(_PolynomialMixin, LinearStageSketch):
    """TensorSketch of the polynomial kernel (γ⟨x, y⟩ + c)^q (Pham & Pagh 2013).

    q independent CountSketches of x' = (sqrt(γ)x, sqrt(c)) combined by FFT:
    z(x) = IFFT(Π_l FFT(C_l x')).  This is exactly the CountSketch of
    φ(x) = x'^{⊗q} with bucket H = Σ h_l mod m and sign S = Π s_l, an oblivious
    subspace embedding for φ(A) (Avron et al. 2014) with E⟨z(x), z(y)⟩ = k(x, y).

    Parameters
    ----------
    degree : int, default 2
        q >= 1.
    gamma : float, "median" or None, default None
        Scale of the inner product (the input is multiplied by sqrt(γ)); None
        means 1 / n_features, "median" the median heuristic on a 1000-row
        sample (one pass over X in ``fit``).
    coef0 : float, default 0.0
        c >= 0; a coordinate sqrt(c) is appended (so c enters unscaled by γ).
    n_components : int or "auto", default 100
        Sketch size m; "auto" chooses it for ``target_error``.
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    gamma_ : float
        The scale used.
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The sketch size used (``n_components``, or the one "auto" chose).
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` only).
    n_features_in_ : int
    n_output_features_ : int

    Notes
    -----
    O(q·(nnz + m log m)) per row; per task the block, rows × q·m CountSketches
    and FFT temporaries for 2048 rows at a time.

    References
    ----------
    Pham, Pagh. Fast and scalable polynomial kernels via explicit feature maps. KDD 2013.
    Avron, Nguyen, Woodruff. Subspace embeddings for the polynomial kernel. NIPS 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import TensorSketch
    >>> X = np.random.default_rng(0).normal(size=(10, 5))
    >>> TensorSketch(degree=3, coef0=1.0, n_components=64, random_state=0).fit_transform(X).shape
    (10, 64)
    """

    _linear_per_degree = True

    def __init__(self, *, degree: int = 2, gamma: float | str | None = None, coef0: float = 0.0,
                 n_components: int | str = 100, target_error: float | None = None,
                 random_state: Any = None):
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.n_components = n_components
        self.target_error = target_error
        self.random_state = random_state

    def _sketch(self, block: Any, col_offset: int, dtype: Any = None,
                row_offset: int = 0) -> np.ndarray:
        return tensor_sketch_linear(block, self.seed_, "tensorsketch", self.degree,
                                    self.n_components_, col_offset, dtype)

    def _combine(self, L: np.ndarray, row_offset: int) -> np.ndarray:
        return tensor_sketch_combine(L, self.degree, self.n_components_)

    def _map_block(self, block: Any, offset: int) -> np.ndarray:
        if sp.issparse(block):
            return super()._map_block(block, offset)
        # dense blocks holding all columns: the fused kernel, bitwise equal to the two stages
        return tensor_sketch_dense(block, self.seed_, "tensorsketch", self.degree, self.n_components_,
                                   scale=float(np.sqrt(self.gamma_)), bias=self._bias(),
                                   dtype=self._output_dtype(block))


class TensorSRHT(_PaddedPolynomialMixin, LinearStageSketch):
    """TensorSRHT of the polynomial kernel (Definition 2.9 of Song et al. 2021).

    z(x) = (1/sqrt(m)) · (P_1 H D_1 x') ∘ … ∘ (P_q H D_q x') with H the ±1
    Hadamard matrix of order D = 2^⌈log2(d + [c > 0])⌉, independent signs D_l and
    independent coordinate samples P_l (with replacement), x' = (sqrt(γ)x, sqrt(c)).
    E⟨z(x), z(y)⟩ = (γ⟨x, y⟩ + c)^q; degree 2 is Definition 2.9.

    Parameters
    ----------
    degree : int, default 2
        Degree q of the polynomial kernel (γ⟨x, y⟩ + c)^q.
    gamma : float, "median" or None, default None
        As for :class:`TensorSketch`.
    coef0 : float, default 0.0
        Offset c of the polynomial kernel.
    n_components : int or "auto", default 100
        Sketch size m (the output width); "auto" chooses it for ``target_error``.
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    gamma_ : float
        The scale used.
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The sketch size used (``n_components``, or the one "auto" chose).
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` only).
    n_features_in_ : int
    n_output_features_ : int

    Notes
    -----
    O(q·D log D) per dense row (q FWHTs), O(q·nnz·m) per sparse row; per task a
    rows × D buffer.

    References
    ----------
    Ahle et al. Oblivious sketching of high-degree polynomial kernels. SODA 2020.
    Song, Woodruff, Yu, Zhang. ICML 2021 (Definition 2.9).
    """

    _linear_per_degree = True

    def __init__(self, *, degree: int = 2, gamma: float | str | None = None, coef0: float = 0.0,
                 n_components: int | str = 100, target_error: float | None = None,
                 random_state: Any = None):
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.n_components = n_components
        self.target_error = target_error
        self.random_state = random_state

    def _sketch(self, block: Any, col_offset: int, dtype: Any = None,
                row_offset: int = 0) -> np.ndarray:
        return tensor_srht_linear(block, self.seed_, "tensorsrht", self.degree, self.n_components_,
                                  self._D(), col_offset, dtype, row_offset)

    def _combine(self, L: np.ndarray, row_offset: int) -> np.ndarray:
        return tensor_srht_combine(L, self.degree, self.n_components_)


class PolySketch(_PaddedPolynomialMixin, LinearStageSketch):
    """Recursive-squaring polynomial sketch (Algorithm 1 of Song et al. 2021).

    y_0 = T x' with one base sketch T (SRHT or CountSketch), then
    y_l = S_l(y_{l−1} ⊗ y_{l−1}) with a degree-2 sketch S_l (TensorSRHT or
    TensorSketch) per level; a degree that is not a power of two combines the
    pieces of its binary representation with further degree-2 sketches.  The
    leading term costs one T per row whatever the degree, and the rest
    O(log p · m log m), against O(p) CountSketches for TensorSketch.

    Parameters
    ----------
    degree : int, default 2
        p >= 1.
    gamma : float, "median" or None, default None
        As for :class:`TensorSketch`.
    coef0 : float, default 0.0
        Offset c of the polynomial kernel.
    n_components : int or "auto", default 100
        m, the width of every intermediate sketch and of the output; "auto"
        chooses it for ``target_error``.
    base : {"srht", "tensorsketch"}, default "srht"
        (T, S) = (SRHT, TensorSRHT) or (CountSketch, TensorSketch).
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    gamma_ : float
        The scale used.
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The sketch size used (``n_components``, or the one "auto" chose).
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` only).
    n_features_in_ : int
    n_output_features_ : int

    Notes
    -----
    Per row: T (O(D log D) dense, O(nnz) or O(nnz·m) sparse) plus
    ⌊log2 p⌋ + popcount(p) − 1 degree-2 sketches of m-vectors.  Because the
    same sketch is applied to both factors of each square, the estimate
    ⟨z(x), z(y)⟩ carries a bias of order 1/m (it preserves the column space of
    φ(A), Theorem 4.8, rather than being an OSE for arbitrary tensors).

    References
    ----------
    Song, Woodruff, Yu, Zhang. Fast sketching of polynomial kernels of polynomial
    degree. ICML 2021 (Algorithm 1, Lemma 4.3, Theorem 4.8).
    """

    _parameter_constraints = {**_POLY_CONSTRAINTS, "base": [Options(set(BASES))]}

    def __init__(self, *, degree: int = 2, gamma: float | str | None = None, coef0: float = 0.0,
                 n_components: int | str = 100, base: str = "srht",
                 target_error: float | None = None, random_state: Any = None):
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.n_components = n_components
        self.base = base
        self.target_error = target_error
        self.random_state = random_state

    def _sketch(self, block: Any, col_offset: int, dtype: Any = None,
                row_offset: int = 0) -> np.ndarray:
        return leaf_sketch(block, self.seed_, "polysketch", self.n_components_, self._D(), self.base,
                           col_offset, dtype, row_offset)

    def _combine(self, L: np.ndarray, row_offset: int) -> np.ndarray:
        return poly_sketch_combine(L, self.degree, self.seed_, "polysketch", self.n_components_,
                                   self.base, row_offset)
