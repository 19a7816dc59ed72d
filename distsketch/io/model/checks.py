"""Checks a loaded model store must pass (versions, arrays, consistency), so that a
damaged model is a :class:`~distsketch.errors.StoreError` naming the array, never
all-zero features or an error deep inside a matrix product.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
import zarr

from distsketch._version import __version__
from distsketch.errors import MemoryBudgetError, StoreError, StoreVersionWarning
from distsketch.io.arrays.stores import chunk_error_detail
from distsketch.io.storage.codecs import has_checksum

__all__ = ["check_array", "check_probe", "check_structure", "check_versions", "dtype_from_name",
           "library_versions"]

#: the libraries whose versions a model records; a mismatch on load warns
VERSIONED = ("distsketch", "numpy", "sklearn", "zarr")

_NUMERIC_KINDS = "biufc"


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries a saved model depends on."""
    return {"distsketch": __version__, "numpy": np.__version__, "sklearn": sklearn.__version__,
            "zarr": zarr.__version__}


def check_versions(recorded: Any, path: Path | str) -> None:
    """Warn (:class:`StoreVersionWarning`) if ``recorded`` differs from what is installed."""
    if not isinstance(recorded, dict):
        raise StoreError(f"model {path}: its recorded versions are not a mapping; the store is "
                         "damaged. Re-save the model.")
    now = library_versions()
    diff = [f"{lib} {recorded[lib]} (installed {now[lib]})" for lib in VERSIONED
            if recorded.get(lib) is not None and str(recorded[lib]) != now[lib]]
    if diff:
        warnings.warn(
            f"model {path} was written with {', '.join(diff)}; it is loaded as is, but results "
            "may differ from those of the writing installation. Re-save it with this version "
            "to silence this warning.", StoreVersionWarning, stacklevel=3)


def dtype_from_name(name: Any, where: str, *, error: type[Exception] = StoreError) -> np.dtype:
    """A numeric NumPy dtype from its stored name; anything else (object, strings) is refused."""
    try:
        dt = name if isinstance(name, np.dtype) else np.dtype(str(name))
    except TypeError as exc:
        raise error(f"{where}: {str(name)!r} is not a numeric NumPy dtype; a model holds only "
                    "numeric arrays.") from exc
    if dt.kind not in _NUMERIC_KINDS:
        raise error(f"{where}: dtype {dt} is not numeric; a model holds only numeric arrays.")
    return dt


def check_array(arr: zarr.Array, desc: dict, where: str) -> np.ndarray:
    """Read one stored model array after checking its dtype, shape, codecs and chunks.

    ``desc`` is the descriptor saved beside it (``shape``, ``dtype``), ``where``
    the attribute path.  Every check applies to every array, whatever format the
    store records; a failed one is a StoreError (naming the chunk, for a chunk).
    """
    dt = dtype_from_name(arr.dtype, where)
    shape = desc.get("shape")
    if not isinstance(shape, list) or tuple(shape) != tuple(arr.shape):
        raise StoreError(f"{where} has shape {tuple(arr.shape)}, but the model recorded "
                         f"{tuple(shape) if isinstance(shape, list) else shape!r}; the array "
                         "was replaced or the store edited. Re-save the model.")
    try:
        recorded = np.dtype(str(desc.get("dtype")))
    except TypeError:
        recorded = None
    if recorded != dt:
        raise StoreError(f"{where} has dtype {dt}, but the model recorded {desc.get('dtype')}; "
                         "the store was edited. Re-save the model.")
    if not has_checksum(arr):
        raise StoreError(f"{where}: model array has no crc32c checksum codec, which distsketch "
                         "writes on every array; the array was replaced or its metadata edited. "
                         "Restore the model store or re-save the model.")
    if arr.size and arr.nchunks_initialized < arr.nchunks:
        from distsketch.io.arrays.access import missing_chunks

        missing = missing_chunks(arr)
        raise StoreError(
            f"{where}: model array is missing chunk(s) {missing or ''} (grid index); reading "
            "it would silently give zeros. The model store is damaged: restore it or re-save "
            "the model.")
    try:
        return np.asarray(arr[...])
    except MemoryError as exc:
        raise MemoryBudgetError(
            f"{where}: out of memory reading the model array {tuple(arr.shape)} {arr.dtype} "
            f"({exc}); the model is not damaged. Load it where more memory is free.") from exc
    except Exception as exc:
        raise StoreError(f"{where}: cannot read model array: {_failed_chunks(arr)}"
                         f"{chunk_error_detail(exc)}. Restore the model store or re-save the "
                         "model.") from exc


