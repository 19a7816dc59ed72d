"""The array namespace of a block: NumPy on a CPU, CuPy on a GPU, the same kernel code.

Every per-block kernel in :mod:`distsketch.ops` and :mod:`distsketch.summaries`
takes the namespace from its input block (:func:`namespace`), moves its
host-generated operands to the block's device once (:func:`asarray`) and
allocates with that namespace.  Random operators stay pure functions of
``(seed, global index)`` generated on the host with NumPy, so every device
uses exactly the same ``W``, ``b``, hashes and signs.

NumPy blocks get the ``numpy`` module itself (not a wrapper): the NumPy path
is bitwise the code it was before the layer existed.  Any other namespace
(CuPy, ``array-api-strict`` in the tests) is found by ``array_api_compat``.

Where the array API has no equivalent (SciPy's FFT plans, LAPACK drivers,
special functions), kernels call :func:`is_numpy` and keep their SciPy call
on NumPy blocks, and use the namespace's own extension (``xp.fft``,
``xp.linalg``) otherwise, or move a small m x m / l x m finalisation to the
host with :func:`to_host` on purpose (saying so where they do).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["as_block", "asarray", "assign", "buffer", "contiguous", "copy_array", "densify", "device_of",
           "float_dtype", "host_dtype", "host_tree", "inplace", "into", "is_numpy", "is_sparse",
           "namespace", "row_dots", "to_host", "typed_scalar", "xp_dtype", "zeros"]

_SCALARS = (int, float, complex, bool, np.generic)


def namespace(*arrays: Any) -> Any:
    """The array namespace shared by ``arrays`` (``None``, Python scalars, lists and tuples are ignored).

    Returns the ``numpy`` module when every array is a NumPy array or a SciPy
    sparse matrix (whose blocks densify to NumPy), else the namespace
    ``array_api_compat`` finds for them.

    Raises
    ------
    distsketch.errors.InputError
        When the arrays come from different libraries (a NumPy and a CuPy
        block in one call): move them to one device first.
    """
    others = [a for a in arrays
              if a is not None and not isinstance(a, (np.ndarray, *_SCALARS, list, tuple))
              and not is_sparse(a)]
    if not others:
        return np
    import array_api_compat

    try:
        return array_api_compat.array_namespace(*[a for a in arrays if a is not None
                                                  and not isinstance(a, (*_SCALARS, list, tuple))])
    except TypeError as exc:
        from distsketch.errors import InputError

        kinds = sorted({type(a).__module__.split(".")[0] + "." + type(a).__name__
                        for a in arrays if a is not None and not isinstance(a, _SCALARS)})
        raise InputError(
            f"the arrays of one block come from different array libraries ({', '.join(kinds)}); "
            "pass every block and operand on one device (all NumPy, or all CuPy with "
            "device='cuda').") from exc


def is_numpy(xp: Any) -> bool:
    """Whether ``xp`` is NumPy (so SciPy's FFT/LAPACK/sparse routines apply as they are)."""
    return xp is np or getattr(xp, "__name__", "") in ("numpy", "array_api_compat.numpy")


def device_of(x: Any) -> Any:
    """The device of array ``x`` (``"cpu"`` for NumPy arrays and scalars)."""
    if isinstance(x, (np.ndarray, *_SCALARS)) or x is None:
        return "cpu"
    import array_api_compat

    return array_api_compat.device(x)


def asarray(x: Any, like: Any, *, dtype: Any = None) -> Any:
    """``x`` (a host operand or parameter) as an array of ``like``'s namespace and device.

    On NumPy this is ``numpy.asarray(x, dtype=dtype)`` exactly; elsewhere the
    operand is copied to ``like``'s device (once per task: callers hoist it out
    of loops).
    """
    xp = namespace(like)
    if xp is np:
        return np.asarray(x, dtype=dtype)
    if not isinstance(x, (np.ndarray, *_SCALARS, list, tuple)) and namespace(x) is xp:
        return x if dtype is None else xp.astype(x, xp_dtype(xp, dtype), copy=False)
    from distsketch.ops.device import cached_operand

    if (dev := cached_operand(x, like)) is not None:  # an operand already on the device
        return dev if dtype is None else xp.astype(dev, xp_dtype(xp, dtype), copy=False)
    host = np.asarray(to_host(x)) if not isinstance(x, (list, tuple)) else np.asarray(x)
    if dtype is not None:
        host = host.astype(host_dtype(dtype), copy=False)
    return xp.asarray(host, device=device_of(like))


def to_host(x: Any) -> Any:
    """A NumPy copy of array ``x`` (``x`` itself when it is already NumPy or a scalar)."""
    if x is None or isinstance(x, (np.ndarray, *_SCALARS)):
        return x
    if is_sparse(x):
        return x
    get = getattr(x, "get", None)  # CuPy: device to host
    if callable(get) and type(x).__module__.startswith("cupy"):
        return get()
    try:
        return np.from_dlpack(x)
    except (TypeError, RuntimeError, BufferError, AttributeError):
        return np.asarray(x)


def host_tree(state: Any) -> Any:
    """``state`` (nested dicts, lists and tuples of arrays) with every array as NumPy.

    For the small merged summaries a fit finalises on the host on purpose
    (eigendecompositions, solves) and keeps as learned attributes.
    """
    if isinstance(state, dict):
        return {k: host_tree(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(host_tree(v) for v in state)
    if state is None or isinstance(state, (np.ndarray, *_SCALARS)) or is_sparse(state):
        return state
    import array_api_compat

    return to_host(state) if array_api_compat.is_array_api_obj(state) else state


def densify(x: Any) -> Any:
    """``x`` as a dense array: a SciPy sparse matrix/array becomes NumPy, anything else is kept.

    The one place distsketch turns a sparse block dense; callers that need a
    dtype or a copy convert afterwards.
    """
    return x.toarray() if is_sparse(x) else x


def is_sparse(x: Any) -> bool:
    """Whether ``x`` is a SciPy sparse matrix or array (without importing scipy.sparse)."""
    return hasattr(x, "tocsr") and hasattr(x, "toarray")


def as_block(x: Any, dtype: Any = None) -> Any:
    """A block as an array: arrays of any namespace are kept (cast to ``dtype`` in
    their namespace) and SciPy sparse matrices are returned as they are; anything
    else (lists, NumPy arrays) goes through ``numpy.asarray(x, dtype=dtype)``
    exactly as before."""
    if is_sparse(x):
        return x
    if isinstance(x, np.ndarray):
        return np.asarray(x, dtype=dtype)
    import array_api_compat

    if not array_api_compat.is_array_api_obj(x):
        return np.asarray(x, dtype=dtype)
    return asarray(x, like=x, dtype=dtype)


def host_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of ``dtype`` (a NumPy dtype, a scalar type or any namespace's dtype object)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(str(dtype).rsplit(".", 1)[-1].strip("'>"))


def float_dtype(x: Any, dtype: Any = None) -> Any:
    """The float dtype a kernel computes block ``x`` in: ``dtype`` if given, else
    ``x``'s float32/float64, else float64.

    A ``numpy.dtype`` for NumPy (and SciPy sparse) blocks, exactly as the kernels
    computed it before; the namespace's own dtype object for any other block.
    """
    xp = namespace(x)
    if xp is np:
        return np.dtype(dtype or (x.dtype if x.dtype in (np.float32, np.float64) else np.float64))
    if dtype is not None:
        return xp_dtype(xp, dtype)
    return x.dtype if x.dtype in (xp.float32, xp.float64) else xp.float64


def typed_scalar(value: float, dtype: Any) -> Any:
    """``value`` as a scalar of ``dtype`` on NumPy (so a float32 block stays float32 and
    rounds as before); a Python float for other namespaces, which keep the array's dtype."""
    return dtype.type(value) if isinstance(dtype, np.dtype) else float(value)


def inplace(xp: Any, name: str, x: Any, *args: Any) -> Any:
    """``xp.<name>(x, *args)``: written into ``x`` on NumPy (no temporary of the block's
    size), a new array in namespaces without ``out=``."""
    if xp is np:
        return getattr(np, name)(x, *args, out=x)
    return getattr(xp, name)(x, *args)


def into(xp: Any, name: str, *args: Any, out: Any = None) -> Any:
    """``xp.<name>(*args)``: written into ``out`` on NumPy when a buffer is given (reused
    across tiles, so no temporary of the tile's size), a new array otherwise (the array
    API has no ``out=``)."""
    if xp is np and out is not None:
        return getattr(np, name)(*args, out=out)
    return getattr(xp, name)(*args)


def assign(xp: Any, dest: Any, index: Any, name: str, *args: Any) -> None:
    """``dest[index] = xp.<name>(*args)`` in ``dest``'s dtype: computed straight into the
    slice on NumPy (``out=``, no temporary), assigned from a new array elsewhere."""
    if xp is np:
        getattr(np, name)(*args, out=dest[index])
    else:
        dest[index] = xp.astype(getattr(xp, name)(*args), dest.dtype)


def buffer(xp: Any, shape: Any, dtype: Any = np.float64, out: Any = None) -> Any:
    """Scratch of ``shape`` for :func:`into` / :func:`inplace` results.

    On NumPy: the leading elements of the flat buffer ``out`` viewed as ``shape``
    (one allocation reused by every tile of a loop), or a new ``numpy.empty`` when
    ``out`` is None.  ``None`` in other namespaces, whose operations allocate their
    results (:func:`into` then makes a new array).
    """
    if xp is not np:
        return None
    if out is None:
        return np.empty(shape, dtype=dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    return out[: math.prod(shape)].reshape(shape)


def contiguous(xp: Any, x: Any) -> Any:
    """``x`` in C order: ``numpy.ascontiguousarray`` on NumPy (whose BLAS calls and
    reshapes need it), ``x`` itself in other namespaces (which manage their layout)."""
    return np.ascontiguousarray(x) if xp is np else x


def row_dots(xp: Any, A: Any, B: Any) -> Any:
    """``sum(A * B, axis=1)`` (per-row dot products): one ``einsum`` pass on NumPy (no
    product temporary; its rounding is the NumPy path's), the array-API expression elsewhere."""
    return np.einsum("ij,ij->i", A, B) if xp is np else xp.sum(A * B, axis=1)


def zeros(shape: Any, like: Any, *, dtype: Any = None) -> Any:
    """Zeros (float64 by default) in ``like``'s namespace and on its device.

    On NumPy this is ``numpy.zeros(shape, dtype=dtype)`` exactly.
    """
    xp = namespace(like)
    if xp is np:
        return np.zeros(shape, dtype=np.float64 if dtype is None else dtype)
    return xp.zeros(shape, dtype=xp.float64 if dtype is None else xp_dtype(xp, dtype),
                    device=device_of(like))


def xp_dtype(xp: Any, dtype: Any) -> Any:
    """The dtype of namespace ``xp`` named like ``dtype`` (a NumPy dtype or ``xp``'s own)."""
    if xp is np:
        return np.dtype(dtype)
    return getattr(xp, host_dtype(dtype).name)


def copy_array(x: Any) -> Any:
    """A copy of array ``x`` in its namespace: ``x.copy()`` (C order) on NumPy exactly."""
    if isinstance(x, np.ndarray):
        return x.copy()
    return namespace(x).asarray(x, copy=True)
