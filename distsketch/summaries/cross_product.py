"""The cross product ``Aᵀ B`` of two column groups of the same rows, merged by addition.

Used by :class:`~distsketch.estimators.solvers.meka_ridge.MEKAKernelRidge` (its Gram
and its ``Wᵀ α`` passes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.summaries.base import Summary
from distsketch.summaries.sums import SumMerge

__all__ = ["CrossProduct"]


class CrossProduct(SumMerge, Summary):
    """``Aᵀ B`` for blocks holding ``[A | B]`` (B: the last ``n_right`` columns).

    Parameters
    ----------
    n_right : int
        Columns of B.

    Notes
    -----
    State: ``{"atb"}``, (columns of A) × ``n_right`` float64 whatever the
    rows; merge by addition.
    """

    def __init__(self, n_right: int):
        self.n_right = int(n_right)

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """One state, ``Aᵀ B`` in float64 for blocks of ``n_features`` columns (per row: unknown)."""
        return Footprint(state=8.0 * (n_features - self.n_right) * self.n_right)

    def chunk(self, block: Any, row_offset: int) -> dict:
        blk = np.asarray(block, dtype=np.float64)
        return {"atb": blk[:, : -self.n_right].T @ blk[:, -self.n_right:]}
