"""Connecting to Dask: the embedded local cluster, an address, a scheduler file
or a cluster spec.

:func:`connect` is the one entry point; every CLI command's ``--cluster``
option and every workflow's ``cluster:`` go through it (which cluster a spec
names: :func:`resolve_spec`).  A client connecting to a scheduler takes its
security and timeouts from Dask's ``distributed.comm.*`` configuration.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from distsketch.cluster.launchers import start_cluster
from distsketch.cluster.spec import check_storage_options, load_spec, validate_spec
from distsketch.errors import ClusterError, ConfigError

__all__ = ["DASHBOARD_PREFIX", "DEFAULT_LOCAL", "STORAGE_OPTIONS_KEY",
           "check_dashboard", "configured_scheduler_address", "connect", "local_worker_memory",
           "require_dashboard", "resolve_spec"]

logger = logging.getLogger("distsketch.cluster")  # the package's logger, one name for all

DEFAULT_LOCAL: dict[str, Any] = {
    "kind": "local",
    "n_workers": None,          # one per core
    "threads_per_worker": 1,
    "memory_limit": "auto",
    "processes": True,
    "dashboard_address": None,
}
#: how the dashboard's link starts in the messages of :func:`connect`
DASHBOARD_PREFIX = "Dask dashboard: "
#: Dask config key holding a cluster spec's ``storage_options`` while connected
STORAGE_OPTIONS_KEY = "distsketch.storage-options"
_ENV_ADDRESS = "DASK_SCHEDULER_ADDRESS"
# a scheduler file is a small JSON object ({"address": ..., "id": ..., "workers": {...}})
_SCHEDULER_FILE_BYTES = 1 << 20


def local_worker_memory(kwargs: dict) -> int:
    """Bytes per worker of an embedded LocalCluster with ``memory_limit: auto``.

    distributed's "auto" divides the memory it sees (host total, root cgroup)
    by the workers; a process inside a nested cgroup (a SLURM step, a
    ``systemd-run`` scope) may use less, so its workers would plan and spill
    for memory that is not there.  The least of every limit is divided instead.
    """
    from dask.system import CPU_COUNT

    from distsketch.graph.host_memory import host_memory_limit

    threads = max(1, int(kwargs.get("threads_per_worker") or 1))
    workers = int(kwargs.get("n_workers") or max(1, CPU_COUNT // threads))
    return max(1, host_memory_limit() // max(1, workers))


def configured_scheduler_address() -> tuple[str, str] | None:
    """The scheduler address Dask's own configuration names, and where it comes from.

    Returns
    -------
    (str, str) or None
        ``(address, source)``: the ``scheduler-address`` config value (which
        Dask fills from ``DASK_SCHEDULER_ADDRESS`` when it is imported, or a
        config file / ``dask.config.set``), else the environment variable as
        it is now; None when neither is set.
    """
    import dask

    address = dask.config.get("scheduler-address", None)
    env = os.environ.get(_ENV_ADDRESS, "").strip()
    if address:
        # Dask copies the environment variable into its config on import: name the origin
        return str(address), _ENV_ADDRESS if str(address) == env else \
            "Dask config scheduler-address"
    if env:
        return env, _ENV_ADDRESS
    return None


def resolve_spec(spec: Any) -> dict[str, Any]:
    """Normalise ``spec`` into a dict with a ``kind`` key.

    Accepted: None (Dask's configured scheduler address if there is one, else
    the embedded default), ``"local"`` (the embedded default, always),
    ``"sync"`` or ``"threads"`` (no cluster, a local Dask scheduler),
    ``"tcp://host:port"`` (any ``scheme://``), a scheduler-file path
    (``*.json``), a YAML spec path (``*.yaml``/``*.yml``) or a dict.
    """
    if spec is None:
        configured = configured_scheduler_address()
        if configured is not None:
            return {"kind": "scheduler", "address": configured[0]}
        return dict(DEFAULT_LOCAL)
    if spec == "local":
        return dict(DEFAULT_LOCAL)
    if isinstance(spec, dict):
        if "kind" not in spec:
            raise ConfigError(f"cluster spec {spec!r} has no 'kind' key.")
        # a mapping is held to the same checks as a spec file
        return validate_spec(spec)
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
        return load_spec(p)
    raise ConfigError(
        f"cannot interpret cluster {spec!r}: use 'local', 'sync', 'threads', "
        "'tcp://host:port', a scheduler file (.json) or a cluster spec (.yaml)."
    )


def _connect_timeout(timeout: float | None) -> float:
    """``timeout`` or Dask's ``distributed.comm.timeouts.connect`` (seconds)."""
    if timeout is not None:
        return float(timeout)
    import dask
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect", "30s"),
                                 default="seconds"))


