"""Tests of KernelSolver (exact kernel systems by blockwise CG), tile_matvec and MEKAKernelRidge."""

import itertools

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

from distsketch import ConfigError, InputError, KernelSolver, MEKAKernelRidge, load
from distsketch.errors import MemoryBudgetError
from distsketch.estimators.features.rff import RandomFourierFeatures
from distsketch.graph.tiles import row_matvec, tile_matvec
from distsketch.ops.cg import cg_iteration_bound
from distsketch.ops.kernel_product import kernel_times
from distsketch.ops.kernels import pairwise_kernel


def _data(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


class _SqDist:
    """A non-kernel tile (squared distances): tile_matvec is algorithm-agnostic."""

    def __call__(self, a, b, ia, ib):
        return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)


@settings(max_examples=10, deadline=None)
@given(ra=st.integers(5, 70), rb=st.integers(5, 70), t=st.integers(1, 3))
def test_tile_matvec_equals_dense_product(ra, rb, t):
    rng = np.random.default_rng(ra * 100 + rb)
    A, B = rng.normal(size=(70, 4)), rng.normal(size=(55, 4))
    V = rng.normal(size=(55, t))
    out = tile_matvec(da.from_array(A, chunks=(ra, 4)), da.from_array(B, chunks=(min(rb, 55), 4)),
                      V, _SqDist(), split_every=2)
    assert out.chunks[0] == da.from_array(A, chunks=(ra, 4)).chunks[0]
    D = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(out.compute(), D @ V, rtol=1e-12, atol=1e-10)


class _SqDistRows:
    """A non-kernel row function: row_matvec is algorithm-agnostic too."""

    def __call__(self, a, bs, vs):
        return sum(_SqDist()(a, b, 0, 0) @ v for b, v in zip(bs, vs, strict=True))


@pytest.mark.parametrize("ra,rb", [(70, 55), (16, 9), (33, 20), (1, 7)])
@pytest.mark.parametrize("t", [1, 3])
def test_row_matvec_equals_dense_product(ra, rb, t):
    rng = np.random.default_rng(ra * 100 + rb)
    A, B = rng.normal(size=(70, 4)), rng.normal(size=(55, 4))
    V = rng.normal(size=(55, t))
    Ad = da.from_array(A, chunks=(ra, 4))
    out = row_matvec(Ad, da.from_array(B, chunks=(rb, 4)), V, _SqDistRows())
    assert out.chunks == (Ad.chunks[0], (t,))
    assert out.npartitions == Ad.numblocks[0]  # one task per row block: no tile tasks
    D = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(out.compute(), D @ V, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("chunks,min_tasks,expected", [
    ((2048, 2048, 904), 8, (512,) * 8 + (452, 452)),
    ((5000,), 4, (1250, 1250, 1250, 1250)),
    ((700, 300), 10, (350, 350, 300)),  # no piece below 256 rows
    ((100,), 4, (100,)),
    ((1000, 1000), 2, (1000, 1000)),  # enough blocks already
])
@pytest.mark.parametrize("align", [1, 256])
def test_row_matvec_splits_row_blocks_for_min_tasks(chunks, min_tasks, expected, align):
    if align == 256:  # pieces a multiple of 256 rows but a block's last
        expected = {(2048, 2048, 904): (512,) * 9 + (392,), (5000,): (1280,) * 3 + (1160,),
                    (700, 300): (512, 188, 300)}.get(chunks, expected)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(sum(chunks), 3))
    B, V = rng.normal(size=(40, 3)), rng.normal(size=(40, 2))
    out = row_matvec(da.from_array(A, chunks=(chunks, 3)), B, V, _SqDistRows(),
                     min_tasks=min_tasks, split_align=align)
    assert out.chunks[0] == expected
    D = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(out.compute(), D @ V, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("kernel,params", [
    ("rbf", {"gamma": 0.4}), ("gaussian", {"gamma": 2.0}), ("laplacian", {"gamma": 0.3}),
    ("polynomial", {"gamma": 0.5, "coef0": 1.0, "degree": 3}),
])
@pytest.mark.parametrize("tile", [(256, 1024), (7, 5), (1, 64), (64, 1)])
def test_kernel_times_equals_dense_kernel_product(kernel, params, tile):
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(45, 5)), 2.0 * rng.normal(size=(61, 5))
    V = rng.normal(size=(61, 2))
    cuts = [0, 13, 14, 40, 61]  # ragged blocks, one of a single row
    out = kernel_times(A, [B[a:b] for a, b in itertools.pairwise(cuts)],
                       [V[a:b] for a, b in itertools.pairwise(cuts)], kernel, params,
                       tile_rows=tile[0], tile_cols=tile[1])
    ref = pairwise_kernel(A, B, kernel, **params) @ V
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


