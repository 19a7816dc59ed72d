"""`distsketch run` entirely on S3 (a moto server): full run, incremental rerun, killed run.

The input and ``outputs.dir`` are ``s3://`` URLs; the same spec on local disk
is the reference.  Every result must be bitwise equal to it: the checkpointed
summary, the model and the features.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import numpy as np
import pytest
import yaml
import zarr

import distsketch
from distsketch.errors import StoreError, WorkflowError
from distsketch.io import append, read_manifest, write_array
from distsketch.workflow import run_workflow

pytestmark = pytest.mark.system

GAMMA, M, SEG = 0.3, 40, 200


def spec(inp, out, storage_options=None, in_flight=2):
    cfg = {
        "input": inp, "seed": 11, "segment_rows": SEG, "segments_in_flight": in_flight,
        "preprocessing": {"standardize": True},
        "method": {"name": "StreamingKernelPCA", "params": {
            "method": "rnca", "gamma": GAMMA, "n_random_features": M, "n_components": 3}},
        "outputs": {"dir": out}, "cluster": "sync",
        "report": {"n_sample": 100, "png": False},
    }
    if storage_options is not None:
        cfg["storage_options"] = storage_options
    return cfg


def write_local(path, X):
    arr = zarr.create_array(store=str(path), shape=X.shape, dtype=X.dtype, chunks=(100, X.shape[1]),
                            overwrite=True)
    arr[...] = X


def append_local(path, new):
    arr = zarr.open_array(str(path), mode="r+")
    n = arr.shape[0]
    arr.resize((n + new.shape[0], arr.shape[1]))
    arr[n:] = new


def append_s3(s3, url, new):
    # the store was written by distsketch: rows are added through distsketch's append
    append(url, new, storage_options=s3.storage_options)


def assert_same(s3, out_url, ref, n):
    so = s3.storage_options
    a = distsketch.load(f"{out_url}/result/model.zarr", storage_options=so)
    b = distsketch.load(ref / "result" / "model.zarr")
    # standardized runs save Pipeline(scale, model): compare the fitted models
    a, b = a[-1], b[-1]
    assert a.n_samples_seen_ == b.n_samples_seen_ == n
    np.testing.assert_array_equal(a.covariance_, b.covariance_)
    np.testing.assert_array_equal(a.components_, b.components_)
    store = zarr.storage.FsspecStore.from_url(f"{out_url}/result/features.zarr",
                                              storage_options=so, read_only=True)
    fa = zarr.open_array(store=store, path="X", mode="r")
    assert fa.shape[0] == n
    ref_features = zarr.open_array(str(ref / "result" / "features.zarr"), path="X")
    np.testing.assert_array_equal(fa[...], ref_features[...])
    man = read_manifest(f"{out_url}/result", storage_options=so)
    assert man["rows"]["after"] == n
    # the state the next run resumes from is on S3 too, and equals the local one
    state = json.loads(s3.fs.cat_file(f"{out_url}/state/state.json"[5:]))
    local = json.loads((ref / "state" / "state.json").read_text())
    assert state["rows_done"] == local["rows_done"] == n
    assert state["prefix_fingerprint"] == local["prefix_fingerprint"]
    # a lock object is not left behind by a run that ended
    assert not s3.fs.exists(f"{out_url}/.lock"[5:])


@pytest.fixture
def data(s3, tmp_path):
    X = np.random.default_rng(0).normal(size=(1000, 4))
    url = s3.url() + "/X.zarr"
    write_array(X[:600], url, storage_options=s3.storage_options)
    write_local(tmp_path / "X.zarr", X[:600])
    return X, url


def test_full_and_incremental_run_on_s3_equal_local(s3, tmp_path, data):
    X, url = data
    out = s3.url() + "/run"
    so = s3.storage_options
    res = run_workflow(spec(url, out, so), log=lambda m: None)
    ref = run_workflow(spec(str(tmp_path / "X.zarr"), str(tmp_path / "ref")), log=lambda m: None)
    assert res.status == ref.status == "full" and res.result_dir == f"{out}/result"
    assert_same(s3, out, tmp_path / "ref", 600)
    assert "report.md" in res.manifest["files"]
    assert sorted(res.manifest["spec"]["storage_options"]) == ["client_kwargs", "key", "secret"]
    assert "testing" not in json.dumps(res.manifest["spec"])  # no credentials in the manifest
    # nothing new: the rerun does nothing
    assert run_workflow(spec(url, out, so), log=lambda m: None).status == "up-to-date"
    # rows appended on S3 and locally: incremental rerun, still equal
    append_s3(s3, url, X[600:])
    append_local(tmp_path / "X.zarr", X[600:])
    res = run_workflow(spec(url, out, so), log=lambda m: None)
    run_workflow(spec(str(tmp_path / "X.zarr"), str(tmp_path / "ref")), log=lambda m: None)
    assert res.status == "incremental" and res.rows_before == 600 and res.segments == 2
    assert_same(s3, out, tmp_path / "ref", 1000)
    # exactly one committed summary is kept in state/
    names = [p.rsplit("/", 1)[-1] for p in s3.fs.ls(f"{out}/state"[5:], detail=False)]
    assert sorted(n.split("-")[0] for n in names) == ["state.json", "summary"]


# `distsketch run` with a hook that SIGKILLs the process once its second segment is committed
# (the third is in flight then)
KILLED = """
import functools, os, signal, sys
import distsketch.workflow as wf
from distsketch.cli.run import main


