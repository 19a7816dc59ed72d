"""Sampling techniques for kernel methods: sparsified kernel PCA, rounded expansions, projections.

Run::

    python benchmarks/bench_sampling.py            # n = 20 000
    python benchmarks/bench_sampling.py --quick    # n = 5 000

Three tables:

1. Kernel PCA (rbf, 8 components) on the sparsified Gram matrix for
   p ∈ {1, 0.3, 0.1, 0.03} against scikit-learn ``KernelPCA`` (arpack): wall
   time, peak RSS of the process (each case runs in a fresh process), stored
   bytes of K̂, and the subspace error (largest principal angle, as sin, to
   the exact top-8 subspace).  Physical limit: the time to evaluate the n²/2
   lower-triangle kernel entries at the measured GEMM rate.
2. Test-time cost of kernel expansions (scikit-learn ``KernelRidge`` and
   ``KernelPCA``) with randomized rounding: kernel evaluations per point, time per point,
   error against the full expansion and the Hoeffding bound.
3. Kernel evaluation between a test batch and the training set through a
   database-friendly projection, at d = 784 and d = 10⁴: time against the
   exact kernel block (scikit-learn ``rbf_kernel`` and distsketch's), as ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import resource
import time

import numpy as np


def _machine() -> str:
    import dask
    import scipy
    import sklearn

    from distsketch.diagnostics import cpu_model

    cpu = cpu_model()
    try:
        import psutil

        mem = f"{psutil.virtual_memory().total / 2**30:.1f} GiB"
    except ImportError:
        mem = "?"
    return (f"CPU: {cpu}; cores: {os.cpu_count()}; RAM: {mem}; Python {platform.python_version()}; "
            f"numpy {np.__version__}; scipy {scipy.__version__}; scikit-learn {sklearn.__version__}; "
            f"dask {dask.__version__}")


def _gemm_rate() -> float:
    """Measured float64 GEMM rate in flop/s (all threads)."""
    a = np.random.default_rng(0).normal(size=(2048, 2048))
    a @ a
    t = time.perf_counter()
    for _ in range(3):
        a @ a
    return 3 * 2 * 2048**3 / (time.perf_counter() - t)


def _data(n: int, d: int, seed: int = 0) -> np.ndarray:
    # a mixture of 10 Gaussian clusters: a kernel matrix with a visible leading spectrum
    rng = np.random.default_rng(seed)
    centers = 2.0 * rng.normal(size=(10, d))
    return centers[rng.integers(0, 10, size=n)] + rng.normal(size=(n, d))


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _kpca_case(args: tuple) -> dict:
    kind, n, d, gamma, k, p, solver = args
    X = _data(n, d)
    base = _peak_rss_mib()
    t = time.perf_counter()
    if kind == "sklearn":
        from sklearn.decomposition import KernelPCA

        model = KernelPCA(n_components=k, kernel="rbf", gamma=gamma, eigen_solver="arpack",
                          random_state=0).fit(X)
        vecs, stored = model.eigenvectors_, 8 * n * n
        extra = ""
    else:
        from distsketch import SparsifiedKernelPCA

        model = SparsifiedKernelPCA(n_components=k, gamma=gamma, p=p, solver=solver,
                                    tile_rows=2048, random_state=0).fit(X)
        vecs, stored = model.eigenvectors_, model.gram_.memory_bytes_
        extra = f"{model.n_iter_} it" if solver == "orthogonal_iteration" else ""
    return {"time": time.perf_counter() - t, "rss": _peak_rss_mib(), "base": base,
            "stored": stored, "vecs": vecs, "extra": extra}


def bench_kpca(n: int, d: int, k: int, gemm: float) -> None:
    gamma = 1.0 / (2 * d)
    ctx = mp.get_context("spawn")
    cases = [("sklearn", None, "arpack")]
    for p in (1.0, 0.3, 0.1, 0.03):
        cases.append(("distsketch", p, "orthogonal_iteration"))
    cases.append(("distsketch", 0.1, "lanczos"))
    results = []
    for kind, p, solver in cases:
        with ctx.Pool(1) as pool:
            results.append(pool.apply(_kpca_case, ((kind, n, d, gamma, k, p, solver),)))
    from scipy.linalg import subspace_angles

    ref = results[0]["vecs"]
    limit = (n * n / 2) * 2 * d / gemm  # lower-triangle kernel entries at GEMM speed
    print(f"\n## Kernel PCA on the sparsified Gram matrix (n={n}, d={d}, rbf gamma={gamma:.4g}, "
          f"k={k})\n")
    print("GEMM-bound time for the n²/2 kernel entries: "
          f"{limit:.2f} s (measured rate {gemm / 1e9:.1f} GFLOP/s)\n")
    print("| method | p | solver | time (s) | × sklearn | × GEMM bound | peak RSS (MiB) | "
          "K̂ stored (MiB) | sin θ_max vs exact |")
    print("|---|---|---|---|---|---|---|---|---|")
    t_sk = results[0]["time"]
    for (kind, p, solver), r in zip(cases, results):
        sin = float(np.sin(np.max(subspace_angles(r["vecs"], ref))))
        ptxt = "—" if p is None else f"{p:g}"
        sol = solver + (f" ({r['extra']})" if r["extra"] else "")
        print(f"| {kind} | {ptxt} | {sol} | {r['time']:.2f} | {r['time'] / t_sk:.2f} | "
              f"{r['time'] / limit:.1f} | {r['rss']:.0f} | {r['stored'] / 2**20:.1f} | {sin:.2e} |")


def bench_rounding(n: int, d: int) -> None:
    from sklearn.decomposition import KernelPCA
    from sklearn.kernel_ridge import KernelRidge

    from distsketch import RoundedExpansion

    X = _data(n, d, seed=1)
    y = np.sin(X[:, 0]) + 0.1 * np.random.default_rng(2).normal(size=n)
    Xt = _data(2000, d, seed=3)
    gamma = 1.0 / (2 * d)
    models = [("KernelRidge", KernelRidge(kernel="rbf", gamma=gamma, alpha=1.0).fit(X, y),
               "predict"),
              ("KernelPCA (8 comp.)", KernelPCA(n_components=8, kernel="rbf", gamma=gamma,
                                                eigen_solver="arpack", random_state=0).fit(X),
               "transform")]
    print(f"\n## Rounded kernel expansions (n_train={n}, d={d}, 2000 test points)\n")
    print("Errors are relative to the standard deviation of the full expansion's output "
          "(per output, averaged).\n")
    print("| model | expansion | kernel evals / point | E[evals] | time / point (µs) | × full | "
          "mean rel. err | max rel. err | Hoeffding bound / sd (δ=0.05) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, model, method in models:
        getattr(model, method)(Xt[:10])
        t = time.perf_counter()
        full = np.asarray(getattr(model, method)(Xt)).reshape(len(Xt), -1)
        t_full = (time.perf_counter() - t) / len(Xt)
        sd = full.std(axis=0)
        print(f"| {label} | full (sklearn) | {n} | {n} | {t_full * 1e6:.1f} | 1.00 | 0 | 0 | 0 |")
        for frac in (0.3, 0.1, 0.03):
            r = RoundedExpansion(budget=frac * n, delta=0.05, random_state=0).fit(model)
            r.predict(Xt[:10])
            t = time.perf_counter()
            pred = np.asarray(r.predict(Xt)).reshape(len(Xt), -1)
            tp = (time.perf_counter() - t) / len(Xt)
            err = np.abs(pred - full) / sd
            print(f"| {label} | rounded, budget {frac:g}·n | {r.n_evaluations_} | "
                  f"{r.expected_evaluations_:.0f} | {tp * 1e6:.1f} | {tp / t_full:.2f} | "
                  f"{err.mean():.3g} | {err.max():.3g} | {np.mean(r.hoeffding_bound_ / sd):.3g} |")


def bench_projection(n_train: int, n_test: int) -> None:
    from sklearn.metrics.pairwise import rbf_kernel

    from distsketch import DatabaseFriendlyProjection
    from distsketch.ops.kernels import pairwise_kernel

    print(f"\n## Kernel evaluation through database-friendly projections (rbf, {n_test} test × "
          f"{n_train} train)\n")
    print("| d | k | density | exact sklearn (s) | exact distsketch (s) | project train, once (s) | "
          "approx batch (s) | speed-up vs sklearn | max abs err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in (784, 10_000):
        rng = np.random.default_rng(4)
        Xtr = rng.normal(size=(n_train, d)) / np.sqrt(d)
        Xte = rng.normal(size=(n_test, d)) / np.sqrt(d)
        gamma = 0.5
        t = time.perf_counter()
        K = rbf_kernel(Xte, Xtr, gamma=gamma)
        t_sk = time.perf_counter() - t
        t = time.perf_counter()
        pairwise_kernel(Xte, Xtr, "rbf", gamma=gamma)
        t_ds = time.perf_counter() - t
        for k, density in ((256, "sparse"), (256, "dense"), (1024, "sparse")):
            P = DatabaseFriendlyProjection(n_components=k, density=density, random_state=0).fit(Xtr)
            t = time.perf_counter()
            PB = P.transform(Xtr)
            t_train = time.perf_counter() - t
            t = time.perf_counter()
            Kh = P.approximate_kernel(Xte, PB, kernel="rbf", gamma=gamma, B_projected=True)
            t_ap = time.perf_counter() - t
            print(f"| {d} | {k} | {density} | {t_sk:.3f} | {t_ds:.3f} | {t_train:.3f} | {t_ap:.3f} | "
                  f"{t_sk / t_ap:.1f} | {np.abs(Kh - K).max():.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="n = 5000 instead of 20 000")
    ap.add_argument("--n", type=int, default=None, help="override the kernel PCA size")
    ap.add_argument("--skip-kpca", action="store_true")
    args = ap.parse_args()
    n = args.n or (5000 if args.quick else 20_000)
    print("# bench_sampling\n")
    print(_machine())
    gemm = _gemm_rate()
    if not args.skip_kpca:
        bench_kpca(n, 20, 8, gemm)
    bench_rounding(min(n, 5000 if args.quick else 10_000), 20)
    bench_projection(2000 if args.quick else 5000, 500 if args.quick else 1000)


if __name__ == "__main__":
    main()
