"""k-Space kernel PCA (rank-k (1 + ε) bound on explicit φ(A), Theorem 7 factorisation,
sampling, chunking) and approximate kernel PCR (digits: better than linear regression)."""

import dask.array as da
import numpy as np
import pytest
from sklearn.base import is_classifier
from sklearn.datasets import load_digits
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split

from distsketch.errors import ConfigError, InputError, NotFittedError
from distsketch.estimators.decomposition.kspace import KernelPCR, KSpaceKernelPCA
from distsketch.estimators.decomposition.kspace_classifier import KernelPCRClassifier
from distsketch.footprint import Footprint

RNG = np.random.default_rng(0)
A = RNG.normal(size=(240, 4))
AP = np.hstack([A, np.ones((240, 1))])
PHI = np.einsum("ni,nj,nk->nijk", AP, AP, AP).reshape(240, -1)     # (x·y + 1)^3, 125 columns
SV = np.linalg.svd(PHI, compute_uv=False)
K = 5
BEST = np.sqrt(np.sum(SV[K:] ** 2))


def _ks(**params):
    # PHI is the feature map of (x·y + 1)^3: gamma=1 (the default is 1 / n_features)
    return KSpaceKernelPCA(gamma=1.0, **params)


def _ratio(est):
    V = est.transform(A)
    return np.linalg.norm(PHI - V @ (V.T @ PHI)) / BEST


def test_explicit_feature_map_matches_kernel():
    np.testing.assert_allclose(PHI @ PHI.T, (A @ A.T + 1) ** 3, rtol=1e-10, atol=1e-9)


def test_rank_k_within_one_plus_eps_and_eps_shrinks():
    # Lemmas 4–5: ‖φ(A) − VVᵀφ(A)‖_F ≤ (1 + ε)‖φ(A) − [φ(A)]_k‖_F, ε decreasing in (m, r)
    small = [_ratio(_ks(n_components=K, sketch_dim=10, embed_size=20, random_state=s).fit(A))
             for s in range(4)]
    large = [_ratio(_ks(n_components=K, sketch_dim=80, embed_size=320, random_state=s).fit(A))
             for s in range(4)]
    assert min(small + large) >= 1.0 - 1e-9                 # never beats the optimum
    assert max(large) < 1.06
    assert np.mean(large) - 1 < 0.5 * (np.mean(small) - 1)


def test_embedding_is_orthonormal_and_chunking_invariant():
    est = _ks(n_components=K, sketch_dim=40, embed_size=80, random_state=1).fit(A)
    V = est.transform(A)
    np.testing.assert_allclose(V.T @ V, np.eye(K), atol=1e-10)
    Vd = est.transform(da.from_array(A, chunks=(37, 4)))
    np.testing.assert_array_equal(Vd.compute(), V)
    est2 = _ks(n_components=K, sketch_dim=40, embed_size=80, random_state=1).fit(
        da.from_array(A, chunks=(50, 4)))
    np.testing.assert_allclose(est2.components_, est.components_, rtol=1e-8, atol=1e-10)


def test_sampled_fit_applies_to_all_rows():
    est = _ks(n_components=K, sketch_dim=80, embed_size=320, sample=120, random_state=0).fit(A)
    assert est.n_samples_seen_ == 120
    V = est.transform(A)
    Q, _ = np.linalg.qr(V)
    # subspace found on half the rows still captures φ(A) well (Table 1's sampled column)
    assert np.linalg.norm(PHI - Q @ (Q.T @ PHI)) / BEST < 1.3


def test_theorem7_factorisation_and_kernel_approx():
    est = _ks(n_components=K, sketch_dim=80, embed_size=320, n_landmarks=60,
                          random_state=0).fit(A)
    V = est.transform(A)
    # V · U · φ(R) against the rank-k optimum
    Rp = np.hstack([est.landmarks_, np.ones((60, 1))])
    phiR = np.einsum("ni,nj,nk->nijk", Rp, Rp, Rp).reshape(60, -1)
    err = np.linalg.norm(V @ est.factor_ @ phiR - PHI)
    assert err / BEST < 1.1
    # kernel_approx = projection of φ onto the rank-k row space of U φ(R)
    G = est.kernel_approx(A)
    B = est.factor_ @ phiR
    P = B.T @ np.linalg.pinv(B @ B.T) @ B
    np.testing.assert_allclose(G, PHI @ P @ PHI.T, rtol=1e-6, atol=1e-6 * np.abs(G).max())
    with pytest.raises(NotFittedError, match="n_landmarks"):
        KSpaceKernelPCA(n_components=2, random_state=0).fit(A).kernel_approx(A)


