"""Clusters: connecting to Dask, cluster specs, job scripts and launchers.

One module per responsibility:

* :mod:`~distsketch.cluster.connection` — :func:`connect`, the one entry point
  (the embedded LocalCluster, an address, a scheduler file or a spec) and the
  dashboard;
* :mod:`~distsketch.cluster.spec` — the schema of each kind (constraint
  tables, :data:`KINDS`) and reading a spec (:func:`load_spec`,
  :func:`validate_spec`);
* :mod:`~distsketch.cluster.safety` — what a spec may hold: every value that
  reaches a job script, a command line, an environment or Dask's configuration;
* :mod:`~distsketch.cluster.job_scripts` — the dask-jobqueue cluster object of a
  batch spec and the job script it would submit (:func:`render_job_script`);
* :mod:`~distsketch.cluster.launchers` — starting batch, ssh and kubernetes
  clusters (:func:`start_cluster`).

The package sits above ``graph`` and ``validation`` and below ``workflow`` and
``cli`` (an import-linter contract in ``pyproject.toml``).
"""

from distsketch.cluster.connection import (
    DASHBOARD_PREFIX,
    DEFAULT_LOCAL,
    STORAGE_OPTIONS_KEY,
    check_dashboard,
    configured_scheduler_address,
    connect,
    require_dashboard,
    resolve_spec,
)
from distsketch.cluster.job_scripts import batch_cluster, render_job_script
from distsketch.cluster.launchers import start_cluster
from distsketch.cluster.spec import (
    BATCH_KINDS,
    KINDS,
    check_storage_options,
    load_spec,
    validate_spec,
)

__all__ = [
    "BATCH_KINDS",
    "DASHBOARD_PREFIX",
    "DEFAULT_LOCAL",
    "KINDS",
    "STORAGE_OPTIONS_KEY",
    "batch_cluster",
    "check_dashboard",
    "check_storage_options",
    "configured_scheduler_address",
    "connect",
    "load_spec",
    "render_job_script",
    "require_dashboard",
    "resolve_spec",
    "start_cluster",
    "validate_spec",
]
