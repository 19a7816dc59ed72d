"""The read path: how fast distsketch's stores are read, and by what.

Run::

    python benchmarks/bench_read_path.py --rows 400000 --repeat 5

Writes a ``rows x cols`` float32 store of standard normal values twice with
``distsketch ingest`` (default chunking, about 8 MiB per chunk): with the
default compressor (Blosc-LZ4 + CRC-32C) and with ``--compressor none``
(bytes + CRC-32C).  Then times, for each store, every way of reading all of
it once, in ``--repeat`` rounds that interleave the cases, keeping the
best time of each (the machine is shared):

* ``distsketch dask, k threads``: ``open_array(store)`` (every chunk checked
  against the CRC-32C its manifest records) summed on the threaded scheduler;
* ``zarr chunk loop``: ``zarr.open_array`` and one ``arr[chunk]`` per chunk,
  with zarr-python's default codec pipeline and, when installed, ``zarrs``
  (``codec_pipeline.path = "zarrs.ZarrsCodecPipeline"``); ``distsketch chunk
  loop`` the same through ``open_zarr`` (digest-checked store);
* ``zarr whole``: one ``arr[:]``, under zarr's options ``async.concurrency``
  and ``threading.max_workers``;
* ``raw decode``: each chunk file read with ``open().read()``, its CRC-32C
  checked (``google_crc32c``) and Blosc-decoded (numcodecs) into one reused
  buffer: the decoder's limit on this machine, with 1 and 2 threads;
* ``cat``: ``cat`` of the chunk files to ``/dev/null``.  The files were just
  written, so this is the page cache's rate, not the disk's.

Rates are rows/s and GB/s of decoded data (rows x cols x 4 bytes); ``CPU s``
is the CPU time of the process (every thread) and of ``cat``, which other
processes on the same cores blur less than wall time.  The script also prints
which codec pipeline each opener really gets under ``zarrs``: zarrs reads only
stores it can open itself (a local directory), and zarr falls back to its
default pipeline for any other store, distsketch's digest-checking store
included.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


@contextlib.contextmanager
def _zarr_config(settings: dict) -> Iterator[None]:
    import zarr

    with zarr.config.set(settings):
        yield


def _chunk_files(store: Path) -> list[Path]:
    """The chunk files of ``store``'s ``X`` (one chunk spans all columns: keys ``c/i/0``)."""
    base = store / "X" / "c"
    return [base / str(i) / "0" for i in range(len(list(base.iterdir())))]


def _zarrs_version() -> str | None:
    try:
        import zarrs  # noqa: F401
    except ImportError:
        return None
    from importlib.metadata import version

    return version("zarrs")


Case = tuple[str, dict, Callable[[], Any]]


def decode_chunk(path: Path, buf: np.ndarray, blosc: Any = None) -> None:
    """Read one chunk file, check its CRC-32C and decode it into ``buf`` (the raw baseline).

    ``blosc``: a ``numcodecs.Blosc`` for a Blosc chunk, None for bytes + CRC-32C.
    ``buf`` has the chunk's full shape: zarr stores the last chunk whole (padded).

    Raises
    ------
    ValueError
        The CRC-32C at the end of the file does not match its bytes.
    """
    import google_crc32c

    data = path.read_bytes()
    body = np.frombuffer(data, np.uint8)[:-4]  # a view, as zarr's own codec takes it
    if google_crc32c.value(body) != int.from_bytes(data[-4:], "little"):
        raise ValueError(f"checksum mismatch in {path}")
    if blosc is None:
        buf[...] = body.view(buf.dtype).reshape(buf.shape)
    else:
        blosc.decode(body, out=buf)


def cases(store: Path) -> list[Case]:
    """(name, zarr config, read-it-all-once function) of every way of reading ``store``."""
    import dask
    import numcodecs
    import zarr

    from distsketch.io.arrays.access import open_array
    from distsketch.io.arrays.stores import open_zarr

    plain = zarr.open_array(str(store / "X"), mode="r")
    rows, cols = plain.shape
    c = plain.chunks[0]
    blocks = [slice(i, min(rows, i + c)) for i in range(0, rows, c)]
    out: list[Case] = []

    def dask_sum(k: int) -> Callable[[], Any]:
        opened: list[Any] = []

        def run() -> Any:
            if not opened:  # opened once (manifest, digest, chunk listing): reads are timed
                opened.append(open_array(str(store)))
            return dask.compute(opened[0].sum(), scheduler="threads", num_workers=k)
        return run

    def loop(arr_of: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> None:
            arr = arr_of()
            for s in blocks:
                arr[s]
        return run

    pipes: list[tuple[str, dict]] = [("default", {})]
    if _zarrs_version() is not None:
        pipes.append(("zarrs", {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}))
    for label, cfg in pipes:
        for k in (1, 2):
            out.append((f"distsketch dask, {k} thread{'s' * (k > 1)} [{label}]", cfg,
                        dask_sum(k)))
        out.append((f"distsketch chunk loop [{label}]", cfg,
                    loop(lambda: open_zarr(str(store)))))
        out.append((f"zarr chunk loop [{label}]", cfg,
                    loop(lambda: zarr.open_array(str(store / "X"), mode="r"))))
        for conc in (1, 10, 64):
            for workers in (1, 2):
                opts = {**cfg, "async.concurrency": conc, "threading.max_workers": workers}
                out.append((f"zarr whole, concurrency {conc}, max_workers {workers} [{label}]",
                            opts, lambda: zarr.open_array(str(store / "X"), mode="r")[:]))

    if len(pipes) > 1:
        with _zarr_config(pipes[1][1]):
            for label, arr in (("distsketch open_zarr", open_zarr(str(store))),
                               ("zarr.open_array", zarr.open_array(str(store / "X"), mode="r"))):
                print(f"under zarrs, {label} reads with "
                      f"{type(arr.async_array.codec_pipeline).__name__}")

    files = _chunk_files(store)
    blosc = numcodecs.Blosc() if len(plain.metadata.codecs) > 2 else None

    def raw(threads: int) -> Callable[[], None]:
        bufs = [np.empty((c, cols), np.float32) for _ in range(threads)]

        def one(i: int, buf: np.ndarray) -> None:
            decode_chunk(files[i], buf, blosc)

        def run() -> None:
            if threads == 1:
                for i in range(len(files)):
                    one(i, bufs[0])
                return
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda j: [one(i, bufs[j]) for i in range(j, len(files), threads)],
                              range(threads)))
        return run

    for k in (1, 2):
        out.append((f"raw read + crc32c + decode, {k} thread{'s' * (k > 1)}", {}, raw(k)))

    def cat() -> None:
        with open(os.devnull, "wb") as null:
            subprocess.run(["cat", *map(str, files)], stdout=null, check=True)

    out.append(("cat chunk files > /dev/null (page cache)", {}, cat))
    return out


