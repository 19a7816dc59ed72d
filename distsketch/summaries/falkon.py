"""One pass of Falkon's conjugate gradient: ``K_nMᵀ (K_nM V)`` or ``K_nMᵀ Y`` over row blocks.

Used by :class:`~distsketch.estimators.solvers.falkon.NystromKernelRidge`; the
per-block products are :func:`distsketch.ops.falkon.gram_times`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.ops.falkon import gram_times
from distsketch.ops.namespace import as_block
from distsketch.summaries.base import Summary
from distsketch.summaries.sums import SumMerge

__all__ = ["FalkonPass"]


class FalkonPass(SumMerge, Summary):
    """One block's ``K_bMᵀ (K_bM V)`` (operand V) or ``K_bMᵀ Y`` (Y: the last ``n_y`` columns).

    Parameters
    ----------
    kernel, params
        As :func:`~distsketch.ops.kernels.pairwise_kernel`.
    tile_rows : int
        Rows of the ``tile_rows × M`` kernel sub-tile made at a time.
    n_y : int, default 0
        Target columns at the end of each block: the pass is then ``K_nMᵀ Y``
        (state ``{"b"}``, M × n_y), else ``K_nMᵀ (K_nM V)`` (state ``{"hv"}``,
        M × t); merge by addition.
    """

    def __init__(self, kernel: Any, params: dict, tile_rows: int, n_y: int = 0):
        self.kernel = kernel
        self.params = dict(params)
        self.tile_rows = int(tile_rows)
        self.n_y = int(n_y)

    def chunk(self, block: Any, row_offset: int, centers: Any, V: Any = None) -> dict:
        blk = as_block(block, dtype=np.float64)
        if self.n_y:
            _, b = gram_times(blk[:, : -self.n_y], centers, None, blk[:, -self.n_y:],
                              self.kernel, self.params, self.tile_rows)
            return {"b": b}
        hv, _ = gram_times(blk, centers, V, None, self.kernel, self.params, self.tile_rows)
        return {"hv": hv}
