"""Per-row cost of StreamingKernelPCA (fd, rnca) in one process, against their flop counts.

One command::

    python benchmarks/bench_precision.py --rows 65536 --repeats 5 [--base /tmp/base]
    python benchmarks/bench_precision.py --blocks 4096,10486,32768,131072 --repeats 5

fits ``StreamingKernelPCA(n_random_features=1024, sketch_size=64, method=...)``
on ``rows x 100`` float32 in-memory rows with the synchronous scheduler and one
BLAS thread (one process, one core), each fit in a fresh subprocess (it reports
its blocks' rows and the FD formulation they took); the runs
are interleaved (fd, rnca, fd, rnca, ...; with ``--base``, the same for the
code tree at that path, alternated with this one) and the best of
``--repeats`` is kept per (tree, method), so load from other processes on the
machine hits every variant alike.  Per row it reports microseconds, the
method's flops (RFF map 2·d·m; FD in the buffer formulation 12·ℓ·m for the
Gram and rebuild of its 2ℓ × m buffer, plus an eigendecomposition of a
2ℓ × 2ℓ matrix per ℓ rows; FD in the covariance formulation 2·m² for the
block's ZᵀZ plus one top-ℓ eigendecomposition of an m × m matrix per block,
counted as (4/3)·m³ flops of its tridiagonal reduction; RNCA 2·m² for ZᵀZ)
and the GFLOP/s those flops ran at, beside the machine's one-core float32 and
float64 GEMM rates measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

D, M, ELL = 100, 1024, 64

_CHILD = r"""
import json, sys, time
import numpy as np, dask
from threadpoolctl import threadpool_limits
from distsketch import StreamingKernelPCA
from distsketch.summaries import frequent_directions as fds
n, method, d, m, ell = int(sys.argv[1]), sys.argv[2], *map(int, sys.argv[3:6])
blocks = []
chunk = fds.FrequentDirectionsSummary.chunk
def counted(self, block, *a):
    blocks.append(block.shape[0])
    return chunk(self, block, *a)
fds.FrequentDirectionsSummary.chunk = counted
X = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
kw = dict(n_components=10, n_random_features=m, sketch_size=ell, method=method, random_state=0)
with dask.config.set(scheduler="sync"), threadpool_limits(1):
    StreamingKernelPCA(**kw).fit(X[:4096])  # warm: imports, first-call costs
    blocks.clear()
    t = time.perf_counter()
    StreamingKernelPCA(**kw).fit(X)
    seconds = time.perf_counter() - t
form = getattr(fds, "fd_block_formulation", None)
kinds = sorted({form(b, m, ell) for b in blocks}) if form and blocks else ["buffer"] * bool(blocks)
print(json.dumps({"seconds": seconds, "blocks": blocks, "formulation": kinds}))
"""


def gemm_rate(dtype: str, n: int = 2048) -> float:
    """One-core GFLOP/s of an (n x M)ᵀ(n x M) product in ``dtype`` (best of 5)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    Z = np.random.default_rng(1).normal(size=(n, M)).astype(dtype)
    best = float("inf")
    with threadpool_limits(1):
        for _ in range(5):
            t = time.perf_counter()
            Z.T @ Z
            best = min(best, time.perf_counter() - t)
    # ZᵀZ is formed as a symmetric rank-n update (syrk): n·M² multiply-adds
    return n * M * M * 2 / best / 1e9  # GEMM-equivalent flops (2·n·m²), as flops_per_row


def run_one(tree: str, rows: int, method: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree, "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(rows), method,
                          str(D), str(M), str(ELL)], env=env,
                         check=True, capture_output=True, text=True, cwd=tree).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def flops_per_row(method: str, formulation: str = "buffer", block_rows: float = 1.0) -> float:
    rff = 2.0 * D * M
    if method == "fd" and formulation == "buffer":
        return rff + 12.0 * ELL * M
    if method == "fd":
        return rff + 2.0 * M * M + 4.0 / 3.0 * M**3 / block_rows
    return rff + 2.0 * M * M


