"""Fit time and accuracy of the default ridge estimators on small tables, against scikit-learn.

Run:  python benchmarks/bench_small_fits.py [--repeats 3] [--tables r1000,c5000,c20000,r6000]
      [--clock wall|cpu] [--precision]

Synthetic tables with fixed seeds (``make_regression`` / ``make_classification``),
each split 75/25 (stratified for classes):

* ``r1000``:  1 000 × 10 regression (issue 37's "1 000 × 10 rows");
* ``c5000``:  5 000 × 36, 6 classes (the size of the satellite table);
* ``c20000``: 20 000 × 16, 26 classes (the size of the letter table);
* ``r6000``:  6 000 × 12 regression (the size of the computer-prices table).

For each table: ``SketchedKernelRidge()`` / ``SketchedKernelRidgeClassifier()``
with ``random_state`` only, ``make_pipeline(StandardScaler(), SVR())`` /
``SVC()``, and ``make_pipeline(StandardScaler(), Nystroem(random_state=0),
RidgeCV())`` (``RidgeClassifierCV`` for classes), scikit-learn's defaults.
Prints the median fit seconds over ``--repeats`` fits, the held-out score
(R² or accuracy) and the ratios of the default's fit time to the two
scikit-learn fits, with the machine it ran on.  Run it on an idle machine:
wall times on busy cores are not comparable; ``--clock cpu`` times the
process's CPU seconds instead (all threads), which other processes disturb
less.  ``--precision`` adds fits of 40 000 float32 rows at a given alpha
(1e-3, and a tenth of the mean eigenvalue) and at ``alpha="auto"``, with the
products each fit used (``gram_precision_``) and its fit seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

TABLES = ("r1000", "c5000", "c20000", "r6000")


def make_table(name: str) -> tuple[str, np.ndarray, np.ndarray]:
    """``(kind, X, y)`` of one synthetic table (``kind``: "reg" or "clf")."""
    from sklearn.datasets import make_classification, make_regression

    if name == "r1000":
        X, y = make_regression(n_samples=1000, n_features=10, n_informative=8, noise=10.0,
                               random_state=0)
        # a smooth non-linear target: kernel methods beat a linear fit
        return "reg", X, np.sin(X[:, 0]) * 50 + y
    if name == "r6000":
        X, y = make_regression(n_samples=6000, n_features=12, n_informative=8, noise=20.0,
                               random_state=1)
        return "reg", X, np.tanh(y / 100.0) * 100 + 10 * np.sin(X[:, 1])
    if name == "c5000":
        X, y = make_classification(n_samples=5000, n_features=36, n_informative=20,
                                   n_classes=6, random_state=0)
        return "clf", X, y
    if name == "c20000":
        X, y = make_classification(n_samples=20000, n_features=16, n_informative=12,
                                   n_classes=26, n_clusters_per_class=1, random_state=0)
        return "clf", X, y
    raise SystemExit(f"unknown table {name!r}; choose among {', '.join(TABLES)}")


def models(kind: str) -> dict:
    """The three models of a table kind (fresh, unfitted)."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifierCV, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, SVR

    import distsketch as ds

    if kind == "clf":
        return {"default": ds.SketchedKernelRidgeClassifier(random_state=0),
                "svm": make_pipeline(StandardScaler(), SVC()),
                "nystroem": make_pipeline(StandardScaler(), Nystroem(random_state=0),
                                          RidgeClassifierCV())}
    return {"default": ds.SketchedKernelRidge(random_state=0),
            "svm": make_pipeline(StandardScaler(), SVR()),
            "nystroem": make_pipeline(StandardScaler(), Nystroem(random_state=0), RidgeCV())}


def run_table(name: str, repeats: int, clock: str = "wall") -> dict:
    """Median fit seconds and held-out score of each model on one table."""
    from sklearn.base import clone
    from sklearn.model_selection import train_test_split

    kind, X, y = make_table(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0,
                                          stratify=y if kind == "clf" else None)
    out = {"table": name, "shape": X.shape}
    now = time.process_time if clock == "cpu" else time.perf_counter
    for label, model in models(kind).items():
        times = []
        for _ in range(repeats):
            m = clone(model)
            t = now()
            m.fit(Xtr, ytr)
            times.append(now() - t)
        out[label] = (float(np.median(times)), float(m.score(Xte, yte)))
    return out


def precision_rows(repeats: int, clock: str) -> None:
    """Fit seconds of float32 rows at given alphas, with the products each fit used."""
    import dask

    import distsketch as ds

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40000, 16)).astype(np.float32)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=X.shape[0])
    m = 1024
    # the mean eigenvalue of the centred ZᵀZ: about n / m for unit-norm random features
    mean_eig = X.shape[0] / m
    now = time.process_time if clock == "cpu" else time.perf_counter
    print("\n| float32 rows 40 000 × 16, m = 1024 | alpha / (n / m) | products | fit s |")
    print("|---|---|---|---|")
    for alpha in (1e-3, 1e-1 * mean_eig, "auto"):
        times = []
        for _ in range(repeats):
            model = ds.SketchedKernelRidge(alpha=alpha, standardize=False,
                                           features=ds.RandomFourierFeatures(
                                               gamma=0.1, n_components=m, random_state=0))
            with dask.config.set(scheduler="synchronous"):
                t = now()
                model.fit(X, y)
                times.append(now() - t)
        rel = "GCV" if alpha == "auto" else f"{float(alpha) / mean_eig:.2g}"
        print(f"| alpha={alpha if isinstance(alpha, str) else f'{alpha:.3g}'} | {rel} | "
              f"{getattr(model, 'gram_precision_', 'n/a')} | {np.median(times):.3f} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="fits per model (median time)")
    ap.add_argument("--tables", default=",".join(TABLES), help="comma-separated table names")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall seconds, or the process's CPU seconds (busy machines)")
    ap.add_argument("--precision", action="store_true",
                    help="also time float32 rows at given alphas (the products each fit used)")
    args = ap.parse_args()
    import distsketch
    from distsketch.diagnostics import cpu_model

    # sklearn's and distsketch's fits both use the machine's BLAS as they find it
    warnings.simplefilter("ignore")
    print(f"# {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"NumPy {np.__version__}, distsketch from {os.path.dirname(distsketch.__file__)}, "
          f"{args.clock} seconds, median of {args.repeats}")
    print("| table | rows × cols | default s | score | SVM s | score | Nystroem+RidgeCV s | "
          "score | default / SVM | default / Nystroem |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.tables.split(","):
        r = run_table(name.strip(), args.repeats, args.clock)
        (td, sd), (ts, ss), (tn, sn) = r["default"], r["svm"], r["nystroem"]
        print(f"| {r['table']} | {r['shape'][0]} × {r['shape'][1]} | {td:.3f} | {sd:.4f} | "
              f"{ts:.3f} | {ss:.4f} | {tn:.3f} | {sn:.4f} | {td / ts:.2f} | {td / tn:.2f} |",
              flush=True)
    if args.precision:
        precision_rows(args.repeats, args.clock)


if __name__ == "__main__":
    main()