def _cpu() -> float:
    """CPU seconds of this process (all its threads) and of its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(all_cases: list[Case], rounds: int) -> list[tuple[str, float, float]]:
    """(name, best wall seconds, best CPU seconds) of each case over ``rounds`` rounds.

    Each round runs every case once, so load from other processes falls on
    all of them alike; one untimed warm-up round first.  CPU seconds (every
    thread of the process) say what a read costs when wall time is blurred by
    other processes on the same cores.
    """
    best = {name: [np.inf, np.inf] for name, _, _ in all_cases}
    for r in range(rounds + 1):
        for name, cfg, f in all_cases:
            with _zarr_config(cfg):
                c, t = _cpu(), time.perf_counter()
                f()
                dt, dc = time.perf_counter() - t, _cpu() - c
            if r:
                best[name] = [min(best[name][0], dt), min(best[name][1], dc)]
    return [(name, t, c) for name, (t, c) in best.items()]


def machine() -> dict:
    cpu: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "cpu family", "model") and key.strip() not in cpu:
                cpu[key.strip()] = value.strip()
    model = f"{cpu.get('model name', '')} (family {cpu.get('cpu family')}, model {cpu.get('model')})"
    import numcodecs
    import zarr

    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "zarr": zarr.__version__, "numcodecs": numcodecs.__version__,
            "zarrs": _zarrs_version(), "load average": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, default=400_000)
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed rounds over all cases (the best of each is kept)")
    ap.add_argument("--dir", type=str, default=None, help="where the stores go (default: temp)")
    ap.add_argument("--json", type=str, default=None, help="also write the results here")
    args = ap.parse_args()
    rows = int(args.rows)
    info = machine()
    print(json.dumps(info))
    results: dict[str, Any] = {"machine": info, "rows": rows, "cols": args.cols, "stores": {}}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        src = Path(tmp) / "x.npy"
        np.save(src, np.random.default_rng(0).standard_normal((rows, args.cols), np.float32))
        decoded = rows * args.cols * 4
        for comp in ("lz4", "none"):
            store = Path(tmp) / f"{comp}.zarr"
            ingest = Path(sys.executable).with_name("distsketch")
            subprocess.run([str(ingest), "ingest", str(src), str(store), "--compressor", comp],
                           check=True, capture_output=True)
            files = _chunk_files(store)
            on_disk = sum(p.stat().st_size for p in files)
            # the last chunk is stored whole (padded), so the ratio is a full chunk's
            first = files[0].stat().st_size
            chunk_rows = int(json.loads((store / "X" / "zarr.json").read_text())[
                "chunk_grid"]["configuration"]["chunk_shape"][0])
            full = 4 * args.cols * chunk_rows
            print(f"\n{comp}: {on_disk / 1e6:.1f} MB of chunks on disk for {decoded / 1e6:.1f} MB "
                  f"of rows; a full chunk {full} -> {first} bytes (ratio {full / first:.3f})")
            print(f"{'case':<62} {'wall s':>7} {'M rows/s':>9} {'GB/s':>6} {'CPU s':>6} "
                  f"{'GB/CPU-s':>8}")
            rec = []
            for name, t, cpu in timed(cases(store), args.repeat):
                print(f"{name:<62} {t:7.3f} {rows / t / 1e6:9.2f} {decoded / t / 1e9:6.2f} "
                      f"{cpu:6.3f} {decoded / cpu / 1e9:8.2f}", flush=True)
                rec.append({"case": name, "seconds": t, "cpu_seconds": cpu, "rows_per_s": rows / t,
                            "gb_per_s": decoded / t / 1e9})
            results["stores"][comp] = {"bytes_on_disk": on_disk, "chunk_rows": chunk_rows,
                                       "chunk_ratio": full / first, "cases": rec}
    print(f"\nload average at the end: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
