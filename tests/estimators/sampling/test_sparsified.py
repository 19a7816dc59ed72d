"""SparsifiedGram / SparsifiedKernelPCA: exactness at p=1, chunking invariance, subspace error."""

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import subspace_angles
from sklearn.decomposition import KernelPCA
from threadpoolctl import threadpool_limits

from distsketch import SparsifiedGram, SparsifiedKernelPCA, load
from distsketch.errors import ConfigError, NotFittedError
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(11)
X = RNG.normal(size=(240, 4))
GAMMA = 0.2
K_EXACT = pairwise_kernel(X, X, "rbf", gamma=GAMMA)
REF = SparsifiedGram(gamma=GAMMA, p=0.3, tile_rows=240, random_state=5).fit(X).to_scipy().toarray()


def _clusters(n=300, seed=0):
    # three well separated clusters: the rbf Gram matrix has a large gap after 3 eigenvalues
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    return centers[rng.integers(0, 3, size=n)] + 0.3 * rng.normal(size=(n, 2))


def test_p1_reproduces_exact_gram():
    G = SparsifiedGram(gamma=GAMMA, p=1.0, tile_rows=64, random_state=0).fit(X)
    np.testing.assert_allclose(G.to_scipy().toarray(), K_EXACT, rtol=1e-12, atol=1e-14)
    assert G.nnz_ == 240 * 240 and G.density_ == 1.0


@settings(max_examples=8, deadline=None)
@given(tile=st.integers(1, 240), chunk=st.integers(1, 240))
def test_same_matrix_for_any_tiling_and_chunking(tile, chunk):
    Xd = da.from_array(X, chunks=(chunk, 4))
    G = SparsifiedGram(gamma=GAMMA, p=0.3, tile_rows=max(tile, 20), random_state=5).fit(Xd)
    assert np.array_equal(G.to_scipy().toarray(), REF)


def test_matrix_properties():
    assert np.array_equal(REF, REF.T)
    kept = REF != 0
    np.testing.assert_allclose(REF[kept], K_EXACT[kept] / 0.3, rtol=1e-12)
    m = 240 * 241 // 2
    frac = kept[np.triu_indices(240)].mean()
    assert abs(frac - 0.3) < 5 * np.sqrt(0.21 / m)


def test_quantized_levels_and_polynomial_bound():
    G = SparsifiedGram(kernel="polynomial", gamma=0.1, degree=2, p=0.5, quantize=True,
                       tile_rows=100, random_state=1).fit(X)
    b = float(np.max(np.diag(pairwise_kernel(X, X, "polynomial", gamma=0.1, coef0=1.0, degree=2))))
    assert G.quantize_level_ == pytest.approx(b, rel=1e-12)
    vals = np.unique(G.to_scipy().data)
    np.testing.assert_allclose(np.abs(vals), b / 0.5, rtol=1e-12)
    # one byte per stored value
    assert G.tiles_.strip(0).data.dtype == np.int8


def test_linear_operator_store_and_save(tmp_path):
    G = SparsifiedGram(gamma=GAMMA, p=0.3, tile_rows=70, random_state=5,
                       store=tmp_path / "gram.zarr").fit(X)
    assert (tmp_path / "gram.zarr" / "distsketch-manifest.json").exists()
    assert (tmp_path / "gram.zarr" / "strips" / "3" / "indptr").exists()
    assert np.array_equal(G.to_scipy().toarray(), REF)
    V = RNG.normal(size=(240, 3))
    np.testing.assert_allclose(G.as_linear_operator() @ V, REF @ V, rtol=1e-10, atol=1e-10)
    H = np.eye(240) - 1.0 / 240
    np.testing.assert_allclose(G.as_linear_operator(center=True) @ V[:, 0], H @ REF @ H @ V[:, 0],
                               rtol=1e-9, atol=1e-9)
    mem = SparsifiedGram(gamma=GAMMA, p=0.3, tile_rows=70, random_state=5).fit(X)
    mem.save(tmp_path / "model.zarr")
    again = load(tmp_path / "model.zarr")
    assert np.array_equal(again.to_scipy().toarray(), REF)
    assert mem.memory_bytes_ < 0.5 * K_EXACT.nbytes


@pytest.mark.parametrize("solver", ["orthogonal_iteration", "lanczos"])
def test_p1_kernel_pca_matches_scikit_learn(solver):
    kp = SparsifiedKernelPCA(n_components=4, gamma=GAMMA, p=1.0, solver=solver, tile_rows=100,
                             random_state=0).fit(X)
    sk = KernelPCA(n_components=4, kernel="rbf", gamma=GAMMA).fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
    Xt = RNG.normal(size=(30, 4))
    a, b = kp.transform(Xt), sk.transform(Xt)
    signs = np.sign(np.sum(a * b, axis=0))
    np.testing.assert_allclose(a * signs, b, atol=1e-7)
    H = np.eye(240) - 1.0 / 240
    _, V = np.linalg.eigh(H @ K_EXACT @ H)
    assert np.max(subspace_angles(kp.eigenvectors_, V[:, -4:])) < 1e-6


