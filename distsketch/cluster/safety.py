"""What a cluster spec may hold: every value that reaches a job script, a command
line, an environment or Dask's configuration is checked here.

A cluster spec starts Dask workers and nothing else.  distsketch chooses the
worker command (``python -m distributed.cli.dask_worker``) and the job script's
shebang (``#!/usr/bin/env bash``); worker arguments, environment variables and
batch directives come from allow-lists (:data:`WORKER_FLAGS`, :data:`ENV_ALLOWED`,
:mod:`distsketch.cluster.directives`); ``python`` must name an existing Python
interpreter; no value but the prologue may hold a line break or another control
character (:data:`CONTROL`), and every pattern is matched whole (``fullmatch``).
The one field that *is* code is a batch spec's ``job_script_prologue`` (shell
lines run before the worker starts), which is where anything else a site needs
goes.  ``docs/security.md`` lists every field.

Over 500 lines because every field of every cluster kind is checked in one place, so
that no value reaches a script or a command line unread.
"""

from __future__ import annotations

import math
import os
import re
import stat
from typing import Any

from distsketch.cluster.directives import RESOURCE_CODE, directive_problem
from distsketch.errors import ConfigError

__all__ = ["CONTROL", "ENV_ALLOWED", "ENV_ALLOWED_PREFIXES", "MAX_COUNT", "MAX_INT", "SHEBANG",
           "WORKER_COMMAND", "WORKER_FLAGS", "check_adapt", "check_cuda", "check_env",
           "check_job_values", "check_kubernetes", "check_local", "check_numbers",
           "check_python", "check_scheduler", "check_ssh", "check_timeout", "check_worker_args",
           "count", "size"]

#: the module every batch job runs (``python -m WORKER_COMMAND``), chosen by distsketch
WORKER_COMMAND = "distributed.cli.dask_worker"
#: the first line of every job script, chosen by distsketch
SHEBANG = "#!/usr/bin/env bash"
_CODE_FIELD = ("code that the workers must run goes in job_script_prologue, the one field of a "
               "batch spec that is shell code, or for ssh and kubernetes in the hosts' "
               "environment or the image (docs/security.md)")

# Values written into a job script or a command line: no shell metacharacters, no line
# breaks.  Every pattern is matched with fullmatch and is ASCII-only (re.ASCII: `\d` is
# 0-9, `[a-z]` under IGNORECASE no "ſ"); a space is written as a literal optional " ",
# never `\s`, which also matches a line break.
# no value may start with "-", where a command line would read it as a flag
_A = re.ASCII
_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*", _A)
_QUEUE = re.compile(r"[A-Za-z0-9_.@,][A-Za-z0-9_.@,-]*", _A)  # partition lists, queue@server
_WALLTIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}", _A)       # HH:MM:SS, MM:SS, D-HH:MM:SS
_MEMORY = re.compile(r"\d+(\.\d+)? ?([KMGTPE]i?)?B?", re.IGNORECASE | _A)  # parsed by Dask
_MEMORY_WORD = re.compile(r"\d+(\.\d+)?([KMGTPE]i?)?B?", re.IGNORECASE | _A)  # written as is
_PATH = re.compile(r"[A-Za-z0-9_./~+@%:,=][A-Za-z0-9_./~+@%:,=-]*", _A)
# the folder of the job's output files, written into -o / -e directives: no "~" in front
# (neither the batch system nor os.makedirs expands it, so a folder named "~" would be
# made in the working directory) and no ":" (PBS and SGE read host:path and copy the
# output to that host)
_LOG_DIR = re.compile(r"[A-Za-z0-9_./+@%,=][A-Za-z0-9_./~+@%,=-]*", _A)
_RESOURCES = re.compile(r"[A-Za-z0-9_.=:,+@][A-Za-z0-9_.=:,+@-]*", _A)  # select=1:ncpus=8
_DURATION = re.compile(r"\d+(\.\d+)? ?[a-z]*", re.IGNORECASE | _A)  # 60, 1h, 5 m (or 4GB)
_DURATION_WORD = re.compile(r"\d+(\.\d+)?[a-z]*", re.IGNORECASE | _A)  # written unquoted
_ADDRESS = re.compile(r"([a-z]+://)?[A-Za-z0-9_.:\[\]-]*", _A)
_PORTS = re.compile(r"\d+(:\d+)?", _A)
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", _A)
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?", _A)
_SCHEDULER = re.compile(r"[a-z0-9+]+://[A-Za-z0-9_.:\[\]%-]+", _A)
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*", _A)
_HOST = re.compile(r"[A-Za-z0-9_.:\[\]%][A-Za-z0-9_.:\[\]%-]*", _A)
#: characters no value outside the prologue may hold: C0 controls (line feed, carriage
#: return, NUL, ...), DEL and the Unicode line separators
CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
_LETTERS = "letters, digits, '_', '.', '-'"
_JOB_VALUES = {"name": (_NAME, _LETTERS), "job_name": (_NAME, _LETTERS),
               "queue": (_QUEUE, "letters, digits, '_', '.', '-', '@', ','"),
               "account": (_QUEUE, "letters, digits, '_', '.', '-', '@', ','"),
               "project": (_QUEUE, "letters, digits, '_', '.', '-', '@', ','"),
               "interface": (_NAME, _LETTERS), "protocol": (_NAME, "a protocol such as tcp"),
               "lsf_units": (re.compile(r"[KMGTPEZ]B?", re.IGNORECASE | _A),
                             "a unit KB, MB, GB, TB, PB, EB or ZB"),
               "walltime": (_WALLTIME, "HH:MM:SS (or D-HH:MM:SS)"),
               "job_mem": (_MEMORY_WORD, "a SLURM size such as 32G (no space)"),
               "resource_spec": (_RESOURCES, "resources such as select=1:ncpus=8:mem=32GB"),
               "local_directory": (_PATH, "a path without spaces or shell characters"),
               "log_directory": (_LOG_DIR, "a path without spaces, shell characters, ':' or "
                                           "a leading '~' (write the home folder out)"),
               "shared_temp_directory": (_PATH, "a path without spaces or shell characters")}
