"""SLURM for real: munged, slurmctld and slurmd on this machine (``.ci/cluster_services.sh``).

``distsketch run --cluster`` with a spec made from ``clusters/slurm.yaml`` submits
real ``sbatch`` worker jobs through dask-jobqueue; the result is bitwise that of
the embedded local cluster.  Faults: ``scancel`` of one worker job in the middle
of a run (the run finishes on the other, same result); ``scancel`` of every
worker job (a ``ClusterError`` after the spec's timeout, and the next run resumes
from the checkpoint, same result); worker jobs that never start (partition
``down``: a ``ClusterError`` within the timeout).  Each leaves the queue empty.
``examples/slurm/submit.sh`` runs as its comment says, ``sbatch``'d as the driver
job that ingests the data and submits the worker jobs, and its result is that of
the same example run locally.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from distsketch.cli import main as distsketch_main
from distsketch.errors import ClusterError
from distsketch.workflow import run_workflow
from distsketch.workflow.hooks import WorkflowHooks

REPO = Path(__file__).resolve().parents[3]
CLI = str(Path(sys.executable).parent / "distsketch")
ROWS, SEGMENT = 4000, 1000  # the shape of conftest's data and workflow

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def slurm_spec(folder: Path, name: str = "slurm.yaml", **overrides) -> Path:
    """``clusters/slurm.yaml`` sized for this one node: 2 jobs of 1 core, partition normal."""
    spec = yaml.safe_load((REPO / "clusters" / "slurm.yaml").read_text())
    spec.pop("interface", None)  # the example's InfiniBand interface is not on this machine
    spec.update({"n_workers": 2, "cores": 1, "processes": 1, "memory": "1GB",
                 "walltime": "00:10:00", "queue": "normal", "job_extra_directives": [],
                 "job_script_prologue": [], "local_directory": str(folder),
                 "log_directory": str(folder / "logs"), "timeout": 60}, **overrides)
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def queue(env: dict[str, str]) -> list[tuple[str, str]]:
    """(job id, state) of every job in the queue."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=env, capture_output=True,
                         text=True, check=True).stdout
    return [tuple(line.split()) for line in out.splitlines() if line.strip()]  # type: ignore


def drained(env: dict[str, str], seconds: float = 30) -> list[tuple[str, str]]:
    """The queue once it is empty, or what is left after ``seconds`` (jobs end asynchronously)."""
    deadline = time.monotonic() + seconds
    while (left := queue(env)) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling slurmctld for the state change, bounded by the deadline
    return left


class CancelAt(WorkflowHooks):
    """``scancel`` running worker jobs after segment ``index`` is checkpointed."""

    def __init__(self, env: dict[str, str], index: int, every: bool):
        self.env, self.index, self.every = env, index, every
        self.cancelled: list[str] = []
        self.before: list[tuple[str, str]] = []

    def after_segment(self, segment) -> None:
        if segment.index != self.index:
            return
        self.before = queue(self.env)
        running = [job for job, state in self.before if state == "RUNNING"]
        self.cancelled = running if self.every else running[:1]
        subprocess.run(["scancel", *self.cancelled], env=self.env, check=True)


@pytest.fixture(autouse=True)
def _slurm_process_env(slurm_env, monkeypatch):
    # dask-jobqueue runs sbatch/scancel from this process
    monkeypatch.setenv("SLURM_CONF", slurm_env["SLURM_CONF"])
    assert queue(slurm_env) == [], "jobs left in the queue by someone else"


