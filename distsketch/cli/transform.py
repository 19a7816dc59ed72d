"""``distsketch transform``: apply a saved model to a Zarr input (or a CSV or Parquet table,
read as ``ingest`` would), write Zarr (or a CSV or Parquet table)."""

from __future__ import annotations

import argparse
from typing import Any

from distsketch.cli.apply import add_apply_parser, apply_saved_model
from distsketch.cli.output import finish
from distsketch.errors import ConfigError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_apply_parser(
        subparsers, "transform",
        help="apply a saved model to a Zarr input (or a CSV/Parquet table) and write the "
             "features to Zarr (or a CSV/Parquet table)",
        description=(
            "Load MODEL (saved by `distsketch fit` or model.save), map every row of INPUT "
            "blockwise (features or kernel PCA embeddings) and write OUTPUT atomically: on "
            "any error nothing is left behind. OUTPUT is a Zarr group holding the features as "
            "X (dimensions sample, component), which `distsketch fit`/`transform` and "
            "xarray.open_zarr read as they are. An INPUT file named *.csv (.tsv, .txt, .gz too) "
            "or *.parquet is read as `distsketch ingest` reads it: the columns the model was "
            "fitted on, by their header names (a model fitted on a store ingested from a table "
            "with a header records them), other columns such as labels or IDs left out. An "
            "OUTPUT named *.csv or *.parquet (Parquet needs pip install "
            "\"distsketch[parquet]\") is written as a table with a header (the model's feature "
            "names, as get_feature_names_out() gives them), atomically; an existing file is "
            "replaced only with --overwrite."),
        model_help="saved model store",
        input_help="input Zarr store ('store.zarr::X' for an array in a group: an existing "
                   "path is taken as it is, otherwise the last '::' followed by a name without "
                   "'/' names the array), or a CSV or Parquet file",
        output_help="output Zarr group (directory), the features as X; or a *.csv / *.parquet "
                    "file")
    p.set_defaults(func=run)
    return p


def _check_transformer(model: Any, path: str) -> None:
    if not hasattr(model, "transform"):
        hint = (" Use `distsketch predict MODEL INPUT OUTPUT` for its predictions."
                if callable(getattr(model, "predict", None)) else "")
        raise ConfigError(f"model {path} ({type(model).__name__}) has no transform.{hint}")


def run(args: argparse.Namespace) -> int:
    from distsketch.cli.tables import feature_names
    from distsketch.diagnostics import format_bytes

    done = apply_saved_model(args, method="transform", verb="transforming", what="transform of",
                             check_model=lambda model: _check_transformer(model, args.model),
                             write_options=lambda model: {}, header=feature_names)
    Z, seconds = done.out, done.seconds
    table = done.format != "zarr"
    finish(done.result("transform", args), [
        f"wrote {done.path}: {Z.shape[0]} rows x {Z.shape[1]} columns"
        f"{' (' + done.format + ')' if table else ''} in {seconds:.1f} s (peak "
        f"memory {format_bytes(done.peak_memory_bytes)})", *done.notes(args.input)])
    return 0
