"""Fast sketching of polynomial kernels of polynomial degree (Song, Woodruff, Yu,
Zhang, ICML 2021).  The paper has no experiments; its headline claims are
measured instead:

1. Table 1 / Theorem 5.1: the recursive-squaring sketch (``PolySketch``,
   SRHT leaves + TensorSRHT squarings) keeps its accuracy as the degree p
   grows, where TensorSketch's variance grows exponentially in p (and plain
   TensorSRHT's too): relative error ‖G − ZZᵀ‖_F/‖G‖_F of the kernel ⟨x, y⟩^p
   on unit-norm digits rows against p, at fixed sketch size m.
2. Algorithm 2 / Theorem D.1: a sketch preconditioner makes CG on
   (K + λI)α = y converge in few iterations: iterations of
   ``KernelSolver`` with no preconditioner, the sketch preconditioner and the
   Nyström preconditioner, for a polynomial and a Gaussian kernel.

Exact references: the Gram matrix by NumPy; CG residuals as the solver
reports them (relative residual 1e-6).

Run:  python benchmarks/papers/polynomial.py [--quick] [--out DIR] [--write-doc]
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    DocCheck,
    Report,
    md_table,
    parse_args,
    publish,
    relative_frobenius,
    save_plot,
    section_checks,
    timed,
)


def unit_digits(n: int) -> np.ndarray:
    from sklearn.datasets import load_digits

    X = load_digits().data[:n].astype(np.float64)
    X -= X.mean(axis=0)     # centred so that ⟨x, y⟩^p is not close to 1 everywhere
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def degree_sweep(X: np.ndarray, degrees: list[int], sizes: list[int], seeds: list[int]) -> list[dict]:
    from distsketch import PolySketch, TensorSketch, TensorSRHT

    rows = []
    for p in degrees:
        G = (X @ X.T) ** p
        for m in sizes:
            for name, cls in (("PolySketch (recursive squaring)", PolySketch), ("TensorSketch", TensorSketch),
                              ("TensorSRHT", TensorSRHT)):
                errs, secs = [], []
                for s in seeds:
                    sec, Z = timed(lambda cls=cls, p=p, m=m, s=s: np.asarray(
                        cls(n_components=m, degree=p, gamma=1.0, coef0=0.0, random_state=s).fit_transform(X),
                        dtype=np.float64))
                    errs.append(relative_frobenius(G, Z @ Z.T))
                    secs.append(sec)
                rows.append({"p": p, "m": m, "method": name, "error": float(np.median(errs)),
                             "max error": float(np.max(errs)), "s": float(np.median(secs))})
    return rows


FULL_ROWS, FULL_SEEDS = 1000, [0, 1, 2]     # the full run's digits rows and sketch seeds


def add_degree_table(rep: Report, rows: list[dict], n: int, seeds: list[int]) -> None:
    """The degree sweep's table as the full run prints it."""
    rep.add(f"Relative kernel error ‖G − ZZᵀ‖_F/‖G‖_F of ⟨x, y⟩^p, digits ({n} unit rows, "
            f"median of {len(seeds)} seeds)",
            md_table(["p", "m", "sketch", "median error", "max error", "transform s"],
                     [[r["p"], r["m"], r["method"], r["error"], r["max error"], r["s"]] for r in rows]))


def doc_check() -> list[DocCheck]:
    """The full run's degree-sweep rows at p = 2, m = 1024 (seconds): same rows and seeds."""
    rep = Report("polynomial", "check", "check")
    rows = degree_sweep(unit_digits(FULL_ROWS), [2], [1024], FULL_SEEDS)
    add_degree_table(rep, rows, FULL_ROWS, FULL_SEEDS)
    return section_checks(rep, keys=["p", "m", "sketch"], timed=["transform s"])


def cg_iterations(quick: bool) -> list[dict]:
    from sklearn.datasets import load_digits

    from distsketch import KernelSolver

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    # each CG iteration is one pass of kernel tiles: a quick run keeps n and the cap small
    n, max_iter = (300, 100) if quick else (1000, 300)
    X, y = X[:n], y[:n]
    y = (y - y.mean()) / y.std()
    d = X.shape[1]
    kernels = [("polynomial p=3", {"kernel": "polynomial", "degree": 3, "gamma": 1.0 / d, "coef0": 1.0}),
               ("Gaussian", {"kernel": "rbf", "gamma": 2.0 / d})]
    # λ = 1e-3: d_λ is above n/2, where no sketch of at most n features can reach 2·d_λ and the
    # default drops it; λ = 0.1: d_λ ≈ n/7 … n/5, the regime of Algorithm 2 (m ≫ d_λ)
    lams = [1e-1] if quick else [1e-3, 1e-1]
    rows = []
    for (label, kern), lam in ((k, lam) for k in kernels for lam in lams):
        # preconditioner_size=None: both preconditioners sized from the estimated d_λ
        for pre in (None, "sketch", "nystrom"):
            est = KernelSolver(alpha=lam, preconditioner=pre, max_iter=max_iter, tol=1e-6, random_state=0,
                               **kern)
            with warnings.catch_warnings():
                # plain CG is expected to stop at max_iter here: the table reports it
                warnings.simplefilter("ignore", RuntimeWarning)
                sec, _ = timed(lambda est=est: est.fit(X, y))
            rows.append({"kernel": label, "λ": lam, "n": X.shape[0], "max_iter": max_iter,
                         "preconditioner": pre or "none",
                         "d_λ": est.statistical_dimension_ if pre else None,
                         "rank": est.preconditioner_rank_, "iterations": est.n_iter_,
                         "converged": est.converged_, "final residual": float(est.residuals_[-1]), "s": sec})
    return rows


