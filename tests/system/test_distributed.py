"""A real ``distributed`` deployment: a scheduler and workers started as separate
processes on 127.0.0.1 with the ``dask`` console script.

* With the same chunking, the fitted streaming kernel PCA sketch and the
  embeddings are bitwise identical under the synchronous, threaded and
  distributed schedulers, with 1 and with 2 workers.
* An out-of-core fit whose Zarr input is several times larger than each
  worker's ``--memory-limit`` completes, and the growth of the workers' memory
  (measured from outside, over their whole process trees) stays within what the
  plan projects per task, times the blocks a worker thread may hold at once.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dask
import numpy as np
import psutil
import pytest
import zarr

from distsketch import StreamingKernelPCA
from distsketch.diagnostics import PeakMemory
from distsketch.graph import blocks as graph_blocks
from distsketch.graph import compute
from distsketch.graph.budget import check_task_memory
from distsketch.io import open_array, write_array

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

DASK = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")


class ProcessCluster:
    """A scheduler plus workers as child processes; every process is ended by its pid."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.scheduler_file = folder / "scheduler.json"
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self._start([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(self.scheduler_file)], "scheduler")
        deadline = time.monotonic() + 60
        # the file exists before it is written whole: wait for its closing brace
        while not (self.scheduler_file.exists()
                   and self.scheduler_file.read_text().rstrip().endswith("}")):
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise RuntimeError("the dask scheduler did not start: "
                                   + (self.folder / "scheduler.log").read_text()[-2000:])
            # poll for readiness: returns early if the scheduler process exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.procs[0].wait(timeout=0.1)

    def _start(self, cmd: list[str], name: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "wb")  # closed with the folder
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        self.procs.append(proc)
        return proc

    def add_worker(self, memory_limit: str = "2GiB") -> subprocess.Popen:
        i = len(self.workers)
        (self.folder / f"w{i}").mkdir()
        proc = self._start([DASK, "worker", "--scheduler-file", str(self.scheduler_file),
                            "--host", "127.0.0.1", "--nthreads", "1", "--nworkers", "1",
                            "--memory-limit", memory_limit, "--no-dashboard",
                            "--local-directory", str(self.folder / f"w{i}")], f"worker{i}")
        self.workers.append(proc)
        return proc

    def client(self, n_workers: int):
        from distributed import Client

        client = Client(scheduler_file=str(self.scheduler_file), timeout=60)
        client.wait_for_workers(n_workers, timeout=120)
        return client

    def close(self) -> None:
        pids = []
        for proc in self.procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                pids += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=4)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid in pids:  # worker processes spawned by a nanny, if still alive
            with contextlib.suppress(psutil.NoSuchProcess):
                p = psutil.Process(pid)
                p.kill()
                p.wait(timeout=10)


@pytest.fixture
def process_cluster(tmp_path) -> Iterator[ProcessCluster]:
    assert DASK, "the dask console script is not installed next to the Python interpreter"
    cluster = ProcessCluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()


def _fit_and_embed(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    model = StreamingKernelPCA(n_components=4, n_random_features=256, sketch_size=16, split_every=4,
                               gamma=0.05, random_state=11).fit(X)
    # distsketch's compute pins BLAS to one thread on every scheduler (a bare
    # .compute() under the synchronous scheduler would run BLAS multi-threaded)
    emb = compute(model.transform(X), progress=False)[0]
    return model.sketch_, model.components_, emb


def test_bitwise_identical_across_schedulers(tmp_path, process_cluster):
    A = np.random.default_rng(0).normal(size=(12_000, 20)).astype(np.float32)
    path = write_array(A, tmp_path / "x.zarr", chunk_rows=500)
    X = open_array(str(path), block_rows=500)  # 24 blocks: a tree of 3 levels (fan-in 4)
    results = {}
    for name in ("sync", "threads"):
        with dask.config.set(scheduler=name):
            results[name] = _fit_and_embed(X)
    process_cluster.add_worker()
    with process_cluster.client(1) as client:
        assert len(client.scheduler_info()["workers"]) == 1
        results["distributed-1"] = _fit_and_embed(X)
        process_cluster.add_worker()
        client.wait_for_workers(2, timeout=120)
        results["distributed-2"] = _fit_and_embed(X)
        # both workers took part
        assert len(client.scheduler_info()["workers"]) == 2
    ref = results["sync"]
    assert np.isfinite(ref[0]).all() and np.abs(ref[0]).max() > 0
    for name, res in results.items():
        for got, want, what in zip(res, ref, ("sketch", "components", "embedding")):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), f"{what} differs under {name}"