class Die(wf.WorkflowHooks):
    def after_segment(self, segment):
        if segment.index == 2:
            os.kill(os.getpid(), signal.SIGKILL)


wf.run_workflow = functools.partial(wf.run_workflow, hooks=Die())
sys.exit(main(sys.argv[1:]))
"""


def test_killed_cli_run_on_s3_resumes_to_the_local_result(s3, tmp_path, data):
    _, url = data
    out = s3.url() + "/run"
    p = tmp_path / "s3.yaml"
    p.write_text(yaml.safe_dump(spec(url, out, in_flight=3)))  # options from the command line
    proc = subprocess.run([sys.executable, "-c", KILLED, str(p), *s3.cli_options()],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    state = json.loads(s3.fs.cat_file(f"{out}/state/state.json"[5:]))
    assert state["rows_done"] == 2 * SEG and state["in_progress"]
    assert not s3.fs.exists(f"{out}/result"[5:])  # nothing committed yet
    # the killed run's lock object is left; its process is gone, so the next run takes it
    assert s3.fs.exists(f"{out}/.lock"[5:])
    cli = subprocess.run([sys.executable, "-m", "distsketch.cli.run", str(p), *s3.cli_options()],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "resumed: consumed rows 0..600" in cli.stdout + cli.stderr
    run_workflow(spec(str(tmp_path / "X.zarr"), str(tmp_path / "ref")), log=lambda m: None)
    assert_same(s3, out, tmp_path / "ref", 600)


def test_lock_object_of_a_live_run_refuses_then_force_unlock(s3, tmp_path, data):
    _, url = data
    out = s3.url() + "/run"
    lock = {"owner": "other-host:4242", "token": "t", "heartbeat": __import__("time").time()}
    s3.fs.pipe_file(f"{out}/.lock"[5:], json.dumps(lock).encode())
    with pytest.raises(WorkflowError, match=r"other-host:4242.*--force-unlock"):
        run_workflow(spec(url, out, s3.storage_options), log=lambda m: None)
    assert not s3.fs.exists(f"{out}/state"[5:])  # refused before anything was written
    res = run_workflow(spec(url, out, s3.storage_options), log=lambda m: None, force_unlock=True)
    assert res.status == "full" and not s3.fs.exists(f"{out}/.lock"[5:])
    # a stale lock (no heartbeat for longer than the limit) is taken over without forcing
    s3.fs.pipe_file(f"{out}/.lock"[5:], json.dumps(lock | {"heartbeat": 0.0}).encode())
    assert run_workflow(spec(url, out, s3.storage_options), log=lambda m: None,
                        full=True).status == "full"


def test_unwritable_bucket_is_a_clear_error_and_nothing_is_written(s3, data, tmp_path,
                                                                   monkeypatch):
    _, url = data
    monkeypatch.chdir(tmp_path)
    out = "s3://no-such-bucket-distsketch/run"
    with pytest.raises(StoreError, match=r"no-such-bucket-distsketch.*(bucket|storage options)"):
        run_workflow(spec(url, out, s3.storage_options), log=lambda m: None)
    assert not s3.fs.exists("no-such-bucket-distsketch")
    # never a local folder named after the scheme
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.zarr"]
