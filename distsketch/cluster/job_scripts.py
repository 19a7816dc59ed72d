"""Batch job scripts: the dask-jobqueue cluster object of a batch spec (slurm, pbs,
sge, lsf) and the worker job script it would submit, rendered without submitting.

What runs is distsketch's choice: the worker command
(:data:`~distsketch.cluster.safety.WORKER_COMMAND`) and the shebang
(:data:`~distsketch.cluster.safety.SHEBANG`), whatever the site's
configuration says; every other value was checked by :func:`validate_spec`.
As a last line of defence, should a check ever let something through, the
values handed to dask-jobqueue are checked once more (no line break or other
control character; plain words where the worker command writes them unquoted)
and the script it renders must have exactly the lines distsketch expects
(:func:`check_rendered_script`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Iterator
from typing import Any

from distsketch.cluster.directives import DIRECTIVE_PREFIX
from distsketch.cluster.safety import CONTROL, MAX_INT, SHEBANG, WORKER_COMMAND, count, size
from distsketch.cluster.spec import (
    BATCH_KINDS,
    load_spec,
    require_package,
    site_config,
    validate_spec,
)
from distsketch.errors import ConfigError

__all__ = ["batch_cluster", "check_rendered_script", "jobqueue_cluster", "render_job_script"]

# a word of the worker command that bash reads as itself: shlex.quote's safe characters
# (and "~", which only expands to the home folder), or a single-quoted string
_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./~-]+|'[^']*'", re.ASCII)
# values dask-jobqueue writes unquoted into the worker command
_COMMAND_VALUES = ("python", "name", "local_directory", "interface", "protocol", "death_timeout",
                   "worker_extra_args")


def _jobqueue_kwargs(cfg: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of the dask-jobqueue cluster class for a validated batch spec; what
    the spec leaves out is not passed, so the site's ``jobqueue.<kind>.*`` applies."""
    kind = cfg["kind"]
    skip = {"kind", "n_workers", "adapt", "extra", "timeout", "env", "storage_options"}
    kwargs = {k: v for k, v in cfg.items() if k not in skip}
    kwargs.update(cfg.get("extra", {}))
    for key in ("cores", "processes", "job_cpu", "ncpus", "mem"):
        if key in kwargs:
            # mem is a number of bytes, the others counts (both checked by validate_spec)
            kwargs[key] = count(kwargs[key], most=MAX_INT) if key == "mem" else \
                count(kwargs[key])
        elif key in ("cores", "processes") and isinstance(site_config(kind, key), float):
            kwargs[key] = count(site_config(kind, key)) or site_config(kind, key)
    if "memory" in kwargs and not isinstance(kwargs["memory"], str):
        kwargs["memory"] = size(kwargs["memory"])
    if kwargs.get("worker_extra_args"):
        # dask-jobqueue joins them with spaces: quote what bash would not read as itself
        # (an address such as tcp://[::1]:0 would be a glob, "1 h" two words)
        kwargs["worker_extra_args"] = [shlex.quote(str(a)) for a in kwargs["worker_extra_args"]]
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
    return [f"export {k}={shlex.quote(str(v))}" for k, v in env.items()]


def jobqueue_cluster(cfg: dict[str, Any], **options: Any) -> Any:
    """The dask-jobqueue cluster object of a validated batch spec (no job submitted)."""
    require_package(cfg["kind"])
    import dask_jobqueue

    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster,
           "sge": dask_jobqueue.SGECluster, "lsf": dask_jobqueue.LSFCluster}[cfg["kind"]]
    kwargs = _jobqueue_kwargs(cfg) | options
    _check_passed_values(kwargs, cfg["kind"])
    try:
        cluster = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        shown = {k: v for k, v in kwargs.items() if k != "scheduler_options"}
        raise ConfigError(f"dask-jobqueue refused the {cfg['kind']} options {shown}: {exc}") \
            from exc
    try:
        # the job every submitted one is made like (nothing submitted); it knows the
        # prologue and directives it was given, the site's configuration included
        job = getattr(cluster, "_dummy_job", None)
        check_rendered_script(
            cluster.job_script(), cfg["kind"],
            prologue=getattr(job, "_job_script_prologue", None) or
            kwargs.get("job_script_prologue") or [],
            directives=getattr(job, "job_extra_directives", None) or
            kwargs.get("job_extra_directives") or [])
    except BaseException:
        cluster.close()
        raise
    return cluster


