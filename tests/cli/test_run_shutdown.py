"""``distsketch run`` on an embedded LocalCluster shuts it down without killing workers.

distributed gives a worker process 4 s to exit when its cluster closes, then
kills it with "Worker process still alive after 4.0 seconds, killing" on
stderr; several workers per core on a busy machine take longer than that.
A worker process is killed exactly when it has not exited within the time its
nanny gives it, and the nanny tells the worker that time: it is the ``timeout``
of the ``Worker.close`` call the nanny's stop message makes.  A worker preload
records that call (and that the worker's teardown then ran to its end), so the
test checks what a slow exit would meet without waiting for one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml
import zarr

KILLED = "still alive after"

#: a worker busy exiting on a loaded machine takes longer than distributed's 4 s (0.8 of its
#: 5 s close timeout); the command must give it at least this long
SLOW_EXIT_SECONDS = 4.5

# records each Worker.close the worker process receives (its timeout: how long the nanny waits
# for the process before killing it) and the end of the worker's teardown
RECORD_CLOSE = """\
import json
import os

LOG = os.environ["DISTSKETCH_TEST_CLOSE_LOG"]


def _record(event):
    with open(LOG, "a") as f:
        f.write(json.dumps(event) + "\\n")


def dask_setup(worker):
    close = worker.close

    async def recorded_close(*args, **kwargs):
        _record({"close_timeout": kwargs.get("timeout"), "reason": kwargs.get("reason")})
        return await close(*args, **kwargs)

    worker.close = recorded_close


def dask_teardown(worker):
    _record({"teardown": "done"})
"""


def test_run_local_cluster_exits_without_killing_workers(tmp_path: Path) -> None:
    X = np.random.default_rng(0).normal(size=(400, 4)).astype(np.float32)
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(200, 4))
    arr[...] = X
    spec = {"input": str(tmp_path / "X.zarr"), "seed": 0,
            "method": {"name": "RandomFourierFeatures",
                       "params": {"n_components": 8, "gamma": 0.5}},
            "outputs": {"dir": str(tmp_path / "out")},
            "report": {"kernel_error": False, "png": False},
            "cluster": {"kind": "local", "n_workers": 1, "threads_per_worker": 1,
                        "dashboard_address": None}}
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "record_close.py").write_text(RECORD_CLOSE)
    log = tmp_path / "close.jsonl"
    env = {**os.environ, "DISTSKETCH_TEST_CLOSE_LOG": str(log),
           "DASK_DISTRIBUTED__WORKER__PRELOAD": json.dumps([str(tmp_path / "record_close.py")])}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from distsketch.cli import main; "
                               "sys.exit(main(sys.argv[1:]))",
         "run", str(tmp_path / "w.yaml"), "--no-progress"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "result committed" in done.stdout
    assert KILLED not in done.stderr, done.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    closes = [e for e in events if "close_timeout" in e]
    # the first close decides: the worker is given more than a slow exit takes, and its
    # teardown ran to its end (it was not killed on the way)
    assert closes, events
    assert closes[0]["close_timeout"] is not None, events
    assert closes[0]["close_timeout"] > SLOW_EXIT_SECONDS, events
    assert {"teardown": "done"} in events
