"""One device at the speed of its store: every pipeline against the same run's read, GEMM and write rates.

One script, one run, within ``--budget-seconds`` (default 300, warm-up included):

1. **Warm-up.** Each pool thread the pipelines use runs a GEMM, an ``eigh`` and a
   Cholesky (per-thread cuBLAS/cuSOLVER handles on a GPU), CuPy's pinned pool
   receives a chunk-sized buffer, and every pipeline runs once on a small
   calibration store (kernel compiles, memory pools).  With ``--device cpu`` the
   same code runs with NumPy.
2. **Sizing.** Each pipeline runs again, warm, on two calibration stores (n₀ and
   2 n₀ rows); a line ``fixed + per_row · n`` through the two times per pipeline
   (and for writing the store, reading it and the encode + write probe) gives
   the most rows whose predicted run fits 0.8 of the budget left, capped by
   ``--max-rows`` and by half the free disk of ``--workdir``.
3. **Rates of the hardware, in the same run, on that store:**
   the store's parallel read + decode rate with the reader threads the pipelines
   use (rows/s, GB/s), the device's float32 GEMM rate (GFLOP/s), and the host's
   parallel encode + write rate (GB/s: zarr-python writing the RFF output's
   own chunks with the codecs distsketch writes, lz4 + crc32c, from host memory).
4. **Each pipeline, best of two timed runs:** rows/s, its ratio to the read
   rate, for the writers GB/s written and the ratio to the encode + write rate,
   the GEMM share where a target names it, and the projected time for 10⁹ rows
   of the store's width:

   * ``krr``: ``SketchedKernelRidge(features=RandomFourierFeatures(m))`` at its
     defaults (γ, α and standardisation chosen by the fit) from Zarr;
   * ``krr_big``: the same at ``--m-big`` features; its GEMM share counts
     ``2 d m + 2 m²`` flops a row (``XW`` and ``ZᵀZ`` as GEMMs) over the whole
     fit: the time float32 GEMMs of the block's products take against the
     fit's.  A ``syrk`` for ``ZᵀZ`` (NumPy's ``Z.T @ Z``) does half of the
     second term, so the share can pass 1 on a CPU;
   * ``skpca_rnca``, ``skpca_fd``: ``StreamingKernelPCA(n_random_features=m,
     sketch_size=ℓ, method=...)``;
   * ``rnca_engine``: ``skpca_rnca`` on the device pass engine (dask config
     ``distsketch.engine = "device"``, :mod:`distsketch.graph.engine`): the store
     opened with host blocks, which the engine's readers stage into pinned
     buffers and copy to the device on their own stream; the report prints
     its rate against ``skpca_rnca``'s (one task per block on dask's threads);
   * ``rff_zarr``, ``nystrom_zarr``: ``transform(X)`` written to Zarr by
     ``write_array`` (rows/s and GB/s of that pass; the fit is timed apart);
   * ``rff_engine``: ``rff_zarr`` written by the pass engine's writers
     (``distsketch.engine = "device"``: reader threads, device-to-host copies
     into pinned buffers, a writer pool); the report prints its rate against
     ``rff_zarr``'s;
   * ``falkon``: ``NystromKernelRidge(n_centers=M, max_iter=k)``, rows/s
     counting each row once (the store is read once when its rows fit the
     row cache, ``distsketch.cache-rows``); each CG pass's time (from the ``distsketch``
     logger's per-pass record) against ``2 M (d + 2) + 4 M`` flops a row, the
     GEMM and kernel-vector products its docstring counts.

It prints PASS or FAIL for each target of issue 38 (never stops on one), the
machine, and with ``--json OUT`` writes every number, the plan and the ordered
events (warm-up, probes, timed runs).  A failing pipeline prints its error.

Usage::

    python benchmarks/bench_gpu.py                       # one GPU, 5 minutes, m = 1024 / 4096
    python benchmarks/bench_gpu.py --json gpu.json --budget-seconds 240
    python benchmarks/bench_gpu.py --quick --json q.json # CPU only, NumPy as the device, seconds
    python benchmarks/bench_gpu.py --device cpu          # the full run on the CPU

Without CuPy or a visible GPU, ``--device cuda`` (the default) exits with status 2 and
says what is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PROJECTED_ROWS = 10**9
#: the share of the budget left after calibration that the timed part is planned to fill
SAFETY = 0.8
#: seconds kept for printing, the machine's description and removing the store
RESERVE_S = 3.0

#: (pipeline, measure, threshold): issue 38's targets, each a ratio within this run
TARGETS: tuple[tuple[str, str, float], ...] = (
    ("krr", "ratio_to_read", 0.8),
    ("skpca_rnca", "ratio_to_read", 0.8),
    ("skpca_fd", "ratio_to_read", 0.8),
    ("rff_zarr", "ratio_to_encode_write", 0.7),
    ("krr_big", "gemm_share", 0.5),
    ("falkon", "cg_pass_gemm_share_min", 0.3),
)
PIPELINES = ("krr", "krr_big", "skpca_rnca", "rnca_engine", "skpca_fd", "rff_zarr", "rff_engine",
             "nystrom_zarr", "falkon")

#: defaults of a GPU run and of ``--quick`` (a CPU run of a few seconds)
FULL = {"device": "cuda", "cols": 100, "m": "1024", "m_big": 4096, "sketch_size": 64,
        "falkon_m": 4096, "falkon_iters": 5, "gemm_size": 4096, "budget_seconds": 300.0,
        "max_rows": 20_000_000, "calib_chunk": 8192, "max_chunk": 131072}
QUICK = {"device": "cpu", "cols": 8, "m": "16", "m_big": 32, "sketch_size": 8,
         "falkon_m": 64, "falkon_iters": 2, "gemm_size": 256, "budget_seconds": 15.0,
         "max_rows": 8192, "calib_chunk": 256, "max_chunk": 1024, "threads": 2}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with ``--quick``'s or the GPU run's defaults filled in."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a CPU run of a few seconds: NumPy as the device, tiny sizes")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="where the pipelines compute (default cuda; cpu with --quick)")
    p.add_argument("--budget-seconds", type=float, default=None,
                   help="wall time of the whole run, warm-up included (default 300)")
    p.add_argument("--json", default=None, metavar="OUT", help="write every number to OUT")
    p.add_argument("--rows", type=float, default=None,
                   help="rows of the store (default: as many as the budget allows)")
    p.add_argument("--max-rows", type=float, default=None,
                   help="most rows the budget may choose (default 2e7)")
    p.add_argument("--cols", type=int, default=None, help="columns (default 100)")
    p.add_argument("--chunk-rows", type=int, default=None,
                   help="rows per chunk of the store (default: at most 131072, at least two "
                        "chunks per reader thread)")
    p.add_argument("--calib-chunk", type=int, default=None,
                   help="rows per chunk of the calibration stores (default 8192)")
    p.add_argument("--max-chunk", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--m", default=None,
                   help="features of KRR, SKPCA and the writers (default 1024); '1024,4096' "
                        "also sets --m-big")
    p.add_argument("--m-big", type=int, default=None,
                   help="features of the KRR whose GEMM share is a target (default 4096)")
    p.add_argument("--sketch-size", type=int, default=None, help="SKPCA sketch rows l (64)")
    p.add_argument("--falkon-m", type=int, default=None, help="Falkon centres (default 4096)")
    p.add_argument("--falkon-iters", type=int, default=None, help="Falkon CG passes (5)")
    p.add_argument("--gemm-size", type=int, default=None,
                   help="GEMM of (2k x k) @ (k x k) float32 (default k = 4096)")
    p.add_argument("--threads", type=int, default=None,
                   help="reader threads: the pool the pipelines run on and the read and "
                        "write probes use (default: dask's threaded pool, one per core)")
    p.add_argument("--pipelines", default=",".join(PIPELINES),
                   help="comma-separated subset of " + ", ".join(PIPELINES))
    p.add_argument("--cpu-cluster", choices=["none", "threads", "local"], default="none",
                   help="also time every pipeline on the CPU: threads in this process or a "
                        "LocalCluster of one worker per core (default none)")
    p.add_argument("--workdir", default=None, help="folder for the stores (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the stores")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if args.threads is None:
        import dask.system

        args.threads = int(dask.system.CPU_COUNT)
    ms = [int(v) for v in str(args.m).split(",") if v.strip()]
    if not ms:
        p.error("--m needs at least one feature count")
    args.m = ms[0]
    if len(ms) > 1 and "--m-big" not in (argv if argv is not None else sys.argv):
        args.m_big = ms[-1]
    args.pipelines = [k.strip() for k in str(args.pipelines).split(",") if k.strip()]
    unknown = sorted(set(args.pipelines) - set(PIPELINES))
    if unknown:
        p.error(f"unknown pipelines {unknown}; choose from {', '.join(PIPELINES)}")
    if args.m_big <= 0 and "krr_big" in args.pipelines:
        args.pipelines.remove("krr_big")
    if args.falkon_iters <= 0 and "falkon" in args.pipelines:
        args.pipelines.remove("falkon")
    return args


def require_device(device: str) -> None:
    """Exit with status 2, saying what is missing, when ``device`` is cuda and no GPU is usable."""
    if device == "cpu":
        return
    from distsketch.errors import ConfigError
    from distsketch.ops.device import require_cupy

    try:
        require_cupy("bench_gpu.py --device cuda")
    except ConfigError as exc:
        print(f"bench_gpu.py: {exc}\nNo GPU run is possible here; for a CPU-only run use "
              "--quick (seconds) or --device cpu.", file=sys.stderr)
        sys.exit(2)


# ---------------------------------------------------------------------------- bookkeeping


class Clock:
    """Seconds since the run began, and the ordered record of what ran when."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.events: list[dict[str, Any]] = []

    def now(self) -> float:
        return time.perf_counter() - self.t0

    @contextlib.contextmanager
    def event(self, phase: str, what: str, store: str = "", column: str = ""
              ) -> Iterator[dict[str, Any]]:
        ev: dict[str, Any] = {"phase": phase, "what": what, "store": store, "column": column,
                              "start": self.now()}
        try:
            yield ev
        finally:
            ev["end"] = self.now()
            ev["seconds"] = ev["end"] - ev["start"]
            self.events.append(ev)