_COUNTS = ("n_workers", "cores", "processes", "job_cpu", "ncpus")
# options dask-jobqueue takes as lists of strings
_LISTS = ("job_extra_directives", "worker_extra_args", "job_directives_skip",
          "job_script_prologue")
_SIZES = ("memory",)
_BYTES = ("mem",)  # LSF: an int number of bytes
# a size given as a bare number is bytes; below this it is surely a unit left out
_MIN_BYTES = 2**20
#: the largest count (workers, jobs, cores, threads, processes) a spec may ask for: more is
#: no deployment, and a loop that far (SpecCluster.scale, SSHCluster's workers) never ends
MAX_COUNT = 100_000
#: the largest whole number (and size in bytes) anywhere in a spec: what a C long holds.
#: A bigger one cannot be formatted by Python past 4300 digits, nor parsed by a batch system
MAX_INT = 2**63 - 1

# `dask worker` flags a spec may pass: flag -> (value pattern, what) or None for a switch.
# Everything else (--preload*, --scheduler-file, --worker-class, --pid-file, --tls-*,
# positional arguments) is refused.
WORKER_FLAGS: dict[str, tuple[re.Pattern[str], str] | None] = {
    "--nthreads": (re.compile(r"\d+", _A), "a whole number"),
    "--nworkers": (re.compile(r"\d+|auto", _A), "a whole number or auto"),
    "--name": (_NAME, _LETTERS),
    "--memory-limit": (re.compile(r"auto|" + _MEMORY.pattern, re.IGNORECASE | _A),
                       "a size or auto"),
    "--local-directory": (_PATH, "a path without spaces or shell characters"),
    "--resources": (re.compile(r"[A-Za-z0-9_.=,+]+", _A), "NAME=amount items such as GPU=2"),
    "--lifetime": (_DURATION, "a duration such as 1h"),
    "--lifetime-stagger": (_DURATION, "a duration such as 5m"),
    "--death-timeout": (_DURATION, "a duration such as 60s"),
    "--interface": (_NAME, _LETTERS), "--protocol": (_NAME, "a protocol such as tcp"),
    "--host": (_ADDRESS, "a host name or address"),
    # no --contact-address: it makes the scheduler, the other workers and the client fetch
    # this worker's results (unpickled) from whatever address it names
    "--listen-address": (_ADDRESS, "an address"),
    "--dashboard-address": (_ADDRESS, "an address such as :8787"),
    "--dashboard-prefix": (re.compile(r"/?[A-Za-z0-9_./-]*", _A), "a URL path"),
    "--worker-port": (_PORTS, "a port or a range such as 9000:9100"),
    "--nanny-port": (_PORTS, "a port or a range such as 9000:9100"),
    **dict.fromkeys(["--dashboard", "--no-dashboard", "--nanny", "--no-nanny",
                     "--lifetime-restart", "--no-lifetime-restart"]),
}

