"""Storage locations: local paths and fsspec URLs, understood in one place.

Every path distsketch reads or writes goes through :func:`resolve`, which
turns it into a :class:`~distsketch.io.storage.location.Location`.  A local
path is made absolute *here, on the client* (``~`` expanded), so a graph
shipped to workers started elsewhere names the same files; ``file:///abs/path``
is the local path ``/abs/path``; any other URL keeps its canonical form and
its fsspec filesystem, and is never treated as a local path.  How
``storage_options`` merge over the dask config ``distsketch.storage-options``
is in docs/storage.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from distsketch.errors import ConfigError, StoreError
from distsketch.io.storage.location import Location

__all__ = ["CONFIG_KEY", "Location", "is_url", "merge_options", "register_kind", "resolve",
           "storage_options"]

#: dask config key holding the default ``storage_options`` (a mapping)
CONFIG_KEY = "distsketch.storage-options"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")

# package to install per protocol, for the message when it is missing
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs",
             "az": "adlfs", "abfss": "adlfs", "hf": "huggingface_hub", "sftp": "paramiko"}


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL (``scheme://...``), ``file://`` included.

    Examples
    --------
    >>> is_url("s3://bucket/x.zarr"), is_url("data/x.zarr"), is_url("file:///tmp/x")
    (True, False, True)
    """
    if not isinstance(path, (str, os.PathLike)):
        return False
    s = os.fspath(path)
    return isinstance(s, str) and _SCHEME.match(s) is not None


def merge_options(base: Mapping | None, over: Mapping | None) -> dict[str, Any]:
    """``over`` merged over ``base``; nested mappings are merged key by key."""
    out: dict[str, Any] = dict(base or {})
    for k, v in (over or {}).items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_options(out[k], v)
        else:
            out[k] = dict(v) if isinstance(v, Mapping) else v
    return out


def storage_options(options: Mapping | None = None) -> dict[str, Any]:
    """``options`` merged over the configured defaults (dask config ``distsketch.storage-options``).

    Raises
    ------
    ConfigError
        The configured value or ``options`` is not a mapping.
    """
    import dask.config

    base = dask.config.get(CONFIG_KEY, default=None)
    if base is not None and not isinstance(base, Mapping):
        raise ConfigError(f"dask config {CONFIG_KEY!r} is {type(base).__name__} {base!r}; it must "
                          "be a mapping of fsspec storage options (e.g. {'anon': True}).")
    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(f"storage_options must be a mapping (e.g. {{'anon': True}}); got "
                          f"{type(options).__name__}.")
    return merge_options(base, options)


_with_defaults = storage_options  # resolve()'s parameter shadows the name


#: the Location subclass per protocol ("file": local paths; "": any other fsspec protocol)
_KINDS: dict[str, type[Location]] = {}


def register_kind(cls: type[Location], protocol: str) -> None:
    """Make :func:`resolve` return ``cls`` for ``protocol``.

    ``"file"`` is the local file system, ``""`` every fsspec protocol that has
    no class of its own.  The built-in kinds are registered by
    :mod:`distsketch.io.commit.kinds` (imported with :mod:`distsketch.io`).
    """
    _KINDS[protocol] = cls


def _kind(protocol: str) -> type[Location]:
    return _KINDS.get(protocol) or _KINDS[""]


def resolve(path: str | os.PathLike | Location, storage_options: Mapping | None = None,
            ) -> Location:
    """The :class:`Location` of ``path`` (see the module docstring).

    Parameters
    ----------
    path : str, path-like or Location
        A local path (relative paths are made absolute against the current
        working directory), ``file://`` URL or fsspec URL.
    storage_options : mapping, optional
        fsspec options (credentials, ``client_kwargs.endpoint_url`` ...),
        merged over the configured defaults; unused for local paths.

    Returns
    -------
    Location

    Raises
    ------
    StoreError
        Unknown protocol, or its filesystem package is not installed.
    """
    if isinstance(path, Location):
        return path
    s = os.fspath(path)
    if not isinstance(s, str):
        raise ConfigError(f"expected a path or URL, got bytes {s!r}.")
    m = _SCHEME.match(s)
    if m is None or m.group(1).lower() in ("file", "local"):
        local = s[m.end():] if m else s
        return _local(os.path.abspath(os.path.expanduser(local)))
    opts = _with_defaults(storage_options)
    protocol = m.group(1).lower()
    try:
        from fsspec.core import url_to_fs

        fs, fspath = url_to_fs(s, **opts)
    except ImportError as exc:
        pkg = _PACKAGES.get(protocol, f"the fsspec implementation of {protocol!r}")
        raise StoreError(f"cannot use {s}: the {protocol}:// protocol needs {pkg}, which is not "
                         f"installed ({exc}). Install it (e.g. pip install {pkg}) or use another "
                         "location.") from exc
    except ValueError as exc:
        raise StoreError(f"cannot use {s}: {exc}. Check the URL's protocol (supported: local "
                         "paths, file://, and fsspec URLs such as s3://, gs://, abfs://, "
                         "memory://).") from exc
    except Exception as exc:
        raise StoreError(f"cannot use {s}: {type(exc).__name__}: {exc}. Check the URL and its "
                         "storage options.") from exc
    fspath = fspath.rstrip("/") or fspath
    return _kind(protocol)(url=fs.unstrip_protocol(fspath), path=fspath, fs=fs,
                           storage_options=opts)


def _local(abspath: str) -> Location:
    from fsspec.implementations.local import LocalFileSystem

    return _kind("file")(url=abspath, path=abspath, fs=LocalFileSystem())
