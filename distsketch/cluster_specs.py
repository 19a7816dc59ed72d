"""Cluster specs (YAML) and the clusters they start.

A spec is a YAML mapping with a ``kind`` and that kind's options::

    kind: slurm
    n_workers: 8          # jobs to submit
    cores: 16
    memory: 64GB
    walltime: "02:00:00"

Kinds: ``local`` (the embedded LocalCluster), ``scheduler`` (an existing
scheduler by ``address`` or ``scheduler_file``), ``slurm``, ``pbs``, ``sge``
and ``lsf`` (dask-jobqueue; any option the spec leaves out comes from the
site's dask-jobqueue configuration, ``jobqueue.<kind>.*``), ``ssh``
(``distributed.SSHCluster``) and ``kubernetes`` (the dask-kubernetes
operator).  Every kind may carry ``storage_options:`` (plain data), applied
while connected as the Dask config value ``distsketch.storage-options``.

:func:`load_spec` validates a file into a dict; :func:`distsketch.cluster.connect`
accepts the path, the dict, an address or a scheduler file; :func:`start_cluster`
starts the batch/remote kinds; and :func:`render_job_script` (or
:func:`batch_cluster`) shows the worker job script that dask-jobqueue would
submit, without submitting anything.  A spec starts workers and nothing else:
every value that reaches a job script, a command line, an environment or Dask's
configuration is checked by :mod:`distsketch.cluster_safety` (docs/security.md
lists every field).
Optional packages are imported lazily: a missing one gives a
:class:`~distsketch.errors.ConfigError` naming the extra to install.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distsketch.cluster_safety import (
    SHEBANG,
    WORKER_COMMAND,
    check_job_values,
    check_kubernetes,
    check_local,
    check_scheduler,
    check_ssh,
    count,
    size,
)
from distsketch.errors import ClusterError, ConfigError
from distsketch.validation import InstanceOf, check_section, load_yaml

__all__ = ["BATCH_KINDS", "KINDS", "batch_cluster", "check_storage_options", "load_spec", "render_job_script",
           "start_cluster", "validate_spec"]

# kind -> {option: [constraint]}; "extra" passes allow-listed keyword arguments through
# (distsketch/cluster_safety.py checks every value that reaches a worker)
_NUM = [InstanceOf(int, float)]
_STR = [InstanceOf(str)]
_STRS = [InstanceOf(list)]
_INT = [InstanceOf(int)]
_DICT = [InstanceOf(dict)]
_SIZE = [InstanceOf(str, int, float)]
_JOBQUEUE = {
    "n_workers": _NUM, "cores": _NUM, "memory": _SIZE, "processes": _NUM,
    "queue": _STR, "project": _STR, "walltime": _STR, "interface": _STR,
    "local_directory": _STR, "log_directory": _STR, "python": _STR,
    "job_extra_directives": _STRS, "job_script_prologue": _STRS, "worker_extra_args": _STRS,
    "name": _STR, "adapt": _DICT, "extra": _DICT, "timeout": _NUM, "env": _DICT,
}
# the options each dask-jobqueue Job class adds to the common ones
_BATCH_OPTIONS = {
    "slurm": {"account": _STR, "job_cpu": _NUM, "job_mem": _STR},
    "pbs": {"account": _STR, "resource_spec": _STR},
    "sge": {"resource_spec": _STR},
    "lsf": {"ncpus": _NUM, "mem": _NUM, "lsf_units": _STR, "use_stdin": [InstanceOf(bool)]},
}
BATCH_KINDS = tuple(_BATCH_OPTIONS)
_COMMON = {"storage_options": _DICT}
KINDS: dict[str, dict[str, list]] = {
    "local": {"n_workers": [InstanceOf(int, float, type(None))], "threads_per_worker": _NUM,
              "memory_limit": [InstanceOf(str, int, float)], "processes": [InstanceOf(bool)],
              "dashboard_address": [InstanceOf(str, type(None))]},
    "scheduler": {"address": _STR, "scheduler_file": _STR, "timeout": _NUM},
    "sync": {},
    "threads": {},
    **{kind: _JOBQUEUE | extra for kind, extra in _BATCH_OPTIONS.items()},
    "ssh": {"hosts": _STRS, "connect_options": _DICT, "worker_options": _DICT,
            "scheduler_options": _DICT, "remote_python": _STR, "extra": _DICT,
            "timeout": _NUM},
    "kubernetes": {"name": _STR, "image": _STR, "n_workers": _INT, "namespace": _STR,
                   "resources": _DICT, "env": _DICT, "adapt": _DICT,
                   "extra": _DICT, "timeout": _NUM},
}
KINDS = {kind: options | _COMMON for kind, options in KINDS.items()}
_JOBQUEUE_HINT = ("dask_jobqueue", 'pip install "distsketch[cluster]" (dask-jobqueue renders and '
                                   "submits the worker job scripts)")
_EXTRA_HINT = {
    **{kind: _JOBQUEUE_HINT for kind in BATCH_KINDS},
    "ssh": ("asyncssh", "pip install asyncssh (needed by distributed.SSHCluster)"),
    "kubernetes": ("dask_kubernetes", "pip install dask-kubernetes (the Dask Kubernetes operator "
                                      "must run in the cluster)"),
}


def check_storage_options(value: Any, where: str = "storage_options") -> dict[str, Any]:
    """Check that ``value`` is plain data fit for fsspec's ``storage_options``.

    Parameters
    ----------
    value : Any
        The mapping read from a spec.
    where : str
        Name used in error messages.

    Returns
    -------
    dict
        A deep copy (nested mappings copied).

    Raises
    ------
    ConfigError
        Not a mapping, a key that is not a string, or a value that is not a
        string, number, bool, null or nested mapping of the same.
    """
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping of option names to values (e.g. anon: true, "
                          f"client_kwargs: {{endpoint_url: ...}}), got {type(value).__name__}.")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise ConfigError(f"{where}: key {k!r} must be a non-empty string.")
        if isinstance(v, dict):
            out[k] = check_storage_options(v, f"{where}.{k}")
        elif v is None or isinstance(v, (str, int, float, bool)):
            out[k] = v
        else:
            raise ConfigError(f"{where}.{k} = {v!r}: a storage option must be a string, number, "
                              f"bool or a nested mapping, not {type(v).__name__}.")
    return out


def _site_config(kind: str, key: str) -> Any:
    """The site's dask-jobqueue setting ``jobqueue.<kind>.<key>`` (None when unset)."""
    import dask

    return dask.config.get(f"jobqueue.{kind}.{key}", None)


