"""The two passes of k-Space kernel PCA: the sketches' Grams, and Theorem 7's cross term.

Used by :class:`~distsketch.estimators.decomposition.kspace.KSpaceKernelPCA` (and
:class:`~distsketch.estimators.decomposition.kspace.KernelPCR`), which passes in its fitted
row maps; these summaries know no estimator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
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
    n_s, n_t : int, optional
        m and r; needed only by :meth:`footprint`.
    degree : int, optional
        q, the sketches' polynomial degree; needed only by :meth:`footprint`.

    Notes
    -----
    State size: 1 + m² + m·r float64; merge by addition.
    """

    def __init__(self, map_s: Any, map_t: Any, *, n_s: int | None = None,
                 n_t: int | None = None, degree: int | None = None):
        self.map_s = map_s
        self.map_t = map_t
        self.n_s = n_s
        self.n_t = n_t
        self.degree = degree

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Memory of one ``chunk`` task and of one state (unknown without m, r and q).

        Per row: the row in float64 and, for each degree-q sketch, about 4q
        float64 values per output column (its q linear stages, their FFT
        spectra and the output).  State: ``ZsᵀZs`` and ``ZsᵀZt``.  The state is
        not counted as fixed memory: a fixed part above the planner's working
        set would make it fall back to input-sized blocks.
        """
        if self.n_s is None or self.n_t is None or self.degree is None:
            return Footprint()
        m, r = int(self.n_s), int(self.n_t)
        return Footprint(per_row=8.0 * (n_features + 4 * int(self.degree) * (m + r)),
                         state=8.0 * m * (m + r))

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
        K = self.kernel(as_block(densify(block)), self.landmarks)
        return V.T @ K
