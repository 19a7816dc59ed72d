"""The one-pass summary of sketched kernel ridge regression: ``ZᵀZ``, ``Zᵀy``, sums, per fold.

:class:`RidgeSummary` and the helpers of its states (folds, packed Grams, the
feature maps' float64 rows), used by
:class:`~distsketch.estimators.ridge.regressor.SketchedKernelRidge` and its kin.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.namespace import asarray, densify, host_dtype, namespace, to_host, xp_dtype
from distsketch.ops.random import hash_bucket
from distsketch.summaries._namespace import is_array_api
from distsketch.summaries.base import Summary, takes_out
from distsketch.summaries.covariance import covariance_state
from distsketch.summaries.sums import SumMerge

__all__ = ["SLICE_ROWS", "STATE_KEYS", "RidgeSummary", "add_ridge_states", "cv_folds",
           "dense_float64", "float32_products", "map_features", "pack_gram", "ridge_memory",
           "sliced_state", "unpack_gram"]

#: The keys of one feature map's state (per fold with ``n_folds``).
STATE_KEYS = ("n", "sum", "ztz", "zty", "ysum", "yty")
#: Float32 rows are mapped and multiplied this many at a time (:meth:`RidgeSummary.slices`).
SLICE_ROWS = 4096
# rows of the float64 pieces the float32-products path takes sums and Zᵀy from (4 MiB
# at m = 1024): a 4096-row float64 copy costs 2.8 ms per slice there, pieces 1.5 ms
_PIECE_ROWS = 512


def ridge_memory(maps: list[Any], d: int, t: int, n_folds: int, sliced: bool = False,
                 products: str = "float64") -> Footprint:
    """The memory model of a :class:`RidgeSummary` pass over rows of d inputs and t targets.

    Parameters
    ----------
    maps : list of fitted feature maps
        Their ``n_output_features_`` are the feature widths.
    d, t : int
        Input columns and target columns of a row.
    n_folds : int
        Folds of the state (0: none).
    sliced : bool, default False
        Whether blocks are summarised slice by slice (:meth:`RidgeSummary.slices`).
    products : {"float64", "float32"}, default "float64"
        The precision of ZᵀZ (:func:`float32_products`).

    Returns
    -------
    Footprint
        Per row, fixed and one state, for the planner; unknown (``Footprint()``)
        if a map's width is unknown.
    """
    widths = [int(getattr(f, "n_output_features_", 0) or 0) for f in maps]
    if not all(widths):
        return Footprint()
    # fold states keep the upper triangle of ZᵀZ only (pack_gram)
    state = 8.0 * max(n_folds, 1) * sum((m * (m + 1) // 2 if n_folds else m * m)
                                        + m * (t + 1) + t * t + t for m in widths)
    if sliced:
        # per row: the block (float64 when the targets are), its inputs' float32 copy and
        # the float64 targets; per task: one slice's float32 features, their float64
        # buffer and the slice's Gram (and its float32 one with float32 products)
        m = max(widths)
        fixed = state + 12.0 * SLICE_ROWS * m + (12.0 if products == "float32" else 8.0) * m * m
        return Footprint(per_row=8.0 * (d + t) + 4.0 * d + 8.0 * t, fixed=fixed, state=state)
    return Footprint(per_row=8.0 * (d + t + 2 * max(widths)), fixed=state, state=state)


def add_ridge_states(a: dict, b: dict, sign: float = 1.0) -> dict:
    """``a + sign · b`` key by key over :data:`STATE_KEYS` (one map's states, e.g. a fold's)."""
    return {k: a[k] + sign * b[k] for k in STATE_KEYS}


class RidgeSummary(SumMerge, Summary):
    """Normal equations ``ZᵀZ, Zᵀy`` (and sums) of one or several feature maps, per fold.

    The block holds the ``d`` input columns followed by ``n_targets`` target
    columns (and, with ``weighted``, a last column of row weights: every sum
    then counts a row with its weight and ``n`` is the total weight).  Each
    feature map g contributes a state ``{n, sum, ztz, zty, ysum, yty}``;
    with ``n_folds = k`` every row goes to fold ``hash(seed, "cv.fold",
    global_row) mod k`` (independent of chunking) and the state is a list of
    k such dicts.

    With a ``sampler`` (a bottom-k row sample, e.g. the calibration sample
    of the classifier) the state also holds ``"sample"``, the sampler's
    state of the whole block rows (inputs, targets, weights), merged by the
    sampler.

    Fold states hold ``ZᵀZ`` packed (its upper triangle, :func:`pack_gram`;
    :func:`unpack_gram` restores it): k states of a map then take about
    k · m²/2 numbers, so a merge holds half the matrices.

    With ``products="float32"``, float32 rows summarised slice by slice
    (:meth:`slices`) form ZᵀZ from their float32 features, one float32
    product per slice summed in float64 (:func:`float32_products` says when
    the solve tolerates it); a block of another namespace (a GPU block)
    without weights or folds likewise, one float32 product per block.
    Otherwise every product is float64.

    State size: ``n_maps × max(k, 1) × (m² + m(t + 1) + t² + t)`` float64,
    with ``m(m + 1)/2`` for ``m²`` per fold (plus the sampler's k rows).
    """

    def __init__(self, functions: list[Any], n_operands: list[int], n_features: int,
                 n_targets: int, x_dtype: str, n_folds: int = 0, seed: int = 0,
                 weighted: bool = False, sampler: Any = None, products: str = "float64"):
        self.sampler = sampler
        self.products = str(products)
        self.functions = list(functions)
        self.n_operands = list(n_operands)
        self.n_features = int(n_features)
        self.n_targets = int(n_targets)
        self.x_dtype = str(x_dtype)
        self.n_folds = int(n_folds)
        self.seed = int(seed)
        self.weighted = bool(weighted)

    def memory(self, maps: list[Any], XY: Any) -> Footprint:
        """The stage's memory model for the blocks of ``XY``.

        Parameters
        ----------
        maps : list of fitted feature maps
        XY : array of shape (n_rows, n_features + n_targets)
            The stacked input (:func:`stack_xy`).

        Returns
        -------
        Footprint
            Per row, fixed and one state, for the planner (with the row
            sample's reservoir, float64 rows with priority and index, when the
            summary draws one); unknown if a map's width is unknown.
        """
        own = ridge_memory(maps, self.n_features, self.n_targets, self.n_folds,
                           self.slices(XY), self.products)
        if self.sampler is None or own.state is None:
            return own
        reservoir = 16.0 * self.sampler.n_samples * (XY.shape[1] + 2)
        return own + Footprint(fixed=reservoir, state=reservoir)

    def slices(self, XY: Any) -> bool:
        """Whether blocks of ``XY`` are summarised slice by slice (:func:`sliced_state`):
        float32 NumPy rows without weights or folds."""
        meta = getattr(XY, "_meta", XY)
        on_host = isinstance(meta, np.ndarray) or not is_array_api(meta)
        return (on_host and np.dtype(self.x_dtype) == np.float32 and not self.weighted
                and not self.n_folds)

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        d = self.n_features
        if isinstance(block, np.ndarray) and self.slices(block):
            X = block[:, :d]
            y = np.asarray(block[:, d:d + self.n_targets], dtype=np.float64)
            f32 = self.products == "float32"
            states = [sliced_state(fn, ops, X, y, row_offset, f32)
                      for fn, ops in _map_operands(self.functions, self.n_operands, operands)]
            return self._with_sample(states, block, row_offset)
        if isinstance(block, np.ndarray) or not is_array_api(block):
            X = np.ascontiguousarray(block[:, :d], dtype=self.x_dtype)
            y = np.asarray(block[:, d:d + self.n_targets], dtype=np.float64)
            w = np.asarray(block[:, -1], dtype=np.float64) if self.weighted else None
        else:  # a block of another namespace: the same columns, on its device
            xp = namespace(block)
            X = xp.astype(block[:, :d], xp_dtype(xp, self.x_dtype))
            y = xp.astype(block[:, d:d + self.n_targets], xp.float64)
            w = xp.astype(block[:, -1], xp.float64) if self.weighted else None
        if self.n_folds:
            fold = asarray(cv_folds(self.seed, row_offset, X.shape[0], self.n_folds), like=X)
        f32 = (self.products == "float32" and not self.n_folds and w is None
               and not isinstance(X, np.ndarray))
        out: list[Any] = []
        for Z in map_features(self.functions, self.n_operands, X, row_offset, operands,
                              float64=not f32):
            if f32:
                out.append(covariance_state(Z, y))
            elif self.n_folds:
                out.append([pack_gram(_state(Z[fold == f], y[fold == f],
                                             None if w is None else w[fold == f]))
                            for f in range(self.n_folds)])
            else:
                out.append(_state(Z, y, w))
        return self._with_sample(out, block, row_offset)

    def _with_sample(self, maps: list[Any], block: Any, row_offset: int) -> dict:
        # a dict, not a list: the tree reducer flattens nested lists of states
        if self.sampler is None:
            return {"maps": maps}
        return {"maps": maps, "sample": self.sampler.chunk(block, row_offset)}

    def merge(self, states: list[Any]) -> Any:
        if self.sampler is None:
            return super().merge(states)
        out = super().merge([{"maps": s["maps"]} for s in states])
        out["sample"] = self.sampler.merge([s["sample"] for s in states])
        return out


def cv_folds(seed: int, row_offset: int, n_rows: int, n_folds: int) -> np.ndarray:
    """The cross-validation fold of each of the rows ``row_offset ..`` (``hash(seed, row) mod k``)."""
    rows = np.arange(row_offset, row_offset + n_rows, dtype=np.int64)
    return hash_bucket(seed, "cv.fold", rows, n_folds)


def _map_operands(functions: list[Any], n_operands: list[int],
                  operands: tuple) -> Iterator[tuple[Any, tuple]]:
    """Each map with its own operands (``n_operands[g]`` of ``operands`` for map ``g``)."""
    pos = 0
    for fn, k in zip(functions, n_operands):
        yield fn, tuple(operands[pos:pos + k])
        pos += k


def sliced_state(fn: Any, ops: tuple, X: np.ndarray, y: np.ndarray, row_offset: int,
                  float32_products: bool = False) -> dict:
    """The covariance state of the features of float32 rows X, ``SLICE_ROWS`` rows at a time.

    Each slice's features are copied into one reused float64 buffer; ZᵀZ is
    multiplied there (float64 products, as :func:`map_features` gives them)
    or, with ``float32_products`` and float32 features, from the float32
    features themselves (one float32 ``syrk`` per slice); either way into one
    reused m × m buffer, then summed into the float64 state.  Column sums and
    ``Zᵀy`` always come from float64 copies (of the whole slice, or with
    float32 products of ``_PIECE_ROWS``-row pieces): the intercept's centring
    cancels most of their digits, and they cost ``O(m)`` per row.  No float64
    copy of the block's features and no fresh pages per slice (a map that
    :func:`~distsketch.summaries.base.takes_out` writes each slice into the first
    slice's features).  A row's
    features are the same for any slicing (row-stable maps); only the sums
    are grouped by slice.
    """
    n = X.shape[0]
    state: dict = {}
    z64 = gram = gram32 = zbuf = None
    into = takes_out(fn)
    # the slice's rows, contiguous, in one reused buffer (X is a column view of the block)
    xbuf = np.empty((min(max(n, 1), SLICE_ROWS), X.shape[1]), dtype=np.float32)
    for a in range(0, max(n, 1), SLICE_ROWS):
        xs = xbuf[: X[a: a + SLICE_ROWS].shape[0]]
        np.copyto(xs, X[a: a + SLICE_ROWS])
        if zbuf is not None:
            Z = densify(fn(xs, row_offset + a, *ops, out=zbuf[: xs.shape[0]]))
        else:
            Z = densify(fn(xs, row_offset + a, *ops))
            if into and isinstance(Z, np.ndarray) and Z.flags.c_contiguous:
                zbuf = Z
        ys = y[a: a + SLICE_ROWS]
        f32 = float32_products and Z.dtype == np.float32
        if z64 is None:
            m, t = Z.shape[1], ys.shape[1]
            z64 = np.empty((min(max(n, 1), _PIECE_ROWS if f32 else SLICE_ROWS), m))
            gram = np.empty((m, m))
            state = {"n": 0, "sum": np.zeros(m), "ztz": np.zeros((m, m)),
                     "zty": np.zeros((m, t)), "ysum": np.zeros(t), "yty": np.zeros((t, t))}
        rows = Z.shape[0]
        if f32:
            if gram32 is None:
                gram32 = np.empty((Z.shape[1], Z.shape[1]), dtype=np.float32)
            Z = np.ascontiguousarray(Z)  # ZᵀZ of one buffer: BLAS syrk
            state["ztz"] += np.matmul(Z.T, Z, out=gram32)
            # sums and Zᵀy from float64 copies of cache-sized pieces: the same float64
            # arithmetic without writing and re-reading a 32 MiB copy of the slice
            for p in range(0, rows, _PIECE_ROWS):
                Zd = z64[: min(_PIECE_ROWS, rows - p)]
                np.copyto(Zd, Z[p: p + _PIECE_ROWS])
                state["sum"] += Zd.sum(axis=0)
                state["zty"] += Zd.T @ ys[p: p + _PIECE_ROWS]
        else:
            Zd = z64[:rows]
            np.copyto(Zd, Z)
            state["ztz"] += np.matmul(Zd.T, Zd, out=gram)
            state["sum"] += Zd.sum(axis=0)
            state["zty"] += Zd.T @ ys
        state["n"] += rows
        state["ysum"] += ys.sum(axis=0)
        state["yty"] += ys.T @ ys
    return state


def float32_products(x_dtype: Any, gcv_alpha: bool) -> str:
    """The precision ``"float32"`` or ``"float64"`` of a ridge summary's ZᵀZ of rows of ``x_dtype``.

    Float32 for float32 rows whose solve is regularised by λ of at least
    10⁻³ of the mean eigenvalue of the centred ZᵀZ (``gcv_alpha``): GCV's
    candidates (``alpha="auto"`` without the exact leave-one-out choice,
    :data:`~distsketch.estimators.ridge.defaults.GCV_FEATURE_GRID`), or a
    given ``alpha`` that large
    (:func:`~distsketch.estimators.ridge.system.alpha_tolerates_float32`):
    there the float32 Gram moves the predictions by 10⁻⁴ to 10⁻² of the
    spread between two draws of the random features.  A smaller λ amplifies
    the Gram's rounding by cond(ZᵀZ + αI): float64 products
    (docs/architecture.md, "Precision").

    Parameters
    ----------
    x_dtype : dtype
        The rows' dtype (any namespace's dtype object).
    gcv_alpha : bool
        Whether every λ of the solve is at least that floor.

    Returns
    -------
    str
        ``"float32"`` or ``"float64"``, for ``RidgeSummary(products=...)``.
    """
    return "float32" if gcv_alpha and host_dtype(x_dtype) == np.float32 else "float64"


def map_features(functions: list[Any], n_operands: list[int], X: np.ndarray, row_offset: int,
                 operands: tuple, *, float64: bool = True) -> Iterator[np.ndarray]:
    """Each map's dense float64 features of the rows X, map ``g`` taking its own operands.

    Float64 whatever the input: a ridge solve amplifies the Gram's rounding
    by cond(ZᵀZ + αI), and float32 products are within its tolerance only at
    λ ≥ 10⁻³ of the mean eigenvalue (:func:`float32_products`);
    ``float64=False``, for that case, keeps the map's own dtype.  ``operands`` holds the operands of
    every map in turn (``n_operands[g]`` for map ``g``); anything after them is
    left to the caller.
    """
    for fn, ops in _map_operands(functions, n_operands, operands):
        Z = fn(X, row_offset, *ops)
        yield dense_float64(Z) if float64 else densify(Z)


def dense_float64(Z: Any) -> Any:
    """Features ``Z`` dense and float64: NumPy for NumPy or sparse ``Z``, else in ``Z``'s namespace."""
    Z = densify(Z)
    if isinstance(Z, np.ndarray) or not is_array_api(Z):
        return np.asarray(Z, dtype=np.float64)
    return asarray(Z, like=Z, dtype=np.float64)


