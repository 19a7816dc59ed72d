"""One GPU against all CPU cores of the same machine, reading the same Zarr store.

In one run, on a RandomNoisy store of ``--rows`` × ``--cols`` float32 rows:

1. the store's parallel read-and-decode rate (one reader thread per core, no compute);
2. the device's float32 GEMM rate (CuPy on the GPU; NumPy on all cores with ``--device cpu``);
3. for each pipeline, rows/s with ``device="cuda"`` on one GPU (this process, Dask's
   threaded scheduler) and with distsketch on all CPU cores (a LocalCluster of one
   single-threaded worker per core, distsketch's defaults):

   * RFF → Zarr: ``RandomFourierFeatures(m).fit(path)``, then ``transform`` written to Zarr;
   * RFF KRR at each ``--m``: ``SketchedKernelRidge(RandomFourierFeatures(m)).fit(path, y)``;
   * SKPCA fd and rnca: ``StreamingKernelPCA(n_random_features=m, sketch_size=ℓ, method=...)``;
   * Nyström features: ``NystromFeatures(n_landmarks=m).fit(path)``, transform written to Zarr;
   * Falkon: ``NystromKernelRidge(n_centers=--falkon-m, max_iter=--falkon-iters).fit(path, y)``
     (the right-hand side pass and that many CG passes; rows/s counts the rows once).

It prints one table (rows/s, GPU/CPU ratio, projected time for 10⁹ rows of the same
width), the targets of issue 22 measured against the same run's read and GEMM rates,
and the machine.  A pipeline that fails prints its error in the table.

Usage::

    python benchmarks/bench_gpu.py                              # 4·10⁶ × 100 rows, m = 1024, 4096
    python benchmarks/bench_gpu.py --rows 1e7 --workdir /scratch/bench
    python benchmarks/bench_gpu.py --device cpu --rows 4000 --cols 8 --m 32 --cpu-cluster threads
                                                                # CPU-only smoke run (no GPU needed)

Without CuPy or a visible GPU, ``--device cuda`` (the default) exits with status 2 and
says what is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

PROJECTED_ROWS = 10**9


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="the device of the first column (default cuda; cpu: a smoke run)")
    p.add_argument("--rows", type=float, default=4e6, help="rows of the store (default 4e6)")
    p.add_argument("--cols", type=int, default=100, help="columns (default 100)")
    p.add_argument("--chunk-rows", type=int, default=None,
                   help="rows per Zarr chunk (default: 2**18, at most rows/16)")
    p.add_argument("--m", default="1024,4096",
                   help="feature counts for RFF KRR (the first is used by the other pipelines)")
    p.add_argument("--sketch-size", type=int, default=64, help="FD sketch rows l (default 64)")
    p.add_argument("--falkon-m", type=int, default=4096, help="Falkon centres (default 4096)")
    p.add_argument("--falkon-iters", type=int, default=5,
                   help="Falkon CG passes (default 5; 0 skips the pipeline)")
    p.add_argument("--cpu-cluster", choices=["local", "threads", "none"], default="local",
                   help="the CPU column: a LocalCluster of one worker per core (default), "
                        "threads in this process, or none (skip it)")
    p.add_argument("--workdir", default=None, help="folder for the store (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the store and outputs")
    return p.parse_args(argv)


def require_device(device: str) -> None:
    if device == "cpu":
        return
    from distsketch.errors import ConfigError
    from distsketch.ops.device import require_cupy

    try:
        require_cupy("bench_gpu.py --device cuda")
    except ConfigError as exc:
        print(f"bench_gpu.py: {exc}\nNo GPU run is possible here; for a CPU-only smoke run "
              "use --device cpu --rows 4000 --cols 8 --m 32 --cpu-cluster threads.",
              file=sys.stderr)
        sys.exit(2)


def make_store(workdir: Path, n: int, d: int, chunk_rows: int) -> tuple[str, str]:
    from distsketch import open_array, write_array
    from distsketch.datasets import make_random_noisy_zarr

    X = str(make_random_noisy_zarr(workdir / "X.zarr", n, d, chunk_rows=chunk_rows,
                                   overwrite=True, dtype=np.float32,
                                   signal_dim=min(50, max(1, d // 2))))
    w = np.random.default_rng(1).normal(size=d).astype(np.float32) / np.sqrt(d)
    y = str(write_array(open_array(X) @ w, workdir / "y.zarr", chunk_rows=chunk_rows,
                        overwrite=True))
    return X, y


def read_rate(path: str, threads: int) -> float:
    """Rows/s of parallel readers decoding whole chunks of the store, nothing else."""
    from distsketch.io.stores import open_zarr

    arr = open_zarr(path)  # the store's array (X in the dataset's group)
    c = (arr.shards or arr.chunks)[0]
    starts = range(0, arr.shape[0], c)
    arr[:c]  # open the store and warm the codec once

    def read(s: int) -> int:
        return int(arr[s: s + c].shape[0])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        rows = sum(pool.map(read, starts))
    return rows / (time.perf_counter() - t0)


def gemm_rate(device: str) -> float:
    """float32 GEMM flop/s of ``device`` (best of 3, 8192 × 4096 @ 4096 × 4096)."""
    if device == "cuda":
        import cupy as xp
    else:
        xp = np
    a = xp.ones((8192, 4096), dtype=xp.float32)
    b = xp.ones((4096, 4096), dtype=xp.float32)
    best = float("inf")
    for _ in range(3):
        if device == "cuda":
            xp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        a @ b
        if device == "cuda":
            xp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * 8192 * 4096 * 4096 / best


def pipelines(X: str, y: str, out: Path, ms: list[int], ell: int, falkon_m: int = 0,
              falkon_iters: int = 0) -> dict[str, Callable[[], None]]:
    from distsketch import (
        NystromFeatures,
        NystromKernelRidge,
        RandomFourierFeatures,
        SketchedKernelRidge,
        StreamingKernelPCA,
        write_array,
    )

    m = ms[0]

    def to_zarr(est: object, name: str) -> Callable[[], None]:
        def run() -> None:
            est.fit(X)  # type: ignore[attr-defined]
            write_array(est.transform(X), out / name, overwrite=True)  # type: ignore[attr-defined]
        return run

    table: dict[str, Callable[[], None]] = {
        f"RFF -> Zarr (m={m})": to_zarr(RandomFourierFeatures(n_components=m, random_state=0),
                                        "rff.zarr")}
    for k in ms:
        table[f"RFF KRR (m={k})"] = (lambda k=k: SketchedKernelRidge(
            features=RandomFourierFeatures(n_components=k, random_state=0),
            random_state=0).fit(X, y))
    for method in ("fd", "rnca"):
        table[f"SKPCA {method} (m={m}, l={ell})"] = (lambda method=method: StreamingKernelPCA(
            n_components=min(10, ell), n_random_features=m, sketch_size=ell, method=method,
            random_state=0).fit(X))
    table[f"Nystrom features (m={m}) -> Zarr"] = to_zarr(
        NystromFeatures(n_landmarks=m, random_state=0), "nystrom.zarr")
    if falkon_iters > 0:
        def falkon() -> None:
            with warnings.catch_warnings():  # a CG stopped at max_iter warns
                warnings.simplefilter("ignore")
                NystromKernelRidge(n_centers=falkon_m, max_iter=falkon_iters, tol=1e-12,
                                   random_state=0).fit(X, y)
        table[f"Falkon (M={falkon_m}, {falkon_iters} CG passes)"] = falkon
    return table


def timed(run: Callable[[], None], n: int) -> float | str:
    try:
        t0 = time.perf_counter()
        run()
        return n / (time.perf_counter() - t0)
    except Exception as exc:  # one failing pipeline must not hide the others' numbers
        return f"failed: {type(exc).__name__}: {' '.join(str(exc).split())[:90]}"


def run_column(device: str, cluster: str, table: dict[str, Callable[[], None]],
               n: int) -> dict[str, float | str]:
    import dask

    from distsketch.cluster import connect

    spec = {"kind": "local", "n_workers": os.cpu_count(), "threads_per_worker": 1} \
        if cluster == "local" else "threads"
    with dask.config.set({"distsketch.device": device}), connect(spec):
        return {name: timed(run, n) for name, run in table.items()}


def fmt_rate(v: float | str | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if isinstance(v, float) else v


def fmt_time(rate: float | str | None) -> str:
    if not isinstance(rate, float):
        return "-"
    s = PROJECTED_ROWS / rate
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"


def machine(device: str) -> str:
    import dask
    import zarr

    import distsketch
    from distsketch.diagnostics import cpu_model
    from distsketch.graph.host_memory import host_memory_limit

    lines = [f"CPU: {cpu_model()}, {os.cpu_count()} logical cores, "
             f"{host_memory_limit() / 2**30:.0f} GiB",
             f"Python {platform.python_version()}, NumPy {np.__version__}, dask {dask.__version__}, "
             f"zarr {zarr.__version__}, distsketch {distsketch.__version__}"]
    if device == "cuda":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        lines.append(f"GPU: {name}, {cupy.cuda.Device().mem_info[1] / 2**30:.0f} GiB, "
                     f"{cupy.cuda.runtime.getDeviceCount()} visible; CuPy {cupy.__version__}, "
                     f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_device(args.device)
    n, d = int(args.rows), int(args.cols)
    ms = [int(v) for v in str(args.m).split(",") if v.strip()]
    chunk = args.chunk_rows or max(1, min(2**18, n // 16 or 1))
    cores = os.cpu_count() or 1
    own = args.workdir is None
    import tempfile

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-gpu-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        print(f"writing {n} x {d} float32 RandomNoisy rows to {workdir} ...", file=sys.stderr)
        X, y = make_store(workdir, n, d, chunk)
        rate = read_rate(X, cores)
        gemm = gemm_rate(args.device)
        table = pipelines(X, y, workdir, ms, args.sketch_size, args.falkon_m, args.falkon_iters)
        dev = run_column(args.device, "threads", table, n)
        cpu = (run_column("cpu", args.cpu_cluster, table, n)
               if args.cpu_cluster != "none" else dict.fromkeys(table))
        label = "1 GPU" if args.device == "cuda" else "device cpu (threads)"
        print(f"\n{n:,} x {d} float32 rows from a local Zarr store ({chunk}-row chunks)\n")
        print(f"store read + decode, {cores} reader threads: {rate:,.0f} rows/s "
              f"({rate * d * 4 / 1e9:.2f} GB/s)")
        print(f"float32 GEMM ({args.device}): {gemm / 1e12:.2f} TFLOP/s\n")
        print(f"| pipeline | {label} rows/s | {cores} CPU cores rows/s | ratio | "
              f"10^9 x {d} rows, {label} | 10^9 x {d} rows, CPU |")
        print("|---|---|---|---|---|---|")
        for name in table:
            a, b = dev[name], cpu[name]
            ratio = f"{a / b:.1f}x" if isinstance(a, float) and isinstance(b, float) else "-"
            print(f"| {name} | {fmt_rate(a)} | {fmt_rate(b)} | {ratio} | {fmt_time(a)} | "
                  f"{fmt_time(b)} |")
        print("\nTargets (issue 22), against this run's read and GEMM rates:")
        krr = dev.get(f"RFF KRR (m={ms[0]})")
        if isinstance(krr, float):
            print(f"  RFF KRR m={ms[0]}: {krr / rate:.2f} of the read rate (target >= 0.8)")
        big = dev.get(f"RFF KRR (m={ms[-1]})")
        if isinstance(big, float):
            flops = 2 * d * ms[-1] + 2 * ms[-1] ** 2  # XW and ZᵀZ per row
            print(f"  RFF KRR m={ms[-1]} per-block work: {big * flops / gemm:.2f} of the GEMM "
                  "rate (target >= 0.5)")
        fd = dev.get(f"SKPCA fd (m={ms[0]}, l={args.sketch_size})")
        if isinstance(fd, float):
            print(f"  SKPCA fd: {fd:,.0f} rows/s (target >= 1,000,000 at m=1024, l=64)")
        print("\nMachine:\n" + machine(args.device))
    finally:
        if own and not args.keep:
            with contextlib.suppress(OSError):
                shutil.rmtree(workdir)
    return 0


if __name__ == "__main__":  # LocalCluster's workers re-import this script
    sys.exit(main())
