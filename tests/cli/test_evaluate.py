"""``distsketch evaluate``: the model's own kernel, sampled estimates said to be estimates."""

from __future__ import annotations

import json

import numpy as np
import pytest

import distsketch.cli as cli
from distsketch import RandomFourierFeatures, SketchedKernelRidge
from distsketch.io import ingest
from distsketch.metrics import kernel_errors

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def ridge(tmp_path_factory):
    d = tmp_path_factory.mktemp("evaluate")
    X = np.random.default_rng(2).normal(size=(1200, 5)).astype(np.float32)  # as ingest stores
    np.save(d / "x.npy", X)
    ingest(d / "x.npy", d / "x.zarr", chunk_rows=400)
    # raw columns: the model's kernel is its feature map's on the stored rows
    model = SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.15, n_components=96,
                                                               random_state=0),
                                standardize=False).fit(X, X[:, 0])
    model.save(d / "ridge.zarr")
    return d, X, model


def test_ridge_model_is_evaluated_with_its_feature_maps_kernel(ridge, capsys):
    d, X, model = ridge
    assert cli.main(["evaluate", str(d / "ridge.zarr"), str(d / "x.zarr"), "--n-sample", "300",
                     "--json", "--cluster", "sync"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = kernel_errors(X, model.features_, "rbf", gamma=0.15, n_sample=300, random_state=0)
    for key in ("spectral", "frobenius", "relative_frobenius"):
        assert got[key] == pytest.approx(want[key], rel=1e-9)
    assert got["kernel"] == "rbf" and got["gamma"] == 0.15
    assert got["sampled"] is True and got["n_sample"] == 300 and got["rows"] == 1200
    assert got["note"] == "estimated from 300 sampled rows of 1200"


def test_table_says_estimated_or_exact(ridge, capsys):
    d, _, _ = ridge
    args = ["evaluate", str(d / "ridge.zarr"), str(d / "x.zarr"), "--cluster", "sync"]
    assert cli.main([*args, "--n-sample", "300"]) == 0
    out = capsys.readouterr().out
    assert "estimated from 300 sampled rows of 1200" in out and "rbf(gamma=0.15)" in out
    assert cli.main([*args, "--n-sample", "5000"]) == 0
    assert "exact, all 1200 rows" in capsys.readouterr().out


def test_contradicting_option_is_an_error(ridge, capsys):
    d, _, _ = ridge
    assert cli.main(["evaluate", str(d / "ridge.zarr"), str(d / "x.zarr"), "--gamma", "0.5",
                     "--n-sample", "100", "--cluster", "sync"]) != 0
    assert "gamma=0.5 contradicts SketchedKernelRidge's gamma=0.15" in capsys.readouterr().err


_SKPCA = {"name": "StreamingKernelPCA",
          "params": {"method": "rnca", "gamma": 0.3, "n_random_features": 64, "n_components": 4}}
# a ridge model's kernel is its feature map's, here with gamma chosen by the median heuristic
_RIDGE = {"name": "SketchedKernelRidge", "params": {"alpha": 1e-2},
          "features": {"name": "RandomFourierFeatures", "n_components": 64, "gamma": "median"}}


@pytest.mark.parametrize("method", [_SKPCA, _RIDGE], ids=["skpca", "ridge"])
def test_workflow_model_with_its_scaler_is_evaluated_on_scaled_rows(method, tmp_path, capsys):
    import zarr
    from sklearn.pipeline import Pipeline

    from distsketch.io import load
    from distsketch.workflow import run_workflow

    # columns on very different scales, so the scaler matters to the kernel
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 4)) * np.array([1.0, 20.0, 0.05, 3.0]) + 2.0
    for name, values in (("X.zarr", X), ("y.zarr", np.sin(X[:, 0]))):
        arr = zarr.create_array(store=str(tmp_path / name), shape=values.shape,
                                dtype=values.dtype, chunks=(150, *values.shape[1:]))
        arr[...] = values
    spec = {"input": str(tmp_path / "X.zarr"), "seed": 1, "preprocessing": {"standardize": True},
            "method": method, "outputs": {"dir": str(tmp_path / "out")}, "cluster": "sync",
            "report": {"kernel_error": False}}
    if "features" in method:
        spec["targets"] = str(tmp_path / "y.zarr")
    res = run_workflow(spec, log=lambda m: None)
    model_path = res.result_dir / "model.zarr"
    pipe = load(model_path)
    assert isinstance(pipe, Pipeline)
    args = ["evaluate", str(model_path), str(tmp_path / "X.zarr"), "--json", "--cluster", "sync"]
    assert cli.main([*args, "--n-sample", "1000"]) == 0  # more than the rows: exact
    got = json.loads(capsys.readouterr().out)

    # NumPy reference: the exact Gaussian kernel of the standardised rows, with the gamma the
    # model holds (the ridge model's is its feature map's, resolved from the median rule)
    scaler, est = pipe.steps[0][1], pipe.steps[-1][1]
    gamma = est.features_.gamma if "features" in method else 0.3
    Z = (X - scaler.mean_) / scaler.scale_
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-9)
    sq = np.einsum("ij,ij->i", Z, Z)
    D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * Z @ Z.T, 0.0)
    if "features" in method:
        # the median heuristic on the scaled rows (all 600 of them: fewer than its sample)
        assert gamma == pytest.approx(1.0 / np.median(D[np.triu_indices(600, k=1)]), rel=1e-9)
    G = np.exp(-gamma * D)
    E = G - est.kernel_approx(Z)
    n = X.shape[0]
    assert got["model_class"] == f"Pipeline(Standardizer, {method['name']})"
    assert got["kernel"] == "rbf" and got["sampled"] is False
    assert got["gamma"] == pytest.approx(gamma, rel=1e-12)
    assert got["frobenius"] == pytest.approx(np.linalg.norm(E) / n**2, rel=1e-9)
    assert got["relative_frobenius"] == pytest.approx(np.linalg.norm(E) / np.linalg.norm(G),
                                                      rel=1e-9)
    assert got["spectral"] == pytest.approx(np.abs(np.linalg.eigvalsh(E)).max() / n, rel=1e-9)
    # an approximation of the scaled rows' kernel: better than G~ = 0, not exact
    assert 0 < got["relative_frobenius"] < 1

    # the contradiction check reads the last step's kernel
    assert cli.main([*args, "--gamma", str(2 * gamma)]) != 0
    assert f"contradicts {method['name']}'s gamma=" in capsys.readouterr().err


def test_model_without_a_kernel_approximation_is_a_clear_error(tmp_path, capsys):
    from sklearn.pipeline import Pipeline

    from distsketch import FrequentDirections
    from distsketch.io.model.store import save_model
    from distsketch.workflow.preprocess import Standardizer

    X = np.random.default_rng(1).normal(size=(200, 3))
    ingest_path = tmp_path / "x.npy"
    np.save(ingest_path, X.astype(np.float32))
    ingest(ingest_path, tmp_path / "x.zarr", chunk_rows=100)
    sketch = FrequentDirections(sketch_size=2).fit(X)  # a matrix sketch: no kernel
    pipe = Pipeline([("scale", Standardizer().fit(X)), ("model", sketch)])
    save_model(pipe, tmp_path / "m.zarr")
    assert cli.main(["evaluate", str(tmp_path / "m.zarr"), str(tmp_path / "x.zarr"),
                     "--cluster", "sync"]) != 0
    err = capsys.readouterr().err
    assert "the last step 'model' (FrequentDirections) of the Pipeline cannot approximate" in err
