"""The memory this process may really use: host total, cgroup limits, rlimits.

``distributed.system.MEMORY_LIMIT`` reads the root cgroup only; a process in a
nested cgroup (a SLURM step, ``systemd-run --scope``, some containers) has its
limit further down.  This walks the path ``/proc/self/cgroup`` names up to the
root (v2 and v1) and takes the smallest limit, with the host total and rlimits.
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
    """The smallest memory limit (bytes) on this process's cgroup path, or None.

    ``proc_cgroup`` is the text of ``/proc/self/cgroup`` (read when None), ``root``
    where the cgroup file systems are mounted.  cgroup v2 (``0::/path``) reads
    ``memory.max`` and ``memory.high`` under ``root/path`` and each ancestor;
    cgroup v1 (``N:memory:/path``) the ``limit_in_bytes`` files under
    ``root/memory/path`` and its ancestors.
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
    # the limits distributed.system.MEMORY_LIMIT takes beside the host total, read here:
    # importing distributed for its constant costs a quarter of a second
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

    The host's total memory, distributed's own rule (root cgroup, RSS rlimit),
    the limits on this process's cgroup path (:func:`cgroup_memory_limit`) and
    the address-space rlimit (``ulimit -v``).
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
