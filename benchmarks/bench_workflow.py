"""`distsketch run` on a LocalCluster: segments one at a time vs several in flight.

Measures the fit stage of a workflow (StreamingKernelPCA on a Zarr store,
checkpointed per segment) with ``segments_in_flight: 1`` (one segment after
another) and the default (one per cluster thread, plus one).  Reports wall
time, rows/s and the average number of tasks running at once (busy task
time ÷ wall time, from the scheduler's task stream), and checks that both
runs give bitwise the same model.

Usage::

    python benchmarks/bench_workflow.py --workers 2 --rows 400000 --cols 50
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    import numpy as np
    import zarr
    from distributed import Client, LocalCluster, get_task_stream

    import distsketch
    from distsketch.workflow import run_workflow

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--cols", type=int, default=50)
    ap.add_argument("--segment-rows", type=int, default=50_000)
    ap.add_argument("--chunk-rows", type=int, default=10_000)
    ap.add_argument("--method", default="rnca", choices=["rnca", "fd"])
    ap.add_argument("--features", type=int, default=256)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-workflow-"))
    X = np.random.default_rng(0).normal(size=(args.rows, args.cols)).astype(np.float32)
    arr = zarr.create_array(store=str(tmp / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(args.chunk_rows, args.cols))
    arr[...] = X
    del X
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        results = {}
        for label, in_flight in (("one at a time", 1), ("in flight", None)):
            spec = {
                "input": str(tmp / "X.zarr"), "seed": 0, "segment_rows": args.segment_rows,
                "segments_in_flight": in_flight,
                "method": {"name": "StreamingKernelPCA", "params": {
                    "method": args.method, "n_random_features": args.features, "n_components": 8,
                    "gamma": 0.02}},
                "outputs": {"dir": str(tmp / f"out{in_flight}"), "features": None, "report": None},
                "report": {"kernel_error": False, "png": False},
            }
            with get_task_stream(client) as ts:
                res = run_workflow(spec, cluster=cluster.scheduler_address, log=lambda m: None)
            fit = res.manifest["timings"]["fit"]
            busy = sum(max(0.0, s["stop"] - s["start"]) for r in ts.data
                       for s in r["startstops"] if s["action"] == "compute")
            starts = [s["start"] for r in ts.data for s in r["startstops"]]
            stops = [s["stop"] for r in ts.data for s in r["startstops"]]
            span = max(stops) - min(starts)
            results[label] = distsketch.load(Path(res.result_dir) / "model.zarr")
            print(f"{label:14s} segments_in_flight={res.manifest['segments_in_flight']:2d} "
                  f"segments={res.segments} fit {fit:6.2f} s  {args.rows / fit:9.0f} rows/s  "
                  f"tasks={len(ts.data)}  tasks running at once (busy/wall of the run's tasks) "
                  f"{busy / span:.2f}, busy/fit {busy / fit:.2f}")
        a, b = results.values()
        same = all(np.array_equal(getattr(a, k), getattr(b, k))
                   for k in ("components_", "singular_values_"))
        print(f"bitwise equal models: {same}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - t0:.1f} s")
