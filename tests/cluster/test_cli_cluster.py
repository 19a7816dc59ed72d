"""The CLI against a real multi-process Dask cluster started with `dask scheduler` / `dask worker`."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

import distsketch
from distsketch.io import read_manifest
from distsketch.workflow import run_workflow

pytestmark = pytest.mark.system

BIN = Path(sys.executable).parent
DASK, DISTSKETCH = str(BIN / "dask"), str(BIN / "distsketch")


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """Scheduler + 2 single-threaded workers as separate OS processes on 127.0.0.1."""
    from distributed import Client

    tmp = tmp_path_factory.mktemp("dask")
    procs: list[subprocess.Popen] = []

    def start(name, args):
        with open(tmp / f"{name}.log", "w") as log:
            procs.append(subprocess.Popen([DASK, *args], stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        return procs[-1]

    sched_file = tmp / "scheduler.json"
    sched = start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                "--scheduler-file", str(sched_file)])
    try:
        deadline = time.monotonic() + 60
        # the file exists before it is written whole: wait for its closing brace
        while not (sched_file.exists() and sched_file.read_text().rstrip().endswith("}")):
            assert time.monotonic() < deadline, "the scheduler did not write its file in 60 s"
            with pytest.raises(subprocess.TimeoutExpired):
                sched.wait(timeout=0.05)  # also fails fast if the scheduler died
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            start(f"worker{i}", ["worker", address, "--nthreads", "1", "--no-dashboard",
                                 "--name", f"w{i}", "--local-directory", str(tmp / f"w{i}")])
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield {"address": address, "scheduler_file": str(sched_file)}
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=15)


def _spec(tmp: Path, out: str, cluster: str) -> Path:
    X = np.random.default_rng(0).normal(size=(2000, 6)).astype(np.float32)
    if not (tmp / "X.zarr").exists():
        arr = zarr.create_array(store=str(tmp / "X.zarr"), shape=X.shape, dtype=X.dtype,
                                chunks=(250, 6))
        arr[...] = X
    cfg = {"input": str(tmp / "X.zarr"), "seed": 1, "segment_rows": 1000, "block_rows": 250,
           "method": {"name": "StreamingKernelPCA", "params": {
               "n_components": 3, "n_random_features": 64, "sketch_size": 16, "gamma": 0.2}},
           "outputs": {"dir": str(tmp / out)}, "cluster": cluster,
           "report": {"kernel_error": False, "png": False}}
    p = tmp / f"{out}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_run_through_tcp_address_equals_local_run(tmp_path, dask_cluster):
    spec = _spec(tmp_path, "dist", cluster="sync")
    proc = subprocess.run([DISTSKETCH, "run", str(spec), "--cluster", dask_cluster["address"]],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("full: consumed rows 0..2000")
    out = tmp_path / "dist" / "result"
    man = read_manifest(out)
    if importlib.util.find_spec("bokeh") is not None:  # distributed's report needs bokeh
        assert man["performance_report"] == "dask-performance.html"
        assert "<html" in (out / "dask-performance.html").read_text()[:2000].lower()
    else:
        assert man["performance_report"] is None and not (out / "dask-performance.html").exists()
    # same spec on the synchronous local scheduler: identical numbers (same chunking)
    run_workflow(_spec(tmp_path, "local", cluster="sync"), log=lambda m: None)
    a = distsketch.load(out / "model.zarr")
    b = distsketch.load(tmp_path / "local" / "result" / "model.zarr")
    np.testing.assert_array_equal(a.sketch_, b.sketch_)
    np.testing.assert_array_equal(zarr.open_array(str(out / "features.zarr"), path="X")[...],
                                  zarr.open_array(str(tmp_path / "local" / "result" /
                                                      "features.zarr"), path="X")[...])


def test_fit_command_through_scheduler_file(tmp_path, dask_cluster):
    _spec(tmp_path, "unused", cluster="sync")  # writes X.zarr
    model = tmp_path / "m.zarr"
    proc = subprocess.run([DISTSKETCH, "fit", str(tmp_path / "X.zarr"), str(model), "--gamma", "0.2",
                           "--random-state", "3", "--cluster", dask_cluster["scheduler_file"]],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "connected to Dask at tcp://127.0.0.1:" in proc.stderr
    assert distsketch.load(model).n_samples_seen_ == 2000


def test_unreachable_scheduler_is_a_clear_error_in_bounded_time(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = _spec(tmp_path, "x", cluster="sync")
    t0 = time.monotonic()
    proc = subprocess.run([DISTSKETCH, "run", str(spec), "--cluster", f"tcp://127.0.0.1:{port}",
                           "--connect-timeout", "1"], capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port} within 1 s" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert elapsed < 60  # the connect timeout plus interpreter start-up, not a hang
    assert not (tmp_path / "x" / "result").exists()


def test_fit_through_dask_scheduler_address_leaves_the_cluster_running(tmp_path, dask_cluster):
    from distributed import Client

    _spec(tmp_path, "unused", cluster="sync")  # writes X.zarr
    model = tmp_path / "m.zarr"
    env = dict(os.environ, DASK_SCHEDULER_ADDRESS=dask_cluster["address"])
    proc = subprocess.run([DISTSKETCH, "fit", str(tmp_path / "X.zarr"), str(model), "--gamma", "0.2",
                           "--random-state", "3"], capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert (f"using the Dask scheduler at {dask_cluster['address']} (from "
            "DASK_SCHEDULER_ADDRESS)") in proc.stderr
    assert f"connected to Dask at {dask_cluster['address']} (2 worker(s)" in proc.stderr
    assert distsketch.load(model).n_samples_seen_ == 2000
    # the scheduler and both workers were not started by the command, so they are still there
    with Client(dask_cluster["address"], timeout=30) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        assert client.submit(sum, [1, 2, 3]).result() == 6
