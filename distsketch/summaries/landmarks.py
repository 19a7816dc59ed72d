"""Uniform landmark samples as mergeable bottom-k reservoirs.

Every row i gets the priority ``hash_uniform(seed, purpose, i)``; a sample of
size k is the k rows of smallest priority.  A block keeps its own k smallest,
and merging keeps the k smallest of the union, so the final sample is a
uniform sample without replacement that depends only on (seed, purpose, n) —
never on the chunking, the merge order or the number of workers.

:class:`UniformLandmarks` samples the whole array; :class:`ClusterLandmarks`
keeps one reservoir per cluster (rows labelled by their nearest centre), as
MEKA needs for its per-cluster Nyström landmarks and link-matrix samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distsketch.ops.meka import nearest_centre
from distsketch.ops.random import hash_uniform
from distsketch.summaries.base import Summary

__all__ = ["ClusterLandmarks", "UniformLandmarks", "bottom_k"]

_NO_INDEX = np.iinfo(np.int64).max


def _rows(block: Any, idx: np.ndarray) -> np.ndarray:
    sub = block[idx]
    sub = sub.toarray() if hasattr(sub, "toarray") else np.asarray(sub)
    return np.asarray(sub, dtype=np.float64).reshape(len(idx), block.shape[1])


def bottom_k(priority: np.ndarray, index: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k entries of smallest (priority, index), in that order."""
    order = np.lexsort((index, priority))
    return order[:k]


def _empty_reservoir(k: int, d: int, shape: tuple[int, ...] = ()) -> dict:
    return {"priority": np.full((*shape, k), np.inf),
            "index": np.full((*shape, k), _NO_INDEX, dtype=np.int64),
            "rows": np.zeros((*shape, k, d))}


def _conform(states: list[dict], key: str = "rows") -> list[np.ndarray]:
    # an identity state (from ``empty()``) may not know d: give it the others' width
    d = max(st[key].shape[-1] for st in states)
    return [st[key] if st[key].shape[-1] == d else
            np.zeros((*st[key].shape[:-1], d)) for st in states]


def _keep(priority: np.ndarray, index: np.ndarray, rows: np.ndarray, k: int) -> dict:
    sel = bottom_k(priority, index, k)
    out = _empty_reservoir(k, rows.shape[1])
    out["priority"][: len(sel)] = priority[sel]
    out["index"][: len(sel)] = index[sel]
    out["rows"][: len(sel)] = rows[sel]
    return out


class UniformLandmarks(Summary):
    """Bottom-k uniform row sample (a mergeable reservoir).

    Parameters
    ----------
    n_samples : int
        k, the sample size.
    seed : int
        Seed of the priorities.
    purpose : str
        Names the priority stream; different purposes give independent samples.
    order : {"index", "priority"}, default "index"
        Order of the rows ``finalize`` returns: by global row index, or by
        priority (the order in which the reservoir ranks them).

    Notes
    -----
    State: k priorities, k global row indices and the k × d rows (float64), so
    O(k·d) whatever n; merge is exact and associative.  ``finalize`` returns
    ``(index, rows)``; fewer than k rows are returned when the array has fewer
    rows.
    """

    def __init__(self, n_samples: int, seed: int, purpose: str = "landmarks",
                 order: str = "index"):
        if order not in ("index", "priority"):
            raise ValueError(f"UniformLandmarks: order must be 'index' or 'priority', got {order!r}.")
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        self.purpose = str(purpose)
        self.order = order

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        b = block.shape[0]
        # row_offset is global: rows appended later are reduced with the graph's
        # row_start, so their priorities are those of a single pass
        start = row_offset
        index = np.arange(start, start + b, dtype=np.int64)
        priority = hash_uniform(self.seed, self.purpose, index)
        sel = bottom_k(priority, index, self.n_samples)
        out = _empty_reservoir(self.n_samples, block.shape[1])
        out["priority"][: len(sel)] = priority[sel]
        out["index"][: len(sel)] = index[sel]
        out["rows"][: len(sel)] = _rows(block, sel)
        return out

    def merge(self, states: list[dict]) -> dict:
        return _keep(np.concatenate([s["priority"] for s in states]),
                     np.concatenate([s["index"] for s in states]),
                     np.concatenate(_conform(states)), self.n_samples)

    def empty(self, n_features: int = 1) -> dict:
        return _empty_reservoir(self.n_samples, n_features)

    def state_of(self, index: np.ndarray, rows: np.ndarray) -> dict:
        """Rebuild the state of a finalized sample (priorities are recomputed)."""
        index = np.asarray(index, dtype=np.int64)
        return _keep(hash_uniform(self.seed, self.purpose, index), index,
                     np.asarray(rows, dtype=np.float64).reshape(len(index), -1), self.n_samples)

    def finalize(self, state: dict) -> tuple[np.ndarray, np.ndarray]:
        valid = state["index"] != _NO_INDEX
        idx = state["index"][valid]
        if self.order == "priority":
            # the reservoir is kept in (priority, index) order, unused slots last
            return idx, state["rows"][valid]
        order = np.argsort(idx, kind="stable")
        return idx[order], state["rows"][valid][order]


