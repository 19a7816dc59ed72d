"""Database-friendly random projections and batch kernel approximation through them."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.estimators.autosize import AutoSized, is_auto
from distsketch.estimators.base import OperatorSize, RowMapTransformer, fit_context, to_numpy
from distsketch.footprint import Footprint
from distsketch.ops.kernels import pairwise_kernel, resolve_kernel_params
from distsketch.ops.projection import (
    PROJECTABLE_KERNELS,
    jl_min_dim,
    projection_block,
    projection_map_footprint,
    projection_matrix,
)
from distsketch.validation import Interval, Options, check_input

__all__ = ["DatabaseFriendlyProjection"]


class DatabaseFriendlyProjection(AutoSized, RowMapTransformer):
    """Achlioptas' database-friendly random projection x ↦ Rᵀx / √k.

    R has independent entries ±1 (``density="dense"``) or √3·{+1, 0, −1} with
    probabilities 1/6, 2/3, 1/6 (``"sparse"``).  Squared distances and inner
    products are preserved in expectation, and every pairwise distance of n
    points within (1 ± ε) with probability >= 1 − n^(−β) once
    k >= (4 + 2β) ln n / (ε²/2 − ε³/3).  :meth:`approximate_kernel` evaluates
    kernels of projected points: Gaussian/Cauchy kernels from projected
    distances, polynomial/linear/arc-cosine kernels from projected inner
    products — a d-dimensional kernel evaluation becomes k-dimensional.

    Parameters
    ----------
    n_components : int or "auto", default "auto"
        Output dimension k; "auto" uses the bound above with ``eps`` and the
        number of rows seen in ``fit`` (β = 1), or, with ``target_error``,
        the smallest k whose relative error of the linear kernel reaches it
        (as in :class:`RandomFourierFeatures`).
    density : {"dense", "sparse"}, default "dense"
    eps : float in (0, 1), default 0.1
        Distortion for ``n_components="auto"`` without ``target_error``.
    target_error : float or None, default None
        Relative kernel error ‖K − K̂‖_F / ‖K‖_F of the linear kernel on a row
        sample that ``n_components="auto"`` must reach; None: the
        Johnson–Lindenstrauss bound with ``eps`` instead.
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    components_ : ndarray of shape (n_components, n_features_in_)
        Rᵀ / √k (as scikit-learn's random projections store it).
    n_components_ : int
    kernel_error_, pilot_sizes_, pilot_errors_
        As for :class:`RandomFourierFeatures` (``n_components="auto"`` with
        ``target_error`` only).
    n_output_features_ : int
    n_samples_seen_ : int
        Rows ``fit`` was given (a data-oblivious map reads only their shape).
    n_features_in_ : int

    Notes
    -----
    Per row 2·d·k flops; a task holds its block and its block_rows × k
    output; the d × k matrix travels once per worker.  Row c of R depends only
    on (seed, c), so the operator does not depend on how columns are chunked.
    Sparse input stays sparse (CSR products).

    References
    ----------
    Achlioptas. Database-friendly random projections. PODS 2001.
    Achlioptas, McSherry, Schölkopf. Sampling techniques for kernel methods. NIPS 2001, §5.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import DatabaseFriendlyProjection
    >>> X = np.random.default_rng(0).normal(size=(200, 1000))
    >>> P = DatabaseFriendlyProjection(n_components=300, density="sparse", random_state=0).fit(X)
    >>> P.approximate_kernel(X[:5], X, kernel="rbf", gamma=1e-3).shape
    (5, 200)
    """

    _array_api_support = True

    #: the exact kernel the features approximate (no kernel parameter names it);
    #: :func:`distsketch.metrics.model_kernel` compares against it
    _kernel_of_features = "linear"

    _parameter_constraints = {
        "n_components": [Interval(int, 1, None), Options({"auto"})],
        "density": [Options({"dense", "sparse"})],
        "eps": [Interval(float, 0, 1, closed="neither")],
        "target_error": [Interval(float, 0, None, closed="neither"), None],
        "random_state": ["random_state"],
    }
    _accepts_sparse = True

    def __init__(self, *, n_components: int | str = "auto", density: str = "dense",
                 eps: float = 0.1, target_error: float | None = None, random_state: Any = None):
        self.n_components = n_components
        self.density = density
        self.eps = eps
        self.target_error = target_error
        self.random_state = random_state

    @fit_context
    def fit(self, X: Any, y: Any = None) -> DatabaseFriendlyProjection:
        """Draw R for X's number of features (reads only X's shape).

        Parameters
        ----------
        X : ndarray, sparse matrix, dask array or Zarr path of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True, allow_sparse=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        k = self._resolve_size(X)
        self.n_components_ = k
        self.components_ = projection_matrix(seed, X.shape[1], k, self.density).T.copy()
        self.n_output_features_ = k
        self.n_samples_seen_ = int(X.shape[0])
        self._certify(X)
        return self

    def _jl(self) -> bool:
        return is_auto(self.n_components) and self.target_error is None

    def _resolve_size(self, X: Any) -> int:
        if self._jl():
            self._auto_choice = self._auto_size = None
            return self._width(int(X.shape[0]))
        return super()._resolve_size(X)

    def _width(self, n_samples: int) -> int:
        return jl_min_dim(n_samples, self.eps) if self._jl() else self._size_for_check()

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        k, d = self._width(n_samples), int(n_features)
        given = (f"n_components='auto' (eps={self.eps} on {n_samples} rows gives k={k})"
                 if self._jl() else f"n_components={k}")
        return [(f"DatabaseFriendlyProjection: {given} on {d} input features has a matrix R "
                 f"({k} x {d} float64) that", 8 * k * d,
                 "lower n_components (or raise eps) or reduce the input's width first")]

    def _operands(self) -> tuple:
        return (self.components_,)

    def _map_footprint(self) -> Footprint:
        return projection_map_footprint(self.n_features_in_, self.n_components_)

    _map_block = staticmethod(projection_block)

    def approximate_kernel(self, A: Any, B: Any = None, *, kernel: str = "rbf",
                           gamma: float | None = None, degree: int = 3, coef0: float = 1.0,
                           B_projected: bool = False) -> np.ndarray:
        """Approximate kernel block k(A, B) from projected points, in batch.

        Parameters
        ----------
        A : ndarray, sparse or dask array of shape (n_a, n_features)
            E.g. a batch of test points.
        B : array of shape (n_b, n_features), optional
            E.g. the training points; default A.  With ``B_projected=True``,
            ``B`` is already ``transform``-ed, shape (n_b, n_components_) —
            project the training set once and reuse it for every batch.
        kernel : {"rbf", "cauchy", "polynomial", "linear", "arccos0", "arccos1", "ntk"}
        gamma : float, optional
            Kernel scale; None means ``1 / n_features_in_`` (of the original
            data, not of the projection).
        degree, coef0
            Polynomial kernel parameters.
        B_projected : bool

        Returns
        -------
        ndarray of shape (n_a, n_b), float64

        Notes
        -----
        Cost (n_a + n_b)·d·k for the projections plus n_a·n_b·k for the
        kernel, instead of n_a·n_b·d exactly.
        """
        self._check_is_fitted("components_")
        if not isinstance(kernel, str) or kernel not in PROJECTABLE_KERNELS:
            raise ConfigError(
                f"kernel={kernel!r} cannot be evaluated from projections; choose one of "
                f"{sorted(PROJECTABLE_KERNELS)} (the L1 laplacian kernel is not preserved).")
        name, params = resolve_kernel_params(kernel, self.n_features_in_, gamma, degree, coef0)
        PA = np.asarray(to_numpy(self.transform(A)), dtype=np.float64)
        if B is None:
            PB = PA
        elif B_projected:
            PB = np.asarray(to_numpy(check_input(B, where="projected B")), dtype=np.float64)
            if PB.shape[1] != self.n_components_:
                raise ConfigError(
                    f"B_projected=True but B has {PB.shape[1]} columns; expected n_components_="
                    f"{self.n_components_} (the output of transform).")
        else:
            PB = np.asarray(to_numpy(self.transform(B)), dtype=np.float64)
        return pairwise_kernel(PA, PB, name, **params)
