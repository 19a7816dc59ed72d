"""Frequent Directions sketch as a mergeable, bounded summary."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.footprint import Footprint
from distsketch.ops.fd import (
    fd_block_formulation,
    fd_covariance_bytes,
    fd_covariance_shrink,
    fd_covariance_state_bytes,
    fd_merge,
    fd_sketch,
)
from distsketch.ops.namespace import asarray, densify, namespace
from distsketch.summaries.base import Summary, takes_out
from distsketch.summaries.covariance import feature_rows
from distsketch.summaries.sums import sum_states

__all__ = ["FrequentDirectionsSummary", "sketch_of"]


def _add_gram(xp: Any, Z: Any, cov: Any, gram: Any) -> tuple[Any, Any]:
    """``cov += ZᵀZ`` in float64, the product in Z's precision (as ``covariance_state``)."""
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


def sketch_of(state: dict, ell: int) -> dict:
    """A sketch state ``{sketch, n, sq_frobenius, shrinkage}`` of either kind of state.

    A covariance state ``{ztz, n}`` is shrunk once
    (:func:`~distsketch.ops.fd.fd_covariance_shrink`, in its namespace); a
    sketch state is returned as it is.
    """
    if "ztz" not in state:
        return state
    sketch, delta = fd_covariance_shrink(state["ztz"], ell)
    sq = float(namespace(state["ztz"]).linalg.trace(state["ztz"]))  # one read of a device scalar
    return {"sketch": sketch, "n": int(state["n"]), "sq_frobenius": sq, "shrinkage": delta}


