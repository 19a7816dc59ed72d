"""NystromKernelRidge(Classifier): the exact Nyström KRR minimiser, by passes, resumable."""

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_digits
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge

import distsketch as ds
from distsketch.errors import ConfigError, InputError, MemoryBudgetError
from distsketch.estimators import falkon as falkon_module
from distsketch.ops.cg import cg_iteration_bound
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(0)
X = RNG.normal(size=(500, 4))
Y = np.sin(X[:, 0]) + 0.1 * RNG.normal(size=500)
GAMMA, LAM = 0.3, 1e-3


def _exact(X, Y, C, lam, gamma=GAMMA):
    Knm = pairwise_kernel(X, C, "rbf", gamma=gamma)
    H = Knm.T @ Knm + lam * X.shape[0] * pairwise_kernel(C, C, "rbf", gamma=gamma)
    return np.linalg.solve(H, Knm.T @ Y), np.linalg.cond(H)


def _model(**kw):
    params = dict(n_centers=60, gamma=GAMMA, alpha=LAM, tol=1e-12, max_iter=300, random_state=0)
    return ds.NystromKernelRidge(**(params | kw))


@pytest.mark.parametrize("factor_dtype", ["float64", "float32"])
def test_coef_is_the_exact_minimiser(factor_dtype):
    m = _model(factor_dtype=factor_dtype, tol=1e-11).fit(X, Y)
    exact, kappa = _exact(X, Y, m.centers_, LAM)
    assert m.converged_ and m.factor_dtype_ == factor_dtype
    # ‖α − α*‖/‖α*‖ ≤ κ(H) · (relative residual), the residual being float64 with either factors
    err = np.linalg.norm(m.coef_ - exact) / np.linalg.norm(exact)
    assert err <= kappa * 2e-11
    assert m.centers_.shape == (60, 4) and m.coef_.shape == (60,)
    np.testing.assert_allclose(m.predict(X), pairwise_kernel(X, m.centers_, "rbf", gamma=GAMMA)
                               @ exact, rtol=0, atol=1e-8 * np.abs(Y).max())


def test_iterations_follow_the_preconditioned_condition_number():
    # CG's bound for κ(P⁻¹H), P = (n/M) K_MM² + λ n K_MM (Falkon's preconditioner, dense here)
    m = _model(tol=1e-8).fit(X, Y)
    C, n, M = m.centers_, X.shape[0], 60
    Knm, K = pairwise_kernel(X, C, "rbf", gamma=GAMMA), pairwise_kernel(C, C, "rbf", gamma=GAMMA)
    H = Knm.T @ Knm + LAM * n * K
    P = n / M * K @ K + LAM * n * K
    ev = np.linalg.eigvals(np.linalg.solve(P, H)).real
    bound = cg_iteration_bound(ev.max() / ev.min(), 1e-8)
    # the residual is measured in the 2-norm of H's system: at most √κ(H)/√κ(P⁻¹H) more steps
    assert m.n_iter_ <= bound + np.ceil(0.5 * np.log(np.linalg.cond(H)))
    assert m.n_iter_ < 60  # far below plain CG on this κ(H)


def test_multi_target_columns_are_independent_fits():
    Y2 = np.c_[Y, np.cos(X[:, 1])]
    both = _model().fit(X, Y2)
    one = _model().fit(X, Y2[:, 1])
    assert both.coef_.shape == (60, 2)
    exact, kappa = _exact(X, Y2[:, 1], both.centers_, LAM)
    for coef in (both.coef_[:, 1], one.coef_):
        assert np.linalg.norm(coef - exact) / np.linalg.norm(exact) <= kappa * 2e-12


def test_any_chunking_gives_the_same_model_and_predictions():
    ref = _model().fit(X, Y)
    for chunks in (37, 250):
        m = _model().fit(da.from_array(X, chunks=(chunks, 4)), Y)
        np.testing.assert_array_equal(m.centers_, ref.centers_)  # hash-priority landmarks
        np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-8, atol=1e-8 * np.abs(ref.coef_).max())
    lazy = ref.predict(da.from_array(X, chunks=(41, 4)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), ref.predict(X), rtol=1e-12, atol=1e-12)


