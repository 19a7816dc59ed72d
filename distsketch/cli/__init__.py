"""The ``distsketch`` command-line tool.

Each subcommand lives in ``distsketch/cli/<name>.py`` and exposes
``add_parser(subparsers)`` and ``run(args) -> int``.  Subcommand modules are
imported one by one, so a missing or broken module disables only itself.

Exit codes: 0 success; 2 a user error (bad input, bad option, missing store:
one line ``distsketch: error: <message>`` on stderr, no traceback); 1 an
unexpected failure (a short hint; set ``DISTSKETCH_DEBUG=1`` for the
traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from distsketch import __version__
from distsketch.errors import DistsketchError

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

SUBCOMMANDS = ["ingest", "fit", "transform", "evaluate", "quickstart", "run"]


def _load_subcommands() -> tuple[dict[str, ModuleType], dict[str, str]]:
    modules: dict[str, ModuleType] = {}
    broken: dict[str, str] = {}
    for name in SUBCOMMANDS:
        full = f"distsketch.cli.{name}"
        try:
            modules[name] = importlib.import_module(full)
        except ModuleNotFoundError as exc:
            if exc.name != full:  # the module exists but one of its imports is missing
                broken[name] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a broken module must not take the others down
            broken[name] = f"{type(exc).__name__}: {exc}"
    return modules, broken


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every importable subcommand."""
    parser = argparse.ArgumentParser(
        prog="distsketch",
        description="Out-of-core, distributed kernel approximation on Zarr and Dask.",
        epilog="Run `distsketch <command> --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"distsketch {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log details (the block plan of every stage) on stderr")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    modules, broken = _load_subcommands()
    for mod in modules.values():
        mod.add_parser(sub)
    for name, why in broken.items():
        p = sub.add_parser(name, help=f"(unavailable: {why})")
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(_broken=f"the '{name}' command cannot be loaded ({why}); reinstall "
                                "distsketch.")
    return parser


def _log_to_stderr() -> None:
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("distsketch: %(message)s"))
    log = logging.getLogger("distsketch")
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    if getattr(args, "command", None) is None:
        parser.print_help(sys.stderr)
        return 2
    if args.verbose:
        _log_to_stderr()
    if getattr(args, "_broken", None):
        print(f"distsketch: error: {args._broken}", file=sys.stderr)
        return 2
    # results go to the real stdout; progress bars of libraries that print to
    # stdout (distributed's text bar) are sent to stderr so output stays parseable
    from distsketch.cli.common import result_stream

    try:
        with result_stream(sys.stdout), contextlib.redirect_stdout(sys.stderr):
            return int(args.func(args) or 0)
    except DistsketchError as exc:
        print(f"distsketch: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("distsketch: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            return _unexpected(exc)
        where = f" writing {exc.filename}" if exc.filename else ""
        print(f"distsketch: error: no space left on device{where} ({exc.strerror}); free space "
              "or choose another output.", file=sys.stderr)
        return 2
    except Exception as exc:
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> int:
    if os.environ.get("DISTSKETCH_DEBUG"):
        traceback.print_exception(exc)
    print(f"distsketch: unexpected error: {type(exc).__name__}: {_one_line(exc)} "
          "(set DISTSKETCH_DEBUG=1 for the traceback, and please report it)",
          file=sys.stderr)
    return 1
