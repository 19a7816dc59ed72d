"""Per-block pieces of MEKA (Si, Hsieh, Dhillon, ICML 2014).

MEKA approximates a kernel matrix as G̃ = W L Wᵀ with W = W⁽¹⁾ ⊕ … ⊕ W⁽ᶜ⁾
block-diagonal over a k-means partition (rows of W⁽ˢ⁾ are the Nyström basis of
cluster s, z_s(x) = K(x, L_s) M_s) and L a small (Σ k_s)² link matrix.

Per-block functions compute in the namespace of their block (NumPy, or CuPy
on a GPU) and move their host operands (centres, landmarks, maps) to its device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla

from distsketch.footprint import Footprint
from distsketch.ops.kernels import kernel_function
from distsketch.ops.linalg import row_stable_matmul
from distsketch.ops.namespace import as_block, asarray, densify, namespace, row_dots, to_host, zeros

__all__ = [
    "basis_block",
    "basis_block_footprint",
    "choose_ranks",
    "expand_basis_rows",
    "expand_block",
    "nearest_centre",
    "nearest_centre_column",
    "project_block",
    "psd_core",
    "rows_times",
    "scatter_basis",
    "scattered_basis_block",
    "scattered_basis_footprint",
]


def nearest_centre(X: Any, centres: np.ndarray, row_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest centre (squared Euclidean) of every row, and the distance.

    Distances are ‖x‖² − 2 x·c + ‖c‖² with the product computed by
    :func:`~distsketch.ops.linalg.row_stable_matmul`, so labels do not depend on
    the row chunking (ties go to the lowest centre index).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (b, d)
    centres : ndarray of shape (c, d)
    row_offset : int
        Global index of ``X[0]``.

    Returns
    -------
    labels : ndarray of int64, shape (b,)
    sqdist : ndarray of float64, shape (b,)
        Both in the block's namespace.
    """
    X = densify(X)
    xp = namespace(X)
    X = asarray(X, like=X, dtype=xp.float64)
    C = asarray(centres, like=X, dtype=xp.float64)
    cross = row_stable_matmul(X, np.ascontiguousarray(C.T) if xp is np else C.T, row_offset)
    d = row_dots(xp, X, X)[:, None] - 2.0 * cross + row_dots(xp, C, C)[None, :]
    if xp is not np:
        labels = xp.astype(xp.argmin(d, axis=1), xp.int64)
        nearest = xp.take_along_axis(d, labels[:, None], axis=1)[:, 0]
        return labels, xp.clip(nearest, 0.0, None)
    labels = np.argmin(d, axis=1).astype(np.int64)
    return labels, np.maximum(d[np.arange(X.shape[0]), labels], 0.0)


def nearest_centre_column(block: Any, row_offset: int, centres: np.ndarray) -> Any:
    """The :func:`nearest_centre` labels of a row block as a (b, 1) int64 column.

    Exists as the row map of a cluster assignment (a map's output is 2-D);
    the column stays in the block's namespace.
    """
    labels = nearest_centre(block, centres, row_offset)[0]
    return namespace(labels).reshape(labels, (-1, 1))


def choose_ranks(eigenvalues: list[np.ndarray], rank: int, rule: str | None) -> np.ndarray:
    """Per-cluster ranks k_s.

    Parameters
    ----------
    eigenvalues : list of ndarray
        Decreasing, positive (already truncated) eigenvalues of each cluster's
        landmark kernel matrix M⁽ˢ⁾.
    rank : int
        k.
    rule : {None, "spectrum"}
        None: k_s = min(k, available).  "spectrum": the top c·k eigenvalues of
        the block-diagonal matrix M = ⊕ M⁽ˢ⁾ are picked and k_s counts how many
        came from cluster s (section 4.2, rule (ii)).

    Returns
    -------
    ndarray of int64, shape (c,)
        On the host: the ranks are a driver-side decision on a few numbers.
    """
    eigenvalues = [to_host(v) for v in eigenvalues]
    avail = np.array([len(v) for v in eigenvalues], dtype=np.int64)
    if rule is None:
        return np.minimum(avail, int(rank))
    pooled = np.concatenate([np.asarray(v, dtype=np.float64) for v in eigenvalues]) \
        if eigenvalues else np.zeros(0)
    owner = np.concatenate([np.full(len(v), s) for s, v in enumerate(eigenvalues)]) \
        if eigenvalues else np.zeros(0, dtype=np.int64)
    total = min(len(pooled), int(rank) * len(eigenvalues))
    # stable order: larger eigenvalue first, then lower cluster index
    order = np.lexsort((owner, -pooled))[:total]
    return np.bincount(owner[order].astype(np.int64), minlength=len(eigenvalues)).astype(np.int64)


