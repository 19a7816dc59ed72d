"""Default estimators against scikit-learn on real tables that ship with scikit-learn.

Run:  python benchmarks/bench_defaults.py [--seeds 3]

For each table (digits, wine, breast cancer: classification; diabetes and
Friedman #1: regression) and each seed, a stratified 75/25 split; test
accuracy (R² for the regression tables) and fit seconds of

* ``SketchedKernelRidgeClassifier()`` / ``SketchedKernelRidge()`` with no
  arguments (``random_state=seed`` only);
* ``SVC()`` / ``SVR()``, scikit-learn's defaults;
* ``make_pipeline(StandardScaler(), Nystroem(n_components=min(2048, n)),
  RidgeClassifierCV(alphas=logspace(-6, 3, 10)))`` (``RidgeCV`` for
  regression): the approximate pipeline with alpha tuned by leave-one-out;
* ``GridSearchCV(make_pipeline(StandardScaler(), SVC()), C × gamma, cv=5)``:
  a tuned exact kernel machine (C in {1, 10, 100}, gamma in
  {0.25, 0.5, 1, 2} / n_features; SVR alike);
* ``HistGradientBoostingClassifier()`` / ``HistGradientBoostingRegressor()``
  with scikit-learn's defaults (``random_state=seed`` only): gradient-boosted
  trees, the usual first choice on tabular data, the comparison that shows
  where a kernel model is the wrong tool.

Friedman #1 (``make_friedman1``: 5 000 rows, 10 uniform columns of which 5
matter through sin(π x₁x₂) + 20(x₃ − ½)² + 10x₄ + 5x₅, noise σ = 1) is the
smooth target of the set: a sum of smooth functions with an interaction,
where trees must approximate every curve by steps.

Prints one Markdown table: mean ± std over seeds, and the median chosen alpha
and gamma (as gamma · n_features: the default map chooses among 1/8 … 2).
On a machine shared with other jobs, run it with ``OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1``: boosting's OpenMP threads wait on
busy cores (a digits fit took 181 s with default threading under load, 4.7 s
with one thread), and one thread per library keeps the fit times comparable.
No download: every table is bundled with scikit-learn.  ``--diamonds PATH`` adds
the 53 940-row diamonds price table (log price, R²; the CSV, or the ``plotnine``
wheel that ships it: ``pip download plotnine --no-deps``), read as
``bench_falkon_regime.py`` reads it; there, beside the default, only the
Nyström pipeline and gradient boosting run (the exact SVR and its grid search
are O(n²) in memory and hours at this size).
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings

import numpy as np


def models_for(kind: str, n: int, d: int, seed: int, exact: bool = True) -> dict:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifierCV, RidgeCV
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, SVR

    import distsketch as ds

    alphas = np.logspace(-6, 3, 10)
    grid = {"svc__C" if kind == "clf" else "svr__C": [1.0, 10.0, 100.0],
            "svc__gamma" if kind == "clf" else "svr__gamma": [g / d for g in (0.25, 0.5, 1, 2)]}
    nys = Nystroem(n_components=min(2048, n), random_state=seed)
    if kind == "clf":
        return {
            "distsketch default": ds.SketchedKernelRidgeClassifier(random_state=seed),
            "SVC()": SVC(),
            "Scaler+Nystroem+RidgeClassifierCV": make_pipeline(StandardScaler(), nys,
                                                               RidgeClassifierCV(alphas=alphas)),
            "GridSearchCV(Scaler+SVC)": GridSearchCV(make_pipeline(StandardScaler(), SVC()),
                                                     grid, cv=5),
            "HistGradientBoostingClassifier()": HistGradientBoostingClassifier(random_state=seed),
        }
    models = {
        "distsketch default": ds.SketchedKernelRidge(random_state=seed),
        "SVR()": SVR(),
        "Scaler+Nystroem+RidgeCV": make_pipeline(StandardScaler(), nys, RidgeCV(alphas=alphas)),
        "GridSearchCV(Scaler+SVR)": GridSearchCV(make_pipeline(StandardScaler(), SVR()),
                                                 grid, cv=5),
        "HistGradientBoostingRegressor()": HistGradientBoostingRegressor(random_state=seed),
    }
    if not exact:
        del models["SVR()"], models["GridSearchCV(Scaler+SVR)"]
    return models


def _diamonds(path: str):
    def load(return_X_y: bool = True):
        # the same parsing as the Falkon benchmark (ordinal cut, colour, clarity; log price)
        from bench_falkon_regime import real_table

        _, X, y = real_table(path)
        return X, y
    return load


def _friedman1(return_X_y: bool = True):
    # a fixed draw (seed 0), so every seed's split cuts the same table
    from sklearn.datasets import make_friedman1

    return make_friedman1(n_samples=5000, n_features=10, noise=1.0, random_state=0)


def main() -> None:
    import os

    import sklearn
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine
    from sklearn.model_selection import train_test_split

    from distsketch.diagnostics import cpu_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--diamonds", default=None, metavar="PATH",
                    help="diamonds.csv or a plotnine wheel: adds the 53 940-row price table")
    ap.add_argument("--tables", default=None, help="comma-separated table names to run (default: all)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    tables = [("digits", load_digits, "clf"), ("wine", load_wine, "clf"),
              ("breast_cancer", load_breast_cancer, "clf"), ("diabetes", load_diabetes, "reg"),
              ("friedman1", _friedman1, "reg")]
    if args.diamonds:
        tables.append(("diamonds", _diamonds(args.diamonds), "reg"))
    if args.tables:
        tables = [t for t in tables if t[0] in args.tables.split(",")]
    print(f"# {cpu_model()}, {os.cpu_count()} logical cores, Python {platform.python_version()}, "
          f"NumPy {np.__version__}, scikit-learn {sklearn.__version__}")
    print("| table (n × d) | model | score | fit s | alpha_ | gamma_ · d |")
    print("|---|---|---:|---:|---:|---:|")
    for name, loader, kind in tables:
        X, y = loader(return_X_y=True)
        results: dict[str, list] = {}
        for seed in range(args.seeds):
            Xtr, Xte, ytr, yte = train_test_split(
                X, y, test_size=0.25, random_state=seed, stratify=y if kind == "clf" else None)
            models = models_for(kind, Xtr.shape[0], X.shape[1], seed, exact=X.shape[0] <= 10_000)
            for label, model in models.items():
                t0 = time.perf_counter()
                model.fit(Xtr, ytr)
                dt = time.perf_counter() - t0
                alpha, gamma = getattr(model, "alpha_", None), getattr(model, "gamma_", None)
                results.setdefault(label, []).append((model.score(Xte, yte), dt, alpha,
                                                      None if gamma is None else gamma * X.shape[1]))
        for label, rows in results.items():
            s = np.array([r[0] for r in rows])
            t = np.mean([r[1] for r in rows])
            a = [r[2] for r in rows if r[2] is not None]
            g = [r[3] for r in rows if r[3] is not None]
            astr = f"{np.median(a):.2g}" if a else ""
            gstr = f"{np.median(g):.3g}" if g else ""
            print(f"| {name} ({X.shape[0]} × {X.shape[1]}) | {label} | "
                  f"{s.mean():.4f} ± {s.std():.4f} | {t:.2f} | {astr} | {gstr} |")


if __name__ == "__main__":
    main()
