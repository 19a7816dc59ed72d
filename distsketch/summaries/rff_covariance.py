"""The feature covariance of random Fourier features, mapped a bounded slice of rows at a time.

:class:`BlockedCovariance` is the exact covariance summary of
:class:`~distsketch.estimators.decomposition.streaming_kpca.StreamingKernelPCA` (RNCA);
:class:`RFFRows` is the picklable row map z(x) it (and the Frequent
Directions summary) applies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.namespace import densify
from distsketch.ops.rff import RFF_MAP_ROWS, rff_map
from distsketch.summaries._namespace import is_array_api
from distsketch.summaries.covariance import Covariance, covariance_state

__all__ = ["MAP_ROWS", "BlockedCovariance", "RFFRows"]

#: Rows mapped at once (:data:`~distsketch.ops.rff.RFF_MAP_ROWS`).
MAP_ROWS = RFF_MAP_ROWS


class RFFRows:
    """Picklable row map z(x) for the summaries.

    ``offset`` is the global index of the block's first row: ``partial_fit``
    reduces new rows with ``row_start`` at the rows already seen, so every
    row meets the same row-stable GEMM tiling as in ``fit`` on the
    concatenation and gets bitwise the same features.
    """

    def __call__(self, block: Any, offset: int, W: np.ndarray, b: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray:
        return rff_map(block, W, b, offset, out=out)

    def __dask_tokenize__(self) -> Any:
        return ("distsketch.skpca.rff-rows",)


class BlockedCovariance(Covariance):
    """:class:`Covariance` of mapped rows, mapping ``MAP_ROWS`` rows at a time so a
    task never holds more than ``MAP_ROWS × m`` features whatever its block size.

    Parameters are those of :class:`Covariance`; with an :class:`RFFRows`
    transform (operands ``W, b``) dense slices are mapped into one reused
    buffer.  The state and its merge are :class:`Covariance`'s.
    """

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        # A running sum in place, slice after slice: the left fold of `merge` bit for bit,
        # with two m x m arrays instead of one per slice.  Dense slices are mapped into
        # reused buffers: fresh pages per slice cost page faults, which do not scale with the cores busy.
        if not isinstance(block, np.ndarray) and is_array_api(block):
            # a block of another namespace: Covariance's own chunk, on the block's device
            # (the reused host buffers below are a NumPy-only economy)
            return super().chunk(block, row_offset, *operands)
        n = block.shape[0]
        state, gram, zbuf = None, None, None
        for a in range(0, max(n, 1), MAP_ROWS):
            part = block[a: a + MAP_ROWS, :]
            rows = part.shape[0]
            if hasattr(part, "tocsr") or not isinstance(self.transform, RFFRows) or rows == 0:
                Z = self.transform(part, row_offset + a, *operands)
                Z = np.asarray(densify(Z), dtype=np.float64)
            else:
                if zbuf is None:
                    W, b = operands[0], operands[1]
                    # the paired form (empty b) has two features per frequency
                    width = W.shape[1] if b.shape[0] else 2 * W.shape[1]
                    zbuf = np.empty((min(n, MAP_ROWS), width),
                                    dtype=part.dtype if part.dtype == np.float32 else np.float64)
                Z = self.transform(part, row_offset + a, *operands,  # type: ignore[misc]
                                   out=zbuf[:rows])
            if state is None:
                state = covariance_state(Z)
                gram = np.empty(state["ztz"].shape, dtype=Z.dtype)
                continue
            state["n"] += Z.shape[0]
            state["sum"] += Z.sum(axis=0) if Z.dtype == np.float64 else \
                Z.sum(axis=0, dtype=np.float64)
            same = gram is not None and gram.dtype == Z.dtype
            state["ztz"] += np.matmul(Z.T, Z, out=gram if same else None)
        return state  # type: ignore[return-value]

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Memory of one ``chunk`` task and of one state.

        Per row: the input row.  Fixed: a ``MAP_ROWS``-row slice of features
        (float32 for float32 input, else float64) and its float64 copy, and
        the two m × m arrays the running sum holds (the state's ``ZᵀZ`` and
        the slice's Gram).  State: :class:`Covariance`'s.  Unknown without
        ``n_columns``.
        """
        m = self.n_columns
        if m is None:
            return Footprint()
        feature_bytes = 4 if itemsize == 4 else 8
        return Footprint(per_row=n_features * itemsize,
                         fixed=MAP_ROWS * m * (feature_bytes + 8) + 2 * m * m * 8,
                         state=super().footprint(n_features, itemsize).state)
