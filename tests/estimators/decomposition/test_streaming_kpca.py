"""StreamingKernelPCA (SKPCA = RFF + Frequent Directions, and RNCA): exactness
against single-block NumPy, chunking and scheduler invariance, the FD guarantee,
partial_fit, error trends on RandomNoisy and digits, persistence and errors."""

from __future__ import annotations

import itertools

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

import distsketch
from distsketch import StreamingKernelPCA
from distsketch.datasets import load_digits_array, random_noisy
from distsketch.errors import ConfigError, InputError, MemoryBudgetError, NotFittedError
from distsketch.io import write_array
from distsketch.metrics import kernel_errors
from distsketch.ops.fd import fd_block_formulation


@pytest.fixture(scope="module")
def noisy():
    return random_noisy(3000, 20, signal_dim=8, chunk_rows=1000, random_state=1).compute()


def _Z(model, X):
    return np.asarray(model.features_.transform(np.asarray(X)), dtype=np.float64)


def _fd_check(Z, model):
    B = model.sketch_
    ell = model.sketch_size
    scale = float(np.sum(Z * Z))
    err = np.linalg.norm(Z.T @ Z - B.T @ B, 2)
    s2 = np.linalg.svd(Z, compute_uv=False) ** 2
    assert err <= min(s2[k:].sum() / (ell - k) for k in range(ell)) + 1e-8 * scale
    assert err <= model.shrinkage_ + 1e-8 * scale
    assert model.sq_frobenius_ == pytest.approx(scale, rel=1e-5)


def test_fd_single_block_equals_numpy_reference(noisy):
    model = StreamingKernelPCA(n_components=5, n_random_features=128, sketch_size=16,
                               random_state=0).fit(noisy)
    Z = model.features_.transform(noisy)            # float32 features, as sketched
    # one block of 3000 rows at m = 128: folded through its covariance in one shrink
    assert fd_block_formulation(3000, 128, 16) == "covariance"
    _, s, Vt = np.linalg.svd(Z.astype(np.float64), full_matrices=False)
    delta = s[15] ** 2
    ref = Vt[:16].T @ ((s[:16] ** 2 - delta)[:, None] * Vt[:16])
    # float32 products of ≤ 2048 rows summed in float64: within a few u·‖Z‖₂² (u = 2⁻²⁴)
    tol = 64 * 2.0**-24 * s[0] ** 2
    np.testing.assert_allclose(model.sketch_.T @ model.sketch_, ref, rtol=0, atol=tol)
    assert model.shrinkage_ == pytest.approx(delta, rel=0, abs=tol)
    _, sb, Vb = np.linalg.svd(model.sketch_, full_matrices=False)
    np.testing.assert_allclose(np.abs(model.components_), np.abs(Vb[:5]), atol=1e-10)
    np.testing.assert_allclose(model.explained_variance_, sb[:5] ** 2 / 3000, rtol=1e-10)
    np.testing.assert_allclose(model.explained_variance_, (s[:5] ** 2 - delta) / 3000,
                               rtol=0, atol=tol / 3000)


