"""The kept entries of one row strip of a sparsified Gram matrix, reduced over column blocks.

Used by :class:`~distsketch.estimators.sampling.sparsified.SparsifiedGram`; the tile
and its sampling are :mod:`distsketch.ops.sparsify`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
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
    strip_rows : int, optional
        Rows of a strip as planned (the tile height); needed only by
        :meth:`footprint`.

    Notes
    -----
    State size: the kept entries, about p × (strip rows) × (block rows).
    """

    def __init__(self, kernel: Any, params: dict, seed: int, p: float, quantize: bool,
                 bound: float | None, r0: int, n: int, strip_rows: int | None = None):
        self.kernel = kernel
        self.params = params
        self.seed = seed
        self.p = p
        self.quantize = quantize
        self.bound = bound
        self.r0 = r0
        self.n = n
        self.strip_rows = strip_rows

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Memory of one ``chunk`` task (unknown without ``strip_rows``).

        Per block row: the kernel tile's column of ``strip_rows`` entries with
        its broadcast indices, hash temporaries, keep mask and values (about
        ten words an entry), and the row itself; fixed: the strip's rows.
        """
        if self.strip_rows is None:
            return Footprint()
        T = int(self.strip_rows)
        return Footprint(per_row=80.0 * T + 8.0 * n_features, fixed=8.0 * T * n_features)

    def chunk(self, block: Any, row_offset: int, XS: np.ndarray) -> Any:
        kfun = kernel_function(self.kernel, **self.params)
        K = kernel_tile(kfun, XS, self.r0, np.asarray(block), row_offset)
        rows, cols, vals = simplify_tile(K, self.r0, row_offset, self.seed, self.p, self.quantize,
                                         self.bound, lower=True)
        return {"rows": rows.astype(np.int32), "cols": cols, "vals": vals}

    def merge(self, states: list[Any]) -> Any:
        return {k: np.concatenate([s[k] for s in states]) for k in ("rows", "cols", "vals")}
