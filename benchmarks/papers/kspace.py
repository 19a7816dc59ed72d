"""k-Space (Avron, Nguyen, Woodruff, NIPS 2014): Table 1 (least squares on the
original features against approximate kernel PCR on k-Space features, all
training rows and a row sample) and Table 2 (linear SVM on the same features),
with the kernel (uᵀv + 1)³ of the paper.

Data that ships offline, each with the paper's settings for its stand-in:

* digits (scikit-learn, 8 × 8 images, classification) for USPS (16 × 16
  images): k = 200, m/k = 4, r/k = 8; the sampled fit uses about half the
  training rows (USPS: 2 000 of 7 291);
* Friedman #1 (``make_friedman1``, 10 features in [-1, 1], 6 554 + 819 rows)
  for CPU (6 554 + 819 rows, 21 features): k = 200, m/k = 4, r/k = 8,
  ns = 2 000, kernel (uᵀv/10 + 1)³.  (With 21 features, 16 of them noise,
  the top 200 components of the cubic expansion miss the signal: k-Space PCR
  at γ = 1/21 reached 17.2 % against 17.8 % for least squares.)

Classification error is the percentage of test points predicted wrong;
regression error is ‖y_p − y‖/‖y‖, as in the paper.  The paper's MNIST
configuration (60 000 × 784, k = 500, m/k = 2, r/k = 4, ns = 5 000) is run
on uniform data of that shape to show that it fits the default task budget
(full mode only).

Run:  python benchmarks/papers/kspace.py [--quick] [--out DIR] [--write-doc]
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Report, md_table, parse_args, publish, timed

# (original features, k-Space, sampled k-Space), percent
PAPER_T1 = {"digits": ("USPS", 13.1, "7.0 ± 0.2", "7.5 ± 0.3"),
            "friedman1": ("CPU", 12.0, "4.3 ± 1.0", "3.6 ± 0.1")}
PAPER_T2 = {"digits": ("USPS", 8.3, "7.2 ± 0.2", "7.5 ± 0.3")}


def data(quick: bool) -> dict:
    from sklearn.datasets import load_digits, make_friedman1
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    nf = 1500 if quick else 6554 + 819
    F, t = make_friedman1(n_samples=nf, n_features=10, noise=1.0, random_state=0)
    F = 2.0 * F - 1.0           # features in [-1, 1], as libsvm's scaled CPU set
    Ftr, Fte, ttr, tte = F[: int(nf * 6554 / 7373)], F[int(nf * 6554 / 7373):], \
        t[: int(nf * 6554 / 7373)], t[int(nf * 6554 / 7373):]
    k_d, k_f = (50, 50) if quick else (200, 200)
    # (task, train/test, k, m/k, r/k, ns, γ): γ = 1/d on Friedman keeps γ·uᵀv in [-1, 1]
    return {"digits": ("classification", Xtr, ytr, Xte, yte, k_d, 4, 8, 700, 1.0),
            "friedman1": ("regression", Ftr, ttr, Fte, tte, k_f, 4, 8, 600 if quick else 2000, 0.1)}


def _error(task: str, pred: np.ndarray, y: np.ndarray) -> float:
    if task == "classification":
        return 100.0 * float(np.mean(pred != y))
    return 100.0 * float(np.linalg.norm(pred - y) / np.linalg.norm(y))


def linear_baseline(task: str, Xtr, ytr, Xte) -> np.ndarray:
    from sklearn.linear_model import LinearRegression

    if task == "regression":
        return LinearRegression().fit(Xtr, ytr).predict(Xte)
    classes = np.unique(ytr)
    Y = np.where(ytr[:, None] == classes[None, :], 1.0, -1.0)     # RLSC: ±1 class columns
    return classes[LinearRegression().fit(Xtr, Y).predict(Xte).argmax(axis=1)]


def kspace_pcr(task: str, Xtr, ytr, Xte, k, mk, rk, sample, seed, gamma: float = 1.0) -> np.ndarray:
    from distsketch import KernelPCR, KernelPCRClassifier

    cls = KernelPCRClassifier if task == "classification" else KernelPCR
    est = cls(n_components=k, degree=3, gamma=gamma, coef0=1.0, sketch_dim=mk * k, embed_size=rk * k,
              sample=sample, random_state=seed)
    return np.asarray(est.fit(Xtr, ytr).predict(Xte))


def kspace_svm(Xtr, ytr, Xte, k, mk, rk, sample, seed) -> np.ndarray:
    from sklearn.svm import LinearSVC

    from distsketch import KSpaceKernelPCA

    ks = KSpaceKernelPCA(n_components=k, degree=3, gamma=1.0, coef0=1.0, sketch_dim=mk * k,
                         embed_size=rk * k, sample=sample, random_state=seed).fit(Xtr)
    Vtr, Vte = np.asarray(ks.transform(Xtr)), np.asarray(ks.transform(Xte))
    # the embedding has orthonormal columns (entries ~ 1/√n): rescale rows for the SVM's C
    s = np.sqrt(Vtr.shape[0])
    return LinearSVC(C=1.0, max_iter=20000, random_state=0).fit(Vtr * s, ytr).predict(Vte * s)


def mnist_configuration() -> dict:
    """The paper's MNIST settings on 60 000 × 784 uniform data: does it fit the default budget?"""
    from distsketch import KernelPCR

    rng = np.random.default_rng(0)
    X = rng.random((60_000, 784), dtype=np.float32)
    y = rng.integers(0, 10, 60_000).astype(np.float64)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        sec, _ = timed(lambda: KernelPCR(n_components=500, sketch_dim=1000, embed_size=2000, sample=5000,
                                         degree=3, gamma=1.0 / 784, random_state=0).fit(X, y))
        err = ""
    except Exception as exc:    # reported as the result, not hidden
        sec, err = float("nan"), f"{type(exc).__name__}: {exc}"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": sec, "error": err, "peak GiB": max(peak, before) / 2**20}


