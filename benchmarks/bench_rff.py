"""Random Fourier features: transform throughput per core against this machine's bound.

The bound is measured in the same run, single-threaded: the time of the GEMM
(2·n·d·m flops at the float32 GEMM rate measured on the same shapes) plus the
time of n·m float32 cos (measured on a reused buffer).  Reported as ratios:

* ``ops.rff_map`` kernel (one block, reused output buffer) vs the bound;
* ``RandomFourierFeatures.transform`` over 16384-row dask blocks computed to
  NumPy (sync scheduler, one core) vs the bound;
* scikit-learn's ``RBFSampler.transform`` (BLAS pinned to one thread) vs ours.

Usage::

    python benchmarks/bench_rff.py            # n = 200 000 rows × 100 → 1024 features
    python benchmarks/bench_rff.py --quick    # n = 20 000
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def machine() -> str:
    from distsketch.diagnostics import cpu_model

    cpu = cpu_model()
    import dask
    import sklearn

    return (f"{cpu}; {os.cpu_count()} logical cores; Python {platform.python_version()}; "
            f"NumPy {np.__version__}; dask {dask.__version__}; scikit-learn {sklearn.__version__}")


def best_of(f, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small run (20 000 rows)")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--features", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=100)
    args = ap.parse_args()
    n = args.rows or (20_000 if args.quick else 200_000)
    d, m = args.dim, args.features

    import dask
    import dask.array as da
    from sklearn.kernel_approximation import RBFSampler
    from threadpoolctl import threadpool_limits

    from distsketch import RandomFourierFeatures
    from distsketch.ops.rff import rff_map

    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)).astype(np.float32) * 0.3
    gamma = 1.0 / d
    rff = RandomFourierFeatures(gamma=gamma, n_components=m, random_state=0).fit(X)
    W32 = rff.random_weights_.astype(np.float32)
    b = rff.random_offset_

    with threadpool_limits(limits=1):
        # --- physical bound, same shapes: GEMM in 256-row tiles (as row_stable_matmul) ---
        tile = 256
        A = X[:4096]
        out = np.empty((4096, m), dtype=np.float32)

        def gemm():
            for u in range(0, 4096, tile):
                np.matmul(A[u:u + tile], W32, out=out[u:u + tile])

        t_gemm = best_of(gemm, 5)
        gemm_rate = 2.0 * 4096 * d * m / t_gemm
        big = np.empty((4096, m), dtype=np.float32)
        t_big = best_of(lambda: np.matmul(A, W32, out=big), 5)
        gemm_rate_big = 2.0 * 4096 * d * m / t_big
        buf = rng.uniform(-10, 10, size=(4096, m)).astype(np.float32)
        t_cos = best_of(lambda: np.cos(buf, out=out), 5)
        cos_rate = 4096 * m / t_cos
        bound = 2.0 * n * d * m / max(gemm_rate, gemm_rate_big) + n * m / cos_rate

        # --- the kernel, one block of 4096 rows at a time, reused buffer ---
        blk = 4096
        Zb = np.empty((blk, m), dtype=np.float32)

        def kernel():
            for a in range(0, n - blk + 1, blk):
                rff_map(X[a:a + blk], rff.random_weights_, b, a, out=Zb)

        n_kernel = (n // blk) * blk
        t_kernel = best_of(kernel, 2) * n / n_kernel

        # --- the estimator, blockwise over 16384-row blocks, one core (sync scheduler);
        # the result is materialised as one NumPy array, as transform(NumPy) does ---
        Xd = da.from_array(X, chunks=(16384, d))
        with dask.config.set(scheduler="sync"):
            t_est = best_of(lambda: rff.transform(Xd).compute(), 2)
            # blocks consumed where they are made (one column kept per block): no n × m
            # result is assembled, and no full-size reduction pass is added
            t_est_red = best_of(lambda: rff.transform(Xd)[:, :1].sum().compute(), 2)

        # --- scikit-learn ---
        sk = RBFSampler(gamma=gamma, n_components=m, random_state=0).fit(X)
        t_sk = best_of(lambda: sk.transform(X), 2)
        sk_dtype = sk.transform(X[:2]).dtype

    rows = [
        ("GEMM float32 (256-row tiles)", f"{gemm_rate / 1e9:.1f} GFLOP/s", ""),
        ("GEMM float32 (4096 rows)", f"{gemm_rate_big / 1e9:.1f} GFLOP/s", ""),
        ("cos float32", f"{cos_rate / 1e9:.2f} Gelem/s", ""),
        ("bound (GEMM + cos)", f"{n / bound:,.0f} rows/s", "1.00"),
        ("ops.rff_map (4096-row blocks)", f"{n / t_kernel:,.0f} rows/s", f"{bound / t_kernel:.2f}"),
        ("RandomFourierFeatures.transform, blocks reduced in place", f"{n / t_est_red:,.0f} rows/s",
         f"{bound / t_est_red:.2f}"),
        ("RandomFourierFeatures.transform, to one NumPy array", f"{n / t_est:,.0f} rows/s",
         f"{bound / t_est:.2f}"),
        (f"sklearn RBFSampler.transform ({sk_dtype})", f"{n / t_sk:,.0f} rows/s",
         f"{bound / t_sk:.2f}"),
    ]
    print(f"# RFF transform, n={n:,} d={d} m={m}, float32, one core")
    print(f"# machine: {machine()}")
    print(f"# 1-min load average at end: {os.getloadavg()[0]:.2f}")
    print("| measurement | rate | fraction of bound |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    print(f"\ndistsketch transform / sklearn RBFSampler speed ratio: {t_sk / t_est:.2f}")


if __name__ == "__main__":
    main()
