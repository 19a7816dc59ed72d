"""The linear stage shared by the oblivious sketches (CountSketch, SRHT, TensorSketch,
TensorSRHT, PolySketch and the dot-product kernel sketch).

A :class:`LinearStageSketch` is ``combine(linear(x))``: a linear stage that can
be applied to column blocks of a wide input and summed, followed by a row-wise
nonlinear stage.  This module holds the fitting, the column-block transform
and the operator sizes they share; the sketches themselves are in
:mod:`distsketch.estimators.features.polynomial` and :mod:`distsketch.estimators.features.dot_product`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.estimators.autosize import AutoSized
from distsketch.estimators.base import OperatorSize, RowMapTransformer, fit_context
from distsketch.estimators.kernel_params import fit_gamma, fitted_kernel_params
from distsketch.footprint import Footprint
from distsketch.graph import map_blocks
from distsketch.graph.columns import map_row_columns
from distsketch.ops.namespace import asarray, namespace
from distsketch.ops.tensor_sketch import (
    FFT_ROWS,
    sketch_combine_footprint,
    sketch_linear_footprint,
    sketch_map_footprint,
)
from distsketch.validation import is_dask
from distsketch.validation.finite import FiniteRows

__all__ = ["LinearStageSketch"]

_FUSED_BYTES = 2 * 2**20


class LinearStageSketch(AutoSized, RowMapTransformer):
    """Base of sketches ``combine(Σ_column blocks linear(block) + bias)``.

    Subclasses implement ``_setup(d)`` (called in fit), ``_n_linear()``,
    ``_linear(block, row_offset, col_offset)`` (linear in the block),
    ``_bias()`` (the linear-stage image of constant coordinates, or None) and
    ``_combine(summed, row_offset)``.  Operators are regenerated from
    ``seed_`` in each task (cached per process), so nothing large is shipped.
    """

    _array_api_support = True

    _accepts_sparse = True
    #: the linear stage has degree x n_components columns (one sketch per factor)
    _linear_per_degree = False
    #: the kernel the map approximates, unless a ``kernel`` parameter names it (None: the
    #: plain inner product, no kernel parameters)
    _approximates: str | None = None

    @fit_context
    def fit(self, X: Any, y: Any = None) -> LinearStageSketch:
        """Fix the operator for X's number of features.

        Reads only X's shape, unless the estimator has ``gamma="median"`` (one
        pass for a row sample) or needs statistics of X (GaussianSketch).

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        self._check_params_for_shape(*X.shape)
        self._init_seed()
        if "gamma" in self._parameter_constraints:
            fit_gamma(self, X)
        self.n_components_ = self._resolve_size(X)
        self._setup(X)
        kernel = getattr(self, "kernel", self._approximates)
        if kernel is not None:
            self.kernel_params_ = fitted_kernel_params(self, kernel)
        self.n_samples_seen_ = int(X.shape[0])
        self._certify(X)
        return self

    def _padded_width(self, n_features: int) -> int:
        """Width of the Hadamard transform buffer for this many features (0: none)."""
        return 0

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        # The smallest transform task, one row: the input row, the padded transform buffer,
        # the linear stage (and its sum), the output and two complex FFT spectra per output
        # column, as _map_footprint counts them for a block, in float64.
        # The operators themselves are regenerated per task from seed_ and are smaller.
        m, d = self._size_for_check(), int(n_features)
        n_linear = int(getattr(self, "degree", None) or 1) * m if self._linear_per_degree else m
        row = 8 * (d + self._padded_width(d) + 2 * n_linear + m) + 48 * m
        name = type(self).__name__
        degree = (f", degree={self.degree}" if getattr(self, "degree", None) is not None
                  else "")
        return [(f"{name}: n_components={m}{degree} on {d} input features: the buffers of one "
                 "transformed row (input, linear stage, FFT spectra, output; float64)", row,
                 "lower n_components")]

    def _setup(self, X: Any) -> None:
        self.n_output_features_ = int(self.n_components_)

    def _n_linear(self) -> int:
        m = int(self.n_components_)
        return int(self.degree) * m if self._linear_per_degree else m

    def _bias(self) -> np.ndarray | None:
        return None

    def _combine(self, L: np.ndarray, row_offset: int) -> np.ndarray:
        return L

    def _linear(self, block: Any, row_offset: int, col_offset: int) -> np.ndarray:
        raise NotImplementedError

    def _combine_with_bias(self, L: np.ndarray, row_offset: int) -> np.ndarray:
        b = self._bias()
        if b is not None:
            L = L + b.astype(L.dtype)
        return self._combine(L, row_offset)

    def _fused_rows(self, itemsize: int) -> int:
        # rows whose linear stage, transform buffers and output fit in about L2 cache
        per_row = itemsize * (self.n_features_in_ + getattr(self, "_padded_dim", 0)
                              + 3 * self._n_linear() + self.n_output_features_)
        return int(min(FFT_ROWS, max(16, _FUSED_BYTES // max(per_row, 1))))

    def _map_block(self, block: Any, offset: int) -> np.ndarray:
        # Both stages run on row slices small enough to stay in cache: on 2 500-row blocks
        # the separate passes spent more time moving n × q·m buffers than in the FFTs.
        # Every stage is row-independent given the global row offset, so the slicing
        # changes no bit of the result.
        if sp.issparse(block):
            block = sp.csr_matrix(block)
        n = block.shape[0]
        dt = self._output_dtype(block)
        b = self._bias()
        # the host bias moves to the block's device once per block
        b = None if b is None else asarray(b.astype(dt), like=block)
        step = self._fused_rows(dt.itemsize)
        out = None
        for a in range(0, max(n, 1), step):    # an empty block still yields an (0, m) result
            stop = min(n, a + step)
            L = self._linear(block[a:stop, :], offset + a, 0)
            if b is not None:
                L += b                  # L is this slice's own buffer: add in place
            Y = self._combine(L, offset + a)
            if stop - a == n:
                return Y
            if out is None:
                out = (np.empty((n, Y.shape[1]), dtype=Y.dtype) if isinstance(Y, np.ndarray)
                       else namespace(Y).empty((n, Y.shape[1]), dtype=Y.dtype, device=Y.device))
            out[a:stop, ...] = Y
        return out  # type: ignore[return-value]

    def _map_footprint(self) -> Footprint:
        return sketch_map_footprint(self.n_features_in_, getattr(self, "_padded_dim", 0),
                                    self._n_linear(), self.n_output_features_)

    def transform(self, X: Any) -> Any:
        """Sketch the rows of X.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
            A dask array may be chunked along columns too: the linear stage is
            applied per column block and summed before the nonlinear stage.

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_output_features_)
            Same kind as X; float32 input gives float32 output.
        """
        self._check_is_fitted("n_output_features_")
        if is_dask(X) and X.ndim == 2 and len(X.chunks[1]) > 1:
            X = self._check_input(X, reset=False, allow_sparse=True)
            return map_row_columns(
                self._linear, self._combine_with_bias, X, n_linear=self._n_linear(),
                n_out=self.n_output_features_, dtype=self._output_dtype(X),
                linear_footprint=sketch_linear_footprint(max(X.chunks[1]), self._n_linear()),
                combine_footprint=sketch_combine_footprint(
                    self.n_features_in_, getattr(self, "_padded_dim", 0), self._n_linear(),
                    self.n_output_features_),
                name=type(self).__name__.lower())
        X = self._check_input(X, reset=False, allow_sparse=True)
        return map_blocks(X, FiniteRows(self._map_block, f"{type(self).__name__} transform"),
                          n_out=self.n_output_features_, dtype=self._output_dtype(X),
                          footprint=self._map_footprint(), name=type(self).__name__.lower())
