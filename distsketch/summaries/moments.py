"""Per-column count, mean and sum of squared deviations, merged exactly (Chan et al.)."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.namespace import asarray, namespace, zeros
from distsketch.summaries.base import Summary

__all__ = ["ColumnMoments", "column_scale"]


class ColumnMoments(Summary):
    """Per-column count, mean and sum of squared deviations of a block.

    State: ``{"n", "mean" (d,), "m2" (d,)}``, 2·d + 1 numbers whatever n, in
    the block's namespace.
    The merge is the pairwise update of Chan, Golub and LeVeque (1979), which
    keeps the variance accurate where a sum of squares would cancel.
    """

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        xp = namespace(block)
        B = asarray(block, like=block, dtype=xp.float64)
        mean = xp.mean(B, axis=0) if B.shape[0] else zeros(B.shape[1], B)
        return {"n": B.shape[0], "mean": mean, "m2": xp.sum((B - mean) ** 2, axis=0)}

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Per row: the block in float64 and its deviations (``2 d``); fixed: three d-vectors."""
        return Footprint(per_row=16.0 * n_features, fixed=24.0 * n_features)

    def merge(self, states: list[dict]) -> dict:
        out = states[0]
        for s in states[1:]:
            n = out["n"] + s["n"]
            if n == 0:
                continue
            delta = s["mean"] - out["mean"]
            mean = out["mean"] + delta * (s["n"] / n)
            m2 = out["m2"] + s["m2"] + delta**2 * (out["n"] * s["n"] / n)
            out = {"n": n, "mean": mean, "m2": m2}
        return out


def column_scale(state: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, scale)`` of a :class:`ColumnMoments` state: population standard deviations.

    Constant columns get scale 1 (they are centred only), as
    ``sklearn.preprocessing.StandardScaler`` does.  In the state's namespace.
    """
    n = max(int(state["n"]), 1)
    like = state["m2"]
    xp = namespace(like)
    scale = xp.sqrt(asarray(like, like=like, dtype=xp.float64) / n)
    scale = xp.where(scale == 0, 1.0, scale)
    return asarray(state["mean"], like=like, dtype=xp.float64), scale
