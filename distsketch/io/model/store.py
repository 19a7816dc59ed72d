"""Saving fitted estimators to a Zarr group and loading them back.

Layout of a model store (a directory, committed atomically)::

    model.zarr/
      zarr.json                 group attributes: class, params, format,
                                versions, info, JSON learned state
      state/<name>              one Zarr array per NumPy learned attribute
      state/<name>/...          a sub-group per nested fitted estimator or
                                stateful object
      params/<name>/...         a sub-group per estimator-valued parameter
      distsketch-manifest.json  written last

Learned attributes are the public attributes ending in ``_``.  Objects that
are neither arrays, JSON values nor estimators may implement
``__distsketch_state__() -> dict`` and a classmethod
``__distsketch_restore__(dict)``.

A model store is untrusted input: every class it names is looked up in
:mod:`distsketch.registry` before anything is imported, nothing is ever
unpickled, and :func:`load` returns an estimator only after the store passed
every check (links, format, arrays, digests, a probe: docs/security.md),
whatever format number it records.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from distsketch import registry
from distsketch.errors import MemoryBudgetError, StoreError
from distsketch.io.arrays.stores import consolidate
from distsketch.io.commit.digests import (
    MODEL_DIGESTS_KEY,
    model_digests,
    own_group,
    verify_model_digests,
)
from distsketch.io.commit.jsonable import from_tagged_json, to_tagged_json
from distsketch.io.commit.manifest import provenance, read_manifest, write_manifest
from distsketch.io.commit.publish import atomic_output
from distsketch.io.model.checks import (
    check_array,
    check_probe,
    check_structure,
    check_versions,
    dtype_from_name,
    library_versions,
)
from distsketch.io.storage.codecs import codecs
from distsketch.io.storage.urls import Location, resolve

__all__ = ["FORMAT_VERSION", "load", "save_model"]

#: 2: arrays record shape and dtype, every chunk is written (a missing one is lost),
#: library versions are recorded; 3: every chunk carries a CRC-32C checksum.
#: Only this format is loaded (older stores are re-saved or re-fitted).
FORMAT_VERSION = 3

_DESCRIPTORS = ("__array__", "__estimator__", "__object__", "__json__", "__list__", "__dtype__",
                "__object_strings__", "__strings__")


def _import(path: Any, where: str) -> Any:
    # a class named in a store is looked up in the registry, never imported by its path
    if not isinstance(path, str):
        raise StoreError(f"{where}: the stored class name is {path!r}, not a string; the model "
                         "store is damaged or was not written by distsketch.")
    return registry.stored_class(path)


def _is_estimator(v: Any) -> bool:
    return hasattr(v, "get_params") and hasattr(v, "set_params") and not isinstance(v, type)


def _is_dtype(v: Any) -> bool:
    return isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic))


def _holds_objects(v: Any) -> bool:
    """A list/tuple with an estimator, array or dtype somewhere inside (a Pipeline's steps)."""
    return isinstance(v, (list, tuple)) and any(
        _is_estimator(x) or _is_dtype(x) or isinstance(x, np.ndarray) or _holds_objects(x)
        for x in v)


def _write_value(group: zarr.Group, name: str, value: Any, where: str) -> Any:
    """Store one value; return its JSON descriptor for the parent's attributes."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim == 1:
        # string class labels (NumPy unicode): a JSON list, restored with NumPy's string dtype
        return {"__strings__": value.tolist()}
    if isinstance(value, np.ndarray) and value.dtype != object:
        # every chunk is written, even one equal to the fill value, so that a
        # missing chunk always means a lost one
        arr = group.create_array(name, shape=value.shape, dtype=value.dtype,
                                 chunks=value.shape or None,  # type: ignore[arg-type]
                                 overwrite=True, compressors=codecs("zstd"),
                                 config={"write_empty_chunks": True},
                                 dimension_names=[f"{name}_{i}" for i in range(value.ndim)])
        if value.size:
            arr[...] = value
        desc = {"__array__": name, "shape": list(value.shape), "dtype": value.dtype.str}
        if value.ndim > 1 and value.flags.f_contiguous and not value.flags.c_contiguous:
            # Zarr returns C order; the layout is restored on load because BLAS may take
            # another kernel for another layout, and a loaded model must equal the saved
            # one bitwise, not only to rounding
            desc["order"] = "F"
        return desc
    if _is_estimator(value):
        _write_estimator(group.create_group(name), value)
        return {"__estimator__": name}
    if _is_dtype(value):
        dt = np.dtype(value)
        dtype_from_name(dt.str, f"{where}.{name}", error=StoreError)  # numeric only
        return {"__dtype__": dt.str, "type": not isinstance(value, np.dtype)}
    if hasattr(value, "__distsketch_state__"):
        sub = group.create_group(name)
        sub.attrs["class"] = registry.qualified_name(value)
        state = value.__distsketch_state__()
        sub.attrs["state"] = _write_mapping(sub, state, f"{where}.{name}")
        return {"__object__": name}
    if isinstance(value, np.ndarray) and value.ndim == 1 and all(isinstance(x, str) for x in value):
        # class labels read from pandas: strings in an object array, restored as object dtype
        return {"__object_strings__": value.tolist()}
    ok, j = to_tagged_json(value)
    if ok:
        return {"__json__": j}
    if _holds_objects(value):
        sub = group.create_group(name)
        items = [_write_value(sub, str(i), x, f"{where}.{name}[{i}]") for i, x in enumerate(value)]
        return {"__list__": name, "items": items, "tuple": isinstance(value, tuple)}
    if isinstance(value, np.ndarray):
        raise StoreError(f"cannot save {where}.{name}: object arrays are not supported.")
    raise StoreError(
        f"cannot save {where}.{name} of type {type(value).__name__}; give it "
        "__distsketch_state__/__distsketch_restore__ or store it as arrays."
    )


def _write_mapping(group: zarr.Group, mapping: dict, where: str) -> dict:
    return {k: _write_value(group, k, v, where) for k, v in mapping.items()}


def _child(group: zarr.Group, name: Any, kind: type, where: str) -> Any:
    if not isinstance(name, str) or name not in group or not isinstance(group[name], kind):
        what = "array" if kind is zarr.Array else "group"
        raise StoreError(f"{where}: the model store has no {what} {name!r} where its attributes "
                         "say one is; the store is damaged. Re-save the model.")
    node = group[name]
    # a group is read from its own zarr.json: consolidated metadata edited into it (never
    # written below the root, and not digested) would give its members other metadata
    return own_group(node) if isinstance(node, zarr.Group) else node


def _read_value(group: zarr.Group, desc: Any, where: str) -> Any:
    if not isinstance(desc, dict) or sum(k in desc for k in _DESCRIPTORS) != 1:
        raise StoreError(f"{where}: unrecognised stored value {str(desc)[:80]!r}; the model store "
                         "is damaged or was not written by distsketch.")
    if "__array__" in desc:
        arr = _child(group, desc["__array__"], zarr.Array, where)
        value = check_array(arr, desc, where)
        order = desc.get("order", "C")
        if order not in ("C", "F"):
            raise StoreError(f"{where}: stored memory order {str(order)[:20]!r} is neither 'C' "
                             "nor 'F'; the model store is damaged. Re-save the model.")
        return np.asfortranarray(value) if order == "F" else value
    if "__estimator__" in desc:
        return _read_estimator(_child(group, desc["__estimator__"], zarr.Group, where), where)
    for key in ("__object_strings__", "__strings__"):
        if key in desc:
            items = desc[key]
            if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
                raise StoreError(f"{where}: stored labels are not a list of strings; the model "
                                 "store is damaged.")
            return np.array(items, dtype=object if key == "__object_strings__" else str)
    if "__object__" in desc:
        sub = _child(group, desc["__object__"], zarr.Group, where)
        cls = _import(sub.attrs.get("class"), where)
        if not hasattr(cls, "__distsketch_restore__"):
            raise StoreError(f"{where}: class {sub.attrs.get('class')!r} is not a stored object.")
        return cls.__distsketch_restore__(_read_mapping(sub, sub.attrs.get("state"), where))
    if "__dtype__" in desc:
        dt = dtype_from_name(desc["__dtype__"], where, error=StoreError)
        return dt.type if desc.get("type") else dt
    if "__list__" in desc:
        sub = _child(group, desc["__list__"], zarr.Group, where)
        items = desc.get("items")
        if not isinstance(items, list):
            raise StoreError(f"{where}: a stored list has no items; the model store is damaged.")
        out = [_read_value(sub, d, f"{where}[{i}]") for i, d in enumerate(items)]
        return tuple(out) if desc.get("tuple") else out
    return from_tagged_json(desc["__json__"])


def _read_mapping(group: zarr.Group, descs: Any, where: str) -> dict:
    if not isinstance(descs, dict):
        raise StoreError(f"{where}: the stored attributes are {type(descs).__name__}, not a "
                         "mapping; the model store is damaged or was not written by distsketch.")
    return {k: _read_value(group, d, f"{where}.{k}") for k, d in descs.items()}


def _learned(est: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def _params(est: Any) -> dict[str, Any]:
    params = est.get_params(deep=False)
    rs = params.get("random_state")
    if isinstance(rs, (np.random.RandomState, np.random.Generator)):
        seed = getattr(est, "seed_", None)
        if seed is None:
            raise StoreError(
                f"cannot save {type(est).__name__}: random_state is a {type(rs).__name__} object "
                "and no seed was drawn from it yet (fit the estimator first, or pass an integer "
                "random_state).")
        # the seed drawn from the generator in fit reproduces the model on refit
        params["random_state"] = int(seed)
    return params


def _write_estimator(group: zarr.Group, est: Any) -> None:
    pgroup = group.create_group("params")
    sgroup = group.create_group("state")
    # only classes the registry can load back are written
    group.attrs["class"] = registry.qualified_name(est)
    group.attrs["params"] = _write_mapping(pgroup, _params(est), type(est).__name__)
    group.attrs["state"] = _write_mapping(sgroup, _learned(est), type(est).__name__)


def _read_estimator(group: zarr.Group, where: str) -> Any:
    # the class is resolved (or refused) before any stored value is read
    cls = _import(group.attrs.get("class"), where)
    name = cls.__name__
    params = _read_mapping(_child(group, "params", zarr.Group, name), group.attrs.get("params"),
                           f"{where}:{name} params")
    try:
        est = cls(**params)
    except TypeError as exc:
        raise StoreError(f"{where}: the stored parameters do not fit {name} ({exc}); the model "
                         "was written by another version or edited. Re-save it.") from exc
    state = _read_mapping(_child(group, "state", zarr.Group, name), group.attrs.get("state"),
                          f"{where}:{name}")
    for k, v in state.items():
        if not (k.endswith("_") and not k.startswith("_")):
            raise StoreError(f"{where}: stored attribute {k!r} of {name} is not a learned "
                             "attribute (public, ending in '_'); the store was edited.")
        setattr(est, k, v)
    return est


def _check_format(fmt: Any, path: Path | str) -> None:
    """Refuse every recorded format but :data:`FORMAT_VERSION`: reading older stores under
    relaxed checks would let an edited number switch the checks off."""
    if not isinstance(fmt, int) or isinstance(fmt, bool):
        raise StoreError(f"model {path} records format {fmt!r}, not an integer; the store is "
                         "damaged or was not written by distsketch. Re-fit and re-save the "
                         "model.")
    if fmt > FORMAT_VERSION:
        raise StoreError(f"model {path} has format {fmt}, newer than this distsketch reads "
                         f"({FORMAT_VERSION}); upgrade distsketch to load it.")
    if fmt < FORMAT_VERSION:
        raise StoreError(
            f"model {path} has format {fmt}, older than the format {FORMAT_VERSION} this "
            "distsketch loads (format 3 adds a checksum to every chunk, and only stores with all "
            "checks are read). Re-fit and re-save the model with this version (a workflow "
            "checkpoint: rerun with --full).")


def save_model(est: Any, path: str | os.PathLike, *, overwrite: bool = False,
               extra: dict | None = None, storage_options: dict | None = None) -> Path | str:
    """Save a fitted estimator to a Zarr group at ``path`` (atomically).

    Parameters
    ----------
    est : estimator
        A fitted distsketch estimator (or a scikit-learn type listed in
        :mod:`distsketch.registry`, e.g. a Pipeline of distsketch steps).
    path : path-like or URL
        Output directory, or a URL (``s3://bucket/model.zarr``).
    overwrite : bool
        Replace an existing model.
    extra : dict, optional
        Additional JSON attributes (e.g. the input fingerprint).
    storage_options : dict, optional
        fsspec options for a URL (merged over the dask config
        ``distsketch.storage-options``).

    Returns
    -------
    pathlib.Path or str
        The committed path, or the canonical URL.

    Notes
    -----
    A ``random_state`` given as a ``RandomState`` or ``Generator`` object is
    saved as the integer seed drawn from it in ``fit`` (``seed_``): the loaded
    model, refitted, draws the same operator.
    """
    versions = library_versions()
    dest = resolve(path, storage_options)
    with atomic_output(dest, overwrite=overwrite, storage_options=storage_options) as tmp:
        root = zarr.open_group(store=tmp.zarr_store(), mode="w-")
        _write_estimator(root, est)
        cls = registry.qualified_name(est)
        info = {
            "distsketch_version": versions["distsketch"],
            "seed": getattr(est, "seed_", None),
            "n_samples_seen": getattr(est, "n_samples_seen_", None),
            "fingerprint": getattr(est, "fingerprint_", None),
        }
        ok, info_json = to_tagged_json({k: v for k, v in (extra or {}).items()} | info)
        root.attrs["info"] = info_json if ok else info
        root.attrs["format"] = FORMAT_VERSION
        root.attrs["versions"] = versions
        root.attrs["provenance"] = provenance({"kind": "model", "class": cls} | info)
        consolidate(tmp)  # xarray and other readers open the hierarchy in one read
        # every group's attributes and array's metadata and chunk CRCs, checked on load
        digests = {MODEL_DIGESTS_KEY: model_digests(tmp)}
        write_manifest(tmp, {"kind": "model", "class": cls, "versions": versions} | info | digests)
    return dest.user_path()


def load(path: str | os.PathLike | Location, *, storage_options: dict | None = None) -> Any:
    """Load an estimator saved with ``save`` / :func:`save_model`.

    Parameters
    ----------
    path : path-like or URL
        A model store written by distsketch.
    storage_options : dict, optional
        fsspec options for a URL (merged over the dask config
        ``distsketch.storage-options``).

    Returns
    -------
    estimator

    Raises
    ------
    StoreError
        If ``path`` is not a complete distsketch model store; if it names a
        class that is not registered (nothing it names is imported); if an
        array is missing a chunk, is unreadable, or has a shape or dtype that
        does not fit the class; if a group's attributes, an array's metadata
        or a chunk differ from the digests recorded when it was saved.

    Warns
    -----
    StoreVersionWarning
        The model was written with other versions of distsketch, NumPy,
        scikit-learn or Zarr than those installed.
    """
    loc = resolve(path, storage_options)
    p = loc.user_path()
    if not loc.exists():
        raise StoreError(f"no model at {p}; check the path (models are saved with .save(path)).")
    loc.refuse_links("model")
    loc.check_committed()
    manifest = read_manifest(loc)
    if manifest is None:
        raise StoreError(
            f"{p} has no distsketch manifest: it is not a model store or its write did not "
            "complete. Re-run the fit that produces it."
        )
    try:
        # the arrays' own metadata, not the consolidated copy: an edited store is caught
        root = zarr.open_group(store=loc.zarr_store(read_only=True), mode="r",
                               use_consolidated=False)
        attrs = root.attrs.asdict()
    except Exception as exc:
        raise StoreError(f"cannot read model {p}: {type(exc).__name__}: {exc}. The store's "
                         "metadata is missing or corrupt; re-save the model.") from exc
    _check_format(attrs.get("format", 1), p)  # format 1 recorded no number
    check_versions(attrs.get("versions") or {"distsketch": (attrs.get("info") or {}).get(  # type: ignore[union-attr]
        "distsketch_version") if isinstance(attrs.get("info"), dict) else None}, p)
    try:
        with warnings.catch_warnings():
            # the distsketch manifest beside the arrays is not a Zarr node
            warnings.filterwarnings("ignore", message=".*not recognized.*")
            est = _read_estimator(root, str(p))
    except (StoreError, MemoryBudgetError):
        raise
    except Exception as exc:
        raise StoreError(f"cannot read model {p}: {type(exc).__name__}: {exc}. The store is "
                         "damaged or was written by an incompatible version; re-save it.") from exc
    check_structure(est, p)
    # after the per-array checks (their messages are the more specific), before the probe
    # computes with the arrays: a store that changed since it was saved is never used
    verify_model_digests(loc, manifest, p)
    check_probe(est, p)
    return est