def main(argv: Sequence[str] | None = None) -> Report:
    args = parse_args(__doc__.splitlines()[0], argv)
    t0 = time.perf_counter()
    rep = Report("polynomial", "Polynomial sketches of high degree (Song, Woodruff, Yu, Zhang 2021)",
                 "python benchmarks/papers/polynomial.py" + (" --quick" if args.quick else ""))
    if args.quick:
        X, degrees, sizes, seeds = unit_digits(200), [2, 8], [256], [0]
    else:
        X, degrees, sizes, seeds = unit_digits(FULL_ROWS), [2, 4, 8, 16], [1024, 4096], FULL_SEEDS
    rows = degree_sweep(X, degrees, sizes, seeds)
    add_degree_table(rep, rows, X.shape[0], seeds)
    pmax = max(degrees)
    for m in sizes:
        e = {r["method"]: r["error"] for r in rows if r["p"] == pmax and r["m"] == m}
        ps, ts, tr = e["PolySketch (recursive squaring)"], e["TensorSketch"], e["TensorSRHT"]
        rep.claim(f"p = {pmax}, m = {m}: recursive squaring is more accurate than TensorSketch and "
                  "TensorSRHT at high degree", ps < ts and ps < tr,
                  f"PolySketch {ps:.3f}, TensorSketch {ts:.3f}, TensorSRHT {tr:.3f}")
        grow = {name: [r["error"] for r in sorted(rows, key=lambda r: r["p"])
                       if r["m"] == m and r["method"] == name] for name in e}
        g_ps = grow["PolySketch (recursive squaring)"][-1] / grow["PolySketch (recursive squaring)"][0]
        g_ts = grow["TensorSketch"][-1] / grow["TensorSketch"][0]
        rep.claim(f"m = {m}: the recursive-squaring error grows more slowly with p than TensorSketch's",
                  g_ps < g_ts, f"error ratio p = {pmax} / p = {min(degrees)}: PolySketch {g_ps:.2f}×, "
                  f"TensorSketch {g_ts:.2f}×")
    cg = cg_iterations(args.quick)
    rep.add(f"CG iterations for (K + λI)α = y (digits, relative residual 1e-6, at most {cg[0]['max_iter']})",
            md_table(list(cg[0].keys()), [list(r.values()) for r in cg]))
    for kern, lam in sorted({(r["kernel"], r["λ"]) for r in cg}):
        it = {r["preconditioner"]: r for r in cg if r["kernel"] == kern and r["λ"] == lam}
        sk, ny, no = it["sketch"], it["nystrom"], it["none"]
        counts = (f"none {no['iterations']}, sketch {sk['iterations']} (rank {sk['rank']}, converged "
                  f"{sk['converged']}), Nyström {ny['iterations']} (rank {ny['rank']}); "
                  f"d_λ ≈ {sk['d_λ']:.0f}")
        if sk["rank"] == 0:
            rep.claim(f"{kern}, λ = {lam:g}: d_λ too large for a sketch of at most n features, so the "
                      "default drops it (plain CG) and the Nyström preconditioner converges",
                      ny["converged"] and ny["iterations"] < no["iterations"], counts)
            continue
        rep.claim(f"{kern}, λ = {lam:g}: the sketch preconditioner (Algorithm 2, default size 8·d_λ) cuts CG "
                  "iterations at least in half",
                  sk["converged"] and sk["iterations"] <= 0.5 * no["iterations"], counts)

    def draw(fig):
        for i, m in enumerate(sizes):
            ax = fig.add_subplot(1, len(sizes), i + 1)
            for name in ("PolySketch (recursive squaring)", "TensorSketch", "TensorSRHT"):
                pts = sorted((r["p"], r["error"]) for r in rows if r["m"] == m and r["method"] == name)
                ax.plot(*zip(*pts, strict=True), marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("degree p")
            ax.set_ylabel("relative kernel error")
            ax.set_title(f"m = {m}")
        ax.legend(fontsize=7)

    rep.seconds = time.perf_counter() - t0
    png = save_plot(args.out, "polynomial", draw, enabled=not args.no_plot)
    if png:
        rep.files.append(png)
        rep.sections.append("![error against degree](img/polynomial.png)\n")
    publish(rep, args)
    return rep


if __name__ == "__main__":
    main()
