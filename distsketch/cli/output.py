"""What a command prints: log levels (``-v``/``-q``), results and ``--json``.

Progress and details go through the ``logging`` module (the ``distsketch``
logger and its children) to stderr; results go to stdout, either as text
lines or, with ``--json``, as one JSON object holding the command's results
(paths written, shapes, timings, scores) and every warning logged while it ran.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "OutputMode",
    "add_output_options",
    "command_output",
    "finish",
    "output_mode",
    "print_error",
    "warn",
]

logger = logging.getLogger("distsketch")
#: the commands' own progress messages (a child, so ``-q`` and ``-v`` act on both)
cli_logger = logging.getLogger("distsketch.cli")

# the top-level parser stores its flags under these names, so a subcommand's own
# option of the same name cannot overwrite them
_GLOBAL = {"verbose": "_global_verbose", "quiet": "_global_quiet", "json": "_global_json"}


def add_output_options(parser: argparse.ArgumentParser, *, top_level: bool = False,
                       skip: Sequence[str] = ()) -> None:
    """Add ``-v/--verbose``, ``-q/--quiet`` and ``--json`` to ``parser``, except those in ``skip``
    (the command's own); ``top_level``: the options before the command name."""
    group = parser.add_argument_group("output")
    kw: dict[str, Any] = {"action": "store_true"}
    if not top_level:
        # a flag not given after the command leaves the one before it in place
        kw["default"] = argparse.SUPPRESS

    def dest(name: str) -> str:
        return _GLOBAL[name] if top_level else name

    if "verbose" not in skip:
        group.add_argument("-v", "--verbose", dest=dest("verbose"), **kw,
                           help="log details on stderr (the block plan of every stage, solver "
                                "iterations)")
    if "quiet" not in skip:
        group.add_argument("-q", "--quiet", dest=dest("quiet"), **kw,
                           help="print only warnings, errors and the final result")
    if "json" not in skip:
        group.add_argument("--json", dest=dest("json"), **kw,
                           help="print the results as one JSON object on stdout (paths, shapes, "
                                "timings, scores, warnings)")


class OutputMode:
    """The output settings of one command run (see :func:`output_mode`)."""

    def __init__(self, verbose: bool = False, quiet: bool = False, json_: bool = False):
        self.verbose = verbose
        self.quiet = quiet
        self.json = json_
        self.warnings: list[str] = []
        self.command: str | None = None
        self.stdout: Any = None  # where the JSON object goes (the command's real stdout)
        self.finished = False  # the command printed its own results through finish()


_MODES: list[OutputMode] = []


def output_mode() -> OutputMode:
    """The settings of the running command (defaults outside one)."""
    return _MODES[-1] if _MODES else OutputMode()


def _flag(args: argparse.Namespace, name: str) -> bool:
    return bool(getattr(args, _GLOBAL[name], False) or getattr(args, name, False))


class _StderrHandler(logging.StreamHandler):
    """A handler writing to the *current* ``sys.stderr`` (test capture replaces it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ assigns it
        pass


class _Formatter(logging.Formatter):
    """``distsketch: message``; warnings and errors say so (``distsketch: warning: ...``)."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        kind = ("error" if record.levelno >= logging.ERROR
                else "warning" if record.levelno >= logging.WARNING else "")
        if kind and not text.startswith(f"{kind}:"):
            text = f"{kind}: {text}"
        return f"distsketch: {text}"


class _WarningCollector(logging.Handler):
    def __init__(self, mode: OutputMode):
        super().__init__(logging.WARNING)
        self.mode = mode

    def emit(self, record: logging.LogRecord) -> None:
        self.mode.warnings.append(record.getMessage())


@contextlib.contextmanager
def command_output(args: argparse.Namespace, stdout: Any = None) -> Iterator[OutputMode]:
    """Logging for one command from its ``-v``/``-q``/``--json`` flags, restored afterwards;
    warnings are collected for ``--json`` (one object also for a command that does not call
    :func:`finish`)."""
    mode = OutputMode(_flag(args, "verbose"), _flag(args, "quiet"), _flag(args, "json"))
    mode.command = getattr(args, "command", None)
    mode.stdout = stdout if stdout is not None else sys.stdout
    # a command that had its own --quiet would see the global one too
    if mode.quiet and hasattr(args, "quiet"):
        args.quiet = True
    handler = _StderrHandler()
    handler.setFormatter(_Formatter())
    collector = _WarningCollector(mode)
    saved = (logger.level, cli_logger.level)
    if mode.quiet:
        levels = (logging.WARNING, logging.WARNING)
    elif mode.verbose:
        levels = (logging.INFO, logging.DEBUG)
    else:
        levels = (logging.WARNING, logging.INFO)
    logger.setLevel(levels[0])
    cli_logger.setLevel(levels[1])
    logger.addHandler(handler)
    logger.addHandler(collector)
    _MODES.append(mode)
    try:
        with warnings.catch_warnings():
            # Python warnings of the libraries (after their filters) join the command's own
            warnings.showwarning = _show_warning
            yield mode
        if mode.json and not mode.finished:
            _write_json(mode, {"command": mode.command, "output": []})
    finally:
        _MODES.pop()
        logger.removeHandler(handler)
        logger.removeHandler(collector)
        logger.setLevel(saved[0])
        cli_logger.setLevel(saved[1])


def _show_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                  line: Any = None) -> None:
    cli_logger.warning("%s: %s", getattr(category, "__name__", "Warning"), message)


def warn(message: str) -> None:
    """A warning of the running command: on stderr and in ``--json``'s ``warnings``."""
    cli_logger.warning("%s", message)


def _write_json(mode: OutputMode, result: dict[str, Any]) -> None:
    from distsketch.io.commit.jsonable import json_default

    body = {**result, "warnings": list(mode.warnings)}
    stream = mode.stdout if mode.stdout is not None else sys.stdout
    print(json.dumps(body, indent=2, sort_keys=True, default=json_default), file=stream, flush=True)
    mode.finished = True


def finish(result: dict[str, Any], lines: Sequence[str] | str) -> None:
    """Print ``lines``, or with ``--json`` the one JSON object ``result`` plus ``warnings``."""
    mode = output_mode()
    if mode.json:
        _write_json(mode, result)
        return
    stream = mode.stdout if mode.stdout is not None else sys.stdout
    for line in [lines] if isinstance(lines, str) else lines:
        print(line, file=stream, flush=True)


def print_error(args: argparse.Namespace, message: str, code: int) -> None:
    """With ``--json``, a failed command's one JSON object (the message is on stderr too)."""
    if _flag(args, "json"):  # given before or after the command name
        print(json.dumps({"command": getattr(args, "command", None), "error": message,
                          "exit_code": code}, indent=2, sort_keys=True), flush=True)
