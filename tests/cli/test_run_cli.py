"""``distsketch run`` takes the output flags of every command (-q, -v, --json before or after
its name); ``--json`` is one object with the manifest's paths, stage times, score, seed and
peak memory; the final text line states the score.  ``--dashboard`` on every command that
starts a cluster."""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

import distsketch.cli as cli
from distsketch.io import read_manifest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NAME = 'letters "v2"'


def write(path, a, chunk=150):
    arr = zarr.create_array(store=str(path), shape=a.shape, dtype=a.dtype,
                            chunks=(chunk, *a.shape[1:]), overwrite=True)
    arr[...] = a


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    return tmp_path


def classifier_spec(d: Path, **extra) -> Path:
    cfg = {"name": NAME, "input": str(d / "X.zarr"), "targets": str(d / "y.zarr"), "seed": 11,
           "segment_rows": 300, "cluster": "sync",
           "method": {"name": "SketchedKernelRidgeClassifier", "params": {"alpha": 1e-3},
                      "holdout": 0.25,
                      "features": {"name": "RandomFourierFeatures", "n_components": 64,
                                   "gamma": 0.5}},
           "outputs": {"dir": str(d / "out")}, "report": {"kernel_error": False, "png": False},
           **extra}
    path = d / "w.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def unsupervised_spec(d: Path) -> Path:
    cfg = {"input": str(d / "X.zarr"), "segment_rows": 300, "cluster": "sync", "seed": 4,
           "method": {"name": "RandomFourierFeatures", "params": {"n_components": 32,
                                                                   "gamma": 0.5}},
           "outputs": {"dir": str(d / "u")}, "report": {"png": False, "n_sample": 100}}
    path = d / "u.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_run_json_is_one_object_with_paths_times_score_seed_and_memory(data, capsys):
    spec = classifier_spec(data)
    assert cli.main(["run", str(spec), "--json"]) == 0
    out, _ = capsys.readouterr()
    res = json.loads(out)  # exactly one JSON object on stdout
    folder = data / "out" / "result"
    man = read_manifest(folder)
    assert res["command"] == "run" and res["status"] == "full" == man["status"]
    assert res["rows"] == {"before": 0, "after": 600, "new": 600} == man["rows"]
    assert res["segments"] == 2 and res["result_dir"] == str(folder)
    for key in ("model", "predictions", "report", "report_html", "manifest"):
        assert Path(res[key]).exists(), key
    assert res["model"] == str(folder / "model.zarr")
    assert res["predictions"] == str(folder / "predictions.zarr")
    assert res["report"] == str(folder / "report.md")
    assert set(res["files"]) == set(man["files"])
    assert all(Path(p).exists() for p in res["files"].values())
    # taken from the committed manifest, not recomputed
    assert res["timings"] == man["timings"] and "fit" in res["timings"]
    assert res["score"]["metric"] == "accuracy" and res["score"]["on"] == "held-out rows"
    assert res["score"]["value"] == man["fit"]["value"] and res["score"]["rows"] == man["fit"]["rows"]
    assert res["seed"] == 11 == man["seed"]
    assert res["peak_memory_bytes"] == man["peak_memory_bytes"] > 0
    assert res["warnings"] == []
    # nothing new: the stored result's manifest, with the same score
    assert cli.main(["--json", "run", str(spec)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["status"] == "up-to-date" and again["rows"]["new"] == 0
    assert again["score"] == res["score"] and again["model"] == res["model"]
    # the report shows the quoted name as written
    md = (folder / "report.md").read_text()
    assert md.splitlines()[0] == f"# distsketch run report: {NAME}"


def test_run_quiet_prints_only_the_final_line_with_the_score(data, capsys):
    spec = classifier_spec(data)
    for argv in (["run", str(spec), "-q", "--full"], ["-q", "run", str(spec), "--full"],
                 ["run", str(spec), "--quiet", "--full"]):
        assert cli.main(argv) == 0, argv
        out, err = capsys.readouterr()
        assert err == "", argv
        man = read_manifest(data / "out" / "result")
        assert out.splitlines() == [
            f"full: consumed rows 0..600 of {data / 'X.zarr'} (2 new segment(s)); result "
            f"committed to {data / 'out' / 'result'}; held-out accuracy "
            f"{man['fit']['value']:.4f} on {man['fit']['rows']} rows."], argv
    # without -q the progress goes to stderr as every command's does
    assert cli.main(["run", str(spec), "--full"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1 and "distsketch: " in err and "segment" in err


def test_unsupervised_run_reports_the_kernel_error_as_its_score(data, capsys):
    assert cli.main(["run", str(unsupervised_spec(data)), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    man = read_manifest(data / "u" / "result")
    assert man["kernel_errors"]["available"]
    assert res["score"]["metric"] == "relative_frobenius_kernel_error"
    assert res["score"]["value"] == man["kernel_errors"]["relative_frobenius"]
    assert res["kernel_errors"] == man["kernel_errors"] and res["predictions"] is None
    assert Path(res["features"]).exists() and res["features"].endswith("features.zarr")
    assert cli.main(["run", str(unsupervised_spec(data)), "--full", "-q"]) == 0
    assert "relative Frobenius kernel error" in capsys.readouterr().out


def test_run_dry_run_json(data, capsys):
    assert cli.main(["run", str(classifier_spec(data)), "--dry-run", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["status"] == "dry-run" and "rows 0..600 in 2 segment(s)" in res["message"]
    assert "score" not in res and not (data / "out").exists()


# ------------------------------------------------------------------------- --dashboard


def no_bokeh(monkeypatch):
    monkeypatch.setitem(sys.modules, "bokeh", None)  # import bokeh raises ImportError


def fake_bokeh(monkeypatch):
    """bokeh importable (and found by importlib.util.find_spec) without installing it."""
    mod = types.ModuleType("bokeh")
    mod.__spec__ = importlib.machinery.ModuleSpec("bokeh", None)
    monkeypatch.setitem(sys.modules, "bokeh", mod)


@pytest.fixture
def small_store(tmp_path):
    write(tmp_path / "x.zarr", np.random.default_rng(0).normal(size=(300, 4)))
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["fit", "--method", "RandomFourierFeatures", "{d}/x.zarr", "{d}/m.zarr", "--dashboard"],
    ["run", "{spec}", "--dashboard", ":8787"],
])
def test_dashboard_without_bokeh_is_a_config_error_before_anything_is_written(
        argv, data, small_store, monkeypatch, capsys):
    no_bokeh(monkeypatch)
    spec = classifier_spec(data)
    argv = [a.format(d=small_store, spec=spec) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert 'pip install "distsketch[cluster]"' in err and "bokeh" in err
    assert len(err.splitlines()) == 1
    assert not (small_store / "m.zarr").exists() and not (data / "out").exists()


class FakeCluster:
    """Records the LocalCluster's arguments; no processes start."""

    started: list[dict] = []

    def __init__(self, **kwargs):
        FakeCluster.started.append(kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeClient:
    dashboard_link = "http://127.0.0.1:40123/status"

    def __init__(self, cluster):
        self.scheduler = types.SimpleNamespace(address="inproc://fake")

    def scheduler_info(self):
        return {"workers": {}}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("flags, address", [(["--dashboard"], ":0"),
                                            (["--dashboard", ":8790"], ":8790"),
                                            (["--dashboard=8791"], ":8791")])
@pytest.mark.parametrize("quiet", [False, True])
def test_dashboard_starts_a_local_cluster_for_a_small_input_and_prints_its_link(
        flags, address, quiet, small_store, monkeypatch, capsys):
    import distributed

    fake_bokeh(monkeypatch)
    FakeCluster.started = []
    monkeypatch.setattr(distributed, "LocalCluster", FakeCluster)
    monkeypatch.setattr(distributed, "Client", FakeClient)
    d = small_store
    # a 9.4 KiB input would run on threads; --dashboard asks for the cluster
    argv = ["fit", "--method", "RandomFourierFeatures", str(d / "x.zarr"), str(d / "m.zarr"),
            "--n-components", "8", "--no-progress", *flags, *(["-q"] if quiet else [])]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert [c["dashboard_address"] for c in FakeCluster.started] == [address]
    assert f"distsketch: Dask dashboard: {FakeClient.dashboard_link}" in err.splitlines()
    assert ("running on threads" in err) is False


def test_dashboard_with_threads_or_a_bad_address_is_refused(small_store, monkeypatch, capsys):
    fake_bokeh(monkeypatch)
    d = small_store
    base = ["transform", str(d / "m.zarr"), str(d / "x.zarr"), str(d / "f.zarr")]
    from distsketch import RandomFourierFeatures

    RandomFourierFeatures(n_components=8, random_state=0).fit(
        np.zeros((2, 4))).save(d / "m.zarr")
    assert cli.main([*base, "--cluster", "threads", "--dashboard"]) == 2
    assert "needs a Dask cluster" in capsys.readouterr().err
    # nargs="?": a positional written after --dashboard is not taken for an address
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", "--dashboard", str(d / "x.zarr"), str(d / "m2.zarr")])
    assert exc.value.code == 2
    assert "not a dashboard address" in capsys.readouterr().err
    assert not (d / "f.zarr").exists() and not (d / "m2.zarr").exists()


def test_run_dashboard_with_a_spec_without_cluster_is_refused_before_the_output(
        data, monkeypatch, capsys):
    fake_bokeh(monkeypatch)
    assert cli.main(["run", str(classifier_spec(data)), "--dashboard"]) == 2  # cluster: sync
    assert "'sync' (no cluster, so no dashboard)" in capsys.readouterr().err
    assert not (data / "out").exists()


@pytest.mark.parametrize("command", ["fit", "transform", "predict", "score", "evaluate",
                                     "quickstart", "run"])
def test_every_cluster_command_has_dashboard(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    assert "--dashboard [ADDRESS]" in capsys.readouterr().out
