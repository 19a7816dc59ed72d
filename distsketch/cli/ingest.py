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
        "ingest", help="stream .npy / CSV / svmlight / MNIST idx files (.gz too) into Zarr",
        description=(
            "Stream SOURCE into the Zarr group DEST (array X, plus y for labels) without "
            "loading the whole file. The output is written atomically with a manifest; on any "
            "error nothing is left behind."),
    )
    p.add_argument("source", help="input file: .npy, .csv/.tsv/.txt, .svm/.svmlight/.libsvm, "
                                  "*-ubyte (MNIST idx); each optionally .gz")
    p.add_argument("dest", help="output Zarr store (directory)")
    p.add_argument("--format", default=None, metavar="FORMAT",
                   help="file format: npy, csv, svmlight, idx or another registered reader "
                        "(default: from the file name, else its first bytes)")
    p.add_argument("--chunk-rows", type=positive_int, default=None, help="rows per Zarr chunk "
                   "(default: about 8 MiB per chunk)")
    p.add_argument("--dtype", default="float32", help="stored dtype of X (default float32)")
    p.add_argument("--n-features", type=positive_int, default=None, help="svmlight: number of columns "
                   "(default: the largest index in the file)")
    p.add_argument("--zero-based", choices=["auto", "true", "false"], default="auto",
                   help="svmlight: indices start at 0 or 1 (default: auto)")
    p.add_argument("--delimiter", default=None, help="CSV separator (default: from the name)")
    p.add_argument("--skip-header", type=int, default=None, help="CSV lines to skip (default: "
                   "one header line if the first line is not numeric)")
    p.add_argument("--labels", default=None, help="idx or .npy labels file, stored as y")
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
                  skip_header=args.skip_header, labels=args.labels, zero_based=zero_based,
                  allow_nan=args.allow_nan,
                  compressor=None if args.compressor == "none" else args.compressor,
                  overwrite=args.overwrite, append=args.append, progress=show,
                  storage_options=so)
    info = read_manifest(path, storage_options=so) or {}
    seconds = time.perf_counter() - t0
    result = {"command": "ingest", "output": str(path), "source": str(args.source),
              "rows": info.get("rows"), "n_features": info.get("n_features"),
              "format": info.get("format"), "arrays": info.get("arrays", []),
              "seconds": round(seconds, 3)}
    if args.append:
        result["appended_rows"] = (info.get("appends") or [{}])[-1].get("rows")
    verb = "appended to" if args.append else "wrote"
    finish(result, f"{verb} {path}: {info.get('rows')} rows x {info.get('n_features')} features "
                   f"({info.get('format')}, arrays {', '.join(info.get('arrays', []))}) in "
                   f"{seconds:.1f} s")
    return 0
