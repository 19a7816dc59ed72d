"""Fault tolerance of `distsketch run`: killed runs, killed workers, bad chunks, full disks.

Every case checks that the previous result stays complete and readable, that
the next run finishes the work, and that no row is lost: the final model has
seen exactly n rows and equals an undisturbed run.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

import distsketch
from distsketch.errors import StoreError
from distsketch.io import read_manifest
from distsketch.workflow import run_workflow

pytestmark = pytest.mark.system

DASK = str(Path(sys.executable).parent / "dask")
FAULT_EXIT = 75


def make_input(path, X, chunk_rows=100):
    arr = zarr.create_array(store=str(path), shape=X.shape, dtype=X.dtype,
                            chunks=(chunk_rows, X.shape[1]), overwrite=True)
    arr[...] = X


def append_rows(path, new):
    arr = zarr.open_array(str(path), mode="r+")
    n = arr.shape[0]
    arr.resize((n + new.shape[0], arr.shape[1]))
    arr[n:] = new


def write_spec(tmp, out="out", seg=200, m=40, cluster="sync", block_rows=None):
    cfg = {
        "input": str(tmp / "X.zarr"), "seed": 5, "segment_rows": seg, "block_rows": block_rows,
        "preprocessing": {"standardize": True},
        "method": {"name": "StreamingKernelPCA", "params": {"method": "rnca", "gamma": 0.25,
                                                             "n_random_features": m, "n_components": 3}},
        "outputs": {"dir": str(tmp / out)}, "cluster": cluster,
        "report": {"kernel_error": False, "png": False},  # not under test here; keeps runs short
    }
    p = tmp / f"{out}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def cli(spec, *extra, wait=True):
    cmd = [sys.executable, "-m", "distsketch.cli.run", str(spec), *extra]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


# a run that ends its process (as a kill would) at a hook point; argv: spec, point, segment, code
KILL_AT = """
import os, sys
from distsketch.workflow import WorkflowHooks, run_workflow

spec, point, index = sys.argv[1], sys.argv[2], int(sys.argv[3])


def die():
    sys.stderr.flush()
    os._exit(int(sys.argv[4]))


class Kill(WorkflowHooks):
    def after_segment(self, segment):
        if point == "after-segment" and segment.index == index:
            die()

    def before_outputs(self, result_tmp):
        if point == "before-outputs":
            die()

    def before_commit(self, result_tmp):
        if point == "before-commit":
            die()


