"""Cluster specs (YAML) and the clusters they start.

A spec is a YAML mapping with a ``kind`` and that kind's options::

    kind: slurm
    n_workers: 8          # jobs to submit
    cores: 16
    memory: 64GB
    walltime: "02:00:00"

Kinds: ``local`` (the embedded LocalCluster), ``scheduler`` (an existing
scheduler by ``address`` or ``scheduler_file``), ``slurm`` and ``pbs``
(dask-jobqueue), ``ssh`` (``distributed.SSHCluster``) and ``kubernetes``
(the dask-kubernetes operator).  :func:`load_spec` validates a file into a
dict; :func:`distsketch.cluster.connect` accepts the path, the dict, an address
or a scheduler file; :func:`start_cluster` starts the batch/remote kinds; and
:func:`render_job_script` shows the SLURM/PBS worker job script without a
batch system.  Optional packages are imported lazily: a missing one gives a
:class:`~distsketch.errors.ConfigError` naming the extra to install.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distsketch.errors import ClusterError, ConfigError
from distsketch.validation import InstanceOf, check_section, load_yaml

__all__ = ["KINDS", "load_spec", "render_job_script", "start_cluster", "validate_spec"]

# kind -> {option: [constraint]}; "extra" passes keyword arguments through
_NUM = [InstanceOf(int, float)]
_STR = [InstanceOf(str)]
_STRS = [InstanceOf(list)]
_INT = [InstanceOf(int)]
_DICT = [InstanceOf(dict)]
_JOBQUEUE = {
    "n_workers": _INT, "cores": _INT, "memory": _STR, "processes": _INT,
    "queue": _STR, "account": _STR, "walltime": _STR, "interface": _STR,
    "local_directory": _STR, "log_directory": _STR, "python": _STR,
    "job_extra_directives": _STRS, "job_script_prologue": _STRS, "worker_extra_args": _STRS,
    "name": _STR, "adapt": _DICT, "extra": _DICT, "timeout": _NUM, "env": _DICT,
}
KINDS: dict[str, dict[str, list]] = {
    "local": {"n_workers": [InstanceOf(int, type(None))], "threads_per_worker": _INT,
              "memory_limit": [InstanceOf(str, int)], "processes": [InstanceOf(bool)],
              "dashboard_address": [InstanceOf(str, type(None))]},
    "scheduler": {"address": _STR, "scheduler_file": _STR, "timeout": _NUM},
    "sync": {},
    "threads": {},
    "slurm": _JOBQUEUE,
    "pbs": _JOBQUEUE,
    "ssh": {"hosts": _STRS, "connect_options": _DICT, "worker_options": _DICT,
            "scheduler_options": _DICT, "remote_python": _STR, "extra": _DICT,
            "timeout": _NUM},
    "kubernetes": {"name": _STR, "image": _STR, "n_workers": _INT, "namespace": _STR,
                   "resources": _DICT, "env": _DICT, "adapt": _DICT,
                   "extra": _DICT, "timeout": _NUM},
}
_EXTRA_HINT = {
    "slurm": ("dask_jobqueue", "pip install 'distsketch[cluster]' (dask-jobqueue)"),
    "pbs": ("dask_jobqueue", "pip install 'distsketch[cluster]' (dask-jobqueue)"),
    "ssh": ("asyncssh", "pip install asyncssh (needed by distributed.SSHCluster)"),
    "kubernetes": ("dask_kubernetes", "pip install dask-kubernetes (the Dask Kubernetes operator "
                                      "must run in the cluster)"),
}


# What the batch systems accept in the values that are written into a job script
# (directives and the worker command line): no shell metacharacters, no newlines.
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_QUEUE = re.compile(r"[A-Za-z0-9_.@,-]+")             # SLURM partition lists, PBS queue@server
_WALLTIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")   # HH:MM:SS, MM:SS, D-HH:MM:SS
_MEMORY = re.compile(r"\d+(\.\d+)?\s?([KMGTPE]i?)?B?", re.IGNORECASE)
_PATH = re.compile(r"[A-Za-z0-9_./~+@%:,=-]+")
_ARG = re.compile(r"[A-Za-z0-9_./~+@%:,=-]+")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JOB_VALUES = {"name": (_NAME, "letters, digits, '_', '.', '-'"),
               "queue": (_QUEUE, "letters, digits, '_', '.', '-', '@', ','"),
               "account": (_QUEUE, "letters, digits, '_', '.', '-', '@', ','"),
               "interface": (_NAME, "letters, digits, '_', '.', '-'"),
               "walltime": (_WALLTIME, "HH:MM:SS (or D-HH:MM:SS)"),
               "memory": (_MEMORY, "a size such as 32GB"),
               "local_directory": (_PATH, "a path without spaces or shell characters"),
               "log_directory": (_PATH, "a path without spaces or shell characters"),
               "python": (_PATH, "a path without spaces or shell characters")}
_COUNTS = ("n_workers", "cores", "processes")
# run as shell code on purpose (clusters/README.md says so); not checked
_SHELL_CODE = ("job_script_prologue",)


def _refuse(where: str, key: str, value: Any, what: str) -> ConfigError:
    return ConfigError(f"{where}: {key} = {value!r} is not accepted in a batch job script; it must "
                       f"be {what} (shell characters such as ';', '$(', backticks and newlines are "
                       "refused).")


def _check_job_values(cfg: dict[str, Any], where: str) -> None:
    """Refuse SLURM/PBS values that the batch system would not accept or the shell would run."""
    values = {k: v for k, v in cfg.items() if k != "extra"} | dict(cfg.get("extra") or {})
    for key, value in values.items():
        if key in _JOB_VALUES:
            rx, what = _JOB_VALUES[key]
            if not isinstance(value, str) or not rx.fullmatch(value):
                raise _refuse(where, key, value, what)
        elif key in _COUNTS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _refuse(where, key, value, "a positive integer")
        elif key == "job_extra_directives":
            # one directive per line: a newline would start a new script line
            for v in value if isinstance(value, list) else [value]:
                if not isinstance(v, str) or any(c in v for c in "\n\r\0"):
                    raise _refuse(where, key, v, "one directive on one line")
        elif key == "worker_extra_args":
            for v in value if isinstance(value, list) else [value]:
                if not isinstance(v, str) or not _ARG.fullmatch(v):
                    raise _refuse(where, key, v, "plain arguments (letters, digits, '-', '=', "
                                                 "'.', '/', ':', ',')")
        elif key == "env":
            _check_env(value, where)
        elif key not in _SHELL_CODE and key not in ("adapt", "timeout", "kind"):
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str) and any(c in v for c in ";|&$`<>\n\r\0"):
                    raise _refuse(where, key, v, "free of shell characters")


def _check_env(env: Any, where: str) -> None:
    if not isinstance(env, dict):
        raise ConfigError(f"{where}: env must be a mapping NAME: value.")
    for k, v in env.items():
        if not isinstance(k, str) or not _ENV_KEY.fullmatch(k):
            raise _refuse(where, "env key", k, "an identifier (letters, digits, '_')")
        if not isinstance(v, (str, int, float)) or isinstance(v, bool) or \
                any(c in str(v) for c in "\n\r\0"):
            raise _refuse(where, f"env {k}", v, "a string or number on one line")


def _env_prologue(env: dict[str, Any]) -> list[str]:
    """``export NAME=value`` lines, each value shell-quoted."""
    return [f"export {k}={shlex.quote(str(v))}" for k, v in env.items()]


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
        Unknown kind or option, wrong option type, missing required option.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: a cluster spec must be a YAML mapping with a 'kind' key, "
                          f"got {type(cfg).__name__}.")
    kind = cfg.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"{where}: unknown cluster kind {kind!r}; use one of {sorted(KINDS)}.")
    options = {k: v for k, v in cfg.items() if k != "kind"}
    check_section(options, KINDS[kind], where, owner=f"kind {kind!r}",
                  hint=" (pass anything else under 'extra')")
    if kind == "scheduler" and ("address" in cfg) == ("scheduler_file" in cfg):
        raise ConfigError(f"{where}: kind 'scheduler' needs exactly one of 'address' "
                          "(tcp://host:port) or 'scheduler_file'.")
    if kind == "ssh" and not cfg.get("hosts"):
        raise ConfigError(f"{where}: kind 'ssh' needs 'hosts': a list whose first entry runs the "
                          "scheduler and the rest the workers.")
    if kind in ("slurm", "pbs"):
        for key in ("cores", "memory"):
            if key not in cfg:
                raise ConfigError(f"{where}: kind {kind!r} needs {key!r} (resources of one worker "
                                  "job), e.g. cores: 8, memory: 32GB.")
    if kind in ("slurm", "pbs"):
        _check_job_values(cfg, where)
    if kind == "kubernetes":
        if "name" in cfg and not (isinstance(cfg["name"], str) and _NAME.fullmatch(cfg["name"])):
            raise _refuse(where, "name", cfg["name"], "letters, digits, '_', '.', '-'")
        if "env" in cfg:
            _check_env(cfg["env"], where)
    if kind == "kubernetes" and "image" not in cfg:
        raise ConfigError(f"{where}: kind 'kubernetes' needs 'image': a container image with "
                          "distsketch installed.")
    return dict(cfg)


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
    skip = {"kind", "n_workers", "adapt", "extra", "timeout", "env"}
    kwargs = {k: v for k, v in cfg.items() if k not in skip}
    kwargs.setdefault("processes", 1)
    kwargs.update(cfg.get("extra", {}))
    if cfg.get("env"):
        # exported before the user's prologue, each value quoted by shlex
        kwargs["job_script_prologue"] = (_env_prologue(cfg["env"])
                                         + list(kwargs.get("job_script_prologue", [])))
    return kwargs


def render_job_script(spec: Any, scheduler_address: str = "tcp://SCHEDULER:8786") -> str:
    """The batch script one SLURM/PBS worker job would run, without a batch system.

    Parameters
    ----------
    spec : dict or path-like
        A ``slurm`` or ``pbs`` spec (mapping or YAML path).
    scheduler_address : str
        Address written into the script (the real one is known only once the
        scheduler runs).

    Returns
    -------
    str
        The job script (``#SBATCH``/``#PBS`` directives and the worker command).

    Raises
    ------
    ConfigError
        Not a slurm/pbs spec, or invalid options.

    Notes
    -----
    Uses dask-jobqueue's own ``job_script()`` when it is installed (the
    ``cluster`` extra) and an equivalent built-in template otherwise.
    """
    cfg = load_spec(spec) if isinstance(spec, (str, os.PathLike)) else validate_spec(spec)
    kind = cfg["kind"]
    if kind not in ("slurm", "pbs"):
        raise ConfigError(f"render_job_script needs a 'slurm' or 'pbs' spec, got kind {kind!r}.")
    try:
        if kind == "slurm":
            from dask_jobqueue.slurm import SLURMJob as Job
        else:
            from dask_jobqueue.pbs import PBSJob as Job  # type: ignore[assignment]
    except ImportError:
        # same layout as dask-jobqueue's, so a spec can be checked without the extra
        return _builtin_job_script(cfg, scheduler_address)
    kwargs = _jobqueue_kwargs(cfg)
    kwargs.pop("name", None)
    try:
        job = Job(scheduler=scheduler_address, name=cfg.get("name", "distsketch-worker"), **kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid {kind} options {kwargs}: {exc}") from exc
    return job.job_script()


def _builtin_job_script(cfg: dict[str, Any], address: str) -> str:
    """The worker job script dask-jobqueue would write, for when it is not installed."""
    import sys

    from dask.utils import parse_bytes

    kind = cfg["kind"]
    cores, processes = int(cfg["cores"]), int(cfg.get("processes", 1))
    try:
        mem = parse_bytes(cfg["memory"])
    except ValueError as exc:
        raise ConfigError(f"{kind} spec: memory {cfg['memory']!r} is not a size like 32GB.") from exc
    mem_gib = round(mem / 2**30)
    if kind == "slurm":
        lines = ["#SBATCH -J dask-worker"]
        lines += [f"#SBATCH -p {cfg['queue']}"] if "queue" in cfg else []
        lines += [f"#SBATCH -A {cfg['account']}"] if "account" in cfg else []
        lines += ["#SBATCH -n 1", f"#SBATCH --cpus-per-task={cores}", f"#SBATCH --mem={mem_gib}G"]
        lines += [f"#SBATCH -t {cfg['walltime']}"] if "walltime" in cfg else []
        lines += [f"#SBATCH {d}" for d in cfg.get("job_extra_directives", [])]
    else:
        lines = ["#PBS -N dask-worker"]
        lines += [f"#PBS -q {cfg['queue']}"] if "queue" in cfg else []
        lines += [f"#PBS -A {cfg['account']}"] if "account" in cfg else []
        lines += [f"#PBS -l select=1:ncpus={cores}:mem={mem_gib}GB"]
        lines += [f"#PBS -l walltime={cfg['walltime']}"] if "walltime" in cfg else []
        lines += [f"#PBS {d}" for d in cfg.get("job_extra_directives", [])]
    lines += _env_prologue(cfg.get("env") or {}) + list(cfg.get("job_script_prologue", []))
    worker = [cfg.get("python", sys.executable), "-m", "distributed.cli.dask_worker", address,
              "--name", cfg.get("name", "distsketch-worker"),
              "--nthreads", str(max(1, cores // processes)),
              "--memory-limit", f"{mem / processes / 2**30:.2f}GiB"]
    if processes > 1:
        worker += ["--nworkers", str(processes)]
    worker += ["--nanny", "--death-timeout", "60"]
    if "local_directory" in cfg:
        worker += ["--local-directory", cfg["local_directory"]]
    if "interface" in cfg:
        worker += ["--interface", cfg["interface"]]
    worker += list(cfg.get("worker_extra_args", []))
    return "#!/usr/bin/env bash\n\n" + "\n".join(lines) + "\n" + " ".join(worker) + "\n"


@contextlib.contextmanager
def start_cluster(cfg: dict[str, Any]) -> Iterator[Any]:
    """Start a slurm, pbs, ssh or kubernetes cluster and yield a connected Client.

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
        Unknown kind or the kind's package is missing.
    ClusterError
        The cluster could not be started.
    """
    from distributed import Client

    cfg = validate_spec(cfg)
    kind = cfg["kind"]
    if kind not in _EXTRA_HINT:
        raise ConfigError(f"start_cluster handles slurm, pbs, ssh and kubernetes; kind {kind!r} is "
                          "handled by distsketch.cluster.connect.")
    _require(kind)
    try:
        if kind in ("slurm", "pbs"):
            from dask_jobqueue import PBSCluster, SLURMCluster

            cls = SLURMCluster if kind == "slurm" else PBSCluster
            cluster = cls(**_jobqueue_kwargs(cfg))
        elif kind == "ssh":
            from distributed import SSHCluster

            cluster = SSHCluster(cfg["hosts"], connect_options=cfg.get("connect_options", {}),  # type: ignore[assignment]
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
        elif kind in ("slurm", "pbs"):
            cluster.scale(jobs=cfg.get("n_workers", 1))
        elif kind == "kubernetes" and "n_workers" in cfg:
            cluster.scale(cfg["n_workers"])
        with Client(cluster, timeout=cfg.get("timeout", 60)) as client:
            yield client
