"""Options and helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from distsketch.errors import ConfigError

__all__ = [
    "add_allow_missing_chunks_option",
    "add_block_rows_option",
    "add_cluster_option",
    "add_common_options",
    "add_dashboard_option",
    "add_device_option",
    "add_input_options",
    "add_overwrite_option",
    "add_progress_option",
    "add_storage_option",
    "check_before_cluster",
    "cluster",
    "cluster_log",
    "command_config",
    "loadable_estimators",
    "median_gamma",
    "open_command_input",
    "open_input",
    "parse_params",
    "parse_storage_options",
    "positive_int",
    "stage",
    "storage_options_arg",
]

def stage(message: str) -> None:
    """A progress message on stderr (INFO on the ``distsketch.cli`` logger: ``-q`` hides it)."""
    logging.getLogger("distsketch.cli").info(message)


def add_cluster_option(parser: argparse.ArgumentParser, *, used: bool = True) -> None:
    help_text = (
        "Dask cluster: 'local' (an embedded LocalCluster, one worker per core), 'sync' or "
        "'threads' (no cluster), tcp://host:port, a scheduler file (.json) or a cluster spec "
        "(.yaml). Default: $DASK_SCHEDULER_ADDRESS (or Dask's scheduler-address config) when "
        "set; else 'threads' for an input of at most 256 MiB (dask config "
        "distsketch.cli.threads-below), else 'local'."
    )
    if not used:
        help_text += " Accepted for uniformity; this command runs in this process only."
    parser.add_argument("--cluster", default=None, metavar="SPEC", help=help_text)
    if used:
        add_dashboard_option(parser)


_DASHBOARD_ADDRESS = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]*):\d{1,5}")


def _dashboard_address(text: str) -> str:
    """argparse type of ``--dashboard``'s address: ``:PORT``, ``HOST:PORT`` or a bare port."""
    if text == "auto":  # the flag alone (argparse passes its const through here too)
        return text
    if text.isdigit() and len(text) <= 5:
        return f":{text}"
    if not _DASHBOARD_ADDRESS.fullmatch(text):
        # nargs="?" takes the next word: a positional written after --dashboard lands here
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a dashboard address (:PORT or HOST:PORT, e.g. :8787); put "
            "--dashboard after the positional arguments or write --dashboard=:8787")
    return text


def add_dashboard_option(parser: argparse.ArgumentParser) -> None:
    """``--dashboard [ADDRESS]``: start a LocalCluster with the Dask dashboard on, show its link."""
    parser.add_argument(
        "--dashboard", nargs="?", const="auto", default=None, type=_dashboard_address,
        metavar="ADDRESS",
        help="serve the Dask dashboard and print its link: starts the embedded LocalCluster "
             "even for a small input, its dashboard at ADDRESS (:PORT or HOST:PORT; default: "
             "any free port, or the cluster spec's dashboard_address); a scheduler connected "
             "to shows its own. Needs bokeh (pip install \"distsketch[cluster]\")")


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="progress bars on stderr (default: on when stderr is a terminal)")


def add_overwrite_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing output written by distsketch (atomically); "
                             "never a file or folder it did not write, nor the input")


def add_common_options(parser: argparse.ArgumentParser, *, cluster_used: bool = True,
                       overwrite: bool = True) -> None:
    """--cluster, --progress/--no-progress and (optionally) --overwrite."""
    add_cluster_option(parser, used=cluster_used)
    add_progress_option(parser)
    if overwrite:
        add_overwrite_option(parser)


def apply_progress(args: argparse.Namespace) -> bool:
    """Whether the command shows progress bars (``--progress`` / ``--no-progress``)."""
    from distsketch.graph import progress_enabled

    return progress_enabled(args.progress)


def check_before_cluster(estimator: Any, n_samples: int, n_features: int) -> None:
    """Every parameter check that needs no data (``check_params``), so that a bad parameter
    fails in milliseconds instead of after the cluster's start-up."""
    estimator.check_params(n_samples, n_features)


#: Inputs up to this size run on threads in the CLI's own process unless a cluster is
#: named or configured: a LocalCluster's start (5-10 s) would cost more than the work.
#: Dask config ``distsketch.cli.threads-below`` changes it (0: always the LocalCluster).
SMALL_INPUT_BYTES = 256 * 2**20


