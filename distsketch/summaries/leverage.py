"""Weighted landmark samples (ridge leverage scores, RPCholesky) as mergeable bottom-k races.

A row i of weight wᵢ > 0 gets the key ``−log(1 − uᵢ) / wᵢ`` with
``uᵢ = hash_uniform(seed, purpose, i)``: an exponential clock of rate wᵢ
(equivalently the priority ``uᵢ^(1/wᵢ)`` of Efraimidis & Spirakis, ranked the
other way).  The k rows of smallest key are a weighted sample without
replacement: the first is row i with probability wᵢ / Σw, the next one among
the rest likewise, and so on.  A block keeps its own k smallest keys and a
merge keeps the k smallest of the union, exactly as
:class:`~distsketch.summaries.landmarks.UniformLandmarks` does, so the sample
depends only on (seed, purpose, the weights) — never on the chunking, the
merge order or the number of workers.  Rows of weight 0 are never drawn.

The weights are per-row functions of the block (:func:`ridge_leverage` for
ridge leverage scores, :func:`~distsketch.ops.rpcholesky.residual_diagonal`
for randomly pivoted Cholesky), evaluated in canonical tiles of global rows,
so a row's weight does not depend on the chunking either.

References
----------
Efraimidis, Spirakis. Weighted random sampling with a reservoir. IPL 2006.
Alaoui, Mahoney. Fast randomized kernel ridge regression with statistical
guarantees. NIPS 2015.
Musco, Musco. Recursive sampling for the Nyström method. NIPS 2017.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.kernels import kernel_diagonal, kernel_function
from distsketch.ops.namespace import as_block, asarray, densify, namespace, to_host
from distsketch.ops.nystrom import row_stable_apply
from distsketch.ops.random import hash_uniform
from distsketch.summaries.landmarks import UniformLandmarks, bottom_k, reservoir_of

__all__ = ["WeightedLandmarks", "race_keys", "ridge_from_spectrum", "ridge_leverage",
           "ridge_leverage_footprint"]


def race_keys(seed: int, purpose: str, index: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Keys ``−log(1 − u)/w`` of the weighted race (``inf`` where ``w <= 0``)."""
    u = hash_uniform(seed, purpose, np.asarray(index, dtype=np.int64))
    w = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore"):
        # 1 − u lies in (0, 1]: the clock −log(1 − u) is finite and Exp(1)-distributed
        return np.where(w > 0, -np.log1p(-u) / np.where(w > 0, w, 1.0), np.inf)


class WeightedLandmarks(UniformLandmarks):
    """Bottom-k weighted row sample (a mergeable reservoir of an exponential race).

    Parameters
    ----------
    n_samples : int
        k, the sample size.
    seed : int
    purpose : str
        Names the race; different purposes give independent samples.
    weight : callable
        ``weight(block, row_offset, *operands) -> (b,)`` non-negative row
        weights (host float64), a per-row function of the block.
    order : {"index", "priority"}, default "index"

    Notes
    -----
    State: k keys, k global rows and the k × d rows, O(k·d) whatever n; merge
    is exact and associative (inherited from :class:`UniformLandmarks`).
    Fewer than k rows come back when fewer than k rows have positive weight.
    """

    def __init__(self, n_samples: int, seed: int, purpose: str, weight: Callable[..., Any],
                 order: str = "index"):
        super().__init__(n_samples, seed, purpose, order)
        self.weight = weight

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        b = block.shape[0]
        index = np.arange(row_offset, row_offset + b, dtype=np.int64)
        w = np.asarray(to_host(self.weight(block, row_offset, *operands)), dtype=np.float64)
        key = race_keys(self.seed, self.purpose, index, w.reshape(-1))
        live = np.flatnonzero(np.isfinite(key))
        sel = live[bottom_k(key[live], index[live], self.n_samples)]
        return reservoir_of(block, key, index, sel, self.n_samples)

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """A race task and the state, without the weight's own memory (float64).

        Per row: the row, its index, weight, key and sort position
        (``d + 4``).  Fixed and state: the reservoir, ``k (d + 2)``.  The
        weight function adds its own (:func:`ridge_leverage_footprint`,
        :func:`~distsketch.ops.rpcholesky.residual_diagonal_footprint`).
        """
        state = 8.0 * self.n_samples * (n_features + 2)
        return Footprint(per_row=8.0 * (n_features + 4), fixed=state, state=state)

    def state_of(self, index: np.ndarray, rows: np.ndarray,  # type: ignore[override]
                 weights: np.ndarray | None = None) -> dict:
        """Rebuild the state of a finalized sample from its rows' weights."""
        if weights is None:
            raise TypeError("WeightedLandmarks.state_of needs the rows' weights (keys depend on them).")
        index = np.asarray(to_host(index), dtype=np.int64)
        return self._rebuilt(race_keys(self.seed, self.purpose, index, weights), index, rows)