def _failed_chunks(arr: zarr.Array) -> str:
    """``"chunk (i, j) ... "`` for the chunks of ``arr`` that fail to read (the first 5)."""
    bad = []
    for idx in np.ndindex(*arr.cdata_shape):
        sel = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, arr.chunks))
        try:
            arr[sel]
        except Exception:
            bad.append(tuple(int(i) for i in idx))
            if len(bad) >= 5:
                break
    if not bad:
        return ""
    return f"chunk{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} (grid index) is corrupt, "


def _estimators(est: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``est`` and every estimator nested in its learned attributes, with their paths."""
    out = [(prefix, est)]
    for k, v in vars(est).items():
        if k.endswith("_") and hasattr(v, "get_params") and not isinstance(v, type):
            out += _estimators(v, f"{prefix}{k}.")
    return out


def _arrays(est: Any) -> list[str]:
    return [f"{p}{k} {v.shape}" for p, e in _estimators(est) for k, v in vars(e).items()
            if isinstance(v, np.ndarray) and k.endswith("_")][:12]


def _check_components(est: Any, prefix: str, path: Path | str) -> None:
    comp = getattr(est, "components_", None)
    n = getattr(est, "n_components", None)
    if not isinstance(comp, np.ndarray):
        return
    width = getattr(est, "n_output_features_", None)
    if comp.ndim != 2 or (isinstance(n, int) and not isinstance(n, bool) and comp.shape[0] != n):
        raise StoreError(
            f"model {path}: {prefix}components_ has shape {comp.shape}, expected (n_components, "
            f"width) = ({n}, {width if width is not None else 'width'}); the array was replaced "
            "or the store edited. Re-save the model.")


def check_structure(est: Any, path: Path | str) -> None:
    """Refuse a loaded model whose ``components_`` or ``n_features_in_`` do not fit its class.

    Only looks at shapes and types; nothing is computed with the arrays.
    """
    for prefix, e in _estimators(est):
        _check_components(e, prefix, path)
    for prefix, e in _estimators(est):
        width = getattr(e, "n_features_in_", None)
        if width is not None and (not isinstance(width, (int, np.integer))
                                  or isinstance(width, bool)):
            # a text "5" would pass load and fail every transform with "X has 5 features,
            # but ... is expecting 5"
            raise StoreError(f"model {path}: {prefix}n_features_in_ is {width!r} "
                             f"({type(width).__name__}), not an integer; the store was edited. "
                             "Re-save the model.")


def check_probe(est: Any, path: Path | str) -> None:
    """Map two all-zero rows through the loaded model: its arrays must fit together.

    One tiny transform (or predict) per load, skipped for a model that refers
    to training data on disk (a ``*_path_`` attribute).
    """
    d = getattr(est, "n_features_in_", None)
    method = getattr(est, "transform", None) or getattr(est, "predict", None)
    if d is None or method is None:
        return
    if any(k.endswith("_path_") and v is not None
           for _, e in _estimators(est) for k, v in vars(e).items()):
        # the model refers to data on disk (an out-of-core fit): a probe could read all of it
        return
    if d < 1:
        raise StoreError(f"model {path}: n_features_in_ is {d}; the store was edited.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = np.asarray(method(np.zeros((2, int(d)))))
    except Exception as exc:
        raise StoreError(
            f"model {path}: its arrays do not fit together ({type(exc).__name__}: {exc}); arrays: "
            f"{', '.join(_arrays(est))}. The store was edited or mixes models; re-save the "
            "model.") from exc
    if out.ndim == 0 or out.shape[0] != 2:
        raise StoreError(f"model {path}: mapping 2 rows gave shape {out.shape}; arrays: "
                         f"{', '.join(_arrays(est))}. The store was edited; re-save the model.")
