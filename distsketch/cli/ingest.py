"""``distsketch ingest``: stream a file into a row-chunked Zarr store."""

from __future__ import annotations

import argparse
import time

from distsketch.cli.common import add_common_options, apply_progress, emit, positive_int, stage

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
    p.add_argument("--allow-nan", action="store_true", help="store NaN/Inf instead of failing")
    p.add_argument("--compressor", choices=["lz4", "zstd", "none"], default="lz4",
                   help="chunk codec (default lz4)")
    add_common_options(p, cluster_used=False)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from distsketch.io import ingest, read_manifest

    show = apply_progress(args)
    delimiter = args.delimiter.encode().decode("unicode_escape") if args.delimiter else None
    zero_based: bool | str = {"auto": "auto", "true": True, "false": False}[args.zero_based]  # type: ignore[assignment]
    stage(f"ingesting {args.source} -> {args.dest}")
    t0 = time.perf_counter()
    path = ingest(args.source, args.dest, format=args.format, chunk_rows=args.chunk_rows,
                  dtype=args.dtype, n_features=args.n_features, delimiter=delimiter,
                  skip_header=args.skip_header, labels=args.labels, zero_based=zero_based,
                  allow_nan=args.allow_nan,
                  compressor=None if args.compressor == "none" else args.compressor,
                  overwrite=args.overwrite, progress=show)
    info = read_manifest(path) or {}
    emit(f"wrote {path}: {info.get('rows')} rows x {info.get('n_features')} features "
         f"({info.get('format')}, arrays {', '.join(info.get('arrays', []))}) in "
         f"{time.perf_counter() - t0:.1f} s")
    return 0