def test_kernel_times_rbf_of_a_point_with_itself_and_far_points():
    # the fused exponent of x against itself rounds to a few ulps of γ‖x‖², never a
    # visible error; far points underflow to 0 as in the dense kernel
    X = np.array([[1e2, -2e2, 5e1], [1e2, -2e2, 5e1], [0.0, 0.0, 0.0]])
    V = np.ones((3, 1))
    out = kernel_times(X, [X], [V], "rbf", {"gamma": 1.0})
    np.testing.assert_allclose(out, pairwise_kernel(X, X, "rbf", gamma=1.0) @ V, rtol=1e-9)
    np.testing.assert_allclose(out[:, 0], [2.0, 2.0, 1.0], rtol=1e-9)


@pytest.mark.parametrize("block_rows", [1000, 64, 37, 200, 1])
def test_kernel_matvec_equals_dense_product_for_any_block_size(block_rows):
    X, y = _data(211, d=4)
    V = np.random.default_rng(1).normal(size=(211, 2))
    s = KernelSolver(gamma=0.7, alpha=1.0, max_iter=1, block_rows=block_rows)
    with pytest.warns(RuntimeWarning, match="CG stopped"):
        s.fit(X, y)
    ref = pairwise_kernel(X, X, "rbf", gamma=0.7) @ V
    np.testing.assert_allclose(s.kernel_matvec(V), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.kernel_matvec(V[:, 0]), ref[:, 0], rtol=1e-12, atol=1e-12)


def test_kernel_matvec_is_the_same_for_any_number_of_threads():
    # the row blocks are split for more tasks on more threads, aligned to the sub-tiles:
    # the same sub-tiles, the same BLAS calls, the same bits
    X, y = _data(1900, d=5)
    V = np.random.default_rng(2).normal(size=1900)
    s = KernelSolver(gamma=0.3, alpha=1.0, max_iter=1, block_rows=1024)
    with pytest.warns(RuntimeWarning, match="CG stopped"):
        s.fit(X, y)
    results, parts = [], []
    for workers in (1, 8):
        with dask.config.set(num_workers=workers):
            results.append(s.kernel_matvec(V))
            parts.append(s._product(s._train_blocks, s._train_blocks, V[:, None], "kernel-matvec",
                                    min_tasks=2 * workers).chunks[0])
    assert parts == [(1024, 876), (256, 256, 256, 256, 512, 364)]
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], pairwise_kernel(X, X, "rbf", gamma=0.3) @ V,
                               rtol=1e-12)