def test_kspace_errors():
    with pytest.raises(ConfigError, match="sketch_dim"):
        KSpaceKernelPCA(n_components=5, sketch_dim=3).fit(A)
    with pytest.raises(ConfigError, match="degree"):
        KSpaceKernelPCA(degree=0).fit(A)
    # checked from X's shape before any pass: more components than rows, or than the
    # polynomial feature space has dimensions (C(4 + 1, 1) = 5; C(4, 1) = 4 for coef0=0)
    with pytest.raises(InputError, match="exceeds the 4 rows"):
        KSpaceKernelPCA(n_components=8, random_state=0).fit(A[:4])
    with pytest.raises(InputError, match="dimension 5 "):
        KSpaceKernelPCA(n_components=6, degree=1, random_state=0).fit(A)
    with pytest.raises(InputError, match="dimension 4 "):
        KernelPCR(n_components=5, degree=1, coef0=0.0, random_state=0).fit(A, A[:, 0])
    KSpaceKernelPCA(n_components=5, degree=1)._check_params_for_shape(240, 4)  # the bound passes
    # enough rows and dimensions, but the rows repeat: the sketch's rank is found in fit
    with pytest.raises(InputError, match="rank"):
        KSpaceKernelPCA(n_components=8, random_state=0).fit(np.repeat(A[:3], 4, axis=0))


def test_pcr_digits_beats_linear_regression():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    pcr = KernelPCRClassifier(n_components=100, degree=3, gamma=1 / 8, random_state=0)
    acc = pcr.fit(Xtr, ytr).score(Xte, yte)
    # plain linear (one-vs-rest least squares) regression on the raw features
    Y = -np.ones((len(ytr), 10))
    Y[np.arange(len(ytr)), ytr] = 1
    lin = LinearRegression().fit(Xtr, Y)
    acc_lin = np.mean(lin.predict(Xte).argmax(axis=1) == yte)
    assert acc > acc_lin + 0.02
    assert set(np.unique(pcr.predict(Xte))) <= set(range(10))


