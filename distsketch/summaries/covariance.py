"""Exact second-moment summaries: ZᵀZ, Zᵀy, column sums and row counts.

Precision: a block's products run in its features' precision (float32 rows:
one float32 GEMM for ZᵀZ) and every state leaf is float64, so blocks
accumulate in float64.  ZᵀZ of a float32 block of b rows is then within
about √b·ε₃₂·‖Z‖_F² of the float64 product (ε₃₂ = 2⁻²⁴; the worst case is
b·ε₃₂), the rounding the float32 features themselves already carry; float64
rows are multiplied in float64 exactly as before.  docs/architecture.md
("Precision") states the scheme and its measured error.
"""

from __future__ import annotations

from typing import Any

from distsketch.footprint import Footprint
from distsketch.ops.namespace import asarray, densify, float_dtype, namespace
from distsketch.summaries.base import Summary
from distsketch.summaries.sums import SumMerge

__all__ = ["Covariance", "covariance_state", "feature_rows"]


def feature_rows(Z: Any) -> Any:
    """Features ``Z`` dense, in the precision their products run in: float32 kept, else float64."""
    Z = densify(Z)
    return asarray(Z, like=Z, dtype=float_dtype(Z))


def covariance_state(Z: Any, y: Any | None = None) -> dict:
    """``{n, sum, ztz}`` of rows Z (b × m) and, with targets y (b × t),
    ``zty, ysum, yty``, in Z's namespace (the state merges on Z's device).

    Every leaf is float64.  Float64 rows are multiplied in float64; float32
    rows give ZᵀZ by one float32 GEMM, converted to float64 (see the module
    notes for its error), and their column sums accumulate in float64.
    ``Zᵀy`` is formed in float64 (targets keep their precision: a large mean
    of y must not cost Zᵀy its centred digits); it is t columns, cheap.
    """
    xp = namespace(Z)
    if Z.dtype == xp.float64:
        state = {"n": Z.shape[0], "sum": xp.sum(Z, axis=0), "ztz": Z.T @ Z}
        Z64 = Z
    else:
        state = {"n": Z.shape[0], "sum": xp.sum(Z, axis=0, dtype=xp.float64),
                 "ztz": xp.astype(Z.T @ Z, xp.float64)}
        Z64 = None
    if y is not None:
        if Z64 is None:
            Z64 = xp.astype(Z, xp.float64)
        state["zty"] = Z64.T @ y
        state["ysum"] = xp.sum(y, axis=0)
        state["yty"] = y.T @ y
    return state


class Covariance(SumMerge, Summary):
    """Exact Gram/covariance summary of a (feature) matrix.

    ``chunk`` maps the block through ``transform(block, offset, *operands)``
    (identity by default), then returns ``{"n", "sum", "ztz"}`` and, when
    ``n_targets > 0``, ``"zty"``, ``"ysum"`` and ``"yty"`` from targets stored
    as the last ``n_targets`` columns of the block (:func:`covariance_state`).
    Float32 features are multiplied in float32 and summed in float64; any
    other features in float64.

    State size: m² + m(t + 1) + t² + t float64 values; merge is exact
    (sums), hence associative and commutative up to floating-point rounding
    order.  ``n_columns`` (m, the width of the mapped rows) is needed only by
    :meth:`footprint` when there is a transform.
    """

    def __init__(self, transform: Any = None, n_targets: int = 0, n_columns: int | None = None):
        self.transform = transform
        self.n_targets = int(n_targets)
        self.n_columns = None if n_columns is None else int(n_columns)

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """One state: ``ZᵀZ``, the column sums, and with targets ``Zᵀy``, their sums and ``yᵀy``.

        The chunk's features are the caller's map (it declares them); the
        per-row memory is left unknown here.  Unknown altogether for a
        transform whose width ``n_columns`` was not given.
        """
        # m: the mapped rows' width, or the input's less its target columns
        t = self.n_targets
        m = self.n_columns if self.transform is not None else int(n_features) - t
        if m is None:
            return Footprint()
        return Footprint(state=8 * (m * m + m * (t + 1) + t * t + t))

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        if self.n_targets:
            y = asarray(block[:, -self.n_targets:], like=block,
                        dtype=namespace(block).float64)
            block = block[:, : -self.n_targets]
        Z = block if self.transform is None else self.transform(block, row_offset, *operands)
        return covariance_state(feature_rows(Z), y if self.n_targets else None)
