"""Hash every public estimator's results, to prove a refactoring changed no bit.

Each estimator of the scikit-learn conformance list (``tests/estimators/
test_sklearn_conformance.py``) is fitted on fixed data given as a NumPy array
and as a Dask array in uneven blocks; its learned arrays and numbers and its
``transform`` / ``predict`` / ``decision_function`` outputs are hashed
(SHA-256 of the bytes, dtype and shape).  Run it on the code before and after
a change and compare::

    python benchmarks/result_hashes.py --out before.json       # on the old tree
    python benchmarks/result_hashes.py --compare before.json   # on the new tree

``--compare`` exits 1 and lists every differing entry.  The hashes hold on
one machine and BLAS kernel; across machines compare only runs made on the
same one.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _cases() -> list[Any]:
    path = ROOT / "tests" / "estimators" / "test_sklearn_conformance.py"
    spec = importlib.util.spec_from_file_location("_conformance_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CASES)


def _digest(value: Any) -> str:
    a = np.asarray(value)
    if hasattr(value, "compute"):
        a = np.asarray(value.compute())
    if a.dtype == object:
        return hashlib.sha256(repr(a.tolist()).encode()).hexdigest()
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _data(kind: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 6))
    if kind == "classifier":
        y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    else:
        y = X[:, 0] - 2.0 * X[:, 2] + 0.1 * rng.normal(size=400)
    return X, y


def _hashes(est: Any, X: Any, y: Any, Xt: np.ndarray) -> dict[str, str]:
    from sklearn.base import clone

    est = clone(est)
    est.fit(X, y)  # unsupervised estimators ignore y; RoundedExpansion takes coefficients
    out = {f"attr:{k}": _digest(v) for k, v in sorted(vars(est).items())
           if k.endswith("_") and not k.startswith("_") and "seconds" not in k  # timings
           and isinstance(v, (np.ndarray, int, float, np.number)) and not isinstance(v, bool)}
    for method in ("transform", "predict", "decision_function"):
        if hasattr(est, method):
            try:
                out[method] = _digest(getattr(est, method)(Xt))
            except (AttributeError, NotImplementedError):
                continue
    return out


def collect() -> dict[str, dict[str, str]]:
    import dask.array as da
    from sklearn.base import is_classifier

    result: dict[str, dict[str, str]] = {}
    for i, est in enumerate(_cases()):
        X, y = _data("classifier" if is_classifier(est) else "regressor")
        Xt = X[:50]
        name = f"{i:02d}-{type(est).__name__}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result[f"{name}/numpy"] = _hashes(est, X, y, Xt)
            Xd = da.from_array(X, chunks=((150, 130, 120), (6,)))
            yd = da.from_array(y, chunks=((150, 130, 120),))
            result[f"{name}/dask"] = _hashes(est, Xd, yd, Xt)
        print(name, "done", file=sys.stderr)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write the hashes to this JSON file")
    group.add_argument("--compare", type=Path, help="compare with hashes written by --out")
    args = parser.parse_args()
    now = collect()
    if args.out:
        args.out.write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"{sum(len(v) for v in now.values())} hashes of {len(now)} fits -> {args.out}")
        return 0
    before = json.loads(args.compare.read_text())
    diffs = [f"{case} {key}" for case in sorted(set(before) | set(now))
             for key in sorted(set(before.get(case, {})) | set(now.get(case, {})))
             if before.get(case, {}).get(key) != now.get(case, {}).get(key)]
    n = sum(len(v) for v in now.values())
    print(f"{len(diffs)} differences in {n} hashes of {len(now)} fits")
    for line in diffs:
        print("  ", line)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
