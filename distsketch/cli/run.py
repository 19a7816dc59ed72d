"""``distsketch run spec.yaml``: run or continue a workflow (incremental, resumable).

Exit codes: 0 success (including "nothing new"), 2 a distsketch error (bad
spec, locked output, changed input, unreadable input chunk, unwritable
output), with the message on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distsketch.cli.common import add_storage_option

__all__ = ["add_parser", "main", "run"]

HELP = "run a workflow spec (incremental, resumable, atomic outputs)"


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="workflow spec YAML (see workflows/)")
    # not common.add_cluster_option: its default ("local") would override the spec's cluster
    parser.add_argument("--cluster", default=None, metavar="SPEC",
                        help="override the spec's cluster: 'local' (embedded LocalCluster), 'sync' or "
                             "'threads' (no cluster), tcp://host:port, a scheduler file (.json) or a "
                             "cluster spec (.yaml)")
    parser.add_argument("--connect-timeout", type=float, default=20.0, metavar="SECONDS",
                        help="seconds to wait for a remote scheduler (default 20)")
    parser.add_argument("--dry-run", action="store_true",
                        help="show what would be done without computing or writing")
    parser.add_argument("--full", action="store_true",
                        help="discard the stored state and refit on all rows")
    parser.add_argument("--wait", nargs="?", const=-1.0, default=None, type=float, metavar="SECONDS",
                        help="if another run holds the output folder, wait for it (optionally at "
                             "most SECONDS) instead of refusing")
    parser.add_argument("--force-unlock", action="store_true",
                        help="on an object store: remove the lock object a run that is gone left "
                             "behind, then run (never while another run may still write there)")
    add_storage_option(parser)
    parser.add_argument("--quiet", action="store_true", help="print only the final line")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars on stderr (default: on when stderr is a terminal)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``run`` subcommand on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser("run", help=HELP, description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute ``distsketch run`` with parsed arguments; return the exit code.

    Distsketch errors propagate to the CLI's main, which prints them as one
    line and exits with code 2.
    """
    import os

    from distsketch.cli.common import emit, storage_options_arg
    from distsketch.workflow import run_workflow

    if args.progress is not None:
        # the graph layer reads this for every computation of the run
        os.environ["DISTSKETCH_PROGRESS"] = "1" if args.progress else "0"
    wait: bool | float = False
    if args.wait is not None:
        wait = True if args.wait < 0 else float(args.wait)
    log = (lambda msg: None) if args.quiet else None
    result = run_workflow(args.spec, cluster=args.cluster, full=args.full, wait=wait,
                          dry_run=args.dry_run, connect_timeout=args.connect_timeout, log=log,
                          force_unlock=args.force_unlock,
                          storage_options=storage_options_arg(args))
    emit(result.message)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m distsketch.cli.run spec.yaml ...``."""
    from distsketch.errors import DistsketchError

    parser = argparse.ArgumentParser(prog="distsketch run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(parser)
    try:
        return run(parser.parse_args(argv))
    except DistsketchError as exc:
        print(f"distsketch: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
