"""The CLI entirely on S3 (a moto server): ingest -> fit -> transform -> evaluate
with ``--storage-option``, bitwise equal to the same commands on local disk."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import distsketch.cli as cli
from distsketch.errors import ConfigError
from distsketch.io import load, open_array, read_manifest

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning")]


def _run(*args: object) -> None:
    assert cli.main([str(a) for a in args]) == 0


def test_cli_pipeline_on_s3_equals_local(s3, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(1200, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    opts = s3.cli_options()
    base = s3.url()
    fit = ["--method", "rnca", "--n-components", "4", "--n-random-features", "64",
           "--gamma", "0.3", "--random-state", "2", "--cluster", "threads"]

    # local disk
    _run("ingest", "x.npy", "x.zarr", "--chunk-rows", "300")
    _run("fit", "x.zarr", "model.zarr", *fit)
    _run("transform", "model.zarr", "x.zarr", "z.zarr", "--cluster", "sync")

    # the same on S3; the transform runs on a local cluster of worker processes, which
    # read and write S3 with the options the graph carries
    _run("ingest", "x.npy", f"{base}/x.zarr", "--chunk-rows", "300", *opts)
    _run("fit", f"{base}/x.zarr", f"{base}/model.zarr", *fit, *opts)
    _run("transform", f"{base}/model.zarr", f"{base}/x.zarr", f"{base}/z.zarr", *opts)
    capsys.readouterr()
    _run("evaluate", f"{base}/model.zarr", f"{base}/x.zarr", "--n-sample", "200", "--json",
         "--cluster", "sync", *opts)
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 1200 and 0 <= report["relative_frobenius"] < 1

    so = s3.storage_options
    assert sorted(os.listdir(tmp_path)) == ["model.zarr", "x.npy", "x.zarr", "z.zarr"]
    for name in ("x.zarr", "z.zarr"):
        remote = open_array(f"{base}/{name}", storage_options=so).compute()
        local = open_array(tmp_path / name).compute()
        assert remote.dtype == local.dtype and remote.tobytes() == local.tobytes()
    np.testing.assert_array_equal(open_array(f"{base}/x.zarr", storage_options=so).compute(), X)
    m_remote = load(f"{base}/model.zarr", storage_options=so)
    m_local = load(tmp_path / "model.zarr")
    assert m_remote.components_.tobytes() == m_local.components_.tobytes()
    assert read_manifest(f"{base}/z.zarr", storage_options=so)["model"] == f"{base}/model.zarr"
    # the outputs' temporary prefixes are gone: only the four outputs are there
    s3.fs.invalidate_cache()
    names = sorted(p.rsplit("/", 1)[-1] for p in s3.fs.ls(base[len("s3://"):], detail=False))
    assert names == ["model.zarr", "x.zarr", "z.zarr"]


def test_supervised_cli_on_s3_equals_local(s3, tmp_path, monkeypatch, capsys):
    """fit -> predict -> score with a labelled store on S3: the same labels and score as on disk."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 4)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    opts = s3.cli_options()
    base = s3.url()
    fit = ["--method", "SketchedKernelRidgeClassifier", "--features", "rff", "--n-features", "128",
           "--gamma", "median", "--random-state", "1", "--cluster", "sync"]
    scores = {}
    for root, extra in (("", []), (f"{base}/", opts)):
        _run("ingest", "x.npy", f"{root}d.zarr", "--labels", "y.npy", *extra)
        _run("fit", f"{root}d.zarr", f"{root}m.zarr", "--y", f"{root}d.zarr::y", *fit, *extra)
        _run("predict", f"{root}m.zarr", f"{root}d.zarr", f"{root}p.zarr", "--cluster", "sync",
             *extra)
        capsys.readouterr()
        _run("score", f"{root}m.zarr", f"{root}d.zarr", "--y", f"{root}d.zarr::y", "--json",
             "--cluster", "sync", *extra)
        scores[root] = json.loads(capsys.readouterr().out)
    so = s3.storage_options
    remote = open_array(f"{base}/p.zarr::predictions", storage_options=so, targets=True).compute()
    local = open_array(tmp_path / "p.zarr::predictions", targets=True).compute()
    assert remote.tobytes() == local.tobytes() and remote.shape == (600,)
    # the score is the accuracy of the written labels, the same on both stores
    acc = float(np.mean(local == y))
    assert scores[""]["accuracy"] == scores[f"{base}/"]["accuracy"] == acc
    assert sorted(os.listdir(tmp_path)) == ["d.zarr", "m.zarr", "p.zarr", "x.npy", "y.npy"]


def test_cli_without_storage_options_fails_clearly(s3, tmp_path, monkeypatch, capsys):
    """Without the endpoint the command fails with an error naming the URL, nothing local."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((10, 2), np.float32))
    url = s3.url("x.zarr")
    code = cli.main(["ingest", "x.npy", url, "--storage-option", "key=testing",
                     "--storage-option", "secret=testing", "--storage-option",
                     "client_kwargs.endpoint_url=http://127.0.0.1:9", "--storage-option",
                     'config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1}'])
    assert code != 0
    assert url in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["x.npy"]


def test_parse_storage_options():
    from distsketch.cli.common import parse_storage_options

    got = parse_storage_options(["anon=true", "client_kwargs.endpoint_url=http://h:9000",
                                 "client_kwargs.region_name=eu-west-1", "block_size=1048576",
                                 'config_kwargs={"retries": {"max_attempts": 2}}', "token=abc=="])
    assert got == {"anon": True, "block_size": 1048576, "token": "abc==",
                   "client_kwargs": {"endpoint_url": "http://h:9000", "region_name": "eu-west-1"},
                   "config_kwargs": {"retries": {"max_attempts": 2}}}
    assert parse_storage_options([]) is None
    for bad in (["anon"], ["=1"], ["a..b=1"]):
        with pytest.raises(ConfigError, match="expected KEY=VALUE"):
            parse_storage_options(bad)
    with pytest.raises(ConfigError, match="not a mapping"):
        parse_storage_options(["a=1", "a.b=2"])
