"""Exact kernel functions, evaluated block by block on the blocks' array namespace.

These are the references every approximation is measured against, and the
kernels that Nyström/MEKA and the exact solvers evaluate on tiles.

Kernels (``gamma`` is a scale, ``coef0``/``degree`` as in scikit-learn):

=============  ==============================================================
``"rbf"``      exp(-gamma ||x - y||^2)   (alias ``"gaussian"``)
``"laplacian"`` exp(-gamma ||x - y||_1)
``"cauchy"``   1 / (1 + gamma ||x - y||^2)
``"polynomial"`` (gamma <x, y> + coef0) ** degree
``"linear"``   <x, y>
``"arccos0"``  1 - theta / pi                       (Cho & Saul, order 0)
``"arccos1"``  |x||y| (sin theta + (pi - theta) cos theta) / pi   (order 1)
``"ntk"``      |x||y| (cos theta * k0(theta) + k1(theta)), two-layer ReLU NTK
=============  ==============================================================

A user callable ``f(X, Y) -> ndarray (len(X), len(Y))`` is accepted wherever a
kernel name is.  A row whose squared norm overflows the working dtype is refused by
:func:`check_row_magnitude` instead of yielding inf - inf = NaN kernel values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError
from distsketch.footprint import Footprint
from distsketch.ops.namespace import as_block, asarray, host_dtype, inplace, namespace, row_dots

__all__ = [
    "BOUNDED_KERNELS",
    "KERNELS",
    "KERNEL_ALIASES",
    "KERNEL_NAMES",
    "MAGNITUDE_HEADROOM",
    "PROJECTABLE_KERNELS",
    "SHIFT_INVARIANT",
    "SHIFT_INVARIANT_NAMES",
    "bad_input_flag",
    "check_row_magnitude",
    "first_oversized_row",
    "kernel_columns",
    "kernel_columns_footprint",
    "kernel_diagonal",
    "kernel_function",
    "max_row_sqnorm",
    "oversized_flag",
    "pairwise_kernel",
    "resolve_kernel_params",
]

KernelFn = Callable[..., np.ndarray]


def _sqdist(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    xp = namespace(X, Y)
    xx = row_dots(xp, X, X)[:, None]
    yy = row_dots(xp, Y, Y)[None, :]
    d = xx + yy - 2.0 * (X @ Y.T)
    return inplace(xp, "maximum", d, 0.0)


def _rbf(X, Y, *, gamma):
    d = _sqdist(X, Y)
    d *= -gamma
    return inplace(namespace(d), "exp", d)


def _laplacian(X, Y, *, gamma):
    xp = namespace(X, Y)
    out = xp.empty((X.shape[0], Y.shape[0]), dtype=xp.float64, device=X.device)
    step = max(1, int(2**22 // max(1, Y.shape[0] * X.shape[1])))
    for i in range(0, X.shape[0], step):
        j = min(i + step, X.shape[0])
        out[i:j, ...] = xp.sum(xp.abs(X[i:j, None, :] - Y[None, :, :]), axis=2)
    out *= -gamma
    return inplace(xp, "exp", out)


def _cauchy(X, Y, *, gamma):
    d = _sqdist(X, Y)
    d *= gamma
    d += 1.0
    return inplace(namespace(d), "reciprocal", d)


def _polynomial(X, Y, *, gamma, coef0, degree):
    return (gamma * (X @ Y.T) + coef0) ** degree


def _linear(X, Y):
    return X @ Y.T


def _cos_and_norms(X, Y):
    xp = namespace(X, Y)
    if xp is not np:
        nx, ny = xp.linalg.vector_norm(X, axis=1), xp.linalg.vector_norm(Y, axis=1)
        denom = nx[:, None] * ny[None, :]
        pos = denom > 0
        c = xp.where(pos, (X @ Y.T) / xp.where(pos, denom, xp.ones_like(denom)), xp.zeros_like(denom))
        return xp.clip(c, -1.0, 1.0), denom
    nx = np.linalg.norm(X, axis=1)
    ny = np.linalg.norm(Y, axis=1)
    denom = np.outer(nx, ny)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where(denom > 0, (X @ Y.T) / np.where(denom > 0, denom, 1.0), 0.0)
    return np.clip(c, -1.0, 1.0), denom


def arccos0_profile(t: np.ndarray) -> np.ndarray:
    """kappa_0(t) = (pi - arccos t) / pi, the order-0 arc-cosine profile."""
    xp = namespace(t)
    return (np.pi - xp.acos(xp.clip(t, -1.0, 1.0))) / np.pi


def arccos1_profile(t: np.ndarray) -> np.ndarray:
    """kappa_1(t) = (sqrt(1 - t^2) + (pi - arccos t) t) / pi."""
    xp = namespace(t)
    t = xp.clip(t, -1.0, 1.0)
    return (xp.sqrt(1.0 - t * t) + (np.pi - xp.acos(t)) * t) / np.pi


def ntk_profile(t: np.ndarray) -> np.ndarray:
    """Two-layer ReLU NTK on the sphere: t * kappa_0(t) + kappa_1(t)."""
    return t * arccos0_profile(t) + arccos1_profile(t)


def _arccos0(X, Y):
    c, _ = _cos_and_norms(X, Y)
    return arccos0_profile(c)


def _arccos1(X, Y):
    c, n = _cos_and_norms(X, Y)
    return n * arccos1_profile(c)


def _ntk(X, Y):
    c, n = _cos_and_norms(X, Y)
    return n * ntk_profile(c)


KERNELS: dict[str, tuple[KernelFn, tuple[str, ...]]] = {
    "rbf": (_rbf, ("gamma",)),
    "laplacian": (_laplacian, ("gamma",)),
    "cauchy": (_cauchy, ("gamma",)),
    "polynomial": (_polynomial, ("gamma", "coef0", "degree")),
    "linear": (_linear, ()),
    "arccos0": (_arccos0, ()),
    "arccos1": (_arccos1, ()),
    "ntk": (_ntk, ()),
}
KERNEL_ALIASES = {"gaussian": "rbf", "poly": "polynomial", "cosine_arc0": "arccos0"}
# The kernel names an estimator's ``kernel`` parameter accepts: every kernel above and
# the scikit-learn spellings "gaussian" and "poly" ("cosine_arc0" resolves but is not
# offered).
KERNEL_NAMES = frozenset(KERNELS) | {"gaussian", "poly"}
SHIFT_INVARIANT = frozenset({"rbf", "laplacian", "cauchy"})
# names accepted where a shift-invariant kernel is needed (random Fourier features)
SHIFT_INVARIANT_NAMES = SHIFT_INVARIANT | {"gaussian"}
# kernels with |k(x, y)| <= 1 for all inputs (sparsification's quantisation level needs no pass)
BOUNDED_KERNELS = frozenset({"rbf", "gaussian", "laplacian", "cauchy", "arccos0"})
# kernels that depend on the data only through distances, inner products and norms, so a
# random projection preserves them (the L1 laplacian kernel does not qualify)
PROJECTABLE_KERNELS = KERNEL_NAMES - {"laplacian"}


def resolve_kernel_params(
    kernel: str | Callable, n_features: int, gamma: float | None = None,
    degree: int = 3, coef0: float = 1.0,
) -> tuple[str | Callable, dict[str, Any]]:
    """Canonical kernel name and the parameters it takes.

    ``gamma=None`` means ``1 / n_features`` (scikit-learn's default).
    """
    if callable(kernel):
        return kernel, {}
    name = KERNEL_ALIASES.get(str(kernel), str(kernel))
    if name not in KERNELS:
        raise ConfigError(
            f"unknown kernel {kernel!r}; choose one of {sorted(KERNELS)} or pass a callable "
            "f(X, Y) returning the kernel block."
        )
    g = 1.0 / max(1, n_features) if gamma is None else float(gamma)
    if not (math.isfinite(g) and math.isfinite(float(coef0))):
        raise ConfigError(f"gamma={gamma} and coef0={coef0} must be finite for the {name} "
                          "kernel; an infinite scale makes every kernel value NaN or 0.")
    if g <= 0 and name != "polynomial":
        raise ConfigError(f"gamma must be > 0 for the {name} kernel; got {gamma}.")
    all_params = {"gamma": g, "coef0": float(coef0), "degree": int(degree)}
    return name, {k: all_params[k] for k in KERNELS[name][1]}


def kernel_function(kernel: str | Callable, **params: Any) -> KernelFn:
    """A function ``f(X, Y)`` evaluating the named kernel with ``params`` bound."""
    if callable(kernel):
        return kernel
    name = KERNEL_ALIASES.get(kernel, kernel)
    if name not in KERNELS:
        raise ConfigError(f"unknown kernel {kernel!r}; choose one of {sorted(KERNELS)}.")
    fn, names = KERNELS[name]
    bound = {k: params[k] for k in names if k in params}
    missing = [k for k in names if k not in bound]
    if missing:
        raise ConfigError(f"kernel {name!r} needs parameters {missing}.")

    def f(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return fn(as_block(X, dtype=np.float64), as_block(Y, dtype=np.float64), **bound)

    return f


def pairwise_kernel(
    X: np.ndarray, Y: np.ndarray | None = None, kernel: str | Callable = "rbf", **params: Any
) -> np.ndarray:
    """Exact kernel block K(X, Y) in float64.

    Parameters
    ----------
    X : ndarray of shape (n_a, d)
    Y : ndarray of shape (n_b, d), default X
    kernel : str or callable
        A name from :data:`KERNELS` or a callable.
    **params
        Kernel parameters (``gamma``, ``coef0``, ``degree``).

    Returns
    -------
    ndarray of shape (n_a, n_b), float64
    """
    return kernel_function(kernel, **params)(X, X if Y is None else Y)


def kernel_columns(block: Any, row_offset: int, landmarks: np.ndarray, *, kernel: Any,
                   params: dict) -> np.ndarray:
    """``K(block, landmarks)`` as a row map (``row_offset`` unused).

    Exists so that the kernel columns ``K_nM`` of a Nyström preconditioner
    are one map over row blocks; the host landmarks move to the block's device.
    """
    return pairwise_kernel(block, asarray(landmarks, like=block), kernel, **params)


def kernel_columns_footprint(n_features: int, n_landmarks: int) -> Footprint:
    """Memory of one :func:`kernel_columns` task: the row and two M-wide rows (kernel and output)."""
    return Footprint(per_row=8.0 * (n_features + 2 * n_landmarks))


def kernel_diagonal(X: np.ndarray, kernel: str | Callable = "rbf", **params: Any) -> np.ndarray:
    """The diagonal K(x_i, x_i) without forming the block (shape (n,))."""
    name = kernel if callable(kernel) else KERNEL_ALIASES.get(kernel, kernel)
    X = as_block(X, dtype=np.float64)
    xp = namespace(X)
    if name in SHIFT_INVARIANT:
        return xp.ones(X.shape[0], dtype=X.dtype, device=X.device)
    if name == "arccos0":
        nonzero = xp.any(X != 0, axis=1)
        return np.where(nonzero, 1.0, 0.5) if xp is np else 0.5 + 0.5 * xp.astype(nonzero, X.dtype)
    sq = row_dots(xp, X, X)
    if name == "linear":
        return sq
    if name in ("arccos1", "ntk"):
        return sq * (1.0 if name == "arccos1" else 2.0)
    if name == "polynomial":
        return (params["gamma"] * sq + params["coef0"]) ** params["degree"]
    f = kernel_function(kernel, **params)
    if xp is not np:
        if X.shape[0] == 0:
            return xp.zeros(0, dtype=X.dtype, device=X.device)
        return xp.concat([xp.reshape(f(X[i:i + 1, ...], X[i:i + 1, ...]), (1,))
                          for i in range(X.shape[0])])
    return np.array([f(X[i:i + 1], X[i:i + 1])[0, 0] for i in range(X.shape[0])])


# ||x - y||^2 = ||x||^2 + ||y||^2 - 2<x, y> sums terms up to 4 max(||x||^2, ||y||^2): keep
# a factor 16 below the dtype's largest value
MAGNITUDE_HEADROOM = 16.0


def max_row_sqnorm(dtype: Any) -> float:
    """The largest squared row norm kernels evaluate without overflow in ``dtype``."""
    return float(np.finfo(dtype).max) / MAGNITUDE_HEADROOM


def first_oversized_row(block: Any) -> tuple[int, float] | None:
    """The first row whose squared norm exceeds :func:`max_row_sqnorm` of its dtype.

    Parameters
    ----------
    block : ndarray or scipy.sparse matrix of shape (k, d)
        Floating rows, already checked for NaN/Inf (non-finite blocks and
        integer blocks pass: they are another check's business).

    Returns
    -------
    (row, log10 of its squared norm) or None

    Notes
    -----
    One BLAS dot product over the block in the common case (the block's
    total squared norm bounds every row's); the exact per-row norms (a
    float64 copy of the block) only when that total is near the limit.
    """
    sparse = hasattr(block, "tocsr")
    block = as_block(block)
    xp = namespace(block)
    data = block.tocsr().data if sparse else block
    if data.size == 0 or not xp.isdtype(data.dtype, "real floating"):
        return None
    limit = max_row_sqnorm(host_dtype(data.dtype))
    with np.errstate(all="ignore"):
        # one BLAS pass on NumPy: no row's squared norm exceeds the block's total (half the
        # limit leaves room for the rounding of a float32 sum); other namespaces have no
        # vdot and go straight to the scaled norms, computed on the block's device
        if xp is np and float(np.vdot(flat := data.ravel(order="K"), flat)) <= limit / 2:
            return None
        amax = max(float(xp.max(data)), -float(xp.min(data)))
    if not math.isfinite(amax) or amax == 0.0:
        return None
    # scaled by the largest magnitude, the squared norms are at most d: no overflow
    if sparse:
        csr = block.tocsr().astype(np.float64)
        csr.data = (csr.data / amax) ** 2
        scaled = np.asarray(csr.sum(axis=1)).ravel()
    else:
        rows = asarray(block, like=block, dtype=np.float64) / amax
        scaled = row_dots(xp, rows, rows)
    with np.errstate(divide="ignore"):
        log_sq = xp.log10(scaled) + 2.0 * math.log10(amax)
    bad = xp.nonzero(log_sq > math.log10(limit))[0]
    if bad.shape[0] == 0:
        return None
    # only the verdict comes back to the host
    row = int(bad[0])
    return row, float(log_sq[row])


def oversized_flag(block: Any) -> Any:
    """Whether some row of a device block is too large, as a 0-d bool array on its device.

    The deferred form of :func:`first_oversized_row` for blocks of another
    namespace (CuPy): the same scaled squared norms, with the verdict left on
    the device so that a pass reads all its blocks' flags at once instead of
    synchronising per block.  A non-finite block gives False here (the
    finiteness flag reports it).

    Parameters
    ----------
    block : array of a non-NumPy namespace, shape (k, d)

    Returns
    -------
    0-d bool array on ``block``'s device
    """
    xp = namespace(block)
    if block.size == 0 or not xp.isdtype(block.dtype, "real floating"):
        return xp.asarray(False, device=block.device)
    limit = max_row_sqnorm(host_dtype(block.dtype))
    amax = xp.max(xp.abs(block))
    usable = xp.isfinite(amax) & (amax > 0)
    # an unusable scale (0, inf, NaN) is replaced by 1 and its verdict masked out below
    scale = xp.astype(xp.where(usable, amax, xp.ones_like(amax)), xp.float64)
    with np.errstate(all="ignore"):
        rows = xp.astype(block, xp.float64) / scale
        log_sq = xp.log10(row_dots(xp, rows, rows)) + 2.0 * xp.log10(scale)
    return usable & xp.any(log_sq > math.log10(limit))


def check_row_magnitude(block: Any, offset: int, where: str = "input") -> None:
    """Raise :class:`InputError` naming the first row too large for kernel computations.

    Parameters
    ----------
    block : ndarray or scipy.sparse matrix of shape (k, d)
    offset : int
        Global index of the block's first row.
    where : str
        The input's name in the message.

    Raises
    ------
    InputError
        A finite row whose squared norm overflows ``block.dtype`` (e.g. values
        near 1e300 in float64, or 1e20 in float32).
    """
    found = first_oversized_row(block)
    if found is None:
        return
    row, log_sq = found
    dtype = host_dtype(block.dtype)
    hint = " or convert it to float64" if dtype == np.float32 else ""
    raise InputError(
        f"{where}: row {offset + row} is too large for kernel computations in {dtype}: its "
        f"squared norm is about 1e{log_sq:.0f}, above {max_row_sqnorm(dtype):.3g}, so kernel "
        f"values would overflow to inf/NaN. Scale the data (e.g. "
        f"sklearn.preprocessing.StandardScaler, or divide by a constant){hint} first."
    )


def bad_input_flag(block: Any) -> Any:
    """NaN/Inf or an oversized row in a device block, as a 0-d bool on its device.

    The verdict of the synchronous input checks (finiteness, then
    :func:`first_oversized_row`) without reading anything back; for blocks
    of a non-NumPy namespace, whose checks a pass reads once at its end.
    """
    xp = namespace(block)
    flag = oversized_flag(block)
    if xp.isdtype(block.dtype, ("real floating", "complex floating")):
        flag = flag | ~xp.all(xp.isfinite(block))
    return flag
