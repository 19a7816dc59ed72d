"""Exact kernel linear systems ``(K + λI) α = y`` by blockwise conjugate gradient.

``KernelSolver`` never stores K: every CG iteration evaluates ``K V`` tile by
tile over row and column blocks of X (:func:`distsketch.graph.tiles.tile_matvec`,
a dask graph that runs on any scheduler, including ``distributed``).  Three
choices of preconditioner:

* none — plain CG, ``O(√κ log(1/tol))`` iterations;
* ``"sketch"`` — Song et al. (2021), Algorithm 2 / Theorem D.1: a kernel
  sketch gives a factor Z (n × m) with ``Z Zᵀ ≈ K``; the R of a QR of
  ``[Z; √λ I]`` (computed as the Cholesky factor of ``ZᵀZ + λI``) gives
  ``P⁻¹ = (I − Z R⁻¹R⁻ᵀ Zᵀ)/λ = (Z Zᵀ + λI)⁻¹`` by Woodbury;
* ``"nystrom"`` — Falkon-style: M uniform landmarks, ``T = chol(K_MM)``,
  ``Z = K_nM T⁻¹`` (so ``Z Zᵀ`` is the Nyström approximation) and
  ``A = chol(ZᵀZ + λI)``; the same Woodbury application.

The target checks and CG records here serve Falkon and MEKA kernel ridge too.

Over 500 lines because the solver's CG over kernel tiles, its preconditioners and its
target checks form one estimator.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg as sla
from sklearn.base import MultiOutputMixin, RegressorMixin, clone

from distsketch.errors import ConfigError, InputError, MemoryBudgetError
from distsketch.estimators.base import DistsketchEstimator, OperatorSize, fit_context, to_numpy
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_kernel_params
from distsketch.graph import (
    KERNEL_TILE_ROWS,
    as_dask,
    cluster_resources,
    compute,
    hstack_blocks,
    map_blocks,
    persist_rows,
    rechunk_rows,
    reduce_blocks,
    row_matvec,
    tile_matvec,
)
from distsketch.ops.cg import pcg
from distsketch.ops.kernel_product import TILE_ROWS, kernel_times, kernel_times_memory
from distsketch.ops.kernels import (
    SHIFT_INVARIANT,
    kernel_columns,
    kernel_columns_footprint,
    pairwise_kernel,
)
from distsketch.ops.sketch_solve import (
    kernel_statistical_dimension,
    nystrom_factor,
    woodbury_apply,
    woodbury_factor,
)
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.validation import Interval, Options, check_targets, is_dask
from distsketch.validation.finite import check_finite_output, check_finite_targets

__all__ = ["KernelSolver", "default_preconditioner_rank"]

logger = logging.getLogger("distsketch")

#: Rows sampled to estimate the statistical dimension d_λ (an s × s eigenproblem).
SDIM_SAMPLE = 1024
#: Default preconditioner rank per unit of d_λ: a Nyström preconditioner is
#: near exact once M ≳ d_λ; random features need several times more (their
#: error decays like 1/√m instead of following K's spectrum).
NYSTROM_PER_DIM = 2.0
SKETCH_PER_DIM = 8.0
#: Below this many features per unit of d_λ the default sketch is dropped.
SKETCH_MIN_PER_DIM = 2.0
#: Bounds of the default rank; the factor Z (n × m) also stays under 1 GiB.
MIN_RANK, MAX_RANK, FACTOR_BYTES = 64, 4096, 2**30


class _KernelCall:
    """A kernel and its parameters, picklable and tokenized by them."""

    def __init__(self, kernel: Any, params: dict):
        self.kernel = kernel
        self.params = dict(params)

    def __dask_tokenize__(self) -> Any:
        return (type(self).__name__[1:], repr(self.kernel), sorted(self.params.items()))


class _KernelTile(_KernelCall):
    """``(A_i, B_j) -> K(A_i, B_j)`` for :func:`tile_matvec`."""

    def __call__(self, a: np.ndarray, b: np.ndarray, ia: int, ib: int) -> np.ndarray:
        return pairwise_kernel(a, b, self.kernel, **self.params)


class _KernelRows(_KernelCall):
    """``(A_i, [B_j], [V_j]) -> Σ_j K(A_i, B_j) V_j`` for :func:`row_matvec`."""

    def __call__(self, a: np.ndarray, b: list, v: list) -> np.ndarray:
        return kernel_times(a, b, v, self.kernel, self.params)


def r_squared(pred: np.ndarray, y: Any) -> float:
    """The coefficient of determination of ``pred`` for ``y``, averaged over target columns."""
    Y = np.asarray(to_numpy(y), dtype=np.float64).reshape(pred.shape[0], -1)
    P = pred.reshape(Y.shape)
    ss_res = ((Y - P) ** 2).sum(axis=0)
    ss_tot = ((Y - Y.mean(axis=0)) ** 2).sum(axis=0)
    return float(np.mean(1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0)))


def solver_targets(est: Any, y: Any, n: int) -> tuple[np.ndarray, bool]:
    """``y`` checked against ``n`` rows as a 2-D float64 host array, and whether it was 1-D."""
    y = check_targets(y, n, where=f"{type(est).__name__}: y")
    y = np.asarray(to_numpy(y))
    if not np.issubdtype(y.dtype, np.number):
        raise InputError(f"{type(est).__name__}: y must be numeric, got dtype {y.dtype}.")
    y = y.astype(np.float64)
    check_finite_targets(y, f"{type(est).__name__}: y")
    return (y.reshape(-1, 1) if y.ndim == 1 else y), y.ndim == 1


def record_cg(est: Any, res: Any, advice: str, stacklevel: int) -> None:
    """Store a CG solve's ``n_iter_``, ``residuals_`` and ``converged_``; warn with
    ``advice`` (what to change) if it stopped early."""
    est.n_iter_ = int(res.n_iter)
    est.residuals_ = res.residuals
    est.converged_ = bool(res.converged)
    if not res.converged:
        warnings.warn(
            f"{type(est).__name__}: CG stopped after {res.n_iter} iterations at relative residual "
            f"{res.residuals[-1]:.3g} > tol={est.tol}; {advice}", RuntimeWarning,
            stacklevel=stacklevel)


def default_preconditioner_rank(d_lam: float, n: int, kind: str, n_sample: int) -> int:
    """The rank ``KernelSolver(preconditioner_size=None)`` gives its preconditioner.

    ``d_lam`` is the statistical dimension of K (n rows) at λ estimated on ``n_sample``
    rows (an estimate above 90 % of them, with fewer rows than n, is a lower bound);
    ``kind`` is "nystrom" or "sketch".  The rank is ``2·d_λ`` landmarks or ``8·d_λ``
    features within [64, 4096], at most n and at most ``2³⁰ / (8 n)`` (the n × m factor
    under 1 GiB); the largest of those landmark counts when the estimate is saturated;
    0 for a sketch that cannot reach ``2·d_λ`` features (it would slow CG down).
    """
    saturated = d_lam > 0.9 * n_sample and n_sample < n
    cap = min(n, max(MIN_RANK, min(MAX_RANK, FACTOR_BYTES // (8 * max(n, 1)))))
    per_dim = NYSTROM_PER_DIM if kind == "nystrom" else SKETCH_PER_DIM
    if kind != "nystrom" and (saturated or cap < SKETCH_MIN_PER_DIM * d_lam):
        return 0
    if saturated:  # d_λ is at least the sample size: as many landmarks as allowed
        return int(cap)
    return int(min(cap, max(MIN_RANK, np.ceil(per_dim * d_lam))))


class KernelSolver(MultiOutputMixin, RegressorMixin, DistsketchEstimator):
    """Exact kernel ridge regression ``(K + λI) α = y`` by blockwise (preconditioned) CG.

    Parameters
    ----------
    kernel : str or callable, default "rbf"
        A kernel of :mod:`distsketch.ops.kernels` or ``f(A, B) -> block``.
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features, "median" the median
        heuristic on a 1000-row sample (one more pass over X in ``fit``);
        the value used is ``gamma_``.
    degree : int, default 3
        Degree q of the polynomial kernel (γ⟨x, y⟩ + c)^q.
    coef0 : float, default 1.0
        Offset c of the polynomial kernel.
    alpha : float, default 1.0
        λ > 0.
    preconditioner : {None, "sketch", "nystrom"} or feature map, default None
        ``"sketch"``: Algorithm 2 of Song et al. with random Fourier features
        (shift-invariant kernels) or ``PolySketch`` (polynomial kernel) of
        ``preconditioner_size`` features; ``"nystrom"``: Falkon-style Nyström
        preconditioner with ``preconditioner_size`` uniform landmarks; a (fitted or
        unfitted) feature map instance (e.g. ``GaussianSketch``) is used as
        the sketch.
    preconditioner_size : int or None, default None
        m, the rank of the preconditioner.  None sizes it from the estimated
        statistical dimension ``d_λ = tr(K(K + λI)⁻¹)`` (see Notes):
        ``2·d_λ`` landmarks for ``"nystrom"``, ``8·d_λ`` features for
        ``"sketch"``, within [64, 4096], at most n and at most what keeps the
        n × m factor under 1 GiB (that largest size for ``"nystrom"`` when
        d_λ is at least the 1 024-row sample).  When the sketch cannot have
        even ``2·d_λ`` features (d_λ close to n), no sketch is used (a
        smaller one can make CG slower than none) and a warning is logged.
    tol : float, default 1e-6
        Relative residual ``‖y − (K + λI)α‖ / ‖y‖`` to reach.
    max_iter : int, default 500
        CG iterations (each is one pass of kernel tiles over X × X).
    block_rows : int, default 2048
        Rows per block of X: one kernel-product task per block (a tile of
        block_rows² floats when X exceeds the task budget, see Notes).
    split_every : int, default 8
        Fan-in of the tree sums over column blocks (kernel tiles only).
    verbose : int, default 0
        CG progress (iterations and relative residuals) and the
        preconditioner's size on the ``"distsketch"`` logger at INFO level:
        1 every 10th iteration, 2 every iteration (0: DEBUG level).
    random_state : int, Generator or None
        Seed of the sketch / landmarks.

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        α.
    X_fit_ : ndarray, or None when X came from a Zarr path (see ``X_path_``)
    X_path_ : str or None
        The Zarr store X was read from (predict re-reads it).
    n_iter_ : int
    residuals_ : ndarray of shape (n_iter_ + 1,)
        Relative residual history (max over targets).
    converged_ : bool
    preconditioner_rank_ : int
        Columns of the preconditioner factor Z (0 without one).
    preconditioner_size_ : int or None
        The rank requested for the preconditioner (``preconditioner_size`` or the
        size chosen from ``statistical_dimension_``; 0 when the default
        sketch was dropped); None without a preconditioner.
    statistical_dimension_ : float or None
        Estimated d_λ of K at ``alpha`` (from the exact kernel on a uniform
        sample of up to 1024 rows; a value near the sample size means at
        least that); None without a preconditioner.
    kernel_params_ : dict
    n_samples_seen_ : int
        Rows fitted on.
    n_features_in_, seed_

    Notes
    -----
    Per iteration: ``n/b`` tasks (b = block_rows), task i computing
    ``K(X_i, X) V`` over 256 × 1024 kernel sub-tiles made in one reused buffer
    and multiplied by V at once (for RBF one GEMM of augmented rows and one
    in-place ``exp``: ``O(n² d)`` flops and n² exponentials in total); each
    task holds its block, all of X and V (shared by the threads of a worker)
    and the 2 MiB buffer.  When X and V exceed the per-task memory budget the
    product runs as ``(n/b)²`` tile tasks holding two row blocks and a
    ``b × b`` kernel tile each, tree-summed over column blocks.  The
    driver holds O(n t) CG vectors and, with a preconditioner, the factor Z
    (n × m): one O(n m) product per iteration.  Building the preconditioner
    costs one pass over X (features or ``K(X, landmarks)``) plus O(n m² + m³).
    With the sketch preconditioner, CG needs O(√κ(P⁻¹(K + λI)) log(1/tol))
    iterations, κ close to 1 when ``Z Zᵀ`` is a good spectral approximation
    of K at scale λ (Theorem D.1).  For ``P = Z Zᵀ + λI`` with
    ``Z Zᵀ ≼ K`` (Nyström), the eigenvalues of ``P⁻¹(K + λI)`` lie in
    ``[1, 1 + ‖K − Z Zᵀ‖₂ / λ]``: a rank-m preconditioner helps only when m
    exceeds the number of eigenvalues of K above λ, about the statistical
    dimension d_λ.  When d_λ is close to n (a narrow kernel, small λ: for
    X ~ N(0, I₈), γ = 0.5, λ = 1e-3 and n = 5000, d_λ ≈ 4960), no rank-512
    preconditioner gets below ~90 iterations (measured with
    ``benchmarks/bench_krr.py --only cg``: exact top-512 eigenvectors 93,
    uniform Nyström 512 landmarks 182, 2048: 104, 4096: 70, none 361): the
    default size follows d_λ, and the fit logs a warning when the rank is
    below it.
    Falkon's tens of iterations are for a different problem (KRR restricted
    to the m landmarks, with λ scaled by n).  Estimating d_λ costs one
    sampling pass and an O(s³) eigenproblem (s ≤ 1024).

    References
    ----------
    Song, Woodruff, Yu, Zhang. Fast sketching of polynomial kernels of
    polynomial degree. ICML 2021, Algorithm 2, Theorem D.1.
    Rudi, Carratino, Rosasco. FALKON: an optimal large scale kernel method.
    NeurIPS 2017 (Nyström preconditioner).
    Hestenes, Stiefel. Methods of conjugate gradients. 1952.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import KernelSolver
    >>> X = np.random.default_rng(0).normal(size=(300, 2)); y = np.sin(X[:, 0])
    >>> s = KernelSolver(gamma=0.5, alpha=1e-3, preconditioner="nystrom", random_state=0).fit(X, y)
    >>> bool(s.converged_)
    True
    """

    _parameter_constraints = {
        "kernel": ["str", "callable"],
        "gamma": GAMMA_CONSTRAINT,
        "degree": [Interval(int, 1, None)],
        "coef0": [Interval(float, None, None)],
        "alpha": [Interval(float, 0, None, closed="neither")],
        "preconditioner": [None, Options({"sketch", "nystrom"}), "estimator"],
        "preconditioner_size": [None, Interval(int, 1, None)],
        "tol": [Interval(float, 0, None, closed="neither")],
        "max_iter": [Interval(int, 0, None)],
        "block_rows": [Interval(int, 1, None)],
        "split_every": [Interval(int, 2, None)],
        "verbose": [Interval(int, 0, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, kernel: Any = "rbf", gamma: float | str | None = None, degree: int = 3,
                 coef0: float = 1.0, alpha: float = 1.0, preconditioner: Any = None,
                 preconditioner_size: int | None = None, tol: float = 1e-6, max_iter: int = 500,
                 block_rows: int = KERNEL_TILE_ROWS, split_every: int = 8, verbose: int = 0,
                 random_state: Any = None):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.alpha = alpha
        self.preconditioner = preconditioner
        self.preconditioner_size = preconditioner_size
        self.tol = tol
        self.max_iter = max_iter
        self.block_rows = block_rows
        self.split_every = split_every
        self.verbose = verbose
        self.random_state = random_state

    def _blocks(self, X: Any) -> Any:
        Xd = as_dask(X)
        return rechunk_rows(Xd, min(int(self.block_rows), max(1, Xd.shape[0])))

    def kernel_matvec(self, V: np.ndarray, X: Any = None) -> np.ndarray:
        """``K(X, X) V`` computed tile by tile (X: the training rows by default).

        Parameters
        ----------
        V : ndarray of shape (n_samples,) or (n_samples, t)

        Returns
        -------
        ndarray of the shape of V
        """
        Xb = self._train_blocks if X is None else self._blocks(X)
        V = np.asarray(V, dtype=np.float64)
        # two tasks per scheduler thread at least: the result is computed whole, so its
        # row blocks need not be X's; pieces aligned to kernel_times' sub-tiles keep the
        # result the same for any number of threads
        out = self._product(Xb, Xb, V.reshape(V.shape[0], -1), "kernel-matvec",
                            min_tasks=2 * cluster_resources().threads)
        res = compute(out, progress=False)[0]
        return res.reshape(V.shape)

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        n, d = int(n_samples), int(n_features)
        b = min(int(self.block_rows), max(1, n))  # the blocks are cut as _blocks cuts them
        sizes: list[OperatorSize] = [(
            f"KernelSolver: block_rows={self.block_rows} on {n} rows of {d} features: one kernel "
            f"tile ({b} x {b}) with its two row blocks and vectors (float64) that",
            8 * b * (b + 2 * d + 2), "lower block_rows (a tile holds block_rows² floats)")]
        if isinstance(self.preconditioner, str) and self.preconditioner_size is not None:
            s = int(self.preconditioner_size)
            m = min(s, max(1, n)) if self.preconditioner == "nystrom" else s
            sizes.append((
                f"KernelSolver: preconditioner={self.preconditioner!r} with preconditioner_size={s} on "
                f"{d} features: its {m} x {m} factor and {d} x {m} operator (float64) that",
                8 * m * (m + d), "lower preconditioner_size (or preconditioner_size=None: sized from d_λ)"))
        return sizes

    def _product(self, A: Any, B: Any, V: np.ndarray, name: str, min_tasks: int = 0) -> Any:
        """Lazy ``K(A, B) V``: one task per row block of A when B and V fit every
        task's budget (fused sub-tiles, no tree sum), kernel tiles otherwise."""
        per_row, fixed = kernel_times_memory(int(A.shape[1]), max(B.chunks[0]), self.kernel_name_)
        try:
            return row_matvec(A, B, V, _KernelRows(self.kernel_name_, self.kernel_params_),
                              work_bytes=fixed, work_bytes_per_row=per_row,
                              min_tasks=min_tasks, split_align=TILE_ROWS, name=name)
        except MemoryBudgetError:
            return tile_matvec(A, B, V, _KernelTile(self.kernel_name_, self.kernel_params_),
                               split_every=self.split_every, name=name)

    def _sketch_map(self) -> Any:
        p = self.preconditioner
        if not isinstance(p, str):
            return p
        name = self.kernel_name_
        m = int(self.preconditioner_size_)  # type: ignore[arg-type]
        if name in SHIFT_INVARIANT:
            from distsketch.estimators.features.rff import RandomFourierFeatures

            return RandomFourierFeatures(kernel=name, gamma=self.kernel_params_["gamma"],
                                         n_components=m, random_state=self.seed_)
        if name == "polynomial":
            from distsketch.estimators.features.polynomial import PolySketch

            return PolySketch(degree=int(self.kernel_params_["degree"]),
                              gamma=float(self.kernel_params_["gamma"]),
                              coef0=float(self.kernel_params_["coef0"]), n_components=m,
                              random_state=self.seed_)
        raise ConfigError(
            f"KernelSolver: no built-in sketch for kernel {name!r}; use preconditioner='nystrom' "
            "or pass a feature map instance as preconditioner."
        )

    def _size_preconditioner(self, Xb: Any) -> None:
        """Estimate d_λ on a row sample; choose the rank when ``preconditioner_size`` is None."""
        n = int(Xb.shape[0])
        lam = float(self.alpha)
        s = min(n, SDIM_SAMPLE)
        sampler = UniformLandmarks(s, self.seed_, "solver.sdim", order="priority")
        _, S = sampler.finalize(reduce_blocks(sampler, Xb, name="solver-sdim-sample"))
        S = np.asarray(S, dtype=np.float64)
        d_lam = kernel_statistical_dimension(
            pairwise_kernel(S, S, self.kernel_name_, **self.kernel_params_), n, lam)
        self.statistical_dimension_ = float(d_lam)
        bound = "≥ " if d_lam > 0.9 * s and s < n else "≈ "
        if self.preconditioner_size is None and isinstance(self.preconditioner, str):
            m = default_preconditioner_rank(d_lam, n, str(self.preconditioner), s)
            if m == 0:
                # random features approximate K at scale λ only when m ≫ d_λ; with
                # m ≲ d_λ, P = ZZᵀ + λI can be worse than none (measured: 10× more
                # iterations at d_λ ≈ n), so run plain CG and say so
                logger.warning(
                    "KernelSolver: a sketch preconditioner would need about %.0f features "
                    "(%.0f x d_λ, d_λ %s%.0f at alpha=%.3g) but at most %d fit; a smaller "
                    "sketch can slow CG down, so none is used. Use preconditioner='nystrom' "
                    "or a larger alpha.", SKETCH_PER_DIM * d_lam, SKETCH_PER_DIM, bound, d_lam, lam,
                    min(n, MAX_RANK, FACTOR_BYTES // (8 * max(n, 1))))
        elif self.preconditioner_size is None:
            m = None  # a feature-map instance brings its own width
        else:
            m = int(self.preconditioner_size)
        self.preconditioner_size_ = m
        level = logging.INFO if int(self.verbose) > 0 else logging.DEBUG
        logger.log(level, "KernelSolver: statistical dimension d_λ %s%.0f (n=%d, alpha=%.3g, "
                   "%d sampled rows); preconditioner %r of rank %s", bound, d_lam, n, lam, s,
                   self.preconditioner if isinstance(self.preconditioner, str)
                   else type(self.preconditioner).__name__, m)
        if m and m < d_lam:
            logger.warning(
                "KernelSolver: the preconditioner's rank %d is below the statistical dimension "
                "d_λ %s%.0f of K at alpha=%.3g, so CG may need many iterations (each a pass of "
                "kernel tiles over X x X); use preconditioner_size=None (sized from d_λ), a larger "
                "preconditioner_size, or a larger alpha (d_λ falls as alpha grows).", m, bound, d_lam, lam)

    def _factor(self, Xb: Any) -> np.ndarray | None:
        """The preconditioner factor Z (n × m) with ``Z Zᵀ ≈ K``."""
        if self.preconditioner is None or self.preconditioner_size_ == 0:
            return None
        if self.preconditioner == "nystrom":
            M = min(int(self.preconditioner_size_), Xb.shape[0])  # type: ignore[arg-type]
            sampler = UniformLandmarks(M, self.seed_, "solver.landmarks", order="priority")
            index, L = sampler.finalize(reduce_blocks(sampler, Xb, name="solver-landmarks"))
            self.landmark_index_ = np.sort(index)
            Kmm = pairwise_kernel(L, L, self.kernel_name_, **self.kernel_params_)
            T = nystrom_factor(Kmm)
            C = map_blocks(Xb, kernel_columns, L, n_out=M, dtype=np.float64,
                           kwargs={"kernel": self.kernel_name_, "params": self.kernel_params_},
                           footprint=kernel_columns_footprint(Xb.shape[1], M), name="solver-knm")
            C = np.asarray(to_numpy(C), dtype=np.float64)
            return sla.solve_triangular(T, C.T, trans="T", lower=False).T
        fmap = self._sketch_map()
        if not (hasattr(fmap, "n_output_features_") or hasattr(fmap, "link_")):
            fmap = clone(fmap)
            if "random_state" in fmap.get_params(deep=False) and \
                    fmap.get_params(deep=False)["random_state"] is None:
                fmap.set_params(random_state=self.seed_)
            fmap.fit(Xb)
        return np.asarray(to_numpy(fmap.transform(Xb)), dtype=np.float64)

    @fit_context
    def fit(self, X: Any, y: Any) -> KernelSolver:
        """Solve ``(K + λI) α = y`` by CG.

        Parameters
        ----------
        X : ndarray, dask array, Zarr array or path of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self
        """
        source = X
        X = self._check_input(X, reset=True)
        self._check_params_for_shape(*X.shape)
        Y, one_d = solver_targets(self, y, X.shape[0])
        self._init_seed()
        self.kernel_name_, self.kernel_params_ = fit_kernel_params(self, X)
        self.X_path_ = str(source) if isinstance(source, str) or hasattr(source, "__fspath__") \
            else None
        self.X_fit_ = None if self.X_path_ is not None else X
        # every CG iteration is a pass over X: read the store once
        self._train_blocks = persist_rows(self._blocks(X)) if is_dask(X) else self._blocks(X)
        lam = float(self.alpha)
        self.preconditioner_size_ = None
        self.statistical_dimension_ = None  # type: ignore[assignment]
        if self.preconditioner is not None:
            self._size_preconditioner(self._train_blocks)
        Z = self._factor(self._train_blocks)
        precond: Callable | None = None
        if Z is not None:
            R = woodbury_factor(Z.T @ Z, lam)
            self.preconditioner_rank_ = int(Z.shape[1])

            def precond(V: np.ndarray) -> np.ndarray:
                return woodbury_apply(Z, R, lam, V)
        else:
            self.preconditioner_rank_ = 0

        def matvec(V: np.ndarray) -> np.ndarray:
            return self.kernel_matvec(V) + lam * V

        res = pcg(matvec, Y, precond=precond, tol=float(self.tol), max_iter=int(self.max_iter),
                  verbose=int(self.verbose), label="KernelSolver")
        self.dual_coef_ = res.x[:, 0] if one_d else res.x
        self.n_samples_seen_ = int(X.shape[0])
        record_cg(self, res, "raise max_iter, use a preconditioner ('nystrom' or 'sketch') or a "
                  "larger alpha.", stacklevel=3)
        return self

    def _training_rows(self) -> Any:
        if getattr(self, "_train_blocks", None) is None:
            if self.X_fit_ is not None:
                self._train_blocks = self._blocks(self.X_fit_)
            else:
                from distsketch.io import open_array

                self._train_blocks = self._blocks(open_array(self.X_path_))
        return self._train_blocks

    def predict(self, X: Any) -> Any:
        """``K(X, X_fit) α`` blockwise (dask in -> dask out).

        Parameters
        ----------
        X : ndarray or dask array of shape (n_new, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_new,) or (n_new, n_targets)
        """
        self._check_is_fitted("dual_coef_")
        X = self._check_input(X, reset=False)
        A = self._blocks(X)
        alpha = np.asarray(self.dual_coef_, dtype=np.float64)
        out = self._product(A, self._training_rows(), alpha.reshape(alpha.shape[0], -1),
                            "kernel-predict")
        if alpha.ndim == 1:
            out = out[:, 0]
        return check_finite_output(out if is_dask(X) else compute(out, progress=False)[0],
                                   stage="KernelSolver predict")

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of ``predict(X)`` (averaged over targets)."""
        return r_squared(np.asarray(to_numpy(self.predict(X))), y)


def stack_operands(A: Any, B: Any, W_twice: bool = False) -> Any:
    """``[A | B]`` (``[A | A | B]`` with ``W_twice``) with B on A's row blocks."""
    A = A.astype(np.float64)
    return hstack_blocks(A, A, B) if W_twice else hstack_blocks(A, B)
