"""A given alpha takes float32 products when it is large against the spectrum, float64 otherwise.

The rule (:func:`~distsketch.estimators.ridge.system.alpha_tolerates_float32`):
float32 rows form ZᵀZ by float32 products when every given λ is at least
10⁻³ × the mean eigenvalue tr(Z_cᵀZ_c) / m, estimated from the features of
the first rows.  The float32 solution w̃ differs from the float64 one by
exactly −(A + αI)⁻¹ΔA·w̃, so ‖w̃ − w‖ ≤ ‖ΔA‖₂‖w̃‖ / λ_min(A + αI), and the
stated tolerance is 5 % of the spread between two draws of the random
features (docs/architecture.md, "Precision").
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.linalg as sla

from distsketch import RandomFourierFeatures, SketchedKernelRidge
from distsketch.ops.sketch_solve import centered_normal_equations
from distsketch.summaries.covariance import covariance_state


def _data(n: int = 6000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def _fit(X, y, alpha: float, seed: int = 1) -> SketchedKernelRidge:
    feats = RandomFourierFeatures(gamma=0.2, n_components=128, random_state=seed)
    return SketchedKernelRidge(standardize=False, features=feats, alpha=alpha).fit(X, y)


def _reference(model: SketchedKernelRidge, X, y, alpha: float) -> tuple[np.ndarray, ...]:
    # the float64 products of the model's own (float32) features, solved in float64
    Z = model.features_.transform(X)
    assert Z.dtype == np.float32
    Z64 = Z.astype(np.float64)
    state = covariance_state(Z64, y[:, None])
    A, b, zm, ym = centered_normal_equations(state, True)
    G = A + alpha * np.eye(A.shape[0])
    w = sla.solve(G, b, assume_a="sym")[:, 0]
    return Z64, state, w, float(ym[0] - zm @ w), np.linalg.eigvalsh(G)


def _mean_eigenvalue(X, y) -> float:
    Z64 = _fit(X, y, 1.0).features_.transform(X).astype(np.float64)
    A, _, _, _ = centered_normal_equations(covariance_state(Z64, y[:, None]), True)
    return float(np.trace(A)) / A.shape[0]


def test_large_given_alpha_multiplies_float32_rows_in_float32():
    X, y = _data()
    alpha = 1e-2 * _mean_eigenvalue(X, y)  # 10x the rule's floor
    model = _fit(X, y, alpha)
    assert model.gram_precision_ == "float32"
    Z64, state, w, c, lam = _reference(model, X, y, alpha)
    absZ = np.abs(Z64)
    dA = model.gram_ - state["ztz"]
    # the Gram is the float32 one: beyond float64 rounding
    assert np.any(np.abs(dA) > 1e-12 * (absZ.T @ absZ))
    # within the perturbation identity's bound of the float64 solution ...
    assert np.linalg.norm(model.coef_ - w) <= \
        np.linalg.norm(dA, 2) * np.linalg.norm(model.coef_) / lam[0]
    # ... and within 5 % of the spread over two draws of the random features
    ref = Z64 @ w + c
    other = _fit(X, y, alpha, seed=2)
    Z2, _, w2, c2, _ = _reference(other, X, y, alpha)
    spread = np.linalg.norm(Z2 @ w2 + c2 - ref)
    assert spread > 0
    assert np.linalg.norm(model.predict(X) - ref) <= 0.05 * spread
    # dask input: the same decision, from its first block's rows
    assert _fit(da.from_array(X, chunks=(1000, 5)), y, alpha).gram_precision_ == "float32"


@pytest.mark.parametrize("relative", [1e-8, 1e-4])
def test_small_given_alpha_multiplies_float32_rows_in_float64(relative):
    X, y = _data()
    alpha = relative * _mean_eigenvalue(X, y)  # below the rule's floor of 1e-3
    model = _fit(X, y, alpha)
    assert model.gram_precision_ == "float64"
    Z64, state, _, _, _ = _reference(model, X, y, alpha)
    absZ = np.abs(Z64)
    # the float64 product of the float32 features, to float64 rounding
    n = X.shape[0]
    g = n * 2.0**-53 / (1 - n * 2.0**-53)
    assert np.all(np.abs(model.gram_ - state["ztz"]) <= g * (absZ.T @ absZ))
    # float64 rows are always multiplied in float64
    assert _fit(X.astype(np.float64), y, 1e3).gram_precision_ == "float64"
