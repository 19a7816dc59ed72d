"""Uniform landmark samples as mergeable bottom-k reservoirs.

Every row i gets the priority ``hash_uniform(seed, purpose, i)``; a sample of
size k is the k rows of smallest priority.  A block keeps its own k smallest,
and merging keeps the k smallest of the union, so the final sample is a
uniform sample without replacement that depends only on (seed, purpose, n) —
never on the chunking, the merge order or the number of workers.

The sampled rows stay in the block's namespace (NumPy, or CuPy on a GPU) and
merge there.  Priorities and global row indices are hashes of the row number,
computed on the host like every random operator, and the bottom-k selection
(a ``lexsort``, which the array API lacks) runs on them there; only the chosen
rows are gathered on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.meka import nearest_centre
from distsketch.ops.namespace import asarray, densify, namespace, to_host, zeros
from distsketch.ops.random import hash_uniform
from distsketch.summaries.base import Summary

__all__ = ["ClusterLandmarks", "UniformLandmarks", "bottom_k"]

_NO_INDEX = np.iinfo(np.int64).max


def reservoir_rows(block: Any, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of ``block`` as float64, in the block's own array namespace."""
    xp = namespace(block)
    if xp is not np:
        sub = xp.take(block, asarray(idx, like=block), axis=0)
        return xp.astype(sub, xp.float64)
    sub = densify(block[idx])
    return np.asarray(sub, dtype=np.float64).reshape(len(idx), block.shape[1])


def _take(rows: Any, sel: np.ndarray) -> Any:
    """``rows[sel]`` for host positions ``sel`` (a gather on the rows' device)."""
    xp = namespace(rows)
    return rows[sel] if xp is np else xp.take(rows, asarray(sel, like=rows), axis=0)


