"""Sampling techniques for kernel methods (Achlioptas, McSherry, Schölkopf, NIPS
2001).  The paper has no experiment table; its results are bounds, each
measured here against distsketch on scikit-learn's digits (Gaussian kernel,
γ = 1/64 on pixels scaled to [0, 1]) and, for projections, where the input
dimension must be large, on the streaming-KPCA paper's RandomNoisy data
(d = 4 000):

1. Gram sparsification (keep K_ij/p with probability p) and quantization
   (±b by randomized rounding): the error matrix has independent zero-mean
   entries, so by Füredi–Komlós ‖G − Ĝ‖₂ ≲ 2σ√n, with σ² ≤ b²(1 − p)/p
   (sparsification) or b² (quantization), b = max |K_ij| = 1.
2. Kernel PCA on Ĝ (Theorems 2–4; centred, as kernel PCA is): each top
   eigenvalue moves by at most
   ‖G − Ĝ‖₂ (Weyl), and the top-k subspace by sin θ ≤ ‖G − Ĝ‖₂ / gap
   (Davis–Kahan, checked for the leading eigenvector), with the top
   *algebraic* eigenpairs of the indefinite Ĝ, for both of distsketch's solvers.
3. Randomized rounding of a kernel expansion (Theorem 5): the rounded
   expansion's error stays below the Hoeffding bound with probability
   ≥ 1 − δ, with far fewer kernel evaluations; for the several unit
   eigenvectors of kernel PCA, a budget per output (the paper's scheme)
   against one total budget shared by all outputs.
4. Database-friendly projections (Theorem 6): with k ≥ (4 + 2β) ln n /
   (ε²/2 − ε³/3), every pairwise squared distance is kept within 1 ± ε.

Exact references by NumPy (the full Gram matrix, ``eigh``).

Run:  python benchmarks/papers/sampling.py [--quick] [--out DIR] [--write-doc]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DocCheck, Report, md_table, parse_args, publish, section_checks, timed

GAMMA = 1.0 / 64
N_COMPONENTS = 8


def _spectral(E: np.ndarray) -> float:
    from scipy.sparse.linalg import eigsh

    return float(abs(eigsh(E, k=1, which="LM", return_eigenvectors=False, tol=1e-8)[0]))


def gram_bounds(X: np.ndarray, ps: list[float], rep: Report) -> None:
    from sklearn.metrics.pairwise import rbf_kernel

    from distsketch import SparsifiedGram, SparsifiedKernelPCA

    n = X.shape[0]
    G = rbf_kernel(X, gamma=GAMMA)
    # kernel PCA is on the centred Gram matrix HGH (H = I − 11ᵀ/n); ‖H E H‖₂ ≤ ‖E‖₂
    Gc = G - G.mean(axis=0)[None, :] - G.mean(axis=1)[:, None] + G.mean()
    lam, U = np.linalg.eigh(Gc)
    lam, U = lam[::-1], U[:, ::-1]
    rows, kp = [], []
    cases = [(p, False) for p in ps] + [(1.0, True)]
    for p, quant in cases:
        sec, sg = timed(lambda p=p, quant=quant: SparsifiedGram(p=p, quantize=quant, gamma=GAMMA,
                                                                 random_state=0).fit(X))
        E = G - sg.to_scipy().toarray()
        err = _spectral(E)
        sigma = 1.0 if quant else np.sqrt((1 - p) / p)
        bound = 2 * sigma * np.sqrt(n)
        label = "quantized ±b" if quant else f"sparsified p = {p:g}"
        rows.append([label, sg.density_, err, bound, err / bound, sec])
        rep.claim(f"{label}: ‖G − Ĝ‖₂ within the Füredi–Komlós scale 2σ√n", err <= bound,
                  f"{err:.2f} vs {bound:.2f} (ratio {err / bound:.2f})")
        if quant:
            continue
        default = SparsifiedKernelPCA().get_params()["solver"]
        for solver in ("orthogonal_iteration", "lanczos"):
            sec, kpca = timed(lambda p=p, solver=solver: SparsifiedKernelPCA(
                n_components=N_COMPONENTS, p=p, gamma=GAMMA, solver=solver, random_state=0).fit(X))
            ev = np.asarray(kpca.eigenvalues_, dtype=np.float64)
            Q, _ = np.linalg.qr(np.asarray(kpca.eigenvectors_, dtype=np.float64))
            # the leading eigenvector only: the rest of the top 8 sit below the noise level here
            sin1 = float(np.linalg.norm(U[:, 1:].T @ Q[:, :1]))
            dk1 = min(1.0, err / (lam[0] - lam[1]))
            shift = float(np.max(np.abs(np.sort(ev)[::-1] - lam[:N_COMPONENTS])))
            name = solver + (" (default)" if solver == default else "")
            kp.append([label, name, " ".join(f"{v:.1f}" for v in ev),
                       " ".join(f"{v:.1f}" for v in lam[:N_COMPONENTS]), shift, err, sin1, dk1, sec])
            rep.claim(f"{label}, {name}: kernel PCA eigenvalues of Ĝ within ‖G − Ĝ‖₂ of the exact ones "
                      "(Weyl; the top algebraic eigenpairs)", shift <= err * (1 + 1e-9),
                      f"max shift {shift:.2f} against ‖G − Ĝ‖₂ = {err:.2f}; returned {ev.round(1).tolist()}")
            rep.claim(f"{label}, {name}: leading eigenvector within Davis–Kahan sin θ ≤ ‖E‖₂/(λ₁ − λ₂)",
                      sin1 <= dk1 + 1e-9, f"sin θ = {sin1:.3f}, bound {dk1:.3f}")
    rep.add(f"Gram sparsification and quantization: error against the bound (digits n = {n})",
            md_table(["Ĝ", "density", "‖G − Ĝ‖₂", "2σ√n", "ratio", "fit s"], rows))
    rep.add(f"Kernel PCA on Ĝ (top {N_COMPONENTS}; λ₁ − λ₂ = {lam[0] - lam[1]:.2f})",
            md_table(["Ĝ", "solver", "eigenvalues of Ĝ", "exact eigenvalues", "max \\|shift\\|", "‖G − Ĝ‖₂",
                      "sin θ (leading)", "Davis–Kahan bound", "fit s"], kp))


def rounding(X: np.ndarray, y: np.ndarray, budgets: list[float], rep: Report) -> None:
    from sklearn.kernel_ridge import KernelRidge

    from distsketch import RoundedExpansion

    n = X.shape[0] // 2
    krr = KernelRidge(kernel="rbf", gamma=GAMMA, alpha=1.0).fit(X[:n], y[:n])
    Xt = X[n:]
    exact = krr.predict(Xt)
    rows = []
    for b in budgets:
        r = RoundedExpansion(budget=b, delta=0.05, random_state=0).fit(krr)
        err = np.abs(np.asarray(r.predict(Xt)).ravel() - exact.ravel())
        bound = float(np.max(r.hoeffding_bound_))
        frac = float(np.mean(err <= bound))
        rows.append([b, r.n_evaluations_, n, float(np.max(err)), float(np.mean(err)), bound, frac])
        rep.claim(f"rounding, budget {b:g}: error within the Hoeffding bound for ≥ 95 % of test points "
                  "(δ = 0.05)", frac >= 0.95,
                  f"{100 * frac:.1f} % within {bound:.3f}; {r.n_evaluations_} of {n} kernel evaluations")
    rep.add("Randomized rounding of a kernel ridge expansion (digits, half train / half test)",
            md_table(["budget", "kernel evaluations", "support points", "max error", "mean error",
                      "Hoeffding bound", "fraction within"], rows))


def rounding_kpca(X: np.ndarray, budget: float, rep: Report) -> None:
    """Rounding the unit eigenvectors of kernel PCA (the paper's use, several outputs at once).

    Per output (the paper's scheme: each eigenvector rounded on its own) a
    budget b evaluates up to q·b distinct points per query; a total budget
    shares one coin per point.  Both are compared at the same budget and at
    the same cost (total budget = the per-output scope's distinct points).
    """
    from sklearn.decomposition import KernelPCA

    from distsketch import RoundedExpansion

    n = X.shape[0] // 2
    kp = KernelPCA(n_components=N_COMPONENTS, kernel="rbf", gamma=GAMMA).fit(X[:n])
    Xt = X[n:]
    exact = kp.transform(Xt)
    scale = np.linalg.norm(exact)
    per = RoundedExpansion(budget=budget, delta=0.05, random_state=0).fit(kp)
    cases = [("per_output", budget, per),
             ("total", budget, RoundedExpansion(budget=budget, delta=0.05, budget_scope="total",
                                                random_state=0).fit(kp)),
             ("total, equal cost", float(per.n_evaluations_),
              RoundedExpansion(budget=float(per.n_evaluations_), delta=0.05, budget_scope="total",
                               random_state=0).fit(kp))]
    rows, errs = [], {}
    for label, b, r in cases:
        E = np.asarray(r.predict(Xt), dtype=np.float64) - exact
        within = float(np.mean(np.abs(E) <= np.asarray(r.hoeffding_bound_)[None, :]))
        errs[label] = float(np.linalg.norm(E) / scale)
        rows.append([label, b, r.n_evaluations_, r.expected_evaluations_, n, errs[label], within])
        rep.claim(f"rounding {N_COMPONENTS} kernel PCA components ({label}, budget {b:g}): error within the "
                  "Hoeffding bound for ≥ 95 % of test values (δ = 0.05)", within >= 0.95,
                  f"{100 * within:.1f} % within; {r.n_evaluations_} distinct kernel evaluations per query")
    rep.claim(f"rounding {N_COMPONENTS} components: at equal cost a total budget errs less than per-output "
              "budgets", errs["total, equal cost"] < errs["per_output"],
              f"relative error {errs['total, equal cost']:.4f} vs {errs['per_output']:.4f} at "
              f"{per.n_evaluations_} evaluations "
              f"({errs['per_output'] / errs['total, equal cost']:.1f}× lower)")
    rep.add(f"Randomized rounding of {N_COMPONENTS} kernel PCA components (digits, half fit / half test): "
            "budget per output against a total budget",
            md_table(["budget scope", "budget", "distinct kernel evaluations", "expected", "support points",
                      "‖F̂ − F‖_F/‖F‖_F", "fraction within Hoeffding"], rows))


def projections(X: np.ndarray, eps_list: list[float], rep: Report) -> None:
    from sklearn.metrics.pairwise import euclidean_distances

    from distsketch import DatabaseFriendlyProjection

    D = euclidean_distances(X, squared=True)
    iu = np.triu_indices_from(D, 1)
    keep = D[iu] > 0
    rows = []
    for eps in eps_list:
        for density in ("dense", "sparse"):
            P = DatabaseFriendlyProjection(eps=eps, density=density, random_state=0).fit(X)
            Y = np.asarray(P.transform(X), dtype=np.float64)
            Dp = euclidean_distances(Y, squared=True)
            ratio = Dp[iu][keep] / D[iu][keep]
            worst = float(np.max(np.abs(ratio - 1)))
            rows.append([eps, density, P.n_components_, X.shape[1], worst, float(np.mean(np.abs(ratio - 1)))])
            rep.claim(f"projection ε = {eps:g} ({density}): every squared distance within 1 ± ε",
                      worst <= eps, f"worst distortion {worst:.3f} with k = {P.n_components_}")
    rep.add("Database-friendly projections: pairwise squared-distance distortion",
            md_table(["ε", "density", "k", "d", "max \\|ratio − 1\\|", "mean \\|ratio − 1\\|"], rows))


def doc_check() -> list[DocCheck]:
    """The full run's rows at p = 0.05 (and the quantized Ĝ), and its projections at ε = 0.5
    (seconds): same data and seeds."""
    from sklearn.datasets import load_digits

    from distsketch.datasets import random_noisy

    rep = Report("sampling", "check", "check")
    gram_bounds(load_digits().data / 16.0, [0.05], rep)
    projections(np.asarray(random_noisy(500, 4000, random_state=0).compute(), dtype=np.float64), [0.5], rep)
    return section_checks(rep, keys=["Ĝ", "solver", "ε", "density"], timed=["fit s"])


def main(argv: Sequence[str] | None = None) -> Report:
    from sklearn.datasets import load_digits

    args = parse_args(__doc__.splitlines()[0], argv)
    t0 = time.perf_counter()
    rep = Report("sampling", "Sampling techniques for kernel methods (Achlioptas, McSherry, Schölkopf 2001)",
                 "python benchmarks/papers/sampling.py" + (" --quick" if args.quick else ""))
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    if args.quick:
        X, y = X[:400], y[:400]
    gram_bounds(X, [0.3] if args.quick else [0.5, 0.1, 0.05], rep)
    rounding(X, y.astype(np.float64), [50.0] if args.quick else [50.0, 200.0], rep)
    rounding_kpca(X, 40.0 if args.quick else 100.0, rep)
    from distsketch.datasets import random_noisy

    R = np.asarray(random_noisy(200 if args.quick else 500, 4000, random_state=0).compute(), dtype=np.float64)
    projections(R, [0.5] if args.quick else [0.3, 0.5], rep)
    rep.seconds = time.perf_counter() - t0
    publish(rep, args)
    return rep


if __name__ == "__main__":
    main()
