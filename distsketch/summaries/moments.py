"""Per-column count, mean and sum of squared deviations, merged exactly (Chan et al.)."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.summaries.base import Summary

__all__ = ["ColumnMoments", "MomentsAndSample", "column_scale"]


class ColumnMoments(Summary):
    """Per-column count, mean and sum of squared deviations of a block.

    State: ``{"n", "mean" (d,), "m2" (d,)}``, 2·d + 1 numbers whatever n.
    The merge is the pairwise update of Chan, Golub and LeVeque (1979), which
    keeps the variance accurate where a sum of squares would cancel.
    """

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        B = np.asarray(block, dtype=np.float64)
        mean = B.mean(axis=0) if B.shape[0] else np.zeros(B.shape[1])
        return {"n": B.shape[0], "mean": mean, "m2": ((B - mean) ** 2).sum(axis=0)}

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


class MomentsAndSample(Summary):
    """:class:`ColumnMoments` and a row sample (any bottom-k sampler) in one pass.

    State: ``{"moments": ..., "sample": ...}``; the sample is the sampler's
    own state (e.g. :class:`~distsketch.summaries.landmarks.UniformLandmarks`:
    k rows whatever n), so a fit that reads every row for its column moments
    also draws the rows a data-driven parameter needs, without another pass.
    """

    def __init__(self, sampler: Summary):
        self.moments = ColumnMoments()
        self.sampler = sampler

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        return {"moments": self.moments.chunk(block, row_offset),
                "sample": self.sampler.chunk(block, row_offset)}

    def merge(self, states: list[dict]) -> dict:
        return {"moments": self.moments.merge([s["moments"] for s in states]),
                "sample": self.sampler.merge([s["sample"] for s in states])}


def column_scale(state: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, scale)`` of a :class:`ColumnMoments` state: population standard deviations.

    Constant columns get scale 1 (they are centred only), as
    ``sklearn.preprocessing.StandardScaler`` does.
    """
    n = max(int(state["n"]), 1)
    scale = np.sqrt(np.asarray(state["m2"], dtype=np.float64) / n)
    scale[scale == 0] = 1.0
    return np.asarray(state["mean"], dtype=np.float64), scale
