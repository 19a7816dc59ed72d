"""The memory this process may really use: host total, cgroup limits, rlimits.

``distributed.system.MEMORY_LIMIT`` reads the cgroup files at the root of
``/sys/fs/cgroup`` only.  A process placed in a nested cgroup — a SLURM job
step, ``systemd-run --scope -p MemoryMax=…``, a container runtime that does
not mount its own cgroup namespace — has its limit further down the tree, at
the path ``/proc/self/cgroup`` names, or on any ancestor of it.  This module
walks that path up to the root (cgroup v2 and v1) and takes the smallest
limit found, besides the host's total and the address-space and RSS
rlimits.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["cgroup_memory_limit", "host_memory_limit"]

# cgroup v1 writes "no limit" as a huge page-aligned number near 2**63
_UNLIMITED = 2**62
_V2_FILES = ("memory.max", "memory.high")
_V1_FILES = ("memory.limit_in_bytes", "memory.soft_limit_in_bytes")


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < _UNLIMITED else None


def _walk_up(base: Path, rel: str, files: tuple[str, ...]) -> list[int]:
    # the cgroup of the process and every ancestor up to the mount root
    parts = [p for p in rel.strip().split("/") if p and p not in (".", "..")]
    found = []
    for depth in range(len(parts), -1, -1):
        folder = base.joinpath(*parts[:depth])
        for name in files:
            limit = _read_limit(folder / name)
            if limit is not None:
                found.append(limit)
    return found


def cgroup_memory_limit(proc_cgroup: str | None = None,
                        root: str | os.PathLike = "/sys/fs/cgroup") -> int | None:
    """The smallest memory limit on this process's cgroup path, or None.

    Parameters
    ----------
    proc_cgroup : str, optional
        The text of ``/proc/self/cgroup`` (read when None).
    root : path-like
        Where the cgroup file systems are mounted.

    Returns
    -------
    int or None
        Bytes; None where no cgroup sets a limit (or the files cannot be read).

    Notes
    -----
    cgroup v2 (``0::/path``) reads ``memory.max`` and ``memory.high`` under
    ``root/path`` and each of its ancestors; cgroup v1 (``N:memory:/path``)
    reads ``memory.limit_in_bytes`` and ``memory.soft_limit_in_bytes`` under
    ``root/memory/path`` and its ancestors.  A few small file reads.
    """
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    base = Path(root)
    found: list[int] = []
    for line in proc_cgroup.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, rel = fields
        if controllers == "":
            found += _walk_up(base, rel, _V2_FILES)
        elif "memory" in controllers.split(","):
            found += _walk_up(base / controllers, rel, _V1_FILES)
    return min(found) if found else None


#: the files ``distributed.system.memory_limit`` reads (a limit where one holds a positive int)
_DISTRIBUTED_FILES = (
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    "/sys/fs/cgroup/memory/memory.soft_limit_in_bytes",
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory.high",
    "/sys/fs/cgroup/memory.low",
)


def _distributed_rule() -> list[int]:
    """The limits ``distributed.system.MEMORY_LIMIT`` takes beside the host total.

    The same files and the RSS rlimit, read here: importing ``distributed``
    for its constant costs a quarter of a second in a process that uses no
    cluster (and a worker's limit comes from the scheduler, not from here).
    """
    found = []
    if sys.platform == "linux":
        for path in _DISTRIBUTED_FILES:
            try:
                with open(path) as f:
                    value = int(f.read())
            except (OSError, ValueError):
                continue
            if value > 0:
                found.append(value)
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_RSS)[1]
        if hard > 0 and hard != resource.RLIM_INFINITY:
            found.append(int(hard))
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        pass
    return found


def host_memory_limit() -> int:
    """Bytes of memory this process may use: the least of every limit that applies.

    The host's total memory, distributed's own reading (root cgroup, RSS
    rlimit; the same rule as ``distributed.system.MEMORY_LIMIT``, read without
    importing ``distributed``), the cgroup limits on this process's cgroup path
    (:func:`cgroup_memory_limit`) and the address-space rlimit
    (``ulimit -v`` / ``prlimit --as``).

    Returns
    -------
    int
    """
    import psutil

    limits = [int(psutil.virtual_memory().total), *_distributed_rule()]
    cgroup = cgroup_memory_limit()
    if cgroup is not None:
        limits.append(cgroup)
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if 0 < soft != resource.RLIM_INFINITY:
            limits.append(int(soft))
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        pass
    return min(limits)
