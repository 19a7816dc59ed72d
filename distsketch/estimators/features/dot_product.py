"""Sketches of the Gaussian kernel (truncated Taylor series) and of β-convergent
dot-product kernels (NTK, arc-cosine; exact low-degree terms + sampled tail).

Both are sums of polynomial kernels, each sketched with the recursive-squaring
PolySketch (:mod:`distsketch.ops.poly_sketch`) and weighted by the square root
of its Taylor coefficient; the row factor (e^{−γ‖x‖²}, or ‖x‖^a with the input
normalised to the unit sphere) multiplies the whole feature vector.  Components
are split over the terms by a variance model (GaussianSketch's Notes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.estimators.features.linear_stage import LinearStageSketch
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT
from distsketch.graph import reduce_blocks
from distsketch.ops.hadamard import next_pow2
from distsketch.ops.namespace import asarray, namespace, typed_scalar, xp_dtype, zeros
from distsketch.ops.poly_sketch import BASES, leaf_sketch, poly_sketch_combine
from distsketch.ops.taylor import (
    DOT_PRODUCT_KERNELS,
    dot_product_coefficients,
    gaussian_coefficients,
    gaussian_degree,
    predicted_sketch_error,
    sample_tail_degrees,
    split_components_by_variance,
)
from distsketch.summaries.dot_product import (
    ColumnSum,
    GaussianStats,
    centered_sq_norms,
    row_sq_norms,
)
from distsketch.validation import Interval, Options

__all__ = ["DotProductKernelSketch", "GaussianSketch"]


def _split_rest(total: int, weights: np.ndarray, degrees: np.ndarray) -> np.ndarray:
    """Components of the non-constant terms; none left (n_components=1) drops them all."""
    if total <= 0:
        return np.zeros(len(degrees), dtype=np.int64)
    return split_components_by_variance(total, weights, degrees)


def _size_for_error(m: int, weights: np.ndarray, degrees: np.ndarray, reserved: int) -> int:
    """The size, doubled from ``m``, whose predicted error reaches 0.1 (for the refusal)."""
    for _ in range(60):
        m *= 2
        comps = split_components_by_variance(m - reserved, weights, degrees)
        if predicted_sketch_error(weights, degrees, comps) <= 0.1:
            break
    return m


class _TermSketch(LinearStageSketch):
    """Σ_t w_t ⟨P_{p_t}(x), P_{p_t}(y)⟩ with one PolySketch per term t.

    Linear stage: the leaf sketches of all terms with degree >= 1, then ‖x‖².
    Subclasses set ``term_degrees_``, ``term_weights_``, ``term_components_``
    in fit and implement ``_row_factor(sq_norms)`` and ``_input_scale(sq_norms)``.
    """

    # "auto": small recursive-squaring sketches are worse than m^(-1/2), so the exponent is
    # fitted, and the pilot copies skip the variance check
    _auto_slope = None
    _auto_overrides = {"check_variance": False}

    def _setup_terms(self, degrees: np.ndarray, weights: np.ndarray, comps: np.ndarray) -> None:
        self.term_degrees_ = np.asarray(degrees, dtype=np.int64)
        self.term_weights_ = np.asarray(weights, dtype=np.float64)
        self.term_components_ = np.asarray(comps, dtype=np.int64)
        self.n_output_features_ = int(self.term_components_.sum())
        self._padded_dim = next_pow2(self.n_features_in_)

    def _leaf_terms(self) -> list[int]:
        return [t for t, p in enumerate(self.term_degrees_) if p > 0 and self.term_components_[t] > 0]

    def _n_linear(self) -> int:
        return int(sum(self.term_components_[t] for t in self._leaf_terms())) + 1

    def _padded_width(self, n_features: int) -> int:
        return next_pow2(n_features)

    def _linear(self, block: Any, row_offset: int, col_offset: int) -> Any:
        # in the block's namespace and on its device (the centre moves there once); a sparse
        # block stays sparse: the leaf sketch is linear, T(x − c) = T x − T c
        dt = self._output_dtype(block)
        D = next_pow2(self.n_features_in_)
        c = self._center_slice(col_offset, block.shape[1])
        sparse = sp.issparse(block)
        xp = namespace(block)
        if xp is not np:
            block = xp.astype(block, xp_dtype(xp, dt))
        if c is not None and not sparse:
            block = asarray(block, like=block, dtype=dt) - asarray(c, like=block, dtype=dt)
        parts = []
        for t in self._leaf_terms():
            args = (self.seed_, f"{self._purpose}.term{t}", int(self.term_components_[t]), D, self.base,
                    col_offset, dt)
            P = leaf_sketch(block, *args, row_offset)
            if c is not None and sparse:
                P -= leaf_sketch(c[None, :], *args, 0)
            parts.append(P)
        sq = centered_sq_norms(block, c) if (c is not None and sparse) else row_sq_norms(block)
        parts.append(asarray(sq, like=block, dtype=dt)[:, None])
        return xp.concat(parts, axis=1)

    def _center_slice(self, col_offset: int, width: int) -> np.ndarray | None:
        c = getattr(self, "center_", None)
        if c is None or not np.any(c):
            return None
        return c[col_offset:col_offset + width]

    def _combine(self, L: Any, row_offset: int) -> Any:
        # in L's namespace and on its device, term by term
        xp = namespace(L)
        sq = asarray(L[:, -1], like=L, dtype=np.float64)
        sq = np.maximum(sq, 0.0) if xp is np else xp.clip(sq, 0.0)
        scale = asarray(self._input_scale(sq), like=L, dtype=L.dtype)[:, None]
        shape = (L.shape[0], self.n_output_features_)
        out = np.empty(shape, dtype=L.dtype) if xp is np else zeros(shape, L, dtype=L.dtype)
        pos_in = 0
        pos_out = 0
        for t, p in enumerate(self.term_degrees_):
            m = int(self.term_components_[t])
            w = np.sqrt(self.term_weights_[t])
            if m == 0:
                continue
            if p == 0:
                out[:, pos_out:pos_out + m] = float(w / np.sqrt(m))
            else:
                Y0 = L[:, pos_in:pos_in + m] * scale
                pos_in += m
                out[:, pos_out:pos_out + m] = poly_sketch_combine(
                    Y0, int(p), self.seed_, f"{self._purpose}.term{t}", m, self.base, row_offset)
                out[:, pos_out:pos_out + m] *= typed_scalar(w, L.dtype)
            pos_out += m
        out *= asarray(self._row_factor(sq), like=L, dtype=L.dtype)[:, None]
        return out


class GaussianSketch(_TermSketch):
    """Gaussian kernel exp(−γ‖x − y‖²) by its truncated Taylor series (Theorem A.1).

    exp(−γ‖x−y‖²) = e^{−γ‖x‖²} e^{−γ‖y‖²} Σ_j (2γ)^j ⟨x, y⟩^j / j!, applied to
    x − c with c = ``center_`` (the kernel is shift invariant, so nothing changes
    but the radius, which can shrink a lot).  Terms j = 0..q are kept; term j is
    sketched by a degree-j PolySketch of x − c scaled by sqrt((2γ)^j/j!), with a
    share m_j of the components chosen from a variance model (Notes); the
    features are multiplied by e^{−γ‖x − c‖²}.

    Parameters
    ----------
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features, "median" the median
        heuristic on a 1000-row sample (one more pass over X in ``fit``).
    n_components : int or "auto", default 256
        Total number of features (split over the terms); "auto" chooses it
        for ``target_error`` (as in :class:`RandomFourierFeatures`, the pilot
        copies without the variance check, the error model's exponent fitted).
    max_degree : int or None, default None
        Truncation degree q of the Taylor series; None chooses the smallest q with
        P[Poisson(2γR²) > q] <= truncation_tol, R the largest row norm of the (centred)
        fit data, which bounds the truncation error.
    truncation_tol : float, default 1e-3
        Truncation tolerance used when ``max_degree`` is None.
    base : {"srht", "tensorsketch"}, default "srht"
        Base sketches of the PolySketches.
    center : bool, default True
        Sketch x − mean(X) (one extra pass over the data in fit).
    check_variance : bool, default True
        Raise :class:`~distsketch.errors.ConfigError` in fit when the predicted
        RMS error of the sketched kernel diagonal (``predicted_error_``, Notes)
        exceeds ``max_error``.
    max_error : float, default 0.5
        Largest accepted predicted RMS error of k̂(x, x) (k(x, x) = 1): 0.5 means
        the noise would be half the kernel's own diagonal.
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    gamma_ : float
        The kernel scale used.
    center_ : ndarray of shape (n_features_in_,)
        Column mean of the fit data (rounded to float32 precision, so rounding
        differences of the reduction order do not change it), or zeros.
    radius_ : float
        Largest row norm of the centred fit data.
    max_degree_ : int
    term_degrees_, term_weights_, term_components_ : ndarray
        Degree j, coefficient (2γ)^j/j! and sketch size of each sketched term.
    dropped_degrees_ : ndarray of int
        Degrees <= q left out because sketching them would add more variance
        than their weight (their mass is in ``predicted_error_``).
    predicted_error_ : float
        Predicted RMS error of k̂(x, x) over the fit rows (k(x, x) = 1).
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (``gamma_`` among them).
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The number of features used (``n_components``, or the one "auto" chose).
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` only).
    n_features_in_, n_output_features_ : int

    Notes
    -----
    Fit makes two passes (column mean; radius and per-degree weights, both
    tree-reduced, O(d) and O(q) state).  Per row in transform: one leaf sketch
    per term (O(q·D log D) dense) and O(Σ_j log j · m_j log m_j) for the
    squarings; memory a rows × (D + Σ m_j) buffer.

    Variance.  On the diagonal, term j carries the weight
    w_j(x) = e^{−2γ‖x‖²}(2γ‖x‖²)^j/j! (a Poisson(2γ‖x‖²) pmf, Σ_j w_j = 1).  A
    degree-j recursive-squaring sketch with m_j rows reuses each level's output
    in both factors of the next squaring, so its relative error compounds
    multiplicatively: its relative variance is about e^{v_j} − 1 with
    v_j = (8(j² − 1)/3 + 2j²)/m_j (:func:`~distsketch.ops.taylor.poly_sketch_log_moment`),
    which explodes once m_j ≲ j².  The predicted RMS error of k̂(x, x) is
    sqrt(Σ_j w̄_j² (e^{v_j} − 1)) (w̄_j² the mean of w_j(x)² over the fit rows) plus
    the weight of dropped terms.  m_j ∝ w̄_j sqrt(v_j m_j) minimises it to first
    order (terms with v_j > ln 2 are dropped instead).  As 2γR² grows the weights
    move to degrees j ≈ 2γ‖x‖², so the components needed grow like (γR²)² for a
    fixed error; below that the check raises with the numbers.  Use
    :class:`~distsketch.RandomFourierFeatures` or NystromFeatures for such γ,
    rescale the data, or raise ``n_components``.

    References
    ----------
    Song, Woodruff, Yu, Zhang. Fast sketching of polynomial kernels of polynomial
    degree. ICML 2021 (Algorithm 1, Theorem A.1).
    """

    #: the exact kernel the features approximate (no kernel parameter names it);
    #: :func:`distsketch.metrics.model_kernel` compares against it
    _kernel_of_features = "rbf"

    _parameter_constraints = {
        "gamma": GAMMA_CONSTRAINT,
        "n_components": [Interval(int, 1, None), Options({"auto"})],
        "target_error": [Interval(float, 0, None, closed="neither"), None],
        "max_degree": [Interval(int, 1, None), None],
        "truncation_tol": [Interval(float, 0, 1, closed="neither")],
        "base": [Options(set(BASES))],
        "center": ["boolean"],
        "check_variance": ["boolean"],
        "max_error": [Interval(float, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
    _purpose = "gaussian"
    _approximates = "rbf"
    _max_degree = 200
    # "auto": the pilot copies are fitted on rows of their own (centre and radius)
    _auto_fit_rows = 1000

    def __init__(self, *, gamma: float | str | None = None, n_components: int | str = 256,
                 max_degree: int | None = None,
                 truncation_tol: float = 1e-3, base: str = "srht", center: bool = True,
                 check_variance: bool = True, max_error: float = 0.5,
                 target_error: float | None = None, random_state: Any = None):
        self.gamma = gamma
        self.n_components = n_components
        self.max_degree = max_degree
        self.truncation_tol = truncation_tol
        self.base = base
        self.center = center
        self.check_variance = check_variance
        self.max_error = max_error
        self.target_error = target_error
        self.random_state = random_state

    def _setup(self, X: Any) -> None:
        d = self.n_features_in_
        if self.center:
            st = reduce_blocks(ColumnSum(), X, name="gaussian-mean")
            # rounded so that the summation order (chunking) cannot change the operator
            self.center_ = (st["sum"] / max(st["n"], 1)).astype(np.float32).astype(np.float64)
        else:
            self.center_ = np.zeros(d)
        J = int(self._max_degree if self.max_degree is None else max(self.max_degree, 1))
        st = reduce_blocks(GaussianStats(float(self.gamma_), J), X, self.center_,
                           name="gaussian-radius")
        n = max(st["n"], 1)
        self.radius_ = float(np.sqrt(st["max_sq"]))
        self.max_degree_ = (gaussian_degree(self.gamma_, self.radius_, self.truncation_tol,
                                            self._max_degree)
                            if self.max_degree is None else int(self.max_degree))
        q = self.max_degree_
        coef = gaussian_coefficients(q, self.gamma_)
        rms = np.sqrt(st["w2"][:q + 1] / n)
        comps = _split_rest(int(self.n_components_) - 1, rms[1:], np.arange(1, q + 1))
        comps = np.concatenate(([1], comps))
        # plus the mean diagonal mass beyond degree q (the truncation bias; tiny unless q was capped or given)
        truncated = max(0.0, 1.0 - float(st["w"][:q + 1].sum()) / n)
        self.predicted_error_ = predicted_sketch_error(rms[1:], np.arange(1, q + 1), comps[1:]) + truncated
        kept = comps > 0
        self.dropped_degrees_ = np.flatnonzero(~kept).astype(np.int64)
        self._setup_terms(np.arange(q + 1)[kept], coef[kept], comps[kept])
        if self.check_variance and self.predicted_error_ > self.max_error:
            raise ConfigError(self._variance_message(rms, q))

    def _variance_message(self, rms: np.ndarray, q: int) -> str:
        # the constant term keeps its one component
        need = _size_for_error(int(self.n_components_), rms[1:], np.arange(1, q + 1), 1)
        lam = 2.0 * self.gamma_ * self.radius_ ** 2
        return (f"GaussianSketch: gamma={self.gamma_:g} is outside the range this Taylor-series sketch can "
                f"resolve with n_components={self.n_components_}: radius r={self.radius_:.4g} "
                f"(after centring), 2*gamma*r^2={lam:.3g}, degree needed q={q} for "
                f"truncation_tol={self.truncation_tol:g}; the "
                f"predicted RMS error of k(x, x)=1 is {self.predicted_error_:.3g} > "
                f"max_error={self.max_error:g}, and about n_components={need} would be needed for an "
                "error of 0.1. Use RandomFourierFeatures or NystromFeatures for this gamma, "
                f"rescale the data, or raise n_components "
                f"(check_variance=False skips this check).")

    def _input_scale(self, sq: np.ndarray) -> np.ndarray:
        return namespace(sq).ones_like(sq)

    def _row_factor(self, sq: np.ndarray) -> np.ndarray:
        return namespace(sq).exp(-self.gamma_ * sq)


class DotProductKernelSketch(_TermSketch):
    """β-convergent dot-product kernels: exact low-degree terms + sampled tail.

    k(x, y) = ‖x‖^a ‖y‖^a Σ_j c_j ⟨x̂, ŷ⟩^j (x̂ = x/‖x‖, c_j ≥ 0).  Terms
    j < ``n_exact`` are each sketched with a degree-j PolySketch weighted by
    sqrt(c_j); the tail Σ_{j ≥ n_exact} c_j t^j is estimated without bias by
    ``n_tail_samples`` degrees drawn with probability ∝ c_j, each sketched and
    weighted by sqrt(tail mass / n_tail_samples) (Theorem B.5).

    Parameters
    ----------
    kernel : {"ntk", "arccos0", "arccos1"} or callable, default "ntk"
        Built-in kernels match :mod:`distsketch.ops.kernels` (a = 0 for
        arccos0, 1 otherwise).  A callable maps an int array of degrees to
        non-negative coefficients c_j of a kernel κ(⟨x̂, ŷ⟩) (a = 0).
    n_components : int or "auto", default 512
        Total features, split ∝ term weight (the constant term takes 1);
        "auto" chooses it for ``target_error`` (as for :class:`GaussianSketch`).
    n_exact : int, default 4
        Number of leading terms (degrees 0..n_exact−1) sketched deterministically.
    n_tail_samples : int, default 2
        Sampled tail terms.
    max_degree : int, default 16
        The series is cut there; the built-in kernels' mass beyond it is
        reported in ``residual_mass_`` (their coefficients decay like j^{-3/2};
        the cut only matters for nearly parallel inputs, |t| → 1).  Keep it
        moderate: the variance of a degree-p recursive-squaring sketch grows
        with p/m, so high sampled degrees need many components.
    base : {"srht", "tensorsketch"}, default "srht"
    check_variance : bool, default True
        Raise :class:`~distsketch.errors.ConfigError` in fit when the predicted
        RMS relative error of k̂(x, x) (``predicted_error_``) exceeds ``max_error``.
    max_error : float, default 0.5
        Largest accepted predicted RMS error of k̂(x, x).
    target_error : float or None, default None
        As for :class:`RandomFourierFeatures`.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    predicted_error_ : float
        Predicted RMS error of k̂(x̂, x̂)/κ(1) (variance model of
        :func:`~distsketch.ops.taylor.poly_sketch_log_moment`, plus the weight of
        dropped terms).
    dropped_degrees_ : ndarray of int
        Terms left out because their share of components would add more
        variance than their weight.
    coefficients_ : ndarray of shape (max_degree + 1,)
    tail_mass_ : float
    residual_mass_ : float
        Σ_{j > max_degree} c_j (error bound ‖x‖^a‖y‖^a · residual_mass_).
    term_degrees_, term_weights_, term_components_ : ndarray
    kernel_params_ : dict
        The parameters of the approximated kernel, by name (none for these kernels).
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_components_ : int
        The number of features used (``n_components``, or the one "auto" chose).
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` only).
    n_features_in_, n_output_features_ : int

    Notes
    -----
    Per row: one leaf sketch per term and O(log j) degree-2 sketches for a
    degree-j term.  Cheap, but not accurate: a degree-j recursive-squaring
    sketch of size m_j has relative variance about e^{v_j} − 1 with
    v_j ≈ (8(j² − 1)/3 + 2j²)/m_j, so sampled tail degrees need m_j ≳ j²
    components.  Components are split to minimise the predicted error
    Σ_j (c_j/κ(1))² (e^{v_j} − 1) (m_j ∝ c_j sqrt(v_j m_j)); a term whose share
    would be worse than omitting it is dropped (its weight counts as bias in
    ``predicted_error_``).

    References
    ----------
    Song, Woodruff, Yu, Zhang. ICML 2021 (Definition B.1, Theorem B.5, Corollary C.3).
    Cho, Saul. Kernel methods for deep learning. NIPS 2009 (arc-cosine kernels).
    """

    _parameter_constraints = {
        "kernel": [Options(set(DOT_PRODUCT_KERNELS)), "callable"],
        "n_components": [Interval(int, 1, None), Options({"auto"})],
        "target_error": [Interval(float, 0, None, closed="neither"), None],
        "n_exact": [Interval(int, 1, None)],
        "n_tail_samples": [Interval(int, 0, None)],
        "max_degree": [Interval(int, 1, None)],
        "base": [Options(set(BASES))],
        "check_variance": ["boolean"],
        "max_error": [Interval(float, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
    _purpose = "dotproduct"

    def _exact_kernel(self, fitted: Any) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        if not callable(self.kernel):
            return super()._exact_kernel(fitted)
        coef = np.asarray(fitted.coefficients_, dtype=np.float64)

        def series(A: np.ndarray, B: np.ndarray) -> np.ndarray:
            # Σ_j c_j ⟨x̂, ŷ⟩^j up to max_degree, with x̂ = 0 for a zero row (as the map has it)
            a, b = (np.linalg.norm(M, axis=1, keepdims=True) for M in (A, B))
            t = (A / np.where(a > 0, a, 1.0)) @ (B / np.where(b > 0, b, 1.0)).T
            return np.polynomial.polynomial.polyval(np.clip(t, -1.0, 1.0), coef)

        return series

    def __init__(self, *, kernel: str | Callable = "ntk", n_components: int | str = 512, n_exact: int = 4,
                 n_tail_samples: int = 2, max_degree: int = 16, base: str = "srht",
                 check_variance: bool = True, max_error: float = 0.5,
                 target_error: float | None = None, random_state: Any = None):
        self.kernel = kernel
        self.n_components = n_components
        self.n_exact = n_exact
        self.n_tail_samples = n_tail_samples
        self.max_degree = max_degree
        self.base = base
        self.check_variance = check_variance
        self.max_error = max_error
        self.target_error = target_error
        self.random_state = random_state

    def _setup(self, X: Any) -> None:
        J = min(self.n_exact, self.max_degree + 1)
        c, residual = dot_product_coefficients(self.kernel, self.max_degree)
        degrees, mass = sample_tail_degrees(self.seed_, "dotproduct.tail", c, J, self.n_tail_samples)
        self.coefficients_ = c
        self.tail_mass_ = mass
        self.residual_mass_ = residual
        s = max(1, degrees.size)
        weights = np.concatenate((c[:J], np.full(degrees.size, mass / s)))
        term_deg = np.concatenate((np.arange(J), degrees))
        keep = weights > 0
        weights, term_deg = weights[keep], term_deg[keep]
        # normalised so that the weights sum to k(x̂, x̂) = 1 on the unit sphere (the worst case)
        scale = weights.sum()
        if term_deg[0] == 0:
            comps = np.concatenate(([1], _split_rest(int(self.n_components_) - 1,
                                                     weights[1:] / scale, term_deg[1:])))
            self.predicted_error_ = predicted_sketch_error(weights[1:] / scale, term_deg[1:], comps[1:])
        else:
            comps = split_components_by_variance(int(self.n_components_), weights / scale, term_deg)
            self.predicted_error_ = predicted_sketch_error(weights / scale, term_deg, comps)
        kept = comps > 0
        self.dropped_degrees_ = term_deg[~kept]
        self._setup_terms(term_deg[kept], weights[kept], comps[kept])
        if self.check_variance and self.predicted_error_ > self.max_error:
            need = _size_for_error(int(self.n_components_), weights[term_deg > 0] / scale,
                                   term_deg[term_deg > 0], 0)
            raise ConfigError(
                f"DotProductKernelSketch: n_components={self.n_components_} is too small for the terms of "
                f"degrees {term_deg.tolist()} (n_exact={self.n_exact}, max_degree={self.max_degree}): the "
                f"predicted RMS relative error of k(x, x) is {self.predicted_error_:.3g} > max_error="
                f"{self.max_error:g}; about n_components={need} would give 0.1. Raise n_components, lower "
                f"max_degree / n_tail_samples, or pass check_variance=False.")

    def _input_scale(self, sq: np.ndarray) -> np.ndarray:
        xp = namespace(sq)
        norms = xp.sqrt(sq)
        return xp.where(norms > 0, 1.0 / xp.where(norms > 0, norms, 1.0), 0.0)

    def _row_factor(self, sq: np.ndarray) -> np.ndarray:
        xp = namespace(sq)
        power = 0 if callable(self.kernel) else DOT_PRODUCT_KERNELS[self.kernel][2]
        return xp.sqrt(sq) if power == 1 else xp.ones_like(sq)