def main(argv: Sequence[str] | None = None) -> Report:
    args = parse_args(__doc__.splitlines()[0], argv)
    t0 = time.perf_counter()
    rep = Report("kspace", "k-Space (Avron, Nguyen, Woodruff 2014): Tables 1 and 2",
                 "python benchmarks/papers/kspace.py" + (" --quick" if args.quick else ""))
    seeds = [0] if args.quick else [0, 1, 2, 3, 4]
    t1, t2 = [], []
    for name, (task, Xtr, ytr, Xte, yte, k, mk, rk, ns, gamma) in data(args.quick).items():
        lin = _error(task, linear_baseline(task, Xtr, ytr, Xte), yte)
        full = [_error(task, kspace_pcr(task, Xtr, ytr, Xte, k, mk, rk, None, s, gamma), yte) for s in seeds]
        samp = [_error(task, kspace_pcr(task, Xtr, ytr, Xte, k, mk, rk, ns, s, gamma), yte) for s in seeds]
        paper = PAPER_T1[name]
        t1.append([f"{name} ({task}, n = {len(Xtr)}, d = {Xtr.shape[1]})",
                   f"k={k}, m/k={mk}, r/k={rk}, ns={ns}, γ={gamma:g}", lin,
                   f"{np.mean(full):.2f} ± {np.std(full):.2f}", f"{np.mean(samp):.2f} ± {np.std(samp):.2f}",
                   f"{paper[0]}: {paper[1]} / {paper[2]} / {paper[3]}"])
        rep.claim(f"{name}: k-Space PCR has lower test error than regression on the original features",
                  np.mean(full) < lin, f"{np.mean(full):.2f}% vs {lin:.2f}%")
        rep.claim(f"{name}: features from a row sample are only slightly worse (within 1.5× the full fit's "
                  "error or its spread)",
                  np.mean(samp) <= max(1.5 * np.mean(full), np.mean(full) + 3 * np.std(full)),
                  f"sampled {np.mean(samp):.2f}% vs full {np.mean(full):.2f}%")
        if task == "classification":
            from sklearn.svm import LinearSVC

            s = LinearSVC(C=1.0, max_iter=20000, random_state=0).fit(Xtr, ytr)
            svm = _error(task, s.predict(Xte), yte)
            fs = [_error(task, kspace_svm(Xtr, ytr, Xte, k, mk, rk, None, sd), yte) for sd in seeds]
            ss = [_error(task, kspace_svm(Xtr, ytr, Xte, k, mk, rk, ns, sd), yte) for sd in seeds]
            p2 = PAPER_T2[name]
            t2.append([name, f"k={k}, m/k={mk}, r/k={rk}, ns={ns}", svm,
                       f"{np.mean(fs):.2f} ± {np.std(fs):.2f}", f"{np.mean(ss):.2f} ± {np.std(ss):.2f}",
                       f"{p2[0]}: {p2[1]} / {p2[2]} / {p2[3]}"])
            rep.claim(f"{name}: linear SVM on k-Space features beats linear SVM on the original features",
                      np.mean(fs) < svm, f"{np.mean(fs):.2f}% vs {svm:.2f}%")
    rep.add("Table 1: test error (%), least squares / RLSC on original vs k-Space features "
            f"(mean ± std over {len(seeds)} seeds)",
            md_table(["data", "settings", "regression", "PCA regression", "sampled PCA regression",
                      "paper (original / PCA / sampled)"], t1))
    rep.add("Table 2: test error (%), linear SVM", md_table(
        ["data", "settings", "SVM", "PCA SVM", "sampled PCA SVM", "paper (original / PCA / sampled)"], t2))
    if not args.quick:
        cfg = mnist_configuration()
        rep.add("The paper's MNIST configuration with the defaults (60 000 × 784, k = 500, m = 1000, "
                "r = 2000, ns = 5000)", md_table(["fit s", "peak RSS GiB (process)", "error"],
                                                 [[cfg["seconds"], cfg["peak GiB"], cfg["error"] or "none"]]))
        rep.claim("the paper's MNIST configuration runs with the default task budget", not cfg["error"],
                  cfg["error"] or f"fit in {cfg['seconds']:.0f} s, peak RSS {cfg['peak GiB']:.2f} GiB")
    rep.seconds = time.perf_counter() - t0
    publish(rep, args)
    return rep


if __name__ == "__main__":
    main()