def test_kernel_matvec_falls_back_to_tiles_when_x_exceeds_the_task_budget():
    X, y = _data(300, d=4)
    V = np.random.default_rng(1).normal(size=300)
    s = KernelSolver(gamma=0.7, alpha=1.0, max_iter=1, block_rows=50)
    with pytest.warns(RuntimeWarning, match="CG stopped"):
        s.fit(X, y)
    # X and V plus the 2 MiB sub-tile buffer exceed 1 MiB; one 50 x 50 kernel tile does not
    with dask.config.set({"distsketch.task-memory": 2**20}):
        with pytest.raises(MemoryBudgetError, match="kernel-matvec"):
            row_matvec(s._train_blocks, s._train_blocks, V, _SqDistRows(),
                       work_bytes=2**21, name="kernel-matvec")
        graph = s._product(s._train_blocks, s._train_blocks, V[:, None], "kernel-matvec")
        out = s.kernel_matvec(V)
    assert graph.npartitions == 6 and len(dict(graph.dask)) > 6 * 6  # the (i, j) tiles
    np.testing.assert_allclose(out, pairwise_kernel(X, X, "rbf", gamma=0.7) @ V, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("precond", [None, "sketch", "nystrom", RandomFourierFeatures(
    gamma=0.4, n_components=64)])
def test_cg_converges_to_direct_solution(precond):
    X, y = _data(150)
    Y = np.column_stack([y, np.cos(X[:, 1])])
    lam = 0.2
    K = pairwise_kernel(X, X, "rbf", gamma=0.4)
    ref = sla.solve(K + lam * np.eye(150), Y, assume_a="pos")
    s = KernelSolver(gamma=0.4, alpha=lam, preconditioner=precond, preconditioner_size=64, tol=1e-10,
                     max_iter=1000, block_rows=80, random_state=0).fit(X, Y)
    assert s.converged_ and s.residuals_[-1] <= 1e-10
    assert s.residuals_.shape == (s.n_iter_ + 1,)
    np.testing.assert_allclose(s.dual_coef_, ref, rtol=1e-7, atol=1e-7 * np.abs(ref).max())
    Xt = np.random.default_rng(5).normal(size=(20, 3))
    Kt = pairwise_kernel(Xt, X, "rbf", gamma=0.4)
    np.testing.assert_allclose(s.predict(Xt), Kt @ ref, rtol=1e-6, atol=1e-8)


def test_polynomial_kernel_and_dask_prediction():
    X, y = _data(200, seed=1)
    X /= 2.0
    lam = 0.5
    K = pairwise_kernel(X, X, "polynomial", gamma=0.5, coef0=1.0, degree=2)
    ref = sla.solve(K + lam * np.eye(200), y, assume_a="pos")
    s = KernelSolver(kernel="polynomial", degree=2, gamma=0.5, coef0=1.0, alpha=lam,
                     preconditioner="sketch", preconditioner_size=64, tol=1e-10, block_rows=64,
                     random_state=0).fit(X, y)
    np.testing.assert_allclose(s.dual_coef_, ref, rtol=1e-6, atol=1e-8)
    out = s.predict(da.from_array(X[:50], chunks=(17, 3)))
    assert isinstance(out, da.Array) and out.shape == (50,)
    np.testing.assert_allclose(out.compute(), K[:50] @ ref, rtol=1e-6, atol=1e-8)
    assert s.score(X, y) > 0.5


def test_preconditioners_cut_iterations_on_an_ill_conditioned_gaussian_system():
    n, gamma, lam, tol = 300, 0.1, 1e-3, 1e-6
    X, y = _data(n, seed=2)
    A = pairwise_kernel(X, X, "rbf", gamma=gamma) + lam * np.eye(n)
    ev = np.linalg.eigvalsh(A)
    kappa = ev[-1] / ev[0]
    assert kappa > 1e5  # genuinely ill-conditioned
    common = dict(gamma=gamma, alpha=lam, tol=tol, max_iter=5000, block_rows=n, random_state=0)
    plain = KernelSolver(**common).fit(X, y)
    sketch = KernelSolver(preconditioner="sketch", preconditioner_size=256, **common).fit(X, y)
    nys = KernelSolver(preconditioner="nystrom", preconditioner_size=100, **common).fit(X, y)
    assert plain.converged_ and sketch.converged_ and nys.converged_
    # plain CG within its √κ log(1/tol) bound
    assert plain.n_iter_ <= cg_iteration_bound(kappa, tol)

    def kappa_pre(Z):
        P = Z @ Z.T + lam * np.eye(n)
        L = np.linalg.cholesky(np.linalg.inv(P))
        e = np.linalg.eigvalsh(L.T @ A @ L)
        return e[-1] / e[0]

    Zs = RandomFourierFeatures(gamma=gamma, n_components=256, random_state=sketch.seed_) \
        .fit(X).transform(X)
    k_sketch = kappa_pre(Zs)
    # the preconditioned counts respect the bound of the preconditioned condition number
    assert sketch.n_iter_ <= cg_iteration_bound(k_sketch, tol)
    assert k_sketch < kappa / 100
    # measured (seed 0, n=300, κ≈1.9e5): plain 170, sketch (RFF 256) 50, Nyström (M=100) 5
    assert plain.n_iter_ >= 3 * sketch.n_iter_
    assert plain.n_iter_ >= 10 * nys.n_iter_
    for s in (plain, sketch, nys):
        np.testing.assert_allclose(s.dual_coef_, nys.dual_coef_, rtol=0, atol=1e-3 * np.abs(
            nys.dual_coef_).max())


def test_meka_kernel_ridge_solves_the_meka_system():
    from distsketch.estimators.nystrom.meka import MEKA

    X, y = _data(400, seed=3)
    lam = 0.1
    meka = MEKA(n_clusters=3, rank=10, gamma=1.0, random_state=0).fit(X)
    model = MEKAKernelRidge(meka=meka, alpha=lam, solver="cg", tol=1e-10, max_iter=2000).fit(X, y)
    G = meka.to_dense()
    ref = sla.solve(G + lam * np.eye(400), y)
    np.testing.assert_allclose(model.dual_coef_, ref, rtol=1e-6, atol=1e-7 * np.abs(ref).max())
    Xt = np.random.default_rng(7).normal(size=(30, 3))
    np.testing.assert_allclose(model.predict(Xt), meka.kernel_approx(Xt, X) @ ref, rtol=1e-6,
                               atol=1e-8)
    out = model.predict(da.from_array(Xt, chunks=(11, 3)))
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), model.predict(Xt), rtol=1e-12, atol=1e-12)
    # low-rank MEKA with λ: still a useful regressor on held-out data
    assert model.score(*_data(200, seed=9)) > 0.5
    # an unfitted MEKA is cloned and fitted on X
    fresh = MEKAKernelRidge(meka=MEKA(n_clusters=3, rank=10, gamma=1.0, random_state=0),
                            alpha=lam, solver="cg", tol=1e-10).fit(X, y)
    np.testing.assert_allclose(fresh.dual_coef_, model.dual_coef_, rtol=1e-6, atol=1e-8)
    # MEKA's link matrix need not be PSD: with solver="cg" an indefinite G̃ + λI is
    # reported (relative to the operator's scale), not mis-solved
    odd = MEKA(n_clusters=3, rank=10, gamma=0.5, random_state=0).fit(X)
    assert np.linalg.eigvalsh(odd.to_dense())[0] < -0.01
    with pytest.raises(ConfigError, match=r"relative to the operator's scale.*solver='factored'"):
        MEKAKernelRidge(meka=odd, alpha=1e-3, solver="cg", max_iter=2000).fit(X, y)
    with pytest.raises(InputError, match="MEKA covers 400 rows"):
        MEKAKernelRidge(meka=meka).fit(X[:100], y[:100])