def _state(Z: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> dict:
    """Covariance state of rows, each counted with its weight (``n`` is then Σw)."""
    if w is None:
        return covariance_state(Z, y)
    Zw, yw = Z * w[:, None], y * w[:, None]
    xp = namespace(Z, y, w)
    return {"n": float(xp.sum(w)), "sum": xp.sum(Zw, axis=0), "ztz": Zw.T @ Z, "zty": Zw.T @ y,
            "ysum": xp.sum(yw, axis=0), "yty": yw.T @ y}


def pack_gram(state: dict) -> dict:
    """The state with ``ztz`` as its upper triangle, row by row (a symmetric matrix's half)."""
    ztz = state["ztz"]
    m = ztz.shape[0]
    # the entries by flat index, gathered in the state's namespace (on its device)
    i, j = np.triu_indices(m)
    xp = namespace(ztz)
    return {**state, "ztz": xp.take(xp.reshape(ztz, (-1,)), asarray(i * m + j, like=ztz))}


def unpack_gram(state: dict) -> dict:
    """The state of :func:`pack_gram` with the symmetric m × m ``ztz`` restored."""
    packed = np.asarray(to_host(state["ztz"]))
    m = (math.isqrt(8 * packed.size + 1) - 1) // 2
    full = np.zeros((m, m))
    full[np.triu_indices(m)] = packed
    full += np.triu(full, 1).T
    return {**state, "ztz": full}
