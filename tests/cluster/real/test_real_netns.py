"""Separate hosts on one machine: network namespaces joined by veth links (iproute2).

The scheduler runs in namespace ``dsk-s`` (10.77.0.2), one worker in each of
``dsk-w1`` (10.77.0.3) and ``dsk-w2`` (10.77.0.4); each namespace has its own
address and one veth link to a bridge ``dskbr0`` (10.77.0.1, where this process,
the client, sits); none reaches another over loopback.  A run over the shared
input store matches the embedded local cluster bitwise, and its time is set
beside the same run with the scheduler and workers on 127.0.0.1.  Cutting one
worker's link in the middle of the run and restoring it gives the same result,
within a bound (never a hang).  Everything is removed afterwards.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distsketch.workflow import run_workflow
from distsketch.workflow.hooks import WorkflowHooks

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

DASK = shutil.which("dask", path=str(Path(sys.executable).parent)) or "dask"
BRIDGE, NET = "dskbr0", "10.77.0"
HOSTS = {"dsk-s": 2, "dsk-w1": 3, "dsk-w2": 4}


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def host_link(ns: str) -> str:
    """The bridge end of a namespace's veth link."""
    return f"{ns}-h"


@contextlib.contextmanager
def namespaces() -> Iterator[None]:
    """The three namespaces, their veth links and the bridge; all removed on exit."""
    made: list[str] = []
    try:
        ip("link", "add", BRIDGE, "type", "bridge")
        made.append("bridge")
        ip("addr", "add", f"{NET}.1/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        for ns, last in HOSTS.items():
            ip("netns", "add", ns)
            made.append(ns)
            ip("link", "add", host_link(ns), "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", host_link(ns), "master", BRIDGE, "up")
            ip("-n", ns, "addr", "add", f"{NET}.{last}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield
    finally:
        for ns in made:
            if ns == "bridge":
                subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
            else:
                subprocess.run(["ip", "link", "del", host_link(ns)], capture_output=True)
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextlib.contextmanager
def dask_cluster(folder: Path, where: dict[str, str]) -> Iterator[Path]:
    """A scheduler and two workers, each in its namespace (or None: this one) at its address."""
    procs: list[subprocess.Popen] = []
    sched = folder / "scheduler.json"

    def start(name: str, ns: str | None, cmd: list[str]) -> None:
        prefix = ["ip", "netns", "exec", ns] if ns else []
        log = open(folder / f"{name}.log", "wb")  # closed when the process ends
        procs.append(subprocess.Popen(prefix + cmd, stdout=log, stderr=subprocess.STDOUT))

    try:
        start("scheduler", where.get("ns-s"), [DASK, "scheduler", "--host", where["s"],
                                               "--port", "0", "--no-dashboard",
                                               "--scheduler-file", str(sched)])
        deadline = time.monotonic() + 60
        # the file exists before it is written whole: wait for its closing brace
        while not (sched.exists() and sched.read_text().rstrip().endswith("}")):
            assert time.monotonic() < deadline and procs[0].poll() is None, \
                (folder / "scheduler.log").read_text()[-2000:]
            with contextlib.suppress(subprocess.TimeoutExpired):
                procs[0].wait(timeout=0.1)  # returns at once if the scheduler dies
        for w in ("w1", "w2"):
            start(w, where.get(f"ns-{w}"),
                  [DASK, "worker", "--scheduler-file", str(sched), "--host", where[w],
                   "--nthreads", "1", "--nworkers", "1", "--memory-limit", "1GiB",
                   "--no-dashboard", "--name", w, "--local-directory", str(folder / w)])
        yield sched
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def timed_run(spec: Path, scheduler_file: Path, hooks: WorkflowHooks | None = None) -> float:
    from distributed import Client

    address = json.loads(scheduler_file.read_text())["address"]
    with Client(address, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        # the workers' first imports are not the links' cost: make them before timing
        client.run(lambda: importlib.import_module("distsketch.workflow").__name__)
    start = time.perf_counter()
    result = run_workflow(spec, cluster=str(scheduler_file), hooks=hooks)
    took = time.perf_counter() - start
    assert result.status == "full"
    return took


NETNS = {"s": f"{NET}.2", "w1": f"{NET}.3", "w2": f"{NET}.4",
         "ns-s": "dsk-s", "ns-w1": "dsk-w1", "ns-w2": "dsk-w2"}
LOOPBACK = {"s": "127.0.0.1", "w1": "127.0.0.1", "w2": "127.0.0.1"}


class CutLink(WorkflowHooks):
    """After segment 1: take worker 1's link down, and up again ``seconds`` later."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.timer: threading.Timer | None = None

    def after_segment(self, segment) -> None:
        if segment.index == 1:
            ip("link", "set", host_link("dsk-w1"), "down")
            self.timer = threading.Timer(self.seconds, ip, ("link", "set", host_link("dsk-w1"),
                                                            "up"))
            self.timer.start()


@pytest.mark.timeout(300)
def test_separate_hosts_match_local_survive_a_cut_link_and_cost_against_loopback(
        netns, workflow, same_as_local, tmp_path, capsys):
    times = {}
    hooks = CutLink(seconds=1)
    with namespaces():
        folder = tmp_path / "netns"
        folder.mkdir()
        with dask_cluster(folder, NETNS) as sched:
            address = json.loads(sched.read_text())["address"]
            assert address.startswith(f"tcp://{NET}.2:")
            times["veth"] = timed_run(workflow("veth"), sched)
            same_as_local(tmp_path / "veth" / "result")
            # the same cluster, worker 1's link cut after segment 1 and restored 1 s later
            times["cut"] = timed_run(workflow("cut"), sched, hooks=hooks)
            assert hooks.timer is not None
            hooks.timer.join()
            same_as_local(tmp_path / "cut" / "result")
        for w, last in (("w1", 3), ("w2", 4)):  # each worker spoke from its own address
            assert f"{NET}.{last}" in (folder / f"{w}.log").read_text()
    assert not Path(f"/run/netns/{next(iter(HOSTS))}").exists()
    # Dask's comm timeouts (distributed.comm.timeouts.tcp, 30 s) bound a stalled transfer
    assert times["cut"] < 1 + 30 + 30, times
    folder = tmp_path / "lo"
    folder.mkdir()
    with dask_cluster(folder, LOOPBACK) as sched:
        times["loopback"] = timed_run(workflow("lo"), sched)
    same_as_local(tmp_path / "lo" / "result")
    with capsys.disabled():
        print(f"\nwhole run (4 segments of 1000 rows): veth {times['veth']:.2f} s, "
              f"loopback {times['loopback']:.2f} s, veth with a link cut for 1 s "
              f"{times['cut']:.2f} s")
