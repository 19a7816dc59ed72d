"""The dask config ``distsketch.engine``: which reductions run on the pass engine."""

from __future__ import annotations

from typing import Any

import dask

from distsketch.errors import ConfigError
from distsketch.graph.devices import current_device

__all__ = ["ENGINES", "ENGINE_KEY", "engine_choice", "is_cupy", "on_gpu", "wants_engine"]

#: the dask config key choosing how reductions run
ENGINE_KEY = "distsketch.engine"

#: ``"dask"``: one task per block (the default); ``"device"``: the pass engine;
#: ``"auto"``: the engine when the blocks are CuPy arrays
ENGINES = ("dask", "device", "auto")


def engine_choice() -> str:
    """The dask config ``distsketch.engine``, checked (``"dask"`` unless set).

    Raises
    ------
    ConfigError
        A value other than ``"dask"``, ``"device"`` or ``"auto"``.
    """
    value = dask.config.get(ENGINE_KEY, "dask")
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in ENGINES:
        raise ConfigError(f"dask config {ENGINE_KEY} = {value!r} is not an engine; use 'dask' "
                          "(one dask task per block, the default), 'device' (one task per "
                          "device streams its blocks) or 'auto' (the device engine for CuPy "
                          "blocks), e.g. dask.config.set({'distsketch.engine': 'auto'}) or "
                          "DASK_DISTSKETCH__ENGINE=auto.")
    return str(name)


def is_cupy(meta: Any) -> bool:
    """Whether ``meta`` (a dask array's ``_meta``, a block) is a CuPy array."""
    return type(meta).__module__.split(".")[0] == "cupy"


def wants_engine(data: Any) -> bool:
    """Whether a reduction over the dask array ``data`` runs on the engine (config and blocks)."""
    choice = engine_choice()
    return choice == "device" or (choice == "auto" and is_cupy(getattr(data, "_meta", None)))


def on_gpu(meta: Any) -> bool:
    """Whether the engine computes on the GPU: CuPy blocks, or ``distsketch.device`` is cuda.

    With ``distsketch.device = "cuda"`` host blocks (a store opened with
    ``device="cpu"``) are moved by the engine itself, through its pinned ring.
    """
    return is_cupy(meta) or current_device() == "cuda"
