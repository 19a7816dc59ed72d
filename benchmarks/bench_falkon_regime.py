"""NystromKernelRidge (Falkon) at growing M: test error, seconds per CG pass against its
flop bound, and memory against the plan.

Run:  python benchmarks/bench_falkon_regime.py [--quick] [--m 250,1000,4000,10000]
          [--rows 1000000] [--store-m 256,1024] [--diamonds PATH] [--json OUT]

1. **Real table**: ``diamonds`` (53 940 rows, 9 features: the 6 numeric ones and cut, colour
   and clarity as their ordinal ranks, standardised; target log price), the largest real
   table available offline here: it ships inside the ``plotnine`` wheel
   (``pip download plotnine --no-deps`` and pass the wheel, or an installed plotnine, or the
   CSV itself, as ``--diamonds``).  Without it, scikit-learn's digits (1 797 rows, target:
   the digit as a number).  80/20 split (seed 0), RBF with γ by the median heuristic,
   λ = 1e-6, tol 1e-6: test RMSE, CG iterations and fit seconds per M, beside scikit-learn's
   ``Nystroem`` + ``Ridge(alpha=λ n)`` at the same M (the same objective with other
   uniform centres; its n × M features are held in memory, so only up to M = 4 000).
2. **Synthetic store**: ``--rows`` rows of 16 standard normal float32 features in a Zarr
   store (read back by every pass), target ``sin(x₀)x₁ + cos(x₂) + ½x₃² + 0.1 ε``, 20 000
   held-out rows.  Per M: test RMSE, iterations, the seconds of one CG pass (best of 2,
   the fit's own ``_h_times``) beside the bound — the pass's kernel-tile GEMM flops
   ``2 n M (d + 2)`` at the GEMM rate measured in this run on the same tile shape, plus
   ``n M`` exponentials at the measured ``exp`` rate, plus ``4 n M t`` flops, divided by
   the cores — and the traced peak of one pass (tracemalloc: NumPy's allocations in all
   threads) against the plan (threads × (fixed + block rows × bytes a row) + the merge).
3. **Driver factors**: the traced peak of Falkon's preconditioner at the largest M
   against the plan ``2 M² s`` (+ one kernel tile).
4. **Extrapolation**: 10⁷ rows, M = 3·10⁴, from the formulas and the rates
   measured here; and the largest M whose factors fit this machine's driver budget.
5. **Scale** (``--sections scale``, not in the default run): a ``--scale-rows`` (10⁷) row
   store of the same 16 features, ``NystromKernelRidge(n_centers=--scale-m)`` (3·10⁴,
   float32 factors) fitted for ``--scale-iters`` CG passes in a fresh process: the peak
   resident memory of that process (``ru_maxrss``) against its memory plan (the driver's
   factors and vectors + task threads × (fixed + block rows × bytes a row) + the
   process's resident size before the fit), seconds for the centres, the factors and
   each pass, and the held-out RMSE after those passes (a CG stopped early, as Falkon's
   ``maxiter``; the residual is printed).

The machine may be shared: rates and timings are measured in the same run, best of
repeats, and the ratio bound / seconds is the number to compare.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
import zipfile
from pathlib import Path

import numpy as np

_ORDER = {
    "cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
    "color": ["J", "I", "H", "G", "F", "E", "D"],
    "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"],
}
_NUMERIC = ["carat", "depth", "table", "x", "y", "z"]


def _diamonds_text(path: str | None) -> str | None:
    """diamonds.csv from a CSV, a plotnine wheel or an installed plotnine (None: not found)."""
    if path is None:
        import importlib.util

        spec = importlib.util.find_spec("plotnine")
        if spec is None or spec.origin is None:
            return None
        path = str(Path(spec.origin).parent / "data" / "diamonds.csv")
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            return z.read("plotnine/data/diamonds.csv").decode()
    return Path(path).read_text()


def real_table(path: str | None, digits: bool = False) -> tuple[str, np.ndarray, np.ndarray]:
    text = None if digits else _diamonds_text(path)
    if text is None:
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return "digits (1797 x 64, target: the digit)", X.astype(np.float64), y.astype(np.float64)
    rows = list(csv.DictReader(io.StringIO(text)))
    X = np.array([[float(r[c]) for c in _NUMERIC] + [_ORDER[c].index(r[c]) for c in _ORDER]
                  for r in rows])
    y = np.log(np.array([float(r["price"]) for r in rows]))
    return f"diamonds ({X.shape[0]} x {X.shape[1]}, target: log price)", X, y


def _split(X: np.ndarray, y: np.ndarray, seed: int = 0):
    idx = np.random.default_rng(seed).permutation(X.shape[0])
    cut = int(0.8 * X.shape[0])
    tr, te = idx[:cut], idx[cut:]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    sd[sd == 0] = 1.0
    return (X[tr] - mu) / sd, y[tr], (X[te] - mu) / sd, y[te]


def _rmse(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def _in_memory_route(shape: tuple[int, int], m: int) -> str:
    """Whether SketchedKernelRidge(NystromFeatures(m)) — the m × m normal equations in each
    task — accepts m on this data and machine ("accepted"), else its refusal."""
    import distsketch as ds
    from distsketch.errors import DistsketchError

    est = ds.SketchedKernelRidge(features=ds.NystromFeatures(n_landmarks=m, random_state=0))
    try:
        est._check_params_for_shape(*shape)
    except DistsketchError as exc:
        return f"refused ({type(exc).__name__}: {str(exc).split(';')[0][:150]})"
    return "accepted"


def bench_real(path: str | None, ms: list[int], lam: float, sk_max: int,
               digits: bool = False, factor_dtype: str = "auto") -> dict:
    import distsketch as ds
    from distsketch.estimators.kernel_params import median_gamma

    name, X, y = real_table(path, digits)
    Xtr, ytr, Xte, yte = _split(X, y)
    gamma = median_gamma(Xtr)
    mean = float(ytr.mean())  # no intercept in the objective: the target is centred
    rows = []
    for m in ms:
        if m > Xtr.shape[0]:
            continue
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            est = ds.NystromKernelRidge(n_centers=m, gamma=gamma, alpha=lam, tol=1e-6,
                                        max_iter=200, factor_dtype=factor_dtype,
                                        random_state=0).fit(Xtr, ytr - mean)
        row = {"M": m, "rmse": _rmse(est.predict(Xte) + mean, yte), "iters": est.n_iter_,
               "seconds": time.perf_counter() - t0, "factor_dtype": est.factor_dtype_,
               "converged": bool(est.converged_), "residual": float(est.residuals_[-1]),
               "jitter": float(est.jitter_),
               "distinct_centres": int(np.unique(est.centers_, axis=0).shape[0]),
               "in_memory": _in_memory_route(Xtr.shape, m)}
        if m <= sk_max:
            from sklearn.kernel_approximation import Nystroem
            from sklearn.linear_model import Ridge

            t0 = time.perf_counter()
            nys = Nystroem(gamma=gamma, n_components=m, random_state=0).fit(Xtr)
            rid = Ridge(alpha=lam * Xtr.shape[0], fit_intercept=False).fit(nys.transform(Xtr),
                                                                          ytr - mean)
            row["sk_rmse"] = _rmse(rid.predict(nys.transform(Xte)) + mean, yte)
            row["sk_seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(f"  M={m:6d}: test RMSE {row['rmse']:.4f} in {row['iters']} iterations (residual "
              f"{row['residual']:.1e}, {row['distinct_centres']} distinct centres, jitter "
              f"{row['jitter']:.0e}), {row['seconds']:.1f} s ({row['factor_dtype']} factors)"
              + (f"; sklearn Nystroem+Ridge {row['sk_rmse']:.4f} in {row['sk_seconds']:.1f} s"
                 if "sk_rmse" in row else "") + f"; in-memory route: {row['in_memory']}", flush=True)
    return {"table": name, "n_train": int(Xtr.shape[0]), "gamma": gamma, "lam": lam, "rows": rows}


def measured_rates(M: int, d: int, repeat: int = 3) -> dict:
    """Single-threaded GEMM flop rate on the pass's own tile shape and exp rate."""
    from threadpoolctl import threadpool_limits

    from distsketch.ops.falkon import tile_rows_for

    r = tile_rows_for(M)
    rng = np.random.default_rng(0)
    left, right = rng.normal(size=(r, d + 2)), rng.normal(size=(M, d + 2)) * 0.01
    buf = np.empty((r, M))
    V = rng.normal(size=(M, 1))
    best = {"gemm": np.inf, "exp": np.inf, "apply": np.inf}
    with threadpool_limits(1):
        for _ in range(repeat):
            t0 = time.perf_counter()
            np.matmul(left, right.T, out=buf)
            t1 = time.perf_counter()
            np.exp(buf, out=buf)
            t2 = time.perf_counter()
            _ = buf.T @ (buf @ V)
            t3 = time.perf_counter()
            best = {"gemm": min(best["gemm"], t1 - t0), "exp": min(best["exp"], t2 - t1),
                    "apply": min(best["apply"], t3 - t2)}
    return {"gemm_flops_per_s": 2 * r * M * (d + 2) / best["gemm"],
            "exp_per_s": r * M / best["exp"], "apply_flops_per_s": 4 * r * M / best["apply"],
            "tile_rows": r}


