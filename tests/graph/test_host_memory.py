"""The planner sees the memory limits of nested cgroups (SLURM steps, systemd scopes)."""

from __future__ import annotations

import dask

from distsketch.graph import budget
from distsketch.graph.host_memory import cgroup_memory_limit, host_memory_limit

GiB = 2**30


def _mkdir(path):
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_v2_limit_on_an_ancestor_of_the_process_cgroup(tmp_path):
    # /sys/fs/cgroup/memory.max is absent (the root has none); the job's slice has 1.5 GiB
    job = _mkdir(tmp_path / "system.slice" / "job_42" / "step_0")
    (tmp_path / "system.slice" / "memory.max").write_text("max\n")
    (tmp_path / "system.slice" / "job_42" / "memory.max").write_text(f"{3 * GiB // 2}\n")
    (job / "memory.max").write_text("max\n")
    (job / "memory.high").write_text(f"{2 * GiB}\n")
    assert cgroup_memory_limit("0::/system.slice/job_42/step_0\n", tmp_path) == 3 * GiB // 2


def test_v1_memory_controller_path_and_unlimited_values(tmp_path):
    mem = tmp_path / "memory"
    step = _mkdir(mem / "slurm" / "uid_0" / "job_7")
    (mem / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    (mem / "slurm" / "memory.limit_in_bytes").write_text(f"{64 * GiB}\n")
    (step / "memory.limit_in_bytes").write_text(f"{GiB}\n")
    text = "4:memory:/slurm/uid_0/job_7\n3:cpuset:/\n"
    assert cgroup_memory_limit(text, tmp_path) == GiB
    # the same tree seen from a process in the unlimited root: no limit
    assert cgroup_memory_limit("4:memory:/\n", tmp_path) is None


def test_no_cgroup_files_and_hostile_paths_give_no_limit(tmp_path):
    assert cgroup_memory_limit("0::/a/b\n", tmp_path) is None
    assert cgroup_memory_limit("garbage line\n", tmp_path) is None
    (tmp_path / "memory.max").write_text("not a number")
    assert cgroup_memory_limit("0::/../../etc\n", tmp_path) is None


def test_local_budget_follows_the_cgroup_limit(monkeypatch):
    # a 1.5 GiB cgroup on a large machine: the local per-task budget is its share, not 2 GiB
    monkeypatch.setattr("distsketch.graph.host_memory.cgroup_memory_limit",
                        lambda *a, **k: 3 * GiB // 2)
    assert host_memory_limit() <= 3 * GiB // 2
    monkeypatch.delenv("DISTSKETCH_TASK_MEMORY", raising=False)
    with dask.config.set({"distsketch.task-memory": None}):
        res = budget.cluster_resources()
    assert res.task_bytes <= 3 * GiB // 2 * budget.MEMORY_FRACTION
    assert "local memory" in res.source


def test_address_space_rlimit_bounds_the_host_limit(monkeypatch):
    soft = GiB
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (soft, resource.RLIM_INFINITY)
                        if which == resource.RLIMIT_AS else (resource.RLIM_INFINITY,) * 2)
    assert host_memory_limit() <= soft


def test_embedded_local_cluster_divides_the_cgroup_limit_among_its_workers(monkeypatch):
    from distsketch.cluster.connection import local_worker_memory

    monkeypatch.setattr("distsketch.graph.host_memory.cgroup_memory_limit",
                        lambda *a, **k: 3 * GiB // 2)
    assert local_worker_memory({"n_workers": 3, "threads_per_worker": 1}) <= GiB // 2
    from dask.system import CPU_COUNT

    per = local_worker_memory({"threads_per_worker": 1})  # one worker per core
    assert per <= 3 * GiB // 2 // CPU_COUNT