def _clipped(G):
    ev, V = np.linalg.eigh(G)
    return (V * np.clip(ev, 0.0, None)) @ V.T


@pytest.fixture(scope="module")
def indefinite_meka():
    """The issue's MEKA(n_clusters=8, rank=64, gamma=0.5) on 1 200 rows, with dense references."""
    from distsketch.estimators.nystrom.meka import MEKA
    from distsketch.ops.meka import scatter_basis

    n = 1200
    X, y = _data(n, d=4, seed=11)
    meka = MEKA(n_clusters=8, rank=64, gamma=0.5, random_state=0).fit(X)
    G = meka.to_dense()
    Gp = _clipped(G)
    W = scatter_basis(np.asarray(meka._training_basis()), meka.offsets_, meka.ranks_)
    Wp = np.linalg.pinv(W)
    K = pairwise_kernel(X, X, "rbf", gamma=0.5)
    return dict(X=X, y=y, meka=meka, e_min=np.linalg.eigvalsh(G)[0], Gp=Gp,
                link_psd=Wp @ Gp @ Wp.T, K=K, gap=np.linalg.norm(K - Gp, 2))


@pytest.mark.parametrize("lam", [1e-2, 2.0 ** -5, 2.0 ** -2])
def test_meka_kernel_ridge_fits_indefinite_meka_at_the_papers_regularisation(lam,
                                                                             indefinite_meka):
    """The issue's configuration at λ = 1e-2 and at Table 3's λ (2⁻⁵ … 2⁻²)."""
    d = indefinite_meka
    X, y, meka, Gp, K = d["X"], d["y"], d["meka"], d["Gp"], d["K"]
    n = X.shape[0]
    assert d["e_min"] < -0.03  # measured −0.058: G̃ + λI is indefinite for λ = 1e-2 and 2⁻⁵
    if lam < -d["e_min"]:
        with pytest.raises(ConfigError, match="solver='factored'"):
            MEKAKernelRidge(meka=meka, alpha=lam, solver="cg").fit(X, y)
    model = MEKAKernelRidge(meka=meka, alpha=lam).fit(X, y)
    assert model.n_clipped_ > 0 and 0 < model.clipped_mass_ < 0.05
    np.testing.assert_allclose(np.sort(model.core_eigenvalues_)[0], d["e_min"], rtol=1e-6)
    # exact KRR on the PSD-clipped operator (dense eigendecomposition of G̃)
    ref = sla.solve(Gp + lam * np.eye(n), y, assume_a="pos")
    np.testing.assert_allclose(model.dual_coef_, ref, rtol=1e-8, atol=1e-9 * np.abs(ref).max())
    # out of sample: G̃₊(x, X) = w(x)ᵀ L₊ W(X)ᵀ with L₊ = W⁺ G̃₊ W⁺ᵀ
    Xt, yt = _data(150, d=4, seed=12)
    Wt = np.asarray(meka.transform(Xt))
    W = np.asarray(meka.transform(X))
    np.testing.assert_allclose(model.predict(Xt), Wt @ d["link_psd"] @ W.T @ ref,
                               rtol=1e-7, atol=1e-8 * np.abs(Wt @ model.coef_).max())
    # against exact KRR with the true kernel: fitted values within ‖K − G̃₊‖₂ ‖α_K‖
    # (f̃ − f = λ(G̃₊ + λI)⁻¹(G̃₊ − K)α_K and ‖λ(G̃₊ + λI)⁻¹‖ ≤ 1)
    a_K = sla.solve(K + lam * np.eye(n), y, assume_a="pos")
    fit_gap = np.linalg.norm(Gp @ model.dual_coef_ - K @ a_K)
    assert fit_gap <= d["gap"] * np.linalg.norm(a_K) * (1 + 1e-8)
    assert fit_gap <= 0.05 * np.linalg.norm(K @ a_K)
    # held out: as accurate as exact KRR up to a few hundredths of R²
    exact = pairwise_kernel(Xt, X, "rbf", gamma=0.5) @ a_K
    r2_exact = 1 - np.sum((yt - exact) ** 2) / np.sum((yt - yt.mean()) ** 2)
    assert model.score(Xt, yt) >= r2_exact - 0.05


