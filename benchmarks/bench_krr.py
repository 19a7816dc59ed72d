"""Kernel ridge regression: accuracy vs time, a large out-of-core fit, CG iteration counts.

Run:  python benchmarks/bench_krr.py [--quick]

Tables printed:

1. Accuracy vs time on one data set (a smooth function of 8 inputs plus
   noise, RBF kernel, same γ and λ everywhere): scikit-learn's exact
   ``KernelRidge``, ``SketchedKernelRidge`` with RFF / GaussianSketch /
   Nyström / statistical-dimension features, ``MEKAKernelRidge`` and the exact
   ``KernelSolver`` with the Nyström preconditioner.  Test RMSE, fit and
   predict seconds, and time ratio to scikit-learn.
2. Large fit on the default local cluster (``distsketch.cluster.connect()``),
   X in Zarr: ``SketchedKernelRidge`` with m RFF features, fit + predict wall
   time and peak memory (driver + workers, sampled) at n/4 and n rows, against
   (a) one pass of the feature map alone and the m × m solve, and (b) the
   physical limit of the Gram accumulation: n·m² flops at the float64 GEMM
   rate measured in this run on all cores.
3. CG iterations to relative residual 1e-6 for (K + λI)α = y as n grows:
   plain, sketch-preconditioned (RFF, m = 256 / 1024) and Nyström-preconditioned
   (M = 256).  Counts come from ``distsketch.ops.cg.pcg`` with the same
   preconditioner factors the solver builds, on an in-memory kernel (the count
   does not depend on how K·v is evaluated).
4. CG iterations for none / sketch / Nyström preconditioners on the problems
   of the solver issues (γ = 2 and γ = 0.5 at λ = 1e-3), with the default
   ranks ``KernelSolver(preconditioner_size=None)`` picks from the estimated
   statistical dimension d_λ, beside the exact d_λ and the best any rank-512
   preconditioner can do (K's exact top eigenvectors).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def _cpu() -> str:
    from distsketch.diagnostics import cpu_model

    return cpu_model()


def _gemm_rate(n: int = 1500) -> float:
    """float64 GEMM flop/s with the process's default BLAS threads."""
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(n, n)), rng.normal(size=(n, n))
    A @ B
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        A @ B
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best


class _PeakRSS:
    """Sample the resident memory of this process and its children."""

    def __init__(self, interval: float = 0.05):
        import psutil

        self.proc = psutil.Process()
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()

    def _total(self) -> int:
        total = 0
        for p in [self.proc, *self.proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except Exception:  # a child may exit between listing and reading
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._total())
            time.sleep(self.interval)

    def __enter__(self) -> _PeakRSS:
        self.base = self._total()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.thread.join()


def _data(n: int, d: int = 8, seed: int = 0, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) * X[:, 1] + np.cos(2 * X[:, 2]) + 0.5 * X[:, 3] ** 2 \
        + 0.1 * rng.normal(size=n)
    return X.astype(dtype), y


def _table(rows: list[list], header: list[str]) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |")
    print()