# The environment variables a spec may give the workers: an allow-list of what a worker
# plausibly needs.  Anything else can make the shell, the dynamic loader, Python, Dask or a
# library load code under some name (LD_PRELOAD, PYTHONPATH, LOKY_PICKLER, OMP_TOOL_LIBRARIES,
# AWS_SHARED_CREDENTIALS_FILE's credential_process, ZARR_*, NCCL_NET_PLUGIN, ...): it goes
# in job_script_prologue, in plain sight.
ENV_ALLOWED = frozenset({
    # threads of BLAS, OpenMP and numerical libraries
    "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_DYNAMIC", "OMP_WAIT_POLICY",
    "OMP_STACKSIZE", "OMP_THREAD_LIMIT", "OMP_MAX_ACTIVE_LEVELS", "OMP_DISPLAY_ENV",
    "MKL_NUM_THREADS", "MKL_DYNAMIC", "MKL_CBWR", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS",
    "GOTO_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS",
    "NUMBA_NUM_THREADS", "BLOSC_NTHREADS", "KMP_AFFINITY", "KMP_BLOCKTIME",
    "GOMP_CPU_AFFINITY", "GOMP_SPINCOUNT",
    # glibc's allocator (Dask recommends MALLOC_TRIM_THRESHOLD_)
    "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
    "MALLOC_ARENA_MAX",
    # temporary files, locale, time zone
    "TMPDIR", "TMP", "TEMP", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC",
    "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES", "TZ",
    # GPUs
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING",
    "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "NCCL_DEBUG", "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE",
    # object-store credentials, region and endpoint (s3fs / botocore), no file names
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
    "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
    # Python switches that load nothing
    "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONFAULTHANDLER",
    "PYTHONIOENCODING",
    # Dask settings with scalar values
    "DASK_TEMPORARY_DIRECTORY", "DASK_DISTRIBUTED__WORKER__DAEMON",
    "DASK_DISTRIBUTED__COMM__COMPRESSION",
})
ENV_ALLOWED_PREFIXES = ("DASK_DISTRIBUTED__WORKER__MEMORY__", "DASK_DISTRIBUTED__COMM__TIMEOUTS__",
                        "DASK_DISTRIBUTED__COMM__RETRY__",
                        "DASK_DISTRIBUTED__WORKER__CONNECTIONS__",
                        "DASK_DISTRIBUTED__WORKER__PROFILE__")
# values read as a name that could also be a path: a locale name (glibc loads a locale
# from an absolute path), a codec name
_LOCALE = re.compile(r"[A-Za-z0-9_.@:+-]*", _A)
_ENV_VALUES = {**dict.fromkeys(["LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME",
                                "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES"],
                               (_LOCALE, "a locale name such as en_US.UTF-8 (no '/')")),
               "PYTHONIOENCODING": (re.compile(r"[A-Za-z0-9_-]*(:[A-Za-z]+)?", _A),
                                    "an encoding such as utf-8 or utf-8:replace")}

# keys of `extra` a batch spec may pass to dask-jobqueue, besides its own options
_BATCH_EXTRA_ONLY = {"death_timeout", "nanny", "protocol", "job_name", "job_directives_skip",
                     "silence_logs", "shared_temp_directory"}
_BATCH_NOT_IN_EXTRA = {"python", "job_script_prologue", "env", "adapt", "extra", "timeout",
                       "n_workers", "storage_options"}
_EXTRA_WHY = {
    "worker_command": "distsketch chooses the worker command (python -m "
                      f"{WORKER_COMMAND})",
    "shebang": f"distsketch writes the job script's first line ({SHEBANG})",
    "python": "the interpreter is the top-level python: field (an existing Python, checked)",
    "job_script_prologue": "shell code goes in the top-level job_script_prologue",
    "env_extra": "shell code goes in the top-level job_script_prologue",
    "extra": "worker arguments go in worker_extra_args",
    "job_extra": "directives go in job_extra_directives",
    "header_skip": "use job_directives_skip",
    "config_name": "the site's section jobqueue.<kind> is the one used",
}
_KUBERNETES_EXTRA = {"idle_timeout": int, "resource_timeout": int, "shutdown_on_close": bool,
                     "port_forward_cluster_ip": bool, "scheduler_forward_port": int,
                     "scheduler_service_type": str, "quiet": bool}
# adapt keys -> what each holds: a count of workers or jobs, a size, a duration, a count of
# intervals; the Kubernetes operator's adapt() takes only minimum and maximum
_ADAPT_KEYS = {"minimum": "count", "maximum": "count", "minimum_jobs": "count",
               "maximum_jobs": "count", "minimum_memory": "size", "maximum_memory": "size",
               "interval": "duration", "target_duration": "duration", "wait_count": "positive"}
_KUBERNETES_ADAPT = {"minimum", "maximum"}
# distributed.SSHCluster: options forwarded to asyncssh, the workers and the scheduler
_SSH_CONNECT = {"known_hosts", "username", "port", "client_keys", "connect_timeout",
                "login_timeout", "keepalive_interval"}
_SSH_WORKER = {"nthreads", "n_workers", "memory_limit", "local_directory", "resources",
               "lifetime", "lifetime_stagger", "lifetime_restart", "death_timeout", "dashboard",
               "dashboard_address", "interface", "protocol"}
_SSH_SCHEDULER = {"port", "dashboard_address", "dashboard", "interface", "protocol", "host",
                  "idle_timeout"}
_SSH_VALUE = re.compile(r"[A-Za-z0-9_.:/@%+,=~-]*", _A)  # written into a remote command line


def refuse(where: str, key: str, value: Any, what: str,
           place: str = "a batch job script") -> ConfigError:
    """The error for a value that may not reach ``place``."""
    return ConfigError(f"{where}: {key} = {value!r} is not accepted in {place}; it must be "
                       f"{what} (shell characters such as ';', '$(', backticks and newlines are "
                       "refused).")


def _code(where: str, key: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"{where}: {key} = {value!r} is refused: {why}; a cluster spec starts "
                       f"workers and nothing else ({_CODE_FIELD}).")