def basis_block(block: Any, row_offset: int, centres: np.ndarray, landmarks: np.ndarray,
                maps: np.ndarray, counts: np.ndarray, ranks: np.ndarray, *, kernel: Any,
                params: dict, width: int) -> np.ndarray:
    """Basis coordinates of a row block: columns ``0..width-1`` hold z_s(x) (zero
    padded beyond k_s) and the last column the cluster label s.

    Parameters
    ----------
    block : ndarray of shape (b, d)
    row_offset : int
    centres : ndarray of shape (c, d)
    landmarks : ndarray of shape (c, m, d)
        Per-cluster landmarks; cluster s uses the first ``counts[s]``.
    maps : ndarray of shape (c, m, width)
        Per-cluster maps M_s; cluster s uses ``[:counts[s], :ranks[s]]``.
    counts, ranks : ndarray of int, shape (c,)
    kernel, params
        Kernel name/callable and its parameters.
    width : int
        max k_s.

    Returns
    -------
    ndarray of shape (b, width + 1), float64
        In the block's namespace.

    Notes
    -----
    Per task: the block, a 256-row tile of kernel values per cluster and the
    b × (width + 1) output; landmarks and maps (c·m·(d + width) floats) once per
    worker.
    """
    X = as_block(densify(block), dtype=np.float64)
    xp = namespace(X)
    labels, _ = nearest_centre(X, centres, row_offset)
    kfun = kernel_function(kernel, **params)
    # The array API has no scatter into rows, so the rows are sorted by cluster (stable:
    # by index within a cluster), each contiguous group is mapped, and the inverse
    # permutation restores the block's order.  Every group meets the same GEMM as a
    # scatter would give it, so the values are those of a per-cluster scatter.
    counts, ranks = np.asarray(to_host(counts)), np.asarray(to_host(ranks))
    b = X.shape[0]
    order = xp.argsort(labels, stable=True)
    sizes = np.bincount(to_host(labels), minlength=len(counts))
    L_all = asarray(landmarks, like=X, dtype=xp.float64)
    M_all = asarray(maps, like=X, dtype=xp.float64)
    parts, start = [], 0
    for s, size in enumerate(sizes.tolist()):
        if size == 0:
            continue
        m_s, k_s = int(counts[s]), int(ranks[s])
        part = zeros((size, width + 1), X)
        part[:, width] = float(s)
        if k_s and m_s:
            rows = xp.take(X, order[start:start + size], axis=0)
            # rows are grouped by cluster, so GEMM shapes follow the block's content:
            # the result is chunking-invariant up to rounding (labels exactly)
            part[:, :k_s] = asarray(kfun(rows, L_all[s, :m_s, :]), like=X,
                                    dtype=xp.float64) @ M_all[s, :m_s, :k_s]
        parts.append(part)
        start += size
    if not parts:
        return zeros((b, width + 1), X)
    return xp.take(xp.concat(parts, axis=0), xp.argsort(order), axis=0)


def basis_block_footprint(n_features: int, n_clusters: int, n_landmarks: int,
                          width: int) -> Footprint:
    """Memory of one :func:`basis_block` task (float64).

    Per row: the row, its c centre distances, a kernel row and a coordinate
    row of the landmarks' tiles (2m), the grouped and restored outputs (2
    width) and the label bookkeeping (4 values).  Centres, landmarks and maps
    travel once per worker.

    Parameters
    ----------
    n_features, n_clusters, n_landmarks, width : int
        d, c, m (landmarks per cluster) and max k_s.
    """
    return Footprint(per_row=8.0 * (n_features + n_clusters + 2 * n_landmarks + 2 * width + 4))


def scattered_basis_block(block: Any, row_offset: int, centres: np.ndarray, landmarks: np.ndarray,
                          maps: np.ndarray, counts: np.ndarray, ranks: np.ndarray,
                          offsets: np.ndarray, *, kernel: Any, params: dict, width: int) -> Any:
    """Rows of W for a row block: :func:`basis_block` spread by :func:`scatter_basis`.

    Exists so that MEKA's ``transform`` is one row map (the b × (width + 1)
    coordinates never leave the task).

    Returns
    -------
    ndarray of shape (b, Σ k_s), float64
    """
    coords = basis_block(block, row_offset, centres, landmarks, maps, counts, ranks,
                         kernel=kernel, params=params, width=width)
    return scatter_basis(coords, offsets, ranks)


def scattered_basis_footprint(n_features: int, n_clusters: int, n_landmarks: int, width: int,
                              n_out: int) -> Footprint:
    """Memory of one :func:`scattered_basis_block` task: the basis task and its Σ k_s-wide rows."""
    return basis_block_footprint(n_features, n_clusters, n_landmarks, width).plus(
        per_row=8.0 * n_out)