def test_it_equals_scikit_learns_nystroem_and_ridge_on_the_same_centres():
    # Ridge on z = K(x, C) K_CC^{-1/2} with penalty a is Nyström KRR with λ n = a: the same model
    Xd, yd = load_diabetes(return_X_y=True)
    Xd = (Xd - Xd.mean(0)) / Xd.std(0)
    yd = (yd - yd.mean()) / yd.std()
    tr, te = slice(0, 350), slice(350, None)
    nys = Nystroem(gamma=0.05, n_components=80, random_state=0).fit(Xd[tr])
    lam = 1e-3
    sk = Ridge(alpha=lam * 350, fit_intercept=False).fit(nys.transform(Xd[tr]), yd[tr])
    ours = ds.NystromKernelRidge(gamma=0.05, alpha=lam, landmarks=nys.components_, tol=1e-12,
                                 max_iter=500).fit(Xd[tr], yd[tr])
    sk_pred = sk.predict(nys.transform(Xd[te]))
    np.testing.assert_allclose(ours.predict(Xd[te]), sk_pred, rtol=0, atol=1e-6)
    mse = np.mean((ours.predict(Xd[te]) - yd[te]) ** 2)
    assert mse <= np.mean((sk_pred - yd[te]) ** 2) * (1 + 1e-6)


def test_kmeans_landmarks_and_median_gamma():
    m = _model(landmarks="kmeans", gamma="median").fit(X, Y)
    assert m.gamma_ == m.kernel_params_["gamma"] > 0
    exact, kappa = _exact(X, Y, m.centers_, LAM, gamma=m.gamma_)
    assert np.linalg.norm(m.coef_ - exact) / np.linalg.norm(exact) <= kappa * 2e-12
    assert not np.isin(m.centers_, X).all()  # centroids, not rows


def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    path = tmp_path / "cg.zarr"
    full = _model(alpha=0.1).fit(X, Y)  # a checkpoint per pass: a well-conditioned system
    passes = []
    real = falkon_module.NystromKernelRidge._h_times

    def dying(self, *args):
        if len(passes) == 4:
            raise KeyboardInterrupt  # the process is killed during its fifth pass
        passes.append(1)
        return real(self, *args)

    monkeypatch.setattr(falkon_module.NystromKernelRidge, "_h_times", dying)
    with pytest.raises(KeyboardInterrupt):
        _model(checkpoint=path, alpha=0.1).fit(X, Y)
    monkeypatch.setattr(falkon_module.NystromKernelRidge, "_h_times", real)
    counted = []

    def counting(self, *args):
        counted.append(1)
        return real(self, *args)

    monkeypatch.setattr(falkon_module.NystromKernelRidge, "_h_times", counting)
    resumed = _model(checkpoint=path, alpha=0.1, max_iter=1000).fit(X, Y)
    assert len(counted) == full.n_iter_ - 4  # the first four passes were not made again
    assert resumed.n_iter_ == full.n_iter_
    np.testing.assert_array_equal(resumed.centers_, full.centers_)
    np.testing.assert_allclose(resumed.coef_, full.coef_, rtol=1e-13, atol=0)
    np.testing.assert_allclose(resumed.residuals_, full.residuals_, rtol=1e-13)


def test_a_checkpoint_of_another_fit_is_refused(tmp_path):
    path = tmp_path / "cg.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # stopped early on purpose
        _model(checkpoint=path, max_iter=2).fit(X, Y)
    with pytest.raises(ConfigError, match="belongs to another fit"):
        _model(checkpoint=path, alpha=1e-2).fit(X, Y)
    with pytest.raises(ConfigError, match="belongs to another fit"):
        _model(checkpoint=path).fit(X, Y + 1.0)
    other = tmp_path / "model.zarr"
    ds.NystromFeatures(n_landmarks=5).fit(X).save(other)
    with pytest.raises(ConfigError, match="not a Falkon CG state"):
        _model(checkpoint=other).fit(X, Y)


def test_stopping_early_warns_and_a_saved_model_predicts_the_same(tmp_path):
    with pytest.warns(RuntimeWarning, match="raise max_iter"):
        m = _model(max_iter=2).fit(X, Y)
    assert m.n_iter_ == 2 and not m.converged_ and m.residuals_.shape == (3,)
    back = ds.load(m.save(tmp_path / "m.zarr"))
    np.testing.assert_allclose(back.predict(X[:20]), m.predict(X[:20]), rtol=1e-14)


def test_classifier_on_digits():
    Xd, yd = load_digits(return_X_y=True)
    Xd = Xd / 16.0
    clf = ds.NystromKernelRidgeClassifier(n_centers=400, gamma=0.05, alpha=1e-6,
                                          random_state=0).fit(Xd[:1200], yd[:1200])
    assert clf.coef_.shape == (400, 10) and list(clf.classes_) == list(range(10))
    acc = clf.score(Xd[1200:], yd[1200:])
    assert acc >= 0.95, acc
    # each column is the regressor fitted on that class's ±1 target
    reg = ds.NystromKernelRidge(n_centers=400, gamma=0.05, alpha=1e-6, random_state=0).fit(
        Xd[:1200], np.where(yd[:1200] == 3, 1.0, -1.0))
    np.testing.assert_allclose(clf.coef_[:, 3], reg.coef_, rtol=1e-4, atol=1e-4 * np.abs(reg.coef_).max())
    proba = clf.predict_proba(Xd[1200:1210])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (proba.argmax(axis=1) == clf.predict(Xd[1200:1210])).all()


