"""kernel_errors / relative_kernel_error against direct NumPy computations."""

import dask.array as da
import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.metrics import kernel_errors, relative_kernel_error, sample_rows
from distsketch.ops.kernels import pairwise_kernel


class _Shifted:
    """Approximation G̃ = G - delta * (a aᵀ) with a known error."""

    def __init__(self, delta, gamma):
        self.delta, self.gamma = delta, gamma

    def kernel_approx(self, A, B=None):
        B = A if B is None else B
        a = np.cos(A[:, 0])
        b = np.cos(B[:, 0])
        return pairwise_kernel(A, B, "rbf", gamma=self.gamma) - self.delta * np.outer(a, b)


def test_errors_exact_small():
    X = np.random.default_rng(0).normal(size=(300, 4))
    approx = _Shifted(0.01, 0.2)
    out = kernel_errors(X, approx, "rbf", gamma=0.2, n_sample=None)
    a = np.cos(X[:, 0])
    E = 0.01 * np.outer(a, a)  # rank one: ‖E‖₂ = ‖E‖_F = δ‖a‖²
    n = X.shape[0]
    assert out["n_sample"] == n
    assert out["spectral"] == pytest.approx(np.linalg.norm(E, 2) / n, rel=1e-9)
    assert out["frobenius"] == pytest.approx(np.linalg.norm(E) / n**2, rel=1e-9)
    G = pairwise_kernel(X, X, "rbf", gamma=0.2)
    assert out["relative_frobenius"] == pytest.approx(np.linalg.norm(E) / np.linalg.norm(G), rel=1e-9)
    assert relative_kernel_error(X, approx, "rbf", gamma=0.2, n_sample=None) == pytest.approx(
        out["relative_frobenius"], rel=1e-9)


def test_tiled_path_equals_dense_path():
    # 4500 rows exceeds the dense limit: tiles + Lanczos must agree with NumPy
    X = np.random.default_rng(1).normal(size=(4500, 3))
    approx = _Shifted(0.05, 0.5)
    out = kernel_errors(X, approx, "rbf", gamma=0.5, n_sample=None, tile=1000)
    a = np.cos(X[:, 0])
    nrm = 0.05 * a @ a
    assert out["spectral"] == pytest.approx(nrm / 4500, rel=1e-6)
    assert out["frobenius"] == pytest.approx(nrm / 4500**2, rel=1e-9)


def test_row_sample_is_chunking_independent_and_uniform():
    X = np.arange(20_000, dtype=np.float64).reshape(-1, 2)
    i1, r1 = sample_rows(X, 500, 3)
    i2, r2 = sample_rows(da.from_array(X, chunks=(777, 2)), 500, 3)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(r1, r2)
    assert len(np.unique(i1)) == 500
    # uniform: sample mean of indices near n/2 (sd of mean ≈ n/sqrt(12·500))
    assert abs(i1.mean() - 5000) < 4 * 10_000 / np.sqrt(12 * 500)


def test_bad_sample_size():
    with pytest.raises(ConfigError):
        kernel_errors(np.ones((5, 2)), _Shifted(0, 1), n_sample=1)


# ----------------------------------------------------------------- sampled estimates of full-data measures

@pytest.fixture(scope="module")
def nystrom_case():
    from distsketch import NystromFeatures

    n = 2000
    X = np.random.default_rng(0).normal(size=(n, 4))
    model = NystromFeatures(n_landmarks=20, gamma=0.3, random_state=0).fit(X)
    G = pairwise_kernel(X, X, "rbf", gamma=0.3)
    E = G - model.kernel_approx(X)
    return X, model, G, E, kernel_errors(X, model, n_sample=None)


