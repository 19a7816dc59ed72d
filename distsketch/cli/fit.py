"""``distsketch fit``: fit an estimator on a Zarr input and save the model."""

from __future__ import annotations

import argparse
import inspect
import time
from typing import Any

from distsketch.cli.common import (
    add_allow_missing_chunks_option,
    add_block_rows_option,
    add_common_options,
    add_storage_option,
    apply_progress,
    check_before_cluster,
    cluster,
    emit,
    median_gamma,
    open_input,
    parse_params,
    stage,
    storage_options_arg,
)
from distsketch.errors import ConfigError

__all__ = ["add_parser", "resolve_estimator", "run"]

# shortcuts for the streaming kernel PCA variants of Ghashami et al. (2016)
_SHORTCUTS = {"skpca": ("StreamingKernelPCA", {"method": "fd"}),
              "fd": ("StreamingKernelPCA", {"method": "fd"}),
              "rnca": ("StreamingKernelPCA", {"method": "rnca"})}

# options that set the estimator parameter of the same name
_OPTION_PARAMS = ("n_components", "kernel", "gamma", "n_random_features", "sketch_size",
                  "random_state")


def resolve_estimator(method: str) -> tuple[type, dict[str, Any]]:
    """The estimator class and preset parameters named by ``--method``."""
    from distsketch import registry

    key = method.strip().lower()
    if key in _SHORTCUTS:
        name, preset = _SHORTCUTS[key]
    else:
        name, preset = method, {}
    try:
        cls = registry.resolve(name, kind="estimator", where=f"--method {method!r}")
    except ConfigError as exc:
        raise ConfigError(f"{exc} The shortcuts skpca (or fd) and rnca select "
                          "StreamingKernelPCA.") from exc
    if not (inspect.isclass(cls) and hasattr(cls, "fit")):
        raise ConfigError(f"--method {method!r}: {cls.__name__} is not an estimator.")
    return cls, dict(preset)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "fit", help="fit streaming kernel PCA (or any distsketch estimator) on a Zarr input",
        description=(
            "Fit an estimator out of core on INPUT (a Zarr store, 'store.zarr::X' for an array "
            "in a group) and save it to MODEL (a Zarr group; load it with distsketch.load). "
            "Default: StreamingKernelPCA (random Fourier features + Frequent Directions)."),
    )
    p.add_argument("input", help="input Zarr store (rows are points)")
    p.add_argument("model", help="output model store (directory)")
    p.add_argument("--method", default="skpca",
                   help="skpca (default), rnca, or an estimator class name such as "
                        "RandomFourierFeatures, NystromKernelPCA, SketchedKernelRidge")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                   help="estimator parameter (repeatable; values are YAML: 64, 0.5, true, rbf)")
    p.add_argument("--y", default=None, help="targets for supervised estimators, e.g. "
                                             "data.zarr::y")
    p.add_argument("--n-components", type=int, default=None,
                   help="output width: components, or features of a feature map")
    p.add_argument("--kernel", default=None, help="kernel name (e.g. rbf)")
    p.add_argument("--gamma", default=None,
                   help="kernel scale, or 'median' for 1/median squared distance of a sample")
    p.add_argument("--n-random-features", type=int, default=None,
                   help="width m of an inner random feature map (StreamingKernelPCA)")
    p.add_argument("--sketch-size", type=int, default=None, help="Frequent Directions size l")
    p.add_argument("--random-state", type=int, default=None, help="seed")
    add_block_rows_option(p)
    add_allow_missing_chunks_option(p)
    add_common_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)
    return p


def _read_targets(spec: str, n: int, storage_options: dict | None = None) -> Any:
    from distsketch.io.targets import open_targets

    return open_targets(spec, n, where=f"--y {spec}",
                        storage_options=storage_options).as_dask()


def run(args: argparse.Namespace) -> int:
    from distsketch.diagnostics import PeakMemory, format_bytes
    from distsketch.io import fingerprint
    from distsketch.io.model import save_model
    from distsketch.io.safety import check_output

    apply_progress(args)
    so = storage_options_arg(args)
    check_output(args.model, overwrite=args.overwrite, inputs=[args.input, args.y],
                 storage_options=so)
    cls, params = resolve_estimator(args.method)
    params = dict(params)
    accepted = set(inspect.signature(cls).parameters)
    for name in _OPTION_PARAMS:
        value = getattr(args, name)
        if value is None:
            continue
        if name not in accepted:
            raise ConfigError(f"--{name.replace('_', '-')} does not apply to {cls.__name__} (it "
                              f"has no parameter {name!r}); its parameters: "
                              f"{', '.join(sorted(accepted))}.")
        params[name] = value
    for name, value in parse_params(args.param).items():
        if name not in accepted:
            raise ConfigError(f"--param {name}=...: {cls.__name__} has no parameter {name!r}; "
                              f"its parameters: {', '.join(sorted(accepted))}.")
        params[name] = value
    if isinstance(params.get("gamma"), str) and params["gamma"] != "median":
        try:
            params["gamma"] = float(params["gamma"])
        except ValueError:
            raise ConfigError(f"--gamma {params['gamma']!r}: use a number or 'median'.") from None
    X = open_input(args.input, args.block_rows, allow_missing_chunks=args.allow_missing_chunks,
                   storage_options=so)
    y = _read_targets(args.y, X.shape[0], so) if args.y else None
    # gamma="median" is known only once the sample is read: its default stands in for the check
    check_before_cluster(cls(**{k: v for k, v in params.items()
                                if not (k == "gamma" and v == "median")}),
                         int(X.shape[0]), int(X.shape[1]))
    with PeakMemory() as pm, cluster(args):
        if params.get("gamma") == "median":
            params["gamma"] = median_gamma(X)
            stage(f"gamma = {params['gamma']:.6g} (median heuristic on 1000 rows)")
        est = cls(**params)
        stage(f"fitting {cls.__name__}({', '.join(f'{k}={v!r}' for k, v in params.items())}) "
              f"on {args.input}: {X.shape[0]} rows x {X.shape[1]} features")
        t0 = time.perf_counter()
        est.fit(X) if y is None else est.fit(X, y)
        seconds = time.perf_counter() - t0
    save_model(est, args.model, overwrite=args.overwrite,
               extra={"input": str(args.input), "input_fingerprint": fingerprint(X, path=args.input),
                      "fit_seconds": round(seconds, 3)}, storage_options=so)
    emit(f"fitted {cls.__name__} on {X.shape[0]} rows in {seconds:.1f} s "
         f"(peak memory {format_bytes(pm.peak_bytes)}); model saved to {args.model}")
    return 0