def test_binary_labels_keep_their_dtype():
    labels = np.where(X[:, 0] > 0, "pos", "neg")
    clf = ds.NystromKernelRidgeClassifier(n_centers=40, gamma=GAMMA, alpha=1e-4,
                                          random_state=0).fit(X, labels)
    assert clf.coef_.shape == (40, 1) and clf.decision_function(X[:5]).shape == (5,)
    assert clf.predict(X[:5]).dtype == labels.dtype and clf.score(X, labels) > 0.95


def test_bad_inputs_and_parameters_are_refused():
    with pytest.raises(ConfigError, match="n_centers"):
        ds.NystromKernelRidge(n_centers=0).fit(X, Y)
    with pytest.raises(ConfigError, match="landmarks"):
        ds.NystromKernelRidge(landmarks="leverages").fit(X, Y)
    with pytest.raises(InputError, match="4 columns"):
        ds.NystromKernelRidge(landmarks=np.zeros((5, 3))).fit(X, Y)
    with pytest.raises(InputError, match=r"NaN|finite"):
        ds.NystromKernelRidge().fit(X, np.where(np.arange(500) == 7, np.nan, Y))
    with pytest.raises(InputError, match="numeric"):
        ds.NystromKernelRidge().fit(X, np.array(["a"] * 500))
    with pytest.raises(InputError, match="use NystromKernelRidge"):
        ds.NystromKernelRidgeClassifier().fit(X, Y)


def test_the_driver_memory_plan_names_n_centers_and_the_formula():
    est = ds.NystromKernelRidge(n_centers=400)
    with dask.config.set({"distsketch.driver-memory": "1MiB"}):
        with pytest.raises(MemoryBudgetError, match=r"n_centers=400 .*2·M²·8 bytes"):
            est.fit(X, Y)
        with pytest.raises(MemoryBudgetError, match=r"n_centers=400"):
            est.check_params(X.shape[0], X.shape[1])
    # float32 factors halve the factors' bytes, as the plan says
    m = _model(factor_dtype="float32").fit(X, Y)
    assert m.memory_plan_["factors"] == 2 * 60 * 60 * 4


def test_repeated_rows_give_one_centre_each_and_cg_converges():
    Xr = np.repeat(X[:150], 2, axis=0)  # every row twice: uniform centres would repeat
    yr = np.repeat(Y[:150], 2)
    m = _model(n_centers=200, tol=1e-10).fit(Xr, yr)
    assert m.converged_
    assert np.unique(m.centers_, axis=0).shape[0] == m.centers_.shape[0] < 200
    exact, kappa = _exact(Xr, yr, m.centers_, LAM)
    assert np.linalg.norm(m.coef_ - exact) / np.linalg.norm(exact) <= kappa * 2e-10


@pytest.mark.parametrize("how", ["leverage", "rpcholesky"])
def test_leverage_and_rpcholesky_centres_are_rows_and_fit_the_exact_minimiser_on_them(how):
    from distsketch.estimators.nystrom.landmark_choice import choose_landmarks

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    model = ds.NystromKernelRidge(n_centers=40, landmarks=how, gamma=0.25, alpha=1e-3,
                               tol=1e-12, max_iter=200, random_state=0).fit(X, y)
    C = model.centers_
    # the centres are the rows the shared landmark function draws for this seed and kernel
    rows, idx = choose_landmarks(X, how, 40, model.seed_, kernel="rbf",
                                 kernel_params=model.kernel_params_)
    np.testing.assert_array_equal(C, rows)
    np.testing.assert_array_equal(C, X[idx])
    # and coef_ is the exact minimiser of ‖K_nM a − y‖² + λ n aᵀ K_MM a on them
    K_nM = np.exp(-0.25 * ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1))
    K_MM = np.exp(-0.25 * ((C[:, None, :] - C[None, :, :]) ** 2).sum(-1))
    H = K_nM.T @ K_nM + 1e-3 * 300 * K_MM
    a = np.linalg.solve(H, K_nM.T @ y)
    np.testing.assert_allclose(K_nM @ model.coef_.ravel(), K_nM @ a, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- rows held across the passes

def _store(tmp_path, rows=8000, chunk=2000):
    """A Zarr store of 4 float32 columns in ``chunk``-row chunks, its opener and targets."""
    from distsketch.io import ingest, open_array

    rng = np.random.default_rng(3)
    Xs = rng.normal(size=(rows, 4)).astype(np.float32)
    ys = np.sin(Xs[:, 0]) + 0.1 * rng.normal(size=rows)
    np.save(tmp_path / "x.npy", Xs)
    store = ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=chunk)
    return (lambda: open_array(store)), ys, rows // chunk


