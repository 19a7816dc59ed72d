"""Cluster spec files: parsing, validation, SLURM/PBS job scripts, missing extras."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from distsketch.cluster import connect, resolve_spec
from distsketch.cluster_specs import load_spec, render_job_script, start_cluster, validate_spec
from distsketch.errors import ConfigError

CLUSTERS = Path(__file__).resolve().parents[2] / "clusters"


@pytest.mark.parametrize("name, kind", [
    ("local", "local"), ("scheduler", "scheduler"), ("slurm", "slurm"), ("pbs", "pbs"),
    ("ssh", "ssh"), ("kubernetes", "kubernetes"),
])
def test_shipped_specs_load_and_document_themselves(name, kind):
    path = CLUSTERS / f"{name}.yaml"
    cfg = load_spec(path)
    assert cfg["kind"] == kind
    assert resolve_spec(str(path)) == cfg  # what connect() sees for --cluster path.yaml
    head = path.read_text().split("\nkind:")[0]
    # each file starts with a comment block saying how to start it and what it needs
    assert all(line.startswith("#") for line in head.strip().splitlines())
    assert "Start" in head and "Needs" in head


def test_readme_covers_laptop_slurm_kubernetes():
    text = (CLUSTERS / "README.md").read_text()
    for word in ("laptop", "SLURM", "Kubernetes", "--cluster"):
        assert word in text


@pytest.mark.parametrize("cfg, needle", [
    ({"kind": "yarn"}, "unknown cluster kind 'yarn'"),
    ({"kind": "local", "workers": 2}, "option 'workers' is not known for kind 'local'"),
    ({"kind": "local", "n_workers": "two"}, "must be int"),
    ({"kind": "local", "processes": 1}, "must be bool"),          # an int is not a flag
    ({"kind": "scheduler"}, "exactly one of 'address'"),
    ({"kind": "scheduler", "address": "tcp://a:1", "scheduler_file": "s.json"}, "exactly one"),
    ({"kind": "slurm", "cores": 4}, "needs 'memory'"),
    ({"kind": "slurm", "cores": 4, "memory": "8GB", "job_extra_directives": "--x"}, "must be list"),
    ({"kind": "ssh"}, "needs 'hosts'"),
    ({"kind": "kubernetes"}, "needs 'image'"),
    (["kind", "local"], "must be a YAML mapping"),
])
def test_invalid_specs(cfg, needle):
    with pytest.raises(ConfigError) as exc:
        validate_spec(cfg)
    assert needle in str(exc.value)


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [local\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")


def test_relative_scheduler_file_resolves_against_spec(tmp_path):
    p = tmp_path / "sub" / "s.yaml"
    p.parent.mkdir()
    p.write_text(yaml.safe_dump({"kind": "scheduler", "scheduler_file": "sched.json"}))
    assert load_spec(p)["scheduler_file"] == str(tmp_path / "sub" / "sched.json")


def test_slurm_job_script_rendered_without_a_batch_system():
    script = render_job_script(CLUSTERS / "slurm.yaml", scheduler_address="tcp://10.0.0.1:8786")
    cfg = load_spec(CLUSTERS / "slurm.yaml")
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    directives = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert f"#SBATCH --cpus-per-task={cfg['cores']}" in directives
    assert f"#SBATCH -t {cfg['walltime']}" in directives
    assert f"#SBATCH -p {cfg['queue']}" in directives
    assert "#SBATCH --exclusive" in directives
    mem = next(d for d in directives if d.startswith("#SBATCH --mem="))
    assert int(re.search(r"=(\d+)G", mem).group(1)) <= 32  # 32GB in GiB, rounded down
    assert cfg["job_script_prologue"][0] in lines
    worker = next(ln for ln in lines if "distributed.cli.dask_worker" in ln)
    assert "tcp://10.0.0.1:8786" in worker
    assert f"--nworkers {cfg['processes']}" in worker and "--nthreads 1" in worker
    assert "--interface ib0" in worker


def test_pbs_job_script_rendered_without_a_batch_system():
    script = render_job_script(CLUSTERS / "pbs.yaml")
    lines = script.splitlines()
    assert "#PBS -q workq" in lines
    assert "#PBS -l walltime=02:00:00" in lines
    select = next(ln for ln in lines if ln.startswith("#PBS -l select="))
    assert "ncpus=8" in select
    assert any("distributed.cli.dask_worker tcp://SCHEDULER:8786" in ln for ln in lines)


@pytest.mark.parametrize("name", ["slurm", "pbs"])
def test_builtin_template_equals_dask_jobqueue(name):
    """Without the cluster extra the script comes from a built-in template; with it (as
    here when dask-jobqueue is installed) both must agree line for line."""
    from distsketch.cluster_specs import _builtin_job_script

    cfg = load_spec(CLUSTERS / f"{name}.yaml")
    assert _builtin_job_script(cfg, "tcp://h:1").splitlines() == \
        render_job_script(cfg, "tcp://h:1").splitlines()


def test_job_script_needs_a_batch_kind():
    with pytest.raises(ConfigError, match="needs a 'slurm' or 'pbs' spec"):
        render_job_script(CLUSTERS / "local.yaml")


@pytest.mark.parametrize("name, module, hint", [
    ("kubernetes", "dask_kubernetes", "pip install dask-kubernetes"),
    ("ssh", "asyncssh", "pip install asyncssh"),
])
def test_missing_extra_is_a_clear_config_error(name, module, hint):
    cfg = load_spec(CLUSTERS / f"{name}.yaml")
    if importlib.util.find_spec(module) is None:
        with pytest.raises(ConfigError) as exc, start_cluster(cfg):
            pass
        assert hint in str(exc.value) and repr(module) in str(exc.value)
    else:
        # installed: the spec must at least be accepted by the validator
        assert validate_spec(cfg)["kind"] == name


def test_start_cluster_rejects_kinds_connect_handles():
    with pytest.raises(ConfigError, match=r"handled by distsketch\.cluster\.connect"), \
            start_cluster({"kind": "local"}):
        pass


def test_local_spec_file_starts_an_embedded_cluster(tmp_path):
    p = tmp_path / "one.yaml"
    p.write_text(yaml.safe_dump({"kind": "local", "n_workers": 1, "threads_per_worker": 1,
                                 "processes": False, "dashboard_address": ":0"}))
    with connect(str(p)) as client:
        assert len(client.scheduler_info()["workers"]) == 1
        assert client.submit(sum, [1, 2, 3]).result() == 6