def validate_spec(cfg: Any, where: str = "cluster spec") -> dict[str, Any]:
    """Check a spec mapping: known kind, known options of the right types.

    Parameters
    ----------
    cfg : dict
        The spec (``kind`` plus options).
    where : str
        Name used in error messages (e.g. the file path).

    Returns
    -------
    dict
        A copy of the spec.

    Raises
    ------
    ConfigError
        Unknown kind or option, wrong option type, missing required option
        (a batch kind's ``cores``/``memory`` may come from the site's
        dask-jobqueue configuration instead).
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: a cluster spec must be a YAML mapping with a 'kind' key, "
                          f"got {type(cfg).__name__}.")
    kind = cfg.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"{where}: unknown cluster kind {kind!r}; use one of {sorted(KINDS)}.")
    options = {k: v for k, v in cfg.items() if k != "kind"}
    check_section(options, KINDS[kind], where, owner=f"kind {kind!r}",
                  hint=" (docs/security.md lists the fields a spec may hold)")
    out = dict(cfg)
    if "storage_options" in cfg:
        out["storage_options"] = check_storage_options(cfg["storage_options"],
                                                       f"{where}: storage_options")
    if kind == "local":
        check_local(cfg, where)
        for key in ("n_workers", "threads_per_worker"):
            if cfg.get(key) is not None and count(cfg[key]) is None:
                raise ConfigError(f"{where}: {key} = {cfg[key]!r} must be a positive whole "
                                  "number (2 or 2.0).")
            if cfg.get(key) is not None:
                out[key] = count(cfg[key])
        if isinstance(cfg.get("memory_limit"), float):
            out["memory_limit"] = int(cfg["memory_limit"])  # bytes
    if kind == "scheduler":
        check_scheduler(cfg, where)
    if kind == "scheduler" and ("address" in cfg) == ("scheduler_file" in cfg):
        raise ConfigError(f"{where}: kind 'scheduler' needs exactly one of 'address' "
                          "(tcp://host:port) or 'scheduler_file'.")
    if kind == "ssh" and not cfg.get("hosts"):
        raise ConfigError(f"{where}: kind 'ssh' needs 'hosts': a list whose first entry runs the "
                          "scheduler and the rest the workers.")
    if kind in BATCH_KINDS:
        for key in ("cores", "memory"):
            if key not in cfg and _site_config(kind, key) is None:
                raise ConfigError(f"{where}: kind {kind!r} needs {key!r} (resources of one worker "
                                  f"job), e.g. cores: 8, memory: 32GB, in the spec or in the "
                                  f"site's Dask config (jobqueue.{kind}.{key}, e.g. in "
                                  "~/.config/dask/jobqueue.yaml).")
        check_job_values(cfg, where, set(KINDS[kind]))
    if kind == "ssh":
        check_ssh(cfg, where)
    if kind == "kubernetes":
        check_kubernetes(cfg, where)
    if kind == "kubernetes" and "image" not in cfg:
        raise ConfigError(f"{where}: kind 'kubernetes' needs 'image': a container image with "
                          "distsketch installed.")
    return out


def load_spec(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a cluster spec YAML file.

    Parameters
    ----------
    path : path-like
        A ``.yaml``/``.yml`` file.

    Returns
    -------
    dict
        The spec with a ``kind`` key; a relative ``scheduler_file`` is
        resolved against the spec's folder.

    Raises
    ------
    ConfigError
        Missing, unparsable or invalid spec.
    """
    p = Path(path).expanduser()
    cfg = load_yaml(p, "cluster spec", "see clusters/ for examples")
    cfg = validate_spec(cfg, where=f"cluster spec {p}")
    if "scheduler_file" in cfg and not Path(cfg["scheduler_file"]).is_absolute():
        cfg["scheduler_file"] = str((p.parent / cfg["scheduler_file"]).absolute())
    return cfg