def _scheduler_file_address(path: str, seconds: float) -> str:
    """The address in a scheduler file, read as data, waiting up to ``seconds`` for it.

    ``Client(scheduler_file=...)`` waits for the file without end (whatever its
    timeout), blocks on a FIFO, reads ``/dev/zero`` until memory runs out and fails
    with a ``TypeError`` on a JSON list: here the file must be a regular file of at
    most 1 MiB holding a JSON object with an ``address``.  A file that is not yet
    whole (the scheduler is still writing it) is read again until ``seconds`` pass.
    """
    import json

    deadline = time.monotonic() + seconds
    state = "does not exist"
    while True:
        try:
            # O_NONBLOCK: opening a FIFO without a writer must not wait
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ClusterError(f"scheduler file {path} cannot be opened ({exc}); check the "
                               "path.") from exc
        else:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise ConfigError(f"scheduler file {path} is not a regular file (a FIFO, "
                                  "device or folder); give the JSON file that "
                                  "`dask scheduler --scheduler-file` writes.")
            with os.fdopen(fd, "rb") as f:
                data = f.read(_SCHEDULER_FILE_BYTES + 1)
            if len(data) > _SCHEDULER_FILE_BYTES:
                raise ConfigError(f"scheduler file {path} is larger than "
                                  f"{_SCHEDULER_FILE_BYTES} bytes, which no scheduler file "
                                  "is; give the JSON file that `dask scheduler "
                                  "--scheduler-file` writes.")
            try:
                info = json.loads(data)
            except ValueError:  # UnicodeDecodeError included: maybe not written whole yet
                state = "is not complete JSON"
            else:
                address = info.get("address") if isinstance(info, dict) else None
                if isinstance(address, str) and address and "\n" not in address:
                    return address
                raise ConfigError(f"scheduler file {path} is not a scheduler file: it must "
                                  "be a JSON object with an \"address\" string, as `dask "
                                  "scheduler --scheduler-file` writes.")
        if time.monotonic() >= deadline:
            raise ClusterError(f"scheduler file {path} {state} after {seconds:g} s; start the "
                               f"scheduler with `dask scheduler --scheduler-file {path}` "
                               "first, or give a longer timeout.")
        time.sleep(0.05)


def _dashboard_link(client: Any, on: bool = True) -> str:
    """The dashboard URL of a scheduler; empty when it serves none: without bokeh, or when
    not ``on`` (its HTTP server and ``dashboard_link`` exist even with the dashboard off)."""
    import importlib.util

    if not on or importlib.util.find_spec("bokeh") is None:
        return ""
    try:
        return str(client.dashboard_link or "")
    except (AttributeError, KeyError, TypeError):
        return ""


def require_dashboard(what: str = "--dashboard") -> None:
    """Refuse a dashboard request when bokeh, which serves the dashboard, is not installed.

    Raises
    ------
    ConfigError
        bokeh cannot be imported.
    """
    try:
        import bokeh  # noqa: F401  (distributed serves no dashboard without it)
    except ImportError:
        raise ConfigError(f"{what}: the Dask dashboard needs bokeh, which is not installed; "
                          'install it with pip install "distsketch[cluster]" (or pip install '
                          "bokeh), or leave out the dashboard.") from None