def accuracy_vs_time(n_train: int, n_test: int, gamma: float, lam: float) -> None:
    from sklearn.kernel_ridge import KernelRidge

    from distsketch import (
        MEKA,
        KernelSolver,
        MEKAKernelRidge,
        NystromFeatures,
        RandomFourierFeatures,
        SketchedKernelRidge,
    )
    from distsketch.estimators.ridge.statistical_dimension import StatisticalDimensionSketch

    X, y = _data(n_train + n_test)
    Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    ym = ytr.mean()
    rows = []

    def run(name, make, centre=False):
        t0 = time.perf_counter()
        model = make().fit(Xtr, ytr - ym if centre else ytr)
        t1 = time.perf_counter()
        pred = np.asarray(model.predict(Xte)) + (ym if centre else 0.0)
        t2 = time.perf_counter()
        rmse = float(np.sqrt(np.mean((pred - yte) ** 2)))
        extra = getattr(model, "n_iter_", "")
        rows.append([name, f"{rmse:.4f}", f"{t1 - t0:.2f}", f"{t2 - t1:.2f}", extra])
        return t1 - t0 + t2 - t1

    base = run("sklearn KernelRidge (exact)", lambda: KernelRidge(kernel="rbf", gamma=gamma,
                                                                  alpha=lam), centre=True)
    for m in (256, 1024, 4096):
        run(f"Sketched + RFF m={m}", lambda m=m: SketchedKernelRidge(standardize=False,
            features=RandomFourierFeatures(gamma=gamma, n_components=m, random_state=0), alpha=lam))
    from distsketch import GaussianSketch
    from distsketch.errors import ConfigError

    for m in (1024,):
        try:
            run(f"Sketched + GaussianSketch m={m}", lambda m=m: SketchedKernelRidge(standardize=False,
                features=GaussianSketch(gamma=gamma, n_components=m, random_state=0), alpha=lam))
        except ConfigError as exc:
            # outside the Taylor sketch's regime for this γ: fit refuses with the numbers; report them
            need = str(exc).split("about n_components=")[-1].split()[0]
            rows.append([f"Sketched + GaussianSketch m={m}", f"refused (needs ~{need} comps)", "", "", ""])
            print(f"GaussianSketch m={m}: {exc}\n")
    for m in (256, 1024):
        run(f"Sketched + Nystrom m={m}", lambda m=m: SketchedKernelRidge(standardize=False,
            features=NystromFeatures(gamma=gamma, n_landmarks=m, random_state=0), alpha=lam))
    run("Sketched + s_λ-SRHT(RFF 4096)", lambda: SketchedKernelRidge(standardize=False,
        features=StatisticalDimensionSketch(
            base=RandomFourierFeatures(gamma=gamma, n_components=4096, random_state=0),
            alpha=lam, random_state=0), alpha=lam))
    for k in (32, 128):
        run(f"MEKAKernelRidge c=8 k={k}", lambda k=k: MEKAKernelRidge(
            meka=MEKA(n_clusters=8, rank=k, gamma=gamma, random_state=0), alpha=lam, tol=1e-4),
            centre=True)
    run("KernelSolver exact, Nystrom PCG M=256", lambda: KernelSolver(
        gamma=gamma, alpha=lam, preconditioner="nystrom", preconditioner_size=256, tol=1e-4,
        block_rows=2048, random_state=0), centre=True)
    for r in rows:
        total = float(r[2] or 0) + float(r[3] or 0) if r[2] else None
        r.append(f"{total / base:.2f}" if total else "")
    print(f"## 1. Accuracy vs time: n_train={n_train}, n_test={n_test}, d=8, rbf γ={gamma}, "
          f"λ={lam}\n")
    _table(rows, ["method", "test RMSE", "fit s", "predict s", "CG iters",
                  "time / sklearn"])


