"""``distsketch run`` on an embedded LocalCluster shuts it down without killing workers.

distributed gives a worker process 4 s to exit when its cluster closes, then
kills it with "Worker process still alive after 4.0 seconds, killing" on
stderr; several workers per core on a busy machine take longer than that.
Here a worker preload makes each worker's exit take longer than 4 s, so the
run shows the message unless the command lets its workers exit.
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

# a worker whose teardown takes 4.5 s: longer than distributed's 4 s (0.8 of its 5 s close
# timeout), as a worker busy exiting on a loaded machine
SLOW_EXIT = """\
import time


def dask_teardown(worker):
    time.sleep(4.5)
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
    (tmp_path / "slow_exit.py").write_text(SLOW_EXIT)
    env = {**os.environ,
           "DASK_DISTRIBUTED__WORKER__PRELOAD": json.dumps([str(tmp_path / "slow_exit.py")])}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from distsketch.cli import main; "
                               "sys.exit(main(sys.argv[1:]))",
         "run", str(tmp_path / "w.yaml"), "--no-progress"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "result committed" in done.stdout
    assert KILLED not in done.stderr, done.stderr