@pytest.mark.parametrize("p,quantize,n", [(0.3, False, 300), (0.5, True, 900)])
def test_subspace_close_when_eigengap_large(p, quantize, n):
    # the gap grows like n, ||E||_2 like sqrt(n): quantisation (sigma^2 = 1/p) needs larger n
    Z = _clusters(n)
    H = np.eye(n) - 1.0 / n
    K = pairwise_kernel(Z, Z, "rbf", gamma=0.5)
    with threadpool_limits(limits=1):  # dense n x n references: threads only add contention
        w, V = np.linalg.eigh(H @ K @ H)
    gap = w[-2] - w[-3]  # centring removes one cluster direction: 2 components are separated
    kp = SparsifiedKernelPCA(n_components=2, gamma=0.5, p=p, quantize=quantize, tile_rows=256,
                             random_state=2).fit(Z)
    E = H @ (kp.gram_.to_scipy().toarray() - K) @ H
    sin_max = np.sin(np.max(subspace_angles(kp.eigenvectors_, V[:, -2:])))
    # Davis–Kahan sin-theta: sin <= ||E||_2 / (gap - ||E||_2)
    with threadpool_limits(limits=1):
        normE = np.abs(np.linalg.eigvalsh(E)).max()
    assert normE < gap / 2
    assert sin_max <= normE / (gap - normE)
    assert sin_max < 0.3


def test_dask_in_dask_out_and_errors():
    kp = SparsifiedKernelPCA(n_components=2, gamma=GAMMA, p=0.5, tile_rows=120, random_state=0).fit(X)
    out = kp.transform(da.from_array(X[:50], chunks=(20, 4)))
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), kp.transform(X[:50]), rtol=1e-12, atol=1e-12)
    emb = kp.fit_transform(X)
    np.testing.assert_array_equal(emb, kp.transform(X))
    # the exact-kernel projection of the training rows against the sparsified matrix's own
    # embedding V·√λ: equal but for the sparsification error
    # (H K̂ H V/√λ = V√λ, and transform's row centring uses K̂'s statistics): the difference is
    # exactly (K − K̂) H dual_coef_
    own = kp.eigenvectors_ * np.sqrt(kp.eigenvalues_)
    E = K_EXACT - kp.gram_.to_scipy().toarray()
    C = kp.dual_coef_
    np.testing.assert_allclose(emb - own, E @ (C - C.mean(axis=0)), rtol=1e-7, atol=1e-9)
    with pytest.raises(ConfigError, match="n_components"):
        SparsifiedKernelPCA(n_components=300).fit(X)
    with pytest.raises(ConfigError, match="p="):
        SparsifiedGram(p=0.0).fit(X)
    with pytest.raises(NotFittedError):
        SparsifiedKernelPCA().transform(X)


def test_store_backed_kernel_pca_equals_in_memory(tmp_path):
    kw = dict(n_components=2, gamma=GAMMA, p=0.4, tile_rows=100, random_state=0)
    a = SparsifiedKernelPCA(store=tmp_path / "g.zarr", **kw).fit(X)
    b = SparsifiedKernelPCA(**kw).fit(X)
    assert np.array_equal(a.eigenvectors_, b.eigenvectors_)
    b.save(tmp_path / "m.zarr")
    np.testing.assert_array_equal(load(tmp_path / "m.zarr").transform(X[:5]), b.transform(X[:5]))


@pytest.mark.parametrize("solver", ["orthogonal_iteration", "lanczos"])
def test_indefinite_sparsified_gram_gives_top_algebraic_eigenpairs(solver):
    # p = 0.05: the noise spectrum of K̂ (±4σ√n, σ² = 1/p) swamps the kernel's, so negative
    # eigenvalues as large in magnitude as the top ones exist and must not be returned
    kp = SparsifiedKernelPCA(n_components=4, gamma=GAMMA, p=0.05, solver=solver, max_iter=2000,
                             random_state=0).fit(X)
    H = np.eye(240) - 1.0 / 240
    C = H @ kp.gram_.to_scipy().toarray() @ H
    with threadpool_limits(limits=1):
        w = np.linalg.eigvalsh(C)
    top = w[::-1][:4]
    assert -w[0] > top[-1]  # the most negative eigenvalue outranks the 4th in magnitude
    np.testing.assert_allclose(kp.eigenvalues_, top, rtol=1e-9)
    assert np.all(kp.eigenvalues_ > 0)
    # eigenvectors: residuals ‖C v − λ v‖ from the Ritz tolerance, relative to λ₁
    R = C @ kp.eigenvectors_ - kp.eigenvectors_ * kp.eigenvalues_[None, :]
    assert np.linalg.norm(R, axis=0).max() <= 1e-7 * top[0]
    assert kp.n_iter_ >= 4  # iterations, or Lanczos's products with K̂: at least one per pair


def test_orthogonal_iteration_that_stops_at_max_iter_warns():
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        kp = SparsifiedKernelPCA(n_components=4, gamma=GAMMA, p=0.05,
                                 solver="orthogonal_iteration", max_iter=3, random_state=0).fit(X)
    assert kp.n_iter_ == 3
    with pytest.raises(ConfigError, match="Lanczos found"):
        SparsifiedKernelPCA(n_components=4, gamma=GAMMA, p=0.05, solver="lanczos", max_iter=1,
                            tol=1e-14, random_state=0).fit(X)


def test_default_solver_is_lanczos():
    assert SparsifiedKernelPCA().solver == "lanczos"
