"""``distsketch predict``: predictions of a saved model for a Zarr input, written to Zarr."""

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

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "predict", help="predict every row of a Zarr input with a saved model, write Zarr",
        description=(
            "Load MODEL (a supervised model saved by `distsketch fit` or model.save), predict "
            "every row of INPUT blockwise and write OUTPUT atomically (on any error nothing is "
            "left behind): class labels in their own dtype for a classifier, one value per row "
            "for a single-output regressor (a 1-D array), else one column per target. OUTPUT "
            "is a Zarr group holding them as `predictions` (dimensions sample[, output]; a "
            "classifier's classes in its `classes` attribute), which xarray.open_zarr reads."),
    )
    p.add_argument("model", help="saved model store with predict (e.g. a kernel ridge model)")
    p.add_argument("input", help="input Zarr store ('store.zarr::X' for an array in a group)")
    p.add_argument("output", help="output Zarr group (directory), the values as predictions")
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
    from distsketch.cli.score import check_predictor
    from distsketch.diagnostics import PeakMemory, format_bytes
    from distsketch.io import fingerprint, write_array
    from distsketch.io.class_codes import predictions_attrs
    from distsketch.io.model import load
    from distsketch.io.safety import check_output
    from distsketch.io.urls import resolve
    from distsketch.validation import check_n_features

    show = apply_progress(args)
    so = storage_options_arg(args)
    inputs = [args.input, args.model]
    check_output(args.output, overwrite=args.overwrite, inputs=inputs, storage_options=so)
    model = load(args.model, storage_options=so)
    check_predictor(model, args.model)
    X = open_input(args.input, args.block_rows, allow_missing_chunks=args.allow_missing_chunks,
                   storage_options=so)
    # the feature count is checked before the cluster starts (predict checks it again)
    check_n_features(model, X, reset=False)
    with PeakMemory() as pm, cluster(args, X):
        t0 = time.perf_counter()
        P = model.predict(X)  # lazy for dask input
        stage(f"predicting {X.shape[0]} rows with {type(model).__name__} -> {args.output}")
        path = write_array(P, args.output, chunk_rows=args.chunk_rows,
                           compressor=None if args.compressor == "none" else args.compressor,
                           overwrite=args.overwrite, progress=show, inputs=inputs,
                           name="predictions", dimension_names=("sample", "output"),
                           attrs=predictions_attrs(model), storage_options=so,
                           stage=f"predictions for {args.input} by {args.model}",
                           manifest={"model": resolve(args.model).url,
                                     "model_class": type(model).__name__,
                                     "predictions": True,
                                     "input_fingerprint": fingerprint(X, path=args.input)})
        seconds = time.perf_counter() - t0
    shape = [int(s) for s in P.shape]
    what = "labels" if hasattr(model, "classes_") else "predictions"
    result = {"command": "predict", "output": str(path), "model": str(args.model),
              "model_class": type(model).__name__, "input": str(args.input), "shape": shape,
              "dtype": str(P.dtype), "seconds": round(seconds, 3),
              "peak_memory_bytes": pm.peak_bytes}
    finish(result, f"wrote {path}: {what} of {' x '.join(map(str, shape))} ({P.dtype}) in "
                   f"{seconds:.1f} s (peak memory {format_bytes(pm.peak_bytes)})")
    return 0