def test_meka_kernel_ridge_factored_equals_cg_on_a_psd_meka():
    from distsketch.estimators.nystrom.meka import MEKA

    X, y = _data(400, seed=3)
    Y = np.column_stack([y, np.cos(X[:, 1])])
    meka = MEKA(n_clusters=3, rank=10, gamma=1.0, random_state=0).fit(X)
    G = meka.to_dense()
    lam = 0.1
    direct = MEKAKernelRidge(meka=meka, alpha=lam).fit(X, Y)
    ref = sla.solve(_clipped(G) + lam * np.eye(400), Y)
    np.testing.assert_allclose(direct.dual_coef_, ref, rtol=1e-8, atol=1e-10)
    assert direct.dual_coef_.shape == (400, 2) and direct.coef_.shape == (meka.ranks_.sum(), 2)
    if np.linalg.eigvalsh(G)[0] >= -1e-10:
        assert direct.n_clipped_ == 0 or direct.clipped_mass_ < 1e-8
    cg = MEKAKernelRidge(meka=meka, alpha=lam, solver="cg", tol=1e-10).fit(X, Y)
    e_min = float(np.linalg.eigvalsh(G)[0])
    # the two agree up to what clipping removed (|e_min| / λ relative)
    np.testing.assert_allclose(direct.dual_coef_, cg.dual_coef_, rtol=0,
                               atol=(1e-7 + 2 * max(-e_min, 0.0) / lam) * np.abs(ref).max())


def test_bad_inputs_and_warnings(tmp_path):
    X, y = _data(50)
    with pytest.raises(InputError, match="y has 49 rows but X has 50"):
        KernelSolver().fit(X, y[:49])
    bad = y.copy()
    bad[3] = np.inf
    with pytest.raises(InputError, match="row 3"):
        KernelSolver().fit(X, bad)
    for lam in (0.0, -2.0):
        with pytest.raises(ConfigError, match="alpha"):
            KernelSolver(alpha=lam).fit(X, y)
        with pytest.raises(ConfigError, match="alpha"):
            MEKAKernelRidge(alpha=lam).fit(X, y)
    with pytest.raises(ConfigError, match="preconditioner"):
        KernelSolver(preconditioner="jacobi").fit(X, y)
    with pytest.raises(ConfigError, match="nystrom"):
        KernelSolver(kernel="arccos1", preconditioner="sketch").fit(X, y)
    with pytest.warns(RuntimeWarning, match="max_iter"):
        s = KernelSolver(alpha=1e-6, max_iter=2, gamma=1.0).fit(X, y)
    assert not s.converged_ and s.n_iter_ == 2
    s = KernelSolver(alpha=0.1, gamma=1.0, preconditioner="nystrom", preconditioner_size=20,
                     random_state=0).fit(X, y)
    s.save(tmp_path / "solver")
    again = load(tmp_path / "solver")
    np.testing.assert_array_equal(again.predict(X[:5]), s.predict(X[:5]))


