"""The one reader of targets: a Zarr array of y values, row-aligned with the input.

Used by ``distsketch fit --y`` (the whole array, lazily) and by workflows
(row ranges of a segment, read on the driver).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from distsketch.errors import DistsketchError, InputError, StoreError
from distsketch.io.arrays.class_codes import class_names, dask_targets, decode_classes

__all__ = [
    "Targets",
    "class_names",
    "dask_targets",
    "decode_classes",
    "open_target_args",
    "open_targets",
    "store_labels",
    "targets_argument",
    "whole_numbers",
]


class Targets:
    """A read-only targets array of shape (n,) or (n, t), checked against the input's row count;
    ``where`` names it in messages (the path, or the option it came from).

    Notes
    -----
    Opening reads only metadata; :meth:`rows` reads one row range into memory
    (``(stop - start) × t`` values), :meth:`as_dask` reads nothing until computed.
    Class labels stored as codes with a ``classes`` attribute are read as
    their names (:func:`class_names`).
    """

    def __init__(self, array: Any, where: str):
        self.array = array
        self.where = where

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Targets of rows ``[start, stop)`` as a NumPy array (a chunk that cannot be read is a
        StoreError naming the rows)."""
        try:
            values = np.asarray(self.array[start:stop])
        except StoreError as exc:
            # already names the array, the chunk and the fix (a digest or checksum mismatch)
            raise StoreError(f"cannot read rows {start}..{stop} of the targets {self.where}: "
                             f"{exc}") from exc
        except Exception as exc:
            raise StoreError(f"cannot read rows {start}..{stop} of the targets {self.where}: "
                             f"{type(exc).__name__}: {str(exc).rstrip('.')}. Restore the chunk or "
                             "re-ingest.") from exc
        classes = class_names(self.array, self.where)
        return values if classes is None else decode_classes(values, classes, self.where, start)

    def distinct(self, stop: int, block_rows: int = 65536) -> np.ndarray:
        """The distinct labels of rows ``[0, stop)``, sorted as :func:`numpy.unique` sorts them.

        Read blockwise on the driver: one block of labels and the distinct
        labels seen so far are in memory at a time.
        """
        if len(self.shape) == 2 and self.shape[1] != 1:
            raise InputError(f"targets {self.where} have shape {self.shape}: class labels are one "
                             "column; store them as a 1-D array.")
        chunk = int(self.array.chunks[0])
        block = max(chunk, block_rows // chunk * chunk)  # whole chunks per read
        seen: np.ndarray | None = None
        for start in range(0, stop, block):
            labels = np.unique(np.ravel(self.rows(start, min(stop, start + block))))
            seen = labels if seen is None else np.union1d(seen, labels)
        return np.unique(np.asarray([] if seen is None else seen))

    def as_dask(self) -> Any:
        """The whole targets as a dask array chunked like the store (class names decoded)."""
        return dask_targets(self.array, self.where)


def open_targets(path: str | os.PathLike, n_rows: int, *, where: str | None = None,
                 allow_extra_rows: bool = False, storage_options: dict | None = None) -> Targets:
    """Open the targets at ``path`` (``store.zarr::name`` for an array in a group) of an
    input of ``n_rows`` rows.

    ``allow_extra_rows`` accepts more target rows than input rows: a workflow
    reads only the rows it consumes, and targets may be appended before the rows.
    """
    from distsketch.io.arrays.access import open_zarr
    from distsketch.io.storage.safety import split_array_path

    spec = os.fspath(path)
    where = where or spec
    # the same rule as for inputs: an existing path is a path, else the last '::' names the array
    p, comp = split_array_path(spec)
    arr = open_zarr(p, comp, storage_options=storage_options)
    short = arr.ndim not in (1, 2) or arr.shape[0] < n_rows
    if short or (arr.shape[0] != n_rows and not allow_extra_rows):
        need = f"at least {n_rows}" if allow_extra_rows else f"{n_rows}"
        raise InputError(f"targets {where} have shape {arr.shape}, but the input has {n_rows} rows: "
                         f"expected {need} rows of one or more targets. Append the targets of new "
                         "rows together with the rows.")
    return Targets(arr, where)


def targets_argument(y: Any) -> Any:
    """``y`` as an estimator's ``fit`` takes it: a path (``"store.zarr::y"``) or Zarr array
    becomes a lazy dask array of shape (n,) or (n, t); anything else is returned as is.

    The rule for ``::`` is that of the inputs (:func:`distsketch.io.storage.safety.split_array_path`);
    the row alignment with X is the estimator's check.
    """
    import zarr

    from distsketch.io.arrays.access import open_array

    if isinstance(y, (str, os.PathLike, zarr.Array)):
        return open_array(y, targets=True)
    return y


def open_target_args(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``fit(X, y, ...)``'s arguments with a ``y`` given as a path opened (:func:`targets_argument`)."""
    if len(args) > 1:
        args = (args[0], targets_argument(args[1]), *args[2:])
    if "y" in kwargs:
        kwargs = {**kwargs, "y": targets_argument(kwargs["y"])}
    return args, kwargs


def store_labels(spec: str, storage_options: dict | None = None) -> str | None:
    """``"STORE::y"`` when ``spec`` names the rows ``X`` of a store that also holds labels ``y``.

    A store written by ``distsketch ingest`` lists its arrays in its manifest;
    only those are read (an ``X`` named explicitly, ``STORE::X``, counts too).
    Any other input, or a store without a readable manifest, gives None:
    labels are never guessed from an array's name alone.
    """
    from distsketch.io.commit.manifest import read_manifest
    from distsketch.io.storage.safety import split_array_path

    path, component = split_array_path(str(spec))
    if component not in (None, "X"):
        return None
    try:
        info = read_manifest(path, storage_options=storage_options)
    except DistsketchError:
        # a damaged manifest is reported when the input itself is opened
        return None
    arrays = (info or {}).get("arrays") or []
    if info is None or info.get("kind") != "ingest" or "X" not in arrays or "y" not in arrays:
        return None
    return f"{path}::y"


#: float64 holds every integer up to 2**53 exactly: beyond it a value is no class number
_EXACT_INTEGERS = 2.0**53


def whole_numbers(values: Any) -> Any:
    """Which ``values`` (NumPy, or dask and lazy) are finite whole numbers below 2**53: class
    numbers stored as floats (a CSV's 1..7), as the CLI and workflows read them."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (values == np.round(values)) & (np.abs(values) < _EXACT_INTEGERS)
