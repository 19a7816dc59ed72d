"""Launchers: start the cluster of a batch (slurm, pbs, sge, lsf), ssh, kubernetes or
cuda spec and connect a client to it; shut it down on exit.

``local`` and ``scheduler`` specs are connected by
:func:`distsketch.cluster.connect` itself; every other kind comes here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from distsketch.cluster.job_scripts import jobqueue_cluster
from distsketch.cluster.safety import count
from distsketch.cluster.spec import BATCH_KINDS, LAUNCHED_KINDS, require_package, validate_spec
from distsketch.errors import ClusterError, ConfigError

__all__ = ["FIRST_WORKER_TIMEOUT", "start_cluster"]

#: seconds a batch spec without ``timeout`` waits for its first worker job to start
FIRST_WORKER_TIMEOUT = 600.0
# the command a site admin lists a batch system's jobs with
_QUEUE_COMMAND = {"slurm": "squeue", "pbs": "qstat", "sge": "qstat", "lsf": "bjobs"}


@contextlib.contextmanager
def start_cluster(cfg: dict[str, Any]) -> Iterator[Any]:
    """Start a batch (slurm, pbs, sge, lsf), ssh, kubernetes or cuda cluster and yield a Client.

    Parameters
    ----------
    cfg : dict
        A validated spec (see :func:`load_spec`).

    Yields
    ------
    distributed.Client
        Connected; the cluster is shut down (jobs cancelled, pods deleted) on
        exit.  A batch spec without ``adapt`` yields once its first worker job
        has joined, waiting at most the spec's ``timeout`` (default
        :data:`FIRST_WORKER_TIMEOUT`).

    Raises
    ------
    ConfigError
        Unknown kind, invalid options or the kind's package is missing.
    ClusterError
        The cluster could not be started, or no worker job started in time (the
        jobs are cancelled).
    """
    from distributed import Client

    cfg = validate_spec(cfg)
    kind = cfg["kind"]
    if kind not in LAUNCHED_KINDS:
        raise ConfigError(f"start_cluster handles {', '.join(LAUNCHED_KINDS)}; kind {kind!r} is "
                          "handled by distsketch.cluster.connect.")
    require_package(kind)
    try:
        if kind in BATCH_KINDS:
            cluster = _batch_cluster(cfg)
        elif kind == "cuda":
            cluster = _cuda_cluster(cfg)
        elif kind == "ssh":
            from distributed import SSHCluster

            _check_ssh_hosts(cfg)
            cluster = SSHCluster(cfg["hosts"], connect_options=cfg.get("connect_options", {}),
                                 worker_options=cfg.get("worker_options", {}),
                                 scheduler_options=cfg.get("scheduler_options", {}),
                                 remote_python=cfg.get("remote_python"), **cfg.get("extra", {}))
        else:
            cluster = _kubernetes_cluster(cfg)
    except (ConfigError, ClusterError):
        raise
    except Exception as exc:
        raise ClusterError(f"could not start the {kind} cluster ({type(exc).__name__}: {exc}). Check "
                           "the spec and that the batch system / hosts / Kubernetes are reachable.") \
            from exc
    with cluster:
        try:
            if "adapt" in cfg:
                cluster.adapt(**cfg["adapt"])
            elif kind in BATCH_KINDS:
                cluster.scale(jobs=count(cfg.get("n_workers", 1)))
            elif kind == "kubernetes" and "n_workers" in cfg:
                cluster.scale(cfg["n_workers"])
        except Exception as exc:  # the values were checked; the cluster refused them
            raise ClusterError(f"the {kind} cluster started but could not be scaled "
                               f"({type(exc).__name__}: {exc}); check n_workers and adapt "
                               "in the spec.") from exc
        with Client(cluster, timeout=cfg.get("timeout", 60)) as client:
            seconds = float(cfg.get("timeout", FIRST_WORKER_TIMEOUT))
            if kind in BATCH_KINDS and "adapt" not in cfg:
                _wait_for_first_worker(client, cluster, kind, seconds)
            try:
                yield client
            except Exception as exc:
                if kind in BATCH_KINDS and type(exc).__name__ == "NoWorkerError":
                    # distributed.scheduler.NoWorkerError, raised by _batch_cluster's timeout
                    raise ClusterError(
                        f"every worker job of the {kind} cluster ended (cancelled, past its "
                        "walltime or its node lost) and none joined again within "
                        f"{seconds:g} s; dask-jobqueue does not resubmit them, so the run "
                        f"stopped here ({exc}). `{_QUEUE_COMMAND[kind]}` and the job logs say "
                        "why they ended; rerun: a workflow resumes from its last "
                        "checkpoint.") from exc
                raise


def _batch_cluster(cfg: dict[str, Any]) -> Any:
    """The dask-jobqueue cluster of a validated batch spec, its scheduler in this process.

    dask-jobqueue does not resubmit a worker job that ended, so with every job gone the
    tasks would wait without end: unless the site sets
    ``distributed.scheduler.no-workers-timeout``, they fail after the spec's ``timeout``.
    """
    import dask

    key = "distributed.scheduler.no-workers-timeout"
    if dask.config.get(key, None) is not None:
        return jobqueue_cluster(cfg)
    seconds = float(cfg.get("timeout", FIRST_WORKER_TIMEOUT))
    # the scheduler reads its configuration when it is created, here
    with dask.config.set({key: f"{seconds:g}s"}):
        return jobqueue_cluster(cfg)


def _check_ssh_hosts(cfg: dict[str, Any]) -> None:
    """Log in to every host of an ssh spec once, before anything is started on any of them:
    ``SSHCluster`` reports an unreachable host as ``ConnectionLost`` without naming it."""
    import asyncio
    import concurrent.futures

    import asyncssh

    options = dict(cfg.get("connect_options") or {})
    seconds = float(options.get("connect_timeout") or cfg.get("timeout", 60))

    async def login(host: str) -> None:
        async with asyncssh.connect(host, **options) as conn:
            await conn.run("true", check=True, timeout=seconds)

    for host in dict.fromkeys(cfg["hosts"]):
        port = options.get("port", 22)
        try:
            # a thread of its own: the caller may already run an event loop (Jupyter)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pool.submit(asyncio.run, asyncio.wait_for(login(host), seconds)).result()
        except asyncssh.HostKeyNotVerifiable as exc:
            raise ClusterError(
                f"ssh host {host} (port {port}): its host key is not trusted ({exc}); nothing "
                "was started. Check that it is the machine you mean, then add its key to the "
                "known_hosts file (ssh to it once, or ssh-keyscan), or name the right file in "
                "connect_options.known_hosts.") from exc
        except asyncssh.PermissionDenied as exc:
            raise ClusterError(
                f"ssh host {host} (port {port}) refused the login ({exc}); nothing was "
                "started. Check connect_options.username and client_keys, and that the key "
                "is in the host's authorized_keys.") from exc
        except (OSError, TimeoutError, asyncssh.Error) as exc:
            raise ClusterError(
                f"ssh host {host} (port {port}) cannot be reached ({type(exc).__name__}: "
                f"{exc or 'no answer'} within {seconds:g} s); nothing was started. Check the "
                "host name, the port and that sshd runs there.") from exc


def _wait_for_first_worker(client: Any, cluster: Any, kind: str, seconds: float) -> None:
    """Wait until one worker job has joined: a job that never starts would leave every
    computation waiting without end (the caller's ``with cluster:`` cancels the jobs)."""
    try:
        client.wait_for_workers(1, timeout=seconds)
    except TimeoutError as exc:
        jobs = [str(getattr(job, "job_id", None) or name)
                for name, job in getattr(cluster, "workers", {}).items()]
        listed = ", ".join(jobs) if jobs else "none"
        raise ClusterError(
            f"no worker job of the {kind} cluster started within {seconds:g} s (jobs {listed}; "
            f"`{_QUEUE_COMMAND[kind]}` shows why they wait); they are cancelled. "
            "Check the queue/partition and the resources the spec asks for, or raise the "
            "spec's `timeout:` where jobs wait longer in the queue.") from exc


def _kubernetes_cluster(cfg: dict[str, Any]) -> Any:
    """The operator's KubeCluster for a validated spec: always a new DaskCluster resource.

    ``KubeCluster`` joins an existing cluster of the same name by default, whose
    scheduler (anyone's who may create one in that namespace) would then be sent the
    tasks and send back results that are unpickled; ``CREATE_ONLY`` refuses that.
    """
    import sys

    from dask_kubernetes.operator import KubeCluster

    # the module that defines KubeCluster is loaded by the import above
    create_mode = getattr(sys.modules.get(KubeCluster.__module__), "CreateMode", None)
    if create_mode is None:
        raise ConfigError("kind 'kubernetes' needs a dask-kubernetes whose KubeCluster has "
                          "create_mode (2022.10 or later), so that a new cluster is always "
                          "created; pip install -U dask-kubernetes.")
    kw = {"name": cfg.get("name", "distsketch"), "image": cfg["image"],
          "n_workers": cfg.get("n_workers", 2), "create_mode": create_mode.CREATE_ONLY}
    for key in ("namespace", "resources"):
        if key in cfg:
            kw[key] = cfg[key]
    if "env" in cfg:  # Kubernetes takes strings only
        kw["env"] = {k: str(v) for k, v in cfg["env"].items()}
    return KubeCluster(**kw, **cfg.get("extra", {}))


def _cuda_cluster(cfg: dict[str, Any]) -> Any:
    """dask-cuda's LocalCUDACluster: one worker per GPU (dask-cuda sets each worker's
    CUDA_VISIBLE_DEVICES so that its GPU is device 0 there)."""
    from dask_cuda import LocalCUDACluster

    kwargs = {k: v for k, v in cfg.items()
              if k not in ("kind", "timeout", "storage_options", "cuda_visible_devices")
              and (v is not None or k == "dashboard_address")}
    gpus = cfg.get("cuda_visible_devices")
    if gpus is not None:
        kwargs["CUDA_VISIBLE_DEVICES"] = (",".join(str(g) for g in gpus) if isinstance(gpus, list)
                                          else gpus)
    return LocalCUDACluster(**kwargs)