def test_run_submits_sbatch_jobs_and_matches_local(slurm_env, workflow, same_as_local, tmp_path):
    spec = workflow("out")
    cluster = slurm_spec(tmp_path)
    proc = subprocess.run([CLI, "run", str(spec), "--cluster", str(cluster), "--json"],
                          env=slurm_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "full"
    same_as_local(tmp_path / "out" / "result")
    # slurmd wrote each job's output where the spec said: two real jobs, both workers
    logs = sorted((tmp_path / "logs").glob("dask-worker-*.err"))
    assert len(logs) == 2
    for log in logs:
        assert "Registered to:" in log.read_text(), log.read_text()[-2000:]
    assert drained(slurm_env) == []


def test_scancel_of_one_worker_job_mid_run_gives_the_same_result(slurm_env, workflow,
                                                                 same_as_local, tmp_path):
    hooks = CancelAt(slurm_env, index=1, every=False)
    result = run_workflow(workflow("out"), cluster=slurm_spec(tmp_path), hooks=hooks)
    assert [state for _, state in hooks.before] == ["RUNNING", "RUNNING"]
    assert len(hooks.cancelled) == 1
    assert result.status == "full" and result.rows_after == ROWS
    same_as_local(tmp_path / "out" / "result")
    assert drained(slurm_env) == []


@pytest.mark.timeout(240)
def test_scancel_of_every_worker_job_fails_then_the_rerun_resumes(slurm_env, workflow,
                                                                  same_as_local, tmp_path):
    spec = workflow("out")
    hooks = CancelAt(slurm_env, index=1, every=True)
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"every worker job of the slurm cluster ended") as err:
        run_workflow(spec, cluster=slurm_spec(tmp_path, timeout=10), hooks=hooks)
    assert len(hooks.cancelled) == 2
    assert "resumes from its last checkpoint" in str(err.value)
    assert time.monotonic() - start < 10 + 60  # the timeout, plus the jobs' start and segment 1
    assert not (tmp_path / "out" / "result").exists()
    assert drained(slurm_env) == []
    again = run_workflow(spec, cluster=slurm_spec(tmp_path))
    assert again.status == "resumed" and again.rows_before == 0 and again.rows_after == ROWS
    assert again.segments == ROWS // SEGMENT - 1  # segment 1 came from the checkpoint
    same_as_local(tmp_path / "out" / "result")
    assert drained(slurm_env) == []


@pytest.mark.timeout(120)
def test_jobs_that_never_start_are_a_clear_error_within_the_timeout(slurm_env, workflow,
                                                                     tmp_path):
    spec = workflow("out")
    cluster = slurm_spec(tmp_path, queue="down", timeout=5)
    start = time.monotonic()
    proc = subprocess.run([CLI, "run", str(spec), "--cluster", str(cluster)], env=slurm_env,
                          capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr
    assert "no worker job of the slurm cluster started within 5 s" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert took < 5 + 30, took  # the timeout plus the interpreter's start and the cancelling
    assert not (tmp_path / "out" / "result").exists()
    assert drained(slurm_env) == []
    assert os.environ.get("SLURM_CONF") == slurm_env["SLURM_CONF"]


def job_state(env: dict[str, str], job: str) -> dict[str, str]:
    """``scontrol show job``'s fields of one job (slurm.conf keeps finished jobs 300 s)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True,
                         text=True, check=True).stdout
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


def finished(env: dict[str, str], job: str, seconds: float) -> dict[str, str]:
    """The job's fields once it has left the running states, or as they are after ``seconds``."""
    deadline = time.monotonic() + seconds
    while (state := job_state(env, job))["JobState"] in ("PENDING", "CONFIGURING", "RUNNING",
                                                          "COMPLETING"):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)  # polling slurmctld for the job's end, bounded by the deadline
    return state


#: manifest fields that depend on where the example's folder is (paths, the spec's key) or
#: on the machine (times, memory, the block plans sized by the workers' memory)
WHERE_AND_HOW = {"spec", "spec_key", "timings", "finished_at", "written_at",
                 "peak_memory_bytes", "workers_peak_memory_bytes", "block_plans",
                 "segments_in_flight"}


def manifest(result: Path) -> dict:
    info = json.loads((result / "distsketch-manifest.json").read_text())
    info["input_fingerprint"].pop("path")
    return {key: value for key, value in info.items() if key not in WHERE_AND_HOW}