def block_formulations(block_sizes: list[int], repeats: int) -> None:
    """Per-row cost of one block's ``chunk`` in each FD formulation and RNCA's, in this process.

    The same mapped block (RFF, float32) through the buffer formulation, the
    covariance formulation and RNCA's blocked covariance, interleaved, best of
    ``repeats``, one BLAS thread: the measurement behind
    :func:`distsketch.ops.fd.fd_block_formulation`'s cost model.
    """
    import numpy as np
    from threadpoolctl import threadpool_limits

    from distsketch import StreamingKernelPCA
    from distsketch.summaries import frequent_directions as fds

    chosen = fds.fd_block_formulation
    print(f"one block's chunk, m {M}, l {ELL}, float32 rows x {D}; best of {repeats}, "
          "interleaved, one BLAS thread")
    print(f"{'rows':>7} {'buffer us/row':>14} {'covariance':>11} {'rnca':>7} "
          f"{'buffer GFLOP/s':>15} {'cov GFLOP/s':>12} {'fd/rnca':>8} {'chosen':>10}")
    for n in block_sizes:
        X = np.random.default_rng(0).normal(size=(n, D)).astype(np.float32)
        kw = dict(n_components=10, n_random_features=M, sketch_size=ELL, random_state=0)
        fd = StreamingKernelPCA(**kw).fit(X[:512])
        rn = StreamingKernelPCA(method="rnca", **kw).fit(X[:512])
        ops = fd.features_._operands()
        best: dict[str, float] = {}
        try:
            with threadpool_limits(1):
                for _ in range(repeats):
                    for name in ("buffer", "covariance", "rnca"):
                        summary = (rn if name == "rnca" else fd)._summary()
                        fds.fd_block_formulation = lambda *a, _n=name: _n  # type: ignore[misc]
                        t = time.perf_counter()
                        summary.chunk(X, 0, *ops)
                        best[name] = min(best.get(name, float("inf")), time.perf_counter() - t)
        finally:
            fds.fd_block_formulation = chosen
        us = {k: v / n * 1e6 for k, v in best.items()}
        rate = flops_per_row("fd", "covariance", n) / us["covariance"] / 1e3
        rate_b = flops_per_row("fd", "buffer") / us["buffer"] / 1e3
        form = chosen(n, M, ELL)
        print(f"{n:7d} {us['buffer']:14.2f} {us['covariance']:11.2f} {us['rnca']:7.2f} "
              f"{rate_b:15.1f} {rate:12.1f} {us[form] / us['rnca']:8.2f} {form:>10}")
    print(f"one-core float32 GEMM (ZtZ): {gemm_rate('float32'):.1f} GFLOP/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--base", default=None, help="another code tree to compare (before)")
    parser.add_argument("--blocks", default="",
                        help="comma-separated block sizes: time one block per FD formulation "
                             "in this process instead of the fits")
    args = parser.parse_args()
    if args.blocks:
        block_formulations([int(b) for b in args.blocks.split(",")], args.repeats)
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here} | ({"base": os.path.abspath(args.base)} if args.base else {})
    best: dict[tuple[str, str], float] = {}
    info: dict[tuple[str, str], dict] = {}
    for _ in range(args.repeats):
        for label, tree in trees.items():
            for method in ("fd", "rnca"):
                info[(label, method)] = run = run_one(tree, args.rows, method)
                key = (label, method)
                best[key] = min(best.get(key, float("inf")), float(run["seconds"]))
    f32, f64 = gemm_rate("float32"), gemm_rate("float64")
    print(f"rows {args.rows} x {D} float32, m {M}, l {ELL}; one process, one BLAS thread; "
          f"best of {args.repeats}, interleaved")
    print(f"one-core GEMM (ZtZ): float32 {f32:.1f} GFLOP/s, float64 {f64:.1f} GFLOP/s")
    print(f"{'tree':6} {'method':6} {'us/row':>8} {'flops/row':>10} {'GFLOP/s':>8}  blocks")
    for (label, method), s in sorted(best.items()):
        us = s / args.rows * 1e6
        run = info[(label, method)]
        blocks = run.get("blocks") or [args.rows]
        kinds = run.get("formulation") or []
        form = "covariance" if kinds == ["covariance"] else "buffer"
        fl = flops_per_row(method, form, sum(blocks) / len(blocks))
        what = f"{len(blocks)} of ~{max(blocks)} rows, {'/'.join(kinds)}" if method == "fd" else ""
        print(f"{label:6} {method:6} {us:8.2f} {fl:10.3g} {fl / us / 1e3:8.1f}  {what}")
    for label in trees:
        ratio = best[(label, "fd")] / best[(label, "rnca")]
        print(f"{label}: fd per row / rnca per row = {ratio:.2f}")


if __name__ == "__main__":
    main()
