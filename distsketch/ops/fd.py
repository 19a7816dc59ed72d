"""Frequent Directions (Liberty 2013; Ghashami et al. 2016) as per-block kernels.

A sketch ``B`` (ℓ × m) of a row stream ``A`` (n × m) satisfies, for every
``k < ℓ``::

    0 ⪯ AᵀA − BᵀB   and   ‖AᵀA − BᵀB‖₂ ≤ Δ ≤ ‖A − A_k‖_F² / (ℓ − k)

where Δ is the total shrinkage applied.  Rows are processed ℓ at a time: the
sketch and the next ℓ rows are stacked into one 2ℓ × m buffer, which is
shrunk back to ℓ rows by subtracting its ℓ-th largest squared singular value
δ from every squared singular value.

The shrink works on the small 2ℓ × 2ℓ Gram matrix M Mᵀ (eigendecomposition)
instead of an SVD of the 2ℓ × m buffer: with orthonormal eigenvectors U and
eigenvalues λ, the new sketch is ``diag(√max(0, 1 − δ/λ)) Uᵀ M``, so
``MᵀM − BᵀB = Mᵀ U diag(min(1, δ/λ)) Uᵀ M`` is positive semidefinite with norm
δ up to rounding.  This is about 8× faster than ``numpy.linalg.svd`` on a
128 × 1024 buffer here, and exactly the same update in exact arithmetic.

Precision: float32 rows (NumPy) are shrunk in float32, Δ summed in float64 and
the sketch returned as float64 (values float32, so chaining calls is exact):
about 1.6x faster per row at ℓ = 64, m = 1024, the guarantee then holding up to
float32 rounding (docs/architecture.md, "Precision").  Any other rows are shrunk
in float64.  Off NumPy (CuPy on a GPU) the shrink is the SVD of the stacked
buffer, the same update up to the signs of the sketch's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg as sla

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError, InputError
from distsketch.ops.linalg import fix_signs
from distsketch.ops.namespace import asarray, copy_array, densify, is_numpy, namespace, zeros

__all__ = ["FD_STATES", "fd_block_formulation", "fd_covariance_bytes", "fd_covariance_shrink",
           "fd_covariance_state_bytes", "fd_merge", "fd_shrink", "fd_sketch",
           "fd_sketch_components", "fd_state"]

#: Widest m for which a block's m × m covariance is formed (12·m² bytes per task:
#: the float64 sum and a float32 product, 50 MiB at 2048).
COVARIANCE_MAX_COLUMNS = 2048


#: What a Frequent Directions fit accumulates: ``"sketch"`` (the streaming ℓ × m sketch,
#: shrunk as rows arrive), ``"covariance"`` (the exact m × m ZᵀZ, shrunk once at the
#: end) or ``"auto"`` (:func:`fd_state` chooses).
FD_STATES = ("auto", "sketch", "covariance")


def fd_state(requested: str, m: int, *, on_device: bool) -> str:
    """The state a Frequent Directions fit of width m accumulates.

    Parameters
    ----------
    requested : {"auto", "sketch", "covariance"}
        The caller's choice; ``"sketch"`` and ``"covariance"`` are returned
        as they are.
    m : int
        Width of the sketched rows.
    on_device : bool
        Whether the rows are arrays of a non-NumPy namespace (CuPy on a GPU).

    Returns
    -------
    str
        ``"sketch"`` or ``"covariance"``.  ``"auto"`` gives ``"covariance"``
        on a device when m ≤ :data:`COVARIANCE_MAX_COLUMNS` (a state of
        8·m² bytes, 32 MiB at 2048: one GEMM per block, no eigendecomposition
        until the root, where the streaming sketch needs a small ``eigh``
        every ℓ rows, latency-bound on a GPU), and ``"sketch"`` otherwise:
        NumPy keeps the streaming sketch and its results.

    Raises
    ------
    distsketch.errors.ConfigError
        For a value not in :data:`FD_STATES`.
    """
    if requested not in FD_STATES:
        raise ConfigError(f"Frequent Directions state must be one of {', '.join(FD_STATES)}; "
                          f"got {requested!r}.")
    if requested != "auto":
        return requested
    return "covariance" if on_device and int(m) <= COVARIANCE_MAX_COLUMNS else "sketch"


def fd_covariance_state_bytes(m: int) -> int:
    """Bytes of one covariance state at width m: ZᵀZ in float64, 8·m²."""
    return 8 * int(m) ** 2


def _check_ell(ell: int) -> int:
    if isinstance(ell, bool) or not isinstance(ell, (int, np.integer)) or ell < 1:
        raise ConfigError(f"Frequent Directions sketch size must be an int >= 1; got {ell!r}.")
    return int(ell)


def fd_block_formulation(n_rows: int, m: int, ell: int) -> str:
    """Which formulation folds a block of ``n_rows`` rows of width m into an ℓ-row sketch.

    Returns ``"covariance"`` (one shrink of the block's m × m covariance,
    :func:`fd_covariance_shrink`) or ``"buffer"`` (:func:`fd_sketch`, a shrink
    per ℓ rows), whichever the cost model below says is cheaper per row, in
    GEMM-flop equivalents measured on one core (benchmarks/RESULTS.md, "FD
    block formulation"): buffer 12·ℓ·m + 600·ℓ² (the 2ℓ × 2ℓ ``ssyevd`` per
    ℓ rows runs at ~1/6 of the GEMM rate), covariance 2·m² + 12·m³/n (the top-ℓ
    ``dsyevr`` of an m × m matrix once per block).  A pure function of the
    shapes, so the choice is the same on every device.
    """
    n, m, ell = int(n_rows), int(m), int(ell)
    if m > COVARIANCE_MAX_COLUMNS or n < 2 * ell or n < 1:
        return "buffer"
    buffer = 12.0 * ell * m + 600.0 * ell * ell
    covariance = 2.0 * m * m + 12.0 * m ** 3 / n
    return "covariance" if covariance < buffer else "buffer"


def fd_covariance_bytes(m: int) -> int:
    """Task memory of the covariance formulation at width m (0 where it is never chosen)."""
    return 12 * int(m) ** 2 if int(m) <= COVARIANCE_MAX_COLUMNS else 0


def fd_covariance_shrink(C: Any, ell: int) -> tuple[Any, float]:
    """Frequent Directions sketch of rows A given only their covariance C = AᵀA.

    Parameters
    ----------
    C : array of shape (m, m), float64
        Symmetric positive semidefinite (a sum of ZᵀZ), in any namespace.
    ell : int
        Sketch size ℓ.

    Returns
    -------
    sketch : array of shape (ell, m), float64, in C's namespace
        ``diag(√max(0, λᵢ − δ)) Vᵀ`` for the ℓ largest eigenpairs (λᵢ, vᵢ) of C;
        zero rows pad a width below ℓ.
    shrinkage : float
        δ = λ_ℓ, the ℓ-th largest eigenvalue (0 when m ≤ ℓ: the sketch then
        holds C exactly).  ``0 ⪯ C − BᵀB`` and ``‖C − BᵀB‖₂ = δ`` up to float64
        rounding: one FD shrink of a buffer holding all the rows.

    Notes
    -----
    Cost: one top-ℓ eigendecomposition of an m × m matrix in float64 (LAPACK
    ``dsyevr`` on NumPy, the namespace's full ``eigh`` elsewhere: ``cupy``'s
    runs on the device); memory O(m²).  Float64 even for float32 rows: the
    float32 ``ssyevr`` is 1.6× faster at m = 1024 but moves δ by u·‖C‖₂, more
    than the float32 products of C do.
    """
    ell = _check_ell(ell)
    xp = namespace(C)
    m = int(C.shape[0])
    k = min(ell, m)
    if is_numpy(xp):
        lam, V = sla.eigh(np.asarray(C, dtype=np.float64), driver="evr",
                          subset_by_index=(m - k, m - 1), check_finite=False)
    else:
        lam, V = xp.linalg.eigh(xp.astype(C, xp.float64))
        lam, V = lam[m - k:], V[:, m - k:]
    # ascending: largest first
    lam = xp.clip(xp.flip(lam, axis=0), 0.0, None)
    V = xp.flip(V, axis=1)
    delta = float(lam[k - 1]) if m > ell else 0.0
    out = xp.sqrt(xp.clip(lam - delta, 0.0, None))[:, None] * V.T
    if k < ell:
        out = xp.concat([out, zeros((ell - k, m), out)], axis=0)
    return out, delta


def fd_shrink(M: np.ndarray, ell: int) -> tuple[np.ndarray, float]:
    """Shrink a small buffer of rows to an ℓ-row Frequent Directions sketch.

    Parameters
    ----------
    M : ndarray of shape (r, m)
        Rows to compress (typically a sketch stacked with ≤ ℓ new rows).
    ell : int
        Sketch size ℓ.

    Returns
    -------
    sketch : ndarray of shape (ell, m), float64 (float32 for float32 M on NumPy)
        Rows ordered by decreasing norm; zero rows pad a rank below ℓ.
    shrinkage : float
        δ, the ℓ-th largest squared singular value of M (0 if M has at most ℓ
        rows, in which case ``sketch`` is M padded with zero rows).

    Notes
    -----
    Cost: 2·r²·m flops for M Mᵀ, O(r³) for its eigendecomposition and
    2·ℓ·r·m flops to rebuild the sketch; memory O(r·m + ℓ·m).  A float32 M
    is shrunk in float32 (see the module notes), any other in float64.
    """
    ell = _check_ell(ell)
    xp = namespace(M)
    single = is_numpy(xp) and M.dtype == np.float32
    M = M if single else asarray(M, like=M, dtype=xp.float64)
    if M.ndim != 2:
        raise InputError(f"fd_shrink expects a 2-D array of rows; got shape {M.shape}.")
    if not is_numpy(xp):
        return _shrink_svd(xp, M, ell)
    r, m = M.shape
    out = np.zeros((ell, m), dtype=M.dtype)
    if r <= ell:
        out[:r] = M
        return out, 0.0
    if single:
        # LAPACK's divide and conquer (ssyevd) straight, without NumPy's extra work
        lam, U = sla.eigh(M @ M.T, driver="evd", overwrite_a=True, check_finite=False)
    else:
        lam, U = np.linalg.eigh(M @ M.T)
    # eigh is ascending: take the ℓ largest, largest first
    lam = np.maximum(lam[::-1][:ell], 0.0)
    U = U[:, ::-1][:, :ell]
    delta = float(lam[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(lam > 0.0, np.sqrt(np.maximum(0.0, 1.0 - delta / lam)), 0.0)
    np.matmul((U * w[None, :].astype(U.dtype)).T, M, out=out)
    return out, delta


def _shrink_svd(xp: Any, M: Any, ell: int) -> tuple[Any, float]:
    """:func:`fd_shrink` off NumPy: ``diag(√max(0, σ² − δ)) Vᵀ`` from the SVD of the buffer."""
    r, m = M.shape
    if r <= ell:
        return xp.concat([M, zeros((ell - r, m), M)], axis=0), 0.0
    _, s, Vt = xp.linalg.svd(M, full_matrices=False)
    k = min(ell, s.shape[0])
    delta = float(s[ell - 1] ** 2) if s.shape[0] >= ell else 0.0
    out = xp.sqrt(xp.clip(s[:k] ** 2 - delta, 0.0, None))[:, None] * Vt[:k, :]
    if k < ell:
        out = xp.concat([out, zeros((ell - k, m), M)], axis=0)
    return out, delta


def fd_sketch(A: np.ndarray, ell: int, *, sketch: np.ndarray | None = None,
              shrinkage: float = 0.0) -> tuple[np.ndarray, float]:
    """Fold the rows of ``A`` into a Frequent Directions sketch, ℓ rows at a time.

    Parameters
    ----------
    A : ndarray of shape (n, m) or scipy sparse
        New rows (any float dtype; copied into a float64 buffer piece by piece).
    ell : int
        Sketch size ℓ.
    sketch : ndarray of shape (ell, m), optional
        Sketch to continue from (default: empty).
    shrinkage : float
        Shrinkage already accumulated by ``sketch``.

    Returns
    -------
    sketch : ndarray of shape (ell, m), float64
    shrinkage : float
        Total shrinkage Δ; ``‖AᵀA − BᵀB‖₂ ≤ Δ``.

    Notes
    -----
    Rows are stacked onto the sketch ℓ at a time (never one by one) in a reused
    2ℓ × m buffer.  The result depends only on the rows and the starting
    sketch: splitting ``A`` at multiples of ℓ rows and chaining calls gives
    bitwise the same sketch.  Cost per row: about 12·ℓ·m flops; memory
    2ℓ·m float64 plus one ℓ-row piece of A.
    """
    ell = _check_ell(ell)
    if A.ndim != 2:
        raise InputError(f"fd_sketch expects a 2-D array of rows; got shape {A.shape}.")
    n, m = A.shape
    if sketch is None:
        sketch = zeros((ell, m), A)
    elif sketch.shape != (ell, m):
        raise InputError(
            f"fd_sketch: the starting sketch has shape {sketch.shape}, expected {(ell, m)} "
            "(sketch_size x number of columns)."
        )
    total = float(shrinkage)
    # float32 rows are shrunk in float32 (a float64 sketch of float32 values round-trips)
    single = isinstance(A, np.ndarray) or hasattr(A, "tocsr")
    single = single and A.dtype == np.float32
    buf = zeros((2 * ell, m), A, dtype=np.float32) if single else zeros((2 * ell, m), A)
    buf[:ell, :] = asarray(sketch, like=buf, dtype=buf.dtype)
    for start in range(0, n, ell):
        stop = min(n, start + ell)
        piece = densify(A[start:stop, :])
        rows = stop - start
        buf[ell: ell + rows, :] = piece
        new, delta = fd_shrink(buf[: ell + rows, :], ell)
        total += delta
        buf[:ell, :] = new
    return (buf[:ell, :].astype(np.float64) if single else copy_array(buf[:ell, :])), total


def fd_merge(sketches: Sequence[np.ndarray], ell: int,
             shrinkages: Sequence[float] | None = None) -> tuple[np.ndarray, float]:
    """Merge Frequent Directions sketches of disjoint row sets (stack + shrink).

    Parameters
    ----------
    sketches : sequence of ndarray of shape (ell_i, m)
        Sketches to merge, in order.
    ell : int
        Sketch size of the result.
    shrinkages : sequence of float, optional
        Their accumulated shrinkages (default 0).

    Returns
    -------
    sketch : ndarray of shape (ell, m), float64
    shrinkage : float
        Sum of the inputs' shrinkages and of the merge's own.

    Notes
    -----
    The merged sketch keeps the guarantee ‖AᵀA − BᵀB‖₂ ≤ ‖A − A_k‖_F²/(ℓ − k)
    for the union of rows (Agarwal et al., Mergeable summaries, 2012).  The
    inputs are folded into the first one ℓ rows at a time, so memory stays
    O(ℓ·m) beyond the inputs whatever their number.
    """
    ell = _check_ell(ell)
    if len(sketches) == 0:
        raise InputError("fd_merge needs at least one sketch.")
    widths = {s.shape[1] for s in sketches}
    if len(widths) != 1:
        raise InputError(f"fd_merge: sketches have different widths {sorted(widths)}; "
                         "only sketches of the same feature space can be merged.")
    shr = list(shrinkages) if shrinkages is not None else [0.0] * len(sketches)
    # a host identity sketch (``empty()``) meets device sketches on their device
    like = next((s for s in sketches if not isinstance(s, (np.ndarray, list))), sketches[0])
    xp = namespace(like)
    first = asarray(sketches[0], like=like, dtype=xp.float64)
    if first.shape[0] == ell:
        acc, total = copy_array(first), float(shr[0])
    else:
        acc, total = fd_sketch(first, ell, shrinkage=float(shr[0]))
    for s, d in zip(sketches[1:], shr[1:], strict=True):
        acc, total = fd_sketch(asarray(s, like=like), ell, sketch=acc,
                               shrinkage=total + float(d))
    return acc, total


@single_threaded_blas
def fd_sketch_components(sketch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Right singular vectors and singular values of a sketch (largest first).

    Parameters
    ----------
    sketch : ndarray of shape (ell, m)

    Returns
    -------
    components : ndarray of shape (min(ell, m), m)
        Orthonormal rows; the sign of each row is fixed so that its largest
        absolute entry is positive (deterministic output).
    singular_values : ndarray of shape (min(ell, m),)
        Both in the sketch's namespace (the ℓ × m SVD runs where the sketch is).
    """
    xp = namespace(sketch)
    _, s, Vt = xp.linalg.svd(asarray(sketch, like=sketch, dtype=xp.float64),
                             full_matrices=False)
    return fix_signs(Vt, axis=1), s