def count(value: Any, least: int = 1, most: int = MAX_COUNT) -> int | None:
    """``4`` or ``4.0`` -> 4; anything else (a fraction, a bool, a string, out of
    ``[least, most]``) -> None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():  # nan and inf included
        return None
    return int(value) if least <= value <= most else None


def _size_bytes(text: str) -> int | None:
    """The bytes of a size written as text (``"32GB"``), or None when Dask cannot parse it
    or it is beyond :data:`MAX_INT` (``"1e400GB"`` would overflow every reader)."""
    from dask.utils import parse_bytes

    if not _MEMORY.fullmatch(text):
        return None
    try:
        n = parse_bytes(text)
    except (ValueError, OverflowError):
        return None
    return n if 0 <= n <= MAX_INT else None


def size(value: Any) -> str | None:
    """A size as dask-jobqueue takes it: ``"32GB"`` unchanged, a number of bytes as ``"<n>B"``."""
    if isinstance(value, str):
        return value if _size_bytes(value) is not None else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not _MIN_BYTES <= value <= MAX_INT:
        return None
    return f"{int(value)}B"


def check_numbers(value: Any, where: str, key: str = "", depth: int = 0) -> None:
    """Refuse a whole number beyond :data:`MAX_INT` anywhere in a spec.

    YAML reads ``0x`` + a thousand digits, or sexagesimal ``1:2:3:...``, into an int of
    any size; Python then refuses to format it past 4300 digits (``ValueError``) and no
    batch system or library parses one beyond a C long.  The message names the field
    and never formats the number.

    Raises
    ------
    ConfigError
        Naming the field and the number's size in bits.
    """
    if depth > 100:
        raise ConfigError(f"{where}: {key or 'the spec'} is nested more than 100 levels deep.")
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT.bit_length():
            raise ConfigError(f"{where}: {key or 'a key'} is a whole number of "
                              f"{value.bit_length()} bits; numbers in a cluster spec must be "
                              f"at most {MAX_INT} (write a size with a unit, such as 32GB).")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_numbers(k, where, f"{key}.<key>" if key else "a key", depth + 1)
            name = f"{key}.{k}" if key else str(k) if isinstance(k, str) else "a key"
            check_numbers(v, where, name, depth + 1)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            check_numbers(v, where, key, depth + 1)


def check_timeout(value: Any, where: str, key: str = "timeout") -> None:
    """A number of seconds to wait: positive and finite (nan, inf and negative numbers
    crash or hang ``Client``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or not 0 < value <= MAX_INT:
        raise ConfigError(f"{where}: {key} = {value!r} must be a positive, finite number of "
                          "seconds, such as 60.")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def check_worker_args(args: Any, where: str, key: str = "worker_extra_args") -> None:
    """Refuse any ``dask worker`` argument that is not an allowed flag with a plain value.

    Parameters
    ----------
    args : list of str
        The arguments, as written in the spec (``--flag value`` or ``--flag=value``).
    where, key : str
        Used in error messages.

    Raises
    ------
    ConfigError
        A flag outside :data:`WORKER_FLAGS` (``--preload`` and every other code
        loader among them), a positional argument, or a value that is not plain.
    """
    items = _as_list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if not isinstance(arg, str):
            raise refuse(where, key, arg, "strings")
        flag, eq, value = arg.partition("=")
        if flag not in WORKER_FLAGS:
            if "preload" in flag or "class" in flag:
                raise _code(where, key, arg, "it loads code into every worker")
            raise ConfigError(f"{where}: {key}: {arg!r} is not accepted: the worker arguments a "
                              f"spec may pass are {', '.join(sorted(WORKER_FLAGS))} with plain "
                              f"values (anything else, such as --scheduler-file or a positional "
                              f"argument, is refused; {_CODE_FIELD}).")
        spec = WORKER_FLAGS[flag]
        if spec is None:
            if eq:
                raise refuse(where, key, arg, f"the switch {flag} without a value")
            i += 1
            continue
        if not eq:
            if i + 1 >= len(items):
                raise refuse(where, key, arg, f"followed by a value ({spec[1]})")
            value, i = items[i + 1], i + 1
        if not isinstance(value, str) or value.startswith("-") or not spec[0].fullmatch(value):
            raise refuse(where, key, value, f"the value of {flag}: {spec[1]}")
        i += 1


def check_env(env: Any, where: str) -> None:
    """Accept only the environment variables of :data:`ENV_ALLOWED`, with one-line values.

    Raises
    ------
    ConfigError
        Not a mapping; a name that is not an identifier, or that is neither in
        :data:`ENV_ALLOWED` (exactly, case included) nor under one of
        :data:`ENV_ALLOWED_PREFIXES` (``LD_PRELOAD``, ``PYTHONPATH``,
        ``LOKY_PICKLER``, ``AWS_SHARED_CREDENTIALS_FILE`` and every other name);
        a value that is not a string or number, that holds a line break, NUL or
        other control character, a locale or codec name with a ``/``, or a
        ``DASK_*`` value that Dask would read as a mapping or list.  The message
        names the variable and says to set it in ``job_script_prologue``.
    """
    if not isinstance(env, dict):
        raise ConfigError(f"{where}: env must be a mapping NAME: value.")
    for k, v in env.items():
        if not isinstance(k, str) or not _ENV_KEY.fullmatch(k):
            raise refuse(where, "env key", k, "an identifier (letters, digits, '_')",
                         "the workers' environment")
        if k not in ENV_ALLOWED and not k.startswith(ENV_ALLOWED_PREFIXES):
            raise _code(where, f"env {k}", v,
                        f"{k} is not among the variables a spec may give the workers (thread "
                        "counts, locale, temporary directories, GPUs, S3 credentials and "
                        "endpoint, a few PYTHON* switches and scalar DASK_* memory and comm "
                        "settings: docs/security.md lists them); other names can make the "
                        "shell, the dynamic loader, Python or a library load code. If the site "
                        f"really needs it, export {k} in job_script_prologue")
        if not isinstance(v, (str, int, float)) or isinstance(v, bool) or CONTROL.search(str(v)):
            raise refuse(where, f"env {k}", v, "a string or number on one line",
                         "the workers' environment")
        if k in _ENV_VALUES and not _ENV_VALUES[k][0].fullmatch(str(v)):
            raise refuse(where, f"env {k}", v, _ENV_VALUES[k][1], "the workers' environment")
        if k.startswith("DASK_") and str(v).lstrip()[:1] in ("{", "["):
            raise _code(where, f"env {k}", v, "Dask reads it as a mapping or list of settings")


def check_python(value: Any, where: str, key: str = "python", local: bool = True,
                 place: str = "the worker command of a batch job script") -> str:
    """Check that ``value`` names a Python interpreter that distsketch may run workers with.

    Parameters
    ----------
    value : Any
        The path from the spec.
    where, key : str
        Used in error messages.
    local : bool, default True
        The interpreter is on this machine (a batch spec: the compute nodes see
        the same file system): it must exist, be executable and be writable by
        nobody but its owner and group.  False for ``ssh``'s ``remote_python``.
    place : str
        Where the value goes, for error messages.

    Returns
    -------
    str
        ``value``.

    Raises
    ------
    ConfigError
        Not an absolute, normalised path; not named ``python``, ``python3`` or
        ``python3.X`` (also after resolving links); missing, not executable or
        in a place other users may write to.
    """
    what = "an absolute path to a Python interpreter named python, python3 or python3.X"
    if not isinstance(value, str) or not _PATH.fullmatch(value) or not value.startswith("/") \
            or os.path.normpath(value) != value:
        raise refuse(where, key, value, what, place)
    if not _PYTHON_NAME.fullmatch(os.path.basename(value)):
        raise _code(where, key, value, f"it must be {what}")
    if not local:
        return value
    real = os.path.realpath(value)
    if not os.path.isfile(real):
        raise ConfigError(f"{where}: {key} = {value!r} does not exist on this machine; give the "
                          "interpreter of the environment distsketch is installed in (the compute "
                          "nodes must see the same path).")
    if not _PYTHON_NAME.fullmatch(os.path.basename(real)) or not os.access(real, os.X_OK):
        raise _code(where, key, value, f"it resolves to {real!r}, which is not {what} that "
                                       "can be run")
    for path in (real, value):
        why = _replaceable(path)
        if why:
            raise _code(where, key, value, why)
    return value


def _replaceable(path: str) -> str | None:
    """Why another user could replace ``path`` (absolute), or None when nobody but its
    owners can.

    Every folder from ``/`` down and the file itself are looked at: one writable by
    other users lets them rename what it holds, unless it is sticky (``/tmp``), where
    only an entry's owner may; so an entry of a sticky, world-writable folder must
    itself belong to root or to this user (an interpreter planted as
    ``/tmp/x/bin/python3`` by someone else is theirs to change).
    """
    trusted = {0, getattr(os, "getuid", lambda: 0)()}
    parts = path.split("/")[1:]
    current, parent_shared = "/", False
    for i, part in enumerate(["", *parts]):
        current = os.path.join(current, part) if part else current
        info = os.lstat(current) if i < len(parts) else os.stat(current)
        if parent_shared and info.st_uid not in trusted:
            return (f"{current} belongs to another user (uid {info.st_uid}) in the folder "
                    f"{os.path.dirname(current)}, which every user may write to; that user "
                    "could replace the interpreter")
        writable = info.st_mode & stat.S_IWOTH and not stat.S_ISLNK(info.st_mode)
        sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
        if writable and not sticky:
            return f"{current} is writable by other users, who could replace the interpreter"
        parent_shared = bool(writable and sticky)
    return None


def _seconds(value: Any) -> float | None:
    """A duration (``60``, ``"1s"``, ``"5 m"``) in seconds, or None when it is none."""
    from dask.utils import parse_timedelta

    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, str) and not _DURATION.fullmatch(value):
        return None
    try:
        seconds = float(parse_timedelta(value, default="seconds"))
    except (KeyError, ValueError, OverflowError, TypeError):
        return None
    return seconds if math.isfinite(seconds) else None