def _with_dashboard(cfg: dict[str, Any], address: str) -> dict[str, Any]:
    """``cfg`` with the dashboard of an embedded LocalCluster at ``address`` (a cluster
    started elsewhere keeps its own)."""
    require_dashboard()
    if cfg["kind"] in ("sync", "threads"):
        raise ConfigError(f"--dashboard needs a Dask cluster, but the cluster is "
                          f"'{cfg['kind']}' (no cluster, so no dashboard); name one, e.g. "
                          "--cluster local.")
    if cfg["kind"] in ("local", "cuda"):  # the clusters started in this process
        if address == "auto":  # a spec's own address, else any free port
            address = cfg.get("dashboard_address") or ":0"
        return {**cfg, "dashboard_address": address}
    return cfg


def check_dashboard(spec: Any, address: str = "auto") -> None:
    """Refuse, before anything starts, a dashboard that :func:`connect` could not serve.

    Raises
    ------
    ConfigError
        bokeh is not installed, or ``spec`` runs no cluster (sync, threads).
    """
    _with_dashboard(resolve_spec(spec), address)


@contextlib.contextmanager
def _storage_options(cfg: dict[str, Any], where: str) -> Iterator[None]:
    """Set ``distsketch.storage-options`` from the spec for the duration; restore it after."""
    if "storage_options" not in cfg:
        yield
        return
    import dask

    options = check_storage_options(cfg["storage_options"], f"{where}: storage_options")
    with dask.config.set({STORAGE_OPTIONS_KEY: options}):
        yield


#: seconds a worker of the embedded LocalCluster may take to exit when a command ends.
#: distributed's own close gives each worker process 4 s before killing it with a warning
#: ("Worker process still alive after 4.0 seconds, killing"), which workers busy tearing
#: down on a loaded machine (several per core) exceed.
WORKER_EXIT_SECONDS = 30.0


def close_local_workers(cluster: Any, timeout: float = WORKER_EXIT_SECONDS) -> None:
    """Close the workers of a LocalCluster, giving each ``timeout`` seconds to exit.

    Called after its client is closed and before the cluster itself, which
    then finds no worker left to kill.  A worker that outlives ``timeout``
    is killed as distributed would; a failure to close is logged only, since
    the cluster's own close follows.
    """
    import asyncio

    async def close_all() -> None:
        workers = list(cluster.workers.values())
        await asyncio.gather(*(w.close(timeout=timeout) for w in workers),
                             return_exceptions=True)

    try:
        cluster.sync(close_all)
    except Exception as exc:  # the cluster's close still runs and cleans up
        logger.debug("closing the LocalCluster's workers: %s", exc)