def large_fit(n: int, m: int, block_rows: int, cluster: str | None) -> None:
    import dask.array as da

    from distsketch import RandomFourierFeatures, SketchedKernelRidge, open_array, write_array
    from distsketch.cluster import connect
    from distsketch.graph import compute

    gemm = _gemm_rate()
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp, connect(cluster) as client:
        workers = len(client.scheduler_info()["workers"]) if client is not None else 1
        for nn in (n // 4, n):
            path = Path(tmp) / f"X{nn}.zarr"
            Xd = da.random.RandomState(0).uniform(-1, 1, size=(nn, 8), chunks=(block_rows, 8))
            Xd = Xd.astype(np.float32)
            write_array(Xd, path, chunk_rows=block_rows, compressor=None)
            yd = da.sin(3 * Xd[:, 0]) * Xd[:, 1] + da.cos(2 * Xd[:, 2])
            y = compute(yd.astype(np.float64), progress=False)[0]
            X = open_array(str(path), block_rows=block_rows)
            feats = RandomFourierFeatures(gamma=2.0, n_components=m, random_state=0).fit(X)
            # (a) one pass of the feature map alone (features summed, never stored)
            t0 = time.perf_counter()
            compute(feats.transform(X).sum(axis=0), progress=False)
            t_map = time.perf_counter() - t0
            t0 = time.perf_counter()
            G = np.eye(m) * 2.0
            np.linalg.cholesky(G + np.ones((m, m)))
            t_solve = time.perf_counter() - t0
            with _PeakRSS() as mem:
                t0 = time.perf_counter()
                model = SketchedKernelRidge(standardize=False, features=feats, alpha=1e-3).fit(X, y)
                t_fit = time.perf_counter() - t0
                t0 = time.perf_counter()
                pred = compute(model.predict(X[: min(nn, 100_000)]), progress=False)[0]
                t_pred = time.perf_counter() - t0
            r2 = 1 - np.mean((pred - y[: len(pred)]) ** 2) / np.var(y[: len(pred)])
            gram_limit = 2.0 * nn * m * m / 2 / gemm  # syrk-like: n m² flops at the GEMM rate
            rows.append([nn, m, workers, f"{t_map:.1f}", f"{t_solve:.2f}", f"{t_fit:.1f}",
                         f"{t_fit / (t_map + t_solve):.2f}", f"{gram_limit:.1f}",
                         f"{gram_limit / t_fit:.2f}", f"{t_pred:.1f}",
                         f"{(mem.peak - mem.base) / 2**20:.0f}", f"{mem.peak / 2**20:.0f}",
                         f"{r2:.3f}"])
    print(f"## 2. Large fit: SketchedKernelRidge + RFF on the local cluster (X float32 in Zarr, "
          f"{block_rows}-row blocks; float64 GEMM {gemm / 1e9:.1f} GFLOP/s on this process)\n")
    _table(rows, ["n", "m", "workers", "map pass s", "m×m solve s", "fit s",
                  "fit/(map+solve)", "Gram limit s", "limit/fit", "predict 1e5 s",
                  "peak ΔRSS MiB", "peak RSS MiB", "train R²"])


def cg_counts(ns: list[int], gamma: float, lam: float) -> None:
    from distsketch import RandomFourierFeatures
    from distsketch.ops.cg import pcg
    from distsketch.ops.kernels import pairwise_kernel
    from distsketch.ops.sketch_solve import nystrom_factor, woodbury_apply, woodbury_factor

    rows = []
    for n in ns:
        X, y = _data(n, seed=1)
        K = pairwise_kernel(X, X, "rbf", gamma=gamma)
        A = K + lam * np.eye(n)

        def matvec(V, A=A):
            return A @ V

        plain = pcg(matvec, y, tol=1e-6, max_iter=20000)
        sk = []
        for m in (256, 1024):
            Z = RandomFourierFeatures(gamma=gamma, n_components=m, random_state=0).fit(X) \
                .transform(X)
            R = woodbury_factor(Z.T @ Z, lam)
            sk.append(pcg(matvec, y, tol=1e-6, max_iter=20000,
                          precond=lambda V, Z=Z, R=R: woodbury_apply(Z, R, lam, V)).n_iter)
        idx = np.random.default_rng(0).choice(n, 256, replace=False)
        T = nystrom_factor(K[np.ix_(idx, idx)])
        Zn = np.linalg.solve(T.T, K[:, idx].T).T
        Rn = woodbury_factor(Zn.T @ Zn, lam)
        ny = pcg(matvec, y, tol=1e-6, max_iter=20000,
                 precond=lambda V, Z=Zn, R=Rn: woodbury_apply(Z, R, lam, V))
        rows.append([n, f"{np.linalg.cond(A):.2g}", plain.n_iter, sk[0], sk[1], ny.n_iter,
                     f"{plain.n_iter / max(sk[1], 1):.1f}",
                     f"{plain.n_iter / max(ny.n_iter, 1):.1f}"])
    print(f"## 3. CG iterations to 1e-6 (rbf γ={gamma}, λ={lam}, d=8)\n")
    _table(rows, ["n", "κ(K+λI)", "plain CG", "sketch PCG (RFF 256)", "sketch PCG (RFF 1024)",
                  "Nystrom PCG (256)", "plain/sketch1024", "plain/Nystrom"])


def _nystrom_z(K: np.ndarray, idx: np.ndarray) -> np.ndarray:
    from distsketch.ops.sketch_solve import nystrom_factor

    T = nystrom_factor(K[np.ix_(idx, idx)])
    return np.linalg.solve(T.T, K[:, idx].T).T


def _precond_row(name: str, X: np.ndarray, y: np.ndarray, gamma: float, lam: float) -> list:
    from distsketch import RandomFourierFeatures
    from distsketch.estimators.solvers.solver import SDIM_SAMPLE, default_preconditioner_rank
    from distsketch.ops.cg import pcg
    from distsketch.ops.kernels import pairwise_kernel
    from distsketch.ops.sketch_solve import (
        kernel_statistical_dimension,
        statistical_dimension,
        woodbury_apply,
        woodbury_factor,
    )

    n = X.shape[0]
    K = pairwise_kernel(X, X, "rbf", gamma=gamma)
    evals, evecs = np.linalg.eigh(K)
    d_true = statistical_dimension(evals, lam)
    rng = np.random.default_rng(0)
    s = min(n, SDIM_SAMPLE)
    idx = rng.choice(n, s, replace=False)
    d_est = kernel_statistical_dimension(K[np.ix_(idx, idx)], n, lam)

    def matvec(V):
        return K @ V + lam * V

    def count(Z=None, apply=None):
        if Z is not None:
            R = woodbury_factor(Z.T @ Z, lam)

            def apply(V):
                return woodbury_apply(Z, R, lam, V)
        res = pcg(matvec, y, precond=apply, tol=1e-6, max_iter=5000)
        return f"{res.n_iter}{'' if res.converged else '+'}"

    def rff(m):
        return np.asarray(RandomFourierFeatures(gamma=gamma, n_components=m, random_state=0)
                          .fit(X).transform(X), dtype=np.float64)

    plain = count()
    sk256 = count(rff(256))
    m_sk = default_preconditioner_rank(d_est, n, "sketch", s)
    sk_def = count(rff(m_sk)) if m_sk else f"{plain} (none used)"
    ny512 = count(_nystrom_z(K, rng.choice(n, 512, replace=False)))
    m_ny = default_preconditioner_rank(d_est, n, "nystrom", s)
    ny_def = count(_nystrom_z(K, rng.choice(n, m_ny, replace=False)))
    U, top, floor = evecs[:, -512:], evals[-512:], evals[-513] + lam

    def ideal(V):
        # exact top-512 eigenpairs kept, the rest scaled by the 513th eigenvalue
        UtV = U.T @ V
        return U @ (UtV / (top + lam)[:, None]) + (V - U @ UtV) / floor

    return [name, n, f"{d_true:.0f}", f"{d_est:.0f}", plain, sk256, f"{sk_def} (m={m_sk})",
            ny512, f"{ny_def} (M={m_ny})", count(apply=ideal)]


def preconditioner_counts(cases: list[tuple[str, np.ndarray, np.ndarray, float, float]]) -> None:
    """CG iterations for none / sketch / Nyström on the problems of the solver issues.

    Each preconditioner is built as ``KernelSolver`` builds it (RFF features for
    the sketch, uniform landmarks for Nyström, the default rank from d_λ
    estimated on a 1 024-row sample) and applied to the dense K; the last
    columns give the reference points: the rank-512 preconditioner from K's
    exact top eigenvectors (the best any rank-512 preconditioner can do) and
    the exact statistical dimension.
    """
    rows = [_precond_row(*case) for case in cases]
    print("## 4. CG iterations to 1e-6 by preconditioner (default ranks from the estimated "
          "d_λ; '+': max_iter reached)\n")
    _table(rows, ["problem", "n", "d_λ", "d_λ est.", "none", "sketch RFF 256",
                  "sketch default", "Nystrom 512", "Nystrom default", "ideal rank 512"])
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    ap.add_argument("--cluster", default=None, help="cluster spec for table 2 (default: local)")
    ap.add_argument("--only", choices=["accuracy", "large", "cg"], default=None,
                    help="run one table only")
    ap.add_argument("--n", type=int, default=None, help="rows of the large fit (table 2)")
    ap.add_argument("--m", type=int, default=None, help="RFF features of the large fit (table 2)")
    args = ap.parse_args()
    import numpy
    import scipy
    import sklearn

    import distsketch

    print(f"# bench_krr — {platform.node()} — {_cpu()}, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, scipy {scipy.__version__}, "
          f"scikit-learn {sklearn.__version__}, distsketch {distsketch.__version__}\n")
    quick = args.quick
    if args.only in (None, "accuracy"):
        accuracy_vs_time(*((3000, 2000) if quick else (10_000, 5000)), gamma=2.0, lam=1e-3)
    if args.only in (None, "large"):
        n = args.n or (100_000 if quick else 1_000_000)
        m = args.m or (1024 if quick else 4096)
        # blocks sized so one task's features (rows × m float64) stay within the task budget
        large_fit(n, m, max(5_000, (25_000 if quick else 50_000) * 1024 // max(m, 1024)), args.cluster)
    if args.only in (None, "cg"):
        cg_counts([500, 1000, 2000] if quick else [1000, 2000, 4000, 8000], gamma=0.1, lam=1e-3)
        n4, n5 = (1500, 2000) if quick else (4000, 5000)
        rng = np.random.default_rng(0)
        X2 = rng.normal(size=(n4, 2))
        X8 = rng.normal(size=(n5, 8))
        preconditioner_counts([
            # issue 16: γ = 2, λ = 1e-3 on this benchmark's data (8 uniform inputs)
            ("uniform d=8, γ=2", *_data(n4, seed=1), 2.0, 1e-3),
            # the same γ and λ on 2 normal inputs, where d_λ is far below n
            ("normal d=2, γ=2", X2, np.sin(X2[:, 0]) + np.cos(X2[:, 1]), 2.0, 1e-3),
            # issue 13: the README's KernelSolver(gamma=0.5, alpha=1e-3, nystrom, 512)
            ("normal d=8, γ=0.5", X8, np.sin(X8[:, 0]) + np.cos(X8[:, 1]), 0.5, 1e-3),
        ])


if __name__ == "__main__":
    main()
