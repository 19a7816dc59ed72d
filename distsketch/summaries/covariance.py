"""Exact second-moment summaries: ZᵀZ, Zᵀy, column sums and row counts."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.ops.namespace import asarray, densify, namespace
from distsketch.summaries.base import Summary
from distsketch.summaries.sums import SumMerge

__all__ = ["Covariance", "covariance_state"]


def covariance_state(Z: np.ndarray, y: np.ndarray | None = None) -> dict:
    """``{n, sum, ztz}`` of float64 rows Z (b × m) and, with targets y (b × t),
    ``zty, ysum, yty``, in Z's namespace (the state merges on Z's device)."""
    xp = namespace(Z)
    state = {"n": Z.shape[0], "sum": xp.sum(Z, axis=0), "ztz": Z.T @ Z}
    if y is not None:
        state["zty"] = Z.T @ y
        state["ysum"] = xp.sum(y, axis=0)
        state["yty"] = y.T @ y
    return state


class Covariance(SumMerge, Summary):
    """Exact Gram/covariance summary of a (feature) matrix.

    ``chunk`` maps the block through ``transform(block, offset, *operands)``
    (identity by default), then returns ``{"n", "sum", "ztz"}`` and, when
    ``n_targets > 0``, ``"zty"``, ``"ysum"`` and ``"yty"`` from targets stored
    as the last ``n_targets`` columns of the block (:func:`covariance_state`).

    State size: m² + m(t + 1) float64 values; merge is exact (sums), hence
    associative and commutative up to floating-point rounding order.
    """

    def __init__(self, transform: Any = None, n_targets: int = 0):
        self.transform = transform
        self.n_targets = int(n_targets)

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        if self.n_targets:
            y = asarray(block[:, -self.n_targets:], like=block,
                        dtype=namespace(block).float64)
            block = block[:, : -self.n_targets]
        Z = block if self.transform is None else self.transform(block, row_offset, *operands)
        Z = densify(Z)
        Z = asarray(Z, like=Z, dtype=namespace(Z).float64)
        return covariance_state(Z, y if self.n_targets else None)
