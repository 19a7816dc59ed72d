"""Clusters: connecting to Dask (:mod:`~distsketch.cluster.connection`), cluster specs
(:mod:`~distsketch.cluster.spec`) and what they may hold
(:mod:`~distsketch.cluster.safety`, :mod:`~distsketch.cluster.directives`), batch job
scripts (:mod:`~distsketch.cluster.job_scripts`) and launchers
(:mod:`~distsketch.cluster.launchers`).

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
