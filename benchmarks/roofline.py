"""Hand block loops: what one core (and w processes) deliver on each pass's own block work.

Each loop reads the store's chunks with zarr directly (no dask, no graph, no
checks) and does, on ``SLICE``-row slices in float32 with one BLAS thread, the
per-block work of one ``bench_scaling`` pipeline:

* ``read``        read and decode the chunks (the store's read rate)
* ``krr``         z = sqrt(2/m) cos(x W + b); G += ZᵀZ, Zᵀy (float32 products,
                  float64 accumulators)
* ``skpca-rnca``  the same map; G += ZᵀZ and the column sums
* ``skpca-fd``    the same map; each chunk folded into a Frequent Directions sketch
                  as the library folds a block of that size
                  (``distsketch.ops.fd.fd_block_formulation``: its covariance from
                  float32 products summed in float64 and one top-ℓ shrink, merged
                  into the running sketch, or ``fd_sketch``'s shrink every ℓ rows)
* ``rff-zarr``    the same map of every row, written to a Zarr array with the
                  library's default codec (Blosc LZ4) in row chunks of ``out_rows``
                  (the pipeline's own output chunk), one store chunk's rows per
                  process at a time

``krr-f64`` and ``skpca-rnca-f64`` form ZᵀZ in float64 instead, as kernel ridge
does at a given alpha (at GCV's alphas, the default, it multiplies float32 rows
in float32): the gap between the two loops is the price of the float64 products.
``w`` processes split the rows into w contiguous, nearly equal ranges (an
unequal share, such as whole chunks round robin, would time the busiest process
and understate what w cores deliver); each reads its range one store chunk's part at
a time, so a chunk split between two ranges is decoded by both, as it is when
distsketch splits a chunk between two blocks.  Rates are rows/s of the whole
store, timed from the moment every process is started and has imported NumPy.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

SLICE = 4096
LOOPS = ("read", "krr", "krr-f64", "skpca-rnca", "skpca-rnca-f64", "skpca-fd", "rff-zarr")


def _operators(d: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((d, m)) / np.sqrt(d)).astype(np.float32)
    b = (rng.uniform(0.0, 2.0 * np.pi, m)).astype(np.float32)
    return W, b


def _open(path: str) -> Any:
    import zarr

    return zarr.open_group(path, mode="r")["X"]


def _map(x: np.ndarray, W: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.matmul(x, W, out=out)
    out += b
    np.cos(out, out=out)
    out *= np.float32(np.sqrt(2.0 / W.shape[1]))
    return out


def row_ranges(n: int, workers: int, align: int = 1) -> list[tuple[int, int]]:
    """``workers`` contiguous row ranges of nearly equal size, their bounds multiples
    of ``align`` (the last ends at ``n``): every process gets the same work, as
    distsketch's planner gives every worker the same number of equal blocks."""
    units = -(-n // align)
    bounds = [min(n, (k * units // workers) * align) for k in range(workers)] + [n]
    return [(bounds[k], bounds[k + 1]) for k in range(workers)]


def _run_rows(loop: str, path: str, ypath: str, lo: int, hi: int, m: int, ell: int,
              out_path: str, out_rows: int) -> int:
    """Run ``loop`` on rows ``lo:hi`` of the store, one store chunk's part at a time;
    returns the rows done."""
    import zarr
    from threadpoolctl import threadpool_limits

    from distsketch.ops.fd import fd_block_formulation, fd_covariance_shrink, fd_merge, fd_sketch

    X = _open(path)
    Y = _open(ypath) if loop.startswith("krr") else None
    rc = X.chunks[0]
    W, b = _operators(X.shape[1], m)
    acc = np.float64 if loop.endswith("-f64") else np.float32
    G = np.zeros((m, m))
    s = np.zeros(m)
    zy = np.zeros(m)
    buf = np.empty((SLICE, m), dtype=np.float32)
    z64 = np.empty((SLICE, m)) if acc == np.float64 else None
    sketch, shrink = None, 0.0
    Z_out = zarr.open_array(out_path, mode="r+") if loop == "rff-zarr" else None
    done = 0
    with threadpool_limits(1):
        for c0 in range(lo - lo % rc, hi, rc):
            a0, a1 = max(lo, c0), min(hi, c0 + rc)
            x = np.asarray(X[a0:a1])
            done += x.shape[0]
            if loop == "read":
                continue
            y = np.asarray(Y[a0:a1, 0]) if Y is not None else None
            if loop == "rff-zarr":
                # whole output chunks only: the ranges' bounds are multiples of
                # out_rows, and a chunk across two store chunks is written by the
                # part holding its first row
                first = -(-a0 // out_rows) * out_rows
                for a in range(first, a1, out_rows):
                    xs = np.asarray(X[a: a + out_rows]) if a + out_rows > a1 else \
                        x[a - a0: a - a0 + out_rows]
                    Zc = np.empty((xs.shape[0], m), dtype=np.float32)
                    for k in range(0, xs.shape[0], SLICE):
                        _map(xs[k: k + SLICE], W, b, Zc[k: k + SLICE])
                    Z_out[a: a + xs.shape[0]] = Zc  # type: ignore[index]
                continue
            C = None
            if loop == "skpca-fd" and fd_block_formulation(x.shape[0], m, ell) == "covariance":
                C = np.zeros((m, m))
            for a in range(0, x.shape[0], SLICE):
                xs = x[a: a + SLICE]
                Z = _map(xs, W, b, buf[: xs.shape[0]])
                if loop == "skpca-fd":
                    if C is not None:
                        C += Z.T @ Z
                    else:
                        sketch, shrink = fd_sketch(Z, ell, sketch=sketch, shrinkage=shrink)
                    continue
                if z64 is not None:
                    Z = z64[: xs.shape[0]]
                    np.copyto(Z, buf[: xs.shape[0]])
                G += Z.T @ Z
                s += Z.sum(axis=0)
                if y is not None:
                    zy += Z.T @ y[a: a + SLICE].astype(Z.dtype)
            if C is not None:  # the part's one shrink, merged into the running sketch
                part, delta = fd_covariance_shrink(C, ell)
                sketch, shrink = (part, delta) if sketch is None else \
                    fd_merge([sketch, part], ell, [shrink, delta])
    return done


def _ready() -> float:
    return time.perf_counter()


def hand_loop(loop: str, path: str, ypath: str, workers: int, work: Path,
              m: int = 1024, ell: int = 64, pool: Any = None,
              out_rows: int | None = None) -> dict:
    """rows/s of ``loop`` over the whole store on ``workers`` processes (1: this one)."""
    import zarr

    from distsketch.io.storage.codecs import codecs

    X = _open(path)
    n, rc = X.shape[0], X.chunks[0]
    out_path = str(work / f"hand-{loop}.zarr")
    out_rows = int(out_rows or rc)
    if loop == "rff-zarr":
        shutil.rmtree(out_path, ignore_errors=True)
        zarr.create_array(out_path, shape=(n, m), chunks=(out_rows, m), dtype=np.float32,
                          compressors=codecs("lz4"))
    parts = row_ranges(n, workers, out_rows if loop == "rff-zarr" else 1)
    t0 = time.perf_counter()
    if workers == 1:
        rows = _run_rows(loop, path, ypath, *parts[0], m, ell, out_path, out_rows)
    else:
        res = [pool.apply_async(_run_rows, (loop, path, ypath, lo, hi, m, ell, out_path,
                                                out_rows))
               for lo, hi in parts]
        rows = sum(r.get() for r in res)
    wall = time.perf_counter() - t0
    shutil.rmtree(out_path, ignore_errors=True)
    return {"loop": loop, "workers": workers, "rows": rows, "wall_s": wall,
            "rows_per_s": rows / wall}


def start_pool(workers: int) -> Any:
    """A spawned pool of ``workers`` processes with NumPy, zarr and distsketch imported
    (fork would copy a running cluster's threads)."""
    pool = mp.get_context("spawn").Pool(workers, initializer=_warm)
    pool.map(_ready_after_warm, range(workers))
    return pool


def _warm() -> None:
    import threadpoolctl  # noqa: F401
    import zarr  # noqa: F401

    import distsketch.ops.fd  # noqa: F401


def _ready_after_warm(_: int) -> float:
    return _ready()
