"""Exact second-moment summaries: ZᵀZ, Zᵀy, column sums and row counts."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.summaries.base import Summary

__all__ = ["Covariance"]


class Covariance(Summary):
    """Exact Gram/covariance summary of a (feature) matrix.

    ``chunk`` maps the block through ``transform(block, offset, *operands)``
    (identity by default), then returns ``{"n", "sum", "ztz"}`` and, when
    ``with_targets`` is set, ``"zty"`` and ``"yty"`` from targets stored as the
    last ``n_targets`` columns of the block.

    State size: m² + m(t + 1) float64 values; merge is exact (sums), hence
    associative and commutative up to floating-point rounding order.
    """

    def __init__(self, transform: Any = None, n_targets: int = 0):
        self.transform = transform
        self.n_targets = int(n_targets)

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        if self.n_targets:
            y = np.asarray(block[:, -self.n_targets:], dtype=np.float64)
            block = block[:, : -self.n_targets]
        Z = block if self.transform is None else self.transform(block, row_offset, *operands)
        Z = np.asarray(Z.toarray() if hasattr(Z, "toarray") else Z, dtype=np.float64)
        state = {"n": Z.shape[0], "sum": Z.sum(axis=0), "ztz": Z.T @ Z}
        if self.n_targets:
            state["zty"] = Z.T @ y
            state["ysum"] = y.sum(axis=0)
            state["yty"] = y.T @ y
        return state

    def merge(self, states: list[dict]) -> dict:
        out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in states[0].items()}
        for s in states[1:]:
            for k, v in s.items():
                out[k] = out[k] + v
        return out
