"""The ``distsketch`` command-line tool.

Each subcommand lives in ``distsketch/cli/<name>.py`` and exposes
``add_parser(subparsers)`` and ``run(args) -> int``.  Subcommand modules are
imported one by one, so a missing or broken module disables only itself.

Exit codes: 0 success; 2 a user error (bad input, bad option, missing store:
one line ``distsketch: error: <message>`` on stderr, no traceback); 1 an
unexpected failure (a short hint; set ``DISTSKETCH_DEBUG=1`` for the
traceback); 130 interrupted.

Every command takes ``-v/--verbose``, ``-q/--quiet`` and ``--json`` before or
after its name (:mod:`distsketch.cli.output`): progress and details are logged
through the ``distsketch`` logger on stderr, results go to stdout.
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
from typing import NoReturn

from distsketch import __version__
from distsketch.cli.output import add_output_options, command_output, print_error
from distsketch.errors import DistsketchError

__all__ = ["SUBCOMMANDS", "UsageError", "build_parser", "main"]

SUBCOMMANDS = ["ingest", "fit", "transform", "predict", "score", "evaluate", "quickstart", "run"]


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


class UsageError(SystemExit):
    """A command line argparse refused (exit code 2), with argparse's message.

    A :class:`SystemExit`, as argparse's own, so that callers of
    :func:`build_parser` see what they always saw; :func:`main` also reports
    it as one JSON object under ``--json``.
    """

    def __init__(self, prog: str, message: str):
        super().__init__(2)
        self.prog = prog
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors raise :class:`UsageError` (subcommands too:
    ``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        # argparse's text, on stderr as before
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise UsageError(self.prog, message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every importable subcommand."""
    parser = _Parser(
        prog="distsketch",
        description="Out-of-core, distributed kernel approximation on Zarr and Dask.",
        epilog="Run `distsketch <command> --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"distsketch {__version__}")
    add_output_options(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    modules, broken = _load_subcommands()
    for mod in modules.values():
        p = mod.add_parser(sub)
        if isinstance(p, argparse.ArgumentParser):
            # -v/-q/--json after the command name too; an option a command defined
            # itself would stay its own
            own = {name for name in ("verbose", "quiet", "json")
                   if f"--{name}" in p._option_string_actions}
            add_output_options(p, skip=tuple(own))
    for name, why in broken.items():
        p = sub.add_parser(name, help=f"(unavailable: {why})")
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(_broken=f"the '{name}' command cannot be loaded ({why}); reinstall "
                                "distsketch.")
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: its first word that is not a flag (None if unknown)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in SUBCOMMANDS else None


def _json_args(argv: Sequence[str], command: str | None) -> argparse.Namespace:
    """What :func:`print_error` needs from a command line argparse refused: the command
    and whether ``--json`` was given (spelled as argparse would accept it)."""
    flags = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    flags.add_argument("--json", action="store_true")
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    try:
        wanted = bool(flags.parse_known_args(words)[0].json)
    except (argparse.ArgumentError, SystemExit):  # an ambiguous prefix: not --json
        wanted = False
    return argparse.Namespace(command=command, json=wanted)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    argv = list(argv) if argv is not None else sys.argv[1:]
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        # --json promises one JSON object on stdout, also when the options are refused
        command = _command_of(argv)
        hint = f"distsketch {command} --help" if command else "distsketch --help"
        print_error(_json_args(argv, command), f"{exc.message} (run `{hint}` for the options)",
                    2)
        raise
    if getattr(args, "command", None) is None:
        parser.print_help(sys.stderr)
        print_error(args, "no command given; run `distsketch --help` for the commands", 2)
        return 2
    if getattr(args, "_broken", None):
        return _error(args, args._broken, 2)
    # results go to the real stdout; progress bars of libraries that print to
    # stdout (distributed's text bar) are sent to stderr so output stays parseable
    from distsketch.cli.common import command_config

    try:
        with command_output(args, sys.stdout), contextlib.redirect_stdout(sys.stderr), \
                command_config(args):
            return int(args.func(args) or 0)
    except DistsketchError as exc:
        return _error(args, _one_line(exc), 2)
    except KeyboardInterrupt:
        return _error(args, "interrupted", 130, prefix="distsketch: ")
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            return _unexpected(args, exc)
        where = f" writing {exc.filename}" if exc.filename else ""
        return _error(args, f"no space left on device{where} ({exc.strerror}); free space or "
                            "choose another output.", 2)
    except Exception as exc:
        return _unexpected(args, exc)


def _error(args: argparse.Namespace, message: str, code: int,
           prefix: str = "distsketch: error: ") -> int:
    print(f"{prefix}{message}", file=sys.stderr)
    print_error(args, message, code)
    return code


def _unexpected(args: argparse.Namespace, exc: BaseException) -> int:
    if os.environ.get("DISTSKETCH_DEBUG"):
        traceback.print_exception(exc)
    return _error(args, f"{type(exc).__name__}: {_one_line(exc)} (set DISTSKETCH_DEBUG=1 for "
                        "the traceback, and please report it)", 1,
                  prefix="distsketch: unexpected error: ")