@pytest.mark.timeout(480)
def test_the_slurm_example_submitted_with_sbatch_matches_the_same_example_run_locally(
        slurm_env, tmp_path, same_arrays):
    # the example as a user has it: examples/slurm/ under the folder sbatch is run from
    site = tmp_path / "site"
    example = site / "examples" / "slurm"
    shutil.copytree(REPO / "examples" / "slurm", example)
    # the sizes cluster.yaml tells a site to edit, for this node of 2 cores: one worker job of
    # one core beside the driver job (--exclusive would wait for the driver's core)
    cluster = yaml.safe_load((example / "cluster.yaml").read_text())
    cluster.update({"n_workers": 1, "cores": 1, "processes": 1, "memory": "1GB",
                    "job_extra_directives": [], "timeout": 120})
    (example / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    np.save(tmp_path / "X.npy", np.random.default_rng(1).normal(size=(ROWS, 8)))
    # `source ~/venvs/distsketch/bin/activate` (the driver and the worker jobs' prologue):
    # HOME is a folder whose venvs/distsketch is the environment running these tests, and
    # that environment is not on the PATH sbatch passes on, so the activation is what
    # finds `distsketch`
    home = tmp_path / "home"
    (home / "venvs").mkdir(parents=True)
    prefix = Path(sys.prefix)
    if (prefix / "bin" / "activate").is_file():
        (home / "venvs" / "distsketch").symlink_to(prefix)
    else:  # not a virtual environment: an activate script that puts its bin/ first
        (home / "venvs" / "distsketch" / "bin").mkdir(parents=True)
        (home / "venvs" / "distsketch" / "bin" / "activate").write_text(
            f'export PATH="{prefix / "bin"}:$PATH"\n')
    bin_dir = str(prefix / "bin")
    env = {**slurm_env, "HOME": str(home),
           "PATH": os.pathsep.join(p for p in slurm_env["PATH"].split(os.pathsep)
                                   if p.rstrip("/") != bin_dir)}
    env.pop("VIRTUAL_ENV", None)
    assert shutil.which("distsketch", path=env["PATH"]) is None

    proc = subprocess.run(
        ["sbatch", "--parsable",
         "--cpus-per-task=1",  # the script asks for 2: the node's other core is the worker's
         "--mem=2G",  # the script asks for 16G: more than a small machine's node offers
         "examples/slurm/submit.sh", str(tmp_path / "X.npy")],
        cwd=site, env=env, capture_output=True, text=True, check=True)
    job = proc.stdout.strip().split(";")[0]
    try:
        state = finished(slurm_env, job, seconds=360)
    finally:  # a driver still running past the bound leaves the queue with the test
        subprocess.run(["scancel", job], env=slurm_env, capture_output=True)
    log = (site / f"distsketch-driver-{job}.log").read_text()
    assert (state["JobState"], state["ExitCode"]) == ("COMPLETED", "0:0"), log[-3000:]
    assert "distsketch: ingesting" in log, log[-3000:]
    assert f"full: consumed rows 0..{ROWS}" in log, log[-3000:]
    # the worker job the driver submitted wrote its log into the driver's folder
    workers = list(site.glob("slurm-*.out"))
    assert len(workers) == 1 and "Registered to:" in workers[0].read_text()
    assert drained(slurm_env) == []

    # the same example run here, in this process (Dask's threads: results do not depend on
    # the cluster, and no worker processes to start)
    local = tmp_path / "local" / "slurm"
    shutil.copytree(REPO / "examples" / "slurm", local)
    assert distsketch_main(["ingest", str(tmp_path / "X.npy"), str(local / "data" / "X.zarr")]) == 0
    assert run_workflow(local / "skpca.yaml", cluster="threads").status == "full"
    got, want = example / "runs" / "skpca" / "result", local / "runs" / "skpca" / "result"
    assert sorted(p.name for p in got.iterdir()) == sorted(p.name for p in want.iterdir())
    same_arrays(got, want)
    assert manifest(got) == manifest(want)