def check_adapt(adapt: Any, where: str, keys: Any = None) -> None:
    """``adapt:`` is ``cluster.adapt(**adapt)``: known bounds, each of its own kind.

    Parameters
    ----------
    adapt : dict
        The spec's ``adapt`` mapping.
    where : str
        Used in error messages.
    keys : collection of str, optional
        The keys the cluster's ``adapt`` takes (all of :data:`_ADAPT_KEYS` by default).

    Raises
    ------
    ConfigError
        An unknown key; a count (``minimum``, ``maximum``, ``*_jobs``) that is not a whole
        number from 0 to :data:`MAX_COUNT`; a size that Dask cannot parse; an ``interval``
        or ``target_duration`` that is not a positive, finite duration; a ``wait_count``
        below 1; or a minimum above its maximum.  Each of these made ``adapt`` raise, or
        loop without pause, once the cluster had started.
    """
    if not isinstance(adapt, dict):
        raise ConfigError(f"{where}: adapt must be a mapping such as {{minimum: 1, maximum: 8}}.")
    keys = set(_ADAPT_KEYS if keys is None else keys)
    place = "the cluster's adaptive settings"
    for k, v in adapt.items():
        if k not in keys:
            raise ConfigError(f"{where}: adapt.{k} is not accepted; use {sorted(keys)}.")
        how = _ADAPT_KEYS[k]
        if how == "count" and count(v, least=0) is None:
            raise refuse(where, f"adapt.{k}", v, f"a whole number from 0 to {MAX_COUNT}", place)
        if how == "positive" and count(v) is None:
            raise refuse(where, f"adapt.{k}", v, f"a whole number from 1 to {MAX_COUNT}", place)
        if how == "size" and size(v) is None:
            raise refuse(where, f"adapt.{k}", v, "a size such as 64GB, or a number of bytes",
                         place)
        if how == "duration" and not (_seconds(v) or 0) > 0:
            raise refuse(where, f"adapt.{k}", v, "a positive duration such as 1s or 5 m", place)
    for low, high in (("minimum", "maximum"), ("minimum_jobs", "maximum_jobs")):
        if low in adapt and high in adapt and adapt[low] > adapt[high]:
            raise ConfigError(f"{where}: adapt.{low} = {adapt[low]!r} is above adapt.{high} = "
                              f"{adapt[high]!r}; give a minimum no larger than the maximum.")