def pass_bound(n: int, M: int, d: int, t: int, rates: dict, cores: int) -> float:
    from distsketch.ops.falkon import falkon_pass_flops

    f = falkon_pass_flops(n, M, d, t)
    return (f["gemm"] / rates["gemm_flops_per_s"] + f["exp"] / rates["exp_per_s"]
            + f["apply"] / rates["apply_flops_per_s"]) / cores


def _target(X: np.ndarray, rng) -> np.ndarray:
    X = X.astype(np.float64)
    return np.sin(X[:, 0]) * X[:, 1] + np.cos(X[:, 2]) + 0.5 * X[:, 3] ** 2 \
        + 0.1 * rng.normal(size=X.shape[0])


def bench_store(n: int, ms: list[int], lam: float, workdir: str, repeat: int,
                tol: float = 1e-4) -> dict:
    import distsketch as ds
    from distsketch.graph import cluster_resources, last_plan, record_plans
    from distsketch.io import open_array, write_array

    d, cores = 16, int(cluster_resources().threads)
    rng = np.random.default_rng(1)
    path = os.path.join(workdir, "falkon_x.zarr")
    X = rng.standard_normal((n, d), dtype=np.float32)
    y = _target(X, rng)
    t0 = time.perf_counter()
    write_array(X, path, chunk_rows=min(n, 100_000), overwrite=True)
    write_s = time.perf_counter() - t0
    del X
    Xte = rng.standard_normal((20_000, d), dtype=np.float32)
    yte = _target(Xte, rng)
    print(f"  store: {n} rows x {d} float32 ({n * d * 4 / 2**20:.0f} MiB) written in "
          f"{write_s:.1f} s; {cores} task threads", flush=True)
    rows = []
    for m in ms:
        rates = measured_rates(m, d)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            est = ds.NystromKernelRidge(n_centers=m, gamma=1.0 / d, alpha=lam, tol=tol,
                                        max_iter=100, random_state=0).fit(path, y)
        fit_s = time.perf_counter() - t0
        Xs = open_array(path)
        P = np.random.default_rng(2).normal(size=(m, 1))
        best = np.inf
        peak = 0
        for _ in range(repeat):
            tracemalloc.start()
            t1 = time.perf_counter()
            with record_plans():
                est._h_times(Xs, est.centers_, P)
                plan = last_plan()
            best = min(best, time.perf_counter() - t1)
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        mp = est.memory_plan_
        planned = int(min(cores, plan.n_blocks) * (mp["task_fixed"] + plan.block_rows
                                                   * mp["task_per_row"])
                      + (plan.merge_bytes or 0))
        bound = pass_bound(n, m, d, 1, rates, cores)
        row = {"M": m, "rmse": _rmse(est.predict(Xte), yte), "iters": est.n_iter_,
               "fit_seconds": fit_s, "pass_seconds": best, "bound_seconds": bound,
               "bound_over_measured": bound / best, "pass_peak_bytes": int(peak),
               "pass_plan_bytes": planned, "block_rows": int(plan.block_rows),
               "n_blocks": int(plan.n_blocks), "rates": rates}
        rows.append(row)
        print(f"  M={m:6d}: test RMSE {row['rmse']:.4f}, {row['iters']} iterations, fit "
              f"{fit_s:.1f} s; one pass {best:.2f} s vs bound {bound:.2f} s "
              f"(bound/measured {bound / best:.2f}); pass peak {peak / 2**20:.1f} MiB vs plan "
              f"{planned / 2**20:.1f} MiB ({plan.n_blocks} blocks of {plan.block_rows} rows)",
              flush=True)
    return {"rows_in_store": n, "n_features": d, "cores": cores, "rows": rows}


