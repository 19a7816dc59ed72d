"""Standardisation learned by a mergeable summary, then frozen in the state."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.graph import reduce_blocks
from distsketch.summaries.base import Summary

__all__ = ["apply_scaler", "learn_scaler"]


class _Moments(Summary):
    """Per-column count, mean and sum of squared deviations (Chan et al. merge)."""

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        B = np.asarray(block, dtype=np.float64)
        mean = B.mean(axis=0)
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


def learn_scaler(X: Any) -> dict:
    """Column means and standard deviations of X in one tree-reduced pass.

    Parameters
    ----------
    X : dask array of shape (n, d)

    Returns
    -------
    dict
        ``{"mean": list of d floats, "scale": list of d floats}`` (JSON-able);
        constant columns get scale 1 (centred only).

    Notes
    -----
    Per task: one block and a 3·d state; communication: one state per block.
    """
    mom = reduce_blocks(_Moments(), X, name="standardize-moments", progress=False)
    n = max(int(mom["n"]), 1)
    scale = np.sqrt(mom["m2"] / n)
    scale[scale == 0] = 1.0  # constant columns are centred only
    return {"mean": mom["mean"].tolist(), "scale": scale.tolist()}


def apply_scaler(X: Any, scaler: dict | None) -> Any:
    """``(X - mean) / scale`` lazily, in X's float type (float64 for integer input)."""
    if scaler is None:
        return X
    dt = X.dtype if np.dtype(X.dtype).kind == "f" else np.float64
    mean = np.asarray(scaler["mean"], dtype=np.float64).astype(dt)
    scale = np.asarray(scaler["scale"], dtype=np.float64).astype(dt)
    return ((X.astype(dt) - mean) / scale).astype(dt)
