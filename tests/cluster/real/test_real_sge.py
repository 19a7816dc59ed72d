"""Grid Engine for real: sge_qmaster and sge_execd on this machine (``.ci/cluster_services.sh``).

``distsketch run --cluster`` with a spec made from ``clusters/sge.yaml`` submits
real ``qsub`` worker jobs through dask-jobqueue; the result is bitwise that of
the embedded local cluster and ``qstat`` is empty afterwards.  ``qdel`` of one
worker job in the middle of a run: the run finishes on the other, same result.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from distsketch.workflow import run_workflow
from distsketch.workflow.hooks import WorkflowHooks

REPO = Path(__file__).resolve().parents[3]
CLI = str(Path(sys.executable).parent / "distsketch")
ROWS = 4000  # the rows of conftest's data

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def sge_spec(folder: Path, name: str = "sge.yaml", **overrides) -> Path:
    """``clusters/sge.yaml`` sized for this one host: 2 jobs of 1 slot in all.q."""
    spec = yaml.safe_load((REPO / "clusters" / "sge.yaml").read_text())
    # the example's h_vmem/mem_req are a site's memory complexes: Debian's cell defines
    # h_vmem only, and a 1 GB address-space limit is below what a Python worker maps
    spec.pop("resource_spec", None)
    spec.update({"n_workers": 2, "cores": 1, "processes": 1, "memory": "1GB",
                 "walltime": "00:10:00", "queue": "all.q", "job_script_prologue": [],
                 "local_directory": str(folder), "log_directory": str(folder / "logs"),
                 "timeout": 60}, **overrides)
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def queue(env: dict[str, str]) -> list[tuple[str, str]]:
    """(job id, state) of every job Grid Engine knows (``qw`` waiting, ``r`` running, ...)."""
    out = subprocess.run(["qstat", "-u", "*"], env=env, capture_output=True, text=True,
                         check=True).stdout
    # two header lines, then: job-ID prior name user state submit/start-at queue slots
    return [(line.split()[0], line.split()[4]) for line in out.splitlines()[2:] if line.strip()]


def drained(env: dict[str, str], seconds: float = 30) -> list[tuple[str, str]]:
    """The queue once it is empty, or what is left after ``seconds`` (jobs end asynchronously)."""
    deadline = time.monotonic() + seconds
    while (left := queue(env)) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling sge_qmaster for the state change, bounded by the deadline
    return left


class DeleteAt(WorkflowHooks):
    """``qdel`` one running worker job after segment ``index`` is checkpointed."""

    def __init__(self, env: dict[str, str], index: int):
        self.env, self.index = env, index
        self.deleted: list[str] = []
        self.before: list[tuple[str, str]] = []

    def after_segment(self, segment) -> None:
        if segment.index != self.index:
            return
        self.before = queue(self.env)
        self.deleted = [job for job, state in self.before if state == "r"][:1]
        subprocess.run(["qdel", *self.deleted], env=self.env, check=True, capture_output=True)


@pytest.fixture(autouse=True)
def _sge_process_env(sge_env, monkeypatch):
    # dask-jobqueue runs qsub/qdel from this process
    for name in ("SGE_ROOT", "SGE_CELL"):
        monkeypatch.setenv(name, sge_env[name])
    assert queue(sge_env) == [], "jobs left in the queue by someone else"


def test_run_submits_qsub_jobs_and_matches_local(sge_env, workflow, same_as_local, tmp_path):
    proc = subprocess.run([CLI, "run", str(workflow("out")), "--cluster",
                           str(sge_spec(tmp_path)), "--json"],
                          env=sge_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["status"] == "full"
    same_as_local(tmp_path / "out" / "result")
    # sge_execd wrote each job's output (-j y: stderr too) where the spec said: two real jobs
    logs = sorted((tmp_path / "logs").glob("dask-worker.o*"))
    assert len(logs) == 2
    for log in logs:
        assert "Registered to:" in log.read_text(), log.read_text()[-2000:]
    assert drained(sge_env) == []


def test_qdel_of_one_worker_job_mid_run_gives_the_same_result(sge_env, workflow, same_as_local,
                                                               tmp_path):
    hooks = DeleteAt(sge_env, index=1)
    result = run_workflow(workflow("out"), cluster=sge_spec(tmp_path), hooks=hooks)
    assert [state for _, state in hooks.before] == ["r", "r"]
    assert len(hooks.deleted) == 1
    assert result.status == "full" and result.rows_after == ROWS
    same_as_local(tmp_path / "out" / "result")
    assert drained(sge_env) == []
