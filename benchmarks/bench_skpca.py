"""Streaming kernel PCA (SKPCA: RFF + Frequent Directions) out of core on the default
local cluster, against the time of only reading the store and of reading plus the
RFF map, and against scikit-learn RBFSampler + PCA(randomized) in memory.

For each n: a RandomNoisy store of n × 100 float32 (Zarr, LZ4) is written, then
on ``distsketch.cluster.connect()`` (one worker process per core):

* read only: sum of the store;
* read + RFF map (m = 1024): sum of the features;
* SKPCA fit (m = 1024, ℓ = 64, k = 10) of the store.

All three read the store through ``open_array(path, block_rows=50_000)``.

Peak memory is the largest summed RSS of this process and all its children
(the workers), sampled every 20 ms by a thread with psutil.  Kernel errors
(paper's normalisation, spectral/n and Frobenius/n²) are on 2000 sampled rows.

Usage::

    python benchmarks/bench_skpca.py --quick      # n = 1e5; sklearn at 1e5
    python benchmarks/bench_skpca.py              # n = 1e5, 1e6; sklearn at 1e6
    python benchmarks/bench_skpca.py --full       # adds n = 1e7 (4 GB store)
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil


class PeakRSS:
    """Peak summed RSS of this process tree while the context is active."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()

    def _sample(self) -> int:
        me = psutil.Process(os.getpid())
        total = 0
        for p in [me, *me.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        self.peak = self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._sample())


def machine() -> str:
    from distsketch.diagnostics import cpu_model

    cpu = cpu_model()
    return (f"{cpu}; {os.cpu_count()} logical cores; "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM; Python "
            f"{platform.python_version()}; NumPy {np.__version__}")


class SklearnKPCA:
    """RBFSampler + PCA as an object with ``kernel_approx``.

    PCA centres the features, so the kernel is approximated through the PCA
    reconstruction r(x) = μ + (z(x) − μ) VₖᵀVₖ (rank k + 1, the mean kept):
    G̃(A, B) = r(A) r(B)ᵀ.
    """

    def __init__(self, rbf, pca):
        self.rbf, self.pca = rbf, pca

    def _embed(self, A):
        mu = self.pca.mean_.astype(np.float64)
        V = self.pca.components_.astype(np.float64)
        Z = self.rbf.transform(A).astype(np.float64)
        return mu + ((Z - mu) @ V.T) @ V

    def kernel_approx(self, A, B=None):
        EA = self._embed(A)
        return EA @ (EA if B is None else self._embed(B)).T


def _rff_block_sum(block, W, b, block_info=None):
    """Read + RFF map of one block, 2048 rows at a time into a reused buffer (as SKPCA
    maps them), reduced to one number so nothing large leaves the task."""
    from distsketch.ops.rff import rff_map

    start = block_info[0]["array-location"][0][0]
    buf = np.empty((2048, W.shape[1]), dtype=np.float32)
    total = 0.0
    for a in range(0, block.shape[0], 2048):
        part = block[a:a + 2048]
        Z = rff_map(part, W, b, start + a, out=buf[: part.shape[0]])
        total += float(Z[:, 0].sum())
    return np.full((1, 1), total)


def timed(f):
    with PeakRSS() as mem:
        t = time.perf_counter()
        out = f()
        dt = time.perf_counter() - t
    return out, dt, mem.peak


def gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="n = 1e5 only; sklearn at 1e5")
    ap.add_argument("--full", action="store_true", help="add n = 1e7 (4 GB store)")
    ap.add_argument("--sizes", type=str, default=None, help="comma-separated n values")
    ap.add_argument("--sklearn-n", type=int, default=None, help="rows for the sklearn run (0: skip)")
    ap.add_argument("--workdir", type=str, default=None, help="where the stores go (default tmp)")
    args = ap.parse_args()
    if args.sizes:
        sizes = [int(float(s)) for s in args.sizes.split(",")]
    else:
        sizes = [100_000] if args.quick else [100_000, 1_000_000]
        if args.full:
            sizes.append(10_000_000)
    sk_n = args.sklearn_n if args.sklearn_n is not None else (100_000 if args.quick else 1_000_000)
    d, m, ell, k = 100, 1024, 64, 10
    gamma = 1.0 / d

    from threadpoolctl import threadpool_limits

    from distsketch import RandomFourierFeatures, StreamingKernelPCA
    from distsketch.cluster import connect
    from distsketch.datasets import make_random_noisy_zarr
    from distsketch.graph import compute
    from distsketch.io import open_array
    from distsketch.metrics import kernel_errors

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-skpca-"))
    work.mkdir(parents=True, exist_ok=True)
    rows_out = []
    sk_row = None
    try:
        with connect() as client:
            nworkers = len(client.scheduler_info()["workers"])
            for n in sorted(set(sizes) | ({sk_n} if sk_n else set())):
                path = work / f"rn-{n}.zarr"
                if not path.exists():
                    make_random_noisy_zarr(path, n, d, chunk_rows=min(50_000, n),
                                           random_state=0, progress=False)
                # 50k-row blocks (the Zarr chunk) so that every size keeps both workers busy
                X = open_array(path, block_rows=50_000)
                _, t_read, mem_read = timed(lambda X=X: compute(X.sum(), progress=False))
                rff = RandomFourierFeatures(gamma=gamma, n_components=m, random_state=0).fit(X)
                W, b = client.scatter([rff.random_weights_, rff.random_offset_], broadcast=True)
                mapped = X.map_blocks(_rff_block_sum, W, b, chunks=(1, 1), dtype=np.float64)
                _, t_map, mem_map = timed(
                    lambda mapped=mapped: compute(mapped.sum(), progress=False))
                model, t_fit, mem_fit = timed(lambda X=X: StreamingKernelPCA(
                    n_components=k, n_random_features=m, sketch_size=ell, gamma=gamma,
                    random_state=0).fit(X))
                err = kernel_errors(X, model, "rbf", gamma=gamma, n_sample=2000)
                if n in sizes:
                    rows_out.append((n, t_read, t_map, t_fit, mem_read, mem_map, mem_fit, err))
                if n == sk_n:
                    sk_row = {"n": n, "skpca_time": t_fit, "skpca_mem": mem_fit, "skpca_err": err,
                              "path": path}
        if sk_row is not None:
            from sklearn.decomposition import PCA
            from sklearn.kernel_approximation import RBFSampler

            path = sk_row["path"]

            def sk_fit():
                Xn = np.asarray(open_array(path).compute())
                rbf = RBFSampler(gamma=gamma, n_components=m, random_state=0)
                Z = rbf.fit_transform(Xn)
                pca = PCA(n_components=k, svd_solver="randomized", random_state=0).fit(Z)
                return SklearnKPCA(rbf, pca)

            # sklearn uses both cores through BLAS; no per-task pinning
            with threadpool_limits(limits=os.cpu_count()):
                sk_model, t_sk, mem_sk = timed(sk_fit)
            Xs = open_array(path)
            sk_err = kernel_errors(Xs, sk_model, "rbf", gamma=gamma, n_sample=2000)
            sk_row.update(sk_time=t_sk, sk_mem=mem_sk, sk_err=sk_err)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    print(f"# SKPCA out of core: RandomNoisy n x {d} float32 (Zarr, LZ4, 50k-row chunks), "
          f"m={m}, l={ell}, k={k}, gamma=1/d")
    print(f"# default local cluster: {nworkers} worker processes x 1 thread")
    print(f"# machine: {machine()}")
    print(f"# 1-min load average at end: {os.getloadavg()[0]:.2f}")
    print("| n | read s | read+RFF s | SKPCA fit s | rows/s | fit/(read+RFF) | peak RSS read | "
          "peak RSS read+RFF | peak RSS fit | spectral err | Frobenius err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, t_read, t_map, t_fit, mr, mm, mf, err in rows_out:
        print(f"| {n:,} | {t_read:.2f} | {t_map:.2f} | {t_fit:.2f} | {n / t_fit:,.0f} | "
              f"{t_fit / t_map:.2f} | {gib(mr)} | {gib(mm)} | {gib(mf)} | "
              f"{err['spectral']:.4f} | {err['frobenius']:.2e} |")
    if sk_row is not None:
        print(f"\n# vs scikit-learn at n={sk_row['n']:,} (in memory: load + RBFSampler({m}) + "
              f"PCA({k}, randomized))")
        print("| method | wall s | peak RSS (process tree) | spectral err | Frobenius err |")
        print("|---|---|---|---|---|")
        for name, t, mem, e in (("distsketch SKPCA (Zarr store, local cluster)", sk_row["skpca_time"],
                                 sk_row["skpca_mem"], sk_row["skpca_err"]),
                                ("sklearn RBFSampler + PCA", sk_row["sk_time"], sk_row["sk_mem"],
                                 sk_row["sk_err"])):
            print(f"| {name} | {t:.2f} | {gib(mem)} | {e['spectral']:.4f} | {e['frobenius']:.2e} |")
        print(f"\nwall-time ratio sklearn/SKPCA: {sk_row['sk_time'] / sk_row['skpca_time']:.2f}; "
              f"peak-memory ratio sklearn/SKPCA: {sk_row['sk_mem'] / sk_row['skpca_mem']:.2f}")


if __name__ == "__main__":
    main()