def _small_input_limit() -> int:
    import dask
    from dask.utils import parse_bytes

    value = dask.config.get("distsketch.cli.threads-below", None)
    if value is None:
        return SMALL_INPUT_BYTES
    try:
        return int(parse_bytes(value))
    except (TypeError, ValueError):
        raise ConfigError(f"dask config distsketch.cli.threads-below = {value!r} is not a size; "
                          "give bytes or a string such as '256MiB'.") from None


def default_cluster(data: Any = None) -> str | None:
    """The cluster without ``--cluster``: ``"threads"`` for a small ``data`` when no scheduler
    is configured, else None (the configured scheduler or the embedded LocalCluster)."""
    from distsketch.cluster import configured_scheduler_address

    if data is None or configured_scheduler_address() is not None:
        return None
    nbytes = int(np.prod(data.shape, dtype=np.float64)) * np.dtype(data.dtype).itemsize
    return "threads" if nbytes <= _small_input_limit() else None


@contextlib.contextmanager
def cluster(args: argparse.Namespace, data: Any = None) -> Iterator[Any]:
    """Connect to ``--cluster`` (else :func:`default_cluster`'s choice) while a command runs."""
    from dask.utils import format_bytes

    from distsketch.cluster import connect

    spec = getattr(args, "cluster", None)
    dashboard = getattr(args, "dashboard", None)
    if spec is None and dashboard is None and default_cluster(data) == "threads":
        spec = "threads"
        nbytes = int(np.prod(data.shape, dtype=np.float64)) * np.dtype(data.dtype).itemsize
        stage(f"input of {format_bytes(nbytes)} (at most {format_bytes(_small_input_limit())}): "
              "running on threads in this process, no cluster; --cluster local starts one")
    t0 = time.perf_counter()
    with connect(spec, log=cluster_log(args), dashboard=dashboard) as client:
        if client is not None:
            n = len(client.scheduler_info().get("workers", {}))
            stage(f"connected to Dask at {client.scheduler.address} ({n} worker(s), "
                  f"{time.perf_counter() - t0:.1f} s)")
        else:
            stage(f"using the local '{spec}' Dask scheduler (no cluster)")
        yield client


def cluster_log(args: argparse.Namespace) -> Callable[[str], None]:
    """The ``log`` of :func:`distsketch.cluster.connect` for a command: :func:`stage`, except
    that the dashboard link ``--dashboard`` asked for shows even with ``-q``."""
    from distsketch.cli.output import output_mode
    from distsketch.cluster import DASHBOARD_PREFIX

    def log(message: str) -> None:
        if (getattr(args, "dashboard", None) is not None and output_mode().quiet
                and message.startswith(DASHBOARD_PREFIX)):
            print(f"distsketch: {message}", file=sys.stderr, flush=True)
        else:
            stage(message)
    return log


def loadable_estimators() -> Iterator[tuple[str, Any]]:
    """``(registry name, class)`` of every estimator whose module this installation imports."""
    from distsketch import registry

    for name in registry.ESTIMATORS:
        try:
            yield name, registry.resolve(name)
        except ConfigError:  # a module this installation lacks
            continue


def _parse_value(text: str) -> Any:
    from distsketch.validation import loads_yaml

    try:
        return loads_yaml(text)
    except ConfigError:
        return text  # not YAML: the plain string


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """``["a=1", "b=rbf", "c=[1, 2]"]`` -> ``{"a": 1, "b": "rbf", "c": [1, 2]}`` (YAML values)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param {item!r}: expected key=value, e.g. --param sketch_size=64.")
        out[key.strip()] = _parse_value(value.strip())
    return out


def positive_int(text: str) -> int:
    """argparse type of a count that must be >= 1 (rows per chunk or block, widths)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (>= 1), got {value}")
    return value


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option", action="append", metavar="KEY=VALUE", default=[],
        dest="storage_option",
        help="fsspec storage option for URL inputs and outputs (s3://, gs://, ...), repeatable; "
             "VALUE is JSON when it parses (true, 3, {\"a\": 1}), else a string; dotted keys "
             "nest (client_kwargs.endpoint_url=http://127.0.0.1:9000). Merged over the dask "
             "config distsketch.storage-options")


