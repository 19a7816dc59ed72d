"""MEKA vs the Nyström family and RFF: kernel error against stored memory, and fit
time / peak memory at scale.

Part 1 (the MEKA paper's Table 2 / Figure 3 shape): relative kernel error
‖G − G̃‖_F/‖G‖_F against the bytes of the stored approximation (n × r float64
features for Nyström variants and RFF; basis + link matrix + landmarks and maps
for MEKA) on scikit-learn's digits and a synthetic clustered set, with the
Gaussian kernel at a large γ.  Baselines: standard Nyström (uniform landmarks),
k-means Nyström, ensemble Nyström, randomized-SVD Nyström, random Fourier
features.  A PNG plot is written to benchmarks/out/.

Part 2: fit on an n × 50 float32 Zarr store (n = 10⁶; 2·10⁵ with --quick):
MEKA (out of core, the basis recomputable or written to Zarr), standard
Nyström of equal memory (fit + n × r features), and scikit-learn's Nystroem on
the in-memory array.  Times are compared with the measured read time of one
pass over the store and with the measured GEMM rate; peak memory is the
largest RSS increase of this process during the call (sampled every 5 ms).

Usage::

    python benchmarks/bench_meka.py            # full: n = 1e6 in part 2
    python benchmarks/bench_meka.py --quick    # small run
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

OUT = Path(__file__).resolve().parent / "out"


def machine() -> str:
    from distsketch.diagnostics import cpu_model

    cpu = cpu_model()
    import dask
    import sklearn

    mem = psutil.virtual_memory().total / 2**30
    return (f"{cpu}; {os.cpu_count()} logical cores; {mem:.0f} GiB RAM; Python "
            f"{platform.python_version()}; NumPy {np.__version__}; dask {dask.__version__}; "
            f"scikit-learn {sklearn.__version__}")


class PeakRSS:
    """Largest RSS increase of this process while the block runs."""

    def __enter__(self) -> PeakRSS:
        self.proc = psutil.Process()
        self.base = self.proc.memory_info().rss
        self.peak = self.base
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.t0 = time.perf_counter()
        return self

    def _run(self) -> None:
        while not self.stop:
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.stop = True
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)
        self.mib = (self.peak - self.base) / 2**20


def clustered(n: int, d: int, c: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    C = rng.normal(scale=2.0, size=(c, d))
    lab = rng.integers(0, c, size=n)
    return C[lab] + rng.normal(size=(n, d))


def error_vs_memory(name: str, X: np.ndarray, gamma: float, c: int, ranks: list[int],
                    n_sample: int | None) -> list[dict]:
    from distsketch import MEKA, NystromFeatures, RandomFourierFeatures
    from distsketch.metrics import relative_kernel_error

    n = X.shape[0]
    rows = []
    for k in ranks:
        mk = MEKA(n_clusters=c, rank=k, gamma=gamma, random_state=0).fit(X)
        mem = mk.approximation_bytes()
        r = max(2, round(mem / (8 * n)))
        methods = {
            "MEKA": mk,
            "Nys": NystromFeatures(gamma=gamma, n_landmarks=2 * r, rank=r, random_state=0),
            "KNys": NystromFeatures(gamma=gamma, n_landmarks=r, landmarks="kmeans", random_state=0),
            "ENys": NystromFeatures(gamma=gamma, n_landmarks=2 * r, rank=max(1, r // 4),
                                    variant="ensemble", n_ensemble=4, random_state=0),
            "RNys": NystromFeatures(gamma=gamma, n_landmarks=2 * r, rank=r, variant="randomized",
                                    random_state=0),
            "RFF": RandomFourierFeatures(gamma=gamma, n_components=r, random_state=0),
        }
        for label, est in methods.items():
            if label != "MEKA":
                est.fit(X)
            nbytes = mem if label == "MEKA" else 8 * n * est.n_output_features_
            err = relative_kernel_error(X, est, gamma=gamma, n_sample=n_sample)
            rows.append({"data": name, "k": k, "method": label, "MiB": nbytes / 2**20, "error": err})
    return rows


def gemm_gflops() -> float:
    from threadpoolctl import threadpool_limits

    A = np.random.default_rng(0).normal(size=(2048, 512))
    B = np.random.default_rng(1).normal(size=(512, 512))
    with threadpool_limits(limits=1):
        t = min(_timed(lambda: A @ B) for _ in range(3))
    return 2 * 2048 * 512 * 512 / t / 1e9


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def _measure(fn, repeat: int) -> tuple[float, float, object]:
    """(seconds, peak RSS increase MiB, result) of the fastest of ``repeat`` runs."""
    best = None
    for _ in range(repeat):
        with PeakRSS() as pm:
            out = fn()
        if best is None or pm.seconds < best[0]:
            best = (pm.seconds, pm.mib, out)
    return best


def scale_run(n: int, d: int, c: int, k: int, gamma: float, workdir: Path,
              repeat: int = 1) -> list[dict]:
    import dask.array as da
    from sklearn.kernel_approximation import Nystroem

    from distsketch import MEKA, NystromFeatures
    from distsketch.io import create_array, open_array, write_manifest
    from distsketch.metrics import relative_kernel_error

    path = workdir / "X.zarr"
    chunk = 50_000
    arr = create_array(path, (n, d), np.float32, chunk_rows=chunk, compressor=None)
    for s in range(0, n, chunk):
        arr[s:s + chunk] = clustered(min(chunk, n - s), d, c, seed=s).astype(np.float32)
    write_manifest(path, {"kind": "array"})
    Xd = open_array(str(path))
    read_s = min(_timed(lambda: da.sum(Xd).compute()) for _ in range(2))
    gflops = gemm_gflops()
    rows = []
    s, mib, mk = _measure(lambda: MEKA(n_clusters=c, rank=k, gamma=gamma, random_state=0).fit(str(path)),
                          repeat)
    rows.append({"method": f"MEKA fit (c={c}, k={k}), out of core", "s": s, "MiB": mib, "passes": 2})
    s, mib, _ = _measure(lambda: MEKA(n_clusters=c, rank=k, gamma=gamma, random_state=0,
                                      basis_path=str(workdir / "W.zarr")).fit(str(path)), repeat)
    rows.append({"method": "MEKA fit + basis written to Zarr", "s": s, "MiB": mib, "passes": 3})
    r = max(2, round(mk.approximation_bytes() / (8 * n)))

    def nystrom():
        from distsketch.io import write_array

        ny = NystromFeatures(gamma=gamma, n_landmarks=2 * r, rank=r, random_state=0).fit(str(path))
        write_array(ny.transform(Xd), workdir / "Z.zarr", overwrite=True)
        return ny

    s, mib, ny = _measure(nystrom, repeat)
    flops = 2.0 * n * (2 * r) * (d + r)
    rows.append({"method": f"Nystrom (m={2 * r}, r={r}) fit + features to Zarr", "s": s,
                 "MiB": mib, "passes": 2, "gemm_s": flops / (gflops * 1e9)})
    X = np.asarray(Xd.compute())
    s, mib, _ = _measure(lambda: Nystroem(gamma=gamma, n_components=r, random_state=0).fit(X).transform(X),
                         repeat)
    rows.append({"method": f"sklearn Nystroem (m={r}) fit + transform, in memory", "s": s,
                 "MiB": mib, "passes": 1, "gemm_s": 2.0 * n * r * (d + r) / (gflops * 1e9)})
    err_m = relative_kernel_error(X, mk, gamma=gamma, n_sample=3000)
    err_n = relative_kernel_error(X, ny, gamma=gamma, n_sample=3000)
    for row in rows:
        row["read_s"] = read_s
    rows.append({"method": f"errors on 3000 sampled rows: MEKA {err_m:.4f}, Nystrom {err_n:.4f}",
                 "s": float("nan"), "MiB": float("nan"), "passes": 0, "read_s": read_s})
    print(f"one read pass over the {n * d * 4 / 2**20:.0f} MiB store: {read_s:.2f} s; "
          f"float64 GEMM (1 thread): {gflops:.1f} GFLOP/s")
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["data"] for r in rows})
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4))
    for ax, name in zip(np.atleast_1d(axes), datasets, strict=True):
        for method in ["MEKA", "Nys", "KNys", "ENys", "RNys", "RFF"]:
            pts = [(r["MiB"], r["error"]) for r in rows if r["data"] == name and r["method"] == method]
            if pts:
                xs, ys = zip(*sorted(pts), strict=True)
                ax.plot(xs, ys, marker="o", label=method)
        ax.set_xlabel("stored approximation (MiB)")
        ax.set_ylabel("relative kernel error")
        ax.set_title(name)
        ax.set_yscale("log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small run")
    ap.add_argument("--rows", type=int, default=None, help="rows of the part-2 store")
    ap.add_argument("--skip-scale", action="store_true", help="only part 1")
    ap.add_argument("--repeat", type=int, default=1, help="part 2: best of this many runs")
    args = ap.parse_args()
    from sklearn.datasets import load_digits

    from distsketch.graph import blas_single_thread

    print(machine())
    OUT.mkdir(parents=True, exist_ok=True)
    digits = load_digits().data / 16.0
    synth = clustered(3000 if args.quick else 10000, 10, 10, seed=1)
    ranks = [8, 16, 32] if args.quick else [8, 16, 32, 64]
    rows = []
    with blas_single_thread():
        rows += error_vs_memory("digits (n=1797, d=64, gamma=0.5, c=5)", digits, 0.5, 5, ranks, None)
        rows += error_vs_memory(f"clustered (n={synth.shape[0]}, d=10, gamma=0.1, c=10)", synth, 0.1,
                                10, ranks, 3000)
    print("\n## Relative kernel error vs stored memory\n")
    print("| data | k | method | MiB | rel. error | error / MEKA error |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ref = next(x["error"] for x in rows if x["data"] == r["data"] and x["k"] == r["k"]
                   and x["method"] == "MEKA")
        print(f"| {r['data']} | {r['k']} | {r['method']} | {r['MiB']:.2f} | {r['error']:.4f} | "
              f"{r['error'] / ref:.2f} |")
    plot(rows, OUT / "meka_error_vs_memory.png")
    print(f"\nplot: {OUT / 'meka_error_vs_memory.png'}")
    if args.skip_scale:
        return
    n = args.rows or (200_000 if args.quick else 1_000_000)
    work = Path(tempfile.mkdtemp(prefix="bench-meka-"))
    try:
        srows = scale_run(n, 50, 10, 32, 0.005, work, repeat=args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n## Fit at n = {n} x 50 (float32 Zarr store)\n")
    print("| method | seconds | peak RSS increase (MiB) | s / (passes x read pass) | GEMM-bound s |")
    print("|---|---|---|---|---|")
    for r in srows:
        if r["passes"] == 0:
            print(f"| {r['method']} | | | | |")
            continue
        gemm = f"{r['gemm_s']:.2f}" if "gemm_s" in r else "-"
        print(f"| {r['method']} | {r['s']:.2f} | {r['MiB']:.0f} | "
              f"{r['s'] / (r['passes'] * r['read_s']):.1f} | {gemm} |")


if __name__ == "__main__":
    main()
