"""The device option: ``"cpu"`` (NumPy blocks, the default) or ``"cuda"`` (CuPy blocks).

One vocabulary for every entry point (``open_array(device=...)``, the dask
config key ``distsketch.device``, the CLI's ``--device``, a workflow spec's
``device:``).  CuPy is imported only here and only when ``"cuda"`` is asked
for, so a CPU install never needs it and a CPU run never loads it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError

__all__ = ["DEVICES", "GPU_INSTALL", "check_device", "device_memory", "device_meta",
           "require_cupy", "to_device"]

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