def test_sampled_frobenius_estimates_the_full_data_measure(nystrom_case):
    X, model, G, E, exact = nystrom_case
    n, s = X.shape[0], 500
    assert not exact["sampled"] and exact["n_rows"] == n == exact["n_sample"]
    assert exact["frobenius"] == pytest.approx(np.linalg.norm(E) / n**2, rel=1e-9)
    est = kernel_errors(X, model, n_sample=s)
    assert est["sampled"] and est["n_sample"] == s and est["n_rows"] == n
    # sampling error of the sample mean of squared entries (a U-statistic of order 2):
    # Var ≈ 4ζ₁/s + 2ζ₂/s², ζ₁ the variance of the row means, ζ₂ of the entries
    off = ~np.eye(n, dtype=bool)
    E2 = E**2
    mu = E2[off].mean()
    zeta1 = (np.where(off, E2, 0).sum(axis=1) / (n - 1)).var()
    zeta2 = E2[off].var()
    rel_sd = 0.5 * np.sqrt(4 * zeta1 / s + 2 * zeta2 / s**2) / mu  # of the square root
    assert abs(est["frobenius"] / exact["frobenius"] - 1) < 4 * rel_sd
    assert 4 * rel_sd < 0.5  # the test can tell the s/n-scaled answer (4× here) apart
    G2 = G**2
    rel_sd_g = 0.5 * np.sqrt(4 * (np.where(off, G2, 0).sum(axis=1) / (n - 1)).var() / s) / G2[off].mean()
    assert abs(est["relative_frobenius"] / exact["relative_frobenius"] - 1) < 4 * (rel_sd + rel_sd_g)
    assert relative_kernel_error(X, model, n_sample=s) == pytest.approx(est["relative_frobenius"],
                                                                         rel=1e-12)


def test_sampled_spectral_estimates_the_full_data_measure(nystrom_case):
    # E of a Nyström map is a positive semi-definite kernel k_E with k_E(x, x) <= κ: the
    # eigenvalues of a uniform s-row block divided by s concentrate at those of E / n
    # within about κ·sqrt(2 log(2/δ) / s) (Shawe-Taylor et al. 2005); δ = 1e-3
    X, model, _, E, exact = nystrom_case
    kappa = np.diag(E).max()
    for seed in (0, 1):
        est = kernel_errors(X, model, n_sample=500, random_state=seed)["spectral"]
        assert abs(est - exact["spectral"]) < kappa * np.sqrt(2 * np.log(2 / 1e-3) / 500)


# ----------------------------------------------------------------- the model's own kernel

def test_kernel_comes_from_the_model():
    from distsketch import (
        KernelPCR,
        RandomFourierFeatures,
        SketchedKernelRidge,
        StreamingKernelPCA,
        TensorSketch,
    )
    from distsketch.metrics import model_kernel

    X = np.random.default_rng(3).normal(size=(300, 4))
    skpca = StreamingKernelPCA(n_components=3, n_random_features=128, sketch_size=16, gamma=0.05,
                               random_state=0).fit(X)
    got = kernel_errors(X, skpca, n_sample=None)
    G = pairwise_kernel(X, X, "rbf", gamma=0.05)
    assert got["frobenius"] == pytest.approx(np.linalg.norm(G - skpca.kernel_approx(X)) / 300**2,
                                             rel=1e-9)
    assert got["kernel"] == "rbf" and got["kernel_params"] == {"gamma": 0.05}
    # the same arguments given explicitly (an alias of the name too) agree with the model
    assert kernel_errors(X, skpca, "gaussian", gamma=0.05, n_sample=None) == got
    with pytest.raises(ConfigError, match=r"gamma=0.25 contradicts StreamingKernelPCA's gamma=0.05"):
        kernel_errors(X, skpca, gamma=0.25, n_sample=None)
    with pytest.raises(ConfigError, match="kernel='laplacian' contradicts"):
        relative_kernel_error(X, skpca, "laplacian", n_sample=None)

    ts = TensorSketch(n_components=256, degree=3, gamma=0.5, coef0=1.0, random_state=0).fit(X)
    P = pairwise_kernel(X, X, "polynomial", gamma=0.5, coef0=1.0, degree=3)
    ref = np.linalg.norm(P - ts.kernel_approx(X)) / np.linalg.norm(P)
    assert relative_kernel_error(X, ts, n_sample=None) == pytest.approx(ref, rel=1e-9)
    with pytest.raises(ConfigError, match="degree=2 contradicts"):
        relative_kernel_error(X, ts, degree=2, n_sample=None)

    y = X[:, 0]
    ridge = SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.3, n_components=64,
                                                               random_state=0)).fit(X, y)
    assert model_kernel(ridge) == {"kernel": "rbf", "gamma": 0.3}
    pcr = KernelPCR(n_components=5, degree=2, gamma=0.5, coef0=2.0, random_state=0).fit(X, y)
    assert model_kernel(pcr) == {"kernel": "polynomial", "gamma": 0.5, "coef0": 2.0, "degree": 2}
    # an object that names no kernel: the arguments (default rbf, 1 / n_features)
    assert model_kernel(_Shifted(0.0, 0.25)) is None


# ----------------------------------------------------------------- a model saved with its preprocessing

