"""The ``distsketch`` CLI driven as a subprocess: ingest -> fit -> transform ->
evaluate, any estimator by name, and ``quickstart`` with a small --rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch import RandomFourierFeatures, StreamingKernelPCA
from distsketch.io import load, open_array, read_manifest
from distsketch.metrics import kernel_errors

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning")]

CLI = [sys.executable, "-c", "import sys; from distsketch.cli import main; sys.exit(main())"]


def run(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    res = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                         timeout=timeout, env=env)
    assert res.returncode == 0, f"exit {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return res


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, np.ndarray]:
    d = tmp_path_factory.mktemp("cli")
    X = np.random.default_rng(5).normal(size=(3000, 8)).astype(np.float32)
    np.save(d / "x.npy", X)
    return d, X


def test_pipeline_ingest_fit_transform_evaluate(data):
    d, X = data
    res = run("ingest", d / "x.npy", d / "x.zarr", "--chunk-rows", "500", "--progress")
    assert "3000 rows x 8 features" in res.stdout
    assert "ingest x.npy: done" in res.stderr  # progress output
    np.testing.assert_array_equal(open_array(str(d / "x.zarr")).compute(), X)

    res = run("fit", d / "x.zarr", d / "model.zarr", "--cluster", "threads", "--n-components",
              "3", "--n-random-features", "128", "--sketch-size", "16", "--random-state", "4",
              "--gamma", "median", "--progress")
    assert "fitted StreamingKernelPCA on 3000 rows" in res.stdout
    assert "gamma =" in res.stderr and "fitting StreamingKernelPCA" in res.stderr
    model = load(d / "model.zarr")
    assert isinstance(model, StreamingKernelPCA) and model.n_samples_seen_ == 3000
    assert model.components_.shape == (3, 128) and model.seed_ == 4
    assert model.gamma == "median"  # resolved by the estimator's fit, as in Python
    info = zarr.open_group(str(d / "model.zarr")).attrs["info"]
    assert info["input_fingerprint"]["shape"] == [3000, 8]
    # the same fit in this process gives the same sketch (same chunking, same seed)
    ref = StreamingKernelPCA(n_components=3, n_random_features=128, sketch_size=16, random_state=4,
                             gamma="median").fit(open_array(str(d / "x.zarr")))
    np.testing.assert_array_equal(ref.sketch_, model.sketch_)

    run("transform", d / "model.zarr", d / "x.zarr", d / "emb.zarr", "--cluster", "sync")
    emb = zarr.open_array(str(d / "emb.zarr"), path="X", mode="r")[...]
    np.testing.assert_array_equal(emb, model.transform(X))
    assert read_manifest(d / "emb.zarr")["model_class"] == "StreamingKernelPCA"

    res = run("evaluate", d / "model.zarr", d / "x.zarr", "--json", "--n-sample", "400",
              "--cluster", "sync")
    got = json.loads(res.stdout)  # stdout holds only the JSON
    want = kernel_errors(X, model, "rbf", gamma=model.gamma_, n_sample=400, random_state=0)
    for key in ("spectral", "frobenius", "relative_frobenius"):
        assert got[key] == pytest.approx(want[key], rel=1e-9)
    assert got["n_sample"] == 400 and 0 < got["relative_frobenius"] < 1


def test_evaluate_table_output(data, capsys):
    d, X = data
    from distsketch.io import ingest

    ingest(d / "x.npy", d / "t.zarr", chunk_rows=1000)
    model = StreamingKernelPCA(n_components=2, n_random_features=64, sketch_size=8, gamma=0.1,
                               random_state=0).fit(X)
    model.save(d / "t-model.zarr")
    assert cli.main(["evaluate", str(d / "t-model.zarr"), str(d / "t.zarr"), "--n-sample",
                     "300", "--cluster", "sync"]) == 0
    out = capsys.readouterr().out
    want = kernel_errors(X, model, "rbf", gamma=0.1, n_sample=300, random_state=0)
    assert f"{want['spectral']:.4e}" in out and f"{want['frobenius']:.4e}" in out


def test_fit_any_estimator_by_name(data):
    d, X = data
    np.save(d / "y.npy", X[:, 0])
    # in process (the subprocess path is covered by the pipeline test)
    assert cli.main(["ingest", str(d / "x.npy"), str(d / "named.zarr"), "--chunk-rows",
                     "1000"]) == 0
    assert cli.main(["fit", str(d / "named.zarr"), str(d / "rff.zarr"), "--method",
                     "RandomFourierFeatures", "--param", "n_components=32", "--param",
                     "gamma=0.5", "--random-state", "1", "--cluster", "sync"]) == 0
    rff = load(d / "rff.zarr")
    assert isinstance(rff, RandomFourierFeatures)
    assert rff.n_components == 32 and rff.gamma == 0.5 and rff.seed_ == 1
    assert cli.main(["transform", str(d / "rff.zarr"), str(d / "named.zarr"),
                     str(d / "feat.zarr"), "--cluster", "sync", "--chunk-rows", "700"]) == 0
    feat = zarr.open_array(str(d / "feat.zarr"), path="X", mode="r")
    assert feat.chunks[0] == 700
    want = RandomFourierFeatures(n_components=32, gamma=0.5, random_state=1).fit(X).transform(X)
    np.testing.assert_array_equal(feat[...], want)


def test_help_of_every_command(capsys):
    for name in cli.SUBCOMMANDS[:-1]:  # "run" belongs to the workflow module
        with pytest.raises(SystemExit) as info:
            cli.main([name, "--help"])
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert "--cluster" in out and "--progress" in out, name
    res = run("--help")
    for name in ("ingest", "fit", "transform", "evaluate", "quickstart"):
        assert name in res.stdout


def test_missing_subcommand_module_does_not_break_others(monkeypatch, capsys):
    import importlib

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "distsketch.cli.evaluate":
            raise ModuleNotFoundError("gone", name=name)
        if name == "distsketch.cli.transform":
            raise ImportError("broken dependency")
        return real(name, *a, **k)

    monkeypatch.setattr(cli.importlib, "import_module", fake)
    parser = cli.build_parser()
    choices = parser._subparsers._group_actions[0].choices
    assert "evaluate" not in choices and "fit" in choices and "transform" in choices
    assert cli.main(["transform", "m", "i", "o"]) == 2
    assert "the 'transform' command cannot be loaded" in capsys.readouterr().err


def test_quickstart_small(tmp_path, capsys, monkeypatch):
    out = tmp_path / "qs"
    args = ("quickstart", "--rows", "10000", "--out", out, "--n-random-features", "256",
            "--sketch-size", "32", "--n-sample", "500", "--chunk-rows", "2500")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    res = run(*args)  # default --cluster: the embedded local cluster
    report = json.loads((out / "report.json").read_text())
    assert report["rows"] == 10000 and report["workers"] >= 1 and not report["data_reused"]
    # the report names what ran the job, not the absent option
    assert report["cluster"] == "local"
    assert f"cluster       local ({report['workers']} worker(s))" in res.stdout
    assert report["peak_memory_bytes"] > 0
    for stage_name in ("generate data", "fit", "embed", "evaluate", "total"):
        assert report["seconds"][stage_name] >= 0
    assert "kernel error" in res.stdout and "peak memory" in res.stdout
    emb = zarr.open_array(str(out / "embeddings.zarr"), path="X", mode="r")
    assert emb.shape == (10000, 10)
    model = load(out / "model.zarr")
    X = open_array(str(out / "data.zarr"))
    np.testing.assert_array_equal(emb[:500], model.transform(X[:500].compute()))
    errs = report["kernel_errors"]
    # a rank-10 approximation from m=256 features: far better than G~ = 0 (relative error 1)
    assert 0 < errs["relative_frobenius"] < 0.5
    assert errs["spectral"] <= 1.0 and errs["frobenius"] <= 1.0 / 500
    # a second run reuses the complete data set
    mtime = (out / "data.zarr" / "zarr.json").stat().st_mtime_ns
    assert cli.main([*map(str, args), "--cluster", "sync"]) == 0  # in process: cheaper
    report = json.loads((out / "report.json").read_text())
    assert report["data_reused"] and report["cluster"] == "sync" and report["workers"] == 0
    assert report["workers_peak_memory_bytes"] is None  # no cluster attached
    assert (out / "data.zarr" / "zarr.json").stat().st_mtime_ns == mtime
    text = capsys.readouterr().out
    assert "(reused)" in text and "cluster       sync (no workers: a local Dask scheduler)" in text


def test_quickstart_records_the_scheduler_from_the_environment(tmp_path, capsys, monkeypatch):
    from distributed import LocalCluster

    out = tmp_path / "qs"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as running:
        # without --cluster, DASK_SCHEDULER_ADDRESS names the scheduler to use
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", running.scheduler_address)
        assert cli.main(["quickstart", "--rows", "2000", "--features", "50", "--out", str(out),
                         "--n-random-features", "64", "--sketch-size", "16", "--n-components",
                         "4", "--n-sample", "200", "--chunk-rows", "500", "--no-progress"]) == 0
        n_workers = len(running.scheduler_info["workers"])
    report = json.loads((out / "report.json").read_text())
    assert report["cluster"] == running.scheduler_address and report["workers"] == n_workers == 1
    text = capsys.readouterr().out
    assert f"cluster       {running.scheduler_address} (1 worker(s))" in text
