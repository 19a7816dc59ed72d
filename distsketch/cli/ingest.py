"""``distsketch ingest``: stream a file into a row-chunked Zarr store."""

from __future__ import annotations

import argparse
import time

from distsketch.cli.common import (
    add_common_options,
    add_storage_option,
    apply_progress,
    positive_int,
    stage,
    storage_options_arg,
)
from distsketch.cli.output import finish

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "ingest", help="stream .npy / CSV / svmlight / MNIST idx files (.gz too) or Parquet "
                       "into Zarr",
        description=(
            "Stream SOURCE into the Zarr group DEST (array X, plus y for labels) without "
            "loading the whole file. The output is written atomically with a manifest; on any "
            "error nothing is left behind. CSV: the first line is a header only when every "
            "field is a name (or with --header); --label-column stores a column as y, and "
            "string labels stay class names through fit, predict and score; Parquet (pip install "
            "\"distsketch[parquet]\"): numeric columns go to X, --label-column as for CSV (the "
            "rules: docs/storage.md, 'Ingesting files')."),
    )
    p.add_argument("source", help="input file: .npy, .csv/.tsv/.txt, .svm/.svmlight/.libsvm, "
                                  "*-ubyte (MNIST idx), each optionally .gz; .parquet")
    p.add_argument("dest", help="output Zarr store (directory)")
    p.add_argument("--format", default=None, metavar="FORMAT",
                   help="file format: npy, csv, svmlight, idx, parquet or another registered reader "
                        "(default: from the file name, else its first bytes)")
    p.add_argument("--chunk-rows", type=positive_int, default=None, help="rows per Zarr chunk "
                   "(default: about 8 MiB per chunk; chunks under 64 KiB are refused when "
                   "there would be more than 1000)")
    p.add_argument("--dtype", default="float32",
                   help="stored dtype of X (default float32); integers it cannot hold exactly "
                        "(above 2**24 for float32) are refused: use float64 for them")
    p.add_argument("--n-features", type=positive_int, default=None, help="svmlight: number of columns "
                   "(default: the largest index in the file)")
    p.add_argument("--zero-based", choices=["auto", "true", "false"], default="auto",
                   help="svmlight: indices start at 0 or 1 (default: auto)")
    p.add_argument("--delimiter", default=None, help="CSV separator (default: from the name)")
    p.add_argument("--skip-header", type=int, default=None,
                   help="CSV lines to skip at the top (not read as names)")
    head = p.add_mutually_exclusive_group()
    head.add_argument("--header", dest="header", action="store_const", const=True, default=None,
                      help="CSV: the first line holds the column names (default: it does "
                           "exactly when every field is a name, e.g. a,b,c; header names become "
                           "the store's feature names)")
    head.add_argument("--no-header", dest="header", action="store_const", const=False,
                      help="CSV: the first line is data")
    p.add_argument("--label-column", default=None, metavar="NAME|INDEX",
                   help="CSV or Parquet: the column stored as y (labels or targets) instead of "
                        "in X, by header (column) name or index (0 is the first, -1 the last); "
                        "a name the header holds twice is refused: give the index")
    kinds = p.add_mutually_exclusive_group()
    kinds.add_argument("--class-labels", dest="class_labels", action="store_const", const=True,
                       default=None, help="label column: store every label as a class name "
                       "(default: CSV, when the first label is not a number; Parquet, when the "
                       "column holds text); predictions are then the names")
    kinds.add_argument("--no-class-labels", dest="class_labels", action="store_const",
                       const=False, help="label column: numbers (regression targets)")
    p.add_argument("--drop-column", dest="drop_columns", action="append", default=None,
                   metavar="NAME|INDEX",
                   help="CSV or Parquet: leave this column out of X (never parsed), by header "
                        "name or index (0 is the first, -1 the last); repeatable, e.g. an ID "
                        "column. A CSV whose header starts with an empty field (R's write.csv: "
                        "that column holds row names) has that column dropped without it")
    p.add_argument("--boolean-columns", choices=["yes-no"], default=None,
                   help="CSV or Parquet: read feature columns of yes/no or true/false words "
                        "(any case) as 1/0 (a CSV column is one when its first value is such a "
                        "word; a Parquet column when it holds text); default: refused as not "
                        "numbers")
    p.add_argument("--labels", default=None, help="idx or .npy labels file (numbers, or strings "
                                                  "stored as class names), stored as y")
    p.add_argument("--append", action="store_true",
                   help="append the rows of SOURCE to the existing store DEST (written by ingest): "
                        "X and y grow together, atomically; the rows must have DEST's width and "
                        "are stored in its dtype")
    p.add_argument("--allow-nan", action="store_true", help="store NaN/Inf instead of failing")
    p.add_argument("--compressor", choices=["lz4", "zstd", "none"], default="lz4",
                   help="chunk codec (default lz4)")
    add_common_options(p, cluster_used=False)
    add_storage_option(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from distsketch.io import ingest, read_manifest

    show = apply_progress(args)
    so = storage_options_arg(args)
    delimiter = args.delimiter.encode().decode("unicode_escape") if args.delimiter else None
    zero_based: bool | str = ("auto" if args.zero_based == "auto"
                              else args.zero_based == "true")
    stage(f"{'appending' if args.append else 'ingesting'} {args.source} -> {args.dest}")
    t0 = time.perf_counter()
    path = ingest(args.source, args.dest, format=args.format, chunk_rows=args.chunk_rows,
                  dtype=args.dtype, n_features=args.n_features, delimiter=delimiter,
                  skip_header=args.skip_header, header=args.header,
                  label_column=_column(args.label_column), class_labels=args.class_labels,
                  drop_columns=[c for c in map(_column, args.drop_columns or []) if c is not None],
                  boolean_columns=args.boolean_columns, labels=args.labels, zero_based=zero_based,
                  allow_nan=args.allow_nan,
                  compressor=None if args.compressor == "none" else args.compressor,
                  overwrite=args.overwrite, append=args.append, progress=show,
                  storage_options=so)
    info = read_manifest(path, storage_options=so) or {}
    seconds = time.perf_counter() - t0
    result = {"command": "ingest", "output": str(path), "source": str(args.source),
              "rows": info.get("rows"), "n_features": info.get("n_features"),
              "format": info.get("format"), "arrays": info.get("arrays", []),
              "n_classes": info.get("n_classes"), "feature_names": info.get("feature_names"),
              "seconds": round(seconds, 3)}
    if args.append:
        result["appended_rows"] = (info.get("appends") or [{}])[-1].get("rows")
    result["dropped_columns"] = info.get("dropped_columns", [])
    result["yes_no_columns"] = info.get("yes_no_columns", [])
    verb = "appended to" if args.append else "wrote"
    classes = f", {info['n_classes']} classes in y" if info.get("n_classes") else ""
    lines = [f"{verb} {path}: {info.get('rows')} rows x {info.get('n_features')} features "
             f"({info.get('format')}, arrays {', '.join(info.get('arrays', []))}{classes}) "
             f"in {seconds:.1f} s"]
    lines += _column_notes(result["dropped_columns"], result["yes_no_columns"],
                           args.drop_columns or [])
    finish(result, lines)
    return 0


def _column_notes(dropped: list, yes_no: list, asked: list[str]) -> list[str]:
    """What ingest did to columns the user may not have named: dropped and yes/no columns."""
    notes = []
    if dropped:
        unnamed = "" in dropped and "" not in asked
        why = (" (the unnamed first column holds R's row names, dropped without --drop-column)"
               if unnamed else "")
        notes.append(f"note: dropped column(s) {', '.join(map(repr, dropped))}{why}")
    if yes_no:
        notes.append(f"note: yes/no (true/false) read as 1/0 in column(s) "
                     f"{', '.join(map(repr, yes_no))}")
    return notes


def _column(text: str | None) -> int | str | None:
    """``--label-column``: an integer is an index, anything else a header name."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text