def _plain_cg_count(K, lam, y, tol):
    """Unpreconditioned CG on the dense matrix: the same recurrence as the solver's tiles."""
    from distsketch.ops.cg import pcg

    return pcg(lambda V: K @ V + lam * V, y, tol=tol, max_iter=20000).n_iter


def test_nystrom_preconditioner_converges_in_tens_of_iterations():
    """The README's Nyström configuration (512 landmarks, λ = 1e-3) on a 1 200-row RBF system."""
    from distsketch.ops.sketch_solve import nystrom_factor

    n, gamma, lam, tol = 1200, 0.5, 1e-3, 1e-6
    X, y = _data(n, d=3, seed=4)
    K = pairwise_kernel(X, X, "rbf", gamma=gamma)
    s = KernelSolver(gamma=gamma, alpha=lam, preconditioner="nystrom", preconditioner_size=512, tol=tol,
                     block_rows=600, random_state=0).fit(X, y)
    assert s.converged_ and s.preconditioner_rank_ == 512 and s.preconditioner_size_ == 512
    plain = _plain_cg_count(K, lam, y, tol)  # measured 860
    # Bound from the factor itself: P⁻¹ᐟ²(K + λI)P⁻¹ᐟ² = I + P⁻¹ᐟ²EP⁻¹ᐟ² with E = K − ZZᵀ ≽ 0
    # and P ≽ λI, so its i-th eigenvalue is ≤ 1 + eᵢ(E)/λ; with k_t eigenvalues of E above tλ
    # treated as outliers, CG needs at most k_t + ½√(1+t)·ln(2√κ(K+λI)/tol) iterations.
    L = X[s.landmark_index_]
    T = nystrom_factor(pairwise_kernel(L, L, "rbf", gamma=gamma))
    Z = sla.solve_triangular(T, pairwise_kernel(X, L, "rbf", gamma=gamma).T, trans="T").T
    e = np.linalg.eigvalsh(K - Z @ Z.T)
    evA = np.linalg.eigvalsh(K) + lam
    conv = np.log(2 * np.sqrt(evA[-1] / evA[0]) / tol)
    bound = min(int(np.sum(e > t * lam)) + int(np.ceil(0.5 * np.sqrt(1 + t) * conv))
                for t in (1, 3, 10, 30, 100, 300))
    assert s.n_iter_ <= bound  # measured: 11 iterations, bound 52
    assert s.n_iter_ <= 40 and s.n_iter_ * 20 <= plain
    ref = sla.solve(K + lam * np.eye(n), y, assume_a="pos")
    # residual ≤ tol·‖y‖ ⇒ ‖α − α*‖ ≤ tol·‖y‖ / λ_min(K + λI)
    assert np.linalg.norm(s.dual_coef_ - ref) <= tol * np.linalg.norm(y) / evA[0] * (1 + 1e-6)
    # the default rank follows d_λ (estimated from a 1 024-row sample)
    d_true = float(np.sum((evA - lam) / evA))
    assert abs(s.statistical_dimension_ - d_true) <= 0.25 * d_true


def test_default_sketch_preconditioner_follows_the_statistical_dimension(caplog):
    """Issue: γ = 2, λ = 1e-3, RFF sketch no better than none; small version of that system."""
    import logging

    from distsketch.ops.sketch_solve import statistical_dimension

    n, gamma, lam, tol = 500, 2.0, 1e-3, 1e-6
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    y = np.sin(X[:, 0]) + np.cos(X[:, 1]) + 0.1 * rng.normal(size=n)
    K = pairwise_kernel(X, X, "rbf", gamma=gamma)
    d_true = statistical_dimension(np.linalg.eigvalsh(K), lam)  # ≈ 142
    plain = _plain_cg_count(K, lam, y, tol)  # measured 528
    with caplog.at_level(logging.INFO, logger="distsketch"):
        s = KernelSolver(gamma=gamma, alpha=lam, preconditioner="sketch", tol=tol, max_iter=2000,
                         block_rows=n, verbose=1, random_state=0).fit(X, y)
    # sample = all rows here, so the estimate is the exact d_λ
    np.testing.assert_allclose(s.statistical_dimension_, d_true, rtol=1e-8)
    assert s.preconditioner_size_ == min(n, int(np.ceil(8 * d_true))) == s.preconditioner_rank_
    assert s.converged_ and 3 * s.n_iter_ <= plain  # measured 135 vs 528
    msgs = [r.getMessage() for r in caplog.records]
    assert any("statistical dimension d_λ ≈ 142" in m and "rank 500" in m for m in msgs)
    assert any("KernelSolver: converged after" in m for m in msgs)
    ref = sla.solve(K + lam * np.eye(n), y, assume_a="pos")
    lam_min = np.linalg.eigvalsh(K)[0] + lam
    assert np.linalg.norm(s.dual_coef_ - ref) <= tol * np.linalg.norm(y) / lam_min * (1 + 1e-6)


