"""``distsketch run spec.yaml``: run or continue a workflow (incremental, resumable).

Takes the output flags of every command (``-q``, ``-v``, ``--json``, before
or after ``run``).  The final line states the status, the rows consumed, the
result folder and the fit score (accuracy or R² of a supervised method, else
the kernel error estimate); ``--json`` prints one object with the status,
rows, segments, every output path, the stage times, the score, the seed and
the peak memory, all taken from the committed manifest.

Exit codes: 0 success (including "nothing new"), 2 a distsketch error (bad
spec, locked output, changed input, unreadable input chunk, unwritable
output), with the message on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distsketch.cli.common import (
    add_dashboard_option,
    add_device_option,
    add_progress_option,
    add_storage_option,
)

__all__ = ["add_parser", "main", "run", "run_summary"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``run`` subcommand on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "run", help="run a workflow spec (incremental, resumable, atomic outputs)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", help="workflow spec YAML (see workflows/)")
    # not common.add_cluster_option: without --cluster the spec's cluster applies, not the
    # commands' small-input rule
    parser.add_argument("--cluster", default=None, metavar="SPEC",
                        help="override the spec's cluster: 'local' (embedded LocalCluster), 'sync' or "
                             "'threads' (no cluster), tcp://host:port, a scheduler file (.json) or a "
                             "cluster spec (.yaml)")
    add_dashboard_option(parser)
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
    add_progress_option(parser)
    add_device_option(parser)  # overrides the spec's device
    parser.set_defaults(func=run)
    return parser


def _join(folder: Any, name: str) -> str:
    # the result folder is a local path or an object-store URL
    return f"{str(folder).rstrip('/')}/{name}"


def _score(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The run's score as the manifest records it: the fit metric, else the kernel error."""
    fit = manifest.get("fit")
    if isinstance(fit, dict) and fit.get("available"):
        return {"metric": fit.get("metric"), "value": fit.get("value"), "on": fit.get("on"),
                "rows": fit.get("rows"), "holdout": fit.get("holdout"),
                "baseline": fit.get("baseline")}
    errors = manifest.get("kernel_errors")
    if isinstance(errors, dict) and errors.get("available"):
        return {"metric": "relative_frobenius_kernel_error",
                "value": errors.get("relative_frobenius"), "on": "sampled rows",
                "rows": errors.get("n_sample"), "holdout": None, "baseline": None}
    return None


def _score_text(score: dict[str, Any]) -> str:
    if score["metric"] == "relative_frobenius_kernel_error":
        return (f"relative Frobenius kernel error {score['value']:.4g} on {score['rows']} sampled "
                "rows")
    name = {"accuracy": "accuracy", "r2": "R²"}.get(str(score["metric"]), str(score["metric"]))
    where = "held-out" if score["on"] == "held-out rows" else "training"
    return f"{where} {name} {score['value']:.4f} on {score['rows']} rows"


def run_summary(result: Any) -> dict[str, Any]:
    """What ``run --json`` prints: a :class:`~distsketch.workflow.RunResult` and its committed
    manifest (nothing is recomputed)."""
    folder = result.result_dir
    out: dict[str, Any] = {
        "command": "run", "status": result.status,
        "rows": {"before": result.rows_before, "after": result.rows_after,
                 "new": result.rows_after - result.rows_before},
        "segments": result.segments, "result_dir": str(folder), "message": result.message}
    man = result.manifest
    if man is None:
        return out
    names = list(man.get("files") or [])
    outputs = (man.get("spec") or {}).get("outputs") or {}
    fit = man.get("fit") if isinstance(man.get("fit"), dict) else {}

    def path(name: Any) -> str | None:
        return _join(folder, str(name)) if name and str(name) in names else None

    out.update({
        "manifest": _join(folder, "distsketch-manifest.json"),
        "files": {name: _join(folder, name) for name in names},
        "model": path(outputs.get("model")),
        "features": path(outputs.get("features")),
        "predictions": path(fit.get("predictions")),
        "report": path(outputs.get("report")),
        "report_html": path(man.get("html_report")),
        "performance_report": path(man.get("performance_report")),
        "timings": man.get("timings"), "score": _score(man), "fit": man.get("fit"),
        "kernel_errors": man.get("kernel_errors"), "seed": man.get("seed"),
        "resolved_params": man.get("resolved_params"),
        "peak_memory_bytes": man.get("peak_memory_bytes"),
        "workers_peak_memory_bytes": man.get("workers_peak_memory_bytes")})
    return out


def run(args: argparse.Namespace) -> int:
    """Execute ``distsketch run`` with parsed arguments; return the exit code."""
    from distsketch.cli.common import apply_progress, cluster_log, storage_options_arg
    from distsketch.cli.output import finish
    from distsketch.workflow import run_workflow

    apply_progress(args)  # the graph layer reads it for every computation of the run
    wait: bool | float = False
    if args.wait is not None:
        wait = True if args.wait < 0 else float(args.wait)
    result = run_workflow(args.spec, cluster=args.cluster, full=args.full, wait=wait,
                          dry_run=args.dry_run, connect_timeout=args.connect_timeout,
                          log=cluster_log(args), force_unlock=args.force_unlock,
                          storage_options=storage_options_arg(args), dashboard=args.dashboard,
                          device=args.device)
    summary = run_summary(result)
    line = result.message
    if summary.get("score") is not None:
        line = f"{line.removesuffix('.')}; {_score_text(summary['score'])}."
    finish(summary, line)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m distsketch.cli.run spec.yaml ...``."""
    from distsketch.cli import main as cli_main

    return cli_main(["run", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
