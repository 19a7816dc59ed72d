"""MEKA's projection pass: ``Wᵀ V`` over row blocks of basis coordinates and V.

Used by :class:`~distsketch.estimators.nystrom.meka.MEKA`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.meka import project_block
from distsketch.summaries.base import Summary
from distsketch.summaries.sums import SumMerge

__all__ = ["Projection"]


class Projection(SumMerge, Summary):
    """Wᵀ V over row blocks of ``[basis coordinates | V]`` (merge by addition).

    Parameters
    ----------
    width : int
        Basis coordinates of a row: the block's first ``width + 1`` columns
        hold them, the row's cluster label last; V follows.
    offsets, ranks : ndarray
        Each cluster's first basis column and its rank.
    """

    def __init__(self, width: int, offsets: np.ndarray, ranks: np.ndarray):
        self.width = int(width)
        self.offsets = np.asarray(offsets)
        self.ranks = np.asarray(ranks)

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> np.ndarray:
        block = np.asarray(block, dtype=np.float64)
        return project_block(block[:, : self.width + 1], block[:, self.width + 1:],
                             self.offsets, self.ranks)

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """A task over blocks of ``[coordinates | V]`` (``n_features`` columns) and its state.

        Per row: the float64 block row and its Σ k_s scattered basis values;
        state: ``Wᵀ V``, Σ k_s × t float64 (t = the columns of V).
        """
        total = int(self.ranks.sum())
        t = n_features - self.width - 1
        return Footprint(per_row=8.0 * (n_features + total), state=8.0 * total * t)