def _check_directives(kind: str, value: Any, where: str, key: str) -> None:
    """Every directive line: allowed options only, read as the batch system reads them."""
    for v in _as_list(value):
        if not isinstance(v, str) or CONTROL.search(v):
            raise refuse(where, key, v, "one directive on one line")
        problem = directive_problem(kind, v)
        if problem:
            raise _code(where, key, v, f"{problem}. A spec may add only the directives "
                                       f"docs/security.md lists for {kind} (the job's "
                                       "environment, shell, working directory, files and "
                                       "pre/post commands are distsketch's to choose)")


def check_job_values(cfg: dict[str, Any], where: str, options: set[str]) -> None:
    """Refuse batch-job values that the batch system would not accept or the shell would run.

    Parameters
    ----------
    cfg : dict
        A ``slurm``, ``pbs``, ``sge`` or ``lsf`` spec.
    where : str
        Used in error messages.
    options : set of str
        The top-level options of the kind; ``extra`` may hold these (except the
        ones that are not dask-jobqueue keywords) and a few harmless others.
    """
    kind = cfg["kind"]
    extra = cfg.get("extra") or {}
    if not isinstance(extra, dict):
        raise ConfigError(f"{where}: extra must be a mapping.")
    allowed = (options - _BATCH_NOT_IN_EXTRA) | _BATCH_EXTRA_ONLY
    for key in extra:
        if key not in allowed:
            why = _EXTRA_WHY.get(key) or (f"the keys extra may hold for kind {kind!r} are "
                                          f"{', '.join(sorted(allowed))}")
            raise ConfigError(f"{where}: extra.{key} is not accepted: {why}; a cluster spec starts "
                              f"workers and nothing else ({_CODE_FIELD}).")
    values = [(k, v) for k, v in cfg.items() if k not in ("extra", "kind")] + list(extra.items())
    for key, value in values:
        if key in _LISTS and not isinstance(value, list):
            # dask-jobqueue would iterate a string character by character
            raise refuse(where, key, value, "a list of strings")
        if key in _JOB_VALUES:
            rx, what = _JOB_VALUES[key]
            if not isinstance(value, str) or not rx.fullmatch(value):
                raise refuse(where, key, value, what)
            if key == "resource_spec" and RESOURCE_CODE.search(value):
                raise _code(where, key, value, "a resource that names a script to run")
        elif key in _COUNTS:
            if count(value) is None:
                raise refuse(where, key, value, f"a whole number from 1 to {MAX_COUNT} "
                                                "(4 or 4.0)")
        elif key in _BYTES:
            if count(value, least=_MIN_BYTES, most=MAX_INT) is None:
                raise refuse(where, key, value, f"a number of bytes (at least {_MIN_BYTES})")
        elif key in _SIZES:
            if size(value) is None:
                raise refuse(where, key, value, "a size such as 32GB, or a number of bytes "
                                                f"(at least {_MIN_BYTES})")
        elif key == "job_extra_directives":
            _check_directives(kind, value, where, key)
        elif key == "job_directives_skip":
            for v in value:
                if not isinstance(v, str) or CONTROL.search(v):
                    raise refuse(where, key, v, "text on one line")
        elif key == "worker_extra_args":
            check_worker_args(value, where)
        elif key == "python":
            check_python(value, where)
        elif key == "env":
            check_env(value, where)
        elif key == "adapt":
            check_adapt(value, where)
        elif key == "timeout":
            check_timeout(value, where)
        elif key == "death_timeout":
            # written unquoted after --death-timeout: one word
            if isinstance(value, bool) or not (
                    (isinstance(value, (int, float)) and math.isfinite(value)) or
                    (isinstance(value, str) and _DURATION_WORD.fullmatch(value))):
                raise refuse(where, key, value, "a number of seconds or a duration such as 60s "
                                                "(no space)")
        elif key in ("nanny", "use_stdin"):
            if not isinstance(value, bool):
                raise refuse(where, key, value, "true or false")
        elif key == "silence_logs":
            if not isinstance(value, (str, int, bool)) or not _NAME.fullmatch(str(value)):
                raise refuse(where, key, value, "a log level such as error")
        elif key == "job_script_prologue":
            # shell code on purpose (the documented opt-in): only its shape is checked
            if not all(isinstance(line, str) for line in _as_list(value)):
                raise ConfigError(f"{where}: job_script_prologue must be a list of shell lines.")
        elif key != "storage_options":
            raise ConfigError(f"{where}: {key} has no check; it is not accepted.")


