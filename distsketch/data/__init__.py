"""The example cluster and workflow specs shipped with distsketch.

The same files as ``clusters/*.yaml`` and ``workflows/*.yaml`` of the source
tree, installed with the package so that an installed distsketch can hand
them out::

    from distsketch.data import copy_example_specs, example_spec, example_specs
    example_specs()                      # ['clusters/kubernetes.yaml', ..., 'workflows/skpca.yaml']
    example_spec("clusters/slurm.yaml")  # the path of the installed file
    copy_example_specs("myproject")      # myproject/clusters/*.yaml, myproject/workflows/*.yaml

A workflow spec's relative paths (``input: ../data/X.zarr``) are resolved
against its own folder, so the copies keep the ``clusters/`` and
``workflows/`` layout: put the data in ``myproject/data/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from distsketch.errors import ConfigError, StoreError

__all__ = ["copy_example_specs", "example_spec", "example_specs"]

_ROOT = Path(__file__).parent
_FOLDERS = ("clusters", "workflows")


def example_specs() -> list[str]:
    """Names of the shipped specs, as ``folder/file.yaml``, sorted."""
    return sorted(f"{folder}/{p.name}" for folder in _FOLDERS
                  for p in (_ROOT / folder).glob("*.yaml"))


def example_spec(name: str) -> Path:
    """The installed file of one shipped spec.

    Parameters
    ----------
    name : str
        ``"clusters/<file>.yaml"`` or ``"workflows/<file>.yaml"`` (one of
        :func:`example_specs`).

    Returns
    -------
    pathlib.Path
        The spec file; load a cluster spec with
        ``distsketch.cluster.load_spec`` and a workflow spec with
        ``distsketch.workflow.load_spec`` (after copying it next to the data,
        see :func:`copy_example_specs`).

    Raises
    ------
    ConfigError
        ``name`` is not a shipped spec.
    """
    known = example_specs()
    if name not in known:
        raise ConfigError(f"no example spec named {name!r}; the shipped specs are: "
                          f"{', '.join(known)}.")
    return _ROOT / name


def copy_example_specs(dest: str | os.PathLike[str]) -> list[Path]:
    """Copy every shipped spec into ``dest/clusters/`` and ``dest/workflows/``.

    Parameters
    ----------
    dest : path-like
        A folder (created if missing).

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    StoreError
        A file of that name already exists in ``dest``: nothing is copied
        (existing files are never replaced).
    """
    dest = Path(dest)
    pairs = [(example_spec(name), dest / name) for name in example_specs()]
    existing = [str(target) for _, target in pairs if os.path.lexists(target)]
    if existing:
        raise StoreError(f"cannot copy the example specs into {dest}: {', '.join(existing)} "
                         "already exist(s); choose an empty folder or move those files away.")
    for source, target in pairs:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return [target for _, target in pairs]
