"""The kept entries of one row strip of a sparsified Gram matrix, reduced over column blocks.

Used by :class:`~distsketch.estimators.sparsified.SparsifiedGram`; the tile
and its sampling are :mod:`distsketch.ops.sparsify`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.ops.kernels import kernel_function
from distsketch.ops.sparsify import kernel_tile, simplify_tile
from distsketch.summaries.base import Summary

__all__ = ["StripSummary"]


class StripSummary(Summary):
    """Kept entries of one lower-triangle row strip, tree-reduced over column blocks.

    ``chunk`` evaluates the tile (strip rows × block rows) and keeps the
    sampled entries on or below the diagonal; states are COO triplets (dicts) and
    ``merge`` concatenates them, so the result does not depend on the order.

    Parameters
    ----------
    kernel, params
        As :func:`~distsketch.ops.kernels.kernel_function`.
    seed, p, quantize, bound
        The sampling of the kept entries: see
        :func:`~distsketch.ops.sparsify.simplify_entries`.
    r0 : int
        Global index of the strip's first row.
    n : int
        Rows of the whole matrix.

    Notes
    -----
    State size: the kept entries, about p × (strip rows) × (block rows).
    """

    def __init__(self, kernel: Any, params: dict, seed: int, p: float, quantize: bool,
                 bound: float | None, r0: int, n: int):
        self.kernel = kernel
        self.params = params
        self.seed = seed
        self.p = p
        self.quantize = quantize
        self.bound = bound
        self.r0 = r0
        self.n = n

    def chunk(self, block: Any, row_offset: int, XS: np.ndarray) -> Any:
        kfun = kernel_function(self.kernel, **self.params)
        K = kernel_tile(kfun, XS, self.r0, np.asarray(block), row_offset)
        rows, cols, vals = simplify_tile(K, self.r0, row_offset, self.seed, self.p, self.quantize,
                                         self.bound, lower=True)
        return {"rows": rows.astype(np.int32), "cols": cols, "vals": vals}

    def merge(self, states: list[Any]) -> Any:
        return {k: np.concatenate([s[k] for s in states]) for k in ("rows", "cols", "vals")}