def test_default_sketch_is_dropped_when_it_cannot_reach_the_statistical_dimension(caplog):
    """d_λ ≈ n (8 uniform inputs, γ = 2): a small RFF sketch slows CG down, so none is used."""
    import logging

    n, gamma, lam, tol = 400, 2.0, 1e-3, 1e-6
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(n, 8))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=n)
    K = pairwise_kernel(X, X, "rbf", gamma=gamma)
    with caplog.at_level(logging.WARNING, logger="distsketch"):
        s = KernelSolver(gamma=gamma, alpha=lam, preconditioner="sketch", tol=tol,
                         block_rows=n, random_state=0).fit(X, y)
    assert s.statistical_dimension_ > 0.5 * n
    assert s.preconditioner_size_ == 0 and s.preconditioner_rank_ == 0
    assert any("none is used" in r.getMessage() for r in caplog.records)
    assert s.converged_ and s.n_iter_ == _plain_cg_count(K, lam, y, tol)
    # what the dropped default avoids: a 64-feature sketch needs more iterations than none
    small = KernelSolver(gamma=gamma, alpha=lam, preconditioner="sketch", preconditioner_size=64,
                         tol=tol, max_iter=3 * s.n_iter_, block_rows=n, random_state=0)
    with pytest.warns(RuntimeWarning, match="max_iter"):
        small.fit(X, y)
    assert not small.converged_


def test_default_preconditioner_rank_rule():
    from distsketch.estimators.solvers.solver import default_preconditioner_rank as rank

    # 2·d_λ landmarks, 8·d_λ features, at least 64
    assert rank(100.0, 10_000, "nystrom", 1024) == 200
    assert rank(100.0, 10_000, "sketch", 1024) == 800
    assert rank(3.0, 10_000, "nystrom", 1024) == 64
    # never above n, 4096, or a 1 GiB factor (2³⁰ / (8 n) columns)
    assert rank(400.0, 500, "nystrom", 500) == 500
    assert rank(3000.0, 50_000, "nystrom", 1024) == 2**30 // (8 * 50_000)
    assert rank(1500.0, 100_000, "nystrom", 1024) == 2**30 // (8 * 100_000)
    assert rank(2500.0, 6000, "nystrom", 6000) == 4096
    # a sketch that cannot reach 2·d_λ, or a saturated estimate, is dropped
    assert rank(300.0, 500, "sketch", 500) == 0
    assert rank(200.0, 500, "sketch", 500) == 500
    assert rank(1000.0, 20_000, "sketch", 1024) == 0
    assert rank(1000.0, 20_000, "nystrom", 1024) == 4096  # saturated: as many as allowed
    assert rank(1000.0, 200_000, "nystrom", 1024) == 2**30 // (8 * 200_000)


@pytest.mark.parametrize("est, advice", [
    (KernelSolver(gamma=0.5, alpha=1e-3, max_iter=1), "use a preconditioner"),
    (MEKAKernelRidge(solver="cg", alpha=1e-3, max_iter=1, random_state=0),
     "use solver='factored'"),
])
def test_cg_stopped_early_is_recorded_and_warned(est, advice):
    X, y = _data(120, d=3)
    with pytest.warns(RuntimeWarning) as caught:
        est.fit(X, y)
    stopped = [w for w in caught if "CG stopped" in str(w.message)]
    assert len(stopped) == 1
    msg = str(stopped[0].message)
    assert msg.startswith(f"{type(est).__name__}: CG stopped after 1 iterations") and advice in msg
    assert est.n_iter_ == 1 and est.converged_ is False and len(est.residuals_) >= 1
