"""Calibrated ``predict_proba`` of the kernel ridge classifier against logistic regression.

Run:  python benchmarks/bench_proba.py [--seeds 3]

For each table bundled with scikit-learn (digits, wine, breast cancer) and
each seed, a stratified 75/25 split; test log-loss, expected calibration
error (ECE: 15 equal-width bins of the top probability, weighted by their
rows) and accuracy of

* ``SketchedKernelRidgeClassifier()`` (no arguments but ``random_state``):
  its ``predict_proba`` (temperature scaling on leave-one-out scores) and,
  beside it, the plain softmax of its scores (the ``predict_proba`` before
  calibration);
* ``LogisticRegression()`` (scikit-learn's defaults, ``max_iter=5000``) on
  the same features: the model's own standardisation and random Fourier
  features of the training rows; and ``LogisticRegressionCV`` (C in
  10⁰…10⁴, 5 folds, by log-loss) on them: a tuned logistic-loss model.

Prints one Markdown table: mean ± std over seeds, and fit seconds.
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings

import numpy as np


def expected_calibration_error(y: np.ndarray, P: np.ndarray, classes: np.ndarray,
                               bins: int = 15) -> float:
    """Σ_bins (rows in bin / n) · |accuracy − mean top probability| over equal-width bins."""
    conf = P.max(axis=1)
    hit = classes[P.argmax(axis=1)] == y
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1]), 0, bins - 1)
    ece = 0.0
    for b in range(bins):
        sel = which == b
        if sel.any():
            ece += sel.mean() * abs(hit[sel].mean() - conf[sel].mean())
    return float(ece)


def main() -> None:
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    import distsketch as ds
    from distsketch.diagnostics import cpu_model
    from distsketch.estimators.labels import softmax_scores
    from distsketch.estimators.ridge.defaults import standardize_rows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    print(f"# {cpu_model()}, Python {platform.python_version()}, NumPy {np.__version__}")
    print("| table (n × d) | probabilities | log-loss | ECE | accuracy | fit s |")
    print("|---|---|---:|---:|---:|---:|")
    for name, loader in [("digits", load_digits), ("wine", load_wine),
                         ("breast_cancer", load_breast_cancer)]:
        X, y = loader(return_X_y=True)
        res: dict[str, list] = {}
        for seed in range(args.seeds):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed,
                                                  stratify=y)
            t0 = time.perf_counter()
            clf = ds.SketchedKernelRidgeClassifier(random_state=seed).fit(Xtr, ytr)
            t_clf = time.perf_counter() - t0

            def z(M: np.ndarray, clf: object = clf) -> np.ndarray:
                S = standardize_rows(M, clf.x_mean_, clf.x_scale_)  # type: ignore[attr-defined]
                return np.asarray(clf.features_.transform(S))  # type: ignore[attr-defined]

            t0 = time.perf_counter()
            lr = LogisticRegression(max_iter=5000).fit(z(Xtr), ytr)
            t_lr = time.perf_counter() - t0
            t0 = time.perf_counter()
            lrcv = LogisticRegressionCV(Cs=np.logspace(0, 4, 5), cv=5, scoring="neg_log_loss",
                                        max_iter=5000).fit(z(Xtr), ytr)
            t_lrcv = time.perf_counter() - t0
            outs = {
                "distsketch predict_proba (calibrated)": (clf.predict_proba(Xte), t_clf),
                "distsketch softmax of scores (before)": (
                    softmax_scores(clf.decision_function(Xte)), t_clf),
                "LogisticRegression on the same features": (lr.predict_proba(z(Xte)), t_lr),
                "LogisticRegressionCV on the same features": (lrcv.predict_proba(z(Xte)),
                                                              t_lrcv),
            }
            for label, (P, t) in outs.items():
                acc = float(np.mean(clf.classes_[P.argmax(axis=1)] == yte))
                res.setdefault(label, []).append(
                    (log_loss(yte, P, labels=clf.classes_),
                     expected_calibration_error(yte, P, clf.classes_), acc, t))
        for label, rows in res.items():
            a = np.array(rows)
            m, s = a.mean(axis=0), a.std(axis=0)
            print(f"| {name} ({X.shape[0]} × {X.shape[1]}) | {label} | {m[0]:.4f} ± {s[0]:.4f} "
                  f"| {m[1]:.4f} ± {s[1]:.4f} | {m[2]:.4f} | {m[3]:.2f} |")


if __name__ == "__main__":
    main()