def _check_passed_values(kwargs: dict[str, Any], kind: str) -> None:
    """The last line of defence (see the module's docstring): a ConfigError here means a
    check of :mod:`distsketch.cluster.safety` let the value through."""
    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from strings(k)
                yield from strings(v)
        elif isinstance(value, (list, tuple, set)):
            for v in value:
                yield from strings(v)

    for key, value in kwargs.items():
        if key == "job_script_prologue":
            continue
        words = [str(v) for v in value] if key == "worker_extra_args" else [str(value)]
        for text in strings(value):
            if CONTROL.search(text):
                raise ConfigError(f"{kind} spec: {key} = {value!r} would put a line break or "
                                  "another control character into the job script; it is "
                                  "refused (no value but job_script_prologue may hold one): "
                                  "write it on one line (docs/security.md).")
        if key in _COMMAND_VALUES and value is not None and \
                not all(_WORD.fullmatch(w) for w in words):
            raise ConfigError(f"{kind} spec: {key} = {value!r} would reach the worker command "
                              "with a space or shell character outside quotes; it is refused: "
                              "give a plain value (docs/security.md lists what each field may "
                              "hold).")


def check_rendered_script(script: str, kind: str, prologue: list[str],
                          directives: list[str]) -> None:
    """Check that a rendered job script has exactly the lines distsketch expects.

    The script must be: the shebang (:data:`~distsketch.cluster.safety.SHEBANG`),
    an empty line, directive lines of ``kind`` (each starting with its prefix, such as
    ``#SBATCH``, and ending with the spec's ``job_extra_directives`` as given), the
    prologue exactly as given (distsketch's ``export NAME='value'`` lines, then the
    user's or the site's lines), and one worker command,
    ``PYTHON -m distributed.cli.dask_worker ...``, as the last line.

    Parameters
    ----------
    script : str
        The script dask-jobqueue rendered.
    kind : {"slurm", "pbs", "sge", "lsf"}
        The batch system.
    prologue : list of str
        The prologue the job was given (empty items are left out, as dask-jobqueue
        leaves them out).
    directives : list of str
        The extra directives the job was given.

    Raises
    ------
    ConfigError
        A line that is none of these (a value brought a line break into the
        script), naming the line.
    """
    def wrong(line: str, what: str) -> ConfigError:
        return ConfigError(f"the rendered {kind} job script has an unexpected line {line!r} "
                           f"({what}); a value of the spec broke the script's lines. Nothing was "
                           "submitted; check the spec's values (docs/security.md).")

    lines = script.split("\n")
    if lines[0] != SHEBANG:
        raise wrong(lines[0], f"the first line must be {SHEBANG}")
    if len(lines) < 4 or lines[1] != "" or lines[-1] != "":
        raise wrong(script, "the script is not shebang, directives, prologue, worker command")
    worker = lines[-2]
    if f" -m {WORKER_COMMAND} " not in worker or CONTROL.search(worker):
        raise wrong(worker, f"the last line must be the worker command (-m {WORKER_COMMAND})")
    block = "\n".join(line for line in prologue if line).split("\n")
    window = lines[-2 - len(block):-2]
    if window != block:
        # name a line that is not the prologue's, else the first that differs
        odd = [a for a in window if a not in block] or \
            [a for a, b in zip(window, block) if a != b] or [""]
        raise wrong(odd[0], "the prologue must be the lines given")
    header = lines[2:-2 - len(block)]
    prefix = DIRECTIVE_PREFIX[kind] + " "
    if header != [""]:
        for line in header:
            if not line.startswith(prefix) or CONTROL.search(line):
                raise wrong(line, f"a directive line must start with {prefix.strip()}")
        wanted = [prefix + d for d in directives]
        if wanted and header[-len(wanted):] != wanted:
            raise wrong(header[-1], "the last directives must be job_extra_directives as given")


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
