"""What ``predict`` and ``transform`` share: a saved model applied to every row of a
Zarr input (or a CSV or Parquet table, read as ``ingest`` would), the result written
atomically to Zarr (or to a CSV or Parquet table when the output's name asks for one)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from distsketch.cli.common import (
    add_input_options,
    apply_progress,
    cluster,
    open_command_input,
    open_input,
    positive_int,
    stage,
    storage_options_arg,
)

__all__ = ["Applied", "add_apply_parser", "apply_saved_model", "load_model_and_input"]


def add_apply_parser(subparsers: argparse._SubParsersAction, command: str, *, help: str,
                     description: str, model_help: str, input_help: str,
                     output_help: str) -> argparse.ArgumentParser:
    """The parser of a command ``COMMAND MODEL INPUT OUTPUT`` with its output and input options."""
    p = subparsers.add_parser(command, help=help, description=description)
    p.add_argument("model", help=model_help)
    p.add_argument("input", help=input_help)
    p.add_argument("output", help=output_help)
    p.add_argument("--chunk-rows", type=positive_int, default=None,
                   help="rows per output chunk (default: the input's block rows)")
    p.add_argument("--compressor", choices=["lz4", "zstd", "none"], default="lz4",
                   help="chunk codec (default lz4)")
    add_input_options(p)
    return p


def load_model_and_input(args: argparse.Namespace, check_model: Callable[[Any], None]
                         ) -> tuple[Any, Any, dict[str, Any] | None]:
    """``(model, X, storage_options)``; ``check_model(model)`` runs before the input opens."""
    from distsketch.io.model.store import load

    so = storage_options_arg(args)
    model = load(args.model, storage_options=so)
    check_model(model)
    return model, open_command_input(args, so), so


@dataclasses.dataclass
class Applied:
    """What :func:`apply_saved_model` did: the model, its (written) output and the cost."""

    model: Any
    out: Any
    path: Any
    seconds: float
    peak_memory_bytes: int
    #: ``"zarr"``, ``"csv"`` or ``"parquet"``: how the output was written
    format: str = "zarr"
    #: how a CSV/Parquet input was read (:func:`distsketch.cli.tables.table_input`), else None
    input_columns: dict[str, Any] | None = None

    def notes(self, input_path: str) -> list[str]:
        """The lines that say which columns of a table input were left out (none for a store)."""
        read = self.input_columns
        left = [repr(c) for c in (read or {}).get("dropped_columns", [])]
        if read is None or not left:
            return []
        return [f"note: read {len(read['columns'] or [])} columns of {input_path}; left out "
                f"{', '.join(left)}"]

    def result(self, command: str, args: argparse.Namespace) -> dict[str, Any]:
        """The command's ``--json`` result."""
        result = {"command": command, "output": str(self.path), "model": str(args.model),
                  "model_class": type(self.model).__name__, "input": str(args.input),
                  "shape": [int(s) for s in self.out.shape], "dtype": str(self.out.dtype),
                  "format": self.format, "seconds": round(self.seconds, 3),
                  "peak_memory_bytes": self.peak_memory_bytes}
        if self.input_columns is not None:
            result["input_columns"] = self.input_columns
        return result


def _check_output(args: argparse.Namespace, so: dict[str, Any] | None) -> tuple[str | None, Any]:
    """``(format, path)`` of the output, checked before any work (a table or a Zarr store)."""
    from distsketch.cli.tables import check_table_output, require_table_writer, table_output_format
    from distsketch.io.storage.safety import check_output

    inputs = [args.input, args.model]
    fmt = table_output_format(args.output)
    if fmt is None:
        check_output(args.output, overwrite=args.overwrite, inputs=inputs, storage_options=so)
        return None, args.output
    require_table_writer(fmt)
    return fmt, check_table_output(args.output, overwrite=args.overwrite, inputs=inputs)


def apply_saved_model(args: argparse.Namespace, *, method: str, verb: str, what: str,
                      check_model: Callable[[Any], None],
                      write_options: Callable[[Any], dict[str, Any]],
                      header: Callable[[Any, Any], list[str]] | None = None) -> Applied:
    """Load ``args.model``, apply its ``method`` to every row of ``args.input`` (a table read as
    ``ingest`` would), write ``args.output`` (a table when its name asks for one, else Zarr).

    ``verb`` and ``what`` word the progress messages (``"predicting"``, ``"predictions
    for"``); ``check_model`` refuses a model before the input opens; ``write_options(model)``
    adds keyword arguments of :func:`distsketch.io.write_array`; ``header(model, out)``
    names a table output's columns.
    """
    from distsketch.cli.tables import is_table_file, table_input
    from distsketch.diagnostics import PeakMemory
    from distsketch.io.model.store import load
    from distsketch.validation import check_n_features

    show = apply_progress(args)
    so = storage_options_arg(args)
    fmt, path = _check_output(args, so)
    model = load(args.model, storage_options=so)
    check_model(model)
    read: dict[str, Any] | None = None
    with contextlib.ExitStack() as stack:
        if is_table_file(args.input):
            stage(f"reading {args.input} as `distsketch ingest` would")
            store, read = stack.enter_context(table_input(args.input, model, args.model, so,
                                                          progress=show))
            X = open_input(store, args.block_rows)
        else:
            X = open_command_input(args, so)
        # the feature count is checked before the cluster starts (the model checks it again)
        check_n_features(model, X, reset=False)
        with PeakMemory() as pm, cluster(args, X):
            t0 = time.perf_counter()
            out = getattr(model, method)(X)  # lazy for dask input
            stage(f"{verb} {X.shape[0]} rows with {type(model).__name__} -> {args.output}")
            if fmt is not None:
                _write_table(args, model, out, path, fmt, header)
            else:
                path = _write_zarr(args, model, X, out, f"{what} {args.input} by {args.model}",
                                   write_options(model), table_input=read is not None,
                                   progress=show, storage_options=so)
            seconds = time.perf_counter() - t0
    return Applied(model, out, path, seconds, pm.peak_bytes, fmt or "zarr", read)


def _write_table(args: argparse.Namespace, model: Any, out: Any, path: Any, fmt: str,
                 header: Callable[[Any, Any], list[str]] | None) -> None:
    from distsketch.cli.tables import write_table

    write_table(out, path, fmt, names=header(model, out) if header is not None else None,
                metadata={"model": str(args.model), "model_class": type(model).__name__,
                          "input": str(args.input)})


def _write_zarr(args: argparse.Namespace, model: Any, X: Any, out: Any, stage_text: str,
                options: dict[str, Any], *, table_input: bool, progress: bool | None,
                storage_options: dict[str, Any] | None) -> Any:
    """Write ``out`` to the Zarr store ``args.output``; its manifest names the model and input."""
    from distsketch.io import fingerprint, write_array
    from distsketch.io.storage.urls import resolve

    manifest = {"model": resolve(args.model).url, "model_class": type(model).__name__,
                **options.pop("manifest", {})}
    if table_input:  # the store read is a temporary one: name the table the rows came from
        manifest["input"] = str(args.input)
    manifest["input_fingerprint"] = fingerprint(X, path=args.input)
    return write_array(out, args.output, chunk_rows=args.chunk_rows,
                       compressor=None if args.compressor == "none" else args.compressor,
                       overwrite=args.overwrite, progress=progress,
                       inputs=[args.input, args.model], storage_options=storage_options,
                       stage=stage_text, manifest=manifest, **options)