def ridge_from_spectrum(eigenvalues: np.ndarray, n_landmarks: int) -> float:
    """The default ridge λ of leverage landmarks: ``tail_k / k`` of the pilot spectrum.

    With σ₁ ≥ σ₂ ≥ … the eigenvalues of ZᵀZ (those of the pilot Gram matrix
    ZZᵀ ≈ K) and k = min(⌈M/2⌉, ⌊p/2⌋) for M landmarks and p pilot features,
    λ = Σ_{j>k} σ_j / k (Musco & Musco 2017: λ-ridge leverage sampling of
    O(k log k) columns then gives a rank-k-accurate Nyström approximation;
    here M ≈ 2k).  The statistical dimension d_eff(λ) = Σ σ_j/(σ_j + λ) is
    then at most 2k ≈ M, so M landmarks cover it.  Floored at 10⁻¹²·Σσ so an
    exactly low-rank pilot still gives a positive λ.
    """
    s = np.sort(np.maximum(np.asarray(eigenvalues, dtype=np.float64), 0.0))[::-1]
    total = float(s.sum())
    if total <= 0.0:
        return 1.0
    k = max(1, min(-(-int(n_landmarks) // 2), len(s) // 2))
    return max(float(s[k:].sum()) / k, 1e-12 * total)


def ridge_leverage(block: Any, row_offset: int, landmarks: np.ndarray, M: np.ndarray,
                   A: np.ndarray, ridge: float, *, kernel: Any = "rbf",
                   params: dict | None = None) -> np.ndarray:
    """Approximate λ-ridge leverage scores of one row block (host float64, shape (b,)).

    With pilot features zᵢ = K(xᵢ, L) M and A = (ZᵀZ + λI)⁻¹ over all rows,
    ``ℓᵢ = zᵢᵀ A zᵢ + max(k(xᵢ, xᵢ) − ‖zᵢ‖², 0) / λ``: the leverage of the
    pilot Gram ZZᵀ plus the bound rᵢ/λ on the leverage of the residual
    kernel K − ZZᵀ (its diagonal rᵢ), so a row the pilot misses is not
    scored 0 (Musco & Musco's estimator has the same residual term).
    Evaluated in canonical tiles of global rows (chunking-independent).
    """
    X = as_block(densify(block), dtype=np.float64)
    xp = namespace(X)
    params = params or {}
    kfun = kernel_function(kernel, **params)
    L = asarray(landmarks, like=X, dtype=xp.float64)
    Mx = asarray(M, like=X, dtype=xp.float64)
    Ax = asarray(A, like=X, dtype=xp.float64)
    inv_ridge = 1.0 / float(ridge)

    def f(T: Any) -> Any:
        Z = asarray(kfun(T, L), like=T, dtype=xp.float64) @ Mx
        diag = asarray(kernel_diagonal(T, kernel, **params), like=T, dtype=xp.float64)
        resid = xp.maximum(diag - xp.sum(Z * Z, axis=1), 0.0)
        return xp.reshape(xp.sum((Z @ Ax) * Z, axis=1) + inv_ridge * resid, (-1, 1))

    return np.asarray(to_host(row_stable_apply(f, X, 1, row_offset)), dtype=np.float64)[:, 0]


def ridge_leverage_footprint(n_features: int, n_pilot: int, rank: int) -> Footprint:
    """Memory :func:`ridge_leverage` adds to a task (float64).

    Per row: a kernel row against the p pilot landmarks and the r pilot
    features, each with a product (``2 (p + r)``).  Fixed: the operands,
    p × d landmarks, the p × r map and the r × r matrix A.

    Parameters
    ----------
    n_features, n_pilot, rank : int
        d, p and r.
    """
    p, r = n_pilot, rank
    return Footprint(per_row=8.0 * 2 * (p + r), fixed=8.0 * (p * n_features + p * r + r * r))
