"""Data-driven kernel parameters shared by every kernel estimator.

Every estimator with a kernel scale takes ``gamma`` as

* a positive float: used as given;
* ``None`` (the default everywhere): ``1 / n_features``, scikit-learn's default;
* ``"median"``: the median heuristic, ``1 / median ‖xᵢ − xⱼ‖²`` over a
  sample of at most 1000 rows (:func:`median_gamma`, :func:`strip_median_gamma`).

``fit`` stores the value it used as ``gamma_``; ``transform``/``predict`` use
``gamma_``, never ``gamma``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from distsketch.errors import InputError
from distsketch.graph import reduce_blocks
from distsketch.ops.kernels import resolve_kernel_params
from distsketch.ops.namespace import asarray, densify, namespace, to_host
from distsketch.ops.random import hash_uniform, resolve_seed
from distsketch.summaries.landmarks import UniformLandmarks, bottom_k
from distsketch.validation import Interval, StrOptions, is_dask
from distsketch.validation.finite import is_array_api

__all__ = ["GAMMA_CONSTRAINT", "MEDIAN_SAMPLE_ROWS", "STRIP_ROWS", "fit_gamma",
           "fit_kernel_params", "fitted_kernel_params", "median_gamma", "median_sampler",
           "resolve_gamma", "sample_median_gamma", "strip_median_gamma", "strip_sample_index"]

#: the ``_parameter_constraints`` entry of every ``gamma``
GAMMA_CONSTRAINT: list[Any] = [Interval(float, 0, None, closed="neither"),
                               StrOptions({"median"}), None]

#: rows sampled by the median heuristic (≈ 500 000 pairs)
MEDIAN_SAMPLE_ROWS = 1000

#: consecutive rows of one strip of :func:`strip_sample_index`
STRIP_ROWS = 64


def median_gamma(X: Any, n_sample: int = MEDIAN_SAMPLE_ROWS, random_state: Any = 0) -> float:
    """The median heuristic: ``gamma = 1 / median ‖xᵢ − xⱼ‖²`` over a row sample.

    With this gamma a typical pair of points has Gaussian kernel value e⁻¹,
    so the kernel is neither nearly diagonal nor nearly constant.

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
    n_sample : int, default 1000
        Rows sampled (all rows when X has fewer).
    random_state : int, default 0
        Seed of the row priorities; the default makes the value a function
        of the data alone (the same for every estimator's ``random_state``).

    Returns
    -------
    float

    Raises
    ------
    InputError
        Fewer than two distinct rows in the sample (every distance is 0).

    Notes
    -----
    Rows are the ``n_sample`` of smallest priority hash(seed, row) (a
    mergeable bottom-k sample, :class:`~distsketch.summaries.landmarks.UniformLandmarks`):
    one pass over X, deterministic and independent of the chunking.  Memory:
    the sample (n_sample × d float64) and its n_sample² distance matrix
    (8 MB for 1000 rows).  The command line's ``--gamma median`` is this
    function.

    References
    ----------
    Schölkopf, Smola. Learning with Kernels. MIT Press 2002 (kernel width
    from the data's distance scale); Garreau, Jitkrittum, Kanagawa. Large
    sample analysis of the median heuristic. arXiv:1707.07269, 2017.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [3.0]])
    >>> median_gamma(X)    # squared distances 1, 4, 9
    0.25
    """
    sampler = UniformLandmarks(int(n_sample), resolve_seed(random_state), "metrics.sample")
    state = reduce_blocks(sampler, X, name="median-gamma-sample")
    _, S = sampler.finalize(state)
    return sample_median_gamma(S, f"the {X.shape[0]} x {int(X.shape[1])} input")


def median_sampler() -> UniformLandmarks:
    """The row sample of :func:`median_gamma` (its default size and seed).

    A pass that reads every row anyway (the column moments of a
    standardising model) can carry it and call :func:`sample_median_gamma`:
    the same rows, so the same gamma, as :func:`median_gamma`.
    """
    return UniformLandmarks(MEDIAN_SAMPLE_ROWS, resolve_seed(0), "metrics.sample")


def sample_median_gamma(S: Any, where: str) -> float:
    """``1 / median ‖sᵢ − sⱼ‖²`` over the pairs of rows of a sample S (an InputError
    when every sampled row is the same: median squared distance 0)."""
    S = np.asarray(S, dtype=np.float64)
    sq = np.einsum("ij,ij->i", S, S)
    D = sq[:, None] + sq[None, :] - 2.0 * (S @ S.T)
    iu = np.triu_indices(S.shape[0], k=1)
    med = float(np.median(np.maximum(D[iu], 0.0))) if iu[0].size else 0.0
    if not med > 0:
        raise InputError(
            f"cannot choose gamma by the median heuristic: the {S.shape[0]} sampled rows of "
            f"{where} are all identical (median squared distance 0); pass gamma explicitly (a "
            "positive float, or None for 1 / n_features).")
    return 1.0 / med


def strip_sample_index(n_rows: int, n_sample: int = MEDIAN_SAMPLE_ROWS, seed: int = 0,
                       strip: int = STRIP_ROWS) -> np.ndarray:
    """Sorted row indices of a sample made of whole strips of consecutive rows.

    Rows are grouped in strips of ``strip`` rows (0…strip−1, strip…2·strip−1, …);
    the ``ceil(n_sample / strip)`` strips of smallest priority
    ``hash(seed, "metrics.strips", strip number)`` are taken whole (every row
    when ``n_rows <= n_sample``).  The sample depends on (n_rows, seed) only,
    never on the chunking, and reading it touches at most two chunks per
    strip instead of every chunk.  At most ``ceil(n_sample / strip) · strip`` indices
    (the last strip may be short).
    """
    n_rows = int(n_rows)
    if n_rows <= n_sample:
        return np.arange(n_rows, dtype=np.int64)
    strips = np.arange(-(-n_rows // strip), dtype=np.int64)
    chosen = np.sort(bottom_k(hash_uniform(int(seed), "metrics.strips", strips), strips,
                              -(-int(n_sample) // strip)))
    index = (chosen[:, None] * strip + np.arange(strip, dtype=np.int64)[None, :]).ravel()
    return index[index < n_rows]


def strip_median_gamma(X: Any, n_sample: int = MEDIAN_SAMPLE_ROWS, random_state: Any = 0,
                       where: str = "the input") -> float:
    """The median heuristic on the rows of :func:`strip_sample_index` (no pass over X).

    For a model that must know gamma before its only pass over X (a kernel
    ridge model that does not standardise): the strips' rows are read alone
    (a dask array computes the chunks that hold them), where
    :func:`median_gamma` reads every row for a uniform sample.  Rows in a
    strip are neighbours, so on a table sorted by some column the sample is
    less spread than a uniform one: pass a float gamma where that matters.
    """
    idx = strip_sample_index(int(X.shape[0]), n_sample, resolve_seed(random_state))
    if is_dask(X):
        S = X[idx].compute()
    elif not isinstance(X, np.ndarray) and is_array_api(X):
        S = to_host(namespace(X).take(X, asarray(idx, like=X), axis=0))
    else:
        S = X[idx]
    return sample_median_gamma(np.asarray(densify(S), dtype=np.float64),
                               f"{where} ({len(idx)} rows in strips of {STRIP_ROWS})")


def resolve_gamma(gamma: Any, X: Any) -> float:
    """The numeric gamma that ``gamma`` (float, None or "median") means for data X."""
    if gamma is None:
        return 1.0 / max(1, int(X.shape[1]))
    if isinstance(gamma, str):
        # only "median" passes the constraint table
        return median_gamma(X)
    return float(gamma)


def fit_gamma(estimator: Any, X: Any) -> float:
    """Resolve ``estimator.gamma`` for X and store it as ``estimator.gamma_``."""
    estimator.gamma_ = resolve_gamma(getattr(estimator, "gamma", None), X)
    return estimator.gamma_


def fit_kernel_params(estimator: Any, X: Any) -> tuple[str | Callable, dict[str, Any]]:
    """The estimator's kernel for data X: its canonical name and the parameters it takes.

    Resolves ``estimator.gamma`` for X first (:func:`fit_gamma`, which stores
    ``gamma_``), then ``kernel``, ``degree`` and ``coef0`` (3 and 1.0 for an
    estimator without them) with
    :func:`~distsketch.ops.kernels.resolve_kernel_params`.  The parameters are only
    those the kernel takes (``{"gamma": ...}`` for ``rbf``).
    """
    return resolve_kernel_params(estimator.kernel, X.shape[1], fit_gamma(estimator, X),
                                 getattr(estimator, "degree", 3), getattr(estimator, "coef0", 1.0))


def fitted_kernel_params(estimator: Any, kernel: Any) -> dict[str, Any]:
    """The ``kernel_params_`` of an estimator that approximates ``kernel``, by name, as
    ``pairwise_kernel`` takes them (a callable kernel has no named parameters).

    The estimator is fitted so far as ``gamma_`` (when the kernel has a scale) and
    ``n_features_in_``; its ``degree`` and ``coef0`` are read where it has them.
    """
    _, params = resolve_kernel_params(kernel, int(estimator.n_features_in_),
                                      getattr(estimator, "gamma_", None),
                                      getattr(estimator, "degree", 3), getattr(estimator, "coef0", 1.0))
    return params
