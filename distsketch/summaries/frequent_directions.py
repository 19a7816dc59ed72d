"""Frequent Directions sketch as a mergeable, bounded summary."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.footprint import Footprint
from distsketch.ops.fd import (
    fd_block_formulation,
    fd_covariance_bytes,
    fd_covariance_shrink,
    fd_merge,
    fd_sketch,
)
from distsketch.ops.namespace import asarray, densify, namespace
from distsketch.summaries.base import Summary, takes_out
from distsketch.summaries.covariance import feature_rows

__all__ = ["FrequentDirectionsSummary"]


def _add_gram(xp: Any, Z: Any, cov: Any, gram: Any) -> tuple[Any, Any]:
    """``cov += ZᵀZ`` in float64, the product in Z's precision (float32 rows: one float32
    GEMM, as :func:`~distsketch.summaries.covariance.covariance_state` forms it)."""
    if xp is not np:
        ztz = xp.astype(Z.T @ Z, xp.float64)
        return (ztz if cov is None else cov + ztz), None
    # NumPy: two m x m buffers reused slice after slice (fresh 8 MiB pages per slice
    # cost page faults, which do not scale with the cores busy)
    if cov is None:
        m = Z.shape[1]
        cov, gram = np.zeros((m, m)), np.empty((m, m), dtype=Z.dtype)
    cov += np.matmul(Z.T, Z, out=gram)
    return cov, gram


class FrequentDirectionsSummary(Summary):
    """Frequent Directions sketch of the (optionally row-mapped) rows of a matrix.

    ``chunk`` maps the block through ``transform(block, row_offset, *operands)``
    (e.g. random Fourier features; identity by default) ``map_rows`` rows at a
    time and folds the mapped rows into an ℓ × m sketch; ``merge`` stacks and
    shrinks sketches.

    Parameters
    ----------
    sketch_size : int
        ℓ, rows of the sketch.
    transform : callable, optional
        Row map ``transform(block, row_offset, *operands) -> (rows, m)``; it
        must be picklable (it travels to workers).
    n_columns : int, optional
        m; needed only by :meth:`empty`.
    map_rows : int, default 4096
        Rows mapped at once, so the mapped block never exceeds
        ``map_rows × m`` values whatever the block size.  Rounded up to a
        multiple of ℓ, so the sketch of the per-ℓ-rows formulation does not
        depend on it; the covariance formulation's ZᵀZ changes with it only in
        its rounding.  In the covariance formulation a transform that takes
        ``out=`` (:func:`~distsketch.summaries.base.takes_out`) writes every
        slice after the first into the first slice's features.

    Notes
    -----
    State: ``{"sketch": (ℓ, m) float64, "n": rows, "sq_frobenius": ‖A‖_F²,
    "shrinkage": Δ}`` with ``A`` the mapped rows — size independent of n.
    The sketch stays in the namespace of the mapped rows (it merges on their
    device); :meth:`empty`'s host zeros move to the device at the first merge.
    ``‖AᵀA − BᵀB‖₂ ≤ Δ ≤ ‖A − A_k‖_F²/(ℓ − k)`` for every k < ℓ.  Merge is
    associative only within that guarantee (its output depends on merge
    order).  Memory of ``chunk``: the block, ``map_rows × m`` mapped values and
    a 2ℓ × m buffer (float32 for float32 rows, which are shrunk in float32:
    :mod:`distsketch.ops.fd`), or, when
    :func:`~distsketch.ops.fd.fd_block_formulation` folds the block through its
    covariance (large blocks, m ≤ 2048), the m × m covariance (float64 sum and
    a float32 product) and one shrink of it per block.

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016.  Liberty. Simple and deterministic matrix sketching. KDD 2013.
    """

    def __init__(self, sketch_size: int, transform: Any = None, n_columns: int | None = None,
                 map_rows: int = 4096):
        if isinstance(sketch_size, bool) or not isinstance(sketch_size, (int, np.integer)) \
                or sketch_size < 1:
            raise ConfigError(f"FrequentDirectionsSummary: sketch_size must be an int >= 1; "
                              f"got {sketch_size!r}.")
        self.sketch_size = int(sketch_size)
        self.transform = transform
        self.n_columns = None if n_columns is None else int(n_columns)
        ell = self.sketch_size
        self.map_rows = max(ell, -(-int(map_rows) // ell) * ell)

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        n = block.shape[0]
        ell = self.sketch_size
        sketch = None
        shrinkage = 0.0
        sq = 0.0
        sq_device: Any = None
        # one m x m covariance and one shrink per block, or a shrink per ℓ rows:
        # fd_block_formulation decides from the shapes alone (same on every device)
        cov: Any = None
        gram: Any = None
        formulation = ""
        zbuf: np.ndarray | None = None
        into = self.transform is not None and takes_out(self.transform)
        for start in range(0, max(n, 1), self.map_rows):
            stop = min(n, start + self.map_rows)
            part = block[start:stop, :]
            if self.transform is None:
                Z = part
            elif zbuf is not None:
                Z = self.transform(part, row_offset + start, *operands, out=zbuf[:stop - start])
            else:
                Z = self.transform(part, row_offset + start, *operands)
            Z = densify(Z)
            xp = namespace(Z)
            Z = asarray(Z, like=Z)
            # squared norm accumulated in float64 (features may be float32)
            if xp is np and Z.dtype == np.float32:
                # row norms in float32 (vectorised: a float64 einsum costs 5 % of the fold;
                # each norm within m·u32 relative, typically √m·u32), summed in float64
                sq += float(np.einsum("ij,ij->i", Z, Z).sum(dtype=np.float64))
            elif xp is np:
                sq += float(np.einsum("ij,ij->", Z, Z, dtype=np.float64))
            else:
                # summed on the device, read once per block (a read is a device sync)
                Z64 = xp.astype(Z, xp.float64)
                part_sq = xp.sum(Z64 * Z64)
                sq_device = part_sq if sq_device is None else sq_device + part_sq
            if not formulation:
                formulation = fd_block_formulation(n, Z.shape[1], ell)
            if (into and formulation == "covariance" and zbuf is None
                    and isinstance(Z, np.ndarray) and isinstance(part, np.ndarray)
                    and Z.flags.c_contiguous):
                # the first slice's features become the buffer of the next ones (fresh
                # pages per slice cost page faults, which do not scale with busy cores);
                # only here, where each slice's features are consumed before the next
                zbuf = Z
            if formulation == "covariance":
                cov, gram = _add_gram(xp, feature_rows(Z), cov, gram)
            else:
                sketch, shrinkage = fd_sketch(Z, ell, sketch=sketch, shrinkage=shrinkage)
        if formulation == "covariance":
            sketch, shrinkage = fd_covariance_shrink(cov, ell)
        if sq_device is not None:
            sq += float(sq_device)
        return {"sketch": sketch, "n": int(n), "sq_frobenius": sq, "shrinkage": shrinkage}

    def merge(self, states: list[dict]) -> dict:
        sketch, shrinkage = fd_merge([s["sketch"] for s in states], self.sketch_size,
                                     [s["shrinkage"] for s in states])
        return {"sketch": sketch, "n": int(sum(s["n"] for s in states)),
                "sq_frobenius": float(sum(s["sq_frobenius"] for s in states)),
                "shrinkage": shrinkage}

    def empty(self) -> dict:
        if self.n_columns is None:
            raise ConfigError("FrequentDirectionsSummary.empty() needs n_columns (the sketch "
                              "width m); pass n_columns=... when creating the summary.")
        return {"sketch": np.zeros((self.sketch_size, self.n_columns)), "n": 0,
                "sq_frobenius": 0.0, "shrinkage": 0.0}

    def finalize(self, state: dict) -> dict:
        return state

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Memory of one ``chunk`` task and of one state (see the class notes).

        Per row: the input row.  Fixed: ``map_rows`` mapped rows (float32 or
        float64 features, and a float64 copy), the 2ℓ × m buffer, the merge
        buffers (4ℓ·m and (2ℓ)² float64) and, where
        :func:`~distsketch.ops.fd.fd_block_formulation` may choose it, the
        covariance formulation's m × m arrays
        (:func:`~distsketch.ops.fd.fd_covariance_bytes`).  State: the sketch
        and its share of a merge's stacked buffer, 2ℓ·m float64.

        Parameters
        ----------
        n_features : int
            Values of one input row (m itself without a transform).
        itemsize : int
            Bytes of one input value.

        Returns
        -------
        Footprint
            Unknown (the default) for a transform whose width ``n_columns``
            was not given.
        """
        if self.transform is None:
            m, feature_bytes = int(n_features), int(itemsize)
        elif self.n_columns is None:
            return Footprint()
        else:  # mapped rows are float32 for float32 input, else float64
            m, feature_bytes = self.n_columns, 4 if itemsize == 4 else 8
        ell = self.sketch_size
        return Footprint(per_row=n_features * itemsize,
                         fixed=self.map_rows * m * (feature_bytes + 8) + 4 * ell * m * 8
                         + 8 * (2 * ell) ** 2 + fd_covariance_bytes(m),
                         state=8 * 2 * ell * m)
