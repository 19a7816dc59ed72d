"""``distsketch quickstart``: the main job end to end on the embedded defaults.

1. generate the RandomNoisy data set (A = S·D·U + F/ζ, s = 50, ζ = 10) into a
   local Zarr directory store (reused when already complete);
2. start the embedded local Dask cluster (one worker process per core), or
   connect to the scheduler that --cluster or DASK_SCHEDULER_ADDRESS names;
3. choose gamma by the median heuristic, gamma = 1 / median ‖xᵢ − xⱼ‖² over
   1000 sampled rows (a typical pair then has kernel value e⁻¹);
4. fit StreamingKernelPCA (m random Fourier features, Frequent Directions
   sketch of ℓ rows) out of core and save the model;
5. write the k-dimensional embeddings to Zarr;
6. report rows, time per stage, peak memory of the whole process tree (and of
   the workers) and the kernel spectral and Frobenius errors against the
   exact Gaussian kernel on a row sample, normalised as in Ghashami et al.
   (2016): ‖G − G̃‖₂/s and ‖G − G̃‖_F/s².
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from distsketch.cli.common import (
    add_common_options,
    apply_progress,
    check_before_cluster,
    cluster,
    median_gamma,
    stage,
)
from distsketch.cli.output import finish
from distsketch.errors import ConfigError, StoreError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "quickstart", help="generate RandomNoisy data, fit streaming kernel PCA out of core, "
                           "write embeddings, report time, memory and kernel errors",
        description=__doc__.split("\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows n (default 1000000)")
    p.add_argument("--features", type=int, default=100, help="columns d (default 100)")
    p.add_argument("--out", default="distsketch-quickstart",
                   help="working folder for data.zarr, model.zarr, embeddings.zarr, report.json "
                        "(default ./distsketch-quickstart)")
    p.add_argument("--n-random-features", type=int, default=1024,
                   help="random Fourier features m (default 1024)")
    p.add_argument("--sketch-size", type=int, default=64,
                   help="Frequent Directions sketch rows l (default 64)")
    p.add_argument("--n-components", type=int, default=10, help="components k (default 10)")
    p.add_argument("--chunk-rows", type=int, default=25_000,
                   help="rows per Zarr chunk and per task (default 25000)")
    p.add_argument("--n-sample", type=int, default=2000,
                   help="rows sampled for the kernel errors (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of data and sketch (default 0)")
    add_common_options(p, overwrite=False)
    p.add_argument("--overwrite", action="store_true",
                   help="also replace distsketch stores in --out that quickstart did not write "
                        "(e.g. a model you fitted into --out/model.zarr); without it only "
                        "quickstart's own outputs are replaced")
    p.set_defaults(func=run)
    return p


def _data_is_complete(path: Path, rows: int, features: int, seed: int) -> bool:
    from distsketch.io.arrays.access import open_zarr
    from distsketch.io.commit.manifest import read_manifest

    info = read_manifest(path) if path.exists() else None
    if not info or info.get("generator") != "random_noisy":
        return False
    try:
        arr = open_zarr(path)
    except Exception:
        return False
    # data written before the one output layout had other dimension names: rewrite it
    dims = tuple(getattr(arr.metadata, "dimension_names", None) or ())
    return (tuple(arr.shape) == (rows, features) and str(arr.dtype) == "float32"
            and info.get("random_state") == seed and dims == ("sample", "feature"))


def _check_args(args: argparse.Namespace) -> None:
    for name in ("rows", "features", "n_random_features", "sketch_size", "n_components", "chunk_rows"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1; got "
                              f"{getattr(args, name)}.")
    if args.features < 50:
        raise ConfigError(f"--features {args.features}: RandomNoisy has a 50-dimensional signal, "
                          "so use at least 50 features.")
    if args.n_sample < 2:
        raise ConfigError(f"--n-sample must be >= 2; got {args.n_sample}.")
    limit = min(args.sketch_size, args.n_random_features)
    if args.n_components > limit:
        # the fit would refuse it only after the data was generated
        raise ConfigError(f"--n-components {args.n_components} exceeds min(--sketch-size, "
                          f"--n-random-features) = {limit}; lower it or raise those.")


#: what quickstart writes into --out, and the role each has in its manifest's ``quickstart`` key
_OUTPUTS = {"data.zarr": "data", "model.zarr": "model", "embeddings.zarr": "embeddings"}
#: manifest key (stores) and report key (report.json) that mark quickstart's own outputs
_MARK = "quickstart"
_REPORT_KEY = "distsketch_quickstart"


def _check_out(out: Path, overwrite: bool = False) -> None:
    """Refuse, before anything is written, an --out whose outputs quickstart did not write
    (with ``overwrite``: that distsketch did not write)."""
    from distsketch.io.storage.safety import check_replaceable

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is an existing file; quickstart needs a folder.")
    for name in _OUTPUTS:
        path = out / name
        check_replaceable(path)
        if path.exists() and not overwrite and not _is_ours(path):
            raise StoreError(f"{path} is a distsketch store that quickstart did not write (its "
                             f"manifest has no {_MARK!r} mark); it is not replaced. Move it away, "
                             "choose another --out, or pass --overwrite to replace it.")
    report = out / "report.json"
    if report.is_symlink() or (report.exists() and not _is_our_report(report)):
        raise StoreError(f"{report} exists and was not written by distsketch quickstart; it is "
                         "never replaced. Move it away or choose another --out.")


def _is_ours(path: Path) -> bool:
    """Whether the store ``path`` is the one quickstart wrote there (its manifest's mark)."""
    from distsketch.io.commit.manifest import read_manifest

    try:
        info = read_manifest(path) or {}
    except (OSError, ValueError):
        return False
    return info.get(_MARK) == _OUTPUTS.get(path.name)


def _mark(path: Path) -> None:
    """Mark the committed store ``path`` as quickstart's own (a key in its manifest)."""
    from distsketch.io.commit.manifest import read_manifest, write_manifest

    info = read_manifest(path) or {}
    write_manifest(path, info | {_MARK: _OUTPUTS[path.name]})


def _is_our_report(path: Path) -> bool:
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    # reports written before the key existed are recognised by their fields
    return isinstance(body, dict) and (body.get(_REPORT_KEY) is True
                                       or {"kernel_errors", "data_reused"} <= body.keys())


def _model(args: argparse.Namespace, gamma: float | None) -> Any:
    from distsketch.estimators.decomposition.streaming_kpca import StreamingKernelPCA

    return StreamingKernelPCA(n_components=args.n_components, gamma=gamma,
                              n_random_features=args.n_random_features,
                              sketch_size=args.sketch_size, method="fd", random_state=args.seed)


def _cluster_used(spec: str | None, client: Any) -> str:
    """What ran the job: the --cluster given, else the configured scheduler's address or local."""
    if spec is not None:
        return str(spec)
    from distsketch.cluster import configured_scheduler_address

    configured = configured_scheduler_address()
    if configured is None:
        return "local"
    address = getattr(getattr(client, "scheduler", None), "address", None)
    return str(address or configured[0])


def run(args: argparse.Namespace) -> int:
    from distsketch.diagnostics import PeakMemory, format_bytes
    from distsketch.io import open_array, write_array
    from distsketch.metrics import kernel_errors

    out, show = _prepare(args)
    data, model_path, emb_path = out / "data.zarr", out / "model.zarr", out / "embeddings.zarr"
    times: dict[str, float] = {}
    t_all = time.perf_counter()
    with PeakMemory() as pm:
        t0 = time.perf_counter()
        with cluster(args) as client:
            times["start cluster"] = time.perf_counter() - t0
            workers = (len(client.scheduler_info().get("workers", {})) if client is not None
                       else 0)
            used = _cluster_used(args.cluster, client)

            reused = _make_data(args, data, show, times)
            X = open_array(data, block_rows=args.chunk_rows)
            model, gamma = _fit_model(args, X, data, model_path, times)

            t0 = time.perf_counter()
            stage(f"[4/5] writing embeddings -> {emb_path}")
            write_array(model.transform(X), emb_path, chunk_rows=args.chunk_rows,
                        overwrite=True, progress=show,
                        manifest={"model": str(model_path), "input": str(data),
                                  _MARK: _OUTPUTS["embeddings.zarr"]})
            times["embed"] = time.perf_counter() - t0

            t0 = time.perf_counter()
            stage(f"[5/5] kernel errors against the exact kernel on {args.n_sample} sampled rows")
            errs = kernel_errors(X, model, "rbf", gamma=gamma, n_sample=args.n_sample,
                                 random_state=args.seed)
            times["evaluate"] = time.perf_counter() - t0
    total = time.perf_counter() - t_all
    report: dict[str, Any] = {
        _REPORT_KEY: True, "rows": args.rows, "features": args.features, "data": str(data),
        "data_reused": reused,
        "model": str(model_path), "embeddings": str(emb_path), "cluster": used,
        "workers": workers, "gamma": gamma,
        "n_random_features": args.n_random_features,
        "sketch_size": args.sketch_size, "n_components": args.n_components,
        "seconds": {k: round(v, 3) for k, v in times.items()} | {"total": round(total, 3)},
        "fit_rows_per_second": args.rows / times["fit"] if times["fit"] > 0 else None,
        "peak_memory_bytes": pm.peak_bytes, "workers_peak_memory_bytes": pm.workers_peak_bytes,
        "kernel_errors": errs,
    }
    _write_report(out, report, args.overwrite)
    finish({"command": "quickstart", "report": str(out / "report.json"), **report},
           _report_lines(report, pm.peak_bytes, format_bytes))
    return 0


def _prepare(args: argparse.Namespace) -> tuple[Path, Any]:
    """Check everything before data or a cluster exist, create --out; ``(out, progress)``."""
    _check_args(args)
    # the model's own checks too, before data or a cluster exist (gamma is chosen later)
    check_before_cluster(_model(args, gamma=None), args.rows, args.features)
    show = apply_progress(args)
    out = Path(os.path.normpath(os.path.abspath(os.path.expanduser(args.out))))  # Q/sub/.. is Q
    _check_out(out, args.overwrite)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder --out {out}: {exc}.") from exc
    return out, show


def _make_data(args: argparse.Namespace, data: Path, show: Any, times: dict[str, float]) -> bool:
    """Stage 1: generate the RandomNoisy data at ``data``, or reuse it; whether it was reused."""
    from distsketch.datasets import make_random_noisy_zarr

    t0 = time.perf_counter()
    reused = _data_is_complete(data, args.rows, args.features, args.seed)
    if reused:
        stage(f"[1/5] reusing RandomNoisy data at {data}")
    else:
        stage(f"[1/5] generating RandomNoisy {args.rows} x {args.features} float32 "
              f"({args.rows * args.features * 4 / 2**20:.0f} MiB) -> {data}")
        make_random_noisy_zarr(data, args.rows, args.features,
                               chunk_rows=args.chunk_rows, overwrite=True,
                               progress=show, random_state=args.seed)
        _mark(data)
    times["generate data" if not reused else "reuse data"] = time.perf_counter() - t0
    return reused


def _fit_model(args: argparse.Namespace, X: Any, data: Path, model_path: Path,
               times: dict[str, float]) -> tuple[Any, float]:
    """Stages 2 and 3: choose gamma, fit the model on ``X`` and save it; (model, gamma)."""
    from distsketch.io import fingerprint
    from distsketch.io.model.store import save_model

    t0 = time.perf_counter()
    gamma = median_gamma(X, n_sample=1000, random_state=args.seed)
    times["choose gamma"] = time.perf_counter() - t0
    stage(f"[2/5] gamma = {gamma:.6g} (1 / median squared distance of 1000 rows)")

    t0 = time.perf_counter()
    stage(f"[3/5] fitting StreamingKernelPCA (m={args.n_random_features}, "
          f"l={args.sketch_size}, k={args.n_components}) out of core")
    model = _model(args, gamma)
    model.fit(X)
    times["fit"] = time.perf_counter() - t0
    save_model(model, model_path, overwrite=True,
               extra={"input": str(data), "input_fingerprint": fingerprint(X, path=data)})
    _mark(model_path)
    return model, gamma


def _write_report(out: Path, report: dict[str, Any], overwrite: bool) -> None:
    """Write ``out/report.json`` atomically (a temporary file, then a rename)."""
    _check_out(out, overwrite)  # again: the folder may have changed while this ran
    tmp = out / f".report.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(report, indent=2))
    os.replace(tmp, out / "report.json")


def _report_lines(r: dict, peak: int, format_bytes: Any) -> list[str]:
    lines: list[str] = []
    emit = lines.append
    e = r["kernel_errors"]
    emit("")
    emit("distsketch quickstart: streaming kernel PCA (random Fourier features + Frequent "
         "Directions)")
    emit(f"  data          {r['rows']} x {r['features']} float32 RandomNoisy (s=50, zeta=10)"
         f"{' (reused)' if r['data_reused'] else ''}: {r['data']}")
    emit(f"  cluster       {r['cluster']} " + (f"({r['workers']} worker(s))" if r["workers"]
                                                 else "(no workers: a local Dask scheduler)"))
    emit(f"  model         m={r['n_random_features']} RFF, l={r['sketch_size']}, k={r['n_components']}, "
         f"rbf gamma={r['gamma']:.4g} (median heuristic)")
    emit("  time          " + ", ".join(f"{k} {v:.1f} s" for k, v in r["seconds"].items()))
    if r["fit_rows_per_second"]:
        emit(f"  fit rate      {r['fit_rows_per_second']:,.0f} rows/s")
    workers = r.get("workers_peak_memory_bytes")
    emit(f"  peak memory   {format_bytes(peak)} (this process and all its children)"
         + (f"; workers {format_bytes(workers)} (sampled by the scheduler)" if workers else ""))
    how = f"estimated from {e['n_sample']} sampled rows" if e.get("sampled") else "exact"
    emit(f"  kernel error  spectral ||G - G~||_2 / n = {e['spectral']:.3e}, Frobenius "
         f"||G - G~||_F / n^2 = {e['frobenius']:.3e} (relative {e['relative_frobenius']:.3f}; "
         f"{how})")
    emit(f"  outputs       {r['model']}, {r['embeddings']}, "
         f"{Path(r['data']).parent / 'report.json'}")
    return lines
