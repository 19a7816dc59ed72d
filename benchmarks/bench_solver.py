"""KernelSolver: seconds per CG iteration against the kernel-product bound, and the
whole fit against scikit-learn's exact ``KernelRidge``.

Run:  python benchmarks/bench_solver.py [--rows 5000,20000] [--alpha 0.1] [--d 16]

Data: n rows of d standard normal features, a smooth target plus noise
(σ = 0.1), RBF kernel with γ = 1/d, 2 000 held-out rows.  Two tables:

1. Per CG iteration (one ``KernelSolver.kernel_matvec``: one n × n kernel
   product, the whole work of an iteration) on the default threaded scheduler
   (all cores) and on one core (``scheduler="sync"``); the bound measured in
   the same run: one single-threaded pass of an n × n × d GEMM and n² ``exp``
   over b × b tiles (the least work an exact product does), divided by the
   cores for the all-core column; the ratio bound / seconds (1.0 would be the
   bound itself); and the same product through the per-tile graph of earlier
   versions (``tile_matvec``: (n/b)² tile tasks and a tree sum).
2. The whole fit per alpha: ``KernelSolver(preconditioner="nystrom")`` with
   its default rank (rank, iterations to tol 1e-6, seconds, test RMSE)
   beside ``sklearn.kernel_ridge.KernelRidge`` with the same kernel and
   alpha (seconds, test RMSE), the largest difference of the two predictions
   relative to the largest prediction, and the speed-up.

The machine may be shared: ratios are computed from numbers measured in the
same run, the best of ``--repeat`` timings each.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

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



def per_iteration(n: int, args: argparse.Namespace, cores: int) -> None:
    """Print one row of the per-iteration table for n training rows."""
    import dask

    from distsketch import KernelSolver
    from distsketch.graph import compute
    from distsketch.graph.tiles import tile_matvec

    X, y = _data(n, args.d)
    gamma = 1.0 / args.d
    solver = KernelSolver(gamma=gamma, max_iter=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # max_iter=0: only the set-up
        solver.fit(X, y)
    V = np.random.default_rng(1).normal(size=n)
    it_s = _best(lambda: solver.kernel_matvec(V), args.repeat)
    with dask.config.set(scheduler="sync"):
        one_s = _best(lambda: solver.kernel_matvec(V), args.repeat)
    Xb = solver._train_blocks
    tiles_s = _best(lambda: compute(tile_matvec(Xb, Xb, V[:, None], solver._tile()),
                                    progress=False), 1)
    bound1 = kernel_product_bound(X, gamma, solver.block_rows, args.repeat)
    bound = bound1 / cores
    print(f"| {n} | {args.d} | {it_s:.3f} | {bound:.3f} | {bound / it_s:.2f} | "
          f"{one_s:.3f} | {bound1:.3f} | {bound1 / one_s:.2f} | {tiles_s:.3f} | "
          f"{tiles_s / it_s:.1f} |", flush=True)


def whole_fit(n: int, alpha: float, args: argparse.Namespace) -> None:
    """Print one row of the fit table: KernelSolver beside KernelRidge."""
    from sklearn.kernel_ridge import KernelRidge

    from distsketch import KernelSolver

    X, y = _data(n + 2000, args.d)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    gamma = 1.0 / args.d
    solver = KernelSolver(gamma=gamma, alpha=alpha, preconditioner="nystrom", random_state=0)
    t0 = time.perf_counter()
    solver.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    pred = solver.predict(Xte)
    rmse = float(np.sqrt(np.mean((pred - yte) ** 2)))
    if args.no_sklearn:
        kr_s, kr_rmse, diff = float("nan"), float("nan"), float("nan")
    else:
        kr = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma)
        t0 = time.perf_counter()
        kr.fit(Xtr, ytr)
        kr_s = time.perf_counter() - t0
        kr_pred = kr.predict(Xte)
        kr_rmse = float(np.sqrt(np.mean((kr_pred - yte) ** 2)))
        diff = float(np.abs(pred - kr_pred).max() / np.abs(kr_pred).max())
        del kr
    print(f"| {n} | {alpha:g} | {solver.preconditioner_rank_} | {solver.n_iter_} | "
          f"{fit_s:.1f} | {rmse:.4f} | {kr_s:.1f} | {kr_rmse:.4f} | {diff:.1e} | "
          f"{kr_s / fit_s:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="5000,20000",
                        help="comma-separated training row counts (default 5000,20000)")
    parser.add_argument("--d", type=int, default=16, help="features (default 16)")
    parser.add_argument("--alpha", default="0.1",
                        help="comma-separated λ values of the fits (default 0.1)")
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
    rows = [int(float(r)) for r in args.rows.split(",")]
    print("Per CG iteration (one n x n kernel product):\n")
    print("| n | d | s, all cores | bound s | ratio | s, 1 core | 1-core bound s | "
          "1-core ratio | tile graph s | tile graph / now |")
    print("|" + "---|" * 10)
    for n in rows:
        per_iteration(n, args, cores or 1)
    print("\nWhole fit, KernelSolver(preconditioner='nystrom') vs KernelRidge:\n")
    print("| n | alpha | rank | CG iters | fit s | RMSE | KernelRidge s | KernelRidge RMSE | "
          "max rel. diff | KernelRidge s / fit s |")
    print("|" + "---|" * 10)
    for n in rows:
        for alpha in (float(a) for a in args.alpha.split(",")):
            whole_fit(n, alpha, args)


if __name__ == "__main__":
    main()