def _require(kind: str) -> Any:
    import importlib

    module, hint = _EXTRA_HINT[kind]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"cluster kind {kind!r} needs the package {module!r}, which is not "
                          f"installed: {hint}.") from exc


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
        elif key in ("cores", "processes") and isinstance(_site_config(kind, key), float):
            kwargs[key] = count(_site_config(kind, key)) or _site_config(kind, key)
    if "memory" in kwargs and not isinstance(kwargs["memory"], str):
        kwargs["memory"] = size(kwargs["memory"])
    # what runs is distsketch's choice, whatever the site's configuration says
    kwargs["worker_command"] = WORKER_COMMAND
    kwargs["shebang"] = SHEBANG
    if "processes" not in kwargs and _site_config(kind, "processes") is None:
        # one worker process per job with `cores` threads, unless the site says otherwise
        kwargs["processes"] = 1
    if cfg.get("env"):
        # exported before the user's prologue, each value quoted by shlex
        prologue = kwargs.get("job_script_prologue")
        if prologue is None:
            prologue = _site_config(kind, "job-script-prologue") or []
        kwargs["job_script_prologue"] = _env_prologue(cfg["env"]) + list(prologue)
    return kwargs


def _env_prologue(env: dict[str, Any]) -> list[str]:
    """``export NAME=value`` lines, each value shell-quoted."""
    import shlex

    return [f"export {k}={shlex.quote(str(v))}" for k, v in env.items()]


def _batch_cluster(cfg: dict[str, Any], **options: Any) -> Any:
    """The dask-jobqueue cluster object of a validated batch spec (no job submitted)."""
    _require(cfg["kind"])
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
    with _batch_cluster(cfg, **options) as cluster:
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


@contextlib.contextmanager
def start_cluster(cfg: dict[str, Any]) -> Iterator[Any]:
    """Start a batch (slurm, pbs, sge, lsf), ssh or kubernetes cluster and yield a Client.

    Parameters
    ----------
    cfg : dict
        A validated spec (see :func:`load_spec`).

    Yields
    ------
    distributed.Client
        Connected; the cluster is shut down (jobs cancelled, pods deleted) on
        exit.

    Raises
    ------
    ConfigError
        Unknown kind, invalid options or the kind's package is missing.
    ClusterError
        The cluster could not be started.
    """
    from distributed import Client

    cfg = validate_spec(cfg)
    kind = cfg["kind"]
    if kind not in _EXTRA_HINT:
        raise ConfigError(f"start_cluster handles {', '.join(_EXTRA_HINT)}; kind {kind!r} is "
                          "handled by distsketch.cluster.connect.")
    _require(kind)
    try:
        if kind in BATCH_KINDS:
            cluster = _batch_cluster(cfg)
        elif kind == "ssh":
            from distributed import SSHCluster

            cluster = SSHCluster(cfg["hosts"], connect_options=cfg.get("connect_options", {}),
                                 worker_options=cfg.get("worker_options", {}),
                                 scheduler_options=cfg.get("scheduler_options", {}),
                                 remote_python=cfg.get("remote_python"), **cfg.get("extra", {}))
        else:
            from dask_kubernetes.operator import KubeCluster

            kw = {"name": cfg.get("name", "distsketch"), "image": cfg["image"],
                  "n_workers": cfg.get("n_workers", 2)}
            for key in ("namespace", "resources", "env"):
                if key in cfg:
                    kw[key] = cfg[key]
            cluster = KubeCluster(**kw, **cfg.get("extra", {}))
    except (ConfigError, ClusterError):
        raise
    except Exception as exc:
        raise ClusterError(f"could not start the {kind} cluster ({type(exc).__name__}: {exc}). Check "
                           "the spec and that the batch system / hosts / Kubernetes are reachable.") \
            from exc
    with cluster:
        if "adapt" in cfg:
            cluster.adapt(**cfg["adapt"])
        elif kind in BATCH_KINDS:
            cluster.scale(jobs=count(cfg.get("n_workers", 1)))
        elif kind == "kubernetes" and "n_workers" in cfg:
            cluster.scale(cfg["n_workers"])
        with Client(cluster, timeout=cfg.get("timeout", 60)) as client:
            yield client
