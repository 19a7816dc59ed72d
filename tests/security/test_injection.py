"""Locks, job scripts and reports are not injection points.

* a symlink (or FIFO) at an output folder's ``.lock`` never makes a run write
  through it: the link's target stays byte-for-byte intact;
* cluster-spec values that reach a batch job script (SLURM, PBS, SGE, LSF) are
  refused with a ``ConfigError`` naming the key when they hold shell syntax,
  before any dask-jobqueue cluster object exists; accepted values reach the
  script dask-jobqueue renders as written; ``env`` values are shell-quoted
  (checked by running the exports in bash);
* every spec string in the run report is escaped (``<script>``, ``|``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from distsketch.cluster import (
    batch_cluster,
    load_spec,
    render_job_script,
    start_cluster,
    validate_spec,
)
from distsketch.errors import ConfigError, WorkflowError
from distsketch.io.storage.locks import LOCK_NAME, folder_lock
from distsketch.workflow import run_workflow

SLURM = {"kind": "slurm", "cores": 4, "memory": "8GB", "walltime": "01:00:00", "queue": "normal"}
PAYLOADS = ["x; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "x\ntouch PWNED", "x && id",
            "x | id"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- the run lock ---------------------------------------------------------------------------

def test_lock_symlink_to_a_file_leaves_the_file_intact(tmp_path):
    precious = tmp_path / "thesis.tex"
    precious.write_bytes(b"\\documentclass{article} precious bytes\n")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(precious, out / LOCK_NAME)
    with pytest.raises(WorkflowError, match=r"\.lock is a symbolic link"):
        with folder_lock(out):
            pass
    assert precious.read_bytes() == b"\\documentclass{article} precious bytes\n"
    assert os.path.islink(out / LOCK_NAME)


def test_dangling_lock_symlink_creates_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(tmp_path / "created-by-the-run", out / LOCK_NAME)
    with pytest.raises(WorkflowError, match="symbolic link"):
        with folder_lock(out):
            pass
    assert not (tmp_path / "created-by-the-run").exists()


def test_fifo_at_the_lock_is_refused_without_hanging(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / LOCK_NAME)
    with pytest.raises(WorkflowError, match="not a regular file"):
        with folder_lock(out):
            pass


def test_lock_file_of_an_earlier_run_is_reused(tmp_path):
    with folder_lock(tmp_path):
        pid = (tmp_path / LOCK_NAME).read_text()
    with folder_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text() == pid == str(os.getpid())


def small_workflow(tmp_path: Path, name: str = "t", input_dir: str = "data") -> dict:
    X = np.random.default_rng(0).normal(size=(200, 3))
    d = tmp_path / input_dir
    d.mkdir(exist_ok=True)
    arr = zarr.create_array(store=str(d / "X.zarr"), shape=X.shape, dtype=X.dtype, chunks=(100, 3))
    arr[...] = X
    return {"name": name, "input": str(d / "X.zarr"), "segment_rows": 100, "cluster": "sync",
            "method": {"name": "RandomFourierFeatures", "params": {"n_components": 8}},
            "outputs": {"dir": str(tmp_path / "out")},
            "report": {"kernel_error": False, "png": False}}


@pytest.mark.system
def test_workflow_run_refuses_a_lock_symlink_and_writes_nothing(tmp_path):
    cfg = small_workflow(tmp_path)
    precious = tmp_path / "paper.tex"
    precious.write_bytes(b"precious")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(precious, out / LOCK_NAME)
    with pytest.raises(WorkflowError, match="symbolic link"):
        run_workflow(cfg, log=lambda m: None)
    assert precious.read_bytes() == b"precious"
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]


# --- job scripts ----------------------------------------------------------------------------
# What reaches the batch system is the script dask-jobqueue renders for the cluster object
# distsketch creates: a refused value never reaches a cluster object, an accepted one reaches
# the rendered script as written.

# the keys checked against shell syntax, for every batch kind that has them
JOB_KEYS = {
    "slurm": ["name", "queue", "account", "interface", "walltime", "memory", "local_directory",
              "python"],
    "pbs": ["name", "queue", "account", "interface", "walltime", "memory", "local_directory",
            "python"],
    "sge": ["project", "resource_spec"],
    "lsf": ["project", "lsf_units"],
}
KIND_KEYS = [(kind, key) for kind, keys in JOB_KEYS.items() for key in keys]


@pytest.fixture
def no_cluster_object(monkeypatch):
    """Any dask-jobqueue cluster object created is recorded (and then created for real)."""
    import dask_jobqueue

    created: list[str] = []
    for name in ("SLURMCluster", "PBSCluster", "SGECluster", "LSFCluster"):
        real = getattr(dask_jobqueue, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            created.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(dask_jobqueue, name, spy)
    return created


def submitted_script(cluster) -> str:
    """The script of the first worker job the cluster object would submit (nothing submitted)."""
    (name, spec), = cluster.new_worker_spec().items()
    return spec["cls"](cluster.scheduler_address, name=name, **spec["options"]).job_script()


@pytest.mark.parametrize("kind, key", KIND_KEYS)
@pytest.mark.parametrize("payload", PAYLOADS)
def test_shell_syntax_in_a_job_script_value_never_reaches_dask_jobqueue(kind, key, payload, tmp_path,
                                                                       no_cluster_object):
    cfg = SLURM | {"kind": kind, key: payload}
    with pytest.raises(ConfigError) as exc:
        render_job_script(cfg)
    assert f"{key} = " in str(exc.value) and "job script" in str(exc.value)
    with pytest.raises(ConfigError, match=f"{key} = "), batch_cluster(cfg):
        pass
    with pytest.raises(ConfigError, match=f"{key} = "), start_cluster(cfg):
        pass
    assert no_cluster_object == []
    assert not (tmp_path / "PWNED").exists()


# an accepted value of each key, and the line of the rendered script that must carry it
ACCEPTED = {
    "name": ("ds_worker-1.x", "--name ds_worker-1.x-0"),
    "queue": ("gpu,short", {"slurm": "#SBATCH -p gpu,short", "pbs": "#PBS -q gpu,short"}),
    "account": ("proj-1.a@srv", {"slurm": "#SBATCH -A proj-1.a@srv", "pbs": "#PBS -A proj-1.a@srv"}),
    "interface": ("lo", "--interface lo"),
    "walltime": ("1-12:00:00", {"slurm": "#SBATCH -t 1-12:00:00",
                                "pbs": "#PBS -l walltime=1-12:00:00"}),
    "memory": ("31.5GiB", "--memory-limit 31.50GiB"),
    "local_directory": ("/scratch/ds_1", "--local-directory /scratch/ds_1"),
    # an existing interpreter (tests/security/test_cluster_code.py refuses the others)
    "python": (sys.executable, f"{sys.executable} -m distributed.cli.dask_worker"),
    "project": ("p-1", {"sge": "#$ -P p-1", "lsf": '#BSUB -P "p-1"'}),
    "resource_spec": ("h_vmem=8G,mem_req=8G", "#$ -l h_vmem=8G,mem_req=8G"),
    "lsf_units": ("GB", "#BSUB -M 8"),  # memory 8GB in the chosen unit
}


@pytest.mark.parametrize("kind, key", KIND_KEYS)
def test_accepted_job_script_values_reach_the_rendered_script(kind, key, no_cluster_object):
    value, expected = ACCEPTED[key]
    line = expected[kind] if isinstance(expected, dict) else expected
    cfg = SLURM | {"kind": kind, key: value}
    with batch_cluster(cfg) as cluster:
        rendered, submitted = cluster.job_script(), submitted_script(cluster)
    assert no_cluster_object == [{"slurm": "SLURMCluster", "pbs": "PBSCluster",
                                  "sge": "SGECluster", "lsf": "LSFCluster"}[kind]]
    assert line in submitted
    if key != "name":  # job_script() shows a placeholder worker name
        assert line in rendered
        # render_job_script shows the same script
        assert render_job_script(cfg, "tcp://X:1") == \
            rendered.replace(cluster.scheduler_address, "tcp://X:1")


@pytest.mark.parametrize("key, value, named", [
    ("worker_extra_args", ["--lifetime", "1h; touch PWNED"], "worker_extra_args = '1h; touch"),
    ("job_extra_directives", ["--exclusive\ntouch PWNED"], "job_extra_directives = '--exclusive"),
    ("cores", "4; id", "cores='4; id' of kind 'slurm' is invalid; it must be int"),
    ("cores", 0, "cores = 0"),
    ("processes", True, "processes=True of kind 'slurm' is invalid; it must be int"),
    ("n_workers", -1, "n_workers = -1"),
    ("env", {"A; id": "1"}, "env key = 'A; id'"), ("env", {"A": "x\ntouch PWNED"}, "env A = "),
    ("env", {"1A": "x"}, "env key = '1A'"),
    ("extra", {"job_extra_directives": ["ok\nid"]}, "job_extra_directives = 'ok"),
    ("extra", {"walltime": "$(id)"}, "walltime = '$(id)'"),
    ("extra", {"job_name": "x`id`"}, "job_name = 'x`id`'"),
    ("extra", {"cores": 2.5}, "cores = 2.5"),
    ("job_mem", "8G; id", "job_mem = '8G; id'"),
])
def test_other_job_values_are_checked(key, value, named, no_cluster_object):
    with pytest.raises(ConfigError) as exc:
        validate_spec(SLURM | {key: value})
    assert named in str(exc.value)
    with pytest.raises(ConfigError), batch_cluster(SLURM | {key: value}):
        pass
    assert no_cluster_object == []


def test_refusal_names_the_key_and_the_file(tmp_path):
    p = tmp_path / "slurm.yaml"
    p.write_text(yaml.safe_dump(SLURM | {"account": "proj$(id)"}))
    before = p.read_bytes()
    with pytest.raises(ConfigError, match=rf"cluster spec {p}: account = 'proj\$\(id\)'"):
        load_spec(p)
    assert p.read_bytes() == before


@pytest.mark.parametrize("kind", ["slurm", "sge"])
@pytest.mark.parametrize("value", ["1; touch PWNED", "$(touch PWNED)", "`touch PWNED`",
                                   "a'b\"c $HOME \\", "plain"])
def test_env_values_are_shell_quoted(kind, value, tmp_path):
    script = render_job_script(SLURM | {"kind": kind, "env": {"TMPDIR": value},
                                        "job_script_prologue": ["echo prologue"]})
    exports = [ln for ln in script.splitlines() if ln.startswith("export ")]
    assert len(exports) == 1
    lines = script.splitlines()
    assert lines.index(exports[0]) < lines.index("echo prologue")  # before the user's prologue
    bash = shutil.which("bash")
    assert bash is not None
    res = subprocess.run([bash, "-c", exports[0] + '\nprintf %s "$TMPDIR"'], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    assert res.stdout == value
    assert not (tmp_path / "PWNED").exists()


def test_valid_batch_values_are_accepted():
    cfg = SLURM | {"queue": "gpu,short", "account": "proj-1.a@srv", "walltime": "1-12:00:00",
                   "name": "ds_worker-1.x", "interface": "lo", "memory": "31.5GiB",
                   "env": {"OMP_NUM_THREADS": 1, "TMPDIR": "/a b/c"},
                   "worker_extra_args": ["--lifetime=1h", "--lifetime-stagger", "5m"]}
    script = render_job_script(cfg)
    assert "#SBATCH -p gpu,short" in script and "export OMP_NUM_THREADS=1" in script
    assert "export TMPDIR='/a b/c'" in script
    assert "--lifetime=1h --lifetime-stagger 5m" in script


# --- the run report -------------------------------------------------------------------------

@pytest.mark.system
def test_report_escapes_spec_strings(tmp_path):
    name = "<script>alert(1)</script> | [x](javascript:alert(1)) *b*"
    cfg = small_workflow(tmp_path, name=name, input_dir="in|<img src=x onerror=alert(1)>")
    res = run_workflow(cfg, log=lambda m: None)
    report = (res.result_dir / "report.md").read_text()
    assert "<script>" not in report and "<img" not in report
    assert "&lt;script>alert\\(1\\)&lt;/script> \\| \\[x\\]\\(javascript" in report
    for line in report.splitlines():
        # an unescaped pipe appears only in the report's own table rows
        bare = line.replace("\\|", "")
        if "|" in bare:
            assert line.startswith("| ") and line.endswith("|"), line
    assert report.splitlines()[0].startswith("# distsketch run report: &lt;script>")