def _plain(value: Any, where: str, key: str, place: str) -> None:
    """A scalar, list or mapping of scalars whose strings can be written into a command line."""
    if isinstance(value, dict):
        for k, v in value.items():
            _plain(k, where, key, place)
            _plain(v, where, f"{key}.{k}", place)
    elif isinstance(value, list):
        for v in value:
            _plain(v, where, key, place)
    elif isinstance(value, str):
        if not _SSH_VALUE.fullmatch(value):
            raise refuse(where, key, value, "letters, digits and '_.:/@%+,=~-'", place)
    elif value is not None and not isinstance(value, (int, float, bool)):
        raise refuse(where, key, value, "a string, number, bool or null", place)


def _allowed_keys(section: Any, allowed: set[str], where: str, key: str) -> None:
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: {key} must be a mapping.")
    for k in section:
        if k not in allowed:
            raise ConfigError(f"{where}: {key}.{k} is not accepted: the keys {key} may hold are "
                              f"{', '.join(sorted(allowed))} (preload, plugins, worker classes, "
                              "environments and proxy commands load or run code).")


def check_ssh(cfg: dict[str, Any], where: str) -> None:
    """``ssh``: host names, allow-listed asyncssh/worker/scheduler options, the remote Python."""
    place = "the remote worker command"
    for host in _as_list(cfg.get("hosts", [])):
        if not isinstance(host, str) or not _HOST.fullmatch(host):
            raise refuse(where, "hosts", host, "host names or addresses", place)
    for key, allowed in (("connect_options", _SSH_CONNECT), ("worker_options", _SSH_WORKER),
                         ("scheduler_options", _SSH_SCHEDULER)):
        if key in cfg:
            _allowed_keys(cfg[key], allowed, where, key)
            _plain(cfg[key], where, key, place)
    connect = cfg.get("connect_options") or {}
    if "known_hosts" in connect:
        # asyncssh reads None as "accept any host key": a man in the middle would then be
        # given the scheduler and every worker; the default is ~/.ssh/known_hosts
        files = connect["known_hosts"]
        if not (isinstance(files, str) and files) and not (
                isinstance(files, list) and files and
                all(isinstance(f, str) and f for f in files)):
            raise ConfigError(f"{where}: connect_options.known_hosts = {files!r} is refused: it "
                              "must name known-hosts files (a path or a list of paths); null "
                              "would turn off the check of the hosts' keys, so that a machine "
                              "in the middle could pose as them. Leave it out to use "
                              "~/.ssh/known_hosts.")
    for key in ("n_workers", "nthreads"):
        value = (cfg.get("worker_options") or {}).get(key)
        if value is not None and count(value) is None:
            raise refuse(where, f"worker_options.{key}", value,
                         f"a whole number from 1 to {MAX_COUNT}", place)
    if cfg.get("extra"):
        raise ConfigError(f"{where}: extra.{next(iter(cfg['extra']))} is not accepted: kind 'ssh' "
                          "takes no extra options (SSHCluster's worker_class, worker_module and "
                          "config choose what runs).")
    if "remote_python" in cfg:
        check_python(cfg["remote_python"], where, "remote_python", local=False, place=place)


