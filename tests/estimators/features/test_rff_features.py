"""RandomFourierFeatures: chunking invariance (bitwise), unbiasedness and
concentration against the exact kernel, parity with scikit-learn's RBFSampler,
the estimator contract."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import RBFSampler

import distsketch
from distsketch import RandomFourierFeatures
from distsketch.errors import ConfigError, InputError, NotFittedError
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.rff import rff_map


@pytest.fixture(scope="module")
def X8k():
    return np.random.default_rng(0).normal(size=(8000, 5)).astype(np.float32)


def test_features_of_a_row_identical_for_every_chunking(X8k):
    rff = RandomFourierFeatures(gamma=0.2, n_components=64, random_state=3).fit(X8k)
    one = rff.transform(X8k)                                  # NumPy path, one chunk here
    ref = rff.transform(da.from_array(X8k, chunks=(8000, 5)))
    with dask.config.set(scheduler="sync"):
        ref = ref.compute()
    np.testing.assert_array_equal(one, ref)
    for rows in (1000, 7919):
        got = rff.transform(da.from_array(X8k, chunks=(rows, 5))).compute(scheduler="sync")
        np.testing.assert_array_equal(got, ref)
    # chunks of a single row: the first 600 rows (a task per row)
    head = rff.transform(da.from_array(X8k[:600], chunks=(1, 5))).compute(scheduler="sync")
    np.testing.assert_array_equal(head, ref[:600])


def test_operator_depends_only_on_seed(X8k):
    a = RandomFourierFeatures(gamma=0.2, n_components=32, random_state=5).fit(X8k)
    b = RandomFourierFeatures(gamma=0.2, n_components=32, random_state=5).fit(
        da.from_array(X8k, chunks=(77, 5)))
    np.testing.assert_array_equal(a.random_weights_, b.random_weights_)
    np.testing.assert_array_equal(a.random_offset_, b.random_offset_)
    c = RandomFourierFeatures(gamma=0.2, n_components=32, random_state=6).fit(X8k)
    assert not np.array_equal(a.random_weights_, c.random_weights_)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cauchy"])
def test_unbiased_over_seeds(kernel):
    # Per feature, m·z_i(x)z_i(y) = cos(wᵀ(x−y)) + cos(wᵀ(x+y) + 2b) has variance ≤ 1.5,
    # so the mean over S seeds of m-feature estimates has sd ≤ sqrt(1.5/(mS)); allow 5 sd
    # (a Bonferroni-safe margin for the 15 pairs tested).
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 3)) * 0.7
    gamma, m, S = 0.5, 64, 300
    G = pairwise_kernel(X, X, kernel, gamma=gamma)
    est = np.zeros_like(G)
    for seed in range(S):
        # the fitted operator applied by the per-block kernel (what transform runs per block)
        rff = RandomFourierFeatures(kernel=kernel, gamma=gamma, n_components=m,
                                    random_state=seed).fit(X)
        Z = rff_map(X, rff.random_weights_, rff.random_offset_)
        est += Z @ Z.T
    est /= S
    iu = np.triu_indices(6, 1)
    tol = 5.0 * np.sqrt(1.5 / (m * S))
    assert np.max(np.abs(est[iu] - G[iu])) <= tol
    # and not trivially: a single seed is much farther off than the average
    assert np.max(np.abs(Z @ Z.T - G)[iu]) > np.max(np.abs(est[iu] - G[iu]))


@pytest.mark.parametrize(("kernel", "orthogonal"), [("rbf", False), ("rbf", True),
                                                     ("laplacian", False), ("cauchy", False)])
def test_within_hoeffding_tolerance(kernel, orthogonal):
    # m·z_i(x)z_i(y) ∈ [-2, 2]: Hoeffding gives P(|k̂ − k| ≥ t) ≤ 2 exp(−m t²/8); with the
    # union over P pairs at total failure probability 1e-6, t = sqrt(8 ln(2P/1e-6)/m).
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4)) * 0.5
    m = 4096
    Z = RandomFourierFeatures(kernel=kernel, gamma=0.3, n_components=m, orthogonal=orthogonal,
                              random_state=11).fit_transform(X)
    G = pairwise_kernel(X, X, kernel, gamma=0.3)
    P = 30 * 31 // 2
    t = np.sqrt(8 * np.log(2 * P / 1e-6) / m)
    assert np.max(np.abs(Z @ Z.T - G)) <= t


def test_comparable_to_sklearn_rbf_sampler():
    # Same distribution of (w, b) as RBFSampler: the mean Frobenius error over seeds must
    # agree within a factor 1.5 (each mean averages 5 × 200² entries).
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 8))
    gamma, m = 0.1, 256
    G = pairwise_kernel(X, X, "rbf", gamma=gamma)
    ours, theirs = [], []
    for seed in range(5):
        Z = RandomFourierFeatures(gamma=gamma, n_components=m, random_state=seed).fit_transform(X)
        ours.append(np.linalg.norm(Z @ Z.T - G))
        Zs = RBFSampler(gamma=gamma, n_components=m, random_state=seed).fit_transform(X)
        theirs.append(np.linalg.norm(Zs @ Zs.T - G))
    ratio = np.mean(ours) / np.mean(theirs)
    assert 1 / 1.5 <= ratio <= 1.5


def test_same_kind_out_and_dtype(X8k):
    rff = RandomFourierFeatures(gamma=0.2, n_components=16, random_state=0).fit(X8k)
    out = rff.transform(X8k[:100])
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (100, 16)
    lazy = rff.transform(da.from_array(X8k[:100], chunks=(30, 5)))
    assert isinstance(lazy, da.Array) and lazy.dtype == np.float32
    out64 = rff.transform(X8k[:100].astype(np.float64))
    assert out64.dtype == np.float64
    np.testing.assert_allclose(out64, out, atol=1e-5)


def test_contract_errors(X8k):
    with pytest.raises(ConfigError, match="n_components"):
        RandomFourierFeatures(n_components=0).fit(X8k)
    with pytest.raises(ConfigError, match="gamma"):
        RandomFourierFeatures(gamma=-1.0).fit(X8k)
    with pytest.raises(ConfigError, match="kernel"):
        RandomFourierFeatures(kernel="polynomial").fit(X8k)
    with pytest.raises(ConfigError, match="orthogonal"):
        RandomFourierFeatures(kernel="laplacian", orthogonal=True).fit(X8k)
    with pytest.raises(NotFittedError):
        RandomFourierFeatures().transform(X8k)
    rff = RandomFourierFeatures(n_components=8, random_state=0).fit(X8k)
    with pytest.raises(InputError, match="features"):
        rff.transform(np.ones((3, 4)))


def test_save_load_round_trip(tmp_path, X8k):
    rff = RandomFourierFeatures(kernel="cauchy", gamma=0.3, n_components=24,
                                random_state=9).fit(X8k)
    rff.save(tmp_path / "rff.zarr")
    back = distsketch.load(tmp_path / "rff.zarr")
    assert isinstance(back, RandomFourierFeatures)
    np.testing.assert_array_equal(back.transform(X8k[:500]), rff.transform(X8k[:500]))


# ------------------------------------------------------------------ paired form

def _rbf_variance(G: np.ndarray, m: int, form: str) -> np.ndarray:
    # Var of one entry of ZZᵀ for the Gaussian kernel (Sutherland & Schneider 2015):
    # V = Var[cos(wᵀΔ)] = (1 − k²)²/2; offset (V + 1/2)/m, paired 2V/m.
    V = (1.0 - G ** 2) ** 2 / 2.0
    return (V + 0.5) / m if form == "offset" else 2.0 * V / m


def test_paired_map_is_cos_and_sin_of_the_offset_frequencies(X8k):
    X = X8k[:300].astype(np.float64)
    off = RandomFourierFeatures(gamma=0.2, n_components=64, random_state=4).fit(X)
    pair = RandomFourierFeatures(gamma=0.2, n_components=64, form="paired",
                                 random_state=4).fit(X)
    # the same draw from (seed, purpose): the paired form's 32 frequencies are the first 32
    np.testing.assert_array_equal(pair.random_weights_, off.random_weights_[:, :32])
    assert pair.random_offset_.shape == (0,)
    P = X @ pair.random_weights_
    ref = np.hstack([np.cos(P), np.sin(P)]) / np.sqrt(32)
    Z = pair.transform(X)
    assert Z.shape == (300, 64) and pair.n_output_features_ == 64
    np.testing.assert_allclose(Z, ref, rtol=0, atol=1e-12)
    # z(x)·z(x) = 1 exactly in the paired form (cos² + sin²), not in the offset form
    np.testing.assert_allclose((Z * Z).sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_paired_rows_identical_for_every_chunking_and_seed_determined(X8k):
    rff = RandomFourierFeatures(gamma=0.2, n_components=64, form="paired",
                                random_state=3).fit(X8k)
    assert rff.transform(X8k).dtype == np.float32
    ref = rff.transform(da.from_array(X8k, chunks=(8000, 5))).compute(scheduler="sync")
    np.testing.assert_array_equal(rff.transform(X8k), ref)
    for rows in (1000, 777):
        got = rff.transform(da.from_array(X8k, chunks=(rows, 5))).compute(scheduler="sync")
        np.testing.assert_array_equal(got, ref)
    head = rff.transform(da.from_array(X8k[:300], chunks=(1, 5))).compute(scheduler="sync")
    np.testing.assert_array_equal(head, ref[:300])
    again = RandomFourierFeatures(gamma=0.2, n_components=64, form="paired",
                                  random_state=3).fit(da.from_array(X8k, chunks=(99, 5)))
    np.testing.assert_array_equal(again.random_weights_, rff.random_weights_)
    np.testing.assert_array_equal(again.transform(X8k[:500]), ref[:500])


def test_paired_sparse_input_equals_dense(X8k):
    X = X8k[:200].astype(np.float64)
    X[X < 0.5] = 0.0
    rff = RandomFourierFeatures(gamma=0.3, n_components=32, form="paired", random_state=1).fit(X)
    np.testing.assert_allclose(rff.transform(sp.csr_matrix(X)), rff.transform(X),
                               rtol=0, atol=1e-12)


def test_paired_unbiased_over_seeds():
    # per frequency cos(wᵀΔ) ∈ [−1, 1] has variance V <= 1/2: the mean over S seeds of
    # an m-wide paired estimate has sd <= sqrt(2·(1/2)/(mS)); allow 5 sd over 15 pairs
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 3)) * 0.7
    gamma, m, S = 0.5, 64, 300
    G = pairwise_kernel(X, X, "rbf", gamma=gamma)
    est = np.zeros_like(G)
    for seed in range(S):
        Z = RandomFourierFeatures(gamma=gamma, n_components=m, form="paired",
                                  random_state=seed).fit_transform(X)
        est += Z @ Z.T
    est /= S
    iu = np.triu_indices(6, 1)
    assert np.max(np.abs(est[iu] - G[iu])) <= 5.0 * np.sqrt(1.0 / (m * S))
    assert np.max(np.abs(Z @ Z.T - G)[iu]) > np.max(np.abs(est[iu] - G[iu]))


def test_paired_error_lower_than_offset_at_equal_width():
    # E‖ZZᵀ − G‖_F² = Σ_ij Var_ij, known in closed form for each form.  One seed's
    # squared error has a relative sd of about 0.75 here, so the mean over 40 seeds has
    # about 0.12: it must match the theory within [0.6, 1.5] (beyond 3.5 sd), and the
    # paired error must be below 0.75 of the offset one (theory: 0.43).
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 4))
    gamma, m, S = 0.05, 128, 40
    G = pairwise_kernel(X, X, "rbf", gamma=gamma)
    measured = {}
    for form in ("offset", "paired"):
        errs = [np.linalg.norm(RandomFourierFeatures(gamma=gamma, n_components=m, form=form,
                                                     random_state=s).fit(X).kernel_approx(X) - G) ** 2
                for s in range(S)]
        measured[form] = np.mean(errs)
        theory = _rbf_variance(G, m, form).sum()
        assert 0.6 <= measured[form] / theory <= 1.5, (form, measured[form], theory)
    ratio = measured["paired"] / measured["offset"]
    theory_ratio = _rbf_variance(G, m, "paired").sum() / _rbf_variance(G, m, "offset").sum()
    assert theory_ratio < 0.6
    assert ratio < 0.75


def test_paired_needs_even_width_and_a_known_form(X8k):
    with pytest.raises(ConfigError, match="even"):
        RandomFourierFeatures(n_components=63, form="paired").fit(X8k)
    with pytest.raises(ConfigError, match="form"):
        RandomFourierFeatures(form="sincos").fit(X8k)


def test_paired_save_load_and_lazy_zarr_transform(tmp_path, X8k):
    import zarr

    from distsketch.testing import raise_on_compute

    rff = RandomFourierFeatures(gamma=0.3, n_components=24, form="paired",
                                random_state=9).fit(X8k)
    rff.save(tmp_path / "rff.zarr")
    back = distsketch.load(tmp_path / "rff.zarr")
    assert back.form == "paired"
    np.testing.assert_array_equal(back.transform(X8k[:500]), rff.transform(X8k[:500]))
    z = zarr.create_array(store=str(tmp_path / "x.zarr"), shape=(1000, 5), chunks=(300, 5),
                          dtype="float32")
    z[:] = X8k[:1000]
    with raise_on_compute():
        lazy = back.transform(da.from_zarr(str(tmp_path / "x.zarr")))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), rff.transform(X8k[:1000]))


def test_paired_form_inside_streaming_kpca_and_ridge(X8k):
    from distsketch import SketchedKernelRidge, StreamingKernelPCA

    X = X8k[:3000]
    kp = StreamingKernelPCA(n_components=4, n_random_features=64, method="rnca",
                            rff_form="paired", random_state=2).fit(X)
    assert kp.features_.form == "paired"
    Z = kp.features_.transform(X).astype(np.float64)
    # float32 features: each block's ZᵀZ (at most b = 2048 rows) is a float32 GEMM, within
    # γ_b|Z|ᵀ|Z| (γ_b = b·u/(1 − b·u), u = 2⁻²⁴) of the exact product; the sums are float64
    assert X.dtype == np.float32
    gamma = 2048 * 2.0**-24 / (1 - 2048 * 2.0**-24)
    assert np.all(np.abs(kp.covariance_ - Z.T @ Z) <= gamma * (np.abs(Z).T @ np.abs(Z)))
    emb = kp.transform(da.from_array(X, chunks=(701, 5))).compute(scheduler="sync")
    np.testing.assert_array_equal(emb, kp.transform(X))
    np.testing.assert_allclose(emb, Z @ kp.components_.T, rtol=0, atol=1e-5)
    with pytest.raises(ConfigError, match="even"):
        StreamingKernelPCA(n_random_features=63, rff_form="paired").fit(X)
    # ridge on paired features is ridge regression on Z: (ZᵀZ + λI) w = Zᵀy, no intercept
    Xd = X[:500].astype(np.float64)
    y = np.sin(Xd[:, 0])
    feats = RandomFourierFeatures(gamma=0.5, n_components=40, form="paired", random_state=0)
    model = SketchedKernelRidge(features=feats, alpha=0.1, fit_intercept=False,
                                standardize=False).fit(Xd, y)
    Zr = feats.fit(Xd).transform(Xd)
    w = np.linalg.solve(Zr.T @ Zr + 0.1 * np.eye(40), Zr.T @ y)
    np.testing.assert_allclose(model.predict(Xd), Zr @ w, rtol=0, atol=1e-8)


@pytest.mark.parametrize(("kernel", "orthogonal"), [("rbf", False), ("rbf", True),
                                                     ("laplacian", False), ("cauchy", False)])
def test_paired_within_hoeffding_tolerance(kernel, orthogonal):
    # paired: k̂ is the mean of m/2 terms cos(wᵀΔ) ∈ [−1, 1]; Hoeffding gives
    # P(|k̂ − k| ≥ t) ≤ 2 exp(−(m/2) t²/2), so t = sqrt(4 ln(2P/1e-6)/m) over P pairs
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4)) * 0.5
    m = 4096
    Z = RandomFourierFeatures(kernel=kernel, gamma=0.3, n_components=m, orthogonal=orthogonal,
                              form="paired", random_state=11).fit_transform(X)
    G = pairwise_kernel(X, X, kernel, gamma=0.3)
    P = 30 * 31 // 2
    t = np.sqrt(4 * np.log(2 * P / 1e-6) / m)
    assert np.max(np.abs(Z @ Z.T - G)) <= t