@contextlib.contextmanager
def connect(spec: Any = None, *, timeout: float | None = None,
            log: Callable[[str], None] | None = None,
            dashboard: str | None = None) -> Iterator[Any]:
    """Context manager yielding a ``distributed.Client`` (or None for sync/threads).

    Parameters
    ----------
    spec : see :func:`resolve_spec`
        None honours ``DASK_SCHEDULER_ADDRESS`` / Dask's ``scheduler-address``
        before starting the embedded LocalCluster.
    timeout : float, optional
        Seconds to wait for a remote scheduler before raising ClusterError
        (default: Dask's ``distributed.comm.timeouts.connect``; a spec's own
        ``timeout`` wins).
    log : callable, optional
        Receives one-line messages (the address taken from the environment,
        the dashboard link); they also go to the ``distsketch.cluster``
        logger.
    dashboard : str, optional
        Serve the Dask dashboard of an embedded LocalCluster at this address
        (``":0"``: any free port; ``":8787"``, ``"127.0.0.1:8787"``; ``"auto"``:
        the spec's ``dashboard_address``, else any free port) and show its
        link.  A scheduler connected to keeps its own dashboard, whose link is
        shown; ``"sync"``/``"threads"`` have none (ConfigError), and so has a
        process without bokeh (ConfigError).

    Yields
    ------
    distributed.Client or None
        None when the spec asks for a local Dask scheduler without a cluster;
        dask's default scheduler is then set accordingly.

    Notes
    -----
    A spec's ``storage_options`` are the Dask config value
    ``distsketch.storage-options`` inside the context (the defaults for URL
    inputs and outputs) and restored after it.  On exit only what this call
    started is shut down (a LocalCluster, batch jobs); a scheduler it merely
    connected to keeps running, with its workers.
    """
    def say(message: str) -> None:
        logger.info(message)
        if log is not None:
            log(message)

    import dask

    configured = configured_scheduler_address() if spec is None else None
    if configured is not None:
        say(f"using the Dask scheduler at {configured[0]} (from {configured[1]})")
    cfg = resolve_spec(spec)
    if dashboard is not None:
        cfg = _with_dashboard(cfg, dashboard)
    kind = cfg["kind"]
    with _storage_options(cfg, "cluster spec"):
        if kind in ("sync", "threads"):
            with dask.config.set(scheduler="synchronous" if kind == "sync" else "threads"):
                yield None
            return
        from distributed import Client, LocalCluster

        if kind == "local":
            # dashboard_address=None must reach LocalCluster (it turns the dashboard off)
            kwargs = {k: v for k, v in cfg.items()
                      if k not in ("kind", "timeout", "storage_options")
                      and (v is not None or k == "dashboard_address")}
            for key in ("n_workers", "threads_per_worker", "memory_limit"):
                # whole numbers written as floats (n_workers: 2.0) become ints
                if isinstance(kwargs.get(key), float) and kwargs[key].is_integer():
                    kwargs[key] = int(kwargs[key])
            if kwargs.get("memory_limit", "auto") == "auto":
                kwargs["memory_limit"] = local_worker_memory(kwargs)
            with LocalCluster(**kwargs) as cluster:
                with Client(cluster) as client:
                    if link := _dashboard_link(client, on=cfg.get("dashboard_address") is not None):
                        say(f"{DASHBOARD_PREFIX}{link}")
                    yield client
                # the client is closed; the workers exit before the cluster closes them
                close_local_workers(cluster)
            return
        if kind == "scheduler":
            seconds = float(cfg.get("timeout", _connect_timeout(timeout)))
            try:
                if "scheduler_file" in cfg:
                    address = _scheduler_file_address(cfg["scheduler_file"], seconds)
                else:
                    address = cfg["address"]
                client = Client(address, timeout=seconds)
            except (ConfigError, ClusterError):
                raise
            except (ValueError, TypeError) as exc:  # an address Dask cannot read
                raise ClusterError(f"cannot connect to the Dask scheduler at {address!r} "
                                   f"({type(exc).__name__}: {exc}); give an address such as "
                                   "tcp://host:8786.") from exc
            except (OSError, TimeoutError) as exc:
                target = cfg.get("address") or cfg.get("scheduler_file")
                origin = (f" The address comes from {configured[1]}; pass a cluster explicitly "
                          "(e.g. --cluster local) to use another." if configured else "")
                raise ClusterError(
                    f"cannot reach the Dask scheduler at {target} within {seconds:g} s ({exc}). "
                    f"Check that it is running and the address/port is right.{origin}"
                ) from exc
            # close() only disconnects this client; the scheduler and workers stay
            with client:
                if dashboard is not None and (link := _dashboard_link(client)):
                    say(f"{DASHBOARD_PREFIX}{link} (the dashboard of the scheduler)")
                yield client
            return
        with start_cluster(cfg) as client:
            if link := _dashboard_link(client):
                say(f"{DASHBOARD_PREFIX}{link}")
            yield client
