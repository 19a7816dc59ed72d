"""Cluster spec files: parsing, validation, SLURM/PBS job scripts, missing extras."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import dask
import pytest
import yaml

from distsketch.cluster import (
    connect,
    load_spec,
    render_job_script,
    resolve_spec,
    start_cluster,
    validate_spec,
)
from distsketch.errors import ConfigError

CLUSTERS = Path(__file__).resolve().parents[2] / "clusters"


@pytest.mark.parametrize("name, kind", [
    ("local", "local"), ("scheduler", "scheduler"), ("slurm", "slurm"), ("pbs", "pbs"),
    ("sge", "sge"), ("lsf", "lsf"), ("ssh", "ssh"), ("kubernetes", "kubernetes"),
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
    for word in ("laptop", "SLURM", "Kubernetes", "--cluster", "DASK_SCHEDULER_ADDRESS",
                 "jobqueue.<kind>.*", "storage_options", "workers_peak_memory_bytes"):
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
def test_script_is_what_dask_jobqueue_renders_for_the_same_options(name):
    """The reference: dask-jobqueue's cluster class built by hand with the spec's options."""
    import dask_jobqueue

    cfg = load_spec(CLUSTERS / f"{name}.yaml")
    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[name]
    by_hand = {k: v for k, v in cfg.items() if k not in ("kind", "n_workers")}
    with cls(**by_hand, scheduler_options={"host": "127.0.0.1", "dashboard": False,
                                           "dashboard_address": "127.0.0.1:0"}) as ref:
        expected = ref.job_script().replace(ref.scheduler_address, "tcp://h:1")
    assert render_job_script(cfg, "tcp://h:1") == expected


def test_job_script_needs_a_batch_kind():
    with pytest.raises(ConfigError, match=r"needs a batch spec \(kind slurm, pbs, sge or lsf\)"):
        render_job_script(CLUSTERS / "local.yaml")


@pytest.mark.parametrize("kind", ["slurm", "pbs", "sge", "lsf"])
def test_missing_dask_jobqueue_is_a_clear_config_error(kind, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # import fails as if not installed
    cfg = {"kind": kind, "cores": 2, "memory": "4GB"}
    for attempt in (lambda: render_job_script(cfg), lambda: start_cluster(cfg).__enter__()):
        with pytest.raises(ConfigError) as exc:
            attempt()
        assert 'pip install "distsketch[cluster]"' in str(exc.value)
        assert "'dask_jobqueue'" in str(exc.value) and repr(kind) in str(exc.value)


# --- the site's dask-jobqueue configuration and numbers written as floats -------------------

def directives(script: str, prefix: str) -> list[str]:
    return [ln for ln in script.splitlines() if ln.startswith(prefix)]


def worker_line(script: str) -> list[str]:
    return next(ln for ln in script.splitlines() if "distributed.cli.dask_worker" in ln).split()


def test_batch_kind_runs_on_the_site_config_alone():
    site = {"jobqueue.slurm.cores": 4.0, "jobqueue.slurm.memory": "8GB",
            "jobqueue.slurm.queue": "site-q", "jobqueue.slurm.walltime": "00:10:00",
            "jobqueue.slurm.account": "site-acct"}
    with dask.config.set(site):
        cfg = validate_spec({"kind": "slurm"})
        script = render_job_script(cfg)
        # the spec wins over the site config for what it sets
        ours = render_job_script({"kind": "slurm", "queue": "mine"})
    sb = directives(script, "#SBATCH")
    assert "#SBATCH -p site-q" in sb and "#SBATCH -A site-acct" in sb
    assert "#SBATCH -t 00:10:00" in sb and "#SBATCH --cpus-per-task=4" in sb
    assert "#SBATCH --mem=8G" in sb  # dask-jobqueue's own rounding of 8GB (= 7.45 GiB)
    worker = worker_line(script)
    # cores 4.0 from the site config became 4; one worker process with 4 threads (our default)
    assert worker[worker.index("--nthreads") + 1] == "4" and "--nworkers" not in worker
    assert "#SBATCH -p mine" in directives(ours, "#SBATCH")


def test_site_processes_setting_is_not_overridden():
    with dask.config.set({"jobqueue.pbs.cores": 4, "jobqueue.pbs.memory": "8GB",
                          "jobqueue.pbs.processes": 2}):
        worker = worker_line(render_job_script({"kind": "pbs"}))
    assert worker[worker.index("--nworkers") + 1] == "2"
    assert worker[worker.index("--nthreads") + 1] == "2"


def test_spec_env_keeps_the_site_prologue():
    with dask.config.set({"jobqueue.sge.job-script-prologue": ["module load python"]}):
        lines = render_job_script({"kind": "sge", "cores": 2, "memory": "4GB",
                                   "env": {"OMP_NUM_THREADS": 1}}).splitlines()
    assert lines.index("export OMP_NUM_THREADS=1") < lines.index("module load python")


@pytest.mark.parametrize("kind", ["slurm", "pbs", "sge", "lsf"])
def test_without_cores_anywhere_the_error_names_the_site_config(kind):
    with dask.config.set({f"jobqueue.{kind}.cores": None, f"jobqueue.{kind}.memory": None}):
        with pytest.raises(ConfigError) as exc:
            validate_spec({"kind": kind, "memory": "8GB"})
    assert f"jobqueue.{kind}.cores" in str(exc.value) and "needs 'cores'" in str(exc.value)


@pytest.mark.parametrize("kind", ["slurm", "pbs", "sge", "lsf"])
def test_whole_floats_and_byte_counts_render_as_their_int_and_string_forms(kind):
    as_floats = {"kind": kind, "cores": 4.0, "processes": 2.0, "n_workers": 3.0,
                 "memory": 8e9, "walltime": "01:00:00"}
    as_written = {"kind": kind, "cores": 4, "processes": 2, "n_workers": 3,
                  "memory": "8GB", "walltime": "01:00:00"}  # dask's GB is 10**9 bytes
    assert render_job_script(as_floats) == render_job_script(as_written)
    worker = worker_line(render_job_script(as_floats))
    assert worker[worker.index("--nworkers") + 1] == "2"


@pytest.mark.parametrize("key, value, needle", [
    ("cores", 4.5, "cores = 4.5"), ("processes", 0.0, "processes = 0.0"),
    ("n_workers", float("nan"), "n_workers = nan"), ("memory", 64, "memory = 64"),
    ("memory", True, "memory=True of kind 'slurm' is invalid; it must be"),
    ("memory", "8 giga", "memory = '8 giga'"),
])
def test_numbers_that_are_not_counts_or_sizes_are_refused(key, value, needle):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": "slurm", "cores": 4, "memory": "8GB", key: value})
    assert needle in str(exc.value)


def test_sge_and_lsf_specific_options_reach_their_scripts():
    sge = render_job_script({"kind": "sge", "cores": 4, "memory": "8GB", "project": "p-1",
                             "resource_spec": "h_vmem=8G,mem_req=8G", "queue": "all.q"})
    assert {"#$ -P p-1", "#$ -l h_vmem=8G,mem_req=8G", "#$ -q all.q"} <= set(sge.splitlines())
    lsf = render_job_script({"kind": "lsf", "cores": 4, "memory": "8GB", "ncpus": 4.0,
                             "mem": 8e9, "project": "p-1", "lsf_units": "MB"})
    assert {"#BSUB -n 4", "#BSUB -P \"p-1\""} <= set(lsf.splitlines())
    assert "#BSUB -M 8000" in lsf.splitlines()  # 8e9 bytes in LSF's MB units


@pytest.mark.parametrize("kind, option", [("sge", "account"), ("lsf", "account"),
                                          ("slurm", "resource_spec"), ("pbs", "ncpus")])
def test_options_of_another_batch_system_are_unknown(kind, option):
    with pytest.raises(ConfigError, match=rf"option '{option}' is not known for kind '{kind}'"):
        validate_spec({"kind": kind, "cores": 1, "memory": "1GB", option: "x"})


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


def test_the_cluster_package_reexports_each_modules_public_names():
    import importlib

    import distsketch.cluster as cluster

    owners = {}
    for module in ("connection", "spec", "safety", "job_scripts", "launchers"):
        mod = importlib.import_module(f"distsketch.cluster.{module}")
        owners.update({name: mod for name in mod.__all__})
    # every name the package offers is one of its modules' public names, the same object
    assert cluster.__all__ and all(getattr(cluster, n) is getattr(owners[n], n)
                                   for n in cluster.__all__)
    assert {"connect", "load_spec", "validate_spec", "render_job_script", "start_cluster",
            "batch_cluster", "KINDS", "BATCH_KINDS"} <= set(cluster.__all__)
    # the former flat modules are gone: the package is the one place
    package = Path(cluster.__file__).parent.parent
    assert not [old for old in ("cluster.py", "cluster_specs.py", "cluster_safety.py")
                if (package / old).exists()]