class ClusterLandmarks(Summary):
    """Per-cluster bottom-k reservoirs and cluster sizes.

    Rows are labelled by their nearest centre (the operand of ``chunk``), then
    each cluster keeps, for every ``(purpose, k)`` in ``samples``, the k rows of
    smallest priority ``hash(seed, purpose, row)``.

    Parameters
    ----------
    n_clusters : int
    samples : sequence of (str, int)
        Reservoirs to keep per cluster, e.g. ``[("meka.landmarks", m),
        ("meka.link", (1 + ρ) k)]``.
    seed : int

    Notes
    -----
    State: cluster sizes plus c · Σk rows of d floats; chunk cost O(b·c·d) for
    the labels.  ``finalize`` returns ``{"count": (c,), purpose: (index, rows,
    n)}`` with index (c, k), rows (c, k, d) sorted by global row within each
    cluster (unused slots last, index = int64 max) and n (c,) valid rows.
    """

    def __init__(self, n_clusters: int, samples: Sequence[tuple[str, int]], seed: int):
        self.n_clusters = int(n_clusters)
        self.samples = tuple((str(p), int(k)) for p, k in samples)
        self.seed = int(seed)

    def chunk(self, block: Any, row_offset: int, centres: np.ndarray) -> dict:
        c = self.n_clusters
        b, d = block.shape
        labels, _ = nearest_centre(block, centres, row_offset)
        index = np.arange(row_offset, row_offset + b, dtype=np.int64)
        counts = np.bincount(labels, minlength=c).astype(np.int64)
        state: dict[str, Any] = {"count": counts}
        # rows grouped by label, in index order within a group (a stable sort of small
        # integers, radix-sorted by NumPy)
        by_label = np.argsort(labels.astype(np.int32 if c > 2**15 else np.int16), kind="stable")
        ends = np.cumsum(counts)
        starts = ends - counts
        for purpose, k in self.samples:
            priority = hash_uniform(self.seed, purpose, index)
            res = _empty_reservoir(k, d, (c,))
            for s in range(c):
                members = by_label[starts[s]:ends[s]]
                p_s = priority[members]
                if members.size > k:
                    # every row at or below the k-th smallest priority, still in index order,
                    # so the stable sort below breaks ties by index exactly as a full sort would
                    keep = p_s <= np.partition(p_s, k - 1)[k - 1]
                    members, p_s = members[keep], p_s[keep]
                sel = members[np.argsort(p_s, kind="stable")[:k]]
                res["priority"][s, : len(sel)] = priority[sel]
                res["index"][s, : len(sel)] = index[sel]
                res["rows"][s, : len(sel)] = _rows(block, sel)
            state[purpose] = res
        return state

    def merge(self, states: list[dict]) -> dict:
        out: dict[str, Any] = {"count": np.sum([s["count"] for s in states], axis=0)}
        for purpose, k in self.samples:
            pri = np.concatenate([s[purpose]["priority"] for s in states], axis=1)
            idx = np.concatenate([s[purpose]["index"] for s in states], axis=1)
            rows = np.concatenate(_conform([s[purpose] for s in states]), axis=1)
            res = _empty_reservoir(k, rows.shape[2], (self.n_clusters,))
            for s in range(self.n_clusters):
                kept = _keep(pri[s], idx[s], rows[s], k)
                for key in res:
                    res[key][s] = kept[key]
            out[purpose] = res
        return out

    def empty(self, n_features: int = 1) -> dict:
        out: dict[str, Any] = {"count": np.zeros(self.n_clusters, dtype=np.int64)}
        for purpose, k in self.samples:
            out[purpose] = _empty_reservoir(k, n_features, (self.n_clusters,))
        return out

    def finalize(self, state: dict) -> dict:
        out: dict[str, Any] = {"count": state["count"]}
        for purpose, _ in self.samples:
            res = state[purpose]
            order = np.argsort(res["index"], axis=1, kind="stable")
            idx = np.take_along_axis(res["index"], order, axis=1)
            rows = np.take_along_axis(res["rows"], order[:, :, None], axis=1)
            out[purpose] = (idx, rows, np.sum(idx != _NO_INDEX, axis=1).astype(np.int64))
        return out