def test_out_of_core_larger_than_worker_memory(tmp_path, process_cluster, monkeypatch):
    # room for a worker's own imports: scikit-learn imports pandas, and pandas pyarrow
    # where it is installed (~250 MB then before the first task)
    limit = 450 * 2**20
    n, d, rows = 100_000, 4000, 2500  # 1.6 GB of float32: 3.4x one worker's memory limit
    path = tmp_path / "big.zarr"
    arr = zarr.create_array(str(path), shape=(n, d), dtype="f4", chunks=(rows, d),
                            compressors=None)
    base = np.random.default_rng(1).standard_normal((rows, d), dtype=np.float32)
    for i, a in enumerate(range(0, n, rows)):
        arr[a:a + rows] = base if i % 2 == 0 else -base  # cheap to make, not compressible
    nbytes = n * d * 4
    assert nbytes > 3 * limit
    # the per-task memory the plan projects (checked on the client before the graph is sent)
    projected: list[int] = []

    def record(*args, **kwargs):
        projected.append(check_task_memory(*args, **kwargs))
        return projected[-1]

    monkeypatch.setattr(graph_blocks, "check_task_memory", record)
    workers = [process_cluster.add_worker(memory_limit=str(limit)) for _ in range(2)]
    X = open_array(str(path), block_rows=rows)
    with process_cluster.client(2) as client:
        # workers import the package on their first task: do it before measuring
        client.run(exec, "import distsketch.estimators.decomposition.streaming_kpca")
        monitors = [PeakMemory(interval=0.05, pid=w.pid) for w in workers]
        with contextlib.ExitStack() as stack:
            for m in monitors:
                stack.enter_context(m)
            model = StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=4,
                                       gamma=1.0 / d, random_state=0).fit(X)
    assert model.n_samples_seen_ == n  # every row went through the sketch
    # RFF rows have squared norm about 1, so ||Z||_F^2 is about n
    assert 0.8 * n < model.sq_frobenius_ < 1.2 * n
    assert len(projected) == 1 and projected[0] >= rows * d * 4
    # a worker thread holds ceil(worker-saturation) queued blocks (distributed's root-task
    # queuing), each alive twice while it is read (the store's bytes and the decoded
    # array); 32 MiB more for the allocator and transfer buffers
    queued = math.ceil(float(dask.config.get("distributed.scheduler.worker-saturation")))
    bound = 2 * queued * projected[0] + 32 * 2**20
    for m in monitors:
        assert 0 < m.increase_bytes <= bound, (m.increase_bytes, projected[0], bound)


# ------------------------------------------------------------------ memory diagnostics


def test_peak_memory_sees_allocations_and_child_processes():
    from distsketch.diagnostics import rss_tree_bytes

    with PeakMemory(interval=0.01) as pm:
        a = np.ones(200 * 2**20 // 8)  # 200 MiB, touched
        assert rss_tree_bytes() >= pm.baseline_bytes + 150 * 2**20
        # a sample while it is held (the background thread may not get the GIL in between)
        pm.sample_now()
        del a
    assert pm.increase_bytes >= 150 * 2**20
    assert len(pm.samples) >= 2 and pm.as_dict()["peak_bytes"] == pm.peak_bytes
    # a child holding 150 MiB counts towards the tree of this process
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, numpy as np; a = np.ones(150 * 2**20 // 8); "
                               "print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        own = psutil.Process().memory_info().rss
        assert rss_tree_bytes() >= own + 140 * 2**20
        assert rss_tree_bytes(child.pid) >= 140 * 2**20
    finally:
        child.stdin.close()
        child.wait(timeout=30)
