"""``distsketch predict``: predictions of a saved model for a Zarr input (or a CSV or Parquet
table, read as ``ingest`` would), written to Zarr (or to a CSV or Parquet table)."""

from __future__ import annotations

import argparse
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
    from distsketch.diagnostics import format_bytes

    done = apply_saved_model(args, method="predict", verb="predicting", what="predictions for",
                             check_model=lambda model: _check_model(args, model),
                             write_options=_write_options)
    model, P, seconds = done.model, done.out, done.seconds
    shape = [int(s) for s in P.shape]
    what = "labels" if hasattr(model, "classes_") else "predictions"
    table = done.format != "zarr"
    finish(done.result("predict", args), [
        f"wrote {done.path}: {what} of {' x '.join(map(str, shape))} ({P.dtype}"
        f"{', ' + done.format if table else ''}) in {seconds:.1f} s (peak memory "
        f"{format_bytes(done.peak_memory_bytes)})", *done.notes(args.input)])
    return 0
