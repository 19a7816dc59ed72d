"""Frequent Directions: a mergeable ℓ × d covariance sketch of a row stream."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import (
    DistsketchEstimator,
    MergeableEstimator,
    OperatorSize,
    fit_context,
    summary_context,
)
from distsketch.graph import reduce_blocks
from distsketch.ops.fd import FD_STATES, fd_covariance_state_bytes, fd_sketch_components, fd_state
from distsketch.ops.namespace import host_dtype, to_host
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary
from distsketch.validation import Interval, Options
from distsketch.validation.finite import is_array_api

__all__ = ["FrequentDirections"]


def store_fd_state(est: Any, state: dict) -> tuple[np.ndarray, np.ndarray]:
    """Keep an FD summary state on ``est`` (FrequentDirections, StreamingKernelPCA's "fd")
    as its fitted attributes; returns the sketch's components and singular values."""
    if "ztz" in state:
        # the exact covariance is kept (later rows add to it); its one shrink runs on
        # the host, so every device finalises the same matrix the same way
        est.state_ = "covariance"
        est.covariance_ = np.asarray(to_host(state["ztz"]), dtype=np.float64)
        state = est._summary().finalize({"ztz": est.covariance_, "n": int(state["n"])})
    else:  # a streaming sketch (a covariance merged with one is too)
        est.__dict__.pop("covariance_", None)
        est.state_ = "sketch"
    est.sketch_ = np.asarray(to_host(state["sketch"]), dtype=np.float64)
    est.shrinkage_ = float(state["shrinkage"])
    est.sq_frobenius_ = float(state["sq_frobenius"])
    return fd_sketch_components(est.sketch_)


def fd_state_of(est: Any) -> dict:
    """The FD summary state ``est`` holds: the inverse of :func:`store_fd_state`."""
    if hasattr(est, "covariance_"):
        return {"ztz": est.covariance_, "n": est.n_samples_seen_}
    return {"sketch": est.sketch_, "n": est.n_samples_seen_,
            "sq_frobenius": est.sq_frobenius_, "shrinkage": est.shrinkage_}


class FrequentDirections(MergeableEstimator, DistsketchEstimator):
    """Frequent Directions sketch B (ℓ × d) of a tall matrix A, out of core.

    Guarantees ``0 ⪯ AᵀA − BᵀB`` and ``‖AᵀA − BᵀB‖₂ ≤ ‖A − A_k‖_F² / (ℓ − k)``
    for every k < ℓ, whatever the chunking and merge order.

    Parameters
    ----------
    sketch_size : int, default 64
        ℓ, rows of the sketch.
    split_every : int, default 8
        Merge fan-in of the fit's tree reductions: states are merged
        ``split_every`` at a time, more where a tree would be over three merges
        deep (more than ``split_every³`` blocks), fewer where a merge task
        would exceed the memory budget (:func:`~distsketch.graph.choose_fan_in`).
    state : {"auto", "sketch", "covariance"}, default "auto"
        What the blocks accumulate: "sketch", the streaming ℓ × d FD sketch
        (shrunk as rows arrive, merged by stack and shrink); "covariance",
        the exact d × d AᵀA (one product per 4096-row slice, merged by addition),
        shrunk once at the end; "auto", "covariance" for input of another
        array namespace (CuPy on a GPU) with d ≤ 2048, else "sketch" (NumPy
        input keeps the streaming sketch).  See the Notes.

    Attributes
    ----------
    sketch_ : ndarray of shape (sketch_size, n_features_in_)
        The sketch B (float64).
    components_ : ndarray of shape (min(sketch_size, n_features_in_), n_features_in_)
        Right singular vectors of B (approximate principal directions of AᵀA).
    singular_values_ : ndarray of shape (min(sketch_size, n_features_in_),)
    shrinkage_ : float
        Total shrinkage Δ ≥ ‖AᵀA − BᵀB‖₂.
    sq_frobenius_ : float
        ‖A‖_F² of the rows seen.
    n_samples_seen_ : int
        Rows sketched so far.
    n_features_in_ : int
    fingerprint_ : dict
        Identity of the input when fitted from a Zarr path.
    state_ : {"sketch", "covariance"}
        The state ``state`` resolved to in ``fit`` (``partial_fit`` keeps it).
    covariance_ : ndarray of shape (n_features_in_, n_features_in_)
        AᵀA, summed exactly in float64 (``state_ == "covariance"`` only).

    Notes
    -----
    **Covariance state.**  The blocks' AᵀA are summed exactly (float64
    accumulation; merge is associative and order-independent up to float
    addition, so the state is the same for every chunking up to rounding) and
    shrunk once: B = diag(√(λᵢ − λ_ℓ)) Vᵀ from the top ℓ eigenpairs of AᵀA,
    Δ = λ_ℓ.  Then ``0 ⪯ AᵀA − BᵀB`` and ``‖AᵀA − BᵀB‖₂ = λ_ℓ(AᵀA) ≤
    ‖A − A_k‖_F²/(ℓ − k)`` for every k < ℓ, up to the rounding of AᵀA and
    of one eigendecomposition: the least spectral error of any rank-(ℓ − 1)
    B, never more than the streaming sketch's.  The sketch is not the
    streaming one (B's last row is zero, its others are the exact top
    directions of AᵀA), and it does not depend on the chunking.  Cost: 2·d²
    flops per row (one GEMM per 4096-row slice on a GPU, no eigendecomposition
    per block or merge, no read back to the host before the root), a d × d
    state per block (8·d² bytes), one top-ℓ eigendecomposition on the host
    at the end.

    **Sketch state.**  Each block is sketched ℓ rows at a time in a 2ℓ × d
    buffer (≈ 12·ℓ·d flops per row), or, for large blocks with d ≤ 2048, in
    one shrink of its d × d covariance (2·d² flops per row and one top-ℓ
    eigendecomposition per block), whichever
    :func:`~distsketch.ops.fd.fd_block_formulation` finds cheaper from the
    shapes; sketches are merged ``split_every`` at a time.  Per-task memory:
    the block plus O(ℓ·d) (O(d²) for the covariance); communication: one
    ℓ × d float64 sketch per block.  The sketch depends on the chunking and
    merge order; the guarantee does not.

    References
    ----------
    Liberty. Simple and deterministic matrix sketching. KDD 2013.
    Ghashami, Liberty, Phillips, Woodruff. Frequent Directions: simple and
    deterministic matrix sketching. SIAM J. Comput. 2016.
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import FrequentDirections
    >>> A = np.random.default_rng(0).normal(size=(1000, 20))
    >>> fd = FrequentDirections(sketch_size=8).fit(A)
    >>> fd.sketch_.shape
    (8, 20)
    >>> err = np.linalg.norm(A.T @ A - fd.sketch_.T @ fd.sketch_, 2)
    >>> bool(err <= fd.covariance_error_bound(0) * (1 + 1e-12))  # up to rounding
    True
    >>> exact = FrequentDirections(sketch_size=8, state="covariance").fit(A)
    >>> lam = np.linalg.eigvalsh(A.T @ A)[::-1]
    >>> bool(np.isclose(exact.shrinkage_, lam[7]))  # the error is the ℓ-th eigenvalue
    True
    """

    _array_api_support = True

    _accepts_sparse = True

    _parameter_constraints = {
        "sketch_size": [Interval(int, 1, None)],
        "split_every": [Interval(int, 2, None)],
        "state": [Options(set(FD_STATES))],
    }

    def __init__(self, *, sketch_size: int = 64, split_every: int = 8, state: str = "auto"):
        self.sketch_size = sketch_size
        self.split_every = split_every
        self.state = state

    def _summary(self) -> FrequentDirectionsSummary:
        # a model saved before ``state_`` existed holds a streaming sketch
        return FrequentDirectionsSummary(self.sketch_size, n_columns=self.n_features_in_,
                                         state=getattr(self, "state_", "sketch"))

    def _sketch_state(self, X: Any, row_start: int = 0) -> dict:
        summary = self._summary()
        itemsize = host_dtype(X.dtype).itemsize
        return reduce_blocks(summary, X, split_every=self.split_every,
                             footprint=summary.footprint(X.shape[1], itemsize),
                             row_start=row_start, name="frequent-directions")

    def _set_state(self, state: dict) -> None:
        components = store_fd_state(self, state)
        self.n_samples_seen_ = int(state["n"])
        self.components_, self.singular_values_ = components

    def _state(self) -> dict:
        return fd_state_of(self)

    @fit_context
    def fit(self, X: Any, y: Any = None) -> FrequentDirections:
        """Sketch the rows of X.

        Parameters
        ----------
        X : ndarray, sparse matrix, dask array or Zarr path of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        self.state_ = fd_state(self.state, X.shape[1],
                               on_device=is_array_api(getattr(X, "_meta", X)))
        self._check_params_for_shape(*X.shape)
        self._set_state(self._sketch_state(X))
        return self

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        # the summary's working buffer: 2 x sketch_size rows of the input's width
        l, d = int(self.sketch_size), int(n_features)
        if getattr(self, "state_", self.state) == "covariance":
            return [(f"FrequentDirections(state='covariance') on {d} input features: the "
                     f"covariance state ({d} x {d} float64) and its merge buffer that",
                     2 * fd_covariance_state_bytes(d),
                     "use state='sketch' (an O(sketch_size x d) state) or reduce the input's "
                     "width first")]
        return [(f"FrequentDirections: sketch_size={l} on {d} input features: the sketch state "
                 f"({2 * l} x {d} float64) that", 16 * l * d,
                 "lower sketch_size (the rank kept) or reduce the input's width first")]

    @fit_context
    def partial_fit(self, X: Any, y: Any = None) -> FrequentDirections:
        """Fold more rows into the sketch (a merge of their sketch with the stored one).

        Parameters
        ----------
        X : ndarray, sparse matrix, dask array or Zarr path of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        if not hasattr(self, "sketch_"):
            return self.fit(X)
        return self.fold(self.summarize(X, row_offset=self.n_samples_seen_))

    @summary_context
    def summarize(self, X: Any, y: Any = None, *, row_offset: int) -> dict:
        """The FD sketch state of rows X (global rows from ``row_offset``); changes nothing.

        See :class:`~distsketch.estimators.base.MergeableEstimator`.
        """
        self._check_is_fitted("sketch_")
        X = self._check_input(X, reset=False, allow_sparse=True)
        return self._sketch_state(X, row_start=row_offset)

    @fit_context(validate=False)
    def merge(self, other: FrequentDirections) -> FrequentDirections:
        """A new sketch of the union of both estimators' rows.

        Parameters
        ----------
        other : FrequentDirections
            Fitted on rows with the same number of features.

        Returns
        -------
        FrequentDirections
            With ``sketch_size`` of ``self``; the guarantee holds for the union.
        """
        self._check_is_fitted("sketch_")
        if not isinstance(other, FrequentDirections) or not hasattr(other, "sketch_"):
            raise InputError("FrequentDirections.merge needs another fitted FrequentDirections; "
                             f"got {type(other).__name__}.")
        if other.n_features_in_ != self.n_features_in_:
            raise InputError(
                f"cannot merge sketches of {self.n_features_in_} and {other.n_features_in_} "
                "features; both must be fitted on data with the same columns.")
        out = FrequentDirections(sketch_size=self.sketch_size, split_every=self.split_every,
                                 state=self.state)
        out.n_features_in_ = self.n_features_in_
        # two covariances add up exactly; with a streaming sketch the covariance is shrunk
        out._set_state(out._summary().merge([self._state(), other._state()]))
        return out

    def covariance_error_bound(self, k: int = 0) -> float:
        """A certified bound on ‖AᵀA − BᵀB‖₂ for the rows seen.

        Parameters
        ----------
        k : int, default 0
            Rank in the guarantee ‖A − A_k‖_F²/(ℓ − k), ``0 <= k < sketch_size``.

        Returns
        -------
        float
            ``min(Δ, (‖A‖_F² − Σ_{i<k} σ_i(B)²)/(ℓ − k))``.  Since
            σ_i(B) ≤ σ_i(A), the second term is at least ‖A − A_k‖_F²/(ℓ − k),
            so this is an upper bound computed from the sketch alone.
        """
        self._check_is_fitted("sketch_")
        ell = int(self.sketch_size)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < ell:
            raise ConfigError(f"covariance_error_bound: k must be an int in [0, {ell}); got {k!r}.")
        head = float(np.sum(self.singular_values_[:k] ** 2))
        tail = max(0.0, self.sq_frobenius_ - head) / (ell - k)
        return float(min(self.shrinkage_, tail))
