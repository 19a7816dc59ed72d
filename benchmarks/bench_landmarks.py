"""Nyström landmarks at equal M: uniform, k-means, ridge leverage, RPCholesky.

Run:  python benchmarks/bench_landmarks.py [--quick] [--seeds 5]

On scikit-learn's bundled tables (digits, wine, breast_cancer, diabetes;
standardised columns, 75/25 train/test split fixed per seed), for each
landmark choice of ``NystromFeatures`` at the same M and the same RBF γ:

* kernel error: ‖K − K̃‖_F / ‖K‖_F and tr(K − K̃) / tr(K) on the training rows
  (K̃ = Z Zᵀ of the fitted features, the exact Gram from
  ``distsketch.ops.kernels.pairwise_kernel``);
* KRR: ridge on the Nyström features (the ridge α chosen by scikit-learn's
  ``RidgeCV`` / ``RidgeClassifierCV`` leave-one-out on the training rows, from
  10⁻⁶ … 10²): test accuracy (classification tables) or test R² (diabetes).

γ is 1/d ("default", distsketch's default) and 10/d ("narrow": a peaked
kernel, where rows differ most in leverage).  Mean ± standard deviation
over ``--seeds`` seeds (landmark seed and split seed).  ``--quick`` runs
wine and diabetes at one M with one seed (the smoke test).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine
from sklearn.linear_model import RidgeClassifierCV, RidgeCV
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from distsketch import NystromFeatures
from distsketch.ops.kernels import pairwise_kernel

CHOICES = ("uniform", "kmeans", "leverage", "rpcholesky")
ALPHAS = np.logspace(-6, 2, 9)
# table -> (loader, task, landmark counts M)
TABLES: dict[str, tuple[Callable, str, tuple[int, ...]]] = {
    "digits": (load_digits, "class", (50, 100, 200)),
    "wine": (load_wine, "class", (10, 20, 40)),
    "breast_cancer": (load_breast_cancer, "class", (20, 50, 100)),
    "diabetes": (load_diabetes, "reg", (20, 50, 100)),
}


def run_one(X: np.ndarray, y: np.ndarray, task: str, how: str, m: int, gamma: float,
            seed: int) -> dict:
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed,
                                          stratify=y if task == "class" else None)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    t0 = time.perf_counter()
    f = NystromFeatures(gamma=gamma, n_landmarks=m, landmarks=how, random_state=seed).fit(Xtr)
    fit_s = time.perf_counter() - t0
    Ztr, Zte = f.transform(Xtr), f.transform(Xte)
    K = pairwise_kernel(Xtr, None, "rbf", gamma=gamma)
    R = K - Ztr @ Ztr.T
    model = (RidgeClassifierCV(alphas=ALPHAS) if task == "class" else RidgeCV(alphas=ALPHAS))
    model.fit(Ztr, ytr)
    return {"fro": float(np.linalg.norm(R) / np.linalg.norm(K)),
            "trace": float(np.trace(R) / np.trace(K)),
            "score": float(model.score(Zte, yte)), "fit_s": fit_s}


def run(tables: dict, seeds: int, gammas: tuple[str, ...], only_first_m: bool = False) -> list[dict]:
    rows = []
    for name, (loader, task, ms) in tables.items():
        X, y = loader(return_X_y=True)
        X = np.asarray(X, dtype=np.float64)
        for gname in gammas:
            gamma = (1.0 if gname == "default" else 10.0) / X.shape[1]
            for m in ms[:1] if only_first_m else ms:
                for how in CHOICES:
                    res = [run_one(X, y, task, how, m, gamma, s) for s in range(seeds)]
                    row = {"table": name, "n": X.shape[0], "d": X.shape[1], "gamma": gname,
                           "m": m, "how": how, "task": task}
                    for key in ("fro", "trace", "score", "fit_s"):
                        vals = np.array([r[key] for r in res])
                        row[key], row[key + "_sd"] = float(vals.mean()), float(vals.std())
                    rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    out = ["| table (n × d) | γ | M | landmarks | ‖K−K̃‖_F/‖K‖_F | tr(K−K̃)/tr K | test score | fit s |",
           "|---|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        score = "acc" if r["task"] == "class" else "R²"
        out.append(
            f"| {r['table']} ({r['n']} × {r['d']}) | {r['gamma']} | {r['m']} | {r['how']} | "
            f"{r['fro']:.4f} ± {r['fro_sd']:.4f} | {r['trace']:.4f} ± {r['trace_sd']:.4f} | "
            f"{score} {r['score']:.4f} ± {r['score_sd']:.4f} | {r['fit_s']:.2f} |")
    return "\n".join(out)


def verdicts(rows: list[dict]) -> str:
    """Where leverage and RPCholesky beat uniform (kernel error, test score), cell by cell."""
    lines = []
    for how in ("leverage", "rpcholesky", "kmeans"):
        wins_err = wins_score = total = 0
        losses = []
        for r in rows:
            if r["how"] != how:
                continue
            u = next(x for x in rows if x["how"] == "uniform" and
                     (x["table"], x["gamma"], x["m"]) == (r["table"], r["gamma"], r["m"]))
            total += 1
            wins_err += r["fro"] < u["fro"]
            wins_score += r["score"] > u["score"]
            if r["fro"] >= u["fro"]:
                losses.append(f"{r['table']}/{r['gamma']}/M={r['m']}")
        lines.append(f"{how}: lower kernel error than uniform in {wins_err}/{total} cells, "
                     f"higher test score in {wins_score}/{total}; not lower error: "
                     f"{', '.join(losses) or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="wine and diabetes, one M, one seed")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    if args.quick:
        tables = {k: TABLES[k] for k in ("wine", "diabetes")}
        rows = run(tables, 1, ("default",), only_first_m=True)
    else:
        rows = run(TABLES, args.seeds, ("default", "narrow"))
    print(table(rows))
    print()
    print(verdicts(rows))
    return rows


if __name__ == "__main__":
    main()
