"""Precision where it is needed: float32 products for the covariance of kernel PCA
(RNCA) and for kernel ridge at GCV's alphas, float64 products for kernel ridge at a
given alpha, each checked against the float64 path with the error bound that decides it.

The bound.  The features Z of float32 rows are float32; a block of b rows
multiplied in float32 gives fl₃₂(ZᵀZ) within E = γ_b·|Z|ᵀ|Z| of the exact
product, entry by entry (γ_b = b·u/(1 − b·u), u = 2⁻²⁴, any summation
order); blocks are summed in float64.  Since E ≥ 0, ‖ΔC‖₂ ≤ ‖E‖₂.

* Kernel PCA reads eigenpairs: eigenvalues move by at most ‖ΔC‖₂ (Weyl) and a
  component by an angle of at most ‖ΔC‖₂ / gap (Davis–Kahan), small for the
  leading components.
* Ridge solves (A + αI)w = b: the float32 solution w̃ differs by exactly
  −(A + αI)⁻¹ΔA·w̃, so ‖w̃ − w‖ ≤ ‖E‖₂‖w̃‖ / λ_min(A + αI): amplified by the
  condition number, which a small α leaves huge.  The method's own
  tolerance is the spread of its float64 solution over the random features
  (two seeds of the sketch).  Float32 products exceed it several times on the
  ill-conditioned case at a small given α, so a given α multiplies in
  float64; GCV's candidates are all ≥ 10⁻³ of the mean eigenvalue, where
  float32 products stay within a hundredth of that spread, so
  ``alpha="auto"`` multiplies float32 rows in float32.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from distsketch import RandomFourierFeatures, SketchedKernelRidge, StreamingKernelPCA
from distsketch.estimators.ridge.defaults import gcv_path
from distsketch.ops.rff import rff_map
from distsketch.ops.sketch_solve import centered_normal_equations
from distsketch.summaries.covariance import covariance_state
from distsketch.summaries.ridge import SLICE_ROWS, RidgeSummary, float32_products

U32 = 2.0**-24


def _gamma(b: int) -> float:
    return b * U32 / (1 - b * U32)


def _correlated(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    # five inputs along nearly one direction: with a wide kernel the features are
    # strongly correlated and ZᵀZ + αI (α = 1e-6) is badly conditioned
    rng = np.random.default_rng(seed)
    t = rng.normal(size=(n, 1))
    X = (t + 1e-3 * rng.normal(size=(n, 5))).astype(np.float32)
    y = np.sin(2.0 * t[:, 0]) + 0.01 * rng.normal(size=n)
    return X, y


def _ridge_solution(state: dict, alpha: float) -> tuple[np.ndarray, float, np.ndarray]:
    A, b, zm, ym = centered_normal_equations(state, True)
    G = A + alpha * np.eye(A.shape[0])
    w = sla.solve(G, b, assume_a="sym")[:, 0]
    return w, float(ym[0] - zm @ w), np.linalg.eigvalsh(G)


def test_ridge_at_a_given_alpha_multiplies_float32_input_in_float64():
    X, y = _correlated()
    alpha = 1e-6
    feats = RandomFourierFeatures(gamma=0.05, n_components=64, random_state=1)
    model = SketchedKernelRidge(standardize=False, features=feats, alpha=alpha).fit(X, y)
    Z = model.features_.transform(X)
    assert Z.dtype == np.float32
    Z64 = Z.astype(np.float64)
    absZ = np.abs(Z64)
    # the float64 path: the Gram to float64 rounding of the exact product
    assert np.all(np.abs(model.gram_ - Z64.T @ Z64) <= 1e-13 * (absZ.T @ absZ))
    w, c, lam = _ridge_solution(covariance_state(Z64, y[:, None]), alpha)
    assert lam[-1] / lam[0] > 1e6  # the case is ill-conditioned
    np.testing.assert_allclose(model.coef_, w, rtol=0, atol=1e-9 * lam[-1] / lam[0]
                               * np.linalg.norm(w) * 1e-3)
    ref = Z64 @ w + c
    assert np.linalg.norm(model.predict(X) - ref) <= 1e-5 * np.linalg.norm(ref)

    # float32 products: within their bound, but the bound is vacuous once multiplied by
    # cond(A + αI), and the solution leaves the method's tolerance (predictions ~7 % off)
    fl32 = {**covariance_state(Z64, y[:, None]), "ztz": (Z.T @ Z).astype(np.float64)}
    E = _gamma(Z.shape[0]) * (absZ.T @ absZ)
    assert np.all(np.abs(fl32["ztz"] - Z64.T @ Z64) <= E)
    w32, c32, _ = _ridge_solution(fl32, alpha)
    assert np.linalg.norm(w32 - w) <= np.linalg.norm(E, 2) * np.linalg.norm(w32) / lam[0]
    assert np.linalg.norm(E, 2) / lam[0] > 1.0
    assert np.linalg.norm(Z64 @ w32 + c32 - ref) > 1e-2 * np.linalg.norm(ref)


def _float32_products(Z: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, ...]:
    # predictions of the float64-product and float32-product solutions on the same features
    Z64 = Z.astype(np.float64)
    state = covariance_state(Z64, y[:, None])
    w, c, _ = _ridge_solution(state, alpha)
    w32, c32, _ = _ridge_solution({**state, "ztz": (Z.T @ Z).astype(np.float64)}, alpha)
    return Z64 @ w + c, Z64 @ w32 + c32


def test_float32_ridge_products_exceed_the_spread_over_random_features():
    # the method's tolerance: two seeds of the random features, each solved in float64,
    # at the small alphas a user may ask for on this ill-conditioned case (GCV's own
    # choice stays at or above 1e-3 of the mean eigenvalue)
    X, y = _correlated()
    fits = [SketchedKernelRidge(standardize=False, alpha=1e-6, features=RandomFourierFeatures(
        gamma=0.05, n_components=64, random_state=seed)).fit(X, y) for seed in (1, 2)]
    Z = fits[0].features_.transform(X)
    for alpha in (1e-6, 1e-7):
        ref, fl32 = _float32_products(Z, y, alpha)
        other, _ = _float32_products(fits[1].features_.transform(X), y, alpha)
        spread = np.linalg.norm(other - ref)
        assert 0 < spread < 0.02 * np.linalg.norm(ref)  # both seeds fit sin(2t) to ~1 %
        # float32 products move the predictions 4x the seed spread (measured): not kept
        assert np.linalg.norm(fl32 - ref) > 2 * spread
    # the spread of the two seeds as fitted at alpha = 1e-6
    ref, fl32 = _float32_products(Z, y, 1e-6)
    fitted_spread = np.linalg.norm(fits[0].predict(X) - fits[1].predict(X))
    assert np.linalg.norm(fl32 - ref) > 2 * fitted_spread


def _gcv_fit(X: np.ndarray, y: np.ndarray, m: int, seed: int) -> SketchedKernelRidge:
    feats = RandomFourierFeatures(gamma=0.05, n_components=m, random_state=seed)
    return SketchedKernelRidge(standardize=False, features=feats).fit(X, y)


@pytest.mark.parametrize("n, m", [(3000, 64), (20000, 1024)])
def test_ridge_at_gcv_alphas_multiplies_float32_rows_in_float32(n, m):
    # alpha="auto": GCV's candidates are >= 1e-3 of the mean eigenvalue, where the float32
    # Gram moves the predictions by a small fraction of the spread over random features
    X, y = _correlated(n)
    fits = [_gcv_fit(X, y, m, seed) for seed in (1, 2)]
    model = fits[0]
    Z = model.features_.transform(X)
    Z64 = Z.astype(np.float64)
    absZ = np.abs(Z64)
    exact = Z64.T @ Z64
    dA = model.gram_ - exact
    # the products ran in float32 (beyond float64 rounding), one per slice of SLICE_ROWS
    assert np.any(np.abs(dA) > 1e-12 * (absZ.T @ absZ))
    E = _gamma(SLICE_ROWS) * (absZ.T @ absZ)
    assert np.all(np.abs(dA) <= E)
    # sums and Zᵀy in float64: the float64 path's to float64 rounding
    state64 = covariance_state(Z64, y[:, None])
    g = n * 2.0**-53 / (1 - n * 2.0**-53)
    assert np.all(np.abs(model.zty_ - state64["zty"]) <= g * (absZ.T @ np.abs(y[:, None])))
    np.testing.assert_allclose(model.zsum_, state64["sum"], rtol=0, atol=g * absZ.sum(0).max())
    # the same GCV candidate as over the float64 products: the grid scales with the mean
    # eigenvalue of the centred A, whose trace moves by at most Σ E_ii = γ·tr(A)
    alphas, gcv = gcv_path(state64, True)
    trace_c = np.trace(centered_normal_equations(state64, True)[0])
    rel = _gamma(SLICE_ROWS) * np.trace(exact) / trace_c
    np.testing.assert_allclose(model.alpha_, alphas[int(np.argmin(gcv))], rtol=rel)
    assert model.alpha_ >= 1e-3 * trace_c / m * (1 - rel)
    # within the perturbation bound of the float64 solution ...
    w, c, lam = _ridge_solution(state64, model.alpha_)
    assert np.linalg.norm(model.coef_ - w) <= \
        np.linalg.norm(E, 2) * np.linalg.norm(model.coef_) / lam[0]
    # ... and, in predictions, within 5 % of the spread over two draws of the features
    ref = Z64 @ w + c
    Z2 = fits[1].features_.transform(X).astype(np.float64)
    w2, c2, _ = _ridge_solution(covariance_state(Z2, y[:, None]), fits[1].alpha_)
    spread = np.linalg.norm(Z2 @ w2 + c2 - ref)
    assert 0 < spread < 0.05 * np.linalg.norm(ref)
    assert np.linalg.norm(model.predict(X) - ref) <= 0.05 * spread


def test_device_blocks_at_gcv_alphas_multiply_float32_features_in_float32():
    # a block of another namespace (array-api-strict on a non-CPU device standing in for a
    # GPU block) takes the host path's precision: one float32 ZᵀZ per block, summed in
    # float64; Zᵀy and the sums from the float64 features
    pytest.importorskip("array_api_strict")
    import array_api_strict as xps

    from distsketch.testing import from_strict_device, to_strict_device

    X, y = _correlated(3000, seed=3)
    n, d = X.shape
    feats = RandomFourierFeatures(gamma=0.05, n_components=64, random_state=1).fit(X)
    ops = tuple(to_strict_device(o) for o in feats._operands())
    XY = to_strict_device(np.hstack([X, y[:, None].astype(np.float32)]))
    y32 = y.astype(np.float32).astype(np.float64)[:, None]
    Zs = feats._map_block(XY[:, :d], 0, *ops)
    assert Zs.dtype == xps.float32
    Z64 = from_strict_device(Zs).astype(np.float64)
    absZ = np.abs(Z64)
    state = RidgeSummary([feats._map_block], [len(ops)], d, 1, "<f4",
                         products="float32").chunk(XY, 0, *ops)["maps"][0]
    # the float32 product itself, to the bit, and not the float64 one
    ztz = from_strict_device(state["ztz"])
    np.testing.assert_array_equal(ztz, from_strict_device(xps.astype(Zs.T @ Zs, xps.float64)))
    assert np.all(np.abs(ztz - Z64.T @ Z64) <= _gamma(n) * (absZ.T @ absZ))
    assert np.any(ztz != Z64.T @ Z64)
    g = n * 2.0**-53 / (1 - n * 2.0**-53)
    assert np.all(np.abs(from_strict_device(state["zty"]) - Z64.T @ y32)
                  <= g * (absZ.T @ np.abs(y32)))
    # a given alpha keeps float64 products on the device too
    state64 = RidgeSummary([feats._map_block], [len(ops)], d, 1, "<f4").chunk(
        XY, 0, *ops)["maps"][0]
    assert np.all(np.abs(from_strict_device(state64["ztz"]) - Z64.T @ Z64)
                  <= g * (absZ.T @ absZ))
    # the fit: GCV's alpha and predictions within the float32 Gram's perturbation bound
    # of the float64 solution, as on the host
    model = SketchedKernelRidge(standardize=False, features=RandomFourierFeatures(
        gamma=0.05, n_components=64, random_state=1)).fit(to_strict_device(X),
                                                           to_strict_device(y))
    ref_state = covariance_state(Z64, y[:, None])
    E = _gamma(n) * (absZ.T @ absZ)
    alphas, gcv = gcv_path(ref_state, True)
    trace_c = np.trace(centered_normal_equations(ref_state, True)[0])
    np.testing.assert_allclose(float(model.alpha_), alphas[int(np.argmin(gcv))],
                               rtol=_gamma(n) * np.trace(Z64.T @ Z64) / trace_c)
    w, _, lam = _ridge_solution(ref_state, float(model.alpha_))
    coef = np.asarray(model.coef_).ravel()  # the solve runs on the host
    assert np.linalg.norm(coef - w) <= np.linalg.norm(E, 2) * np.linalg.norm(coef) / lam[0]


def test_given_alpha_and_leave_one_out_alpha_multiply_in_float64():
    # a given alpha and the exact leave-one-out choice (down to 1e-8 of the mean
    # eigenvalue) may be far below GCV's floor: float64 products
    assert float32_products(np.float32, True) == "float32"
    assert float32_products(np.float64, True) == "float64"
    assert float32_products(np.float32, False) == "float64"
    X, y = _correlated(300, seed=6)
    model = SketchedKernelRidge().fit(X, y)  # the default map: alpha by leave-one-out
    assert "loo_alphas" in model.cv_results_ and "gcv" not in model.cv_results_
    # the features the pass computed: the default map folds the scaling into its operator
    Z64 = rff_map(X, *model.features_.scaled_operands(model.x_mean_, model.x_scale_))
    assert Z64.dtype == np.float32
    Z64 = Z64.astype(np.float64)
    absZ = np.abs(Z64)
    assert np.all(np.abs(model.gram_ - Z64.T @ Z64) <= 1e-13 * (absZ.T @ absZ))


def test_ridge_summary_of_float32_slices_is_the_float64_product():
    # float32 rows are summarised SLICE_ROWS at a time in float64: the state is the
    # float64 product of the float32 features, to float64 rounding of the whole block
    rng = np.random.default_rng(5)
    n, d = 2 * SLICE_ROWS + 123, 6
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = rng.normal(size=n).astype(np.float32)
    feats = RandomFourierFeatures(n_components=48, random_state=0).fit(X)
    ops = tuple(feats._operands())
    summary = RidgeSummary([feats._map_block], [len(ops)], d, 1, "<f4")
    XY = np.hstack([X, y[:, None]])
    assert summary.slices(XY)
    state = summary.chunk(XY, 0, *ops)["maps"][0]
    Z64 = feats.transform(X).astype(np.float64)
    ref = covariance_state(Z64, y[:, None].astype(np.float64))
    g = n * 2.0**-53 / (1 - n * 2.0**-53)
    absZ = np.abs(Z64)
    assert state["n"] == n
    assert np.all(np.abs(state["ztz"] - ref["ztz"]) <= g * (absZ.T @ absZ))
    assert np.all(np.abs(state["zty"] - ref["zty"]) <= g * (absZ.T @ np.abs(y[:, None])))
    np.testing.assert_allclose(state["sum"], ref["sum"], rtol=0, atol=g * absZ.sum(axis=0).max())
    np.testing.assert_allclose(state["yty"], ref["yty"], rtol=1e-12)
    assert not RidgeSummary([feats._map_block], [len(ops)], d, 1, "<f8").slices(XY)
    # the memory model counts the float32 Gram buffer of float32 products (m² float32)
    f32 = RidgeSummary([feats._map_block], [len(ops)], d, 1, "<f4", products="float32")
    m = feats.n_output_features_
    assert f32.memory([feats], XY).fixed - summary.memory([feats], XY).fixed \
        == 4.0 * m * m
    state32 = f32.chunk(XY, 0, *ops)["maps"][0]
    assert np.all(np.abs(state32["ztz"] - ref["ztz"]) <= _gamma(SLICE_ROWS) * (absZ.T @ absZ))
    assert np.any(state32["ztz"] != state["ztz"])


def test_rnca_float32_products_within_weyl_and_davis_kahan():
    X, _ = _correlated(4000, seed=3)
    X = X + np.random.default_rng(4).normal(size=X.shape).astype(np.float32)
    k = 4
    model = StreamingKernelPCA(n_components=k, n_random_features=128, method="rnca",
                               random_state=0).fit(X)
    Z64 = _features(model, X).astype(np.float64)
    C = Z64.T @ Z64
    absZ = np.abs(Z64)
    # float32 products of at most 2048 rows at a time (the RNCA slice), float64 sums
    E = _gamma(2048) * (absZ.T @ absZ)
    dC = model.covariance_ - C
    assert np.all(np.abs(dC) <= E)
    assert np.abs(dC).max() > 0  # the products did run in float32
    lam, V = np.linalg.eigh(C)
    lam, V = lam[::-1], V[:, ::-1]
    eps = np.linalg.norm(E, 2)
    n = X.shape[0]
    assert np.all(np.abs(model.explained_variance_ * n - lam[:k]) <= eps)
    # each leading component within the Davis–Kahan angle of the float64 one
    gaps = np.minimum(lam[:k] - lam[1:k + 1], np.r_[np.inf, lam[:k - 1] - lam[1:k]])
    sines = np.sqrt(np.maximum(0.0, 1.0 - (model.components_ @ V[:, :k]).diagonal() ** 2))
    assert np.all(sines <= eps / gaps)


def _features(model: StreamingKernelPCA, X: np.ndarray) -> np.ndarray:
    Z = model.features_.transform(X)
    assert Z.dtype == np.float32
    return Z


def test_fd_of_float32_rows_keeps_the_guarantee_to_float32_rounding():
    from distsketch.ops.fd import fd_sketch
    from distsketch.ops.rff import rff_map, rff_operator

    X = np.random.default_rng(0).normal(size=(4000, 8)).astype(np.float32)
    W, b = rff_operator(0, "rbf", 0.2, 8, 256)
    A = rff_map(X, W, b, 0)
    assert A.dtype == np.float32
    A64 = A.astype(np.float64)
    C = A64.T @ A64
    s2 = np.linalg.svd(A64, compute_uv=False) ** 2
    scale = s2.sum()
    for ell in (16, 64):
        B, delta = fd_sketch(A, ell)
        B64, _ = fd_sketch(A64, ell)
        assert B.dtype == np.float64
        assert not np.array_equal(B.T @ B, B64.T @ B64)  # shrunk in float32
        # each of the n/ℓ shrinks rounds at about u·‖Mₜ‖²: the slack of the guarantee
        tol = 16 * U32 * np.sqrt(A.shape[0] / ell) * scale
        E = C - B.T @ B
        err = np.linalg.norm(E, 2)
        assert err <= min(s2[k:].sum() / (ell - k) for k in range(ell)) + tol
        assert err <= delta + tol
        assert np.linalg.eigvalsh(E).min() >= -tol
        # and the sketch is the float64 path's to that rounding
        assert np.linalg.norm(B.T @ B - B64.T @ B64, 2) <= tol
