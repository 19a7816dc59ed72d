"""One night of an incremental pipeline: (optionally) append the day's rows, then run.

``nightly.yaml`` beside this file is the pipeline; this script is what cron or
a systemd timer calls once a night::

    30 2 * * * cd /srv/nightly && venv/bin/python nightly.py --root /srv/nightly --wait 3600

Each run folds only the rows appended since the last run into the stored
summary, checkpoints per segment and commits ``runs/nightly/result/``
atomically; with nothing new it says so and does nothing.  ``--simulate-day
N`` stands in for the day's ingest: it appends N synthetic rows to
``data/X.zarr`` (creating the store on the first day), so the example runs on
a laptop::

    python examples/nightly/nightly.py --root /tmp/nightly --simulate-day 5000 --cluster threads
    python examples/nightly/nightly.py --root /tmp/nightly --cluster threads   # nothing new
    python examples/nightly/nightly.py --root /tmp/nightly --simulate-day 2000 --cluster threads

Exit status: 0 on success (also "nothing new"), 2 on a distsketch error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

SPEC = Path(__file__).resolve().parent / "nightly.yaml"
N_FEATURES = 20


def day_rows(first_row: int, n_rows: int) -> np.ndarray:
    """Synthetic rows ``first_row : first_row + n_rows``: points around four fixed centres."""
    rng = np.random.default_rng(first_row)            # each day's rows differ
    centres = np.random.default_rng(0).normal(size=(4, N_FEATURES))
    return (centres[rng.integers(0, 4, n_rows)]
            + 0.5 * rng.normal(size=(n_rows, N_FEATURES))).astype(np.float32)


def append_day(root: Path, n_rows: int) -> int:
    """Append ``n_rows`` rows to ``root/data/X.zarr`` (created on the first day); return the total.

    The first day is ingested; later days are appended with :func:`distsketch.io.append`
    (CLI: ``distsketch ingest day.npy data/X.zarr --append``), which grows the arrays, the
    consolidated metadata and the manifest together.  Never resize the arrays by hand:
    distsketch refuses a store whose rows changed outside it.
    """
    from distsketch.io import append, ingest, read_manifest

    store = root / "data" / "X.zarr"
    if not store.exists():
        rows = day_rows(0, n_rows)
        store.parent.mkdir(parents=True, exist_ok=True)
        np.save(root / "data" / "day0.npy", rows)
        ingest(root / "data" / "day0.npy", store)
        return n_rows
    n = int(read_manifest(store)["rows"])  # type: ignore[index]
    append(store, day_rows(n, n_rows), source=f"simulated day at row {n}")
    return n + n_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=SPEC.parent,
                        help="folder holding data/ and runs/ (relative paths of the spec)")
    parser.add_argument("--cluster", default=None,
                        help="overrides the spec's cluster: local, threads, sync, tcp://..., a .yaml")
    parser.add_argument("--wait", type=float, default=0,
                        help="seconds to queue behind a run still holding the lock")
    parser.add_argument("--simulate-day", type=int, default=0, metavar="N",
                        help="first append N synthetic rows to data/X.zarr (demo only)")
    args = parser.parse_args(argv)

    from distsketch.errors import DistsketchError
    from distsketch.workflow import load_workflow_spec, run_workflow

    try:
        if args.simulate_day:
            total = append_day(args.root, args.simulate_day)
            print(f"appended {args.simulate_day} rows: data/X.zarr has {total} rows")
        spec = load_workflow_spec(SPEC, base=args.root)
        result = run_workflow(spec, cluster=args.cluster, wait=args.wait or False, log=print)
    except DistsketchError as exc:
        print(f"nightly: error: {exc}", file=sys.stderr)
        return 2
    print(f"{result.status}: rows {result.rows_before} -> {result.rows_after}; {result.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