def parse_storage_options(items: list[str] | None) -> dict[str, Any] | None:
    """``["anon=true", "client_kwargs.endpoint_url=http://h:9000"]`` -> nested options
    (JSON values where they parse, else strings; None when empty)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        parts = [k.strip() for k in key.split(".")]
        if not sep or not all(parts):
            raise ConfigError(f"--storage-option {item!r}: expected KEY=VALUE, e.g. "
                              "--storage-option anon=true or --storage-option "
                              "client_kwargs.endpoint_url=http://127.0.0.1:9000.")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        node = out
        for k in parts[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--storage-option {item!r}: {k!r} is already set to a value, "
                                  "not a mapping.")
        node[parts[-1]] = value
    return out or None


def storage_options_arg(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--storage-option`` items of a command, parsed (None when there are none)."""
    return parse_storage_options(getattr(args, "storage_option", None))


def add_allow_missing_chunks_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-missing-chunks", action="store_true",
        help="read absent chunks of an input written with empty chunks skipped (Zarr's "
             "write_empty_chunks=False) as its fill value instead of refusing them as lost")


def add_block_rows_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--block-rows", type=positive_int, default=None,
        help="rows per task (default: planned per stage from its memory per row, the memory a "
             "task may use on the cluster, at most 64 MiB of input, at least 4 blocks per task "
             "thread, in whole Zarr chunks; -v logs each plan)")


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device {cpu,cuda}``: where the blocks are computed (dask config ``distsketch.device``)."""
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default=None,
        help="compute the blocks on the CPU (NumPy) or on the GPU ('cuda': each block read "
             "moves to the GPU in its read task; outputs are written as on the CPU). Default: "
             "the dask config distsketch.device, else cpu. 'cuda' needs pip install "
             "'distsketch[gpu]' (docs/gpu.md)")


@contextlib.contextmanager
def command_config(args: argparse.Namespace) -> Iterator[None]:
    """``--device`` and ``--progress`` as dask config while the command runs, and only then
    (``--device`` checked before an input or a cluster opens)."""
    import dask

    from distsketch.graph import DEVICE_KEY, PROGRESS_KEY
    from distsketch.ops.device import require_cupy

    settings: dict[str, Any] = {}
    if getattr(args, "progress", None) is not None:
        settings[PROGRESS_KEY] = bool(args.progress)
    device = getattr(args, "device", None)
    if device is not None:
        if device != "cpu":
            require_cupy(f"--device {device}")
        settings[DEVICE_KEY] = device
    with dask.config.set(settings):
        yield


def add_input_options(parser: argparse.ArgumentParser, *, overwrite: bool = True) -> None:
    """The options of a command reading a Zarr input."""
    add_block_rows_option(parser)
    add_device_option(parser)
    add_allow_missing_chunks_option(parser)
    add_common_options(parser, overwrite=overwrite)
    add_storage_option(parser)


def open_command_input(args: argparse.Namespace, storage_options: dict | None) -> Any:
    """:func:`open_input` of a command's input with its :func:`add_input_options`."""
    return open_input(args.input, args.block_rows, allow_missing_chunks=args.allow_missing_chunks,
                      storage_options=storage_options)


def open_input(path: str, block_rows: int | None = None, *,
               allow_missing_chunks: bool = False, storage_options: dict | None = None) -> Any:
    """Open a Zarr input once, in whole chunks planned for any stage (the estimator plans its
    own stages later); ``block_rows`` overrides."""
    from distsketch.io.arrays.access import open_array

    if block_rows is not None and block_rows < 1:
        raise ConfigError(f"--block-rows must be >= 1; got {block_rows}.")
    return open_array(path, block_rows=block_rows, allow_missing_chunks=allow_missing_chunks,
                      storage_options=storage_options, any_stage=block_rows is None)


def median_gamma(X: Any, n_sample: int = 1000, random_state: int = 0) -> float:
    """The median heuristic (:func:`distsketch.estimators.kernel_params.median_gamma`)."""
    from distsketch.estimators.kernel_params import median_gamma as median

    return median(X, n_sample=n_sample, random_state=random_state)
