"""The scripts in examples/ run as documented, at laptop sizes, and give right answers.

The digits pipeline is checked against scikit-learn's RBFSampler + RidgeClassifier
at the same features, gamma and alpha; the nightly workflow's incremental result
against one fit on all rows; the SLURM example is validated without a batch
system (its specs load, its job script renders, its shell script parses); it
runs under a real SLURM in tests/cluster/real/test_real_slurm.py.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def load_script(path: Path):
    """Import an example script as a module (its ``main`` is not run on import)."""
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_pipeline_from_files_to_scored_predictions(tmp_path):
    from sklearn.datasets import load_digits

    digits = load_script(EXAMPLES / "digits_pipeline.py")
    result = digits.main(["--workdir", str(tmp_path / "run"), "--n-components", "512"])

    # pixels in [0, 1] over 64 features: squared distances of a few units to tens
    assert 0.01 < result["gamma"] < 1.0
    assert result["n_train"] + result["n_test"] == len(load_digits().target)
    # predictions went through Zarr and agree with model.score on the same rows
    assert (tmp_path / "run" / "predictions.zarr").exists()
    assert result["accuracy"] == pytest.approx(result["score"], abs=1e-12)
    # the same estimator as scikit-learn's RBFSampler + RidgeClassifier at equal features,
    # gamma and alpha: the accuracies differ only by the random features drawn (a few
    # test images of 450)
    assert result["accuracy"] >= 0.95
    assert abs(result["accuracy"] - result["sklearn_accuracy"]) <= 0.03


def test_median_gamma_of_the_digits_example_is_the_median_heuristic():
    digits = load_script(EXAMPLES / "digits_pipeline.py")
    X = np.random.default_rng(0).normal(size=(50, 3))
    d2 = [np.sum((X[i] - X[j]) ** 2) for i in range(50) for j in range(i + 1, 50)]
    assert digits.median_gamma(X, n_sample=50) == pytest.approx(1.0 / np.median(d2), rel=1e-12)


def test_nightly_workflow_is_incremental_and_equals_one_fit(tmp_path, capsys):
    from distsketch import StreamingKernelPCA, load, open_array
    from distsketch.workflow import load_workflow_spec

    nightly = load_script(EXAMPLES / "nightly" / "nightly.py")
    root = tmp_path / "nightly"
    run = ["--root", str(root), "--cluster", "sync"]

    assert nightly.main([*run, "--simulate-day", "1500"]) == 0
    assert "full: rows 0 -> 1500" in capsys.readouterr().out
    assert nightly.main(run) == 0
    assert "up-to-date: rows 1500 -> 1500" in capsys.readouterr().out
    assert nightly.main([*run, "--simulate-day", "700"]) == 0
    assert "incremental: rows 1500 -> 2200" in capsys.readouterr().out

    # the day's rows were appended, not replaced
    X = np.asarray(open_array(str(root / "data" / "X.zarr::X")), dtype=np.float64)
    np.testing.assert_array_equal(X[:1500], nightly.day_rows(0, 1500))
    np.testing.assert_array_equal(X[1500:], nightly.day_rows(1500, 700))

    # RNCA folds rows into the exact feature covariance: the incremental model equals one
    # fit on all rows up to floating-point summation order
    params = load_workflow_spec(EXAMPLES / "nightly" / "nightly.yaml", base=root).method.params
    once = StreamingKernelPCA(**params, random_state=0).fit(X)
    model = load(str(root / "runs" / "nightly" / "result" / "model.zarr"))
    Z_once, Z_nightly = np.asarray(once.transform(X[:200])), np.asarray(model.transform(X[:200]))
    # eigenvectors are defined up to sign: compare column by column
    signs = np.sign(np.sum(Z_once * Z_nightly, axis=0))
    np.testing.assert_allclose(Z_nightly * signs, Z_once, atol=1e-6 * np.abs(Z_once).max())


def test_nightly_script_reports_a_distsketch_error_with_exit_status_2(tmp_path, capsys):
    nightly = load_script(EXAMPLES / "nightly" / "nightly.py")
    assert nightly.main(["--root", str(tmp_path / "empty"), "--cluster", "sync"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nightly: error: ") and "X.zarr" in err
    assert not (tmp_path / "empty" / "runs" / "nightly" / "result").exists()


def test_slurm_example_specs_load_and_the_job_scripts_are_valid(tmp_path):
    from distsketch.cluster import load_spec, render_job_script
    from distsketch.workflow import load_workflow_spec

    slurm = EXAMPLES / "slurm"
    cluster = load_spec(slurm / "cluster.yaml")
    assert cluster["kind"] == "slurm"
    script = render_job_script(cluster)
    assert "#SBATCH -p normal" in script and "--exclusive" in script
    assert "source ~/venvs/distsketch/bin/activate" in script

    spec = load_workflow_spec(slurm / "skpca.yaml")
    assert Path(spec.cluster) == slurm / "cluster.yaml"     # resolved next to the spec
    assert spec.method.name == "StreamingKernelPCA"

    submit = (slurm / "submit.sh").read_text()
    assert subprocess.run(["bash", "-n", str(slurm / "submit.sh")]).returncode == 0
    # the driver runs the files that are here, under the names it uses
    for name in ("skpca.yaml", "cluster.yaml"):
        assert f'"$here/{name}"' in submit
    # without its argument the driver stops before doing anything
    fake = tmp_path / "repo"
    shutil.copytree(slurm, fake / "examples" / "slurm")
    venv = tmp_path / "home" / "venvs" / "distsketch" / "bin"
    venv.mkdir(parents=True)
    (venv / "activate").write_text("")
    done = subprocess.run(["bash", str(fake / "examples" / "slurm" / "submit.sh")], cwd=fake,
                          env={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)
    assert done.returncode != 0 and "usage: sbatch examples/slurm/submit.sh" in done.stderr
    assert not (fake / "examples" / "slurm" / "data").exists()


def test_dagster_example_loads_with_the_installed_dagster():
    # Dagster is optional and heavy: this test runs where it installs
    dg = pytest.importorskip("dagster")
    module = load_script(ROOT / "workflows" / "orchestrators" / "dagster_skpca.py")
    assert isinstance(module.defs, dg.Definitions)
    assert module.SPEC == ROOT / "workflows" / "skpca.yaml" and module.SPEC.exists()
    assert module.nightly.cron_schedule == "30 2 * * *"
    assert sys.modules.get("dagster") is dg
