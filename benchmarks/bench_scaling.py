"""Scaling out: throughput of the main pipelines on 1, 2, 4, ... workers, default settings.

One command::

    python benchmarks/bench_scaling.py --rows 4000000 --workers 1,2,4,8,16

creates (or reuses, under ``--workdir``) a ``rows x 100`` float32 RandomNoisy Zarr
store written with the default settings (``make_random_noisy_zarr``), then for
each worker count w starts ``LocalCluster(n_workers=w, threads_per_worker=1,
memory_limit=...)`` and runs, with the default block plan (no block sizes
chosen here):

* ``skpca-fd``    StreamingKernelPCA(method="fd", n_random_features=1024, sketch_size=64).fit
* ``skpca-rnca``  StreamingKernelPCA(method="rnca", n_random_features=1024).fit
* ``rff-zarr``    write_array(RandomFourierFeatures(n_components=1024).fit(path)
                  .transform(open_array(path)), out)
* ``krr``         SketchedKernelRidge(standardize=False, features=RandomFourierFeatures(1024)).fit on a
                  synthetic target y = sin(x . v) stored beside X
* ``nystrom``     write_array(NystromFeatures().fit(path).transform(open_array(path)), out)
* ``meka``        MEKA().fit(path)

For each run: wall time, rows/s, speedup and parallel efficiency against one
worker (rows/s / (w x one-worker rows/s)), tasks run (the task stream), the
plans' blocks and reduction depth, the driver time (wall time during which no
task ran on any worker: graph building, planning, the final eigendecomposition
or solve, scheduling gaps), the workers' busy fraction (summed task time /
(w x wall)) and the peak RSS of one worker process against its memory limit.
The physical limits are measured in the same run: float32 GEMM and complex FFT
on one core, and disk write/read of a 1 GiB file.

**Roofline** (``--repeats R``, default 3): for each worker count w the hand block
loop of each pipeline's own per-block work (``roofline.py``: RFF map + ZᵀZ for
KRR/RNCA, map + FD shrink for SKPCA fd, map + write for RFF → Zarr) runs on w
processes, alternately with the distsketch run, R times each, and the best of each
is kept; the store's parallel read-and-decode rate is measured the same way.  The
table gives distsketch's rate against the hand loop on the same number of cores
(*vs hand*), against the float64-ZᵀZ hand loop (*vs hand f64*: what is left once
the float64 products are paid) and the hand loop's own w-process efficiency.
``--profile`` adds a cProfile breakdown of each pipeline on one process
(synchronous scheduler, one BLAS thread): seconds per component.  ``--quick``
runs everything on a tiny store with one repeat (the smoke test).

``--baseline-rows N --baseline-workers 1,2`` runs those worker counts on an N-row
store instead (for when the full store on one worker would not fit the time);
rates are rows/s, so efficiency compares them directly.  ``--time-budget S``
skips a (pipeline, workers) run whose projected time (from the same pipeline's
rate at the previous worker count, assuming perfect scaling) exceeds what is left.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import roofline

D, M, ELL = 100, 1024, 64
PIPELINES = ("skpca-fd", "skpca-rnca", "rff-zarr", "krr", "nystrom", "meka")
# each pipeline's hand loops (roofline.py): the float32 one it is judged by first
HAND = {"krr": ("krr", "krr-f64"), "skpca-rnca": ("skpca-rnca", "skpca-rnca-f64"),
        "skpca-fd": ("skpca-fd",), "rff-zarr": ("rff-zarr",)}


# ----------------------------------------------------------------------------- measuring
class WorkerPeak:
    """Peak RSS of each child process (the workers and nannies) while active."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()

    def _sample(self) -> None:
        for p in psutil.Process(os.getpid()).children(recursive=True):
            try:
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            self.peaks[p.pid] = max(self.peaks.get(p.pid, 0), rss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> WorkerPeak:
        self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def peak(self) -> int:
        return max(self.peaks.values(), default=0)


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -np.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def stream_stats(records: list[dict], t0: float, t1: float) -> dict:
    """Tasks, busy time and the time no task ran, from distributed's task stream."""
    spans = []
    busy = 0.0
    for rec in records:
        for ss in rec.get("startstops", ()):
            if ss.get("action") == "compute":
                a, b = max(ss["start"], t0), min(ss["stop"], t1)
                if b > a:
                    spans.append((a, b))
                    busy += b - a
    covered = _union_length(spans)
    return {"tasks": len(records), "busy_s": busy, "driver_s": (t1 - t0) - covered}


def gemm_gflops(n: int = 4096, d: int = D, m: int = M) -> float:
    """float32 GEMM (n x d) @ (d x m) on one core, GFLOP/s (best of 5)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, d), dtype=np.float32)
    B = rng.standard_normal((d, m), dtype=np.float32)
    out = np.empty((n, m), dtype=np.float32)
    best = np.inf
    with threadpool_limits(1):
        np.matmul(A, B, out=out)
        for _ in range(5):
            t = time.perf_counter()
            np.matmul(A, B, out=out)
            best = min(best, time.perf_counter() - t)
    return 2.0 * n * d * m / best / 1e9


def fft_gflops(n: int = 4096, rows: int = 512) -> float:
    """complex128 FFT of rows x n on one core, GFLOP/s by 5 n log2 n per transform."""
    x = np.random.default_rng(0).standard_normal((rows, n)) + 0j
    np.fft.fft(x, axis=1)
    best = np.inf
    for _ in range(5):
        t = time.perf_counter()
        np.fft.fft(x, axis=1)
        best = min(best, time.perf_counter() - t)
    return 5.0 * n * np.log2(n) * rows / best / 1e9


def gemm_probe(dtype: str = "float32", seconds: float = 1.5) -> float:
    """Sustained GEMM GFLOP/s of this process on one BLAS thread: the map's product
    (4096 x 100) @ (100 x 1024) in float32, the summaries' Z^T Z of a 2048 x 1024
    slice in float64; the mean over ``seconds`` (run on all workers at once it
    shows what w busy cores really deliver: clock, shared caches, SMT)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    if dtype == "float32":
        A = rng.standard_normal((4096, D), dtype=np.float32)
        B = rng.standard_normal((D, M), dtype=np.float32)
        flops, step = 2.0 * 4096 * D * M, (lambda: A @ B)
    else:
        Z = rng.standard_normal((2048, M))
        flops, step = 2.0 * 2048 * M * M, (lambda: Z.T @ Z)
    with threadpool_limits(1):
        step()
        t0 = time.perf_counter()
        k = 0
        while time.perf_counter() - t0 < seconds:
            step()
            k += 1
        return k * flops / (time.perf_counter() - t0) / 1e9


def write_probe(size: int = 256 * 2**20) -> float:
    """MB/s of writing ``size`` bytes with fsync from this process (all workers at once:
    the disk's aggregate write rate)."""
    path = Path(tempfile.gettempdir()) / f"bench-write-{os.getpid()}.bin"
    buf = np.random.default_rng(os.getpid()).integers(0, 255, 32 * 2**20, dtype=np.uint8)
    t = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(size // buf.size):
            fh.write(buf.tobytes())
        fh.flush()
        os.fsync(fh.fileno())
    rate = size / (time.perf_counter() - t) / 1e6
    path.unlink()
    return rate


def cluster_limits(client) -> dict:
    """GEMM and disk rates with every worker running the probe at once."""
    out = {}
    for key, fn, args in (("gemm_f32_gflops_per_worker", gemm_probe, ("float32",)),
                          ("gemm_f64_gflops_per_worker", gemm_probe, ("float64",)),
                          ("disk_write_mbps_total", write_probe, ())):
        vals = list(client.run(fn, *args).values())
        out[key] = float(np.sum(vals) if key.endswith("total") else np.mean(vals))
    return out


def disk_mbps(folder: Path, size: int = 2**30) -> tuple[float, float]:
    """Write (with fsync) and read back a file of ``size`` bytes, MB/s.  The read
    may come from the page cache (no root needed to drop it); it is the rate the
    benchmark's own re-reads see."""
    path = folder / "disk-probe.bin"
    buf = np.random.default_rng(0).integers(0, 255, 64 * 2**20, dtype=np.uint8).tobytes()
    t = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(size // len(buf)):
            fh.write(buf)
        fh.flush()
        os.fsync(fh.fileno())
    w = size / (time.perf_counter() - t) / 1e6
    t = time.perf_counter()
    with open(path, "rb") as fh:
        while fh.read(64 * 2**20):
            pass
    r = size / (time.perf_counter() - t) / 1e6
    path.unlink()
    return w, r


def machine() -> dict:
    import dask
    import distributed
    import scipy
    import sklearn
    import zarr

    from distsketch.diagnostics import cpu_model

    return {"cpu": cpu_model(), "logical_cores": os.cpu_count(),
            "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__, "dask": dask.__version__,
            "distributed": distributed.__version__, "zarr": zarr.__version__,
            "sklearn": sklearn.__version__, "platform": platform.platform()}


# ----------------------------------------------------------------------------- data
def make_store(work: Path, n: int) -> tuple[str, str]:
    """X (n x 100 float32, default write settings) and a target y = sin(x . v)."""
    import dask.array as da

    from distsketch.datasets import make_random_noisy_zarr
    from distsketch.io import open_array, write_array

    path = work / f"rn-{n}.zarr"
    ypath = work / f"rn-{n}-y.zarr"
    if not path.exists():
        make_random_noisy_zarr(path, n, D, random_state=0, progress=False)
    if not ypath.exists():
        X = open_array(str(path))
        v = np.random.default_rng(1).standard_normal(D).astype(np.float32) / np.sqrt(D)
        y = da.sin(X @ v)[:, None] + 0.1 * X[:, :1]
        write_array(y.astype(np.float32), ypath)
    return str(path), str(ypath)


# ----------------------------------------------------------------------------- pipelines
def run_pipeline(name: str, path: str, ypath: str, out: Path) -> None:
    from distsketch import (
        MEKA,
        NystromFeatures,
        RandomFourierFeatures,
        SketchedKernelRidge,
        StreamingKernelPCA,
    )
    from distsketch.io import open_array, write_array

    if name in ("skpca-fd", "skpca-rnca"):
        StreamingKernelPCA(n_components=10, n_random_features=M, sketch_size=ELL,
                           method=name.split("-")[1], random_state=0).fit(path)
    elif name == "rff-zarr":
        est = RandomFourierFeatures(n_components=M, random_state=0).fit(path)
        write_array(est.transform(open_array(path)), out)
    elif name == "krr":
        y = open_array(ypath)[:, 0]
        # alpha="auto" (GCV), the default: float32 products for the float32 store
        SketchedKernelRidge(standardize=False, random_state=0,
                            features=RandomFourierFeatures(n_components=M, random_state=0)
                            ).fit(path, y)
    elif name == "nystrom":
        est = NystromFeatures(random_state=0).fit(path)
        write_array(est.transform(open_array(path)), out)
    elif name == "meka":
        MEKA(random_state=0).fit(path)
    else:
        raise ValueError(f"unknown pipeline {name!r}; choose from {', '.join(PIPELINES)}")


def measure(client, name: str, path: str, ypath: str, n: int, work: Path) -> dict:
    from distributed import get_task_stream

    from distsketch.graph import record_plans

    out = work / f"out-{name}.zarr"
    shutil.rmtree(out, ignore_errors=True)
    with WorkerPeak() as mem, record_plans() as plans, get_task_stream(client) as ts:
        t0 = time.time()
        run_pipeline(name, path, ypath, out)
        t1 = time.time()
    shutil.rmtree(out, ignore_errors=True)
    st = stream_stats(ts.data, t0, t1)
    wall = t1 - t0
    w = len(client.scheduler_info(n_workers=-1)["workers"])
    depth = max((p.depth for p in plans if p.depth is not None), default=0)
    return {"pipeline": name, "workers": w, "rows": n, "wall_s": wall, "rows_per_s": n / wall,
            "tasks": st["tasks"], "driver_s": st["driver_s"],
            "busy_fraction": st["busy_s"] / (w * wall), "depth": depth,
            "blocks": max((p.n_blocks for p in plans), default=0),
            "plans": [str(p) for p in plans], "peak_worker_rss": mem.peak}


# where a pipeline's time goes on one process: cProfile's own time per function,
# grouped by the first pattern its file or name matches
COMPONENTS = (
    ("reads + decode", ("zarr/", "numcodecs", "blosc", "'acquire'", "fsspec", "distsketch/io/")),
    ("finite checks", ("validation/finite", "first_oversized_row", "check_finite")),
    ("graph + planning", ("distsketch/graph/", "dask/array/", "dask/blockwise", "dask/base",
                          "dask/highlevelgraph", "dask/_task_spec", "dask/optimization",
                          "dask/core", "tokenize", "dask/utils")),
    ("scheduling", ("dask/local", "dask/threaded", "distributed/", "queue", "concurrent/")),
    ("map (X W, cos)", ("ops/rff", "ops/linalg", "namespace.py:200", "inplace")),
    ("FD shrink", ("ops/fd", "frequent_directions", "'svd'")),
    ("final eigh / solve", ("'eigh'", "'solve'", "scipy/linalg", "'cholesky'")),
    ("dtype copies", ("'astype'", "'copy'", "copyto", "concatenate", "'concat'",
                      "numpy.asarray", "ascontiguousarray")),
    ("per-block summary (ZᵀZ, sums)", ("summaries/", "streaming_kpca", "ridge_summary",
                                       "estimators/", "'reduce'", "matmul")),
)


def profile_breakdown(name: str, path: str, ypath: str, work: Path) -> dict:
    """Seconds per component of one run of ``name`` on one process (synchronous
    scheduler, one BLAS thread), from cProfile's per-function own time."""
    import cProfile
    import pstats

    import dask
    from threadpoolctl import threadpool_limits

    out = work / f"prof-{name}.zarr"
    with threadpool_limits(1), dask.config.set(scheduler="synchronous"):
        run_pipeline(name, path, ypath, out)  # imports and caches out of the timing
        shutil.rmtree(out, ignore_errors=True)
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        run_pipeline(name, path, ypath, out)
        prof.disable()
        wall = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    parts = dict.fromkeys([c for c, _ in COMPONENTS] + ["other"], 0.0)
    for (file, line, func), (_, _, own, _, callers) in pstats.Stats(prof).stats.items():
        where = f"{file}:{line}({func!r})"
        comp = next((c for c, pats in COMPONENTS if any(p in where for p in pats)), "other")
        if comp == "final eigh / solve" and any("ops/fd" in c[0] for c in callers):
            comp = "FD shrink"  # FD shrinks by an eigendecomposition of its Gram matrix
        parts[comp] += own
    return {"pipeline": name, "wall_s": wall, "parts": parts}


def hand_and_pipeline(client, pool, name: str, path: str, ypath: str, n: int, work: Path,
                      w: int, repeats: int) -> tuple[dict | None, dict]:
    """The distsketch run and its hand loops, alternately, ``repeats`` times: best of each."""
    best: dict | None = None
    hands: dict[str, dict] = {}
    out_rows = None
    if name == "rff-zarr":  # the hand loop writes the pipeline's own output chunks
        from distsketch import RandomFourierFeatures
        from distsketch.io import open_array

        est = RandomFourierFeatures(n_components=M, random_state=0).fit(path)
        out_rows = int(est.transform(open_array(path)).chunks[0][0])
    for _ in range(repeats):
        for loop in HAND.get(name, ()):
            h = roofline.hand_loop(loop, path, ypath, w, work, M, ELL, pool, out_rows)
            if loop not in hands or h["rows_per_s"] > hands[loop]["rows_per_s"]:
                hands[loop] = h
        r = measure(client, name, path, ypath, n, work)
        if best is None or r["rows_per_s"] > best["rows_per_s"]:
            best = r
    return best, hands


def warm_up() -> None:
    """Import on a worker what the pipelines use, so that a fresh worker's one-time
    imports (about 0.5 s, and 6 s for 16 workers importing at once) are not
    counted in the first pipeline's time."""
    import importlib

    for mod in ("scipy.linalg", "sklearn.cluster", "zarr", "numcodecs", "distsketch.io",
                "distsketch.estimators.decomposition.streaming_kpca", "distsketch.estimators.ridge.regressor",
                "distsketch.estimators.nystrom.features", "distsketch.estimators.nystrom.meka"):
        importlib.import_module(mod)


# ----------------------------------------------------------------------------- report
def add_efficiency(results: list[dict]) -> None:
    base = {r["pipeline"]: r["rows_per_s"] for r in results if r["workers"] == 1}
    for r in results:
        one = base.get(r["pipeline"])
        r["speedup"] = r["rows_per_s"] / one if one else None
        r["efficiency"] = r["rows_per_s"] / (r["workers"] * one) if one else None


def table(results: list[dict], limit: int) -> str:
    head = ("| pipeline | workers | rows | wall s | rows/s | speedup | efficiency | tasks | "
            "blocks | depth | driver s | busy | peak worker RSS / limit |")
    lines = [head, "|" + "---|" * 13]
    for r in results:
        sp = f"{r['speedup']:.2f}" if r.get("speedup") else "-"
        ef = f"{r['efficiency']:.2f}" if r.get("efficiency") else "-"
        lines.append(
            f"| {r['pipeline']} | {r['workers']} | {r['rows']:,} | {r['wall_s']:.1f} | "
            f"{r['rows_per_s']:,.0f} | {sp} | {ef} | {r['tasks']} | {r['blocks']} | "
            f"{r['depth']} | {r['driver_s']:.2f} | {r['busy_fraction']:.2f} | "
            f"{r['peak_worker_rss'] / 2**30:.2f} / {limit / 2**30:.2f} GiB |")
    return "\n".join(lines)


def roofline_table(results: list[dict], reads: dict[int, float]) -> str:
    """distsketch against its hand loops and the store's read rate, per worker count."""
    one = {(r["pipeline"], k): r["hand"][k] for r in results if r["workers"] == 1
           for k in r.get("hand", {})}
    lines = ["| pipeline | w | distsketch rows/s | hand loop rows/s | vs hand | "
             "hand f64 rows/s | vs hand f64 | hand w ÷ (w × hand 1) | read rows/s |",
             "|" + "---|" * 9]
    for r in results:
        if not r.get("hand"):
            continue
        w, name = r["workers"], r["pipeline"]
        loops = HAND[name]
        hand = r["hand"][loops[0]]
        f64 = r["hand"].get(loops[1]) if len(loops) > 1 else None
        base = one.get((name, loops[0]))
        scale = f"{hand / (w * base):.2f}" if base else "-"
        f64s = (f"{f64:,.0f} | {r['rows_per_s'] / f64:.2f}" if f64 else "- | -")
        lines.append(f"| {name} | {w} | {r['rows_per_s']:,.0f} | {hand:,.0f} | "
                     f"{r['rows_per_s'] / hand:.2f} | {f64s} | {scale} | "
                     f"{reads.get(w, float('nan')):,.0f} |")
    return "\n".join(lines)


def profile_table(profiles: list[dict]) -> str:
    names = [c for c, _ in COMPONENTS] + ["other"]
    lines = ["| component (s) | " + " | ".join(p["pipeline"] for p in profiles) + " |",
             "|---|" + "---:|" * len(profiles)]
    for c in names:
        lines.append(f"| {c} | " + " | ".join(f"{p['parts'][c]:.2f}" for p in profiles) + " |")
    lines.append("| **wall** | " + " | ".join(f"{p['wall_s']:.2f}" for p in profiles) + " |")
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, default=1_000_000)
    ap.add_argument("--workers", type=str, default="1,2")
    ap.add_argument("--pipelines", type=str, default=",".join(PIPELINES))
    ap.add_argument("--baseline-rows", type=float, default=None,
                    help="rows for the --baseline-workers counts (default: --rows)")
    ap.add_argument("--baseline-workers", type=str, default="1")
    ap.add_argument("--memory-limit", type=str, default=None,
                    help="per-worker memory_limit (default: RAM / cores, at most 8 GiB)")
    ap.add_argument("--time-budget", type=float, default=None, help="seconds for all runs")
    ap.add_argument("--workdir", type=str, default=None, help="stores go here (reused)")
    ap.add_argument("--json", type=str, default=None, help="write all results here")
    ap.add_argument("--no-limits", action="store_true", help="skip GEMM/FFT/disk probes")
    ap.add_argument("--repeats", type=int, default=3,
                    help="distsketch and hand loop alternately, best of this many")
    ap.add_argument("--no-roofline", action="store_true", help="skip the hand loops")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile breakdown of each pipeline on one process")
    ap.add_argument("--quick", action="store_true",
                    help="a tiny store, one repeat, no probes (a smoke test)")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.repeats, args.no_limits = 6000, 1, True

    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    start = time.time()
    rows = int(args.rows)
    base_rows = int(args.baseline_rows or rows)
    base_workers = set(_ints(args.baseline_workers)) if args.baseline_rows else set()
    pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    for p in pipelines:
        if p not in PIPELINES:
            ap.error(f"unknown pipeline {p!r}; choose from {', '.join(PIPELINES)}")
    limit = (int(parse_bytes(args.memory_limit)) if args.memory_limit else
             min(8 * 2**30, psutil.virtual_memory().total // (os.cpu_count() or 1)))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    info = machine()
    print("machine:", json.dumps(info), flush=True)
    print("load average (1, 5, 15 min):", os.getloadavg(), flush=True)
    t = time.time()
    stores = {n: make_store(work, n) for n in sorted({rows, base_rows})}
    print(f"stores ready in {time.time() - t:.1f} s: {sorted(stores)}", flush=True)
    limits: dict = {}
    if not args.no_limits:
        limits["gemm_f32_gflops_1core"] = gemm_gflops()
        limits["gemm_f64_ztz_gflops_1core"] = gemm_probe("float64")
        limits["fft_c128_gflops_1core"] = fft_gflops()
        limits["disk_write_mbps"], limits["disk_read_mbps"] = disk_mbps(work)
        print("limits:", json.dumps({k: round(v, 1) for k, v in limits.items()}), flush=True)

    profiles = ([profile_breakdown(name, *stores[rows], work) for name in pipelines]
                if args.profile else [])
    if profiles:
        print(profile_table(profiles), flush=True)
    reads: dict[int, float] = {}
    results: list[dict] = []
    skipped: list[str] = []
    last_rate: dict[str, tuple[int, float]] = {}
    for w in _ints(args.workers):
        n = base_rows if w in base_workers else rows
        path, ypath = stores[n]
        pool = roofline.start_pool(w) if w > 1 and not args.no_roofline else None
        with LocalCluster(n_workers=w, threads_per_worker=1, memory_limit=limit,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            if not args.no_roofline:
                reads[w] = max(roofline.hand_loop("read", path, ypath, w, work, M, ELL, pool)
                               ["rows_per_s"] for _ in range(args.repeats))
                print(f"read + decode w={w}: {reads[w]:,.0f} rows/s", flush=True)
            client.wait_for_workers(w, timeout=120)
            client.run(warm_up)
            if not args.no_limits:
                cl = cluster_limits(client)
                limits[f"workers={w}"] = cl
                print(f"limits with {w} workers at once:",
                      json.dumps({k: round(v, 1) for k, v in cl.items()}), flush=True)
            for name in pipelines:
                if args.time_budget is not None:
                    left = args.time_budget - (time.time() - start)
                    prev = last_rate.get(name)
                    guess = n / (prev[1] * w / prev[0]) if prev else 0.0
                    if guess > left:
                        skipped.append(f"{name} on {w} workers (projected {guess:.0f} s, "
                                       f"{left:.0f} s left)")
                        print("skip", skipped[-1], flush=True)
                        continue
                try:
                    if args.no_roofline:
                        r = measure(client, name, path, ypath, n, work)
                    else:
                        r, hands = hand_and_pipeline(client, pool, name, path, ypath, n,
                                                     work, w, args.repeats)
                        r["hand"] = {k: h["rows_per_s"] for k, h in hands.items()}
                except Exception as exc:  # a failure is a result too
                    r = {"pipeline": name, "workers": w, "rows": n,
                         "error": f"{type(exc).__name__}: {exc}"}
                    print("FAILED", r, flush=True)
                    results.append(r)
                    continue
                last_rate[name] = (w, r["rows_per_s"])
                results.append(r)
                print(f"{name:11s} w={w:2d} n={n:,} {r['wall_s']:7.1f} s "
                      f"{r['rows_per_s']:10,.0f} rows/s tasks={r['tasks']} "
                      f"driver={r['driver_s']:.2f} s busy={r['busy_fraction']:.2f} "
                      f"peak={r['peak_worker_rss'] / 2**30:.2f} GiB", flush=True)
                for p in r["plans"]:
                    print("    plan", p, flush=True)
                for k, v in r.get("hand", {}).items():
                    print(f"    hand loop {k}: {v:,.0f} rows/s "
                          f"(distsketch {r['rows_per_s'] / v:.2f} of it)", flush=True)
        if pool is not None:
            pool.terminate()
            pool.join()
    ok = [r for r in results if "error" not in r]
    add_efficiency(ok)
    print()
    print(table(ok, limit))
    for r in results:
        if "error" in r:
            print(f"FAILED {r['pipeline']} on {r['workers']} workers: {r['error']}")
    for s in skipped:
        print("skipped", s)
    if reads:
        print()
        print(roofline_table(ok, reads))
    if profiles:
        print()
        print(profile_table(profiles))
    doc = {"machine": info, "limits": limits, "memory_limit": limit, "rows": rows,
           "baseline_rows": base_rows if base_workers else None,
           "load_average": os.getloadavg(), "command": " ".join(sys.argv),
           "results": results, "skipped": skipped, "reads": reads, "profiles": profiles}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1, default=str))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return doc


if __name__ == "__main__":
    main()