def check_kubernetes(cfg: dict[str, Any], where: str) -> None:
    """``kubernetes``: names, image, resources, env and allow-listed operator options."""
    place = "the Kubernetes resources"
    for key in ("name", "namespace"):
        if key in cfg and not (isinstance(cfg[key], str) and _NAME.fullmatch(cfg[key])):
            raise refuse(where, key, cfg[key], _LETTERS, place)
    if "image" in cfg and not (isinstance(cfg["image"], str) and _IMAGE.fullmatch(cfg["image"])):
        raise refuse(where, "image", cfg["image"], "an image reference such as "
                                                    "ghcr.io/org/name:tag", place)
    if "n_workers" in cfg and count(cfg["n_workers"]) is None:
        raise refuse(where, "n_workers", cfg["n_workers"], "a positive whole number", place)
    if "resources" in cfg:
        _allowed_keys(cfg["resources"], {"requests", "limits"}, where, "resources")
        for part, amounts in cfg["resources"].items():
            if not isinstance(amounts, dict):
                raise ConfigError(f"{where}: resources.{part} must be a mapping such as "
                                  "{cpu: '1', memory: 4Gi}.")
            _plain(amounts, where, f"resources.{part}", place)
    if "env" in cfg:
        check_env(cfg["env"], where)
    if "adapt" in cfg:
        check_adapt(cfg["adapt"], where, _KUBERNETES_ADAPT)
    extra = cfg.get("extra") or {}
    _allowed_keys(extra, set(_KUBERNETES_EXTRA), where, "extra")
    for k, v in extra.items():
        kind = _KUBERNETES_EXTRA[k]
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)) or \
                (isinstance(v, str) and not _NAME.fullmatch(v)):
            raise refuse(where, f"extra.{k}", v, f"a {kind.__name__}", place)
    service = extra.get("scheduler_service_type", "ClusterIP")
    if service != "ClusterIP":
        # NodePort and LoadBalancer put the scheduler, which runs whatever it is sent, on
        # the nodes' or a public address; the client reaches ClusterIP by a port-forward
        raise ConfigError(f"{where}: extra.scheduler_service_type = {service!r} is refused: "
                          "it would expose the Dask scheduler, which takes tasks from anyone "
                          "who reaches it, outside the Kubernetes cluster; only ClusterIP is "
                          "accepted in a spec (a site that needs another sets "
                          "kubernetes.scheduler-service-type in its Dask configuration).")


def check_local(cfg: dict[str, Any], where: str) -> None:
    """``local``: the memory limit and the dashboard address are plain values."""
    limit = cfg.get("memory_limit")
    if isinstance(limit, str) and not (limit == "auto" or _size_bytes(limit) is not None):
        raise refuse(where, "memory_limit", limit, "auto or a size such as 4GB", "a LocalCluster")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and \
            not (math.isfinite(limit) and 0 <= limit <= MAX_INT):
        raise refuse(where, "memory_limit", limit, "a finite number of bytes (or a fraction "
                                                   "of the memory, or 0 for none)",
                     "a LocalCluster")
    address = cfg.get("dashboard_address")
    if isinstance(address, str) and not _ADDRESS.fullmatch(address):
        raise refuse(where, "dashboard_address", address, "an address such as :8787",
                      "a LocalCluster")


_GPU_ID = re.compile(r"(\d+|(GPU|MIG)-[A-Za-z0-9/-]+)", _A)  # an index, a GPU or MIG UUID


def check_cuda(cfg: dict[str, Any], where: str) -> None:
    """``cuda``: the local kind's values, device memory sizes and the GPUs to use."""
    check_local(cfg, where)
    for key in ("device_memory_limit", "rmm_pool_size"):
        value = cfg.get(key)
        if isinstance(value, str) and not (value == "auto" or _size_bytes(value) is not None):
            raise refuse(where, key, value, "a size such as 40GB (or auto)", "a LocalCUDACluster")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                not (math.isfinite(value) and 0 <= value <= MAX_INT):
            raise refuse(where, key, value, "a finite number of bytes", "a LocalCUDACluster")
    gpus = cfg.get("cuda_visible_devices")
    ids = gpus.split(",") if isinstance(gpus, str) else gpus
    # strip() drops spaces around an id, and would drop a line break too: refuse those first
    if ids is not None and not (ids and all(not CONTROL.search(str(i)) and
                                            _GPU_ID.fullmatch(str(i).strip()) for i in ids)):
        raise refuse(where, "cuda_visible_devices", gpus,
                     "GPU indices or UUIDs, e.g. '0,1' or [0, 1]", "a LocalCUDACluster")


def check_scheduler(cfg: dict[str, Any], where: str) -> None:
    """``scheduler``: an address ``scheme://host:port`` or a scheduler file path on one line."""
    if "address" in cfg and not (isinstance(cfg["address"], str) and
                                 _SCHEDULER.fullmatch(cfg["address"])):
        raise refuse(where, "address", cfg["address"], "an address such as tcp://host:8786",
                     "a scheduler address")
    path = cfg.get("scheduler_file")
    if path is not None and (not isinstance(path, str) or not path or CONTROL.search(path)):
        raise refuse(where, "scheduler_file", path, "a path on one line", "a scheduler file")
