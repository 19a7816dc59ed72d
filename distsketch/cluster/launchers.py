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

__all__ = ["start_cluster"]


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
    if kind not in LAUNCHED_KINDS:
        raise ConfigError(f"start_cluster handles {', '.join(LAUNCHED_KINDS)}; kind {kind!r} is "
                          "handled by distsketch.cluster.connect.")
    require_package(kind)
    try:
        if kind in BATCH_KINDS:
            cluster = jobqueue_cluster(cfg)
        elif kind == "cuda":
            cluster = _cuda_cluster(cfg)
        elif kind == "ssh":
            from distributed import SSHCluster

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
            yield client


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
