"""A kernel sketch composed with an SRHT sized by the statistical dimension (Song et al.
2021, Theorem E.2)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import clone

from distsketch.estimators.base import RowMapTransformer, fit_context, to_numpy
from distsketch.estimators.features.rff import RandomFourierFeatures
from distsketch.estimators.ridge.defaults import FeatureBlock
from distsketch.estimators.ridge.regressor import feature_block_function
from distsketch.footprint import Footprint
from distsketch.graph import reduce_blocks
from distsketch.ops.hadamard import srht_apply, srht_operator
from distsketch.ops.sketch_solve import estimate_statistical_dimension
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.validation import Interval

__all__ = ["StatisticalDimensionSketch"]


class _ComposedMap(FeatureBlock):
    def __call__(self, block: np.ndarray, offset: int, *operands: Any) -> np.ndarray:
        Z = self.features(block, offset, operands)
        return srht_apply(Z, operands[self.n_ops], operands[self.n_ops + 1], offset)


class StatisticalDimensionSketch(RowMapTransformer):
    """A kernel sketch composed with an SRHT sized by the statistical dimension.

    ``z(x) = S · φ̃(x)`` where ``φ̃`` is a first kernel sketch with m features
    (a polynomial sketch in Song et al., Theorem E.2) and ``S`` an SRHT from m
    to ``s ≈ oversampling · s_λ · ln s_λ`` coordinates, with
    ``s_λ = Σ σᵢ/(σᵢ + λ)`` estimated from the spectrum of ``φ̃`` on a
    uniform sample of rows.  Ridge regression on z then costs
    ``O(n s² + s³)`` instead of ``O(n m² + m³)``.

    Parameters
    ----------
    base : feature map, default None
        First sketch (e.g. ``PolySketch``); None means
        ``RandomFourierFeatures(n_components=1024)``.
    alpha : float, default 1.0
        The ridge λ that defines s_λ (use the regression's λ).
    oversampling : float, default 2.0
        Constant in front of ``s_λ ln s_λ``.
    n_sample : int, default 2000
        Rows in the sample used to estimate s_λ.
    min_components : int, default 16
        Lower bound on s.
    random_state : int, Generator or None

    Attributes
    ----------
    base_ : fitted first sketch
    statistical_dimension_ : float
        Estimated s_λ of the first sketch's kernel on the training rows.
    n_output_features_ : int
        s, the SRHT size (at most the base size m).
    srht_signs_ : ndarray of shape (M,)
    srht_index_ : ndarray of shape (s,)

    Notes
    -----
    ``fit`` reads X once to draw the uniform row sample (bottom-k hash
    priorities, merged up a tree: per task ``n_sample × d`` values).  The
    estimate scales the sample's eigenvalues by n/n_sample.  Transform cost per
    row: the base map plus an O(M log M) Walsh–Hadamard transform.

    References
    ----------
    Song, Woodruff, Yu, Zhang. Fast sketching of polynomial kernels of
    polynomial degree. ICML 2021, Theorem E.2 / Definition E.1.
    Avron, Clarkson, Woodruff. Sharper bounds for regularized data fitting.
    APPROX/RANDOM 2017 (sketch size in terms of s_λ).
    """

    _parameter_constraints = {
        "base": [None, "estimator"],
        "alpha": [Interval(float, 0, None, closed="neither")],
        "oversampling": [Interval(float, 0, None, closed="neither")],
        "n_sample": [Interval(int, 1, None)],
        "min_components": [Interval(int, 1, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, base: Any = None, alpha: float = 1.0, oversampling: float = 2.0,
                 n_sample: int = 2000, min_components: int = 16, random_state: Any = None):
        self.base = base
        self.alpha = alpha
        self.oversampling = oversampling
        self.n_sample = n_sample
        self.min_components = min_components
        self.random_state = random_state

    @fit_context
    def fit(self, X: Any, y: Any = None) -> StatisticalDimensionSketch:
        """Fit the base sketch, estimate s_λ from a row sample and draw the SRHT."""
        X = self._check_input(X, reset=True)
        seed = self._init_seed()
        base = self.base if self.base is not None else RandomFourierFeatures(n_components=1024)
        if not hasattr(base, "n_output_features_"):
            base = clone(base)
            if "random_state" in base.get_params(deep=False) and \
                    base.get_params(deep=False)["random_state"] is None:
                base.set_params(random_state=seed)
            base.fit(X)
        self.base_ = base
        sampler = UniformLandmarks(self.n_sample, seed, "sdim.sample", order="priority")
        _, sample = sampler.finalize(reduce_blocks(sampler, X, name="sdim-sample"))
        Zs = np.asarray(to_numpy(base.transform(sample.astype(X.dtype))), dtype=np.float64)
        s_lam = estimate_statistical_dimension(Zs, X.shape[0], float(self.alpha))
        self.statistical_dimension_ = s_lam
        m = int(base.n_output_features_)
        s = int(np.ceil(self.oversampling * s_lam * max(1.0, np.log(max(s_lam, 1.0)))))
        s = int(min(m, max(self.min_components, s)))
        self.srht_signs_, self.srht_index_ = srht_operator(seed, m, s, "sdim.srht")
        self.n_output_features_ = s
        return self

    def _operands(self) -> tuple:
        _, ops = feature_block_function(self.base_)
        return (*ops, self.srht_signs_, self.srht_index_)

    def _output_dtype(self, X: Any) -> np.dtype:
        return np.dtype(np.float64)

    def _map_footprint(self) -> Footprint:
        # the input row, the base map's features and the SRHT's padded copy (float64)
        return Footprint(per_row=8.0 * (self.n_features_in_ + 3 * self.srht_signs_.shape[0]))

    def _map_block(self, block: Any, offset: int, *operands: Any) -> np.ndarray:
        fn, ops = feature_block_function(self.base_)
        return _ComposedMap(fn, len(ops))(block, offset, *operands)
