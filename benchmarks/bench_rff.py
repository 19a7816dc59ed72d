"""Random Fourier features: transform throughput per core against this machine's bound.

The bound is measured in the same run, single-threaded: the time of the GEMM
(2·n·d·m flops at the float32 GEMM rate measured on the same shapes) plus the
time of n·m float32 cos (measured on a reused buffer).  Reported as ratios:

* ``ops.rff_map`` kernel (one block, reused output buffer) vs the bound, in the
  offset and the paired form (the offset form's bound);
* ``RandomFourierFeatures.transform`` over 16384-row dask blocks computed to
  NumPy (sync scheduler, one core) vs the bound;
* scikit-learn's ``RBFSampler.transform`` (BLAS pinned to one thread) vs ours.

The ``error`` section measures the kernel approximation error at equal output
width D of the offset form √(2/D)·cos(Wᵀx + b), the paired form
√(2/D)·[cos(Wᵀx), sin(Wᵀx)] (D/2 frequencies) and scikit-learn's
``RBFSampler`` (the offset form), on scikit-learn's digits scaled to [0, 1]
with the median-heuristic γ = 1 / median ‖xᵢ − xⱼ‖² and with γ = 1/d: the relative Frobenius
error ‖ZZᵀ − G‖_F / ‖G‖_F, mean ± sd over seeds, beside its expectation
sqrt(Σᵢⱼ Var) / ‖G‖_F from the closed-form variances (offset (V + 1/2)/D,
paired 2V/D, V = (1 − k²)²/2 for the Gaussian kernel).

Usage::

    python benchmarks/bench_rff.py                # both sections
    python benchmarks/bench_rff.py --quick        # n = 20 000; error on 600 digits, 3 seeds
    python benchmarks/bench_rff.py --only error   # kernel error only
    python benchmarks/bench_rff.py --only throughput
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


def kernel_error(quick: bool, seeds: int | None = None) -> None:
    """Relative Frobenius kernel error at equal width: offset vs paired vs RBFSampler."""
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    if quick:
        X = X[:600]
    n_seeds = seeds or (3 if quick else 5)
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    median = 1.0 / float(np.median(sq[np.triu_indices(len(X), 1)]))
    for gamma, rule in ((median, "median heuristic"), (1.0 / X.shape[1], "1/d")):
        _error_table(X, gamma, rule, n_seeds)


def _error_table(X: np.ndarray, gamma: float, rule: str, n_seeds: int) -> None:
    from sklearn.kernel_approximation import RBFSampler
    from threadpoolctl import threadpool_limits

    from distsketch import RandomFourierFeatures
    from distsketch.ops.kernels import pairwise_kernel

    G = pairwise_kernel(X, X, "rbf", gamma=gamma)
    norm = np.linalg.norm(G)
    V = (1.0 - G ** 2) ** 2 / 2.0

    def features(method: str, D: int, seed: int) -> np.ndarray:
        if method == "sklearn RBFSampler":
            return RBFSampler(gamma=gamma, n_components=D, random_state=seed).fit_transform(X)
        form = "paired" if method.startswith("paired") else "offset"
        return RandomFourierFeatures(gamma=gamma, n_components=D, form=form,
                                     random_state=seed).fit_transform(X)

    print(f"# RFF kernel error at equal width D, digits scaled to [0, 1]: n={len(X)}, "
          f"d={X.shape[1]}, gamma={gamma:.4f} ({rule}), mean off-diagonal k = "
          f"{(G.sum() - len(X)) / (len(X) ** 2 - len(X)):.3f}, {n_seeds} seeds")
    print("| D | method | relative Frobenius error (mean ± sd) | expected (theory) |")
    print("|---|---|---|---|")
    methods = ["offset (distsketch)", "paired (distsketch)", "sklearn RBFSampler"]
    summary = {}
    with threadpool_limits(limits=1):
        for D in (256, 1024, 4096):
            for method in methods:
                errs = []
                for seed in range(n_seeds):
                    Z = np.asarray(features(method, D, seed), dtype=np.float64)
                    errs.append(np.linalg.norm(Z @ Z.T - G) / norm)
                var = 2.0 * V / D if method.startswith("paired") else (V + 0.5) / D
                summary[(D, method)] = np.mean(errs)
                print(f"| {D} | {method} | {np.mean(errs):.4f} ± {np.std(errs):.4f} | "
                      f"{np.sqrt(var.sum()) / norm:.4f} |")
    for D in (256, 1024, 4096):
        ratio = summary[(D, "paired (distsketch)")] / summary[(D, "offset (distsketch)")]
        print(f"D={D}: paired / offset error ratio {ratio:.2f}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small run (20 000 rows)")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--features", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--only", choices=("throughput", "error"), default=None,
                    help="run one section (default: both)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds of the error section")
    args = ap.parse_args()
    if args.only != "throughput":
        kernel_error(args.quick, args.seeds)
        if args.only == "error":
            return
        print()
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
        # the paired form at the same width: half the GEMM, m/2 cos + m/2 sin
        pair = RandomFourierFeatures(gamma=gamma, n_components=m, form="paired",
                                     random_state=0).fit(X)

        def kernel_paired():
            for a in range(0, n - blk + 1, blk):
                rff_map(X[a:a + blk], pair.random_weights_, pair.random_offset_, a, out=Zb)

        t_paired = best_of(kernel_paired, 2) * n / n_kernel

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
        ("ops.rff_map, paired form (same width)", f"{n / t_paired:,.0f} rows/s",
         f"{bound / t_paired:.2f}"),
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
