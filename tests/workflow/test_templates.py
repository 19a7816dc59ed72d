"""The shipped workflow templates start from the estimators' defaults.

A template that fixes ``alpha`` or ``gamma`` hands every user a value chosen
for no data in particular; the defaults choose them on the user's data (the
kernel ridge models by leave-one-out), and scored better on real tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

import distsketch
from distsketch import SketchedKernelRidgeClassifier
from distsketch.workflow import load_workflow_spec, run_workflow

WORKFLOWS = Path(__file__).parents[2] / "workflows"
SEED = 0  # the templates' seed


def params_of(name: str) -> dict:
    return load_workflow_spec(WORKFLOWS / name).method.params


@pytest.mark.parametrize("name", ["krr.yaml", "krr_classifier.yaml"])
def test_kernel_ridge_templates_leave_alpha_and_gamma_to_the_estimator(name: str) -> None:
    params = params_of(name)
    # a features block would fix the map's gamma (and width) too
    assert not {"alpha", "alphas", "gamma", "gammas", "features"} & set(params), params


@pytest.mark.parametrize("name", ["skpca.yaml", "meka.yaml"])
def test_kernel_approximation_templates_leave_gamma_to_the_estimator(name: str) -> None:
    assert "gamma" not in params_of(name)


def test_classifier_template_fits_the_default_classifier(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    U = rng.uniform(-1.5, 1.5, size=(500, 2))
    y = np.where(np.hypot(U[:, 0], U[:, 1]) < 0.7, 0, np.where(U[:, 0] > 0, 1, 2))
    X = (U * [30.0, 0.01] + [5.0, -2.0]).astype(np.float32)
    for key, a in (("X", X), ("y", y.astype(np.int64))):
        arr = zarr.create_array(store=str(tmp_path / f"{key}.zarr"), shape=a.shape,
                                dtype=a.dtype, chunks=(250, *a.shape[1:]))
        arr[...] = a
    spec = yaml.safe_load((WORKFLOWS / "krr_classifier.yaml").read_text())
    # only where the data and results are and the cluster change
    spec.update({"input": str(tmp_path / "X.zarr"), "targets": str(tmp_path / "y.zarr"),
                 "cluster": "sync", "outputs": {**spec["outputs"], "dir": str(tmp_path / "out")},
                 "report": {**spec["report"], "png": False}})
    res = run_workflow(spec, log=lambda message: None)
    model = distsketch.load(res.result_dir / "model.zarr")[-1]
    # the workflow standardises in float64 moments, applied in the input's dtype
    mean, std = X.astype(np.float64).mean(axis=0), X.astype(np.float64).std(axis=0)
    Xs = ((X - mean.astype(X.dtype)) / std.astype(X.dtype)).astype(X.dtype)
    ref = SketchedKernelRidgeClassifier(random_state=SEED).fit(Xs, y)
    assert model.alpha_ == pytest.approx(ref.alpha_, rel=1e-6)
    assert model.gamma_ == pytest.approx(ref.gamma_, rel=1e-6)
    np.testing.assert_array_equal(model.predict(Xs), ref.predict(Xs))
