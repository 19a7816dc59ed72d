"""Sizes from an error target: target vs chosen size vs achieved error, every feature map.

On scikit-learn's digits scaled to [0, 1] (1 797 × 64), split by a fixed
permutation into 1 297 fit rows and 500 held-out rows, each public feature map
is fitted with its size ``"auto"`` and ``target_error`` = each target; the table
gives the size chosen, ``kernel_error_`` (the certificate: the fitted map's
relative kernel error ‖K − K̂‖_F / ‖K‖_F on the fit's 500-row evaluation sample),
the same error on the held-out rows against their exact Gram, the number of
sizes the pilot measured and the fit time.  A target the map cannot reach
within its cap shows the ConfigError's numbers instead.

Kernels: rbf with the median-heuristic γ (RFF, GaussianSketch, Nyström), the
linear kernel (CountSketch, SRHT, DatabaseFriendlyProjection), the polynomial
kernel (γ⟨x, y⟩ + 1)² with γ = 1/64 (TensorSketch, TensorSRHT, PolySketch) and
arc-cosine of order 1 (DotProductKernelSketch).

Usage::

    python benchmarks/bench_autosize.py            # targets 0.2, 0.1, 0.05
    python benchmarks/bench_autosize.py --quick    # targets 0.2, 0.1
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits

import distsketch as ds
from distsketch.errors import ConfigError
from distsketch.metrics import model_kernel
from distsketch.ops.kernels import pairwise_kernel

POLY = dict(degree=2, gamma=1 / 64, coef0=1.0)
MAPS = [
    ("RandomFourierFeatures", ds.RandomFourierFeatures(gamma="median")),
    ("RandomFourierFeatures paired", ds.RandomFourierFeatures(gamma="median", form="paired")),
    ("NystromFeatures", ds.NystromFeatures(gamma="median")),
    ("GaussianSketch", ds.GaussianSketch(gamma="median")),
    ("CountSketch", ds.CountSketch()),
    ("SRHT", ds.SRHT()),
    ("DatabaseFriendlyProjection", ds.DatabaseFriendlyProjection()),
    ("TensorSketch", ds.TensorSketch(**POLY)),
    ("TensorSRHT", ds.TensorSRHT(**POLY)),
    ("PolySketch", ds.PolySketch(**POLY)),
    ("DotProductKernelSketch arccos1", ds.DotProductKernelSketch(kernel="arccos1")),
]


def held_out_error(model, rows: np.ndarray) -> float:
    spec = dict(model_kernel(model))
    K = pairwise_kernel(rows, rows, spec.pop("kernel"), **spec)
    return float(np.linalg.norm(K - model.kernel_approx(rows)) / np.linalg.norm(K))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    targets = (0.2, 0.1) if args.quick else (0.2, 0.1, 0.05)
    X = load_digits().data / 16.0
    perm = np.random.default_rng(0).permutation(X.shape[0])
    fit_rows, held = X[perm[:-500]], X[perm[-500:]]
    print("| map | target | size chosen | kernel_error_ | held-out error | sizes measured | fit s |")
    print("|---|---|---|---|---|---|---|")
    for name, est in MAPS:
        param = "n_landmarks" if isinstance(est, ds.NystromFeatures) else "n_components"
        for target in targets:
            model = clone(est).set_params(**{param: "auto"}, target_error=target,
                                          random_state=args.seed)
            t = time.perf_counter()
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model.fit(fit_rows)
            except ConfigError as e:
                print(f"| {name} | {target} | — | — | — | — | {time.perf_counter() - t:.2f} |"
                      f" <!-- {str(e)[:200]} -->")
                continue
            sec = time.perf_counter() - t
            note = " (warned)" if caught else ""
            print(f"| {name} | {target} | {getattr(model, param + '_')} | "
                  f"{model.kernel_error_:.4f}{note} | {held_out_error(model, held):.4f} | "
                  f"{model.pilot_sizes_.size} | {sec:.2f} |", flush=True)


if __name__ == "__main__":
    main()
