"""NystromFeatures and NystromKernelPCA against exact kernels, scikit-learn and NumPy."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import KernelPCA
from sklearn.kernel_approximation import Nystroem

from distsketch import InputError, NotFittedError, NystromFeatures, NystromKernelPCA, load
from distsketch.errors import ConfigError
from distsketch.io import write_array
from distsketch.metrics import relative_kernel_error
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(0)
X = RNG.normal(size=(160, 5))


@pytest.mark.parametrize("kernel,params", [
    ("rbf", {"gamma": 0.3}),
    ("laplacian", {"gamma": 0.2}),
    ("polynomial", {"gamma": 0.5, "degree": 2, "coef0": 1.0}),
    ("arccos1", {}),
])
def test_all_rows_as_landmarks_reproduce_kernel(kernel, params):
    f = NystromFeatures(kernel=kernel, n_landmarks=X.shape[0], random_state=0,
                        **{k: v for k, v in params.items()}).fit(X)
    G = pairwise_kernel(X, X, kernel, **({"gamma": f.kernel_params_.get("gamma")} | params
                                         if "gamma" in f.kernel_params_ else params))
    assert f.landmarks_.shape[0] == X.shape[0]
    np.testing.assert_allclose(f.kernel_approx(X), G, atol=1e-6 * np.abs(G).max())


def test_callable_kernel_and_landmark_array():
    def k(A, B):
        return (A @ B.T + 1.0) ** 2

    f = NystromFeatures(kernel=k, landmarks=X, random_state=0).fit(X)
    np.testing.assert_allclose(f.kernel_approx(X), k(X, X), atol=1e-6 * np.abs(k(X, X)).max())


def test_precomputed_kernel_path():
    L = X[:30]
    fx = NystromFeatures(gamma=0.3, landmarks=L).fit(X)
    fp = NystromFeatures(kernel="precomputed").fit(pairwise_kernel(L, L, "rbf", gamma=0.3))
    Kxl = pairwise_kernel(X, L, "rbf", gamma=0.3)
    np.testing.assert_allclose(fp.transform(Kxl), fx.transform(X), atol=1e-10)
    with pytest.raises(InputError, match="square"):
        NystromFeatures(kernel="precomputed").fit(Kxl)


def test_matches_scikit_learn_nystroem_with_same_landmarks():
    f = NystromFeatures(gamma=0.3, n_landmarks=40, random_state=1).fit(X)
    sk = Nystroem(gamma=0.3, n_components=40, random_state=0).fit(f.landmarks_)
    # sklearn with all rows of its input as landmarks -> the same approximation
    np.testing.assert_allclose(f.kernel_approx(X), sk.transform(X) @ sk.transform(X).T, atol=1e-8)


def test_landmarks_from_zarr_path(tmp_path):
    path = write_array(X[:25].astype(np.float64), tmp_path / "L.zarr")
    a = NystromFeatures(gamma=0.3, landmarks=str(path)).fit(X)
    b = NystromFeatures(gamma=0.3, landmarks=X[:25]).fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    with pytest.raises(InputError, match="columns"):
        NystromFeatures(landmarks=np.ones((3, 2))).fit(X)


def test_dask_in_dask_out_and_bitwise_chunking():
    Xf = X.astype(np.float32)
    f = NystromFeatures(gamma=0.3, n_landmarks=30, random_state=0).fit(Xf)
    ref = f.transform(Xf)
    assert isinstance(ref, np.ndarray) and ref.dtype == np.float32
    for chunks in (7, 61, 160):
        out = f.transform(da.from_array(Xf, chunks=(chunks, 5)))
        assert isinstance(out, da.Array)
        np.testing.assert_array_equal(out.compute(), ref)


def test_uniform_landmarks_independent_of_chunking():
    a = NystromFeatures(gamma=0.3, n_landmarks=30, random_state=4).fit(X)
    b = NystromFeatures(gamma=0.3, n_landmarks=30, random_state=4).fit(
        da.from_array(X, chunks=(23, 5)))
    np.testing.assert_array_equal(a.landmark_indices_, b.landmark_indices_)
    np.testing.assert_array_equal(a.normalization_, b.normalization_)


def test_variants_error_against_exact_kernel():
    # clustered data, 60 landmarks: all variants approximate well, and k-means
    # landmarks beat uniform ones (Zhang & Kwok; the MEKA paper's Table 2 pattern)
    rng = np.random.default_rng(3)
    C = rng.normal(scale=4.0, size=(6, 5))
    Xc = np.vstack([c + rng.normal(size=(80, 5)) for c in C])
    errs = {}
    for name, kw in {"uniform": {}, "kmeans": {"landmarks": "kmeans"},
                     "ensemble": {"variant": "ensemble", "n_ensemble": 3},
                     "randomized": {"variant": "randomized", "rank": 40}}.items():
        f = NystromFeatures(gamma=0.1, n_landmarks=60, random_state=0, **kw).fit(Xc)
        errs[name] = relative_kernel_error(Xc, f, gamma=0.1, n_sample=None)
    assert errs["kmeans"] < errs["uniform"] < 0.3
    assert errs["randomized"] < 0.4 and errs["ensemble"] < 0.6


def test_parameter_and_fit_errors():
    with pytest.raises(ConfigError, match="variant"):
        NystromFeatures(variant="bogus").fit(X)
    with pytest.raises(ConfigError, match="n_ensemble"):
        NystromFeatures(n_landmarks=3, variant="ensemble", n_ensemble=4).fit(X)
    with pytest.raises(NotFittedError):
        NystromFeatures().transform(X)
    f = NystromFeatures(n_landmarks=10, random_state=0).fit(X)
    with pytest.raises(InputError, match="features"):
        f.transform(X[:, :3])


def test_save_load_round_trip(tmp_path):
    f = NystromFeatures(gamma=0.3, n_landmarks=20, random_state=0).fit(X)
    f.save(tmp_path / "m.zarr")
    g = load(tmp_path / "m.zarr")
    np.testing.assert_array_equal(g.transform(X), f.transform(X))


def test_kpca_with_all_landmarks_equals_exact_kernel_pca():
    Xs = X[:80]
    k = NystromKernelPCA(n_components=4, gamma=0.3, n_landmarks=80, center=True,
                         random_state=0).fit(Xs)
    sk = KernelPCA(n_components=4, kernel="rbf", gamma=0.3).fit(Xs)
    np.testing.assert_allclose(k.eigenvalues_, sk.eigenvalues_, rtol=1e-6)
    # same subspace: projections agree up to the sign of each component
    P, Q = k.transform(Xs), sk.transform(Xs)
    np.testing.assert_allclose(np.abs(P), np.abs(Q), atol=1e-6 * np.abs(Q).max())


def test_kpca_uncentred_eigenvalues_and_kernel_approx():
    k = NystromKernelPCA(n_components=5, gamma=0.3, n_landmarks=50, random_state=0).fit(X)
    f = NystromFeatures(gamma=0.3, landmarks=k.landmarks_).fit(X)
    Z = f.transform(X)
    Gt = Z @ Z.T
    ev = np.linalg.eigvalsh(Gt)[::-1][:5]
    np.testing.assert_allclose(k.eigenvalues_, ev, rtol=1e-8)
    # kernel_approx is the best rank-5 approximation of the Nyström matrix
    vals, vecs = np.linalg.eigh(Gt)
    best = (vecs[:, -5:] * vals[-5:]) @ vecs[:, -5:].T
    np.testing.assert_allclose(k.kernel_approx(X), best, atol=1e-8 * np.abs(Gt).max())
    out = k.transform(da.from_array(X, chunks=(33, 5)))
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), k.transform(X), rtol=1e-12, atol=1e-12)


def test_partial_fit_equals_fit_on_all_rows():
    from distsketch import NystromFeatures
    from distsketch.errors import ConfigError

    rng_local = np.random.default_rng(11)
    Xa = rng_local.normal(size=(700, 5))
    Xb = rng_local.normal(size=(500, 5))
    full = NystromFeatures(n_landmarks=60, gamma=0.2, random_state=4).fit(np.vstack([Xa, Xb]))
    inc = NystromFeatures(n_landmarks=60, gamma=0.2, random_state=4)
    inc.partial_fit(Xa[:300]).partial_fit(Xa[300:]).partial_fit(Xb)
    assert inc.n_samples_seen_ == 1200
    np.testing.assert_array_equal(inc.landmark_indices_, full.landmark_indices_)
    np.testing.assert_array_equal(inc.landmarks_, full.landmarks_)
    np.testing.assert_array_equal(inc.transform(Xb[:20]), full.transform(Xb[:20]))
    fixed = NystromFeatures(n_landmarks=5, landmarks="kmeans", random_state=0).fit(Xa)
    with pytest.raises(ConfigError, match="landmarks='uniform'"):
        fixed.partial_fit(Xb)


@pytest.mark.parametrize("center", [False, True])
def test_kpca_partial_fit_folds_rows_with_fixed_landmarks(center, tmp_path):
    rng_local = np.random.default_rng(5)
    Xa, Xb, Xc = (rng_local.normal(size=(n, 4)) for n in (300, 200, 150))
    inc = NystromKernelPCA(n_components=4, gamma=0.4, n_landmarks=40, center=center, random_state=2)
    inc.partial_fit(Xa)
    L, N = inc.landmarks_.copy(), inc.normalization_.copy()
    inc.partial_fit(da.from_array(Xb, chunks=(64, 4)))
    # landmarks stay those of the first batch; the rest is the exact one-pass result
    np.testing.assert_array_equal(inc.landmarks_, L)
    assert inc.n_samples_seen_ == 500
    Z = pairwise_kernel(np.vstack([Xa, Xb]), L, "rbf", gamma=0.4) @ N
    mu = Z.mean(axis=0) if center else np.zeros(Z.shape[1])
    vals, vecs = np.linalg.eigh((Z - mu).T @ (Z - mu))
    np.testing.assert_allclose(inc.eigenvalues_, vals[::-1][:4], rtol=1e-9)
    np.testing.assert_allclose(np.abs(inc.components_), np.abs(vecs[:, ::-1][:, :4].T), atol=1e-8)
    np.testing.assert_allclose(np.abs(inc.transform(Xc)), np.abs((pairwise_kernel(Xc, L, "rbf", gamma=0.4)
                                                                 @ N - mu) @ vecs[:, ::-1][:, :4]),
                               atol=1e-8)
    # the stored state survives save/load: continuing from disk equals continuing in memory
    inc.save(tmp_path / "kpca.zarr")
    again = load(tmp_path / "kpca.zarr").partial_fit(Xc)
    inc.partial_fit(Xc)
    np.testing.assert_array_equal(again.gram_, inc.gram_)
    np.testing.assert_array_equal(again.transform(Xa), inc.transform(Xa))
    with pytest.raises(InputError, match="features"):
        inc.partial_fit(rng_local.normal(size=(10, 3)))


def test_randomized_variant_oversampling_and_power_iterations(tmp_path):
    # the randomized rank-k Nyström map approaches the standard rank-k map (eigh of W)
    # as power iterations grow, and the defaults are the MEKA paper's p = 10, q = 1
    k = 15
    std = NystromFeatures(gamma=0.3, n_landmarks=60, rank=k, random_state=0).fit(X)
    G_std = std.kernel_approx(X)
    default = NystromFeatures(gamma=0.3, n_landmarks=60, rank=k, variant="randomized",
                              random_state=0).fit(X)
    explicit = NystromFeatures(gamma=0.3, n_landmarks=60, rank=k, variant="randomized",
                               n_oversamples=10, n_power_iter=1, random_state=0).fit(X)
    assert default.get_params()["n_oversamples"] == 10
    assert default.get_params()["n_power_iter"] == 1
    np.testing.assert_array_equal(default.normalization_, explicit.normalization_)
    gaps = {}
    for q, p in ((0, 0), (1, 10), (8, 10)):
        f = NystromFeatures(gamma=0.3, n_landmarks=60, rank=k, variant="randomized",
                            n_oversamples=p, n_power_iter=q, random_state=0).fit(X)
        assert f.n_output_features_ == k
        gaps[q] = np.linalg.norm(f.kernel_approx(X) - G_std) / np.linalg.norm(G_std)
    assert gaps[0] > gaps[1] > gaps[8]
    assert gaps[8] < 1e-6
    explicit.save(tmp_path / "r.zarr")
    back = load(tmp_path / "r.zarr")
    assert (back.n_oversamples, back.n_power_iter) == (10, 1)
    np.testing.assert_array_equal(back.transform(X), explicit.transform(X))
    with pytest.raises(ConfigError, match="n_power_iter"):
        NystromFeatures(variant="randomized", n_power_iter=-1).fit(X)
    with pytest.raises(ConfigError, match="n_oversamples"):
        NystromFeatures(variant="randomized", n_oversamples=-2).fit(X)
