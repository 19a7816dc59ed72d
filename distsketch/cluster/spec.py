"""Cluster specs: the schema of each kind and reading a spec (YAML or a mapping).

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
(``distributed.SSHCluster``), ``kubernetes`` (the dask-kubernetes
operator) and ``cuda`` (dask-cuda's ``LocalCUDACluster``: one worker per GPU
of this machine).  Every kind may carry ``storage_options:`` (plain data), applied
while connected as the Dask config value ``distsketch.storage-options``.

Each kind's options are a constraint table (:data:`KINDS`); every value that reaches a
job script, a command line, an environment or Dask's configuration is then checked by
:mod:`distsketch.cluster.safety` (docs/security.md lists every field).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distsketch.cluster.safety import (
    MAX_COUNT,
    check_cuda,
    check_job_values,
    check_kubernetes,
    check_local,
    check_numbers,
    check_scheduler,
    check_ssh,
    check_timeout,
    count,
)
from distsketch.errors import ConfigError
from distsketch.validation import InstanceOf, check_section, load_yaml

__all__ = ["BATCH_KINDS", "KINDS", "LAUNCHED_KINDS", "check_storage_options", "load_spec",
           "require_package", "site_config", "validate_spec"]

# kind -> {option: [constraint]}; "extra" passes allow-listed keyword arguments through
# (distsketch/cluster/safety.py checks every value that reaches a worker)
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
    # dask-cuda's LocalCUDACluster: one worker per GPU of this machine (docs/gpu.md)
    "cuda": {"n_workers": [InstanceOf(int, float, type(None))], "threads_per_worker": _NUM,
             "cuda_visible_devices": [InstanceOf(str, list, type(None))],
             "memory_limit": [InstanceOf(str, int, float)],
             "device_memory_limit": [InstanceOf(str, int, float, type(None))],
             "rmm_pool_size": [InstanceOf(str, int, float, type(None))],
             "dashboard_address": [InstanceOf(str, type(None))], "timeout": _NUM},
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
_PACKAGES = {
    **{kind: _JOBQUEUE_HINT for kind in BATCH_KINDS},
    "ssh": ("asyncssh", "pip install asyncssh (needed by distributed.SSHCluster)"),
    "kubernetes": ("dask_kubernetes", "pip install dask-kubernetes (the Dask Kubernetes operator "
                                      "must run in the cluster)"),
    "cuda": ("dask_cuda", "pip install \"distsketch[gpu]\" (dask-cuda starts one worker per GPU "
                          "and CuPy computes on it; docs/gpu.md)"),
}
#: the kinds :func:`distsketch.cluster.launchers.start_cluster` starts (each needs a package)
LAUNCHED_KINDS = tuple(_PACKAGES)


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


def site_config(kind: str, key: str) -> Any:
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
    # before any value is formatted into a message, a script or a command line
    check_numbers(cfg, where)
    kind = cfg.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:  # a list or mapping is no kind
        raise ConfigError(f"{where}: unknown cluster kind {kind!r}; use one of {sorted(KINDS)}.")
    options = {k: v for k, v in cfg.items() if k != "kind"}
    check_section(options, KINDS[kind], where, owner=f"kind {kind!r}",
                  hint=" (docs/security.md lists the fields a spec may hold)")
    if "timeout" in cfg:
        check_timeout(cfg["timeout"], where)
    out = dict(cfg)
    if "storage_options" in cfg:
        out["storage_options"] = check_storage_options(cfg["storage_options"],
                                                       f"{where}: storage_options")
    if kind in ("local", "cuda"):  # the cuda kind takes the local kind's options and more
        (check_local if kind == "local" else check_cuda)(cfg, where)
        for key in ("n_workers", "threads_per_worker"):
            if cfg.get(key) is not None and count(cfg[key]) is None:
                raise ConfigError(f"{where}: {key} = {cfg[key]!r} must be a whole number "
                                  f"from 1 to {MAX_COUNT} (2 or 2.0).")
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
            if key not in cfg and site_config(kind, key) is None:
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


def require_package(kind: str) -> Any:
    """Import the optional package a cluster kind needs (ConfigError naming the extra)."""
    import importlib

    module, hint = _PACKAGES[kind]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"cluster kind {kind!r} needs the package {module!r}, which is not "
                          f"installed: {hint}.") from exc