def test_pcr_regression_matches_least_squares_on_embedding():
    y = A[:, 0] * A[:, 1] * A[:, 2] + A[:, 0] ** 2 + A[:, 3]
    pcr = KernelPCR(n_components=30, degree=3, sketch_dim=120, embed_size=240, random_state=0).fit(A, y)
    V = pcr.kspace_.transform(A)
    ref = LinearRegression().fit(V, y)
    np.testing.assert_allclose(pcr.coef_[:, 0], ref.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(pcr.predict(A), ref.predict(V), rtol=1e-6, atol=1e-8)
    assert pcr.score(A, y) > 0.9
    pred = pcr.predict(da.from_array(A, chunks=(60, 4)))
    np.testing.assert_allclose(pred.compute(), pcr.predict(A), rtol=1e-10, atol=1e-10)


def test_save_load_roundtrip(tmp_path):
    from distsketch.io.model.store import load

    est = _ks(n_components=K, sketch_dim=20, embed_size=40, n_landmarks=30,
                          random_state=0).fit(A)
    est.save(tmp_path / "ks")
    back = load(tmp_path / "ks")
    np.testing.assert_array_equal(back.transform(A), est.transform(A))
    np.testing.assert_array_equal(back.kernel_approx(A[:5]), est.kernel_approx(A[:5]))
    y = A[:, 0] * A[:, 1]
    pcr = KernelPCR(n_components=10, degree=2, random_state=0).fit(A, y)
    pcr.save(tmp_path / "pcr")
    np.testing.assert_array_equal(load(tmp_path / "pcr").predict(A), pcr.predict(A))


def test_pcr_classifier_is_the_regression_of_pm1_class_columns():
    y = np.where(A[:, 0] * A[:, 1] > 0, "pos", "neg")
    clf = KernelPCRClassifier(n_components=10, degree=2, random_state=0).fit(A, y)
    assert is_classifier(clf) and not hasattr(KernelPCR, "decision_function")
    np.testing.assert_array_equal(clf.classes_, ["neg", "pos"])
    # two classes: one column, +1 for classes_[1] (as RidgeClassifier)
    Y = np.where(y == clf.classes_[1], 1.0, -1.0)[:, None]
    reg = KernelPCR(n_components=10, degree=2, random_state=0).fit(A, Y)
    np.testing.assert_array_equal(clf.coef_, reg.coef_)
    np.testing.assert_array_equal(clf.decision_function(A), reg.predict(A)[:, 0])
    pred = clf.predict(A)
    np.testing.assert_array_equal(pred, clf.classes_[(reg.predict(A)[:, 0] > 0).astype(int)])
    assert clf.score(A, y) == np.mean(pred == y) > 0.7  # chance is 0.5
    np.testing.assert_array_equal(clf.predict(da.from_array(A, chunks=(60, 4))).compute(), pred)
    with pytest.raises(InputError, match="only one class"):
        KernelPCRClassifier(n_components=3, degree=2).fit(A, np.zeros(len(A)))
    with pytest.raises(InputError, match="continuous"):
        KernelPCRClassifier(n_components=3, degree=2).fit(A, A[:, 0])


# k-Space's paper settings scaled down (m/k = 2, r/k = 4, a row sample): the
# library's own sample must be cut into blocks that fit the task budget.
XS = np.random.default_rng(3).normal(size=(3000, 8))
YS = XS[:, 0] * XS[:, 1] * XS[:, 2] + XS[:, 3] ** 2
PAPER_LIKE = {"n_components": 20, "sketch_dim": 40, "embed_size": 80, "sample": 2000, "degree": 3,
              "gamma": 0.5, "random_state": 0}


def _sketch_pass_bytes_per_row(m, r, d=8, degree=3):
    return 8.0 * (d + 4 * degree * (m + r))


def test_sampled_fit_is_split_into_blocks_within_the_task_budget():
    import dask

    from distsketch.errors import MemoryBudgetError
    from distsketch.graph import reduce_blocks
    from distsketch.summaries.kspace import SketchGram

    with dask.config.set({"distsketch.task-memory": "1GiB"}):
        whole = KernelPCR(**PAPER_LIKE).fit(XS, YS)            # the sample is one block here
    per_row = _sketch_pass_bytes_per_row(40, 80)
    with dask.config.set({"distsketch.task-memory": "8MiB"}):
        # the sample as one task would exceed this budget (what raised before) ...
        assert 2000 * per_row > 8 * 2**20
        km = whole.kspace_
        with pytest.raises(MemoryBudgetError):
            reduce_blocks(SketchGram(km.sketch_S_._map_block, km.sketch_T_._map_block),
                          XS[:2000], block_rows=2000, footprint=Footprint(per_row=per_row))
        # ... but the fit plans blocks of the sample and of X that fit, with the same answer
        blocked = KernelPCR(**PAPER_LIKE).fit(XS, YS)
    assert blocked.kspace_.n_samples_seen_ == whole.kspace_.n_samples_seen_ == 2000
    np.testing.assert_allclose(blocked.kspace_.singular_values_, whole.kspace_.singular_values_,
                               rtol=1e-9)
    Vb, Vw = blocked.kspace_.transform(XS), whole.kspace_.transform(XS)
    # the same k-dimensional subspace (a rotation within it would not change the regression)
    np.testing.assert_allclose(Vb @ (Vb.T @ XS[:, :3]), Vw @ (Vw.T @ XS[:, :3]), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(blocked.predict(XS), whole.predict(XS), rtol=1e-7, atol=1e-8)
    # and the blocked fit is still a good regression (the unblocked one's R² to 1e-9)
    assert abs(blocked.score(XS, YS) - whole.score(XS, YS)) < 1e-9


def test_sketch_pass_that_no_block_fits_names_the_sketch_sizes():
    import dask

    from distsketch.errors import MemoryBudgetError

    # blocks go down to one row, so the budget is below the sketch memory of one row
    assert _sketch_pass_bytes_per_row(40, 80) > 8 * 2**10
    with dask.config.set({"distsketch.task-memory": "8KiB"}), \
            pytest.raises(MemoryBudgetError, match="sketch_dim m=40, embed_size r=80"):
        KSpaceKernelPCA(**{k: v for k, v in PAPER_LIKE.items()}).fit(XS)
