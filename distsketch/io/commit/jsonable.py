"""Python values as JSON: the one encoder of manifests, model state, reports and CLI output.

:func:`json_default` for what is only read; :func:`to_tagged_json` /
:func:`from_tagged_json`, the reversible form of a model's JSON state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import StoreError

__all__ = ["from_tagged_json", "json_default", "plain_scalar", "to_tagged_json"]

_JSON_SCALARS = (str, int, float, bool, type(None))


def plain_scalar(v: Any) -> Any:
    """``v`` as a Python ``bool``/``int``/``float`` when it is a NumPy one, else ``v`` itself."""
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def json_default(o: Any) -> Any:
    """The ``default=`` of :func:`json.dumps`: what JSON cannot hold, as JSON.

    NumPy scalars become Python numbers and booleans, NumPy arrays nested
    lists, anything else (paths, dates, objects) its ``str``.
    """
    if isinstance(o, (np.bool_, np.integer, np.floating)):
        return plain_scalar(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def to_tagged_json(v: Any) -> tuple[bool, Any]:
    """``(True, json)`` for a value that JSON can hold once tagged, else ``(False, None)``.

    Lists, tuples (tagged ``{"__tuple__": [...]}``), dicts with string keys,
    Python and NumPy scalars; a non-finite float is tagged
    ``{"__float__": "nan"}`` (or ``"inf"``, ``"-inf"``).
    """
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return True, {"__float__": repr(float(v))}
    v = plain_scalar(v)
    if isinstance(v, _JSON_SCALARS):
        return True, v
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            ok, j = to_tagged_json(x)
            if not ok:
                return False, None
            out.append(j)
        return True, {"__tuple__": out} if isinstance(v, tuple) else out
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        out_d = {}
        for k, x in v.items():
            ok, j = to_tagged_json(x)
            if not ok:
                return False, None
            out_d[k] = j
        return True, out_d
    return False, None


def from_tagged_json(v: Any) -> Any:
    """The value :func:`to_tagged_json` encoded (tuples and non-finite floats restored).

    Raises
    ------
    StoreError
        A ``__float__`` tag that is not ``nan``, ``inf`` or ``-inf``.
    """
    if isinstance(v, dict):
        if set(v) == {"__tuple__"}:
            return tuple(from_tagged_json(x) for x in v["__tuple__"])
        if set(v) == {"__float__"}:
            if v["__float__"] not in ("inf", "-inf", "nan"):
                raise StoreError(f"a stored non-finite number reads {str(v['__float__'])[:20]!r}; "
                                 "the model store is damaged. Re-save the model.")
            return float(v["__float__"])
        return {k: from_tagged_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [from_tagged_json(x) for x in v]
    return v