def linear_cost(n1: int, t1: float, n2: int, t2: float) -> tuple[float, float]:
    """``(fixed, per_row)`` of ``t = fixed + per_row · n`` through two warm runs (n1 < n2).

    ``per_row`` is at least a quarter of ``t2 / n2``, so a noisy pair (the
    smaller run slower) cannot plan an overlong run; ``fixed`` is never negative.
    """
    per_row = max((t2 - t1) / (n2 - n1), 0.25 * t2 / n2, 0.0)
    return max(t1 - per_row * n1, 0.0), per_row


def plan_rows(seconds_left: float, fixed: float, per_row: float, *, lo: int, hi: int,
              step: int, safety: float = SAFETY) -> tuple[int, float]:
    """The most rows, a multiple of ``step`` in ``[lo, hi]``, whose ``fixed + per_row · n`` fits.

    Fits means at most ``safety · seconds_left``; when not even ``lo`` fits,
    ``lo`` (the caller says the budget is exceeded).  Returns the rows and
    their predicted seconds.
    """
    room = safety * seconds_left - fixed
    n = hi if per_row <= 0 else int(max(room, 0.0) // per_row)
    n = max(lo, min(hi, n // step * step))
    return n, fixed + per_row * n


def choose_chunk(n: int, threads: int, calib_chunk: int, max_chunk: int) -> int:
    """Rows per chunk of the store: at most ``max_chunk``, two chunks per reader thread if n allows."""
    c = min(max_chunk, n // (2 * threads))
    return max(calib_chunk, c // calib_chunk * calib_chunk)


def tree_bytes(path: str | Path) -> int:
    """Bytes of the files under ``path`` (a store as stored: compressed chunks and metadata)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def remove(path: str | Path) -> None:
    with contextlib.suppress(OSError):
        shutil.rmtree(path)


# ---------------------------------------------------------------------------- the hardware


def namespace(device: str) -> tuple[Any, Callable[[], None]]:
    """The array module of ``device`` and a function waiting for its queued work."""
    if device == "cuda":
        import cupy

        return cupy, cupy.cuda.Device().synchronize
    return np, lambda: None


def gemm_rate(device: str, k: int, clock: Clock) -> dict[str, Any]:
    """float32 GEMM of ``device``: (2k × k) @ (k × k), one untimed call, then the best of 3."""
    xp, sync = namespace(device)
    rng = np.random.default_rng(0)
    a = xp.asarray(rng.standard_normal((2 * k, k), dtype=np.float32))
    b = xp.asarray(rng.standard_normal((k, k), dtype=np.float32))
    with clock.event("warmup", "gemm"):
        a @ b
        sync()
    times = []
    for _ in range(3):
        with clock.event("timed", "gemm") as ev:
            a @ b
            sync()
        times.append(ev["seconds"])
    flops = 2.0 * (2 * k) * k * k
    return {"shape": [2 * k, k, k], "seconds": times, "flop_s": flops / min(times),
            "gflop_s": flops / min(times) / 1e9}


def warm_threads(device: str, threads: int, pinned_bytes: int, clock: Clock) -> int:
    """Run a GEMM, ``eigh`` and Cholesky on each thread of the pool the pipelines use.

    cuBLAS and cuSOLVER handles are per thread in CuPy; the tasks wait on a
    barrier so that each lands on its own thread.  On a GPU a pinned host
    buffer of ``pinned_bytes`` goes to CuPy's pinned pool.  Returns the number
    of distinct threads that ran.
    """
    import dask

    xp, sync = namespace(device)
    barrier = threading.Barrier(threads)

    def task(i: int, wait: bool = True) -> int:
        if wait:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=5)
        for dt in (xp.float32, xp.float64):
            a = xp.asarray(np.random.default_rng(i).standard_normal((64, 64))).astype(dt)
            g = a @ a.T + 64 * xp.eye(64, dtype=dt)
            xp.linalg.eigh(g)
            xp.linalg.cholesky(g)
            xp.linalg.svd(a)
        sync()
        return threading.get_ident()

    with clock.event("warmup", "threads"):
        task(threads, wait=False)  # the driver thread too: the fits' solves run there
        idents = dask.compute(*[dask.delayed(task)(i, dask_key_name=f"warm-{i}")
                                for i in range(threads)],
                              scheduler="threads", num_workers=threads)
        if device == "cuda":
            import cupyx

            buf = cupyx.empty_pinned((pinned_bytes,), dtype=np.uint8)  # freed to the pool
            del buf
    return len(set(idents))


def read_rate(path: str, threads: int, repeats: int, clock: Clock, store: str,
              phase: str = "timed") -> dict[str, Any]:
    """Rows/s and GB/s of ``threads`` readers decoding whole chunks, nothing else; best of ``repeats``."""
    from distsketch.io.arrays.stores import open_zarr

    arr = open_zarr(path)  # the store's array (X in the dataset's group)
    n, d = arr.shape
    c = (arr.shards or arr.chunks)[0]
    starts = list(range(0, n, c))

    def read(s: int) -> int:
        return int(np.asarray(arr[s: s + c]).shape[0])

    times = []
    with ThreadPoolExecutor(threads) as pool:
        with clock.event("warmup", "read", store):  # opens the store, warms each thread's codec
            list(pool.map(read, starts[:threads]))
        for _ in range(repeats):
            with clock.event(phase, "read", store) as ev:
                rows = sum(pool.map(read, starts))
            times.append(ev["seconds"])
    rate = rows / min(times)
    return {"rows": rows, "threads": threads, "chunk_rows": c, "seconds": times,
            "rows_s": rate, "gb_s": rate * d * arr.dtype.itemsize / 1e9}


def encode_write_rate(src: str, dest: Path, threads: int, repeats: int, clock: Clock,
                      store: str, phase: str = "timed") -> dict[str, Any]:
    """GB/s of ``threads`` writers encoding and writing an array of ``src``'s shape and codecs.

    The rows come from host memory: up to two chunks of ``src`` (the pipeline's
    own output, so they compress as it does), written again and again; the
    codecs are those of :func:`distsketch.io.create_array` (lz4 + crc32c, as
    ``write_array`` writes); the chunks are ``src``'s, split where it has fewer
    than two per thread, so that the rate is the host's parallel one.  Removes
    ``src`` first, so the disk holds one copy.
    """
    from distsketch.io import create_array
    from distsketch.io.arrays.stores import open_zarr

    arr = open_zarr(src)
    n, m = arr.shape
    c = max(1, min(int(arr.chunks[0]), -(-n // (2 * threads))))
    starts = list(range(0, n, c))
    bufs = [np.asarray(arr[s: s + c]) for s in starts[:2]]
    dtype = arr.dtype
    remove(src)
    times = []
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            target = create_array(dest, (n, m), dtype, chunk_rows=c, compressor="lz4")

            def write(i: int, target: Any = target) -> None:
                s = starts[i]
                buf = bufs[i % len(bufs)]
                rows = min(c, n - s)
                target[s: s + rows] = buf[:rows] if buf.shape[0] >= rows else \
                    np.resize(buf, (rows, m))

            with clock.event(phase, "encode_write", store) as ev:
                list(pool.map(write, range(len(starts))))
            times.append(ev["seconds"])
            remove(dest)
    nbytes = n * m * dtype.itemsize
    return {"rows": n, "cols": m, "chunk_rows": c, "threads": threads, "bytes": nbytes,
            "seconds": times, "gb_s": nbytes / min(times) / 1e9}


# ---------------------------------------------------------------------------- the pipelines


@dataclass
class Pipeline:
    """One pipeline: ``run(X, y, outdir)`` returns its measurements, ``seconds`` the timed part."""

    key: str
    label: str
    run: Callable[[str, str, Path], dict[str, Any]]
    writer: bool = False
    flops_per_row: float | None = None  # GEMM flops a row of the timed part, where a target names it


class PassTimes(logging.Handler):
    """Collects the seconds of each CG pass from the ``distsketch`` logger's per-pass record."""

    PATTERN = re.compile(r"pass (\d+) in ([0-9.eE+-]+) s")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seconds: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if (isinstance(record.msg, str) and "pass %d in %.2f s" in record.msg
                and isinstance(args, tuple) and len(args) >= 3):
            self.seconds.append(float(str(args[2])))  # unrounded, unlike the message
            return
        match = self.PATTERN.search(record.getMessage())
        if match:
            self.seconds.append(float(match.group(2)))


@contextlib.contextmanager
def pass_times() -> Iterator[list[float]]:
    """The seconds of each Falkon CG pass run inside the block (the fit logs them at DEBUG)."""
    logger = logging.getLogger("distsketch")
    handler, level = PassTimes(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.seconds
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def build_pipelines(args: argparse.Namespace) -> list[Pipeline]:
    """The pipelines of ``args.pipelines``, in the order of :data:`PIPELINES`."""
    from distsketch import (
        NystromFeatures,
        NystromKernelRidge,
        RandomFourierFeatures,
        SketchedKernelRidge,
        StreamingKernelPCA,
        write_array,
    )
    from distsketch.io.arrays.stores import open_zarr

    m, d, ell = args.m, args.cols, args.sketch_size

    def fit_only(make: Callable[[], Any], with_y: bool) -> Callable[[str, str, Path], dict]:
        def run(X: str, y: str, out: Path) -> dict[str, Any]:
            t0 = time.perf_counter()
            make().fit(X, y) if with_y else make().fit(X)
            return {"seconds": time.perf_counter() - t0}
        return run

    def to_zarr(make: Callable[[], Any], name: str,
                engine: str = "dask") -> Callable[[str, str, Path], dict]:
        def run(X: str, y: str, out: Path) -> dict[str, Any]:
            import dask

            est = make()
            t0 = time.perf_counter()
            est.fit(X)
            t1 = time.perf_counter()
            with dask.config.set({"distsketch.engine": engine}):
                write_array(est.transform(X), out / name, overwrite=True)
            t2 = time.perf_counter()
            arr = open_zarr(str(out / name))
            return {"seconds": t2 - t1, "fit_seconds": t1 - t0, "output": str(out / name),
                    "output_shape": list(arr.shape), "output_chunk_rows": int(arr.chunks[0]),
                    "bytes_written": int(np.prod(arr.shape)) * arr.dtype.itemsize,
                    "stored_bytes": tree_bytes(out / name)}
        return run

    def on_engine(make: Callable[[], Any]) -> Callable[[str, str, Path], dict]:
        def run(X: str, y: str, out: Path) -> dict[str, Any]:
            import dask

            from distsketch import open_array

            t0 = time.perf_counter()
            # host blocks: the engine moves them (pinned ring, copy stream) where the
            # dask path's read tasks would each copy theirs on the default stream
            with dask.config.set({"distsketch.engine": "device"}):
                make().fit(open_array(X, device="cpu"))
            return {"seconds": time.perf_counter() - t0}
        return run

    def falkon(X: str, y: str, out: Path) -> dict[str, Any]:
        with pass_times() as passes, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a CG stopped at max_iter warns
            t0 = time.perf_counter()
            est = NystromKernelRidge(n_centers=args.falkon_m, max_iter=args.falkon_iters,
                                     tol=1e-12, random_state=0).fit(X, y)
            seconds = time.perf_counter() - t0
        return {"seconds": seconds, "pass_seconds": list(passes),
                "centers": int(est.centers_.shape[0])}

    def rff(k: int) -> Callable[[], Any]:
        return lambda: RandomFourierFeatures(n_components=k, random_state=0)

    def skpca(method: str) -> Callable[[], Any]:
        return lambda: StreamingKernelPCA(n_components=min(10, ell), n_random_features=m,
                                          sketch_size=ell, method=method, random_state=0)

    M = args.falkon_m
    table = {
        "krr": Pipeline("krr", f"KRR defaults (m={m}) from Zarr", fit_only(
            lambda: SketchedKernelRidge(features=rff(m)(), random_state=0), True)),
        "krr_big": Pipeline("krr_big", f"KRR defaults (m={args.m_big}) from Zarr", fit_only(
            lambda: SketchedKernelRidge(features=rff(args.m_big)(), random_state=0), True),
            flops_per_row=2.0 * d * args.m_big + 2.0 * args.m_big**2),
        "skpca_rnca": Pipeline("skpca_rnca", f"SKPCA rnca (m={m}, l={ell})",
                               fit_only(skpca("rnca"), False)),
        "rnca_engine": Pipeline("rnca_engine", f"SKPCA rnca (m={m}, l={ell}), engine",
                                on_engine(skpca("rnca"))),
        "skpca_fd": Pipeline("skpca_fd", f"SKPCA fd (m={m}, l={ell})",
                             fit_only(skpca("fd"), False)),
        "rff_zarr": Pipeline("rff_zarr", f"RFF -> Zarr (m={m})", to_zarr(rff(m), "rff.zarr"),
                             writer=True),
        "rff_engine": Pipeline("rff_engine", f"RFF -> Zarr (m={m}), engine writers",
                               to_zarr(rff(m), "rff_engine.zarr", "device"), writer=True),
        "nystrom_zarr": Pipeline("nystrom_zarr", f"Nystrom -> Zarr (m={m})", to_zarr(
            lambda: NystromFeatures(n_landmarks=m, random_state=0), "nystrom.zarr"),
            writer=True),
        "falkon": Pipeline("falkon", f"Falkon (M={M}, {args.falkon_iters} CG passes)", falkon,
                           flops_per_row=2.0 * M * (d + 2) + 4.0 * M),
    }
    return [table[k] for k in PIPELINES if k in args.pipelines]


def make_store(workdir: Path, n: int, d: int, chunk_rows: int) -> tuple[str, str]:
    """A float32 RandomNoisy store of n × d rows and a target store, in ``chunk_rows`` chunks."""
    from distsketch import open_array, write_array
    from distsketch.datasets import make_random_noisy_zarr

    X = str(make_random_noisy_zarr(workdir / "X.zarr", n, d, chunk_rows=chunk_rows,
                                   overwrite=True, dtype=np.float32,
                                   signal_dim=min(50, max(1, d // 2))))
    w = np.random.default_rng(1).normal(size=d).astype(np.float32) / np.sqrt(d)
    y = str(write_array(open_array(X) @ w, workdir / "y.zarr", chunk_rows=chunk_rows,
                        overwrite=True))
    return X, y


@dataclass
class Column:
    """Where the pipelines run: ``device`` on dask's threads, or the CPU on a LocalCluster."""

    name: str
    device: str
    cluster: str  # "threads" or "local"
    threads: int

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        import dask

        cfg = {"distsketch.device": self.device, "scheduler": "threads",
               "num_workers": self.threads}
        if self.cluster == "threads":
            with dask.config.set(cfg):
                yield
            return
        from distsketch.cluster import connect

        spec = {"kind": "local", "n_workers": os.cpu_count(), "threads_per_worker": 1}
        with dask.config.set({"distsketch.device": "cpu"}), connect(spec):
            yield


def run_once(pipe: Pipeline, X: str, y: str, out: Path, clock: Clock, phase: str, store: str,
             column: str, keep_output: bool = False) -> dict[str, Any]:
    """One run of ``pipe``, recorded as an event; an error is returned, not raised."""
    with clock.event(phase, pipe.key, store, column) as ev:
        try:
            res = pipe.run(X, y, out)
        except Exception as exc:  # one failing pipeline must not hide the others' numbers
            res = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"}
        if "output" in res and not keep_output:
            remove(res["output"])
    res["wall_seconds"] = ev["seconds"]
    return res


# ---------------------------------------------------------------------------- the numbers


def analyse(pipe: Pipeline, runs: list[dict[str, Any]], n: int, d: int, read: dict[str, Any],
            gemm: dict[str, Any], enc: dict[str, Any] | None) -> dict[str, Any]:
    """Every number of one pipeline from its timed runs and the run's hardware rates."""
    res: dict[str, Any] = {"label": pipe.label, "rows": n, "writer": pipe.writer}
    errors = [r["error"] for r in runs if "error" in r]
    if errors or not runs:
        res["error"] = errors[0] if errors else "not run"
        return res
    best = min(runs, key=lambda r: r["seconds"])
    rate = n / best["seconds"]
    res.update({"seconds": [r["seconds"] for r in runs], "best_seconds": best["seconds"],
                "rows_s": rate, "ratio_to_read": rate / read["rows_s"],
                "projected_seconds": PROJECTED_ROWS / rate})
    if pipe.writer:
        gb_s = best["bytes_written"] / best["seconds"] / 1e9
        res.update({"fit_seconds": [r["fit_seconds"] for r in runs],
                    "bytes_written": best["bytes_written"], "stored_bytes": best["stored_bytes"],
                    "output_shape": best["output_shape"], "gb_s_written": gb_s})
        if enc is not None:
            res["ratio_to_encode_write"] = gb_s / enc["gb_s"]
    if pipe.key == "falkon":
        flops = 2.0 * best["centers"] * (d + 2) + 4.0 * best["centers"]
        passes = [{"seconds": s, "rows_s": n / s, "gemm_share": n * flops / s / gemm["flop_s"]}
                  for s in best["pass_seconds"]]
        res.update({"centers": best["centers"], "cg_flops_per_row": flops, "cg_passes": passes})
        if passes:
            res["cg_pass_gemm_share_min"] = min(p["gemm_share"] for p in passes)
    elif pipe.flops_per_row is not None:
        res.update({"flops_per_row": pipe.flops_per_row,
                    "gemm_share": rate * pipe.flops_per_row / gemm["flop_s"]})
    return res


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target of issue 38 with its value in this run and PASS/FAIL (None: not measured)."""
    out = []
    for key, measure, threshold in TARGETS:
        value = results.get(key, {}).get(measure)
        out.append({"pipeline": key, "measure": measure, "threshold": threshold,
                    "value": value, "pass": None if value is None else bool(value >= threshold)})
    return out


def fmt_time(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def report(out: dict[str, Any]) -> str:
    """The printed report: rates of the hardware, the table, the targets."""
    cfg, read, gemm, enc = out["config"], out["read"], out["gemm"], out["encode_write"]
    d, T = cfg["cols"], cfg["threads"]
    lines = [
        f"{cfg['rows']:,} x {d} float32 rows from a local Zarr store ({cfg['chunk_rows']}-row "
        f"chunks), device {cfg['device']}, {T} reader threads; warm-up and sizing on "
        f"{cfg['calib_rows'][0]:,}- and {cfg['calib_rows'][1]:,}-row stores, best of 2 timed runs",
        "",
        f"store read + decode, {T} reader threads: {read['rows_s']:,.0f} rows/s "
        f"({read['gb_s']:.3f} GB/s)",
        f"float32 GEMM ({cfg['device']}, {'x'.join(map(str, gemm['shape']))}): "
        f"{gemm['gflop_s']:,.1f} GFLOP/s",
    ]
    if enc is not None:
        lines.append(f"host encode + write, {enc['threads']} threads (lz4 + crc32c, "
                     f"{enc['rows']:,} x {enc['cols']} float32, {enc['chunk_rows']}-row chunks): "
                     f"{enc['gb_s']:.3f} GB/s")
    lines += ["", f"| pipeline | rows/s | / read | GB/s written | / encode+write | GEMM share | "
              f"10^9 x {d} rows |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in out["pipelines"].values():
        if "error" in r:
            lines.append(f"| {r['label']} | failed: {r['error']} | | | | | |")
            continue
        gb = f"{r['gb_s_written']:.3f}" if "gb_s_written" in r else "-"
        ew = f"{r['ratio_to_encode_write']:.2f}" if "ratio_to_encode_write" in r else "-"
        share = r.get("gemm_share", r.get("cg_pass_gemm_share_min"))
        gs = f"{share:.3f}" if share is not None else "-"
        lines.append(f"| {r['label']} | {r['rows_s']:,.0f} | {r['ratio_to_read']:.2f} | {gb} | "
                     f"{ew} | {gs} | {fmt_time(r['projected_seconds'])} |")
    for r in out["pipelines"].values():
        if r.get("cg_passes"):
            lines.append(f"\n{r['label']}, each CG pass ({r['cg_flops_per_row']:,.0f} flops a "
                         "row): " + ", ".join(
                             f"{i}: {p['seconds']:.3f} s = {p['gemm_share']:.3f} of GEMM"
                             for i, p in enumerate(r["cg_passes"], 1)))
        if "fit_seconds" in r:
            lines.append(f"{r['label']}: fit {min(r['fit_seconds']):.3f} s before the timed "
                         f"transform + write; {r['stored_bytes'] / r['bytes_written']:.2f} of "
                         "the bytes stored")
    for engine, dask_path, what in (("rnca_engine", "skpca_rnca", "SKPCA rnca"),
                                    ("rff_engine", "rff_zarr", "RFF -> Zarr")):
        eng, ref = out["pipelines"].get(engine, {}), out["pipelines"].get(dask_path, {})
        if "rows_s" in eng and "rows_s" in ref:
            lines.append(f"\npass engine / dask tasks ({what}): "
                         f"{eng['rows_s'] / ref['rows_s']:.2f}x "
                         f"({eng['rows_s']:,.0f} vs {ref['rows_s']:,.0f} rows/s)")
    cpu = out.get("cpu_column")
    if cpu:
        lines += ["", f"| pipeline | CPU ({cpu['cluster']}) rows/s | device / CPU |",
                  "|---|---:|---:|"]
        for key, r in cpu["pipelines"].items():
            dev = out["pipelines"].get(key, {})
            if "error" in r:
                lines.append(f"| {r['label']} | failed: {r['error']} | |")
                continue
            ratio = f"{dev['rows_s'] / r['rows_s']:.2f}" if "rows_s" in dev else "-"
            lines.append(f"| {r['label']} | {r['rows_s']:,.0f} | {ratio} |")
    lines += ["", "Targets (issue 38), ratios within this run:"]
    for t in out["targets"]:
        verdict = "n/a " if t["pass"] is None else ("PASS" if t["pass"] else "FAIL")
        value = "not measured" if t["value"] is None else f"{t['value']:.3f}"
        lines.append(f"  {verdict} {t['pipeline']} {t['measure']}: {value} "
                     f"(target >= {t['threshold']})")
    plan = out["plan"]
    lines.append(f"\nbudget {plan['budget_seconds']:.0f} s: sized at {plan['seconds_at_plan']:.1f} "
                 f"s, predicted {plan['predicted_seconds']:.1f} s more for {cfg['rows']:,} rows"
                 + ("" if plan["fits"] else " (over the budget: --rows, or the calibration "
                    "left no room and the smallest store ran)"))
    return "\n".join(lines)


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


# ---------------------------------------------------------------------------- the run


def calibrate(col: Column, pipes: list[Pipeline], stores: list[tuple[str, str, int, Path]],
              clock: Clock, with_encode: bool) -> dict[str, Any]:
    """Warm every pipeline on the first store, then time it warm on both; a cost line each.

    Returns ``fixed`` and ``per_row`` seconds of one run per pipeline (and of
    the encode + write probe), the context's start-up seconds and the errors.
    """
    (X1, y1, n1, w1), (X2, y2, n2, w2) = stores
    costs: dict[str, Any] = {"pipelines": {}, "errors": {}}
    started = clock.now()
    with col.context():
        costs["context_seconds"] = clock.now() - started  # a LocalCluster's start-up
        for p in pipes:
            res = run_once(p, X1, y1, w1, clock, "warmup", "calibration-1", col.name)
            if "error" in res:
                costs["errors"][p.key] = res["error"]
        for p in pipes:
            if p.key in costs["errors"]:
                continue
            t1 = run_once(p, X1, y1, w1, clock, "probe", "calibration-1", col.name)["wall_seconds"]
            r2 = run_once(p, X2, y2, w2, clock, "probe", "calibration-2", col.name,
                          keep_output=with_encode and p.key == "rff_zarr")
            costs["pipelines"][p.key] = linear_cost(n1, t1, n2, r2["wall_seconds"])
            if "output" in r2 and with_encode and p.key == "rff_zarr":
                enc = encode_write_rate(r2["output"], w2 / "encode.zarr", col.threads, 1, clock,
                                        "calibration-2", "probe")
                costs["encode_per_row"] = min(enc["seconds"]) / n2
    return costs


def main(argv: list[str] | None = None) -> int:
    clock = Clock()
    args = parse_args(argv)
    require_device(args.device)
    d, T = int(args.cols), int(args.threads)
    own = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-gpu-"))
    workdir.mkdir(parents=True, exist_ok=True)
    pipes = build_pipelines(args)
    device_col = Column("device", args.device, "threads", T)
    cpu_col = (Column("cpu", "cpu", args.cpu_cluster, os.cpu_count() or 1)
               if args.cpu_cluster != "none" else None)
    columns = [device_col] + ([cpu_col] if cpu_col else [])
    try:
        gemm = gemm_rate(args.device, int(args.gemm_size), clock)
        threads_seen = warm_threads(args.device, T, args.calib_chunk * d * 4, clock)

        # two calibration stores: the warm-up, and a cost line per pipeline
        cc = int(args.calib_chunk)
        n1 = cc * max(2 * T, -(-2 * max(args.m, args.falkon_m) // cc))
        stores, store_cost = [], []
        for i, n in enumerate((n1, 2 * n1), 1):
            w = workdir / f"calibration-{i}"
            w.mkdir(exist_ok=True)
            with clock.event("setup", "make_store", f"calibration-{i}") as ev:
                X, y = make_store(w, n, d, cc)
            stores.append((X, y, n, w))
            store_cost.append(ev["seconds"])
        probe = read_rate(stores[1][0], T, 1, clock, "calibration-2", "probe")
        costs = {c.name: calibrate(c, pipes, stores, clock, c is device_col) for c in columns}

        # the store's rows: what the budget left allows
        fixed = RESERVE_S + sum(c["context_seconds"] * 2 + sum(2 * a for a, _ in
                                                              c["pipelines"].values())
                                for c in costs.values())
        a_s, b_s = linear_cost(n1, store_cost[0], 2 * n1, store_cost[1])
        fixed += a_s
        per_row = (b_s + 2.0 / probe["rows_s"] + 2.0 * costs[device_col.name].get(
            "encode_per_row", 0.0) + sum(2 * b for c in costs.values()
                                         for _, b in c["pipelines"].values()))
        widest = max([args.m] if any(p.writer for p in pipes) else [0])
        disk_rows = int(0.5 * shutil.disk_usage(workdir).free // (4 * d + 4 + 4 * widest + 64))
        hi = max(2 * n1, min(int(args.max_rows), disk_rows))
        at_plan = clock.now()
        if args.rows is not None:
            n = int(args.rows)
            predicted = fixed + per_row * n
        else:
            n, predicted = plan_rows(args.budget_seconds - at_plan, fixed, per_row, lo=2 * n1,
                                     hi=hi, step=cc)
        chunk = int(args.chunk_rows or choose_chunk(n, T, cc, int(args.max_chunk)))
        if args.rows is None:
            n = max(2 * n1, n // chunk * chunk)
            predicted = fixed + per_row * n
        plan = {"budget_seconds": args.budget_seconds, "seconds_at_plan": at_plan,
                "fixed_seconds": fixed, "per_row_seconds": per_row, "max_rows": hi,
                "disk_rows": disk_rows, "predicted_seconds": predicted,
                "fits": at_plan + predicted <= args.budget_seconds,
                "costs": {k: {"context_seconds": c["context_seconds"],
                              "pipelines": {p: {"fixed": a, "per_row": b}
                                            for p, (a, b) in c["pipelines"].items()},
                              "encode_per_row": c.get("encode_per_row")}
                          for k, c in costs.items()}}
        for _, _, _, w in stores:
            remove(w)

        # the store, its read rate, then each pipeline twice
        main_dir = workdir / "main"
        main_dir.mkdir(exist_ok=True)
        print(f"writing {n:,} x {d} float32 rows to {main_dir} ...", file=sys.stderr)
        with clock.event("setup", "make_store", "main"):
            X, y = make_store(main_dir, n, d, chunk)
        read = read_rate(X, T, 2, clock, "main")
        enc = None
        columns_out: dict[str, dict[str, Any]] = {}
        for col in columns:
            errors = costs[col.name]["errors"]
            results: dict[str, Any] = {}
            with col.context():
                for p in pipes:
                    runs = [] if p.key in errors else [
                        run_once(p, X, y, main_dir, clock, "timed", "main", col.name,
                                 keep_output=(col is device_col and p.key == "rff_zarr"
                                              and i == 1))
                        for i in range(2)]
                    if p.key in errors:
                        runs = [{"error": errors[p.key]}]
                    kept = [r for r in runs if "output" in r and Path(r["output"]).exists()]
                    if kept:
                        enc = encode_write_rate(kept[0]["output"], main_dir / "encode.zarr", T,
                                                2, clock, "main")
                    results[p.key] = runs
            columns_out[col.name] = results
        dev = {p.key: analyse(p, columns_out[device_col.name][p.key], n, d, read, gemm, enc)
               for p in pipes}
        out: dict[str, Any] = {
            "config": {"device": args.device, "rows": n, "cols": d, "chunk_rows": chunk,
                       "threads": T, "threads_warmed": threads_seen, "m": args.m,
                       "m_big": args.m_big, "sketch_size": args.sketch_size,
                       "falkon_m": args.falkon_m, "falkon_iters": args.falkon_iters,
                       "calib_rows": [n1, 2 * n1], "calib_chunk_rows": cc, "store": X,
                       "quick": bool(args.quick), "projected_rows": PROJECTED_ROWS},
            "read": read, "gemm": gemm, "encode_write": enc, "pipelines": dev,
            "targets": targets(dev), "plan": plan,
        }
        if cpu_col is not None:
            out["cpu_column"] = {"cluster": cpu_col.cluster, "pipelines": {
                p.key: analyse(p, columns_out["cpu"][p.key], n, d, read, gemm, None)
                for p in pipes}}
        out["machine"] = machine(args.device)
        print(report(out))
        print("\nMachine:\n" + out["machine"])
    finally:
        if not args.keep:  # the stores are GBs: never left behind in a given --workdir either
            for sub in ("calibration-1", "calibration-2", "main"):
                remove(workdir / sub)
            if own:
                remove(workdir)
    out["elapsed_seconds"] = clock.now()
    out["events"] = sorted(clock.events, key=lambda e: e["start"])
    print(f"finished in {out['elapsed_seconds']:.1f} s (budget {args.budget_seconds:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":  # LocalCluster's workers re-import this script
    sys.exit(main())