def bench_factors(M: int, d: int, lam: float) -> dict:
    from threadpoolctl import threadpool_limits

    from distsketch.ops.falkon import falkon_memory, falkon_preconditioner

    C = np.random.default_rng(3).normal(size=(M, d))
    out = {}
    for dtype in (np.float64, np.float32):
        tracemalloc.start()
        t0 = time.perf_counter()
        with threadpool_limits(1):  # as in fit, which runs BLAS on one thread
            T, A, _ = falkon_preconditioner(C, "rbf", {"gamma": 1.0 / d}, lam, dtype)
        secs = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del T, A
        plan = falkon_memory(M, d, 1, np.dtype(dtype).itemsize)
        # the driver's part besides the factors: the kernel tile (the CG vectors come later)
        planned = plan["factors"] + 8 * plan["tile_rows"] * M
        out[np.dtype(dtype).name] = {"seconds": secs, "peak_bytes": int(peak),
                                     "plan_bytes": int(planned)}
        print(f"  factors M={M} {np.dtype(dtype).name}: {secs:.1f} s, traced peak "
              f"{peak / 2**20:.1f} MiB vs plan {planned / 2**20:.1f} MiB", flush=True)
    return {"M": M, **out}


def extrapolate(rates: dict, factor_seconds: dict, M_measured: int, cores: int) -> dict:
    from distsketch.estimators.solvers.falkon import driver_memory_budget
    from distsketch.ops.falkon import falkon_memory

    n, M, d = 10**7, 30000, 16
    plan32 = falkon_memory(M, d, 1, 4)
    budget, source = driver_memory_budget()
    largest = {s: int(np.floor(np.sqrt(budget / (2 * s)))) for s in (8, 4)}
    per_pass = pass_bound(n, M, d, 1, rates, cores)
    scale = (M / M_measured) ** 3
    out = {"n": n, "M": M, "d": d, "driver_bytes_float32": plan32["driver"],
           "driver_bytes_float64": falkon_memory(M, d, 1, 8)["driver"],
           "task_fixed_bytes": plan32["task_fixed"], "pass_bound_seconds": per_pass,
           "factor_seconds_float32": factor_seconds["float32"]["seconds"] * scale,
           "factor_seconds_float64": factor_seconds["float64"]["seconds"] * scale,
           "driver_budget_bytes": budget, "driver_budget_source": source,
           "largest_M_float64": largest[8], "largest_M_float32": largest[4]}
    print(f"  NOT RUN: n=10^7, M=3*10^4, d={d}: driver {plan32['driver'] / 2**30:.1f} GiB "
          f"(float32 factors; float64: {out['driver_bytes_float64'] / 2**30:.1f} GiB), a task "
          f"{plan32['task_fixed'] / 2**20:.0f} MiB fixed; one pass >= {per_pass / 60:.1f} min "
          f"at this run's rates on {cores} cores; the factors ~{out['factor_seconds_float32'] / 60:.0f} "
          f"min (float32, M^3 scaling from M={M_measured}).  Driver budget "
          f"{budget / 2**30:.1f} GiB ({source}): largest M {largest[8]} (float64 factors), "
          f"{largest[4]} (float32).", flush=True)
    return out


