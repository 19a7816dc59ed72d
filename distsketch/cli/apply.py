"""What ``predict`` and ``transform`` share: a saved model applied to every row of a
Zarr input, the result written to Zarr atomically."""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from distsketch.cli.common import (
    add_input_options,
    apply_progress,
    cluster,
    open_command_input,
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


def load_model_and_input(args: argparse.Namespace, check_model: Callable[[Any], None], *,
                         output: str | None = None) -> tuple[Any, Any, dict[str, Any] | None]:
    """``(model, X, storage_options)`` of a command on a saved model and a Zarr input.

    The output (when the command writes one) is checked first, then the
    model is loaded and ``check_model(model)`` refuses what the command
    cannot use before the input is opened (once).
    """
    from distsketch.io.model.store import load
    from distsketch.io.storage.safety import check_output

    so = storage_options_arg(args)
    if output is not None:
        check_output(output, overwrite=args.overwrite, inputs=[args.input, args.model],
                     storage_options=so)
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


def apply_saved_model(args: argparse.Namespace, *, method: str, verb: str, what: str,
                      check_model: Callable[[Any], None],
                      write_options: Callable[[Any], dict[str, Any]]) -> Applied:
    """Load ``args.model``, apply its ``method`` to every row of ``args.input``, write
    ``args.output``.

    Parameters
    ----------
    args : argparse.Namespace
        The command's arguments (:func:`add_apply_parser`).
    method : str
        The model's method applied (``"predict"``, ``"transform"``).
    verb : str
        The progress message's verb (``"predicting"``).
    what : str
        What the output is, named before the input in the write's stage
        (``"predictions for"``: "predictions for INPUT by MODEL").
    check_model : callable
        Refuses a model without ``method`` (before the input is opened).
    write_options : callable
        ``write_options(model)``: more keyword arguments of
        :func:`distsketch.io.write_array`; its ``manifest`` entries are added
        to the command's own.

    Returns
    -------
    Applied
    """
    from distsketch.diagnostics import PeakMemory
    from distsketch.io import fingerprint, write_array
    from distsketch.io.storage.urls import resolve
    from distsketch.validation import check_n_features

    show = apply_progress(args)
    inputs = [args.input, args.model]
    model, X, so = load_model_and_input(args, check_model, output=args.output)
    # the feature count is checked before the cluster starts (the model checks it again)
    check_n_features(model, X, reset=False)
    with PeakMemory() as pm, cluster(args, X):
        t0 = time.perf_counter()
        out = getattr(model, method)(X)  # lazy for dask input
        stage(f"{verb} {X.shape[0]} rows with {type(model).__name__} -> {args.output}")
        options = write_options(model)
        manifest = {"model": resolve(args.model).url, "model_class": type(model).__name__,
                    **options.pop("manifest", {}),
                    "input_fingerprint": fingerprint(X, path=args.input)}
        path = write_array(out, args.output, chunk_rows=args.chunk_rows,
                           compressor=None if args.compressor == "none" else args.compressor,
                           overwrite=args.overwrite, progress=show, inputs=inputs,
                           storage_options=so, stage=f"{what} {args.input} by {args.model}",
                           manifest=manifest, **options)
        seconds = time.perf_counter() - t0
    return Applied(model, out, path, seconds, pm.peak_bytes)