def bottom_k(priority: np.ndarray, index: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k entries of smallest (priority, index), in that order."""
    order = np.lexsort((index, priority))
    return order[:k]


def empty_reservoir(k: int, d: int, shape: tuple[int, ...] = (), like: Any = None) -> dict:
    """A reservoir of ``k`` empty slots for rows of width ``d`` (infinite priorities)."""
    return {"priority": np.full((*shape, k), np.inf),
            "index": np.full((*shape, k), _NO_INDEX, dtype=np.int64),
            "rows": zeros((*shape, k, d), like)}


def _conform(states: list[dict], key: str = "rows") -> list[np.ndarray]:
    # an identity state (from ``empty()``) may not know d: give it the others' width,
    # and its host rows meet device rows on their device
    d = max(st[key].shape[-1] for st in states)
    like = next((st[key] for st in states if not isinstance(st[key], np.ndarray)),
                states[0][key])
    return [asarray(st[key], like=like) if st[key].shape[-1] == d else
            zeros((*st[key].shape[:-1], d), like) for st in states]


def reservoir_of(block: Any, priority: np.ndarray, index: np.ndarray, sel: np.ndarray,
                 k: int) -> dict:
    """A reservoir of ``k`` slots holding rows ``sel`` of ``block`` with their priorities."""
    out = empty_reservoir(k, block.shape[1], like=block)
    out["priority"][: len(sel)] = priority[sel]
    out["index"][: len(sel)] = index[sel]
    out["rows"][: len(sel), :] = reservoir_rows(block, sel)
    return out


def keep_bottom(priority: np.ndarray, index: np.ndarray, rows: np.ndarray, k: int) -> dict:
    """The reservoir of the ``k`` rows of lowest priority (ties broken by index)."""
    return reservoir_of(rows, priority, index, bottom_k(priority, index, k), k)


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
        # row_offset is global: rows appended later are reduced with the graph's
        # row_start, so their priorities are those of a single pass
        index = np.arange(row_offset, row_offset + block.shape[0], dtype=np.int64)
        priority = hash_uniform(self.seed, self.purpose, index)
        sel = bottom_k(priority, index, self.n_samples)
        return reservoir_of(block, priority, index, sel, self.n_samples)

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """A sampling task and the state, float64 whatever the input's ``itemsize``.

        Per row: the row, its global index, priority and sort position
        (``d + 3``).  Fixed and state: the reservoir, k rows with their
        priorities and indices (``k (d + 2)``).
        """
        state = 8.0 * self.n_samples * (n_features + 2)
        return Footprint(per_row=8.0 * (n_features + 3), fixed=state, state=state)

    def merge(self, states: list[dict]) -> dict:
        rows = _conform(states)
        return keep_bottom(np.concatenate([s["priority"] for s in states]),
                     np.concatenate([s["index"] for s in states]),
                     namespace(*rows).concat(rows, axis=0), self.n_samples)

    def empty(self, n_features: int = 1) -> dict:
        return empty_reservoir(self.n_samples, n_features)

    def state_of(self, index: np.ndarray, rows: np.ndarray) -> dict:
        """Rebuild the state of a finalized sample (priorities are recomputed)."""
        index = np.asarray(to_host(index), dtype=np.int64)
        return self._rebuilt(hash_uniform(self.seed, self.purpose, index), index, rows)

    def _rebuilt(self, priority: np.ndarray, index: np.ndarray, rows: Any) -> dict:
        xp = namespace(rows)
        rows = xp.reshape(asarray(rows, like=rows, dtype=xp.float64), (len(index), -1))
        return keep_bottom(priority, index, rows, self.n_samples)

    def finalize(self, state: dict) -> tuple[np.ndarray, np.ndarray]:
        """``(index, rows)``: host global row indices, rows in the state's namespace."""
        # the reservoir is kept in (priority, index) order, unused slots last
        valid = state["index"] != _NO_INDEX
        idx = state["index"][valid]
        pos = np.flatnonzero(valid)
        if self.order == "index":
            order = np.argsort(idx, kind="stable")
            idx, pos = idx[order], pos[order]
        return idx, _take(state["rows"], pos)


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
        labels = to_host(nearest_centre(block, centres, row_offset)[0])
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
            res = empty_reservoir(k, d, (c,), like=block)
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
                res["rows"][s, : len(sel), :] = reservoir_rows(block, sel)
            state[purpose] = res
        return state

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """A labelling-and-sampling task and the state (float64).

        Per row: the row, its c centre distances and 4 values of bookkeeping
        (label, index, priority, order).  State: c reservoirs of Σk rows with
        their priorities and indices, ``c Σk (d + 2)``; a task holds the
        state it builds and one cluster's candidate rows, twice that.
        """
        c, d = self.n_clusters, n_features
        rows = sum(k for _, k in self.samples)
        return Footprint(per_row=8.0 * (d + c + 4), fixed=16.0 * c * rows * (d + 2),
                         state=8.0 * c * rows * (d + 2))

    def merge(self, states: list[dict]) -> dict:
        out: dict[str, Any] = {"count": np.sum([s["count"] for s in states], axis=0)}
        for purpose, k in self.samples:
            pri = np.concatenate([s[purpose]["priority"] for s in states], axis=1)
            idx = np.concatenate([s[purpose]["index"] for s in states], axis=1)
            parts = _conform([s[purpose] for s in states])
            rows = namespace(*parts).concat(parts, axis=1)
            res = empty_reservoir(k, rows.shape[2], (self.n_clusters,), like=rows)
            for s in range(self.n_clusters):
                kept = keep_bottom(pri[s], idx[s], rows[s, ...], k)
                for key in res:
                    res[key][s, ...] = kept[key]
            out[purpose] = res
        return out

    def empty(self, n_features: int = 1) -> dict:
        out: dict[str, Any] = {"count": np.zeros(self.n_clusters, dtype=np.int64)}
        for purpose, k in self.samples:
            out[purpose] = empty_reservoir(k, n_features, (self.n_clusters,))
        return out

    def finalize(self, state: dict) -> dict:
        out: dict[str, Any] = {"count": state["count"]}
        for purpose, _ in self.samples:
            res = state[purpose]
            order = np.argsort(res["index"], axis=1, kind="stable")
            idx = np.take_along_axis(res["index"], order, axis=1)
            xp = namespace(res["rows"])
            if xp is np:
                rows = np.take_along_axis(res["rows"], order[:, :, None], axis=1)
            else:
                rows = xp.stack([_take(res["rows"][s, ...], order[s]) for s in range(len(order))])
            out[purpose] = (idx, rows, np.sum(idx != _NO_INDEX, axis=1).astype(np.int64))
        return out
