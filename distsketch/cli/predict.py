"""``distsketch predict``: predictions of a saved model for a Zarr input (or a CSV or Parquet
table, read as ``ingest`` would), written to Zarr (or to a CSV or Parquet table)."""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

from distsketch.cli.apply import add_apply_parser, apply_saved_model
from distsketch.cli.output import finish

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_apply_parser(
        subparsers, "predict",
        help="predict every row of a Zarr input (or a CSV/Parquet table) with a saved model, "
             "write Zarr (or a CSV/Parquet table)",
        description=(
            "Load MODEL (a supervised model saved by `distsketch fit` or model.save), predict "
            "every row of INPUT blockwise and write OUTPUT atomically (on any error nothing is "
            "left behind): class labels in their own dtype for a classifier, one value per row "
            "for a single-output regressor (a 1-D array), else one column per target. OUTPUT "
            "is a Zarr group holding them as `predictions` (dimensions sample[, output]; a "
            "classifier's classes in its `classes` attribute), which xarray.open_zarr reads. "
            "An INPUT file named *.csv (.tsv, .txt, .gz too) or *.parquet is read as `distsketch "
            "ingest` reads it: the columns the model was fitted on, by their header names (a "
            "model fitted on a store ingested from a table with a header records them), other "
            "columns such as the labels left out. An OUTPUT named *.csv or *.parquet (Parquet "
            "needs pip install \"distsketch[parquet]\") is written as a table with a header "
            "(prediction, or prediction_0 ... for several targets), atomically; an existing file "
            "is replaced only with --overwrite."),
        model_help="saved model store with predict (e.g. a kernel ridge model)",
        input_help="input Zarr store ('store.zarr::X' for an array in a group), or a CSV or "
                   "Parquet file",
        output_help="output Zarr group (directory), the values as predictions; or a *.csv / "
                    "*.parquet file")
    p.set_defaults(func=run)
    return p


def _write_options(model: Any) -> dict[str, Any]:
    from distsketch.io.arrays.class_codes import predictions_attrs

    return {"name": "predictions", "dimension_names": ("sample", "output"),
            "attrs": predictions_attrs(model), "manifest": {"predictions": True}}


def _check_model(args: argparse.Namespace, model: Any) -> None:
    """Refuse a model without predict; the hint fits the labels INPUT holds, if any."""
    from distsketch.cli.common import storage_options_arg
    from distsketch.cli.labels import store_labels
    from distsketch.cli.score import check_predictor

    if callable(getattr(model, "predict", None)):
        return
    so = storage_options_arg(args)
    check_predictor(model, args.model, targets=store_labels(args.input, so),
                    input_path=args.input, storage_options=so)


def run(args: argparse.Namespace) -> int:
    from distsketch.cli.tables import is_table_file, table_output_format

    fmt = table_output_format(args.output)
    if fmt is not None or is_table_file(args.input):
        return _run_table(args, fmt)
    from distsketch.diagnostics import format_bytes

    done = apply_saved_model(args, method="predict", verb="predicting", what="predictions for",
                             check_model=lambda model: _check_model(args, model),
                             write_options=_write_options)
    model, P, seconds = done.model, done.out, done.seconds
    shape = [int(s) for s in P.shape]
    what = "labels" if hasattr(model, "classes_") else "predictions"
    result = {"command": "predict", "output": str(done.path), "model": str(args.model),
              "model_class": type(model).__name__, "input": str(args.input), "shape": shape,
              "dtype": str(P.dtype), "seconds": round(seconds, 3),
              "peak_memory_bytes": done.peak_memory_bytes}
    finish(result, f"wrote {done.path}: {what} of {' x '.join(map(str, shape))} ({P.dtype}) in "
                   f"{seconds:.1f} s (peak memory {format_bytes(done.peak_memory_bytes)})")
    return 0


def _run_table(args: argparse.Namespace, fmt: str | None) -> int:
    """``predict`` with a CSV/Parquet input, or to a CSV/Parquet output (``fmt``)."""
    from distsketch.cli.common import (
        apply_progress,
        cluster,
        open_command_input,
        open_input,
        stage,
        storage_options_arg,
    )
    from distsketch.cli.tables import (
        check_table_output,
        is_table_file,
        require_table_writer,
        table_input,
        write_table,
    )
    from distsketch.diagnostics import PeakMemory, format_bytes
    from distsketch.io import fingerprint, write_array
    from distsketch.io.model.store import load
    from distsketch.io.storage.safety import check_output
    from distsketch.io.storage.urls import resolve
    from distsketch.validation import check_n_features

    show = apply_progress(args)
    so = storage_options_arg(args)
    inputs = [args.input, args.model]
    # the output is checked before any work, as for a store
    if fmt is not None:
        require_table_writer(fmt)
        out = check_table_output(args.output, overwrite=args.overwrite, inputs=inputs)
    else:
        check_output(args.output, overwrite=args.overwrite, inputs=inputs, storage_options=so)
    model = load(args.model, storage_options=so)
    _check_model(args, model)
    read: dict[str, Any] | None = None
    with contextlib.ExitStack() as stack:
        if is_table_file(args.input):
            stage(f"reading {args.input} as `distsketch ingest` would")
            store, read = stack.enter_context(table_input(args.input, model, args.model, so,
                                                          progress=show))
            X = open_input(store, args.block_rows)
        else:
            X = open_command_input(args, so)
        check_n_features(model, X, reset=False)
        with PeakMemory() as pm, cluster(args, X):
            t0 = time.perf_counter()
            P = model.predict(X)  # lazy for dask input
            stage(f"predicting {X.shape[0]} rows with {type(model).__name__} -> {args.output}")
            if fmt is not None:
                write_table(P, out, fmt, metadata={"model": str(args.model),
                                                   "model_class": type(model).__name__,
                                                   "input": str(args.input)})
                path: Any = out
            else:
                options = _write_options(model)
                manifest = {"model": resolve(args.model).url,
                            "model_class": type(model).__name__, **options.pop("manifest", {}),
                            "input": str(args.input),
                            "input_fingerprint": fingerprint(X, path=args.input)}
                path = write_array(P, args.output, chunk_rows=args.chunk_rows,
                                   compressor=None if args.compressor == "none"
                                   else args.compressor, overwrite=args.overwrite,
                                   progress=show, inputs=inputs, storage_options=so,
                                   stage=f"predictions for {args.input} by {args.model}",
                                   manifest=manifest, **options)
            seconds = time.perf_counter() - t0
    shape = [int(s) for s in P.shape]
    what = "labels" if hasattr(model, "classes_") else "predictions"
    result = {"command": "predict", "output": str(path), "model": str(args.model),
              "model_class": type(model).__name__, "input": str(args.input), "shape": shape,
              "dtype": str(P.dtype), "format": fmt or "zarr", "seconds": round(seconds, 3),
              "peak_memory_bytes": pm.peak_bytes}
    lines = [f"wrote {path}: {what} of {' x '.join(map(str, shape))} ({P.dtype}"
             f"{', ' + fmt if fmt else ''}) in {seconds:.1f} s (peak memory "
             f"{format_bytes(pm.peak_bytes)})"]
    if read is not None:
        result["input_columns"] = read
        left = [repr(c) for c in read["dropped_columns"]]
        if left:
            lines.append(f"note: read {len(read['columns'] or [])} columns of {args.input}; left "
                         f"out {', '.join(left)}")
    finish(result, lines)
    return 0
