"""Saving fitted estimators to a Zarr group and loading them back.

Layout of a model store (a directory, committed atomically)::

    model.zarr/
      zarr.json                 group attributes: class, params, version,
                                fingerprint, rows seen, JSON learned state
      state/<name>              one Zarr array per NumPy learned attribute
      state/<name>/...          a sub-group per nested fitted estimator or
                                stateful object
      params/<name>/...         a sub-group per estimator-valued parameter
      distsketch-manifest.json  written last

Learned attributes are the public attributes ending in ``_``.  Objects that
are neither arrays, JSON values nor estimators may implement
``__distsketch_state__() -> dict`` and a classmethod
``__distsketch_restore__(dict)``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from distsketch import registry
from distsketch._version import __version__
from distsketch.errors import StoreError
from distsketch.io.atomic import atomic_dir
from distsketch.io.manifest import write_manifest

__all__ = ["load", "save_model"]

_JSON_SCALARS = (str, int, float, bool, type(None))


def _class_path(obj: Any) -> str:
    # only classes the registry can load back are written
    return registry.qualified_name(obj)


def _import(path: Any) -> Any:
    # a class named in a store is looked up in the registry, never imported by its path
    return registry.stored_class(path)


def _to_json(v: Any) -> tuple[bool, Any]:
    if isinstance(v, (bool, np.bool_)):
        return True, bool(v)
    if isinstance(v, np.integer):
        return True, int(v)
    if isinstance(v, np.floating):
        return True, float(v)
    if isinstance(v, _JSON_SCALARS):
        return True, v
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            ok, j = _to_json(x)
            if not ok:
                return False, None
            out.append(j)
        return True, {"__tuple__": out} if isinstance(v, tuple) else out
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        out_d = {}
        for k, x in v.items():
            ok, j = _to_json(x)
            if not ok:
                return False, None
            out_d[k] = j
        return True, out_d
    return False, None


def _from_json(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) == {"__tuple__"}:
            return tuple(_from_json(x) for x in v["__tuple__"])
        return {k: _from_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_from_json(x) for x in v]
    return v


def _is_estimator(v: Any) -> bool:
    return hasattr(v, "get_params") and hasattr(v, "set_params")


def _write_value(group: zarr.Group, name: str, value: Any, where: str) -> Any:
    """Store one value; return its JSON descriptor for the parent's attributes."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        arr = group.create_array(name, shape=value.shape, dtype=value.dtype,
                                 chunks=value.shape or None, overwrite=True)
        if value.size:
            arr[...] = value
        return {"__array__": name}
    if _is_estimator(value):
        _write_estimator(group.create_group(name), value)
        return {"__estimator__": name}
    if hasattr(value, "__distsketch_state__"):
        sub = group.create_group(name)
        sub.attrs["class"] = _class_path(value)
        state = value.__distsketch_state__()
        sub.attrs["state"] = _write_mapping(sub, state, f"{where}.{name}")
        return {"__object__": name}
    if isinstance(value, np.ndarray) and value.ndim == 1 and all(isinstance(x, str) for x in value):
        # class labels read from pandas: strings in an object array, restored as object dtype
        return {"__object_strings__": value.tolist()}
    ok, j = _to_json(value)
    if ok:
        return {"__json__": j}
    if isinstance(value, np.ndarray):
        raise StoreError(f"cannot save {where}.{name}: object arrays are not supported.")
    raise StoreError(
        f"cannot save {where}.{name} of type {type(value).__name__}; give it "
        "__distsketch_state__/__distsketch_restore__ or store it as arrays."
    )


def _write_mapping(group: zarr.Group, mapping: dict, where: str) -> dict:
    return {k: _write_value(group, k, v, where) for k, v in mapping.items()}


def _read_value(group: zarr.Group, desc: dict) -> Any:
    if "__array__" in desc:
        return np.asarray(group[desc["__array__"]][...])
    if "__estimator__" in desc:
        return _read_estimator(group[desc["__estimator__"]])
    if "__object_strings__" in desc:
        return np.array([str(x) for x in desc["__object_strings__"]], dtype=object)
    if "__object__" in desc:
        sub = group[desc["__object__"]]
        cls = _import(sub.attrs["class"])
        return cls.__distsketch_restore__(_read_mapping(sub, sub.attrs["state"]))
    return _from_json(desc["__json__"])


def _read_mapping(group: zarr.Group, descs: dict) -> dict:
    return {k: _read_value(group, d) for k, d in descs.items()}


def _learned(est: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def _write_estimator(group: zarr.Group, est: Any) -> None:
    params = est.get_params(deep=False)
    pgroup = group.create_group("params")
    sgroup = group.create_group("state")
    group.attrs["class"] = _class_path(est)
    group.attrs["params"] = _write_mapping(pgroup, params, type(est).__name__)
    group.attrs["state"] = _write_mapping(sgroup, _learned(est), type(est).__name__)


def _read_estimator(group: zarr.Group) -> Any:
    cls = _import(group.attrs["class"])
    params = _read_mapping(group["params"], group.attrs["params"])
    est = cls(**params)
    for k, v in _read_mapping(group["state"], group.attrs["state"]).items():
        setattr(est, k, v)
    return est


def save_model(est: Any, path: str | os.PathLike, *, overwrite: bool = False,
               extra: dict | None = None) -> Path:
    """Save a fitted estimator to a Zarr group at ``path`` (atomically).

    Parameters
    ----------
    est : estimator
        A fitted distsketch (or scikit-learn compatible) estimator.
    path : path-like
        Output directory.
    overwrite : bool
        Replace an existing model.
    extra : dict, optional
        Additional JSON attributes (e.g. the input fingerprint).

    Returns
    -------
    pathlib.Path
    """
    with atomic_dir(path, overwrite=overwrite) as tmp:
        root = zarr.open_group(store=str(tmp), mode="w")
        _write_estimator(root, est)
        info = {
            "distsketch_version": __version__,
            "seed": getattr(est, "seed_", None),
            "n_samples_seen": getattr(est, "n_samples_seen_", None),
            "fingerprint": getattr(est, "fingerprint_", None),
        }
        ok, info_json = _to_json({k: v for k, v in (extra or {}).items()} | info)
        root.attrs["info"] = info_json if ok else info
        write_manifest(tmp, {"kind": "model", "class": _class_path(est)} | info)
    return Path(path).expanduser().absolute()


def load(path: str | os.PathLike) -> Any:
    """Load an estimator saved with ``save`` / :func:`save_model`.

    Raises
    ------
    StoreError
        If ``path`` is not a complete distsketch model store.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise StoreError(f"no model at {p}; check the path (models are saved with .save(path)).")
    if not (p / "distsketch-manifest.json").exists():
        raise StoreError(
            f"{p} has no distsketch manifest: it is not a model store or its write did not "
            "complete. Re-run the fit that produces it."
        )
    try:
        root = zarr.open_group(store=str(p), mode="r")
        return _read_estimator(root)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"cannot read model {p}: {type(exc).__name__}: {exc}.") from exc
