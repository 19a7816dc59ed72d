"""The public :func:`append`: in-memory rows go to :mod:`distsketch.io.arrays.appending`,
a file is streamed by ``ingest(path, store, append=True)`` into the same appender.  It
sits above both, so the readers and the appender need not know each other's entry points.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distsketch.errors import ConfigError
from distsketch.io.arrays import appending
from distsketch.io.readers.ingest import ingest

__all__ = ["append"]


def append(store: str | os.PathLike, X: Any, y: Any = None, *, allow_nan: bool = False,
           source: str | None = None, storage_options: dict | None = None,
           format: str | None = None, label_column: int | str | None = None,
           class_labels: bool | None = None, **read_options: Any) -> Path | str:
    """Append rows to a store written by :func:`distsketch.io.ingest`, atomically.

    ``X`` and ``y`` grow together; the consolidated metadata and then the
    manifest are updated last, so readers see the old rows or all the new
    ones, never fill values.

    Parameters
    ----------
    store : path-like or URL
        An ingested store (a Zarr group with ``X`` and, when labelled, ``y``).
    X : array-like of shape (k, d), or path-like
        The new rows; ``d`` is the store's width.  Cast to the store's dtype;
        a cast that would change a value (an integer the dtype would round
        included) is refused.  A path (``str`` or
        ``os.PathLike``) is a file the ingest readers read (CSV, ``.npy``,
        Parquet, svmlight, idx, ...), streamed block by block: this is
        ``ingest(X, store, append=True, ...)``, the CLI's ``ingest --append``.
    y : array-like of shape (k,), or path-like, optional
        Labels of the new rows: required when the store has ``y``, refused
        when it has none.  With a file ``X``: a 1-D ``.npy`` or idx labels
        file (ingest's ``labels=``), or None when the file has a label column.
    allow_nan : bool, default False
        Store NaN/Inf as they are instead of raising.
    source : str, optional
        Where in-memory rows came from, recorded in the manifest's
        ``appends`` (a file ``X`` records its path).
    storage_options : dict, optional
        fsspec options for a URL ``store``.
    format, label_column, class_labels : optional
        For a file ``X``, as in :func:`~distsketch.io.ingest`: the format
        (default: from the name or first bytes) and the CSV/Parquet label
        column by name or index.  Class names are mapped to the store's codes
        by name; a name not seen before gets the next code.  A file's column
        names are matched to the store's ``feature_names`` by name.
    **read_options
        Other reading options of :func:`~distsketch.io.ingest` for a file
        ``X``: ``delimiter``, ``header``, ``skip_header``, ``n_features``,
        ``zero_based``, ``progress``.

    Returns
    -------
    pathlib.Path or str
        The store (a URL for a URL ``store``).

    Raises
    ------
    ConfigError
        Reading options with in-memory rows, ``source`` with a file, or an
        in-memory ``y`` with a file ``X``.
    InputError
        Wrong width, a dtype that cannot be cast, NaN/Inf, ``y`` missing,
        unexpected or of another length.
    StoreError
        ``store`` is not an ingested store, its arrays disagree with its
        manifest, another append holds it, or the write failed (the store is
        then as it was).

    Notes
    -----
    Only the last, partly filled chunk of each array is rewritten, with its
    old rows unchanged; everything else is new chunks.  A workflow run that
    started before the append reads only the rows it recorded when it started.
    A file is read one chunk of the store's rows at a time.
    """
    if isinstance(X, (str, os.PathLike)):
        if source is not None:
            raise ConfigError(f"append: source= names where in-memory rows came from; the rows "
                              f"of the file {X} are recorded with its path. Drop source=.")
        if y is not None and not isinstance(y, (str, os.PathLike)):
            raise ConfigError(f"append: with the file {X} as X, y is a labels file (.npy or idx) "
                              "or None; labels in the file itself are read with label_column=.")
        return ingest(X, store, append=True, format=format, label_column=label_column,
                      class_labels=class_labels, labels=y, allow_nan=allow_nan,
                      storage_options=storage_options, **read_options)
    given = {"format": format, "label_column": label_column, "class_labels": class_labels,
             **read_options}
    if any(v is not None for v in given.values()):
        names = ", ".join(f"{k}=" for k, v in given.items() if v is not None)
        raise ConfigError(f"append: {names} apply to a file X (a path to read); the rows given "
                          "are an array. Drop them, or pass the file's path as X.")
    return appending.append(store, X, y, allow_nan=allow_nan, source=source,
                            storage_options=storage_options)
