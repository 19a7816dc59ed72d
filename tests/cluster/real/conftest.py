"""Real cluster services for the tests of this folder: SLURM, Grid Engine, sshd, network namespaces.

``.ci/cluster_services.sh start <service>`` installs (apt-get) and starts what a
test needs unless it already runs (``.ci/run`` starts everything before the
suite); whatever a fixture started is stopped when the session ends.  A
service that cannot start here fails the test when ``CI`` is ``"true"`` (a
skipped cluster test does not count as passing there) and skips it elsewhere,
with the reason either way.

Every test compares a run's result with the same workflow run in the test's
process on Dask's threaded scheduler, bitwise: ``reference`` computes that once
per session (distsketch's results do not depend on the cluster, and no worker
processes need to start for it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
import zarr

REPO = Path(__file__).resolve().parents[3]
SERVICES = REPO / ".ci" / "cluster_services.sh"
STATE = Path(os.environ.get("DISTSKETCH_SERVICES_DIR", "/tmp/distsketch-services"))
ROWS, COLS, SEGMENT = 4000, 8, 1000
#: the console script of the environment running the tests
CLI = str(Path(sys.executable).parent / "distsketch")

_started: list[str] = []


def unavailable(reason: str) -> None:
    """Fail in CI (``CI=true``), skip elsewhere, saying why."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"cluster service unavailable in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _service(name: str) -> None:
    if os.geteuid() != 0:
        unavailable(f"{name}: .ci/cluster_services.sh needs root (apt-get, daemons)")
    if shutil.which("bash") is None:
        unavailable("bash is missing")
    before = subprocess.run(["bash", str(SERVICES), "status"], capture_output=True, text=True)
    proc = subprocess.run(["bash", str(SERVICES), "start", name], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        unavailable(f"{name} could not start: {proc.stderr.strip()[-1500:]}")
    daemon = {"slurm": "slurmctld", "sge": "sge_qmaster", "ssh": "sshd"}.get(name)
    if daemon is not None and f"{daemon} not running" in before.stdout:
        _started.append(name)  # stopped when the session ends; one running before is left


@pytest.fixture(scope="session", autouse=True)
def _stop_what_was_started() -> Iterator[None]:
    yield
    if _started:
        subprocess.run(["bash", str(SERVICES), "stop"], capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    """The environment for SLURM commands: ``SLURM_CONF`` of the one-node cluster."""
    _service("slurm")
    return {**os.environ, "SLURM_CONF": str(STATE / "slurm" / "slurm.conf")}


@pytest.fixture(scope="session")
def sge_env() -> dict[str, str]:
    """The environment for Grid Engine commands (Debian's cell: SGE_ROOT, SGE_CELL)."""
    _service("sge")
    return {**os.environ, "SGE_ROOT": os.environ.get("SGE_ROOT", "/var/lib/gridengine"),
            "SGE_CELL": os.environ.get("SGE_CELL", "default")}


@pytest.fixture(scope="session")
def sshd() -> Path:
    """The folder of the running test sshd (127.0.0.1:$DISTSKETCH_SSH_PORT, key, known_hosts)."""
    _service("ssh")
    return STATE / "ssh"


@pytest.fixture(scope="session")
def netns() -> None:
    """``ip netns`` works here (root, iproute2)."""
    _service("netns")


def write_workflow(folder: Path, data: Path, out: str, cluster: Any = "local") -> Path:
    """A small streaming kernel PCA workflow over ``data/X.zarr`` (4 segments)."""
    cfg = {"input": str(data / "X.zarr"), "seed": 5, "segment_rows": SEGMENT,
           "preprocessing": {"standardize": True},
           "method": {"name": "StreamingKernelPCA",
                      "params": {"gamma": 0.1, "n_random_features": 64, "n_components": 4,
                                 "sketch_size": 16}},
           "outputs": {"dir": str(folder / out)}, "cluster": cluster,
           "report": {"kernel_error": False, "png": False}}
    path = folder / f"{out}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def result_arrays(result: Path) -> dict[str, np.ndarray]:
    """Every array of every Zarr store in a result folder, by store and path."""
    out: dict[str, np.ndarray] = {}
    for store in sorted(result.glob("*.zarr")):
        node = zarr.open(str(store), mode="r")
        if isinstance(node, zarr.Array):
            out[store.name] = node[...]
            continue
        for path, arr in _walk(node):
            out[f"{store.name}/{path}"] = arr[...]
    return out


def _walk(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, member in group.members():
        if isinstance(member, zarr.Array):
            yield prefix + name, member
        else:
            yield from _walk(member, f"{prefix}{name}/")


def assert_bitwise_equal(result: Path, reference: dict[str, np.ndarray]) -> None:
    got = result_arrays(result)
    assert sorted(got) == sorted(reference)
    for name, ref in reference.items():
        assert got[name].dtype == ref.dtype and got[name].shape == ref.shape, name
        assert got[name].tobytes() == ref.tobytes(), f"{name} differs from the local run"


@pytest.fixture(scope="session")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``X.zarr``: 4000 x 8 float64 rows in chunks of 250 (seeded)."""
    folder = tmp_path_factory.mktemp("real-cluster-data")
    X = np.random.default_rng(0).normal(size=(ROWS, COLS))
    arr = zarr.create_array(store=str(folder / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(250, COLS))
    arr[...] = X
    return folder


@pytest.fixture(scope="session")
def reference(data: Path) -> dict[str, np.ndarray]:
    """The arrays of the workflow's result run here on Dask's threaded scheduler."""
    from distsketch.workflow import run_workflow

    spec = write_workflow(data, data, "reference")
    assert run_workflow(spec, cluster="threads").status == "full"
    arrays = result_arrays(data / "reference" / "result")
    assert arrays and all(a.size for a in arrays.values())
    return arrays


@pytest.fixture(scope="session")
def same_arrays():
    """``same_arrays(result, other)`` asserts two result folders hold the same arrays, bitwise."""
    return lambda result, other: assert_bitwise_equal(Path(result), result_arrays(Path(other)))


@pytest.fixture(scope="session")
def same_as_local(reference: dict[str, np.ndarray]):
    """``same_as_local(result_folder)`` asserts the folder's arrays equal ``reference`` bitwise."""
    return lambda result: assert_bitwise_equal(Path(result), reference)


@pytest.fixture
def workflow(data: Path, tmp_path: Path):
    """``workflow(out, cluster=...)``: a workflow spec over ``data`` writing into ``tmp_path/out``."""
    return lambda out, cluster="local": write_workflow(tmp_path, data, out, cluster)
