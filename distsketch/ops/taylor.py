"""Taylor (Maclaurin) expansions of the Gaussian and of dot-product kernels.

Gaussian (Song et al. 2021, Theorem A.1)::

    exp(-γ‖x−y‖²) = e^{-γ‖x‖²} e^{-γ‖y‖²} Σ_j (2γ)^j ⟨x, y⟩^j / j!

Truncating after degree q leaves at most P[Poisson(2γR²) > q] for data of
radius R (the row factors are ≤ e^{-γ(‖x‖²+‖y‖²)} ≤ e^{-2γ‖x‖‖y‖}), which is how
:func:`gaussian_degree` picks q.

Dot-product kernels k(x, y) = ‖x‖^a ‖y‖^a κ(⟨x̂, ŷ⟩) with κ(t) = Σ_j c_j t^j,
c_j ≥ 0 (β-convergent, Appendix B–C): arc-cosine of order 0 (a = 0) and 1
(a = 1) and the two-layer ReLU NTK (a = 1) have closed-form coefficients here.
The sketch keeps the first terms deterministically and estimates the tail
Σ_{j>J} c_j t^j unbiasedly by sampling degrees with probability ∝ c_j
(:func:`sample_tail_degrees`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import gammaln
from scipy.stats import poisson

from distsketch.errors import ConfigError
from distsketch.ops.random import philox

__all__ = [
    "DOT_PRODUCT_KERNELS",
    "arccos0_coefficients",
    "arccos1_coefficients",
    "dot_product_coefficients",
    "gaussian_coefficients",
    "gaussian_degree",
    "ntk_coefficients",
    "sample_tail_degrees",
    "split_components",
]


def gaussian_coefficients(degree: int, gamma: float) -> np.ndarray:
    """c_j = (2γ)^j / j! for j = 0..degree (the series of exp(2γ t))."""
    j = np.arange(degree + 1)
    return np.exp(j * np.log(2.0 * gamma) - gammaln(j + 1.0))


def gaussian_degree(gamma: float, radius: float, tol: float, max_degree: int = 200) -> int:
    """Smallest q with P[Poisson(2γR²) > q] <= tol (at least 1)."""
    lam = 2.0 * gamma * radius * radius
    q = int(max(1, poisson.isf(tol, lam))) if lam > 0 else 1
    while q > 1 and poisson.sf(q - 1, lam) <= tol:
        q -= 1
    while poisson.sf(q, lam) > tol and q < max_degree:
        q += 1
    return int(min(q, max_degree))


def _arcsin_odd(n_terms: int) -> np.ndarray:
    # a_k = C(2k, k) / 4^k, computed by the ratio a_k = a_{k-1} (2k-1)/(2k)
    k = np.arange(n_terms)
    ratio = np.where(k > 0, (2 * k - 1) / np.maximum(2 * k, 1), 1.0)
    return np.cumprod(ratio)


def arccos0_coefficients(max_degree: int) -> np.ndarray:
    """Coefficients of κ0(t) = 1/2 + arcsin(t)/π up to t^max_degree (all ≥ 0; Σ = κ0(1) = 1)."""
    c = np.zeros(max_degree + 1)
    c[0] = 0.5
    K = max_degree // 2 + 1
    a = _arcsin_odd(K)
    k = np.arange(K)
    j = 2 * k + 1
    keep = j <= max_degree
    c[j[keep]] = a[keep] / ((2 * k[keep] + 1) * np.pi)
    return c


def arccos1_coefficients(max_degree: int) -> np.ndarray:
    """Coefficients of κ1(t) = (sqrt(1−t²) + (π − arccos t) t)/π (all ≥ 0; Σ = κ1(1) = 1).

    κ1(t) = 1/π + t/2 + Σ_{k≥1} a_{k−1} / (π (2k−1) 2k) t^{2k} with a_k = C(2k,k)/4^k.
    """
    c = np.zeros(max_degree + 1)
    c[0] = 1.0 / np.pi
    if max_degree >= 1:
        c[1] = 0.5
    K = max_degree // 2
    if K >= 1:
        a = _arcsin_odd(K)  # a_0 .. a_{K-1}
        k = np.arange(1, K + 1)
        c[2 * k] = a[k - 1] / (np.pi * (2 * k - 1) * (2 * k))
    return c


def ntk_coefficients(max_degree: int) -> np.ndarray:
    """Coefficients of t·κ0(t) + κ1(t) (Σ = 2)."""
    c = arccos1_coefficients(max_degree)
    c[1:] += arccos0_coefficients(max_degree - 1) if max_degree >= 1 else 0.0
    return c


DOT_PRODUCT_KERNELS: dict[str, tuple[Callable[[int], np.ndarray], float, int]] = {
    # name: (coefficients up to a degree, κ(1) = total mass, norm exponent a)
    "arccos0": (arccos0_coefficients, 1.0, 0),
    "arccos1": (arccos1_coefficients, 1.0, 1),
    "ntk": (ntk_coefficients, 2.0, 1),
}


def dot_product_coefficients(kernel: str | Callable, max_degree: int) -> tuple[np.ndarray, float]:
    """Coefficients c_0..c_max_degree and the mass beyond max_degree (κ(1) − Σ c_j).

    A callable ``kernel`` maps an int array of degrees to coefficients; its
    mass beyond ``max_degree`` is taken as 0 (the series is truncated there).
    """
    if callable(kernel):
        c = np.asarray(kernel(np.arange(max_degree + 1)), dtype=np.float64)
        if c.shape != (max_degree + 1,) or not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ConfigError(
                "DotProductKernelSketch: the coefficient callable must return max_degree + 1 finite, "
                f"non-negative values for degrees 0..{max_degree}; got shape {c.shape}.")
        return c, 0.0
    if kernel not in DOT_PRODUCT_KERNELS:
        raise ConfigError(f"unknown dot-product kernel {kernel!r}; choose one of "
                          f"{sorted(DOT_PRODUCT_KERNELS)} or pass a coefficient callable.")
    fn, total, _ = DOT_PRODUCT_KERNELS[kernel]
    c = fn(max_degree)
    return c, max(0.0, float(total - c.sum()))


def sample_tail_degrees(seed: int, purpose: str, coefficients: np.ndarray, n_exact: int,
                        n_samples: int) -> tuple[np.ndarray, float]:
    """Degrees j > n_exact − 1 drawn with probability c_j / Σ_{tail} c.

    Returns
    -------
    degrees : ndarray of int64, shape (n_samples,)
        Sorted sampled degrees (empty if the tail has no mass).
    tail_mass : float
        Σ_{j >= n_exact} c_j; each sample then carries weight tail_mass / n_samples,
        making the estimate of the tail unbiased.
    """
    tail = coefficients[n_exact:]
    mass = float(tail.sum())
    if mass <= 0 or n_samples == 0 or tail.size == 0:
        return np.zeros(0, dtype=np.int64), mass
    u = philox(seed, purpose).random(n_samples)
    cdf = np.cumsum(tail) / mass
    idx = np.minimum(np.searchsorted(cdf, u, side="right"), tail.size - 1)
    return np.sort(idx + n_exact).astype(np.int64), mass


def split_components(total: int, weights: np.ndarray, minimum: int = 1) -> np.ndarray:
    """Split ``total`` sketch coordinates over terms ∝ weights (each ≥ minimum).

    Variance of Σ_j c_j ⟨z_j(x), z_j(y)⟩ scales like Σ_j c_j²/m_j, minimised by m_j ∝ c_j.
    """
    w = np.asarray(weights, dtype=np.float64)
    k = w.size
    if total < minimum * k:
        raise ConfigError(f"n_components={total} is too small for {k} Taylor terms; "
                          f"use at least {minimum * k}.")
    share = w / w.sum() if w.sum() > 0 else np.full(k, 1.0 / k)
    m = np.maximum(minimum, np.floor(share * (total - minimum * k)).astype(np.int64) + minimum)
    # hand out (or take back) the remainder, largest weights first
    order = np.argsort(-share, kind="stable")
    i = 0
    while m.sum() < total:
        m[order[i % k]] += 1
        i += 1
    while m.sum() > total:
        j = order[i % k]
        if m[j] > minimum:
            m[j] -= 1
        i += 1
    return m