def _scale_store(n: int, workdir: str) -> tuple[str, str, str]:
    """A ``n × 16`` float32 store written block by block, its targets and 20 000 test rows."""
    import dask.array as da

    from distsketch.io import open_array, write_array

    d, rows = 16, 250_000
    path = os.path.join(workdir, "scale_x.zarr")
    X = da.random.default_rng(11).standard_normal((n, d), chunks=(rows, d), dtype=np.float32)
    t0 = time.perf_counter()
    write_array(X, path, chunk_rows=rows, overwrite=True)
    Xs = open_array(path)
    rng = np.random.default_rng(12)
    y = np.concatenate([_target(np.asarray(Xs[i:i + rows]), rng) for i in range(0, n, rows)])
    np.save(os.path.join(workdir, "scale_y.npy"), y)
    Xte = rng.standard_normal((20_000, d), dtype=np.float32)
    np.savez(os.path.join(workdir, "scale_test.npz"), X=Xte, y=_target(Xte, rng))
    print(f"  store: {n} rows x {d} float32 ({n * d * 4 / 2**30:.2f} GiB) in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    return path, os.path.join(workdir, "scale_y.npy"), os.path.join(workdir, "scale_test.npz")


def _scale_child(path: str, ypath: str, tpath: str, M: int, iters: int, lam: float) -> dict:
    """The fit of section 5, in this (fresh) process; returns its measurements."""
    import logging

    import distsketch as ds
    from distsketch.graph import cluster_resources, last_plan, record_plans

    y = np.load(ypath)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    passes: list[float] = []

    class _Passes(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "pass %d in" in str(record.msg):
                passes.append(float(record.args[2]))  # type: ignore[index]

    log = logging.getLogger("distsketch")
    log.addHandler(_Passes())
    log.setLevel(logging.INFO)
    est = ds.NystromKernelRidge(n_centers=M, gamma=1.0 / 16, alpha=lam, tol=1e-6,
                                max_iter=iters, verbose=1, random_state=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings(), record_plans():
        warnings.simplefilter("ignore", RuntimeWarning)
        est.fit(path, y)
        plan = last_plan()
    fit_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    test = np.load(tpath)
    mp, threads = est.memory_plan_, int(cluster_resources().threads)
    tasks = int(min(threads, plan.n_blocks) * (mp["task_fixed"] + plan.block_rows
                                               * mp["task_per_row"]))
    return {"n": int(y.shape[0]), "M": M, "iters": int(est.n_iter_),
            "residual": float(est.residuals_[-1]), "factor_dtype": est.factor_dtype_,
            "fit_seconds": fit_s, "pass_seconds": passes, "rmse": _rmse(est.predict(test["X"]),
                                                                        test["y"]),
            "peak_rss_bytes": int(peak), "rss_before_fit_bytes": int(base),
            "plan_driver_bytes": int(mp["driver"]), "plan_tasks_bytes": tasks,
            "plan_bytes": int(base + mp["driver"] + tasks + (plan.merge_bytes or 0)),
            "block_rows": int(plan.block_rows), "threads": threads}


def bench_scale(n: int, M: int, iters: int, lam: float, workdir: str) -> dict:
    path, ypath, tpath = _scale_store(n, workdir)
    out = os.path.join(workdir, "scale.json")
    subprocess.run([sys.executable, __file__, "--scale-child", json.dumps(
        [path, ypath, tpath, M, iters, lam, out])], check=True)
    r = json.loads(Path(out).read_text())
    # the pass's flop bound at rates measured now, in this run, on the pass's tile shape
    r["rates"] = measured_rates(M, 16)
    r["bound_seconds"] = pass_bound(r["n"], M, 16, 1, r["rates"], r["threads"])
    gib = 2.0**30
    print(f"  n={r['n']}, M={r['M']} ({r['factor_dtype']} factors), {r['threads']} task threads, "
          f"blocks of {r['block_rows']} rows: fit {r['fit_seconds'] / 60:.1f} min for "
          f"{r['iters']} passes (relative residual {r['residual']:.1e}); passes "
          + ", ".join(f"{s:.1f}" for s in r["pass_seconds"])
          + f" s (bound {r['bound_seconds']:.1f} s); held-out RMSE "
          f"{r['rmse']:.4f}; peak RSS {r['peak_rss_bytes'] / gib:.2f} GiB vs plan "
          f"{r['plan_bytes'] / gib:.2f} GiB (driver {r['plan_driver_bytes'] / gib:.2f}, tasks "
          f"{r['plan_tasks_bytes'] / gib:.2f}, before the fit {r['rss_before_fit_bytes'] / gib:.2f})",
          flush=True)
    return r


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke test)")
    ap.add_argument("--m", default="250,1000,4000,10000", help="M on the real table")
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the synthetic store")
    ap.add_argument("--store-m", default="256,1024", help="M on the synthetic store")
    ap.add_argument("--store-tol", type=float, default=1e-4, help="CG tol on the store")
    ap.add_argument("--factor-m", type=int, default=6000, help="M of the factor memory check")
    ap.add_argument("--alpha", type=float, default=1e-6)
    ap.add_argument("--factor-dtype", default="auto", choices=["auto", "float64", "float32"],
                    help="the real table's preconditioner factors (default auto)")
    ap.add_argument("--diamonds", default=None, help="diamonds.csv or a plotnine wheel")
    ap.add_argument("--digits", action="store_true", help="digits even where diamonds exists")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--sections", default="real,store,factors",
                    help="which of real, store, factors, scale to run (the extrapolation needs "
                         "store and factors)")
    ap.add_argument("--scale-rows", type=float, default=1e7, help="rows of section 5's store")
    ap.add_argument("--scale-m", type=int, default=30000, help="M of section 5")
    ap.add_argument("--scale-iters", type=int, default=3, help="CG passes of section 5")
    ap.add_argument("--workdir", default=None, help="folder for section 5's store")
    ap.add_argument("--scale-child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.scale_child:
        *args, out = json.loads(a.scale_child)
        Path(out).write_text(json.dumps(_scale_child(*args)))
        return {}
    if a.quick:
        a.m, a.rows, a.store_m, a.factor_m, a.repeat = "50,200", 10_000, "100,400", 300, 1
    import platform

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores",
          flush=True)
    results: dict = {}
    run = set(a.sections.split(","))
    if "real" in run:
        print("1. real table", flush=True)
        results["real"] = bench_real(a.diamonds, [int(v) for v in a.m.split(",")], a.alpha,
                                     sk_max=4000, digits=a.digits or a.quick,
                                     factor_dtype=a.factor_dtype)
    if "store" in run:
        print("2. synthetic store", flush=True)
        with tempfile.TemporaryDirectory(prefix="falkon-bench-") as work:
            results["store"] = bench_store(a.rows, [int(v) for v in a.store_m.split(",")],
                                           a.alpha, work, a.repeat, a.store_tol)
    if "factors" in run:
        print("3. driver factors", flush=True)
        results["factors"] = bench_factors(a.factor_m, 16, a.alpha)
    if "store" in run and "factors" in run:
        print("4. extrapolation", flush=True)
        last = results["store"]["rows"][-1]
        results["extrapolation"] = extrapolate(last["rates"], results["factors"], a.factor_m,
                                               results["store"]["cores"])
    if "scale" in run:
        print("5. scale", flush=True)
        with tempfile.TemporaryDirectory(prefix="falkon-scale-", dir=a.workdir) as work:
            results["scale"] = bench_scale(int(a.scale_rows), a.scale_m, a.scale_iters,
                                           a.alpha, work)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
