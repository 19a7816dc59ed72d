"""Polynomial sketch transformers: chunking invariance (rows and columns), sparse and dask
input, float32, parameter errors, kernel error vs the exact kernel and vs scikit-learn."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.kernel_approximation import PolynomialCountSketch

from distsketch.errors import ConfigError
from distsketch.estimators.features.polynomial import SRHT, CountSketch, PolySketch, TensorSketch, TensorSRHT
from distsketch.metrics import relative_kernel_error
from distsketch.ops.countsketch import countsketch_hashes

RNG = np.random.default_rng(0)
X = RNG.normal(size=(157, 12)) / np.sqrt(12)


def _make(name, **kw):
    common = {"n_components": 64, "random_state": 3, **kw}
    if name == "countsketch":
        return CountSketch(**common)
    if name == "srht":
        return SRHT(n_components=16, random_state=3)
    poly = {"degree": 3, "gamma": 0.5, "coef0": 1.0, **common}
    return {"tensorsketch": TensorSketch, "tensorsrht": TensorSRHT}.get(name, PolySketch)(
        **({**poly, "base": name.split("-")[1]} if name.startswith("poly") else poly))


NAMES = ["countsketch", "srht", "tensorsketch", "tensorsrht", "poly-srht", "poly-tensorsketch"]
REF = {name: _make(name).fit(X).transform(X) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=6, deadline=None)
@given(rows=st.integers(1, 157))
def test_row_chunking_bitwise_invariant(name, rows):
    est = _make(name).fit(X)
    out = est.transform(da.from_array(X, chunks=(rows, 12)))
    assert isinstance(out, da.Array)
    np.testing.assert_array_equal(out.compute(), REF[name])


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=4, deadline=None)
@given(cols=st.integers(1, 11), rows=st.integers(20, 157))
def test_column_chunking_changes_nothing(name, cols, rows):
    # linear stages summed over column blocks before the nonlinear stage
    est = _make(name).fit(X)
    out = est.transform(da.from_array(X, chunks=(rows, cols))).compute()
    np.testing.assert_allclose(out, REF[name], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_sparse_and_float32(name):
    est = _make(name).fit(X)
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.3, X, 0.0))
    np.testing.assert_allclose(est.transform(Xs), est.transform(Xs.toarray()), atol=1e-12)
    Z32 = est.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, REF[name], atol=2e-4 * max(1.0, np.abs(REF[name]).max()))


def test_integer_data_column_chunks_bitwise():
    # with integer-valued data every partial sum is exact, so column blocking is bitwise neutral
    Xi = np.random.default_rng(1).integers(-3, 4, size=(40, 30)).astype(np.float64)
    est = TensorSketch(degree=2, n_components=32, random_state=0).fit(Xi)
    np.testing.assert_array_equal(est.transform(da.from_array(Xi, chunks=(13, 7))).compute(),
                                  est.transform(Xi))


def test_tensorsketch_is_countsketch_of_explicit_phi_with_coef0_and_gamma():
    # φ(x) = x'^{⊗2}, x' = (sqrt(γ) x, sqrt(c)); H = h1 + h2 mod m, S = s1 s2
    gamma, c, m = 0.3, 2.0, 16
    Xs = np.random.default_rng(2).normal(size=(6, 3))
    est = TensorSketch(degree=2, gamma=gamma, coef0=c, n_components=m, random_state=4).fit(Xs)
    xp = np.hstack([np.sqrt(gamma) * Xs, np.full((6, 1), np.sqrt(c))])
    hs = [countsketch_hashes(est.seed_, f"tensorsketch.cs{l}", 0, 4, m) for l in range(2)]
    expect = np.zeros((6, m))
    for i in range(4):
        for j in range(4):
            expect[:, (hs[0][0][i] + hs[1][0][j]) % m] += hs[0][1][i] * hs[1][1][j] * xp[:, i] * xp[:, j]
    np.testing.assert_allclose(est.transform(Xs), expect, atol=1e-12)


@pytest.mark.parametrize(("cls", "kw", "match"), [
    (TensorSketch, {"degree": 0}, "degree"),
    (PolySketch, {"coef0": -1.0}, "coef0"),
    (TensorSRHT, {"gamma": 0.0}, "gamma"),
    (PolySketch, {"base": "fft"}, "base"),
    (CountSketch, {"n_components": 0}, "n_components"),
])
def test_bad_parameters(cls, kw, match):
    with pytest.raises(ConfigError, match=match):
        cls(**kw).fit(X)


def test_srht_size_must_fit_padded_dimension():
    with pytest.raises(ConfigError, match="n_components=17 exceeds the padded input dimension D=16"):
        SRHT(n_components=17).fit(X)


@pytest.mark.parametrize("name", ["tensorsketch", "tensorsrht", "poly-srht", "poly-tensorsketch"])
def test_kernel_error_shrinks_with_m(name):
    # relative Frobenius error of the Gram matrix ~ 1/sqrt(m)
    errs = []
    for m in (128, 2048):
        est = _make(name, n_components=m).fit(X)
        errs.append(relative_kernel_error(X, est, "polynomial", gamma=0.5, coef0=1.0, degree=3,
                                          n_sample=None))
    assert errs[1] < 0.2
    assert errs[0] / errs[1] > 2.0


def test_agrees_with_sklearn_polynomial_count_sketch():
    # same kernel, same m: the error distributions over seeds match (compare means)
    K = (0.5 * X @ X.T + 1.0) ** 3
    ours, theirs = [], []
    for s in range(8):
        Z = TensorSketch(degree=3, gamma=0.5, coef0=1.0, n_components=256, random_state=s).fit_transform(X)
        W = PolynomialCountSketch(degree=3, gamma=0.5, coef0=1.0, n_components=256,
                                  random_state=s).fit_transform(X)
        ours.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
        theirs.append(np.linalg.norm(W @ W.T - K) / np.linalg.norm(K))
    assert 0.6 < np.mean(ours) / np.mean(theirs) < 1.6


def test_unbiased_tensorsrht_estimator():
    # per-block map directly (no graph) to afford many seeds
    x = X[:2]
    vals = np.array([(lambda Z: Z[0] @ Z[1])(
        TensorSRHT(degree=2, gamma=0.5, coef0=1.0, n_components=8, random_state=s).fit(x)._map_block(x, 0))
        for s in range(600)])
    target = (0.5 * x[0] @ x[1] + 1.0) ** 2
    assert abs(vals.mean() - target) < 4 * vals.std() / np.sqrt(600)


def test_same_seed_same_operator_and_feature_names():
    a = PolySketch(degree=4, n_components=32, random_state=9).fit(X).transform(X)
    b = PolySketch(degree=4, n_components=32, random_state=9).fit(X[:10]).transform(X)
    np.testing.assert_array_equal(a, b)
    assert CountSketch(n_components=5, random_state=0).fit(X).get_feature_names_out().shape == (5,)


def test_save_load_roundtrip(tmp_path):
    from distsketch.io.model.store import load

    est = TensorSketch(degree=2, coef0=1.0, n_components=32, random_state=1).fit(X)
    est.save(tmp_path / "ts")
    np.testing.assert_array_equal(load(tmp_path / "ts").transform(X), est.transform(X))


@pytest.mark.parametrize(("est", "d"), [
    (TensorSketch(degree=2, coef0=1.0, n_components=64, random_state=0), 10**6),
    (PolySketch(degree=3, n_components=64, random_state=0), 200_000),
    (CountSketch(n_components=64, random_state=0), 200_000)])
def test_wide_sparse_input_column_chunked(est, d):
    # up to d = 10^6 sparse columns, dask-chunked along columns: same features as the whole CSR matrix
    W = sp.random(40, d, density=20 / d, format="csr", random_state=1)
    est.fit(W)
    ref = est.transform(W)
    Wd = da.from_array(W, chunks=(15, d // 3 + 1), asarray=False, meta=W[:0])
    np.testing.assert_allclose(est.transform(Wd).compute(), ref, atol=1e-12, rtol=0)
    assert np.abs(ref).sum() > 0


@pytest.mark.parametrize("name", NAMES)
def test_in_task_row_slices_change_no_bit(name, monkeypatch):
    # a task sketches its block in cache-sized row slices; force 16-row slices and blocks
    # misaligned with them (50 rows) and compare with the unsliced result
    import distsketch.estimators.features.linear_stage as poly

    monkeypatch.setattr(poly, "_FUSED_BYTES", 0)
    est = _make(name).fit(X)
    assert est._fused_rows(8) == 16
    np.testing.assert_array_equal(est.transform(da.from_array(X, chunks=(50, 12))).compute(), REF[name])
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.2, X, 0.0))
    ref_sparse = _make(name).fit(Xs)
    monkeypatch.setattr(poly, "_FUSED_BYTES", 2**30)
    whole = ref_sparse.transform(Xs)
    monkeypatch.setattr(poly, "_FUSED_BYTES", 0)
    np.testing.assert_array_equal(ref_sparse.transform(Xs), whole)
