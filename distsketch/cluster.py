"""Connecting to Dask: the embedded local cluster, an address, a scheduler file
or a cluster spec.

:func:`connect` is the one entry point; every CLI command's ``--cluster``
option goes through it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distsketch.errors import ClusterError, ConfigError

__all__ = ["DEFAULT_LOCAL", "connect", "resolve_spec"]

DEFAULT_LOCAL: dict[str, Any] = {
    "kind": "local",
    "n_workers": None,          # one per core
    "threads_per_worker": 1,
    "memory_limit": "auto",
    "processes": True,
    "dashboard_address": None,
}


def resolve_spec(spec: Any) -> dict[str, Any]:
    """Normalise ``spec`` into a dict with a ``kind`` key.

    Accepted: None or ``"local"`` (the embedded default), ``"sync"`` or
    ``"threads"`` (no cluster, a local Dask scheduler), ``"tcp://host:port"``,
    a scheduler-file path (``*.json``), a YAML spec path (``*.yaml``/``*.yml``)
    or a dict.
    """
    if spec is None or spec == "local":
        return dict(DEFAULT_LOCAL)
    if isinstance(spec, dict):
        if "kind" not in spec:
            raise ConfigError(f"cluster spec {spec!r} has no 'kind' key.")
        return dict(spec)
    s = os.fspath(spec)
    if s in ("sync", "synchronous", "threads", "threaded"):
        return {"kind": "sync" if s.startswith("sync") else "threads"}
    if "://" in s:
        return {"kind": "scheduler", "address": s}
    p = Path(s).expanduser()
    if p.suffix == ".json":
        if not p.exists():
            raise ClusterError(f"scheduler file {p} does not exist; start the scheduler with "
                               f"`dask scheduler --scheduler-file {p}` first.")
        return {"kind": "scheduler", "scheduler_file": str(p)}
    if p.suffix in (".yaml", ".yml"):
        from distsketch.cluster_specs import load_spec

        return load_spec(p)
    raise ConfigError(
        f"cannot interpret cluster {spec!r}: use 'local', 'sync', 'threads', "
        "'tcp://host:port', a scheduler file (.json) or a cluster spec (.yaml)."
    )


@contextlib.contextmanager
def connect(spec: Any = None, *, timeout: float = 20.0) -> Iterator[Any]:
    """Context manager yielding a ``distributed.Client`` (or None for sync/threads).

    Parameters
    ----------
    spec : see :func:`resolve_spec`
    timeout : float
        Seconds to wait for a remote scheduler before raising ClusterError.

    Yields
    ------
    distributed.Client or None
        None when the spec asks for a local Dask scheduler without a cluster;
        dask's default scheduler is then set accordingly.
    """
    import dask

    cfg = resolve_spec(spec)
    kind = cfg["kind"]
    if kind in ("sync", "threads"):
        with dask.config.set(scheduler="synchronous" if kind == "sync" else "threads"):
            yield None
        return
    from distributed import Client, LocalCluster

    if kind == "local":
        # dashboard_address=None must reach LocalCluster (it disables the dashboard)
        kwargs = {k: v for k, v in cfg.items()
                  if k not in ("kind", "timeout") and (v is not None or k == "dashboard_address")}
        with LocalCluster(**kwargs) as cluster, Client(cluster) as client:
            yield client
        return
    if kind == "scheduler":
        timeout = float(cfg.get("timeout", timeout))
        try:
            if "scheduler_file" in cfg:
                client = Client(scheduler_file=cfg["scheduler_file"], timeout=timeout)
            else:
                client = Client(cfg["address"], timeout=timeout)
        except (OSError, TimeoutError) as exc:
            target = cfg.get("address") or cfg.get("scheduler_file")
            raise ClusterError(
                f"cannot reach the Dask scheduler at {target} within {timeout:.0f} s ({exc}). "
                "Check that it is running and the address/port is right."
            ) from exc
        with client:
            yield client
        return
    from distsketch.cluster_specs import start_cluster

    with start_cluster(cfg) as client:
        yield client