def test_rnca_equals_exact_feature_pca(noisy):
    model = StreamingKernelPCA(n_components=6, n_random_features=64, method="rnca",
                               random_state=0).fit(da.from_array(noisy, chunks=(700, 20)))
    Z = _Z(model, noisy)
    C = Z.T @ Z
    np.testing.assert_allclose(model.covariance_, C, rtol=1e-5, atol=1e-5)
    lam, V = np.linalg.eigh(C)
    np.testing.assert_allclose(model.explained_variance_, lam[::-1][:6] / 3000, rtol=1e-5)
    # same subspace (eigenvalues are distinct here)
    overlap = np.abs(model.components_ @ V[:, ::-1][:, :6])
    np.testing.assert_allclose(np.diag(overlap), 1.0, atol=1e-4)
    emb = model.transform(noisy)
    np.testing.assert_allclose(emb, Z @ model.components_.T, rtol=1e-4, atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(cuts=st.sets(st.integers(1, 2999), max_size=6), split_every=st.integers(2, 4))
def test_any_chunking_exact_features_and_fd_guarantee(noisy, cuts, split_every):
    edges = [0, *sorted(cuts), 3000]
    chunks = tuple(b - a for a, b in itertools.pairwise(edges))
    Xd = da.from_array(noisy, chunks=(chunks, 20))
    fd = StreamingKernelPCA(n_components=4, n_random_features=96, sketch_size=12,
                            split_every=split_every, random_state=2).fit(Xd)
    Z = _Z(fd, noisy)
    _fd_check(Z, fd)
    # embeddings of every row are bitwise those of the single-block NumPy computation
    np.testing.assert_array_equal(fd.transform(Xd).compute(scheduler="sync"),
                                  fd.transform(noisy))
    rn = StreamingKernelPCA(n_components=4, n_random_features=96, method="rnca",
                            split_every=split_every, random_state=2).fit(Xd)
    np.testing.assert_allclose(rn.covariance_, Z.T @ Z, rtol=1e-5, atol=1e-5)


def test_transform_rows_identical_for_chunkings_1000_7919_and_one():
    X = random_noisy(8500, 10, signal_dim=5, chunk_rows=8500, random_state=4)
    model = StreamingKernelPCA(n_components=3, n_random_features=32, sketch_size=8,
                               random_state=0).fit(X)
    ref = model.transform(X).compute(scheduler="sync")
    for rows in (1000, 7919):
        got = model.transform(X.rechunk({0: rows})).compute(scheduler="sync")
        np.testing.assert_array_equal(got, ref)
    head = model.transform(X[:300].rechunk({0: 1})).compute(scheduler="sync")
    np.testing.assert_array_equal(head, ref[:300])


@pytest.mark.parametrize("method", ["fd", "rnca"])
def test_same_chunking_bitwise_identical_across_schedulers(noisy, method):
    Xd = da.from_array(noisy, chunks=(230, 20))
    kw = dict(n_components=4, n_random_features=64, sketch_size=8, method=method, split_every=3,
              random_state=7)
    with dask.config.set(scheduler="sync"):
        a = StreamingKernelPCA(**kw).fit(Xd)
    with dask.config.set(scheduler="threads", num_workers=2):
        b = StreamingKernelPCA(**kw).fit(Xd)
    name = "sketch_" if method == "fd" else "covariance_"
    np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.components_, b.components_)


def test_partial_fit_rnca_equals_fit_on_concatenation(noisy):
    kw = dict(n_components=5, n_random_features=64, method="rnca", random_state=3)
    full = StreamingKernelPCA(**kw).fit(noisy)
    inc = StreamingKernelPCA(**kw)
    for lo in range(0, 3000, 1100):
        inc.partial_fit(noisy[lo: lo + 1100])
    assert inc.n_samples_seen_ == full.n_samples_seen_ == 3000
    # float32 features: each ZᵀZ of at most b = 2048 rows is a float32 GEMM, within
    # γ_b|Z|ᵀ|Z| (γ_b = b·u/(1 − b·u), u = 2⁻²⁴) of the exact product; the sums are float64
    assert noisy.dtype == np.float32
    absZ = np.abs(_Z(full, noisy))
    gamma = 2048 * 2.0**-24 / (1 - 2048 * 2.0**-24)
    bound = 2 * gamma * (absZ.T @ absZ)
    assert np.all(np.abs(inc.covariance_ - full.covariance_) <= bound)
    np.testing.assert_allclose(inc.feature_sum_, full.feature_sum_, rtol=1e-10, atol=1e-10)
    # eigenvalues move by at most ‖ΔC‖₂ (Weyl)
    assert np.all(np.abs(inc.explained_variance_ - full.explained_variance_)
                  <= np.linalg.norm(bound, 2) / 3000)
    np.testing.assert_allclose(np.abs(inc.components_ @ full.components_.T), np.eye(5),
                               atol=1e-6)


