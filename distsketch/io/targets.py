"""The one reader of targets: a Zarr array of y values, row-aligned with the input.

Used by ``distsketch fit --y`` (the whole array, lazily) and by workflows
(row ranges of a segment, read on the driver).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from distsketch.errors import InputError, StoreError

__all__ = ["Targets", "open_targets"]


class Targets:
    """A read-only targets array, checked against the input's row count.

    Parameters
    ----------
    array : zarr.Array
        The opened targets, of shape (n,) or (n, t).
    where : str
        How messages name it (the path, or the option it came from).

    Notes
    -----
    Opening reads only metadata; :meth:`rows` reads one row range into memory
    (``(stop - start) × t`` values), :meth:`as_dask` reads nothing until computed.
    """

    def __init__(self, array: Any, where: str):
        self.array = array
        self.where = where

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Targets of rows ``[start, stop)`` as a NumPy array.

        Raises
        ------
        StoreError
            A chunk is missing or unreadable; the message names the rows.
        """
        try:
            return np.asarray(self.array[start:stop])
        except Exception as exc:
            raise StoreError(f"cannot read rows {start}..{stop} of the targets {self.where}: "
                             f"{type(exc).__name__}: {exc}. Restore the chunk or re-ingest.") from exc

    def as_dask(self) -> Any:
        """The whole targets as a dask array chunked like the store."""
        import dask.array as da

        return da.from_array(self.array, chunks=self.array.chunks)


def open_targets(path: str | os.PathLike, n_rows: int, *, where: str | None = None,
                 allow_extra_rows: bool = False) -> Targets:
    """Open the targets at ``path`` (``store.zarr::name`` for an array in a group).

    Parameters
    ----------
    path : str or path-like
        Zarr array of shape (n,) or (n, t).
    n_rows : int
        Rows of the input the targets belong to.
    where : str, optional
        How messages name the targets (default: the path).
    allow_extra_rows : bool, default False
        Accept more target rows than input rows (a workflow reads only the
        rows it consumes; targets may be appended before the rows).

    Returns
    -------
    Targets

    Raises
    ------
    StoreError
        No readable Zarr array at ``path``.
    InputError
        Not 1-D or 2-D, or its row count does not match the input.
    """
    from distsketch.io.arrays import open_zarr

    spec = os.fspath(path)
    where = where or spec
    p, _, comp = spec.partition("::")
    arr = open_zarr(p, comp or None)
    short = arr.ndim not in (1, 2) or arr.shape[0] < n_rows
    if short or (arr.shape[0] != n_rows and not allow_extra_rows):
        need = f"at least {n_rows}" if allow_extra_rows else f"{n_rows}"
        raise InputError(f"targets {where} have shape {arr.shape}, but the input has {n_rows} rows: "
                         f"expected {need} rows of one or more targets. Append the targets of new "
                         "rows together with the rows.")
    return Targets(arr, where)
