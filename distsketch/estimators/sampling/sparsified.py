"""Sparsified / quantised Gram matrices and kernel PCA on them.

:class:`SparsifiedGram` builds the simplified Gram matrix K̂ of Achlioptas,
McSherry and Schölkopf tile by tile (see :mod:`distsketch.ops.sparsify`) and
keeps only the kept entries; :class:`~distsketch.estimators.sampling.sparsified_kpca.SparsifiedKernelPCA`
finds its top eigenvectors through a blockwise ``LinearOperator``.

Storage layout (in memory, and on disk when ``store`` is given)
---------------------------------------------------------------
K̂ is symmetric, so only its lower triangle (diagonal included) is kept, cut
into row strips of ``tile_rows`` rows.  Strip s holds rows ``r0 .. r1`` as a
CSR matrix of shape ``(r1 − r0, r1)`` whose column indices are global (all
``<= row``).  On disk (a Zarr v3 group, written atomically, manifest last)::

    gram.zarr/
      zarr.json                 attrs: n, bounds, scale, p, quantize, kernel, seed,
                                layout = "lower-csr-strips"
      diagonal                  (n,) float64, the diagonal of K̂
      strips/<s>/data           (nnz_s,) float64 values, or int8 signs (quantize)
      strips/<s>/indices        (nnz_s,) int32 (int64 if n >= 2**31) global columns
      strips/<s>/indptr         (r1 − r0 + 1,) int64
      distsketch-manifest.json

With ``quantize=True`` an entry is stored as one int8 sign and the matrix is
``scale · signs`` with ``scale = b / p``.  Memory is proportional to the kept
entries: about ``p·n²/2 · (8 + 4)`` bytes (``p·n²/2 · (1 + 4)`` quantised).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from distsketch.errors import InputError, StoreError
from distsketch.estimators.base import DistsketchEstimator, OperatorSize, fit_context, to_numpy
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_kernel_params
from distsketch.graph import KERNEL_TILE_ROWS, map_blocks, plan_rows, reduce_blocks
from distsketch.io.arrays.sparse_strips import CSRStripReader, write_csr_strips
from distsketch.ops.kernels import KERNEL_NAMES
from distsketch.ops.sparsify import diagonal_block, kernel_bound
from distsketch.summaries.sparsified import StripSummary
from distsketch.validation import Interval, Options

__all__ = ["SparseTiles", "SparsifiedGram"]


def strip_sizes(owner: str, tile_rows: int, p: float, n_samples: int,
                n_features: int) -> list[OperatorSize]:
    """What one strip task of the sparsified Gram holds: a row of its tile, and its kept entries.

    The strip of ``tile_rows`` rows against up to all n rows keeps about
    p·tile_rows·n entries (row, column, value: 24 bytes each) until it is merged.
    """
    n, d = int(n_samples), int(n_features)
    t = min(int(tile_rows), max(1, n))
    given = f"{owner}: tile_rows={tile_rows}, p={p} on {n} rows of {d} features:"
    fix = "lower tile_rows (or p)"
    return [(f"{given} one row of a strip task (kernel tile row of {t}, hash temporaries and the "
             f"strip's {t} x {d} rows, float64) that", 8 * t * (10 + d) + 8 * d, fix),
            (f"{given} the kept entries of one strip (about p x {t} x {n}, 24 bytes each) that",
             24 * math.ceil(float(p) * t * n), fix)]


class SparseTiles:
    """A symmetric sparse matrix stored as lower-triangle CSR row strips.

    Parameters
    ----------
    n : int
        Matrix size.
    bounds : ndarray of shape (n_strips, 2)
        Row range ``[r0, r1)`` of each strip.
    diagonal : ndarray of shape (n,)
        Diagonal of the matrix (in final units).
    scale : float
        Multiplier of the stored values (``b / p`` for int8 signs, else 1).
    strips : list of scipy.sparse.csr_array, optional
        In-memory strips (shape ``(r1 − r0, r1)`` each); else read from ``path``.
    path : str, optional
        Zarr group holding the strips (see the module docstring).

    Notes
    -----
    A product with an n × m block reads each strip once and costs
    O(nnz · m) flops; memory is one strip plus the n × m input and output.
    """

    def __init__(self, n: int, bounds: np.ndarray, diagonal: np.ndarray, scale: float,
                 strips: list[sp.csr_array] | None = None, path: str | None = None):
        self.n = int(n)
        self.bounds = np.asarray(bounds, dtype=np.int64).reshape(-1, 2)
        self.diagonal = np.asarray(diagonal, dtype=np.float64)
        self.scale = float(scale)
        self.strips = strips
        self.path = path
        self._reader = CSRStripReader(path) if path is not None else None

    def strip(self, s: int) -> sp.csr_array:
        """The CSR strip ``s`` (stored units: multiply by ``scale``)."""
        if self.strips is not None:
            return self.strips[s]
        try:
            r0, r1 = self.bounds[s]
            return self._reader.strip(s, (int(r1 - r0), int(r1)))  # type: ignore[union-attr]
        except Exception as exc:
            raise StoreError(
                f"cannot read strip {s} (rows {self.bounds[s][0]}..{self.bounds[s][1]}) of the "
                f"sparse Gram store {self.path}: {exc}. Rebuild it with SparsifiedGram.fit."
            ) from exc

    @property
    def nnz(self) -> int:
        """Number of non-zeros of the full symmetric matrix."""
        lower = sum(int(self.strip(s).nnz) for s in range(len(self.bounds)))
        return 2 * lower - int(np.count_nonzero(self.diagonal))

    @property
    def nbytes(self) -> int:
        """Bytes of the stored strips (data + indices + indptr) and the diagonal."""
        total = self.diagonal.nbytes
        for s in range(len(self.bounds)):
            m = self.strip(s)
            total += m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
        return int(total)

    def matmat(self, V: np.ndarray) -> np.ndarray:
        """``K̂ @ V`` for V of shape (n,) or (n, m)."""
        V = np.asarray(V, dtype=np.float64)
        vec = V.ndim == 1
        V2 = V[:, None] if vec else V
        Y = np.zeros_like(V2)
        for s, (r0, r1) in enumerate(self.bounds):
            L = self.strip(s)
            Y[r0:r1] += L @ V2[:r1]
            Y[:r1] += L.T @ V2[r0:r1]
        Y *= self.scale
        Y -= self.diagonal[:, None] * V2  # the diagonal was added twice
        return Y[:, 0] if vec else Y

    def to_scipy(self) -> sp.csr_array:
        """The full symmetric matrix as a scipy CSR array (n × n, float64)."""
        L = sp.vstack([self._padded(s) for s in range(len(self.bounds))], format="csr") * self.scale
        full = (L + L.T - sp.diags_array(self.diagonal)).tocsr()
        full.sort_indices()
        full.eliminate_zeros()
        return sp.csr_array(full)

    def _padded(self, s: int) -> sp.csr_array:
        m = self.strip(s)
        return sp.csr_array((m.data.astype(np.float64), m.indices, m.indptr),
                            shape=(m.shape[0], self.n))

    def __distsketch_state__(self) -> dict:
        state: dict[str, Any] = {"n": self.n, "bounds": self.bounds, "diagonal": self.diagonal,
                                 "scale": self.scale, "path": self.path}
        if self.strips is not None:
            for s, m in enumerate(self.strips):
                state[f"data_{s}"] = m.data
                state[f"indices_{s}"] = m.indices
                state[f"indptr_{s}"] = m.indptr
        return state

    @classmethod
    def __distsketch_restore__(cls, state: dict) -> SparseTiles:
        bounds = np.asarray(state["bounds"]).reshape(-1, 2)
        strips = None
        if "data_0" in state or (state["path"] is None and len(bounds)):
            strips = [sp.csr_array((state[f"data_{s}"], state[f"indices_{s}"], state[f"indptr_{s}"]),
                                   shape=(int(r1 - r0), int(r1)))
                      for s, (r0, r1) in enumerate(bounds)]
        return cls(state["n"], bounds, state["diagonal"], state["scale"], strips, state["path"])


class SparsifiedGram(DistsketchEstimator):
    """The sparsified and/or quantised Gram matrix K̂ with E[K̂] = K, built blockwise.

    Every entry is kept with probability ``p`` and rescaled to ``K_ij / p``;
    with ``quantize=True`` a kept entry is rounded to ``±b / p`` unbiasedly
    (b >= max |K_ij|).  Decisions are hashes of ``(seed, min(i, j), max(i, j))``:
    K̂ is symmetric and identical for any tiling or chunking of X.

    Parameters
    ----------
    kernel : str or callable, default "rbf"
        A kernel name of :mod:`distsketch.ops.kernels` or ``f(X, Y)``.
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features, "median" the median
        heuristic on a 1000-row sample (one more pass over X in ``fit``);
        the value used is ``gamma_``.
    degree : int, default 3
        Polynomial degree.
    coef0 : float, default 1.0
        Polynomial offset.
    p : float in (0, 1], default 0.1
        Probability of keeping an entry.
    quantize : bool, default False
        Round kept entries to ``±b / p`` (one bit each).
    quantize_bound : float, optional
        The level b.  Default: 1 for kernels bounded by 1 (rbf, laplacian,
        cauchy, arccos0), else ``max_i k(x_i, x_i)`` from one pass over X (a
        bound for positive-definite kernels).
    tile_rows : int, default 2048
        Rows per strip and per tile side; multiples of 256 waste no work.
    store : str or path, optional
        Write the strips to this Zarr group (atomically) and read them from
        there in products, so memory holds one strip at a time; None keeps
        the strips in memory.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    n_features_in_ : int
    n_samples_seen_ : int
        Rows of the fitted Gram matrix.
    tiles_ : SparseTiles
        The stored matrix (lower-triangle CSR strips).
    nnz_ : int
        Non-zeros of K̂ (both triangles).
    density_ : float
        ``nnz_ / n²``.
    memory_bytes_ : int
        Bytes of the stored strips.
    quantize_level_ : float or None
        b (``quantize=True``), else None.
    kernel_name_, kernel_params_ :
        Resolved kernel.

    Notes
    -----
    Work: all n²/2 lower-triangle kernel values are evaluated (tile GEMMs);
    one strip pass reads X[:r1] once, so X is read about n / (2·tile_rows)
    times.  Per-task memory: a ``tile_rows`` × block tile of float64 and its
    hashes (~10 × 8 bytes per entry) plus the strip's ``tile_rows × d`` rows,
    which travel once per strip.  Result memory ∝ kept entries (see the module
    docstring for the layout).  With high probability
    ‖K̂ − K‖₂ <= 4σ√n (Füredi–Komlós), σ² = b²(1 − p)/p, or b²/p if quantised.

    References
    ----------
    Achlioptas, McSherry, Schölkopf. Sampling techniques for kernel methods. NIPS 2001.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import SparsifiedGram
    >>> X = np.random.default_rng(0).normal(size=(300, 4))
    >>> G = SparsifiedGram(gamma=0.2, p=0.3, random_state=0).fit(X)
    >>> G.to_scipy().shape
    (300, 300)
    """

    _parameter_constraints = {
        "kernel": [Options(KERNEL_NAMES), "callable"],
        "gamma": GAMMA_CONSTRAINT,
        "degree": [Interval(int, 1, None)],
        "coef0": [Interval(float, None, None)],
        "p": [Interval(float, 0, 1, closed="right")],
        "quantize": ["boolean"],
        "quantize_bound": [Interval(float, 0, None, closed="neither"), None],
        "tile_rows": [Interval(int, 1, None)],
        "store": [str, os.PathLike, None],
        "random_state": ["random_state"],
    }

    def __init__(self, *, kernel: Any = "rbf", gamma: float | str | None = None, degree: int = 3,
                 coef0: float = 1.0, p: float = 0.1, quantize: bool = False,
                 quantize_bound: float | None = None, tile_rows: int = KERNEL_TILE_ROWS,
                 store: str | os.PathLike | None = None, random_state: Any = None):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.p = p
        self.quantize = quantize
        self.quantize_bound = quantize_bound
        self.tile_rows = tile_rows
        self.store = store
        self.random_state = random_state

    @fit_context
    def fit(self, X: Any, y: Any = None, *, overwrite: bool = False) -> SparsifiedGram:
        """Build K̂ for the rows of X.

        Parameters
        ----------
        X : ndarray, dask array or Zarr path of shape (n_samples, n_features)
        y : ignored
        overwrite : bool
            Replace an existing ``store``.

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        n = X.shape[0]
        name, params = fit_kernel_params(self, X)
        self.kernel_name_ = name if isinstance(name, str) else "callable"
        self.kernel_params_ = params
        T = min(int(self.tile_rows), max(1, n))  # a strip has at most n rows: plan for those
        Xd = plan_rows(X, block_rows=T).data

        bound = None
        if self.quantize:
            bound = self.quantize_bound or kernel_bound(name)
            if bound is None:
                diag = to_numpy(map_blocks(Xd, diagonal_block, n_out=1, dtype=np.float64,
                                           kwargs={"kernel": name, "params": params},
                                           name="gram-diagonal"))
                bound = float(np.abs(diag).max())
                if bound <= 0:
                    raise InputError("all kernel diagonal values are 0; quantisation needs b > 0.")
        self.quantize_level_ = bound
        scale = bound / self.p if self.quantize else 1.0  # type: ignore[operator]

        bounds = np.array([(r0, min(r0 + T, n)) for r0 in range(0, n, T)], dtype=np.int64)
        diagonal = np.zeros(n)
        idx_dtype = np.dtype(np.int32) if n < 2**31 - 1 else np.dtype(np.int64)

        def build(write_strip: Any) -> None:
            for s, (r0, r1) in enumerate(bounds):
                XS = to_numpy(Xd[r0:r1]).astype(np.float64, copy=False)
                summ = StripSummary(name, params, seed, float(self.p), bool(self.quantize), bound,
                                     int(r0), n, strip_rows=T)
                st = reduce_blocks(summ, Xd[:r1], XS, name="sparsified-gram-strip")
                rows, cols, vals = st["rows"], st["cols"], st["vals"]
                if self.quantize:
                    vals = np.sign(vals).astype(np.int8)
                m = sp.csr_array((vals, (rows, cols.astype(idx_dtype))), shape=(int(r1 - r0), int(r1)))
                m.sum_duplicates()
                m.sort_indices()
                m.indices = m.indices.astype(idx_dtype, copy=False)
                m.indptr = m.indptr.astype(np.int64, copy=False)
                diagonal[r0:r1] = np.asarray(m.diagonal(k=int(r0)), dtype=np.float64) * scale
                write_strip(s, m)

        if self.store is None:
            strips: list[sp.csr_array] = []
            build(lambda s, m: strips.append(m))
            self.tiles_ = SparseTiles(n, bounds, diagonal, scale, strips=strips)
        else:
            path = str(Path(self.store).expanduser().absolute())
            attrs = {"n": int(n), "bounds": bounds.tolist(), "scale": scale, "p": float(self.p),
                     "quantize": bool(self.quantize), "kernel": self.kernel_name_, "seed": int(seed),
                     "layout": "lower-csr-strips"}
            manifest = {"kind": "sparsified-gram", "n": int(n), "p": float(self.p),
                        "quantize": bool(self.quantize), "seed": int(seed)}
            with write_csr_strips(path, attrs=attrs, manifest=manifest,
                                  overwrite=overwrite) as writer:
                build(writer.strip)
                writer.diagonal(diagonal)
            self.tiles_ = SparseTiles(n, bounds, diagonal, scale, path=path)
        self.n_samples_seen_ = int(n)
        self.nnz_ = self.tiles_.nnz
        self.density_ = self.nnz_ / float(n) ** 2
        self.memory_bytes_ = self.tiles_.nbytes
        return self

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        return strip_sizes("SparsifiedGram", self.tile_rows, self.p, n_samples, n_features)

    def to_scipy(self) -> sp.csr_array:
        """K̂ as a scipy CSR array of shape (n, n) (small n: it holds both triangles)."""
        self._check_is_fitted("tiles_")
        return self.tiles_.to_scipy()

    def as_linear_operator(self, *, center: bool = False) -> LinearOperator:
        """K̂ (or H K̂ H with H = I − 11ᵀ/n) as a scipy ``LinearOperator``.

        Products stream over the strips (in memory or from the store): memory
        is one strip plus the operand.

        Parameters
        ----------
        center : bool
            Double-centre, as kernel PCA does.

        Returns
        -------
        scipy.sparse.linalg.LinearOperator of shape (n, n)
        """
        self._check_is_fitted("tiles_")
        tiles = self.tiles_
        n = tiles.n

        def mm(V: np.ndarray) -> np.ndarray:
            V = np.asarray(V, dtype=np.float64)
            V2 = V.reshape(n, -1)
            if center:
                V2 = V2 - V2.mean(axis=0, keepdims=True)
                Y = tiles.matmat(V2)
                Y -= Y.mean(axis=0, keepdims=True)
            else:
                Y = tiles.matmat(V2)
            return Y.reshape(V.shape) if V.ndim == 1 else Y

        return LinearOperator((n, n), matvec=mm, matmat=mm, rmatvec=mm, rmatmat=mm,
                              dtype=np.float64)
