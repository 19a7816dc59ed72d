"""Batch job scripts: the dask-jobqueue cluster object of a batch spec (slurm, pbs,
sge, lsf) and the worker job script it would submit, rendered without submitting.

What runs is distsketch's choice: the worker command
(:data:`~distsketch.cluster.safety.WORKER_COMMAND`) and the shebang
(:data:`~distsketch.cluster.safety.SHEBANG`), whatever the site's
configuration says; every other value was checked by :func:`validate_spec`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from distsketch.cluster.safety import SHEBANG, WORKER_COMMAND, count, size
from distsketch.cluster.spec import (
    BATCH_KINDS,
    load_spec,
    require_package,
    site_config,
    validate_spec,
)
from distsketch.errors import ConfigError

__all__ = ["batch_cluster", "jobqueue_cluster", "render_job_script"]


def _jobqueue_kwargs(cfg: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of the dask-jobqueue cluster class for a validated batch spec.

    Options the spec leaves out are not passed, so dask-jobqueue takes them
    from the site's configuration (``jobqueue.<kind>.*``).  Whole numbers
    written as floats (``cores: 4.0``, also in the site configuration) become
    ints, and a size given in bytes becomes ``"<n>B"``.
    """
    kind = cfg["kind"]
    skip = {"kind", "n_workers", "adapt", "extra", "timeout", "env", "storage_options"}
    kwargs = {k: v for k, v in cfg.items() if k not in skip}
    kwargs.update(cfg.get("extra", {}))
    for key in ("cores", "processes", "job_cpu", "ncpus", "mem"):
        if key in kwargs:
            kwargs[key] = count(kwargs[key])
        elif key in ("cores", "processes") and isinstance(site_config(kind, key), float):
            kwargs[key] = count(site_config(kind, key)) or site_config(kind, key)
    if "memory" in kwargs and not isinstance(kwargs["memory"], str):
        kwargs["memory"] = size(kwargs["memory"])
    # what runs is distsketch's choice, whatever the site's configuration says
    kwargs["worker_command"] = WORKER_COMMAND
    kwargs["shebang"] = SHEBANG
    if "processes" not in kwargs and site_config(kind, "processes") is None:
        # one worker process per job with `cores` threads, unless the site says otherwise
        kwargs["processes"] = 1
    if cfg.get("env"):
        # exported before the user's prologue, each value quoted by shlex
        prologue = kwargs.get("job_script_prologue")
        if prologue is None:
            prologue = site_config(kind, "job-script-prologue") or []
        kwargs["job_script_prologue"] = _env_prologue(cfg["env"]) + list(prologue)
    return kwargs


def _env_prologue(env: dict[str, Any]) -> list[str]:
    """``export NAME=value`` lines, each value shell-quoted."""
    import shlex

    return [f"export {k}={shlex.quote(str(v))}" for k, v in env.items()]


def jobqueue_cluster(cfg: dict[str, Any], **options: Any) -> Any:
    """The dask-jobqueue cluster object of a validated batch spec (no job submitted)."""
    require_package(cfg["kind"])
    import dask_jobqueue

    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster,
           "sge": dask_jobqueue.SGECluster, "lsf": dask_jobqueue.LSFCluster}[cfg["kind"]]
    kwargs = _jobqueue_kwargs(cfg) | options
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        shown = {k: v for k, v in kwargs.items() if k != "scheduler_options"}
        raise ConfigError(f"dask-jobqueue refused the {cfg['kind']} options {shown}: {exc}") \
            from exc


@contextlib.contextmanager
def batch_cluster(spec: Any) -> Iterator[Any]:
    """The dask-jobqueue cluster object of a batch spec, with no job submitted.

    Parameters
    ----------
    spec : dict or path-like
        A ``slurm``, ``pbs``, ``sge`` or ``lsf`` spec (mapping or YAML path).

    Yields
    ------
    dask_jobqueue.JobQueueCluster
        Built from the same options as :func:`start_cluster` uses, with its
        scheduler on 127.0.0.1 (any free port, no dashboard) and no workers;
        closed on exit.  ``job_script()`` shows what would be submitted.

    Raises
    ------
    ConfigError
        Not a batch spec, invalid options, or dask-jobqueue is not installed
        (``pip install "distsketch[cluster]"``).
    """
    cfg = load_spec(spec) if isinstance(spec, (str, os.PathLike)) else validate_spec(spec)
    kind = cfg["kind"]
    if kind not in BATCH_KINDS:
        raise ConfigError(f"a job script needs a batch spec (kind slurm, pbs, sge or lsf), got "
                          f"kind {kind!r}.")
    # loopback, any free port, no dashboard: nothing is reachable from elsewhere
    options = {"n_workers": 0, "scheduler_options": {"host": "127.0.0.1", "dashboard": False,
                                                     "dashboard_address": "127.0.0.1:0"}}
    with jobqueue_cluster(cfg, **options) as cluster:
        yield cluster


def render_job_script(spec: Any, scheduler_address: str | None = "tcp://SCHEDULER:8786") -> str:
    """The batch script one worker job would run, rendered by dask-jobqueue; nothing is submitted.

    Parameters
    ----------
    spec : dict or path-like
        A ``slurm``, ``pbs``, ``sge`` or ``lsf`` spec (mapping or YAML path).
    scheduler_address : str or None, default "tcp://SCHEDULER:8786"
        Address written into the script in place of the one of the throwaway
        scheduler started to render it (the real one is known only once the
        submitting process runs its scheduler); None keeps the throwaway one.

    Returns
    -------
    str
        The job script (batch directives and the worker command): the
        ``job_script()`` of the cluster object :func:`batch_cluster` creates.

    Raises
    ------
    ConfigError
        Not a batch spec, invalid options, or dask-jobqueue is not installed
        (``pip install "distsketch[cluster]"``).

    Notes
    -----
    Starts a scheduler on 127.0.0.1 for a few tens of milliseconds; no job is
    submitted.
    """
    with batch_cluster(spec) as cluster:
        script = cluster.job_script()
        if scheduler_address is not None:
            script = script.replace(cluster.scheduler_address, scheduler_address)
    return script

