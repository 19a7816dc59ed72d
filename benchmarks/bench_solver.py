"""KernelSolver: seconds per CG iteration against the kernel-product bound, and the
whole fit against scikit-learn's exact ``KernelRidge``.

Run:  python benchmarks/bench_solver.py [--rows 5000,20000] [--d 16]

For each row count n (d features, RBF kernel with γ = 1/d, a smooth target
plus noise, 2 000 held-out rows) it prints:

* per iteration: the seconds of one ``KernelSolver.kernel_matvec`` (one
  n × n kernel product, the whole work of a CG iteration) on the default
  threaded scheduler (all cores) and on one core (``scheduler="sync"``), and
  the same product through the per-tile graph of earlier versions
  (``tile_matvec``: (n/b)² tile tasks and a tree sum) for comparison;
* the bound measured in the same run: one single-threaded pass of an
  n × n × d GEMM and n² ``exp`` over b × b tiles (the least work any exact
  product does), divided by the cores used; the ratio bound / seconds
  (1.0 would be the bound itself);
* the whole fit: ``KernelSolver(preconditioner="nystrom")`` (iterations,
  seconds, test RMSE) beside ``sklearn.kernel_ridge.KernelRidge`` with the
  same kernel and alpha (seconds, test RMSE), and the relative difference of
  the two predictions.

The machine may be shared: ratios are computed from numbers measured in the
same run, the best of ``--repeat`` timings each.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def _data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) * X[:, 1] + np.cos(X[:, 2]) + 0.5 * X[:, 3] ** 2 \
        + 0.1 * rng.normal(size=n)
    return X, y


def _best(fn, repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def kernel_product_bound(X: np.ndarray, gamma: float, block: int, repeat: int) -> float:
    """Single-threaded seconds of an n × n × d GEMM plus n² exp, over b × b tiles.

    One row block of tiles (n/b tiles) is timed and scaled by n/b.
    """
    from threadpoolctl import threadpool_limits

    n = X.shape[0]
    b = min(block, n)
    A = X[:b] * (-2.0 * gamma)
    buf = np.empty((b, b))

    def one_row_of_tiles() -> None:
        for j in range(0, n, b):
            Bj = X[j:j + b]
            T = buf[:, : Bj.shape[0]]
            np.matmul(A, Bj.T, out=T)
            np.exp(T, out=T)

    with threadpool_limits(limits=1):
        return _best(one_row_of_tiles, repeat) * (n / b)


def one_size(n: int, args: argparse.Namespace, cores: int) -> None:
    """Measure and print one table row for n training rows."""
    import dask
    from sklearn.kernel_ridge import KernelRidge

    from distsketch import KernelSolver
    from distsketch.graph import compute
    from distsketch.graph.tiles import tile_matvec

    X, y = _data(n + 2000, args.d)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    gamma = 1.0 / args.d
    solver = KernelSolver(gamma=gamma, alpha=args.alpha, preconditioner="nystrom",
                          random_state=0)
    t0 = time.perf_counter()
    solver.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    pred = solver.predict(Xte)
    rmse = float(np.sqrt(np.mean((pred - yte) ** 2)))

    V = np.random.default_rng(1).normal(size=n)
    it_s = _best(lambda: solver.kernel_matvec(V), args.repeat)
    with dask.config.set(scheduler="sync"):
        one_s = _best(lambda: solver.kernel_matvec(V), args.repeat)
    Xb = solver._train_blocks
    tiles_s = _best(lambda: compute(tile_matvec(Xb, Xb, V[:, None], solver._tile()),
                                    progress=False), 1)
    bound1 = kernel_product_bound(Xtr, gamma, solver.block_rows, args.repeat)
    bound = bound1 / cores
    if args.no_sklearn:
        kr_s, kr_rmse, diff = float("nan"), float("nan"), float("nan")
    else:
        kr = KernelRidge(alpha=args.alpha, kernel="rbf", gamma=gamma)
        t0 = time.perf_counter()
        kr.fit(Xtr, ytr)
        kr_s = time.perf_counter() - t0
        kr_pred = kr.predict(Xte)
        kr_rmse = float(np.sqrt(np.mean((kr_pred - yte) ** 2)))
        diff = float(np.abs(pred - kr_pred).max() / np.abs(kr_pred).max())
        del kr
    print(f"| {n} | {args.d} | {it_s:.3f} | {bound:.3f} | {bound / it_s:.2f} | "
          f"{one_s:.3f} | {bound1:.3f} | {bound1 / one_s:.2f} | {tiles_s:.3f} | "
          f"{solver.n_iter_} | {fit_s:.1f} | {rmse:.4f} | {kr_s:.1f} | {kr_rmse:.4f} | "
          f"{diff:.1e} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="5000,20000",
                        help="comma-separated training row counts (default 5000,20000)")
    parser.add_argument("--d", type=int, default=16, help="features (default 16)")
    parser.add_argument("--alpha", type=float, default=1e-2, help="λ (default 1e-2)")
    parser.add_argument("--repeat", type=int, default=3, help="timings per measure (best)")
    parser.add_argument("--no-sklearn", action="store_true", help="skip KernelRidge")
    args = parser.parse_args()

    import dask
    import sklearn
    from threadpoolctl import threadpool_info

    from distsketch.diagnostics import cpu_model

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    blas = ", ".join(sorted({f"{i['internal_api']} {i.get('version')} ({i.get('architecture')})"
                             for i in threadpool_info() if i["user_api"] == "blas"}))
    print(f"CPU: {cpu_model()}, {cores} cores; Python {platform.python_version()}, "
          f"NumPy {np.__version__} ({blas}), dask {dask.__version__}, "
          f"scikit-learn {sklearn.__version__}\n")
    print("| n | d | iteration s (all cores) | bound s | ratio | 1 core s | 1-core bound s | "
          "1-core ratio | tiles graph s | CG iters | fit s | RMSE | KernelRidge s | "
          "KernelRidge RMSE | max rel. diff |")
    print("|" + "---|" * 15)
    for n in (int(float(r)) for r in args.rows.split(",")):
        one_size(n, args, cores)


if __name__ == "__main__":
    main()
