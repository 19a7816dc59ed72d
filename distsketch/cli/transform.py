"""``distsketch transform``: apply a saved model to a Zarr input, write Zarr."""

from __future__ import annotations

import argparse
import time

from distsketch.cli.common import (
    add_allow_missing_chunks_option,
    add_block_rows_option,
    add_common_options,
    add_storage_option,
    apply_progress,
    cluster,
    open_input,
    positive_int,
    stage,
    storage_options_arg,
)
from distsketch.cli.output import finish
from distsketch.errors import ConfigError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "transform", help="apply a saved model to a Zarr input and write the features to Zarr",
        description=(
            "Load MODEL (saved by `distsketch fit` or model.save), map every row of INPUT "
            "blockwise (features or kernel PCA embeddings) and write OUTPUT atomically: on "
            "any error nothing is left behind. OUTPUT is a Zarr group holding the features as "
            "X (dimensions sample, component), which `distsketch fit`/`transform` and "
            "xarray.open_zarr read as they are."),
    )
    p.add_argument("model", help="saved model store")
    p.add_argument("input", help="input Zarr store ('store.zarr::X' for an array in a group: an "
                                 "existing path is taken as it is, otherwise the last '::' "
                                 "followed by a name without '/' names the array)")
    p.add_argument("output", help="output Zarr group (directory), the features as X")
    p.add_argument("--chunk-rows", type=positive_int, default=None,
                   help="rows per output chunk (default: the input's block rows)")
    p.add_argument("--compressor", choices=["lz4", "zstd", "none"], default="lz4",
                   help="chunk codec (default lz4)")
    add_block_rows_option(p)
    add_allow_missing_chunks_option(p)
    add_common_options(p)
    add_storage_option(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from distsketch.diagnostics import PeakMemory, format_bytes
    from distsketch.io import fingerprint, write_array
    from distsketch.io.model import load
    from distsketch.io.safety import check_output
    from distsketch.io.urls import resolve
    from distsketch.validation import check_n_features

    show = apply_progress(args)
    so = storage_options_arg(args)
    inputs = [args.input, args.model]
    check_output(args.output, overwrite=args.overwrite, inputs=inputs, storage_options=so)
    model = load(args.model, storage_options=so)
    if not hasattr(model, "transform"):
        hint = (" Use `distsketch predict MODEL INPUT OUTPUT` for its predictions."
                if callable(getattr(model, "predict", None)) else "")
        raise ConfigError(f"model {args.model} ({type(model).__name__}) has no transform.{hint}")
    X = open_input(args.input, args.block_rows, allow_missing_chunks=args.allow_missing_chunks,
                   storage_options=so)
    # the feature count is checked before the cluster starts (transform checks it again)
    check_n_features(model, X, reset=False)
    with PeakMemory() as pm, cluster(args, X):
        t0 = time.perf_counter()
        Z = model.transform(X)  # lazy for dask input; checks the feature count first
        stage(f"transforming {X.shape[0]} rows with {type(model).__name__} -> {args.output}")
        path = write_array(Z, args.output, chunk_rows=args.chunk_rows,
                           compressor=None if args.compressor == "none" else args.compressor,
                           overwrite=args.overwrite, progress=show, inputs=inputs,
                           stage=f"transform of {args.input} by {args.model}",
                           storage_options=so,
                           manifest={"model": resolve(args.model).url,
                                     "model_class": type(model).__name__,
                                     "input_fingerprint": fingerprint(X, path=args.input)})
        seconds = time.perf_counter() - t0
    result = {"command": "transform", "output": str(path), "model": str(args.model),
              "model_class": type(model).__name__, "input": str(args.input),
              "shape": [int(s) for s in Z.shape], "dtype": str(Z.dtype),
              "seconds": round(seconds, 3), "peak_memory_bytes": pm.peak_bytes}
    finish(result, f"wrote {path}: {Z.shape[0]} rows x {Z.shape[1]} columns in {seconds:.1f} s "
                   f"(peak memory {format_bytes(pm.peak_bytes)})")
    return 0