def scatter_basis(coords: np.ndarray, offsets: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Spread basis coordinates (b × (width + 1), labels last) into W's Σ k_s columns."""
    xp = namespace(coords)
    coords = asarray(coords, like=coords, dtype=xp.float64)
    width = coords.shape[1] - 1
    if xp is not np:
        # one column band per cluster (the array API has no scatter)
        labels = xp.astype(coords[:, width], xp.int64)
        ks, offs = np.asarray(to_host(ranks)).tolist(), np.asarray(to_host(offsets)).tolist()
        bands = [xp.where((labels == s)[:, None], coords[:, :int(ks[s])], 0.0)
                 for s in sorted(range(len(ks)), key=lambda s: offs[s])]
        return xp.concat(bands, axis=1) if bands else zeros((coords.shape[0], 0), coords)
    labels = coords[:, width].astype(np.int64)
    total = int(np.sum(ranks))
    W = np.zeros((coords.shape[0], total))
    cols = np.arange(width)[None, :]
    valid = cols < np.asarray(ranks)[labels][:, None]
    r, c = np.nonzero(valid)
    W[r, np.asarray(offsets)[labels[r]] + c] = coords[r, c]
    return W


def project_block(coords: np.ndarray, V: np.ndarray, offsets: np.ndarray,
                  ranks: np.ndarray) -> np.ndarray:
    """Wᵀ V restricted to one row block: (Σ k_s) × p."""
    W = scatter_basis(coords, offsets, ranks)
    return W.T @ asarray(V, like=W, dtype=namespace(W).float64)


def expand_block(coords: np.ndarray, U: np.ndarray, offsets: np.ndarray,
                 ranks: np.ndarray) -> np.ndarray:
    """W U for one row block, with U of shape (Σ k_s) × p: (b × p)."""
    W = scatter_basis(coords, offsets, ranks)
    return W @ asarray(U, like=W, dtype=namespace(W).float64)


def expand_basis_rows(block: Any, row_offset: int, U: np.ndarray, offsets: np.ndarray,
                      ranks: np.ndarray) -> np.ndarray:
    """:func:`expand_block` as a row map over blocks of basis coordinates (read as float64).

    Exists because stored coordinates may be float32 (a basis written to a
    store) while the product is formed in float64.
    """
    return expand_block(as_block(block, dtype=np.float64), U, offsets, ranks)


def rows_times(block: Any, row_offset: int, B: np.ndarray) -> np.ndarray:
    """A block's rows times ``B`` in float64 (``row_offset`` unused).

    Exists as the row map of MEKA kernel ridge's expansion and prediction,
    ``W (B c)`` over row blocks of the basis W; ``B`` moves to the block's
    device.
    """
    rows = as_block(block, dtype=np.float64)
    return rows @ asarray(B, like=rows)


def psd_core(gram: np.ndarray, link: np.ndarray, rcond: float = 1e-12) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """Factor ``W L Wᵀ = (W B) diag(e) (W B)ᵀ`` with ``W B`` orthonormal on the training rows.

    With ``WᵀW = V S Vᵀ`` (directions with ``S ≤ rcond · max S`` dropped: W is
    zero along them), ``Q = W V S^{-1/2}`` has orthonormal columns and
    ``W L Wᵀ = Q C Qᵀ`` with the small core ``C = S^{1/2} Vᵀ L V S^{1/2} = U diag(e) Uᵀ``.
    So the nonzero eigenvalues of the n × n approximation are ``e`` and its
    eigenvectors the columns of ``W B`` with ``B = V S^{-1/2} U``.  Clipping
    ``e`` at zero gives the nearest (Frobenius and spectral norm) positive
    semi-definite matrix to ``W L Wᵀ``, whose link in W's coordinates is
    ``B diag(max(e, 0)) Bᵀ``.

    Parameters
    ----------
    gram : ndarray of shape (k, k)
        ``WᵀW`` over the training rows (block diagonal for MEKA's basis).
    link : ndarray of shape (k, k)
        L, symmetric (possibly indefinite).
    rcond : float, default 1e-12
        Relative threshold on the eigenvalues of ``WᵀW``.

    Returns
    -------
    B : ndarray of shape (k, r)
        ``Bᵀ (WᵀW) B = I_r``.
    e : ndarray of shape (r,)
        Eigenvalues of the core (ascending, not clipped).

    Notes
    -----
    O(k³) time and O(k²) memory; nothing depends on n.  Runs on the host on
    purpose: the k × k factorisation is small, and SciPy's ``eigh`` keeps the
    factor the same on every device.
    """
    G = np.asarray(to_host(gram), dtype=np.float64)
    G = (G + G.T) / 2
    s, V = np.linalg.eigh(G)
    top = float(s.max(initial=0.0))
    keep = s > rcond * top if top > 0 else np.zeros(s.shape, dtype=bool)
    V, root = V[:, keep], np.sqrt(s[keep])
    Lk = np.asarray(to_host(link), dtype=np.float64)
    core = (V.T @ ((Lk + Lk.T) / 2) @ V) * root[:, None] * root[None, :]
    e, U = sla.eigh((core + core.T) / 2)
    return (V / root[None, :]) @ U, e
