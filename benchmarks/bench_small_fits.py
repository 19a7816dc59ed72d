"""Fit time and accuracy of the default ridge estimators on small tables, against scikit-learn.

Run:  python benchmarks/bench_small_fits.py [--repeats 3] [--tables r1000,c5000,c20000,r6000]
      [--clock wall|cpu] [--precision] [--breakdown] [--rpcholesky] [--search]

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
Prints the median fit seconds over ``--repeats`` fits (after one untimed
warm-up fit of each model on 200 rows), the held-out score
(R² or accuracy) and the ratios of the default's fit time to the two
scikit-learn fits, with the machine it ran on.  Run it on an idle machine:
wall times on busy cores are not comparable; ``--clock cpu`` times the
process's CPU seconds instead (all threads), which other processes disturb
less.  ``--precision`` adds fits of 40 000 float32 rows at a given alpha
(1e-3, and a tenth of the mean eigenvalue) and at ``alpha="auto"``, with the
products each fit used (``gram_precision_``) and its fit seconds.
``--breakdown`` profiles one more default fit per table and splits its
seconds into the gamma search (with its k-row eigendecompositions), the
passes over the rows, GCV's factorisation (a tridiagonal reduction), the
solve, the classifier's calibration and the rest.  ``--rpcholesky`` times issue 37's 150-row
randomly pivoted Cholesky (33 pivots one per round, as
tests/ops/test_rpcholesky.py) and a ``NystromFeatures(landmarks="rpcholesky")``
fit on the same rows (target: under 1 s).  ``--search`` runs the default
map's gamma search on standardised 1 000-row samples of 28 tables (the four
above, three bundled scikit-learn tables, 21 synthetic ones) as it is and
started from the middle of the grid (``PILOT_ABOVE`` raised past the rows,
the search before the pilot), with the k-row eigendecompositions each used
and whether both chose the same gamma and alpha.
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
        clone(model).fit(Xtr[:200], ytr[:200])  # warm-up: first-call imports are not the fit's
        times = []
        for _ in range(repeats):
            m = clone(model)
            t = now()
            m.fit(Xtr, ytr)
            times.append(now() - t)
        out[label] = (float(np.median(times)), float(m.score(Xte, yte)))
    return out


#: (module path suffix, function name, part) of the profile entries --breakdown sums; none
#: of them runs inside another one of the list during a default fit
BREAKDOWN = (
    ("ridge/gamma_search.py", "search_gamma", "gamma search"),
    ("graph/runtime.py", "compute", "passes"),
    ("ridge/system.py", "gcv", "GCV"),
    ("ridge/system.py", "solve", "solve"),
    ("ridge/calibration.py", "loo_decision_values", "calibration"),
)


def breakdown(name: str) -> dict:
    """Seconds of one default fit by part (cProfile's cumulative times), and the search's
    k-row eigendecompositions."""
    import cProfile
    import pstats

    from sklearn.model_selection import train_test_split

    kind, X, y = make_table(name)
    Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.25, random_state=0,
                                      stratify=y if kind == "clf" else None)
    model = models(kind)["default"]
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.runcall(model.fit, Xtr, ytr)
    total = time.perf_counter() - t
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    parts = {part: 0.0 for _, _, part in BREAKDOWN}
    for (path, _, func), (_, _, _, cum, _) in stats.items():
        for suffix, fname, part in BREAKDOWN:
            if func == fname and path.replace(os.sep, "/").endswith(suffix):
                parts[part] += cum
    parts["rest"] = total - sum(parts.values())
    search = getattr(model, "gamma_search_", None) or {}
    return {"total": total, "parts": parts, "factors": len(search.get("factors", ())),
            "loo_rows": (getattr(model, "cv_results_", None) or {}).get("loo_rows")}


def search_tables() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(name, X, Y)`` of the tables of ``--search`` (Y: ±1 columns for classes)."""
    from sklearn import datasets

    def onehot(y: np.ndarray) -> np.ndarray:
        return np.where(y[:, None] == np.unique(y)[None, :], 1.0, -1.0)

    out = []
    for name in TABLES:
        kind, X, y = make_table(name)
        out.append((name, X, onehot(y) if kind == "clf" else y[:, None]))
    for name, load in (("breast_cancer", datasets.load_breast_cancer),
                       ("digits", datasets.load_digits)):
        X, y = load(return_X_y=True)
        out.append((name, X, onehot(y)))
    X, y = datasets.load_diabetes(return_X_y=True)
    out.append(("diabetes", X, y[:, None]))
    for s in range(3):
        for name, make, noise in (("friedman1", datasets.make_friedman1, 1.0),
                                  ("friedman2", datasets.make_friedman2, 10.0),
                                  ("friedman3", datasets.make_friedman3, 0.1)):
            X, y = make(1000, noise=noise, random_state=s)
            out.append((f"{name}.{s}", X, y[:, None]))
        rng = np.random.default_rng(s)
        X = rng.normal(size=(1000, 2))
        out.append((f"wiggly.{s}", X, (np.sin(5 * X[:, 0]) + 0.05 * rng.normal(size=1000))[:, None]))
        rng = np.random.default_rng(s)
        X = rng.normal(size=(1000, 4))
        out.append((f"linear.{s}", X, (X @ np.array([1.0, -2.0, 0.5, 1.0])
                                       + 0.1 * rng.normal(size=1000))[:, None]))
        X, y = datasets.make_classification(1000, 20, n_informative=10, n_classes=4,
                                            random_state=s)
        out.append((f"classes4.{s}", X, onehot(y)))
        X, y = datasets.make_moons(1000, noise=0.3, random_state=s)
        out.append((f"moons.{s}", X, onehot(y)))
    return out


def search_rows() -> None:
    """The gamma search as it is against the search started from the middle of the grid."""
    from distsketch.estimators.ridge import gamma_search

    print("\n| table (1 000-row sample) | k-row eighs: middle start | pilot start | "
          "same gamma and alpha | s: middle | s: pilot |")
    print("|---|---|---|---|---|---|")
    totals = np.zeros(4)
    same_all = 0
    tables = search_tables()
    for name, X, Y in tables:
        rows = np.random.default_rng(0).permutation(X.shape[0])[:1000]
        S = X[rows]
        S = (S - S.mean(axis=0)) / np.where(S.std(axis=0) > 0, S.std(axis=0), 1.0)
        picks, counts, secs = [], [], []
        pilot_above = gamma_search.PILOT_ABOVE
        for above in (S.shape[0], pilot_above):  # the first: no pilot, the middle start
            gamma_search.PILOT_ABOVE = above
            try:
                t = time.perf_counter()
                path = gamma_search.search_gamma(S, Y[rows], True)
                secs.append(time.perf_counter() - t)
            finally:
                gamma_search.PILOT_ABOVE = pilot_above
            g, a = np.unravel_index(int(np.argmin(path["mse"])), path["mse"].shape)
            picks.append((path["factors"][g], float(path["alphas"][g, a])))
            counts.append(len(path["factors"]))
        same = picks[0] == picks[1]
        same_all += same
        totals += [*counts, *secs]
        print(f"| {name} | {counts[0]} | {counts[1]} | {'yes' if same else 'NO'} | "
              f"{secs[0]:.3f} | {secs[1]:.3f} |", flush=True)
    n = len(tables)
    print(f"| mean of {n} | {totals[0] / n:.2f} | {totals[1] / n:.2f} | {same_all} of {n} | "
          f"{totals[2] / n:.3f} | {totals[3] / n:.3f} |")


def rpcholesky_rows(repeats: int, clock: str) -> None:
    """Issue 37's 150-row randomly pivoted Cholesky: best of ``repeats`` after a warm-up."""
    from distsketch import NystromFeatures
    from distsketch.estimators.nystrom.landmark_choice import rpcholesky_landmarks

    X150 = np.random.default_rng(1).normal(size=(150, 3))
    cases = {
        "rpcholesky_landmarks, 150 × 3, 33 pivots one per round": lambda: rpcholesky_landmarks(
            X150, 33, 0, kernel="rbf", kernel_params={"gamma": 0.5}, rounds=33),
        'NystromFeatures(landmarks="rpcholesky").fit, 150 × 3': lambda: NystromFeatures(
            landmarks="rpcholesky", gamma=0.5, random_state=0).fit(X150),
    }
    now = time.process_time if clock == "cpu" else time.perf_counter
    print("\n| 150-row RP-Cholesky | best s |")
    print("|---|---|")
    for label, fit in cases.items():
        fit()  # warm-up: imports and first-call caches
        times = []
        for _ in range(max(1, repeats)):
            t = now()
            fit()
            times.append(now() - t)
        print(f"| {label} | {min(times):.3f} |", flush=True)


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
    ap.add_argument("--tables", default=",".join(TABLES),
                    help="comma-separated table names (empty: none, for the other options)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall seconds, or the process's CPU seconds (busy machines)")
    ap.add_argument("--precision", action="store_true",
                    help="also time float32 rows at given alphas (the products each fit used)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also split one default fit per table into its parts (cProfile)")
    ap.add_argument("--rpcholesky", action="store_true",
                    help="also time the 150-row RP-Cholesky of issue 37")
    ap.add_argument("--search", action="store_true",
                    help="also count the gamma search's decompositions on 28 tables")
    args = ap.parse_args()
    tables = [name.strip() for name in args.tables.split(",") if name.strip()]
    import distsketch
    from distsketch.diagnostics import cpu_model

    # sklearn's and distsketch's fits both use the machine's BLAS as they find it
    warnings.simplefilter("ignore")
    print(f"# {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"NumPy {np.__version__}, distsketch from {os.path.dirname(distsketch.__file__)}, "
          f"{args.clock} seconds, median of {args.repeats}")
    if tables:
        print("| table | rows × cols | default s | score | SVM s | score | "
              "Nystroem+RidgeCV s | score | default / SVM | default / Nystroem |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    for name in tables:
        r = run_table(name, args.repeats, args.clock)
        (td, sd), (ts, ss), (tn, sn) = r["default"], r["svm"], r["nystroem"]
        print(f"| {r['table']} | {r['shape'][0]} × {r['shape'][1]} | {td:.3f} | {sd:.4f} | "
              f"{ts:.3f} | {ss:.4f} | {tn:.3f} | {sn:.4f} | {td / ts:.2f} | {td / tn:.2f} |",
              flush=True)
    if args.breakdown:
        names = [part for _, _, part in BREAKDOWN] + ["rest"]
        print("\n| table | default fit s (profiled) | " + " | ".join(f"{p} s" for p in names)
              + " | k-row eighs of the search | k |")
        print("|---" * (len(names) + 4) + "|")
        for name in tables:
            b = breakdown(name)
            print(f"| {name} | {b['total']:.3f} | "
                  + " | ".join(f"{b['parts'][p]:.3f}" for p in names)
                  + f" | {b['factors']} | {b['loo_rows']} |", flush=True)
    if args.rpcholesky:
        rpcholesky_rows(args.repeats, args.clock)
    if args.search:
        search_rows()
    if args.precision:
        precision_rows(args.repeats, args.clock)


if __name__ == "__main__":
    main()
