"""Which array library a block comes from, for the summaries (which import no dask).

Shared by the modules of :mod:`distsketch.summaries`; the same test as
:func:`distsketch.validation.finite.is_array_api`, whose module imports dask.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from distsketch.ops.namespace import is_numpy, namespace

__all__ = ["is_array_api"]


def is_array_api(values: Any) -> bool:
    """True for an array of a non-NumPy array-API library (CuPy, ``array-api-strict``).

    NumPy arrays, SciPy sparse matrices and dask arrays are not: a dask array
    is recognised only where something already imported ``dask.array``.
    """
    if isinstance(values, np.ndarray) or hasattr(values, "tocsr"):
        return False
    dask_array = sys.modules.get("dask.array")
    if dask_array is not None and isinstance(values, dask_array.Array):
        return False
    import array_api_compat

    return bool(array_api_compat.is_array_api_obj(values)) and not is_numpy(namespace(values))