run_workflow(spec, hooks=Kill(), log=lambda msg: None)
raise SystemExit("the hook point was never reached")
"""


def run_killed_at(spec, point, index=0):
    cmd = [sys.executable, "-c", KILL_AT, str(spec), point, str(index), str(FAULT_EXIT)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def quiet(msg):
    pass


def covariance(out: Path) -> dict:
    """The checkpointed summary: ZᵀZ and the rows it covers."""
    state = distsketch.load(out / "state" / "summary" / "model.zarr")
    return {"n": state.n_samples_seen_, "ztz": state.covariance_}


def assert_same_result(out: Path, ref: Path, n: int):
    """Bitwise equal summary, model and features; exactly n rows seen (none lost)."""
    a, b = covariance(out), covariance(ref)
    assert int(a["n"]) == int(b["n"]) == n
    np.testing.assert_array_equal(a["ztz"], b["ztz"])
    ma = distsketch.load(out / "result" / "model.zarr")[-1]  # the step after the scaler
    mb = distsketch.load(ref / "result" / "model.zarr")[-1]
    assert ma.n_samples_seen_ == n
    np.testing.assert_array_equal(ma.components_, mb.components_)
    fa = zarr.open_array(str(out / "result" / "features.zarr"), path="X")
    assert fa.shape[0] == n and fa.nchunks_initialized == fa.nchunks
    ref_features = zarr.open_array(str(ref / "result" / "features.zarr"), path="X")
    np.testing.assert_array_equal(fa[...], ref_features[...])
    assert read_manifest(out / "result")["rows"]["after"] == n


def assert_previous_result_intact(out: Path, n_prev: int):
    man = read_manifest(out / "result")
    assert man is not None and man["rows"]["after"] == n_prev
    model = distsketch.load(out / "result" / "model.zarr")[-1]
    assert model.n_samples_seen_ == n_prev
    assert zarr.open_array(str(out / "result" / "features.zarr"), path="X").shape[0] == n_prev


@pytest.fixture
def appended(tmp_path):
    """A committed result on 400 rows, then 800 rows appended (4 new segments of 200)."""
    X = np.random.default_rng(0).normal(size=(1200, 5))
    make_input(tmp_path / "X.zarr", X[:400])
    spec, ref = write_spec(tmp_path), write_spec(tmp_path, out="ref")
    run_workflow(spec, log=quiet)
    run_workflow(ref, log=quiet)
    append_rows(tmp_path / "X.zarr", X[400:])
    run_workflow(ref, log=quiet)  # the undisturbed incremental run, for comparison
    return tmp_path, spec, X


@pytest.mark.parametrize("point, index, expect_status", [
    ("after-segment", 1, "resumed"),     # killed after the first new segment
    ("after-segment", 3, "resumed"),     # killed after the third
    ("before-outputs", 0, "refreshed"),  # state complete, no outputs yet
    ("before-commit", 0, "refreshed"),   # outputs written but not committed
])
def test_killed_run_keeps_previous_result_and_next_run_finishes(appended, point, index,
                                                                 expect_status):
    tmp, spec, _ = appended
    proc = run_killed_at(spec, point, index)
    assert proc.returncode == FAULT_EXIT, proc.stderr
    assert_previous_result_intact(tmp / "out", 400)
    res = run_workflow(spec, log=quiet)
    assert res.status == expect_status and res.rows_before == 400
    # both runs fold the same segments of the global row grid in the same order (the
    # interrupted one partly before, partly after the kill): the summaries are bitwise equal
    assert_same_result(tmp / "out", tmp / "ref", 1200)


def test_sigkill_at_a_random_point(tmp_path):
    rng = np.random.default_rng(20240611)
    X = rng.normal(size=(6000, 8))
    make_input(tmp_path / "X.zarr", X[:2000], chunk_rows=250)
    spec = write_spec(tmp_path, seg=500, m=128)
    ref = write_spec(tmp_path, out="ref", seg=500, m=128)
    run_workflow(spec, log=quiet)
    run_workflow(ref, log=quiet)
    append_rows(tmp_path / "X.zarr", X[2000:])
    target = 2000 + 500 * int(rng.integers(1, 7))  # kill once this many rows are checkpointed
    proc = cli(spec, wait=False)
    state = tmp_path / "out" / "state" / "state.json"
    deadline = time.monotonic() + 120
    killed_at = None
    while time.monotonic() < deadline:
        try:
            rows = json.loads(state.read_text())["rows_done"]
        except (OSError, ValueError, KeyError):
            rows = 0  # between the two renames of a checkpoint swap
        if rows >= target:
            killed_at = rows
            os.killpg(proc.pid, signal.SIGKILL)
            break
        try:
            proc.wait(timeout=0.01)  # a timed wait on the child, not a sleep
            break
        except subprocess.TimeoutExpired:
            pass
    proc.wait(timeout=30)
    assert killed_at is not None, (proc.returncode, proc.stderr.read())
    assert proc.returncode == -signal.SIGKILL
    assert_previous_result_intact(tmp_path / "out", 2000)
    res = run_workflow(spec, log=quiet)
    # normally killed mid-way; if the poll saw the last checkpoint, only the outputs remain
    assert res.status == ("resumed" if killed_at < 6000 else "refreshed")
    assert res.rows_after == 6000
    run_workflow(ref, log=quiet)
    assert_same_result(tmp_path / "out", tmp_path / "ref", 6000)


def test_missing_input_chunk_names_it_and_writes_nothing(tmp_path):
    make_input(tmp_path / "X.zarr", np.random.default_rng(1).normal(size=(600, 4)))
    (tmp_path / "X.zarr" / "c" / "3" / "0").unlink()
    spec = write_spec(tmp_path)
    proc = cli(spec)
    assert proc.returncode == 2
    assert "missing chunk (3, 0) (rows 300..400)" in proc.stderr
    assert "Traceback" not in proc.stderr
    out = tmp_path / "out"
    assert not (out / "result").exists() and not (out / "state").exists()


def test_corrupted_input_chunk_names_it_and_keeps_previous_result(tmp_path):
    X = np.random.default_rng(2).normal(size=(800, 4))
    make_input(tmp_path / "X.zarr", X[:400])
    spec = write_spec(tmp_path)
    run_workflow(spec, log=quiet)
    append_rows(tmp_path / "X.zarr", X[400:])
    (tmp_path / "X.zarr" / "c" / "6" / "0").write_bytes(b"\x00garbage" * 7)
    proc = cli(spec)
    assert proc.returncode == 2, proc.stderr
    # the read failed on a 400-row block; the reader re-reads its chunks to name the bad one
    assert "cannot read chunk (6, 0) (rows 600..700)" in proc.stderr
    assert_previous_result_intact(tmp_path / "out", 400)
    assert not list((tmp_path / "out").glob(".result.tmp-*"))
    # restoring the chunk lets the next run finish, with no row lost
    arr = zarr.open_array(str(tmp_path / "X.zarr"), mode="r+")
    arr[600:700] = X[600:700]
    res = run_workflow(spec, log=quiet)
    assert res.rows_after == 800 and covariance(tmp_path / "out")["n"] == 800


def test_disk_full_on_commit_keeps_previous_result(appended, monkeypatch):
    tmp, spec, _ = appended
    result = tmp / "out" / "result"
    real_replace = os.replace

    def full_disk(src, dst, *a, **k):
        if Path(dst) == result or Path(src) == result:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(StoreError, match="No space left on device"):
        run_workflow(spec, log=quiet)
    monkeypatch.setattr(os, "replace", real_replace)
    assert_previous_result_intact(tmp / "out", 400)
    assert not list((tmp / "out").glob(".result.*"))
    res = run_workflow(spec, log=quiet)
    assert res.status == "refreshed"  # every segment had been checkpointed already
    assert_same_result(tmp / "out", tmp / "ref", 1200)


def test_disk_full_while_checkpointing(appended, monkeypatch):
    tmp, spec, _ = appended
    state = tmp / "out" / "state"
    real_replace = os.replace
    calls = {"n": 0}

    def full_on_second_checkpoint(src, dst, *a, **k):
        if Path(dst) == state and ".tmp-" in str(src):
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", full_on_second_checkpoint)
    with pytest.raises(StoreError, match="No space left on device"):
        run_workflow(spec, log=quiet)
    monkeypatch.setattr(os, "replace", real_replace)
    assert_previous_result_intact(tmp / "out", 400)
    assert covariance(tmp / "out")["n"] == 600  # the first new segment's checkpoint survived
    assert run_workflow(spec, log=quiet).status == "resumed"
    assert_same_result(tmp / "out", tmp / "ref", 1200)


# ----------------------------------------------------------------- distributed workers


@pytest.fixture
def dask_processes(tmp_path):
    """A scheduler and two single-threaded workers, each its own OS process on 127.0.0.1."""
    from distributed import Client

    procs: list[subprocess.Popen] = []
    logs = tmp_path / "dask-logs"
    logs.mkdir()

    def start(name, args):
        f = open(logs / f"{name}.log", "w")  # closed right after Popen inherits it
        procs.append(subprocess.Popen([DASK, *args], stdout=f, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        f.close()
        return procs[-1]

    sched_file = tmp_path / "scheduler.json"
    sched = start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0",
                                "--no-dashboard", "--scheduler-file", str(sched_file)])
    client = None
    try:
        deadline = time.monotonic() + 60
        # the file exists before it is written whole: wait for its closing brace
        while not (sched_file.exists() and sched_file.read_text().rstrip().endswith("}")):
            assert time.monotonic() < deadline, "scheduler did not start"
            with pytest.raises(subprocess.TimeoutExpired):
                sched.wait(timeout=0.05)
        address = json.loads(sched_file.read_text())["address"]
        workers = [start(f"worker{i}", ["worker", address, "--nthreads", "1", "--no-nanny",
                                         "--no-dashboard", "--name", f"w{i}",
                                         "--local-directory", str(tmp_path / f"w{i}")])
                   for i in range(2)]
        client = Client(address, timeout=30)
        client.wait_for_workers(2, timeout=60)
        yield {"address": address, "scheduler_file": sched_file, "workers": workers,
               "client": client}
    finally:
        if client is not None:
            client.close()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


def _chunk_counter():
    from distributed.diagnostics.plugin import SchedulerPlugin

    class ChunkCounter(SchedulerPlugin):
        """Counts chunk summaries computed by the workers (transitions to memory)."""

        name = "distsketch-chunk-counter"

        def __init__(self):
            self.count = 0

        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "memory" and "skpca-rnca-chunk" in str(key):
                self.count += 1

    return ChunkCounter()


def _chunks_done(dask_scheduler):
    return dask_scheduler.plugins["distsketch-chunk-counter"].count


def test_worker_killed_mid_fit_gives_the_undisturbed_result(tmp_path, dask_processes):
    import cloudpickle

    # the probe runs on the scheduler, which cannot import this test module
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    info = dask_processes
    client = info["client"]
    X = np.random.default_rng(3).normal(size=(3600, 16))
    make_input(tmp_path / "X.zarr", X, chunk_rows=150)
    kw = {"seg": 3600, "m": 512, "block_rows": 150, "cluster": info["address"]}
    ref = write_spec(tmp_path, out="ref", **kw)
    run_workflow(ref, log=quiet)
    client.register_plugin(_chunk_counter())
    spec = write_spec(tmp_path, **kw)
    proc = cli(spec, wait=False)
    victim = info["workers"][0]
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        done = client.run_on_scheduler(_chunks_done)
        if done >= 4:  # some chunk summaries were computed and are held by the workers
            os.killpg(victim.pid, signal.SIGKILL)
            killed = (victim.pid, done)
    if killed is None:
        proc.kill()
        pytest.fail(f"the fit ended before a worker could be killed: {proc.communicate()[1]}")
    assert killed[1] < 24  # killed mid-fit: not every chunk summary was computed yet
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    victim.wait(timeout=30)
    assert len(client.scheduler_info()["workers"]) == 1
    # the lost worker's tasks were recomputed on the survivor: same graph, same arithmetic
    assert_same_result(tmp_path / "out", tmp_path / "ref", 3600)
    man = read_manifest(tmp_path / "out" / "result")
    if importlib.util.find_spec("bokeh") is not None:  # distributed's report needs bokeh
        assert man["performance_report"] == "dask-performance.html"
        assert (tmp_path / "out" / "result" / "dask-performance.html").stat().st_size > 1000