# a budget under which the planner cuts the store's 2000-row chunks into smaller blocks
SPLIT = {"distsketch.task-memory": "1500KiB", "num_workers": 2}


def test_a_store_that_fits_the_row_cache_is_read_once_with_the_same_result(tmp_path, chunk_reads):
    opened, ys, n_chunks = _store(tmp_path)
    reads = chunk_reads
    with dask.config.set({**SPLIT, "distsketch.cache-rows": "off"}):
        lazy = _model(tol=1e-8).fit(opened(), ys)
    # without the cache: the centres' pass, K_nMᵀy's pass, then one per CG iteration
    assert len(reads) == n_chunks and set(reads.values()) == {lazy.n_iter_ + 2}
    reads.clear()
    with dask.config.set({**SPLIT, "distsketch.cache-rows": "auto"}):
        # 128 KB of rows; held rows are cut into the blocks the store would have been read in
        held = _model(tol=1e-8).fit(opened(), ys)
    assert len(reads) == n_chunks and set(reads.values()) == {1}
    assert held.n_iter_ == lazy.n_iter_ > 3
    np.testing.assert_array_equal(held.centers_, lazy.centers_)
    np.testing.assert_array_equal(held.coef_, lazy.coef_)  # the same blocks: bit for bit


def test_rows_over_the_cache_budget_are_read_by_every_pass(tmp_path, chunk_reads):
    opened, ys, _ = _store(tmp_path)
    reads = chunk_reads
    with dask.config.set({"distsketch.cache-rows": "124KiB"}):  # the rows take 125 KiB
        m = _model(tol=1e-6).fit(opened(), ys)
    assert set(reads.values()) == {m.n_iter_ + 2}


def test_held_rows_resume_a_checkpoint_of_lazy_rows(tmp_path):
    # the checkpoint's key hashes the rows, not how they were read
    opened, ys, _ = _store(tmp_path)
    path = tmp_path / "cg.zarr"
    full = _model(alpha=0.1, tol=1e-10).fit(opened(), ys)
    with dask.config.set({"distsketch.cache-rows": "off"}):
        first = _model(alpha=0.1, tol=1e-10, max_iter=2, checkpoint=path).fit(opened(), ys)
    assert first.n_iter_ == 2 and not first.converged_
    resumed = _model(alpha=0.1, tol=1e-10, checkpoint=path).fit(opened(), ys)
    assert resumed.n_iter_ == full.n_iter_
    np.testing.assert_allclose(resumed.coef_, full.coef_, rtol=1e-13, atol=0)


def test_a_nan_row_in_held_rows_gives_the_lazy_rows_error(tmp_path):
    from distsketch.io import ingest, open_array

    bad = X.copy()
    bad[321, 2] = np.nan
    np.save(tmp_path / "x.npy", bad)
    store = ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=100, allow_nan=True)
    messages = []
    for setting in ("off", "auto"):
        with dask.config.set({"distsketch.cache-rows": setting}), \
                pytest.raises(InputError) as err:
            _model().fit(open_array(store), Y)
        messages.append(str(err.value))
    assert "321" in messages[0] and messages[0] == messages[1]


def test_rows_held_on_the_workers_of_a_cluster_give_the_local_result(tmp_path, monkeypatch,
                                                                       chunk_reads):
    import weakref

    import distsketch.graph.row_cache as row_cache

    distributed = pytest.importorskip("distributed")
    opened, ys, n_chunks = _store(tmp_path)
    reads = chunk_reads
    local = _model(tol=1e-8).fit(opened(), ys)
    reads.clear()
    futures = []
    real = row_cache.persist

    def spy(collection):
        held = real(collection)
        futures.extend(weakref.ref(f) for f in distributed.futures_of(held))
        return held

    monkeypatch.setattr(row_cache, "persist", spy)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster):
        remote = _model(tol=1e-8).fit(opened(), ys)
        # the blocks were held on the workers, and the fit let them go when it ended
        assert futures and all(f() is None for f in futures)
    assert set(reads.values()) == {1} and len(reads) == n_chunks
    np.testing.assert_array_equal(remote.coef_, local.coef_)
