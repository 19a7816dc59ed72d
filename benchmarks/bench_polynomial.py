"""Throughput of the polynomial sketches against the transform bound and scikit-learn.

Run:  python benchmarks/bench_polynomial.py [--quick]

Tables printed:

1. TensorSketch / PolySketch rows/s on dense data vs the bound measured in the
   same run: the FFTs (TensorSketch: q rfft + 1 irfft of length m per row) or
   the Hadamard transforms (PolySketch/SRHT base: one length-D leaf transform
   and two length-2^⌈log2 m⌉ transforms per squaring) timed alone with
   scipy.fft on the same shapes.  ratio = bound time / sketch time (1 = only
   the transforms cost anything; target >= 0.5).
2. The same data through scikit-learn's PolynomialCountSketch (same degree,
   m): time ratio sklearn / distsketch, one thread each.
3. PolySketch vs TensorSketch time as the degree p grows at fixed m
   (plot saved to benchmarks/out/poly_degree.png).
4. Sparse input: TensorSketch time at 1 % vs 100 % density, against nnz.

All runs pin BLAS and FFTs to one thread and use dask's synchronous
scheduler, so numbers are per core.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import dask
import numpy as np
import scipy
import scipy.fft
import scipy.sparse as sp


def _best(fn, repeat: int = 3) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _cpu() -> str:
    from distsketch.diagnostics import cpu_model

    return cpu_model()


def _fft_bound(n: int, m: int, q: int, dtype, block: int = 2048) -> float:
    """q rfft + 1 irfft of length m over n rows of fresh (not cache-resident) data, blocked."""
    C = np.random.default_rng(0).normal(size=(n, m)).astype(dtype)

    def run():
        for a in range(0, n, block):
            P = scipy.fft.rfft(C[a:a + block], axis=1)
            for _ in range(q - 1):
                P *= scipy.fft.rfft(C[a:a + block], axis=1)
            scipy.fft.irfft(P, n=m, axis=1)

    return _best(run)


def _hadamard_bound(n: int, d: int, m: int, p: int, dtype, kind: str, block: int = 4096) -> float:
    """Transforms PolySketch (SRHT base) cannot avoid: one length-D leaf + 2 per degree-2 sketch.

    kind "fwht": distsketch's Walsh–Hadamard kernel alone; "fft": scipy.fft rfft of the same lengths
    (what an FWHT as fast as pocketfft would cost).
    """
    from distsketch.ops.hadamard import fwht, next_pow2

    D, Dm = next_pow2(d), next_pow2(m)
    n_pairs = (p.bit_length() - 1) + (bin(p).count("1") - 1)
    A = np.random.default_rng(0).normal(size=(n, D)).astype(dtype)
    B = np.random.default_rng(1).normal(size=(n, Dm)).astype(dtype)
    tr = (lambda Y: fwht(Y.copy())) if kind == "fwht" else (lambda Y: scipy.fft.rfft(Y, axis=1))

    def run():
        for a in range(0, n, block):
            tr(A[a:a + block])
            for _ in range(2 * n_pairs):
                tr(B[a:a + block])

    return _best(run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "out"))
    args = ap.parse_args()

    from sklearn.kernel_approximation import PolynomialCountSketch

    from distsketch import PolySketch, TensorSketch

    n = 20_000 if args.quick else 100_000
    d, m, q = 256, 1024, 3
    dtype = np.float32
    X = (np.random.default_rng(0).normal(size=(n, d)) / np.sqrt(d)).astype(dtype)
    dask.config.set(scheduler="synchronous")

    print("# distsketch polynomial sketch benchmark")
    print(f"machine: {_cpu()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
          f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}; "
          "1 thread")
    print(f"data: n={n}, d={d}, float32 dense; m={m}; command: {' '.join(sys.argv)}\n")

    rows = []
    ts = TensorSketch(degree=q, coef0=1.0, n_components=m, random_state=0).fit(X)
    t_ts = _best(lambda: ts.transform(X))
    b_ts = _fft_bound(n, m, q, dtype)
    rows.append(("TensorSketch q=3", t_ts, b_ts, "FFT"))
    ps = PolySketch(degree=q, coef0=1.0, n_components=m, random_state=0).fit(X)
    t_ps = _best(lambda: ps.transform(X))
    rows.append(("PolySketch p=3 (srht)", t_ps, _hadamard_bound(n, d + 1, m, q, dtype, "fwht"),
                 "FWHT kernel"))
    rows.append(("PolySketch p=3 (srht)", t_ps, _hadamard_bound(n, d + 1, m, q, dtype, "fft"),
                 "rfft, FWHT sizes"))
    pst = PolySketch(degree=q, coef0=1.0, n_components=m, base="tensorsketch", random_state=0).fit(X)
    t_pst = _best(lambda: pst.transform(X))
    n_pairs = (q.bit_length() - 1) + (bin(q).count("1") - 1)
    b_pst = n_pairs * _fft_bound(n, m, 2, dtype)
    rows.append(("PolySketch p=3 (tensorsketch)", t_pst, b_pst, "FFT"))

    print("## 1. throughput vs transform bound (dense float32)\n")
    print("| sketch | time (s) | Mrows/s | bound (s) | bound kind | bound/time |")
    print("|---|---:|---:|---:|---|---:|")
    for name, t, b, kind in rows:
        print(f"| {name} | {t:.3f} | {n / t / 1e6:.3f} | {b:.3f} | {kind} | {b / t:.2f} |")

    print("\n## 2. vs scikit-learn PolynomialCountSketch (same n, d, m, degree 3, coef0 1)\n")
    sk = PolynomialCountSketch(degree=q, coef0=1.0, gamma=1.0, n_components=m, random_state=0).fit(X)
    t_sk = _best(lambda: sk.transform(X))
    print("| implementation | time (s) | Mrows/s | sklearn time / this |")
    print("|---|---:|---:|---:|")
    print(f"| sklearn PolynomialCountSketch | {t_sk:.3f} | {n / t_sk / 1e6:.3f} | 1.00 |")
    print(f"| distsketch TensorSketch | {t_ts:.3f} | {n / t_ts / 1e6:.3f} | {t_sk / t_ts:.2f} |")
    print(f"| distsketch PolySketch (srht) | {t_ps:.3f} | {n / t_ps / 1e6:.3f} | {t_sk / t_ps:.2f} |")

    print("\n## 3. time vs degree p at fixed m (dense float32)\n")
    n3 = n // 4
    X3 = X[:n3]
    degrees = [2, 4, 8, 16, 32] if args.quick else [2, 4, 8, 16, 32, 64]
    res = []
    print("| p | TensorSketch (s) | PolySketch srht (s) | PolySketch tensorsketch (s) |")
    print("|---:|---:|---:|---:|")
    for p in degrees:
        a = TensorSketch(degree=p, n_components=m, random_state=0).fit(X3)
        b = PolySketch(degree=p, n_components=m, random_state=0).fit(X3)
        c = PolySketch(degree=p, n_components=m, base="tensorsketch", random_state=0).fit(X3)
        ta, tb, tc = (_best(lambda e=e: e.transform(X3), repeat=2) for e in (a, b, c))
        res.append((p, ta, tb, tc))
        print(f"| {p} | {ta:.3f} | {tb:.3f} | {tc:.3f} |")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        r = np.array(res)
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(r[:, 0], r[:, 1], "o-", label="TensorSketch")
        ax.plot(r[:, 0], r[:, 2], "s-", label="PolySketch (SRHT/TensorSRHT)")
        ax.plot(r[:, 0], r[:, 3], "^-", label="PolySketch (CountSketch/TensorSketch)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("degree p")
        ax.set_ylabel(f"seconds for {n3} rows (d={d}, m={m})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "poly_degree.png", dpi=120)
        print(f"\nplot: {out / 'poly_degree.png'}")
    except ImportError:
        print("\n(matplotlib missing: no plot)")

    print("\n## 4. sparse input: time vs nnz (TensorSketch q=3, CSR float32)\n")
    ds = 10_000
    ns = n // 10
    print("| density | nnz | time (s) | ns per nnz |")
    print("|---:|---:|---:|---:|")
    for dens in (0.01, 1.0):
        Xs = sp.random(ns, ds, density=dens, format="csr", dtype=np.float32, random_state=0)
        est = TensorSketch(degree=q, n_components=m, random_state=0).fit(Xs)
        t = _best(lambda est=est, Xs=Xs: est.transform(Xs), repeat=2)
        print(f"| {dens:.2f} | {Xs.nnz} | {t:.3f} | {1e9 * t / Xs.nnz:.1f} |")


if __name__ == "__main__":
    main()