def _scaled_pipeline(X, est):
    """``Pipeline([("scale", Standardizer), ("model", est fitted on the scaled rows)])``."""
    from distsketch.workflow.preprocess import Standardizer, with_preprocessing

    mean, std = X.mean(axis=0), X.std(axis=0)
    est.fit((X - mean) / std, X[:, 0])
    pipe = with_preprocessing(est, {"mean": mean.tolist(), "scale": std.tolist()}, X.shape[0])
    assert isinstance(pipe.steps[0][1], Standardizer)
    return pipe, (X - mean) / std


@pytest.mark.parametrize("kind", ["skpca", "ridge"])
def test_pipeline_is_evaluated_on_its_transformed_rows(kind):
    from sklearn.pipeline import Pipeline

    from distsketch import RandomFourierFeatures, SketchedKernelRidge, StreamingKernelPCA
    from distsketch.metrics import model_kernel

    # columns on very different scales: the raw rows' kernel is far from the scaled rows'
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 4)) * np.array([1.0, 10.0, 0.1, 50.0]) + 3.0
    if kind == "skpca":
        est = StreamingKernelPCA(n_components=4, n_random_features=256, sketch_size=24,
                                 gamma=0.2, random_state=0)
    else:
        est = SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.2, n_components=128,
                                                                 random_state=0))
    pipe, Z = _scaled_pipeline(X, est)
    assert isinstance(pipe, Pipeline)
    assert model_kernel(pipe) == {"kernel": "rbf", "gamma": 0.2}

    # exact reference: the Gaussian kernel of the standardised rows, in NumPy
    sq = np.einsum("ij,ij->i", Z, Z)
    G = np.exp(-0.2 * np.maximum(sq[:, None] + sq[None, :] - 2.0 * Z @ Z.T, 0.0))
    E = G - est.kernel_approx(Z)
    n = X.shape[0]
    got = kernel_errors(X, pipe, n_sample=None)
    assert got["kernel"] == "rbf" and got["kernel_params"] == {"gamma": 0.2}
    assert got["frobenius"] == pytest.approx(np.linalg.norm(E) / n**2, rel=1e-9)
    assert got["relative_frobenius"] == pytest.approx(np.linalg.norm(E) / np.linalg.norm(G),
                                                      rel=1e-9)
    assert got["spectral"] == pytest.approx(np.abs(np.linalg.eigvalsh(E)).max() / n, rel=1e-9)
    assert relative_kernel_error(X, pipe, n_sample=None) == pytest.approx(
        got["relative_frobenius"], rel=1e-9)
    # a sampled estimate maps the same sampled rows: equal to the bare model on scaled rows
    sampled = kernel_errors(X, pipe, n_sample=150, random_state=3)
    bare = kernel_errors(Z, est, n_sample=150, random_state=3)
    for key in ("spectral", "frobenius", "relative_frobenius"):
        assert sampled[key] == pytest.approx(bare[key], rel=1e-9)
    # a contradicting argument is checked against the last step's kernel
    name = type(est).__name__
    with pytest.raises(ConfigError, match=rf"gamma=0.5 contradicts {name}'s gamma=0.2"):
        kernel_errors(X, pipe, gamma=0.5, n_sample=None)


def test_pipeline_without_a_kernel_approximation_is_refused():
    from sklearn.linear_model import Ridge

    X = np.random.default_rng(8).normal(size=(50, 3))
    pipe, _ = _scaled_pipeline(X, Ridge())
    with pytest.raises(ConfigError, match=r"last step 'model' \(Ridge\) of the Pipeline cannot "
                                          "approximate a kernel"):
        kernel_errors(X, pipe, n_sample=None)
    with pytest.raises(ConfigError, match="Ridge cannot approximate a kernel"):
        relative_kernel_error(X, Ridge().fit(X, X[:, 0]), n_sample=None)


def test_maps_without_a_kernel_parameter_declare_their_kernel():
    from distsketch import SRHT, CountSketch, DatabaseFriendlyProjection, GaussianSketch
    from distsketch.metrics import model_kernel

    X = np.random.default_rng(4).normal(size=(40, 5))
    for cls in (CountSketch, SRHT, DatabaseFriendlyProjection):
        assert model_kernel(cls(n_components=8, random_state=0).fit(X)) == {"kernel": "linear"}
    gs = GaussianSketch(n_components=32, gamma=0.125, random_state=0).fit(X)
    assert model_kernel(gs) == {"kernel": "rbf", "gamma": 0.125}