def test_partial_fit_fd_keeps_guarantee_on_all_rows(noisy):
    inc = StreamingKernelPCA(n_components=4, n_random_features=64, sketch_size=10, random_state=3)
    for lo in range(0, 3000, 900):
        inc.partial_fit(da.from_array(noisy[lo: lo + 900], chunks=(400, 20)))
    assert inc.n_samples_seen_ == 3000
    _fd_check(_Z(inc, noisy), inc)


def _errors(X, method, m, ell, k, seeds=(0, 1, 2), n_sample=None):
    out = []
    for seed in seeds:
        model = StreamingKernelPCA(n_components=k, n_random_features=m, sketch_size=ell, method=method,
                                   random_state=seed).fit(X)
        e = kernel_errors(X, model, "rbf", gamma=1.0 / X.shape[1], n_sample=n_sample)
        out.append([e["spectral"], e["frobenius"]])
    return np.mean(out, axis=0)


@pytest.fixture(scope="module")
def datasets():
    digits = load_digits_array()[::3]                                     # 599 × 64
    rn = random_noisy(600, 100, signal_dim=50, zeta=10.0, random_state=0).compute()
    return {"random_noisy": rn, "digits": digits}


@pytest.fixture(autouse=True)
def one_blas_thread():
    # the reference SVDs and exact-kernel eigensolves are small; threaded BLAS only adds
    # contention
    with threadpool_limits(limits=1):
        yield


@pytest.mark.parametrize("name", ["random_noisy", "digits"])
@pytest.mark.parametrize("method", ["fd", "rnca"])
def test_errors_shrink_as_features_grow(datasets, name, method):
    # Paper, figures 1-4: kernel spectral and Frobenius errors fall as the sample size m
    # grows (RFF error ~ 1/sqrt(m)); 16x more features at the same rank k = 24.
    X = datasets[name]
    small = _errors(X, method, 48, 32, 24)
    large = _errors(X, method, 768, 32, 24)
    assert np.all(large < 0.8 * small), (small, large)


@pytest.mark.parametrize("name", ["random_noisy", "digits"])
def test_fd_errors_shrink_as_sketch_grows(datasets, name):
    # SKPCA with more sketch rows keeps more kernel directions: ℓ = 2 vs ℓ = 40 at
    # m = 2048.  The Frobenius error falls clearly; the spectral error is dominated by the
    # RFF error of the top kernel direction (it falls with m, see above), so it must not grow.
    X = datasets[name]
    small = _errors(X, "fd", 2048, 2, 1)
    large = _errors(X, "fd", 2048, 40, 39)
    assert large[1] < 0.8 * small[1], (small, large)
    assert large[0] <= 1.02 * small[0], (small, large)


def test_fd_close_to_rnca_at_same_rank(datasets):
    # with ℓ well above k, the FD subspace is nearly the exact top-k feature subspace
    X = datasets["random_noisy"]
    fd = _errors(X, "fd", 256, 64, 8, seeds=(0,))
    rn = _errors(X, "rnca", 256, 64, 8, seeds=(0,))
    np.testing.assert_allclose(fd, rn, rtol=0.05)


def test_kinds_dtypes_and_kernel_approx(noisy):
    model = StreamingKernelPCA(n_components=3, n_random_features=32, sketch_size=8,
                               random_state=0).fit(noisy)
    out = model.transform(noisy[:50])
    assert isinstance(out, np.ndarray) and out.shape == (50, 3) and out.dtype == np.float32
    lazy = model.transform(da.from_array(noisy[:50], chunks=(20, 20)))
    assert isinstance(lazy, da.Array) and lazy.shape == (50, 3)
    K = model.kernel_approx(noisy[:10], noisy[:4])
    np.testing.assert_allclose(K, out[:10].astype(np.float64) @ out[:4].T.astype(np.float64),
                               rtol=1e-6)


