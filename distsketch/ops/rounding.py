"""Randomized rounding of kernel-expansion coefficients (on the coefficients' namespace).

A kernel expansion f(x) = Σᵢ αᵢ k(xᵢ, x) costs one kernel evaluation per
non-zero coefficient.  Randomized rounding with threshold c keeps every
|αᵢ| >= c and replaces each smaller coefficient by ``sign(αᵢ)·c`` with
probability ``|αᵢ| / c``, else 0.  Then E[α̂] = α (so E[f̂(x)] = f(x)), the
expected number of non-zeros is ``#{|αᵢ| >= c} + Σ_{|αᵢ|<c} |αᵢ| / c <= ‖α‖₁ / c``,
and since each rounded term (α̂ᵢ − αᵢ) k(xᵢ, x) lies in an interval of width
``c·|k(xᵢ, x)| <= c·B``, Hoeffding's inequality gives, with m rounded terms,

    P(|f̂(x) − f(x)| >= c·B·sqrt(m·ln(2/δ)/2)) <= δ.

The coin of coefficient (i, j) is ``hash_uniform(seed, "round.coef", i, j)``:
the rounding is a pure function of the seed and the coefficient's index.

**Shared rounding** (:func:`round_shared`; the paper's "randomized kernel" view,
§6).  Per-output coins make q outputs at budget b cost up to q·b distinct kernel
evaluations per query; one coin per support point costs Σᵢ pᵢ, and |α̂ᵢⱼ| <= cⱼ
keeps the same Hoeffding bound per output.

The coins are host operands moved to the coefficients' device; the threshold
searches (a sort and a scalar scan per column) run on the host.

References
----------
Achlioptas, McSherry, Schölkopf. Sampling techniques for kernel methods. NIPS 2001, §4.
Hoeffding. Probability inequalities for sums of bounded random variables. JASA 1963.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.ops.namespace import as_block, asarray, namespace, to_host
from distsketch.ops.random import hash_uniform

__all__ = [
    "expected_nonzeros",
    "hoeffding_bound",
    "keep_probabilities",
    "round_coefficients",
    "round_shared",
    "shared_keep_probabilities",
    "shared_rounded_counts",
    "threshold_for_budget",
    "threshold_for_total_budget",
]


def _as_2d(coef: np.ndarray) -> np.ndarray:
    coef = as_block(coef, dtype=np.float64)
    return coef[:, None] if coef.ndim == 1 else coef


def _thresholds(threshold: float | np.ndarray, n_cols: int, like: Any) -> np.ndarray:
    c = np.broadcast_to(np.asarray(to_host(threshold), dtype=np.float64), (n_cols,)).copy()
    if np.any(~(c > 0)):
        raise ConfigError(f"rounding threshold must be > 0 per output; got {c.tolist()}.")
    return asarray(c, like=like)


def round_coefficients(coef: np.ndarray, threshold: float | np.ndarray, seed: int,
                       row_offset: int = 0) -> np.ndarray:
    """Unbiased randomized rounding of expansion coefficients.

    Parameters
    ----------
    coef : ndarray of shape (n,) or (n, n_outputs)
        Coefficients αᵢ (one column per expansion).
    threshold : float or ndarray of shape (n_outputs,)
        c > 0, per column.
    seed : int
    row_offset : int
        Global index of ``coef[0]`` (rounding a slice gives the same values
        as rounding the whole vector).

    Returns
    -------
    ndarray, same shape as ``coef``
        α̂ with α̂ᵢ = αᵢ if |αᵢ| >= c, else sign(αᵢ)·c with probability
        |αᵢ|/c and 0 otherwise.
    """
    A = _as_2d(coef)
    xp = namespace(A)
    c = _thresholds(threshold, A.shape[1], like=A)[None, :]
    i = np.arange(row_offset, row_offset + A.shape[0], dtype=np.int64)[:, None]
    j = np.arange(A.shape[1], dtype=np.int64)[None, :]
    u = asarray(hash_uniform(seed, "round.coef", i, j), like=A)
    mag = xp.abs(A)
    out = xp.where(mag >= c, A, xp.where(u * c < mag, xp.sign(A) * c, 0.0))
    return xp.reshape(out, coef.shape) if xp is not np else out.reshape(np.shape(coef))


def expected_nonzeros(coef: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """Expected number of non-zero rounded coefficients, per column.

    Parameters
    ----------
    coef : ndarray of shape (n,) or (n, n_outputs)
    threshold : float or ndarray of shape (n_outputs,)

    Returns
    -------
    ndarray of shape (n_outputs,)
        ``#{|αᵢ| >= c} + Σ_{|αᵢ| < c} |αᵢ| / c``.
    """
    A = _as_2d(coef)
    xp = namespace(A)
    A = xp.abs(A)
    c = _thresholds(threshold, A.shape[1], like=A)[None, :]
    return xp.sum(xp.where(A >= c, 1.0, A / c), axis=0)


def keep_probabilities(coef: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """P(α̂ᵢⱼ ≠ 0) = min(1, |αᵢⱼ| / cⱼ), shape of ``coef`` as 2-D."""
    A = _as_2d(coef)
    xp = namespace(A)
    A = xp.abs(A)
    c = _thresholds(threshold, A.shape[1], like=A)[None, :]
    return xp.minimum(1.0, A / c)


def threshold_for_budget(coef: np.ndarray, budget: float) -> np.ndarray:
    """Per-column threshold c whose expected number of non-zeros equals ``budget``.

    Parameters
    ----------
    coef : ndarray of shape (n,) or (n, n_outputs)
    budget : float
        Expected kernel evaluations per expansion, ``0 < budget``; columns
        with fewer non-zeros than the budget are kept exactly.

    Returns
    -------
    ndarray of shape (n_outputs,)

    Notes
    -----
    E[nnz](c) = k + S_k / c on the interval where exactly k coefficients
    exceed c (S_k the sum of the others) is decreasing in c, so sorting |α|
    once gives the exact solution in O(n log n).
    """
    if not budget > 0:
        raise ConfigError(f"budget={budget} must be > 0 (expected kernel evaluations).")
    A = np.abs(to_host(_as_2d(coef)))
    out = np.empty(A.shape[1])
    for col in range(A.shape[1]):
        a = np.sort(A[:, col])[::-1]
        a = a[a > 0]
        if a.size == 0 or a.size <= budget:
            # nothing to round: any c <= min |α| keeps all of them
            out[col] = a[-1] if a.size else 1.0
            continue
        tail = np.concatenate((np.cumsum(a[::-1])[::-1], [0.0]))  # tail[k] = Σ_{i>=k} a_i
        for k in range(int(np.floor(budget)) + 1):
            if k >= budget:
                break
            c = tail[k] / (budget - k)
            upper = a[k - 1] if k > 0 else np.inf
            if a[k] <= c <= upper:
                out[col] = c
                break
        else:  # numerical edge: fall back to the largest admissible value
            out[col] = a[0]
    return out


def hoeffding_bound(coef: np.ndarray, threshold: float | np.ndarray, kernel_bound: float,
                    delta: float) -> np.ndarray:
    """Hoeffding bound on |f̂(x) − f(x)| holding with probability >= 1 − δ, per column.

    Parameters
    ----------
    coef : ndarray of shape (n,) or (n, n_outputs)
        The original coefficients.
    threshold : float or ndarray of shape (n_outputs,)
    kernel_bound : float
        B >= |k(xᵢ, x)| for the points evaluated.
    delta : float in (0, 1)

    Returns
    -------
    ndarray of shape (n_outputs,)
        ``c·B·sqrt(m·ln(2/δ)/2)``, m the number of coefficients subject to rounding.
    """
    if not 0 < delta < 1:
        raise ConfigError(f"delta={delta} must be in (0, 1).")
    A = _as_2d(coef)
    xp = namespace(A)
    A = xp.abs(A)
    c = _thresholds(threshold, A.shape[1], like=A)
    rounded = (A > 0) & (A < c[None, :])
    if xp is not np:
        m = xp.sum(xp.astype(rounded, xp.float64), axis=0)
        return c * kernel_bound * xp.sqrt(m * float(np.log(2.0 / delta) / 2.0))
    m = rounded.sum(axis=0)
    return c * kernel_bound * np.sqrt(m * np.log(2.0 / delta) / 2.0)


def shared_keep_probabilities(coef: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """P(point i is kept) = min(1, maxⱼ |αᵢⱼ| / cⱼ) in the shared scheme.

    Parameters
    ----------
    coef : ndarray of shape (n,) or (n, n_outputs)
    threshold : float or ndarray of shape (n_outputs,)

    Returns
    -------
    ndarray of shape (n,)
        Its sum is the expected number of distinct kernel evaluations.
    """
    P = keep_probabilities(coef, threshold)
    return namespace(P).max(P, axis=1)


def round_shared(coef: np.ndarray, threshold: float | np.ndarray, seed: int,
                 row_offset: int = 0) -> np.ndarray:
    """Unbiased rounding with one coin per support point, shared by all outputs.

    Point i is kept with probability pᵢ = min(1, maxⱼ |αᵢⱼ|/cⱼ); a kept point's
    coefficients become αᵢⱼ/pᵢ (unchanged when pᵢ = 1), a dropped point's are 0.

    Parameters
    ----------
    coef : ndarray of shape (n,) or (n, n_outputs)
    threshold : float or ndarray of shape (n_outputs,)
    seed : int
    row_offset : int
        Global index of ``coef[0]``.

    Returns
    -------
    ndarray, same shape as ``coef``
        Rows are all zero or all kept; E[α̂] = α.

    Notes
    -----
    The coin of point i is ``hash_uniform(seed, "round.coef", i, 0)``, the
    per-output scheme's coin of output 0, so one output rounds the same way
    in both schemes.
    """
    A = _as_2d(coef)
    xp = namespace(A)
    p = shared_keep_probabilities(A, threshold)
    i = np.arange(row_offset, row_offset + A.shape[0], dtype=np.int64)
    u = asarray(hash_uniform(seed, "round.coef", i, np.zeros_like(i)), like=A)
    keep = (p >= 1.0) | (u < p)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = xp.where((p >= 1.0)[:, None], A, A / xp.where(p > 0, p, 1.0)[:, None])
    out = xp.where(keep[:, None], scaled, 0.0)
    return xp.reshape(out, coef.shape) if xp is not np else out.reshape(np.shape(coef))


def threshold_for_total_budget(coef: np.ndarray, budget: float) -> np.ndarray:
    """Per-output levels cⱼ = τ·‖α_·ⱼ‖₁ whose shared rounding keeps ``budget`` points
    in expectation (Σᵢ pᵢ = budget).

    Parameters
    ----------
    coef : ndarray of shape (n,) or (n, n_outputs)
    budget : float
        Expected distinct kernel evaluations per query, over all outputs.

    Returns
    -------
    ndarray of shape (n_outputs,)
        An output whose coefficients are all zero gets level 1 (it is never
        rounded: its coefficients stay 0).

    Notes
    -----
    O(n·q + n log n): τ is :func:`threshold_for_budget` of the single column
    rᵢ = maxⱼ |αᵢⱼ| / ‖α_·ⱼ‖₁.
    """
    if not budget > 0:
        raise ConfigError(f"budget={budget} must be > 0 (expected kernel evaluations).")
    A = _as_2d(coef)
    xp = namespace(A)
    A = xp.abs(A)
    mass = xp.sum(A, axis=0)
    scale = xp.where(mass > 0, mass, 1.0)
    r = xp.max(A / scale[None, :], axis=1)
    tau = float(threshold_for_budget(r, budget)[0])
    return xp.where(mass > 0, tau * scale, 1.0)


def shared_rounded_counts(coef: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """Per output, the terms subject to shared rounding: #{i : pᵢ < 1, αᵢⱼ ≠ 0}.

    The m of the Hoeffding bound c·B·sqrt(m·ln(2/δ)/2) in the shared scheme.

    Returns
    -------
    ndarray of shape (n_outputs,) of int
    """
    A = _as_2d(coef)
    xp = namespace(A)
    p = shared_keep_probabilities(A, threshold)
    counted = (p < 1.0)[:, None] & (A != 0)
    return counted.sum(axis=0) if xp is np else xp.sum(xp.astype(counted, xp.int64), axis=0)
