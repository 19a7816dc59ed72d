"""The two passes of k-Space kernel PCA: the sketches' Grams, and Theorem 7's cross term.

Used by :class:`~distsketch.estimators.kspace.KSpaceKernelPCA` (and
:class:`~distsketch.estimators.kspace.KernelPCR`), which passes in its fitted
row maps; these summaries know no estimator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.ops.namespace import as_block, densify
from distsketch.summaries.base import Summary
from distsketch.summaries.ridge import dense_float64
from distsketch.summaries.sums import SumMerge

__all__ = ["FactorCross", "SketchGram"]


class SketchGram(SumMerge, Summary):
    """State {n, ss = ZsᵀZs, st = ZsᵀZt} of two sketches of the rows (float64, exact sums).

    Parameters
    ----------
    map_s, map_t : callable
        Picklable row maps ``(block, row_offset) -> Z`` of the two fitted
        sketches S (m columns) and T (r columns).

    Notes
    -----
    State size: 1 + m² + m·r float64; merge by addition.
    """

    def __init__(self, map_s: Any, map_t: Any):
        self.map_s = map_s
        self.map_t = map_t

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        Zs = dense_float64(self.map_s(block, row_offset))
        Zt = dense_float64(self.map_t(block, row_offset))
        return {"n": Zs.shape[0], "ss": Zs.T @ Zs, "st": Zs.T @ Zt}


class FactorCross(SumMerge, Summary):
    """State Vᵀ K(A, R) (k × l) for Theorem 7's factorisation.

    Parameters
    ----------
    embed : callable
        Picklable ``(block, row_offset) -> V`` (b × k), the fitted embedding.
    kernel : callable
        Picklable ``(A, R) -> K(A, R)``, the fitted kernel.
    landmarks : ndarray of shape (l, d)
        The landmark rows R.

    Notes
    -----
    State size: k·l float64; merge by addition.
    """

    def __init__(self, embed: Any, kernel: Any, landmarks: np.ndarray):
        self.embed = embed
        self.kernel = kernel
        self.landmarks = landmarks

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> np.ndarray:
        V = self.embed(block, row_offset)
        # NumPy as before; a block of another namespace is kept
        K = self.kernel(as_block(densify(block)), self.landmarks)
        return V.T @ K
