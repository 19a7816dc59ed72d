"""Sketches of the Gaussian kernel (truncated Taylor series) and of β-convergent
dot-product kernels (NTK, arc-cosine; exact low-degree terms + sampled tail).

Both are sums of polynomial kernels, each sketched with the recursive-squaring
PolySketch (:mod:`distsketch.ops.poly_sketch`) and weighted by the square root
of its Taylor coefficient; the row factor (e^{−γ‖x‖²}, or ‖x‖^a with the input
normalised to the unit sphere) multiplies the whole feature vector.  The
linear stage (one leaf sketch per term plus ‖x‖²) is summable over column
blocks, so wide inputs work as for the polynomial sketches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.estimators.base import reduce_rows
from distsketch.estimators.polynomial import LinearStageSketch
from distsketch.ops.hadamard import next_pow2
from distsketch.ops.poly_sketch import BASES, leaf_sketch, poly_sketch_combine
from distsketch.ops.taylor import (
    DOT_PRODUCT_KERNELS,
    dot_product_coefficients,
    gaussian_coefficients,
    gaussian_degree,
    sample_tail_degrees,
    split_components,
)
from distsketch.summaries.base import Summary
from distsketch.validation import Interval, Options

__all__ = ["DotProductKernelSketch", "GaussianSketch"]


def _row_sq_norms(block: Any) -> np.ndarray:
    if sp.issparse(block):
        b = sp.csr_matrix(block)
        return np.asarray(b.multiply(b).sum(axis=1), dtype=np.float64).ravel()
    b = np.asarray(block, dtype=np.float64)
    return np.einsum("ij,ij->i", b, b)


class _MaxRowNorm(Summary):
    """Largest row norm (the data radius); merge = max."""

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> float:
        sq = _row_sq_norms(block)
        return float(np.sqrt(sq.max())) if sq.size else 0.0

    def merge(self, states: list[float]) -> float:
        return float(max(states))


class _TermSketch(LinearStageSketch):
    """Σ_t w_t ⟨P_{p_t}(x), P_{p_t}(y)⟩ with one PolySketch per term t.

    Linear stage: the leaf sketches of all terms with degree >= 1, then ‖x‖².
    Subclasses set ``term_degrees_``, ``term_weights_``, ``term_components_``
    in fit and implement ``_row_factor(sq_norms)`` and ``_input_scale(sq_norms)``.
    """

    def _setup_terms(self, degrees: np.ndarray, weights: np.ndarray, comps: np.ndarray) -> None:
        self.term_degrees_ = np.asarray(degrees, dtype=np.int64)
        self.term_weights_ = np.asarray(weights, dtype=np.float64)
        self.term_components_ = np.asarray(comps, dtype=np.int64)
        self.n_output_features_ = int(self.term_components_.sum())
        self._padded_dim = next_pow2(self.n_features_in_)

    def _leaf_terms(self) -> list[int]:
        return [t for t, p in enumerate(self.term_degrees_) if p > 0]

    def _n_linear(self) -> int:
        return int(sum(self.term_components_[t] for t in self._leaf_terms())) + 1

    def _linear(self, block: Any, row_offset: int, col_offset: int) -> np.ndarray:
        dt = self._dtype_of(block)
        D = next_pow2(self.n_features_in_)
        parts = [leaf_sketch(block, self.seed_, f"{self._purpose}.term{t}", int(self.term_components_[t]),
                             D, self.base, col_offset, dt, row_offset) for t in self._leaf_terms()]
        parts.append(_row_sq_norms(block).astype(dt)[:, None])
        return np.concatenate(parts, axis=1)

    def _combine(self, L: np.ndarray, row_offset: int) -> np.ndarray:
        sq = np.maximum(L[:, -1].astype(np.float64), 0.0)
        scale = self._input_scale(sq)
        out = np.empty((L.shape[0], self.n_output_features_), dtype=L.dtype)
        pos_in = 0
        pos_out = 0
        for t, p in enumerate(self.term_degrees_):
            m = int(self.term_components_[t])
            w = np.sqrt(self.term_weights_[t])
            if p == 0:
                out[:, pos_out:pos_out + m] = w / np.sqrt(m)
            else:
                Y0 = L[:, pos_in:pos_in + m] * scale[:, None].astype(L.dtype)
                pos_in += m
                out[:, pos_out:pos_out + m] = poly_sketch_combine(
                    Y0, int(p), self.seed_, f"{self._purpose}.term{t}", m, self.base, row_offset)
                out[:, pos_out:pos_out + m] *= L.dtype.type(w)
            pos_out += m
        out *= self._row_factor(sq)[:, None].astype(L.dtype)
        return out


class GaussianSketch(_TermSketch):
    """Gaussian kernel exp(−γ‖x − y‖²) by its truncated Taylor series (Theorem A.1).

    exp(−γ‖x−y‖²) = e^{−γ‖x‖²} e^{−γ‖y‖²} Σ_j (2γ)^j ⟨x, y⟩^j / j!.  Terms
    j = 0..q are kept; term j is sketched by a degree-j PolySketch of
    sqrt(2γ)·x scaled by 1/sqrt(j!), with m_j ∝ its weight at the data radius;
    the features are multiplied by e^{−γ‖x‖²}.

    Parameters
    ----------
    gamma : float, default 1.0
    n_components : int, default 256
        Total number of features (split over the terms).
    degree : int or None, default None
        Truncation degree q; None chooses the smallest q with
        P[Poisson(2γR²) > q] <= tol, R the largest row norm of the fit data
        (one pass over the data), which bounds the truncation error.
    tol : float, default 1e-3
        Truncation tolerance used when ``degree`` is None.
    base : {"srht", "tensorsketch"}, default "srht"
        Base sketches of the PolySketches.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    radius_ : float
        Largest row norm seen in fit (NaN if ``degree`` was given).
    degree_ : int
    term_degrees_, term_weights_, term_components_ : ndarray
        Degree j, coefficient (2γ)^j/j! and sketch size of each term.
    n_features_in_, n_output_features_ : int

    Notes
    -----
    Per row: one leaf sketch per term (O(q·D log D) dense) and
    O(Σ_j log j · m_j log m_j) for the squarings; memory a rows × D buffer.
    Truncation error ≤ P[Poisson(2γR²) > q] for rows of norm ≤ R; it grows
    quickly with γR², so scale the data (or use random Fourier features) when
    γR² is large.

    References
    ----------
    Song, Woodruff, Yu, Zhang. Fast sketching of polynomial kernels of polynomial
    degree. ICML 2021 (Theorem A.1).
    """

    _parameter_constraints = {
        "gamma": [Interval(float, 0, None, closed="neither")],
        "n_components": [Interval(int, 2, None)],
        "degree": [Interval(int, 1, None), None],
        "tol": [Interval(float, 0, 1, closed="neither")],
        "base": [Options(set(BASES))],
        "random_state": ["random_state"],
    }
    _purpose = "gaussian"

    def __init__(self, *, gamma: float = 1.0, n_components: int = 256, degree: int | None = None,
                 tol: float = 1e-3, base: str = "srht", random_state: Any = None):
        self.gamma = gamma
        self.n_components = n_components
        self.degree = degree
        self.tol = tol
        self.base = base
        self.random_state = random_state

    def _setup(self, X: Any) -> None:
        if self.degree is None:
            self.radius_ = float(reduce_rows(_MaxRowNorm(), X, name="gaussian-radius"))
            self.degree_ = gaussian_degree(self.gamma, self.radius_, self.tol)
        else:
            self.radius_ = float("nan")
            self.degree_ = int(self.degree)
        q = self.degree_
        coef = gaussian_coefficients(q, self.gamma)
        R = self.radius_ if np.isfinite(self.radius_) and self.radius_ > 0 else 1.0
        # weight of each term at the data radius, for the split of components
        mass = coef * R ** (2 * np.arange(q + 1)) * np.exp(-2 * self.gamma * R * R)
        comps = split_components(int(self.n_components) - 1, mass[1:])
        self._setup_terms(np.arange(q + 1), coef, np.concatenate(([1], comps)))

    def _input_scale(self, sq: np.ndarray) -> np.ndarray:
        return np.ones_like(sq)

    def _row_factor(self, sq: np.ndarray) -> np.ndarray:
        return np.exp(-self.gamma * sq)


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
    n_components : int, default 512
        Total features, split ∝ term weight (the constant term takes 1).
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
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    coefficients_ : ndarray of shape (max_degree + 1,)
    tail_mass_ : float
    residual_mass_ : float
        Σ_{j > max_degree} c_j (error bound ‖x‖^a‖y‖^a · residual_mass_).
    term_degrees_, term_weights_, term_components_ : ndarray
    n_features_in_, n_output_features_ : int

    Notes
    -----
    Per row: one leaf sketch per term and O(log j) degree-2 sketches for a
    degree-j term, so high sampled degrees stay cheap.

    References
    ----------
    Song, Woodruff, Yu, Zhang. ICML 2021 (Definition B.1, Theorem B.5, Corollary C.3).
    Cho, Saul. Kernel methods for deep learning. NIPS 2009 (arc-cosine kernels).
    """

    _parameter_constraints = {
        "kernel": [Options(set(DOT_PRODUCT_KERNELS)), "callable"],
        "n_components": [Interval(int, 2, None)],
        "n_exact": [Interval(int, 1, None)],
        "n_tail_samples": [Interval(int, 0, None)],
        "max_degree": [Interval(int, 1, None)],
        "base": [Options(set(BASES))],
        "random_state": ["random_state"],
    }
    _purpose = "dotproduct"

    def __init__(self, *, kernel: str | Callable = "ntk", n_components: int = 512, n_exact: int = 4,
                 n_tail_samples: int = 2, max_degree: int = 16, base: str = "srht",
                 random_state: Any = None):
        self.kernel = kernel
        self.n_components = n_components
        self.n_exact = n_exact
        self.n_tail_samples = n_tail_samples
        self.max_degree = max_degree
        self.base = base
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
        # Variance of a degree-p PolySketch term grows like p/m (each squaring
        # compounds the error of the level below): m_j ∝ c_j sqrt(p_j) minimises Σ c_j² p_j/m_j.
        alloc = weights * np.sqrt(np.maximum(term_deg, 1))
        if term_deg[0] == 0:
            comps = np.concatenate(([1], split_components(int(self.n_components) - 1, alloc[1:])))
        else:
            comps = split_components(int(self.n_components), alloc)
        self._setup_terms(term_deg, weights, comps)

    def _power(self) -> int:
        return 0 if callable(self.kernel) else DOT_PRODUCT_KERNELS[self.kernel][2]

    def _input_scale(self, sq: np.ndarray) -> np.ndarray:
        norms = np.sqrt(sq)
        return np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)

    def _row_factor(self, sq: np.ndarray) -> np.ndarray:
        return np.sqrt(sq) if self._power() == 1 else np.ones_like(sq)