def test_zarr_path_fit_and_transform(tmp_path, noisy):
    path = write_array(noisy, tmp_path / "X.zarr", chunk_rows=800)
    model = StreamingKernelPCA(n_components=3, n_random_features=32, sketch_size=8,
                               random_state=0).fit(str(path))
    assert model.fingerprint_["shape"] == [3000, 20]
    emb = model.transform(str(path))
    assert isinstance(emb, da.Array)
    np.testing.assert_array_equal(emb.compute(), model.transform(noisy))


@pytest.mark.parametrize("method", ["fd", "rnca"])
def test_save_load_round_trip(tmp_path, noisy, method):
    model = StreamingKernelPCA(n_components=3, n_random_features=32, sketch_size=8, method=method,
                               random_state=0).fit(noisy[:2000])
    model.save(tmp_path / "m.zarr")
    back = distsketch.load(tmp_path / "m.zarr")
    assert isinstance(back, StreamingKernelPCA) and back.get_params() == model.get_params()
    np.testing.assert_array_equal(back.transform(noisy), model.transform(noisy))
    back.partial_fit(noisy[2000:])
    model.partial_fit(noisy[2000:])
    np.testing.assert_array_equal(back.components_, model.components_)
    assert back.n_samples_seen_ == 3000


def test_errors(noisy):
    with pytest.raises(ConfigError, match="n_components"):
        StreamingKernelPCA(n_components=20, sketch_size=8).fit(noisy)
    with pytest.raises(ConfigError, match="n_components"):
        StreamingKernelPCA(n_components=40, n_random_features=32, method="rnca").fit(noisy)
    with pytest.raises(ConfigError, match="method"):
        StreamingKernelPCA(method="nystrom").fit(noisy)
    with pytest.raises(ConfigError, match="gamma"):
        StreamingKernelPCA(gamma=0.0).fit(noisy)
    with pytest.raises(ConfigError, match="kernel"):
        StreamingKernelPCA(kernel="polynomial").fit(noisy)
    with pytest.raises(NotFittedError):
        StreamingKernelPCA().transform(noisy)
    model = StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=4,
                               random_state=0).fit(noisy)
    with pytest.raises(InputError, match="features"):
        model.transform(np.ones((3, 7)))
    with pytest.raises(InputError, match="features"):
        model.partial_fit(np.ones((3, 7)))
    with pytest.raises(InputError, match="first bad row is 5"):
        bad = noisy.copy()
        bad[5, 2] = np.nan
        model.fit(da.from_array(bad, chunks=(1000, 20)))


def test_memory_budget_is_checked_before_computing(noisy):
    with dask.config.set({"distsketch.task-memory": "1MiB"}):
        with pytest.raises(MemoryBudgetError, match="budget"):
            StreamingKernelPCA(n_components=2, n_random_features=1024, sketch_size=64,
                               random_state=0).fit(noisy)


def test_sparse_input_matches_dense(noisy):
    import scipy.sparse as sp

    X = np.where(np.abs(noisy[:1500]) > 0.5, noisy[:1500], 0).astype(np.float64)
    kw = dict(n_components=3, n_random_features=48, sketch_size=8, random_state=0)
    dense = StreamingKernelPCA(**kw).fit(X)
    sparse = StreamingKernelPCA(**kw).fit(sp.csr_matrix(X))
    # sparse products differ from the row-stable dense GEMM only by rounding
    np.testing.assert_allclose(sparse.sketch_.T @ sparse.sketch_, dense.sketch_.T @ dense.sketch_,
                               rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(np.abs(sparse.transform(sp.csr_matrix(X))),
                               np.abs(dense.transform(X)), rtol=1e-6, atol=1e-8)
