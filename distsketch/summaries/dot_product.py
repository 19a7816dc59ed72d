"""The fit-time passes of the Gaussian and dot-product kernel sketches.

Two mergeable summaries over the rows, each one tree-reduced pass: the column
sums that centre the Gaussian sketch (:class:`ColumnSum`) and, after centring,
the radius with the per-degree sums of the Poisson term weights that split the
components over the Taylor terms (:class:`GaussianStats`).  Blocks of another
array namespace are reduced on their device; only per-row squared norms or the
d column sums come to the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.footprint import Footprint
from distsketch.ops.namespace import asarray, namespace, row_dots, to_host
from distsketch.ops.taylor import gaussian_term_weights
from distsketch.summaries._namespace import is_array_api
from distsketch.summaries.base import Summary
from distsketch.summaries.sums import SumMerge, sum_states

__all__ = ["STAT_ROWS", "ColumnSum", "GaussianStats", "centered_sq_norms", "row_sq_norms"]


def row_sq_norms(block: Any) -> np.ndarray:
    """Squared row norms in float64 (dense, sparse or on the block's device), shape (n,)."""
    if sp.issparse(block):
        b = sp.csr_matrix(block)
        return np.asarray(b.multiply(b).sum(axis=1), dtype=np.float64).ravel()
    xp = namespace(block) if is_array_api(block) else np  # on the block's device, in its namespace
    b = np.asarray(block, dtype=np.float64) if xp is np else xp.astype(block, xp.float64)
    return row_dots(xp, b, b)


class ColumnSum(SumMerge, Summary):
    """Row count and column sums (float64); merge = sum."""

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        if sp.issparse(block):
            colsum = np.asarray(block.sum(axis=0), dtype=np.float64).ravel()
        elif is_array_api(block):
            xp = namespace(block)  # summed on the block's device; the d sums are the state
            colsum = to_host(xp.sum(xp.astype(block, xp.float64), axis=0))
        else:
            colsum = np.asarray(block, dtype=np.float64).sum(axis=0)
        return {"n": int(block.shape[0]), "sum": colsum}


def centered_sq_norms(block: Any, center: np.ndarray) -> np.ndarray:
    """Squared norms of the rows minus ``center`` (d,), shape (n,)."""
    if sp.issparse(block):
        b = sp.csr_matrix(block)
        return np.maximum(row_sq_norms(b) - 2.0 * (b @ center) + center @ center, 0.0)
    if is_array_api(block):
        xp = namespace(block)
        return row_sq_norms(xp.astype(block, xp.float64) - asarray(center, like=block))
    return row_sq_norms(np.asarray(block, dtype=np.float64) - center)


STAT_ROWS = 4096     # rows per sub-block of the term-weight pass (rows × (max_degree + 1) floats)


class GaussianStats(Summary):
    """Radius after centring and per-degree Σ_x w_j(x), Σ_x w_j(x)² (Poisson weights); merge = max/sum."""

    def __init__(self, gamma: float, max_degree: int):
        self.gamma = gamma
        self.max_degree = max_degree

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Memory of one ``chunk`` task: per row the centred row and its norms (float64);
        fixed: the weights of one ``STAT_ROWS`` sub-block, their squares and a temporary."""
        return Footprint(per_row=8.0 * (n_features + 2),
                         fixed=3 * 8.0 * STAT_ROWS * (self.max_degree + 1))

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        sq = np.asarray(to_host(centered_sq_norms(block, operands[0])))
        J = self.max_degree + 1
        s1, s2 = np.zeros(J), np.zeros(J)
        for i in range(0, sq.size, STAT_ROWS):
            w = gaussian_term_weights(sq[i:i + STAT_ROWS], self.gamma, self.max_degree)
            s1 += w.sum(axis=0)
            s2 += np.einsum("ij,ij->j", w, w)
        return {"n": int(sq.size), "max_sq": float(sq.max()) if sq.size else 0.0, "w": s1, "w2": s2}

    def merge(self, states: list[dict]) -> dict:
        out = sum_states([{k: s[k] for k in ("n", "w", "w2")} for s in states])
        out["max_sq"] = max(s["max_sq"] for s in states)
        return out