class FrequentDirectionsSummary(Summary):
    """Frequent Directions sketch of the (optionally row-mapped) rows of a matrix.

    ``chunk`` maps the block through ``transform(block, row_offset, *operands)``
    (e.g. random Fourier features; identity by default) ``map_rows`` rows at a
    time and folds the mapped rows into an ℓ × m sketch; ``merge`` stacks and
    shrinks sketches.  With ``state="covariance"`` it sums the exact ZᵀZ
    instead (``chunk``: one product per slice; ``merge``: a sum) and
    :meth:`finalize` shrinks it once.

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
    state : {"sketch", "covariance"}, default "sketch"
        What ``chunk`` returns and ``merge`` accumulates: the streaming
        sketch, or the exact covariance ZᵀZ (m × m float64) with one shrink
        in :meth:`finalize` (see :func:`~distsketch.ops.fd.fd_state` for
        when each is chosen).

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

    Covariance state: ``{"ztz": AᵀA (m × m float64), "n": rows}``.  Products
    run in the rows' precision (float32 rows: one float32 GEMM per slice) and
    are summed in float64, so merge is exact up to float addition: associative
    and order-independent up to rounding, and the state of any chunking is
    ZᵀZ of all rows (within n·u of |Z|ᵀ|Z| entrywise, u the products' unit
    roundoff).  :meth:`finalize` shrinks it once: B = diag(√(λᵢ − λ_ℓ)) Vᵀ
    from its top ℓ eigenpairs, Δ = λ_ℓ.  Guarantee: ``0 ⪯ AᵀA − BᵀB`` and
    ``‖AᵀA − BᵀB‖₂ = λ_ℓ(AᵀA) ≤ ‖A − A_k‖_F²/(ℓ − k)`` for every k < ℓ
    (the ℓ − k eigenvalues λ_{k+1} … λ_ℓ are each at least λ_ℓ), up to
    the rounding of the covariance and of one eigendecomposition.  This is
    the least spectral error of any B of rank ℓ − 1, so it is never larger
    than the streaming sketch's (whose last shrink leaves rank ≤ ℓ − 1); the
    sketch is not the streaming one (not bitwise, nor within rounding), and it
    does not depend on the chunking or the merge order beyond rounding.
    Merging a covariance state with a sketch state shrinks the covariance
    first (the result is a sketch state, within the FD guarantee).  Memory of
    ``chunk``: the block, ``map_rows × m`` mapped values and two m × m
    arrays (the float64 sum and the product); no shrink runs before
    :meth:`finalize` (one top-ℓ eigendecomposition of an m × m matrix).

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016.  Liberty. Simple and deterministic matrix sketching. KDD 2013.
    """

    def __init__(self, sketch_size: int, transform: Any = None, n_columns: int | None = None,
                 map_rows: int = 4096, state: str = "sketch"):
        if isinstance(sketch_size, bool) or not isinstance(sketch_size, (int, np.integer)) \
                or sketch_size < 1:
            raise ConfigError(f"FrequentDirectionsSummary: sketch_size must be an int >= 1; "
                              f"got {sketch_size!r}.")
        if state not in ("sketch", "covariance"):
            raise ConfigError("FrequentDirectionsSummary: state must be 'sketch' or "
                              f"'covariance'; got {state!r}.")
        self.state = state
        self.sketch_size = int(sketch_size)
        self.transform = transform
        self.n_columns = None if n_columns is None else int(n_columns)
        ell = self.sketch_size
        self.map_rows = max(ell, -(-int(map_rows) // ell) * ell)

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        if self.state == "covariance":
            return self._chunk_covariance(block, row_offset, *operands)
        n = block.shape[0]
        ell = self.sketch_size
        sketch = None
        shrinkage = 0.0
        sq = 0.0
        sq_device: Any = None
        cov: Any = None
        gram: Any = None
        formulation = ""

        def covariance_formulation(Z: Any) -> bool:
            return fd_block_formulation(n, Z.shape[1], ell) == "covariance"

        for Z in self._feature_slices(block, row_offset, operands, covariance_formulation):
            xp = namespace(Z)
            Z = asarray(Z, like=Z)
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
            if formulation == "covariance":
                cov, gram = _add_gram(xp, feature_rows(Z), cov, gram)
            else:
                sketch, shrinkage = fd_sketch(Z, ell, sketch=sketch, shrinkage=shrinkage)
        if formulation == "covariance":
            sketch, shrinkage = fd_covariance_shrink(cov, ell)
        if sq_device is not None:
            sq += float(sq_device)
        return {"sketch": sketch, "n": int(n), "sq_frobenius": sq, "shrinkage": shrinkage}

    def _chunk_covariance(self, block: Any, row_offset: int, *operands: Any) -> dict:
        """``{"ztz", "n"}`` of the mapped block, summed on its device: no shrink, no host read."""
        cov: Any = None
        gram: Any = None
        for Z in self._feature_slices(block, row_offset, operands, lambda Z: True):
            cov, gram = _add_gram(namespace(Z), feature_rows(Z), cov, gram)
        return {"ztz": cov, "n": int(block.shape[0])}

    def _feature_slices(self, block: Any, row_offset: int, operands: tuple,
                        reuse: Callable[[Any], bool]) -> Iterator[Any]:
        """Each ``map_rows`` slice's dense features; later slices reuse the first's buffer where
        the map takes ``out=`` and ``reuse`` accepts it (fresh pages cost page faults), so the
        caller consumes each slice before asking for the next."""
        n = block.shape[0]
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
            if (into and zbuf is None and isinstance(Z, np.ndarray)
                    and isinstance(part, np.ndarray) and Z.flags.c_contiguous and reuse(Z)):
                zbuf = Z
            yield Z

    def merge(self, states: list[dict]) -> dict:
        if all("ztz" in s for s in states):
            return sum_states(states)
        states = [sketch_of(s, self.sketch_size) for s in states]
        sketch, shrinkage = fd_merge([s["sketch"] for s in states], self.sketch_size,
                                     [s["shrinkage"] for s in states])
        return {"sketch": sketch, "n": int(sum(s["n"] for s in states)),
                "sq_frobenius": float(sum(s["sq_frobenius"] for s in states)),
                "shrinkage": shrinkage}

    def empty(self) -> dict:
        if self.n_columns is None:
            raise ConfigError("FrequentDirectionsSummary.empty() needs n_columns (the sketch "
                              "width m); pass n_columns=... when creating the summary.")
        if self.state == "covariance":
            return {"ztz": np.zeros((self.n_columns, self.n_columns)), "n": 0}
        return {"sketch": np.zeros((self.sketch_size, self.n_columns)), "n": 0,
                "sq_frobenius": 0.0, "shrinkage": 0.0}

    def finalize(self, state: dict) -> dict:
        """The sketch state: a covariance state shrunk once (:func:`sketch_of`), a
        sketch state as it is."""
        return sketch_of(state, self.sketch_size)

    def footprint(self, n_features: int, itemsize: int) -> Footprint:
        """Memory of one ``chunk`` task and of one state (see the class notes).

        Per row: the input row.  Fixed: ``map_rows`` mapped rows (float32 or
        float64 features, and a float64 copy), the 2ℓ × m buffer, the merge
        buffers (4ℓ·m and (2ℓ)² float64) and, where
        :func:`~distsketch.ops.fd.fd_block_formulation` may choose it, the
        covariance formulation's m × m arrays
        (:func:`~distsketch.ops.fd.fd_covariance_bytes`).  State: the sketch
        and its share of a merge's stacked buffer, 2ℓ·m float64.  With
        ``state="covariance"``: ``map_rows`` mapped rows, the float64 sum and
        the product (m² each); state ZᵀZ, m² float64
        (:func:`~distsketch.ops.fd.fd_covariance_state_bytes`).

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
        if self.state == "covariance":
            return Footprint(per_row=n_features * itemsize,
                             fixed=self.map_rows * m * feature_bytes + m * m * (8 + feature_bytes),
                             state=fd_covariance_state_bytes(m))
        return Footprint(per_row=n_features * itemsize,
                         fixed=self.map_rows * m * (feature_bytes + 8) + 4 * ell * m * 8
                         + 8 * (2 * ell) ** 2 + fd_covariance_bytes(m),
                         state=8 * 2 * ell * m)
