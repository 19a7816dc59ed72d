"""Object store vs local disk: scan and write throughput of one Zarr store layout.

Run::

    python benchmarks/bench_storage.py --rows 1000000

A ``rows x 100`` float32 store is written locally with distsketch's defaults
(``make_random_noisy_zarr``: 100 000-row chunks, LZ4).  The same layout (shape,
chunks, codecs) is then written to and scanned from an S3 bucket served by a
``moto`` server on 127.0.0.1 through ``s3fs`` and Zarr's fsspec store, and the
same write and scan are timed on local disk:

* write: ``dask.array.store`` of the in-memory array into the target, chunk-aligned,
  on the threaded scheduler;
* scan: ``dask.array.from_zarr(...).sum()`` on the threaded scheduler (every
  chunk read and decompressed once).

Rates are MB/s of uncompressed data.  A moto server keeps objects in the memory
of this process, so the S3 rows measure the protocol path (HTTP, signing,
s3fs, one request per chunk), not a real object store's network.  The writes go
through Zarr and s3fs directly, the same store layout distsketch writes.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import socket
import tempfile
import time
from pathlib import Path

import numpy as np

D = 100


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(f, repeat: int = 2) -> float:
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, default=1_000_000)
    ap.add_argument("--threads", type=int, default=None, help="dask threads (default: cores)")
    ap.add_argument("--json", type=str, default=None)
    args = ap.parse_args()
    n = int(args.rows)

    import dask
    import dask.array as da
    import s3fs
    import zarr
    from moto.server import ThreadedMotoServer
    from zarr.storage import FsspecStore

    from distsketch.datasets import make_random_noisy_zarr

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    results: dict = {"rows": n, "mb": n * D * 4 / 1e6}
    try:
        src_path = make_random_noisy_zarr(work / "x.zarr", n, D, random_state=0, progress=False)
        src = zarr.open_array(str(src_path), path="X", mode="r")
        X = np.asarray(src[:])
        opts = {"key": "bench", "secret": "bench", "client_kwargs": {
            "endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"}}
        fs = s3fs.S3FileSystem(asynchronous=True, **opts)
        import boto3

        boto3.client("s3", aws_access_key_id="bench", aws_secret_access_key="bench",
                     **opts["client_kwargs"]).create_bucket(Bucket="bench")
        layout = {"shape": src.shape, "chunks": src.chunks, "dtype": src.dtype,
                  "compressors": src.compressors, "filters": src.filters}
        results["layout"] = {"chunks": list(src.chunks),
                             "compressors": [str(c) for c in src.compressors]}
        Xd = da.from_array(X, chunks=src.chunks)
        sched = {"scheduler": "threads"}
        if args.threads:
            sched["num_workers"] = args.threads

        def target(kind: str, i: int):
            if kind == "local":
                path = work / f"local-{i}.zarr"
                shutil.rmtree(path, ignore_errors=True)
                return zarr.create_array(str(path), **layout)
            store = FsspecStore(fs, path=f"bench/s3-{i}.zarr")
            return zarr.create_array(store, overwrite=True, **layout)

        for kind in ("local", "s3"):
            counter = iter(range(100))

            def write(kind=kind, counter=counter):
                arr = target(kind, next(counter))
                with dask.config.set(**sched):
                    da.store(Xd, arr, lock=False)
                return arr

            t_write = _timed(write)
            arr = write()
            back = da.from_zarr(arr, chunks=src.chunks)
            with dask.config.set(**sched):
                total = float(back.sum(dtype=np.float64).compute())
                t_scan = _timed(lambda back=back: back.sum(dtype=np.float64).compute())
            assert np.isclose(total, X.sum(dtype=np.float64)), "a chunk did not arrive"
            results[kind] = {"write_s": t_write, "scan_s": t_scan,
                             "write_mbps": results["mb"] / t_write,
                             "scan_mbps": results["mb"] / t_scan}
            print(f"{kind:5s} write {results['mb'] / t_write:8.1f} MB/s  "
                  f"scan {results['mb'] / t_scan:8.1f} MB/s", flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    loc, s3 = results["local"], results["s3"]
    print(f"\n| n × {D} float32 ({results['mb']:.0f} MB) | write MB/s | scan MB/s |")
    print("|---|---|---|")
    print(f"| local disk | {loc['write_mbps']:.0f} | {loc['scan_mbps']:.0f} |")
    print(f"| S3 (moto on 127.0.0.1, s3fs) | {s3['write_mbps']:.0f} | {s3['scan_mbps']:.0f} |")
    print(f"| S3 / local | {s3['write_mbps'] / loc['write_mbps']:.2f} | "
          f"{s3['scan_mbps'] / loc['scan_mbps']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
