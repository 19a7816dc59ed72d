"""The device option: ``"cpu"`` (NumPy blocks, the default) or ``"cuda"`` (CuPy blocks).

One vocabulary for every entry point (``open_array(device=...)``, the dask
config key ``distsketch.device``, the CLI's ``--device``, a workflow spec's
``device:``).  CuPy is imported only here and only when ``"cuda"`` is asked
for, so a CPU install never needs it and a CPU run never loads it.

Operands (``W``, ``b``, ``mu``, ``sigma``, centres, hashes: host arrays every
block of a pass needs) are copied to a device once per process
(:func:`cache_operand`, called by the task runner) and found there by
:func:`distsketch.ops.namespace.asarray` (:func:`cached_operand`) instead of
being uploaded again for every block.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from distsketch.errors import ConfigError

__all__ = ["DEVICES", "GPU_INSTALL", "OPERAND_CACHE_BYTES", "OPERAND_CACHE_ENTRIES",
           "cache_operand", "cached_operand", "check_device", "clear_operand_cache",
           "device_memory", "device_meta", "require_cupy", "to_device"]

#: the devices distsketch computes on
DEVICES = ("cpu", "cuda")

#: what to install for ``device="cuda"`` (docs/gpu.md says which CuPy wheel for which CUDA)
GPU_INSTALL = "pip install 'distsketch[gpu]'"


def check_device(device: Any, where: str = "device") -> str:
    """``device`` checked: ``"cpu"`` or ``"cuda"`` (any case, surrounding blanks ignored).

    Raises
    ------
    ConfigError
        Any other value, naming the two accepted.
    """
    name = device.strip().lower() if isinstance(device, str) else device
    if name not in DEVICES:
        raise ConfigError(f"{where} = {device!r} is not a device distsketch computes on; use "
                          "'cpu' (NumPy blocks, the default) or 'cuda' (CuPy blocks on an "
                          "NVIDIA GPU, needs " + GPU_INSTALL + ").")
    return str(name)


def require_cupy(where: str = "device='cuda'") -> Any:
    """The ``cupy`` module, after checking that it imports and sees a GPU.

    Raises
    ------
    ConfigError
        CuPy is not installed (naming the extra and docs/gpu.md for the wheel
        of the machine's CUDA), or it is installed but no CUDA device is
        visible (a CPU-only machine, ``CUDA_VISIBLE_DEVICES`` empty, no driver).
    """
    try:
        import cupy
    except ImportError as exc:
        raise ConfigError(f"{where} needs CuPy, which is not installed: {GPU_INSTALL} (CuPy for "
                          "CUDA 12; docs/gpu.md names the wheel for CUDA 11 or 13), or compute "
                          "on the CPU (device='cpu', CLI --device cpu).") from exc
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError without a driver, ImportError of libcudart
        raise ConfigError(f"{where}: CuPy is installed but cannot reach a GPU "
                          f"({type(exc).__name__}: {exc}). Check the NVIDIA driver, that the "
                          "CuPy wheel matches the machine's CUDA (docs/gpu.md), or use "
                          "device='cpu'.") from exc
    if count < 1:
        raise ConfigError(f"{where}: CuPy is installed but no GPU is visible (check "
                          "CUDA_VISIBLE_DEVICES and nvidia-smi), or use device='cpu'.")
    return cupy


def to_device(block: Any, device: str) -> Any:
    """``block`` on ``device``: itself on ``"cpu"``, ``cupy.asarray(block)`` on ``"cuda"``."""
    if device == "cpu":
        return block
    import cupy

    return cupy.asarray(block)


def device_meta(dtype: Any, device: str, ndim: int = 2) -> Any:
    """An empty array of ``dtype`` on ``device`` (a dask array's ``meta``)."""
    shape = (0,) * ndim
    if device == "cpu":
        return np.empty(shape, dtype=dtype)
    import cupy

    return cupy.empty(shape, dtype=np.dtype(dtype))


def device_memory() -> int:
    """Total memory, in bytes, of the current CUDA device of this process (CuPy's ``mem_info``).

    The total, not the momentary free memory, so that a plan is the same on
    every run on one machine (as for host memory).
    """
    cupy = require_cupy()
    return int(cupy.cuda.Device().mem_info[1])


#: at most this many operand copies are kept on devices per process (least recently used go)
OPERAND_CACHE_ENTRIES = 32
#: and at most this many bytes of them; a larger operand is uploaded per use, as before
OPERAND_CACHE_BYTES = 1 << 30

_OPERANDS: OrderedDict[tuple, tuple[np.ndarray, Any]] = OrderedDict()
_OPERANDS_LOCK = threading.Lock()


def _operand_key(host: np.ndarray, like: Any) -> tuple:
    # the host array is held by its entry, so its id is not reused while the entry lives;
    # the data pointer, shape and dtype tell a view or a re-allocated array apart
    import array_api_compat

    xp = array_api_compat.array_namespace(like)
    return (id(host), host.__array_interface__["data"][0], host.shape, host.strides,
            host.dtype.str, getattr(xp, "__name__", str(xp)), str(array_api_compat.device(like)))


def cached_operand(host: Any, like: Any) -> Any | None:
    """The device copy of host array ``host`` on ``like``'s device, if cached; else None.

    Looks up only: per-block temporaries never enter the cache.
    """
    if not isinstance(host, np.ndarray) or isinstance(like, np.ndarray) or not _OPERANDS:
        return None
    key = _operand_key(host, like)
    with _OPERANDS_LOCK:
        hit = _OPERANDS.get(key)
        if hit is None:
            return None
        _OPERANDS.move_to_end(key)
        return hit[1]


def cache_operand(host: Any, like: Any) -> Any:
    """``host`` copied to ``like``'s device once per process, and that copy.

    Parameters
    ----------
    host : ndarray
        An operand of a pass (numeric or boolean); anything else is returned as is.
    like : array of a non-NumPy namespace
        A block on the device the operand is wanted on.

    Returns
    -------
    array
        The device copy (the same object for every block of every pass while
        cached), or ``host`` itself when it is not a numeric host array or is
        above :data:`OPERAND_CACHE_BYTES`.

    Notes
    -----
    Operands are read-only for the passes that use them (learned attributes,
    graph keys): an operand changed in place after it was cached keeps its
    old device copy until :func:`clear_operand_cache`.
    """
    if (not isinstance(host, np.ndarray) or host.dtype.kind not in "biufc"
            or isinstance(like, np.ndarray) or host.nbytes > OPERAND_CACHE_BYTES):
        return host
    found = cached_operand(host, like)
    if found is not None:
        return found
    import array_api_compat

    xp = array_api_compat.array_namespace(like)
    dev = xp.asarray(host, device=array_api_compat.device(like))
    with _OPERANDS_LOCK:
        _OPERANDS[_operand_key(host, like)] = (host, dev)
        total = sum(h.nbytes for h, _ in _OPERANDS.values())
        while len(_OPERANDS) > OPERAND_CACHE_ENTRIES or total > OPERAND_CACHE_BYTES:
            old, _ = _OPERANDS.popitem(last=False)[1]
            total -= old.nbytes
    return dev


def clear_operand_cache() -> None:
    """Drop every cached device copy of an operand (frees their device memory)."""
    with _OPERANDS_LOCK:
        _OPERANDS.clear()
