"""Nyström kernel ridge regression by preconditioned CG over passes of the data (Falkon).

Nothing of size n × M exists anywhere: every CG iteration is one tree-reduced pass
over the row blocks (:func:`distsketch.ops.falkon.gram_times` on ``rows × M`` kernel
sub-tiles); the driver holds Falkon's two M × M preconditioner factors
(:mod:`distsketch.ops.falkon`), and the CG state can be checkpointed after every pass.

Over 500 lines because the CG loop, its checkpoint and the preconditioner are one fit
that shares its state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import dask
import numpy as np
from dask.utils import format_bytes, parse_bytes
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin

from distsketch.errors import ConfigError, InputError, MemoryBudgetError
from distsketch.estimators.base import DistsketchEstimator, OperatorSize, fit_context, to_numpy
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, fit_kernel_params
from distsketch.estimators.nystrom.landmark_choice import choose_landmarks, fit_kmeans, sample_landmarks
from distsketch.estimators.ridge.weights import stack_xy
from distsketch.estimators.solvers.solver import r_squared, record_cg, solver_targets
from distsketch.graph import map_blocks, reduce_blocks
from distsketch.graph.host_memory import host_memory_limit
from distsketch.graph.row_cache import cached_rows
from distsketch.ops.cg import CGResult
from distsketch.ops.falkon import (
    FalkonCG,
    falkon_apply,
    falkon_memory,
    falkon_pass_footprint,
    falkon_preconditioner,
)
from distsketch.ops.kernel_product import kernel_times, kernel_times_rows, kernel_times_rows_footprint
from distsketch.ops.kernels import KERNEL_NAMES
from distsketch.ops.namespace import asarray
from distsketch.summaries.falkon import FalkonPass
from distsketch.validation import Interval, Options
from distsketch.validation.finite import check_finite_output

__all__ = ["FalkonCheckpoint", "NystromKernelRidge", "driver_memory_budget", "select_centers"]

logger = logging.getLogger("distsketch")

#: ``factor_dtype="auto"``: float64 factors up to this many centres (2 M² · 8 bytes =
#: 3.2 GB at 2·10⁴), float32 above (the solution stays float64-accurate; module
#: docstring of :mod:`distsketch.ops.falkon`).
FLOAT64_FACTOR_MAX = 20000
#: Share of this machine's memory the driver's M × M factors may take by default.
DRIVER_FRACTION = 0.75


def driver_memory_budget() -> tuple[int, str]:
    """Bytes the driver may hold for the M × M factors, and where that number comes from.

    The dask config ``distsketch.driver-memory`` (bytes or ``"20GiB"``) when
    set, else :data:`DRIVER_FRACTION` of this machine's memory (host total,
    cgroup limit or rlimit, the smallest).
    """
    value = dask.config.get("distsketch.driver-memory", None)
    if value is not None:
        try:
            return int(parse_bytes(value) if isinstance(value, str) else value), \
                "distsketch.driver-memory"
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"distsketch.driver-memory={value!r} is not a size; use bytes or "
                              "e.g. '20GiB'.") from exc
    return int(DRIVER_FRACTION * host_memory_limit()), f"{DRIVER_FRACTION:g} x this machine's memory"


def _uniform(X: Any, m: int, seed: int, est: Any) -> np.ndarray:
    return sample_landmarks(X, m, seed, "falkon.centers")[1]


def _kmeans(X: Any, m: int, seed: int, est: Any) -> np.ndarray:
    return fit_kmeans(X, m, seed, sample_size=int(est.kmeans_sample))[0]


def _chosen(how: str) -> Callable[[Any, int, int, Any], np.ndarray]:
    # the kernel is resolved before the centres are chosen (kernel_name_, kernel_params_)
    def rule(X: Any, m: int, seed: int, est: Any) -> np.ndarray:
        return choose_landmarks(X, how, m, seed, kernel=est.kernel_name_,
                                kernel_params=est.kernel_params_)[0]
    return rule


#: landmark rule name -> ``rule(X, M, seed, estimator) -> (M, d) centres``; a new rule is one line
LANDMARK_RULES: dict[str, Callable[[Any, int, int, Any], np.ndarray]] = {
    "uniform": _uniform,
    "kmeans": _kmeans,
    "leverage": _chosen("leverage"),
    "rpcholesky": _chosen("rpcholesky"),
}


def select_centers(X: Any, landmarks: Any, n_centers: int, seed: int, est: Any = None
                   ) -> np.ndarray:
    """The M centres of a Nyström fit: a rule of :data:`LANDMARK_RULES` or given rows.

    Parameters
    ----------
    X : ndarray or dask array of shape (n, d)
    landmarks : str or array of shape (m, d)
    n_centers : int
        M for a rule (at most n).
    seed : int
    est : estimator, optional
        Supplies a rule's own parameters (``kmeans_sample``).

    Returns
    -------
    ndarray of shape (M', d), float64
        A rule's centres without repeated rows (M' ≤ M, in their order);
        given centres as they are.
    """
    if isinstance(landmarks, str):
        rule = LANDMARK_RULES[landmarks]
        C = np.asarray(rule(X, min(int(n_centers), int(X.shape[0])), seed, est),
                       dtype=np.float64)
        # a repeated row adds a copy of a column of K_nM: H becomes singular and CG stalls
        # (diamonds, M = 10⁴: 13 repeats, residual 3.4e-6 after 200 iterations); keep the first
        _, first = np.unique(C, axis=0, return_index=True)
        return C[np.sort(first)] if first.size < C.shape[0] else C
    C = np.asarray(to_numpy(landmarks), dtype=np.float64)
    if C.ndim != 2 or C.shape[1] != X.shape[1] or C.shape[0] < 1:
        raise InputError(f"landmarks must be a 2-D array with {X.shape[1]} columns (one row per "
                         f"centre); got shape {C.shape}.")
    if not np.isfinite(C).all():
        raise InputError("landmarks hold NaN or Inf; pass finite centres.")
    return C


class FalkonCheckpoint(BaseEstimator):
    """The CG state of a :class:`NystromKernelRidge` fit between two passes (a model store).

    Written with :func:`distsketch.io.save_model` (atomic, checksummed) and
    read with :func:`distsketch.io.load` (registered class, nothing unpickled).

    Parameters
    ----------
    key : str
        Hash of what the state depends on (data fingerprint, targets,
        parameters); a fit refuses a checkpoint with another key.
    """

    def __init__(self, *, key: str = ""):
        self.key = key

    @classmethod
    def of(cls, key: str, centers: np.ndarray, b: np.ndarray, cg: FalkonCG) -> FalkonCheckpoint:
        ck = cls(key=key)
        ck.centers_, ck.rhs_ = centers, b
        ck.x_, ck.r_, ck.p_, ck.rz_, ck.scale_ = cg.x, cg.r, cg.p, cg.rz, cg.scale
        ck.active_ = cg.active.astype(np.int8)
        ck.residuals_ = np.asarray(cg.residuals, dtype=np.float64)
        ck.n_iter_ = int(cg.n_iter)
        return ck

    def state(self) -> FalkonCG:
        return FalkonCG(x=np.array(self.x_, dtype=np.float64), r=np.array(self.r_, dtype=np.float64),
                        p=np.array(self.p_, dtype=np.float64), rz=np.array(self.rz_, dtype=np.float64),
                        scale=np.array(self.scale_, dtype=np.float64),
                        active=np.asarray(self.active_).astype(bool), n_iter=int(self.n_iter_),
                        residuals=[float(v) for v in np.asarray(self.residuals_)])


class NystromKernelRidge(MultiOutputMixin, RegressorMixin, DistsketchEstimator):
    """Nyström kernel ridge regression with M centres by Falkon's preconditioned CG, out of core.

    Minimises ``‖K_nM α − y‖² + λ n αᵀ K_MM α`` (``K_nM = K(X, centres)``);
    predictions are ``K(x, centres) α``.

    Parameters
    ----------
    kernel : str or callable, default "rbf"
        Any kernel named in :mod:`distsketch.ops.kernels`, or a callable
        ``f(A, B)`` returning the kernel block of two row sets.
    gamma : float, "median" or None, default None
        Kernel scale γ (``gamma_`` after fit): None is 1 / n_features,
        "median" the median heuristic on a row sample.
    degree, coef0 : int, float
        Polynomial kernel parameters (γ⟨x, y⟩ + c)^q (defaults 3 and 1.0).
    n_centers : int, default 1000
        M (at most n).  The driver holds two M × M factors (see Notes).
    alpha : float, default 1e-6
        λ > 0 (the penalty is ``λ n αᵀ K_MM α``, so λ does not grow with n).
    landmarks : {"uniform", "kmeans", "leverage", "rpcholesky"} or array of shape (m, d), default "uniform"
        How the centres are chosen (:func:`select_centers`): the bottom-M rows
        of priority hash(seed, row) (one pass, chunking-independent), k-means
        centres of a ``kmeans_sample``-row sample, rows drawn by approximate
        ridge leverage scores (three passes) or by block randomly pivoted
        Cholesky (six passes) — see
        :func:`~distsketch.estimators.nystrom.landmark_choice.choose_landmarks` — or the
        centres themselves.
    kmeans_sample : int, default 20000
        Rows of the uniform sample k-means runs on (``landmarks="kmeans"``).
    factor_dtype : {"auto", "float64", "float32"}, default "auto"
        Precision of the preconditioner factors: "auto" is float64 up to
        :data:`FLOAT64_FACTOR_MAX` centres and float32 above.  The operator
        and the CG vectors are float64 either way, so float32 factors change
        the number of iterations, not the solution; use float64 for
        ``alpha`` below ~1e-6 or ``tol`` below ~1e-6.
    tol : float, default 1e-6
        Relative residual ``‖K_nMᵀy − Hα‖ / ‖K_nMᵀy‖`` to reach.
    max_iter : int, default 100
        CG iterations, each one pass over X.
    checkpoint : str, path or None, default None
        A model store where the CG state is saved after every pass
        (atomically); a fit finding one with the same data and parameters
        resumes from it (only ``max_iter`` and ``verbose`` may differ), one
        with others is refused.  Remove it to start over.
    verbose : int, default 0
        Progress on the ``"distsketch"`` logger: 1 logs one INFO line per pass
        (its time and the residual), 0 the same at DEBUG level.
    random_state : int, Generator or None

    Attributes
    ----------
    centers_ : ndarray of shape (M, n_features)
        The centres; a rule's repeated rows (data with duplicate rows) are
        kept once, so M can be below ``n_centers``.
    coef_ : ndarray of shape (M,) or (M, n_targets)
        α.
    n_iter_ : int
        CG iterations (passes after the first).
    residuals_ : ndarray of shape (n_iter_ + 1,)
    converged_ : bool
    kernel_params_ : dict
    factor_dtype_ : str
    jitter_ : float
        Diagonal jitter of K_MM in the preconditioner, per centre and relative
        to the mean diagonal (raised from the dtype's default until the
        Cholesky succeeds; the CG operator uses the exact K_MM).
    memory_plan_ : dict
        Bytes planned (:func:`distsketch.ops.falkon.falkon_memory`): ``driver``,
        ``factors``, ``task_fixed``, ``task_per_row``, ``tile_rows``.
    n_samples_seen_, n_features_in_, seed_

    Notes
    -----
    Memory: the driver holds ``2 M² s`` bytes of factors (s = 8 for float64,
    4 for float32) plus ``8 M (d + 6 t)``; it is checked against
    :func:`driver_memory_budget` before anything is allocated.  A task holds
    its block (``8 (3 d + t)`` bytes a row: as read, decoded, in float64), the
    centres with their augmented copies (``8 M (3 d + 4)``), two M × t
    vectors and one ``r × M`` float64 kernel sub-tile of 32 MiB; the
    planner sizes blocks from these.  n is unbounded.

    Cost: landmarks (one pass), ``K_nMᵀ y`` (one pass), the factors
    (``2 M³/3`` flops, one thread, on the driver), then per iteration one
    pass of ``2 n M (d + 2)`` GEMM flops, ``n M`` exponentials and
    ``4 n M t`` flops (RBF), plus ``O(M² (d + t))`` on the driver
    (``λ n K_MM p`` and four triangular solves).  Falkon needs
    ``O(log(1/tol))`` iterations once M exceeds the statistical dimension.
    One-vs-rest targets of a classifier share every pass.

    References
    ----------
    Rudi, Carratino, Rosasco. FALKON: an optimal large scale kernel method.
    NeurIPS 2017.
    Meanti, Carratino, Rosasco, Rudi. Kernel methods through the roof:
    handling billions of points efficiently. NeurIPS 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import NystromKernelRidge
    >>> X = np.random.default_rng(0).normal(size=(500, 3)); y = np.sin(X[:, 0])
    >>> m = NystromKernelRidge(n_centers=100, gamma=0.5, alpha=1e-4, random_state=0).fit(X, y)
    >>> bool(m.converged_), m.coef_.shape
    (True, (100,))
    """

    # the passes run in the blocks' namespace (CuPy on a GPU); the M x M factors and
    # the CG vectors stay host NumPy on the driver
    _array_api_support = True

    _parameter_constraints = {
        "kernel": [Options(KERNEL_NAMES), "callable"],
        "gamma": GAMMA_CONSTRAINT,
        "degree": [Interval(int, 1, None)],
        "coef0": [Interval(float, None, None)],
        "n_centers": [Interval(int, 1, None)],
        "alpha": [Interval(float, 0, None, closed="neither")],
        "landmarks": [Options(set(LANDMARK_RULES)), "array-like"],
        "kmeans_sample": [Interval(int, 1, None)],
        "factor_dtype": [Options({"auto", "float64", "float32"})],
        "tol": [Interval(float, 0, None, closed="neither")],
        "max_iter": [Interval(int, 0, None)],
        "checkpoint": [None, str, os.PathLike],
        "verbose": [Interval(int, 0, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, kernel: Any = "rbf", gamma: float | str | None = None, degree: int = 3,
                 coef0: float = 1.0, n_centers: int = 1000, alpha: float = 1e-6,
                 landmarks: Any = "uniform", kmeans_sample: int = 20000,
                 factor_dtype: str = "auto", tol: float = 1e-6, max_iter: int = 100,
                 checkpoint: Any = None, verbose: int = 0, random_state: Any = None):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_centers = n_centers
        self.alpha = alpha
        self.landmarks = landmarks
        self.kmeans_sample = kmeans_sample
        self.factor_dtype = factor_dtype
        self.tol = tol
        self.max_iter = max_iter
        self.checkpoint = checkpoint
        self.verbose = verbose
        self.random_state = random_state

    def _n_centers(self, n_samples: int) -> int:
        if not isinstance(self.landmarks, str):
            return int(np.shape(self.landmarks)[0])
        return max(1, min(int(self.n_centers), int(n_samples)))

    def _factor_dtype(self, M: int) -> np.dtype:
        if self.factor_dtype == "auto":
            return np.dtype(np.float64 if M <= FLOAT64_FACTOR_MAX else np.float32)
        return np.dtype(self.factor_dtype)

    def _plan(self, n_samples: int, n_features: int, n_targets: int = 1) -> dict:
        M = self._n_centers(n_samples)
        return falkon_memory(M, n_features, n_targets, self._factor_dtype(M).itemsize)

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        plan = self._plan(n_samples, n_features)
        return [(f"{type(self).__name__}: n_centers={self._n_centers(n_samples)} on {n_features} "
                 f"features: the centres, their augmented copy, two M x t vectors and one "
                 f"{plan['tile_rows']} x M kernel sub-tile (float64) that", plan["task_fixed"],
                 "lower n_centers")]

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        super()._check_params_for_shape(n_samples, n_features)
        self._check_driver_memory(n_samples, n_features, 1)

    def _check_driver_memory(self, n_samples: int, n_features: int, n_targets: int) -> dict:
        plan = self._plan(n_samples, n_features, n_targets)
        budget, source = driver_memory_budget()
        if plan["driver"] > budget:
            M = self._n_centers(n_samples)
            s = self._factor_dtype(M).itemsize
            raise MemoryBudgetError(
                f"{type(self).__name__}: n_centers={M} needs {format_bytes(plan['driver'])} on the "
                f"driver (2·M²·{s} bytes of preconditioner factors + 8·M·(d + 6t) of vectors + "
                f"one {plan['tile_rows']} x M kernel tile, "
                f"M={M}, d={n_features}, t={n_targets}) but the driver may use "
                f"{format_bytes(budget)} ({source}). Fix: lower n_centers, use "
                "factor_dtype='float32' (half the factors), or raise distsketch.driver-memory if "
                "the machine has that memory.")
        return plan

    def _key(self, X: Any, Y: np.ndarray, M: int) -> str:
        from distsketch.io import fingerprint

        spec = self.landmarks if isinstance(self.landmarks, str) else hashlib.sha256(
            np.ascontiguousarray(np.asarray(to_numpy(self.landmarks), dtype=np.float64)).tobytes()
        ).hexdigest()
        record = {
            "class": type(self).__name__, "kernel": str(self.kernel_name_),
            "params": {k: float(v) for k, v in self.kernel_params_.items()},
            "alpha": float(self.alpha), "M": M, "landmarks": spec,
            "kmeans_sample": int(self.kmeans_sample), "factor_dtype": self.factor_dtype_,
            "tol": float(self.tol), "seed": int(self.seed_), "shape": list(X.shape),
            "X": fingerprint(X)["sample_hash"],
            "y": hashlib.sha256(np.ascontiguousarray(Y).tobytes()).hexdigest(),
        }
        return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()

    def _resume(self, key: str) -> FalkonCheckpoint | None:
        if self.checkpoint is None:
            return None
        from distsketch.io import load
        from distsketch.io.storage.urls import resolve

        if not resolve(self.checkpoint).exists():
            return None
        ck = load(self.checkpoint)
        if not isinstance(ck, FalkonCheckpoint):
            raise ConfigError(f"{type(self).__name__}: checkpoint={str(self.checkpoint)!r} holds a "
                              f"{type(ck).__name__}, not a Falkon CG state; point checkpoint at "
                              "another path.")
        if ck.key != key:
            raise ConfigError(
                f"{type(self).__name__}: the checkpoint {str(self.checkpoint)!r} belongs to another "
                "fit (other data, targets or parameters; only max_iter and verbose may change "
                "between a run and its resumption). Remove it, or point checkpoint elsewhere.")
        return ck

    def _save(self, key: str, centers: np.ndarray, b: np.ndarray, cg: FalkonCG) -> None:
        if self.checkpoint is not None:
            from distsketch.io import save_model

            save_model(FalkonCheckpoint.of(key, centers, b, cg), self.checkpoint, overwrite=True)

    def _rhs(self, X: Any, Y: np.ndarray, centers: np.ndarray) -> np.ndarray:
        """``K_nMᵀ Y``: the first pass, over ``[X | Y]``."""
        summary = FalkonPass(self.kernel_name_, self.kernel_params_,
                             self.memory_plan_["tile_rows"], n_y=Y.shape[1])
        XY = stack_xy(X, asarray(Y, like=getattr(X, "_meta", X)))  # Y on X's blocks' device
        state = reduce_blocks(summary, XY, centers, name="falkon-rhs", footprint=falkon_pass_footprint(
            self.memory_plan_, centers.shape[0], Y.shape[1]))
        return np.asarray(state["b"], dtype=np.float64)

    def _h_times(self, X: Any, centers: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``H P = K_nMᵀ (K_nM P) + λ n K_MM P``: one pass plus an M × M tiled product."""
        summary = FalkonPass(self.kernel_name_, self.kernel_params_,
                             self.memory_plan_["tile_rows"])
        state = reduce_blocks(summary, X, centers, P, name="falkon-pass", footprint=falkon_pass_footprint(
            self.memory_plan_, P.shape[0], P.shape[1]))
        reg = kernel_times(centers, [centers], [P], self.kernel_name_, self.kernel_params_)
        return np.asarray(state["hv"], dtype=np.float64) + float(self.alpha) * X.shape[0] * reg

    def _fit_targets(self, X: Any, Y: np.ndarray) -> None:
        """Fit ``coef_`` (M × t) for float64 targets Y (n × t), reading X once where it can be
        held in memory (:func:`~distsketch.graph.row_cache.cached_rows`)."""
        with cached_rows(X, "falkon-rows") as rows:
            self._solve(rows, Y)

    def _solve(self, X: Any, Y: np.ndarray) -> None:
        n, d = X.shape
        self.kernel_name_, self.kernel_params_ = fit_kernel_params(self, X)
        M = self._n_centers(n)
        self.factor_dtype_ = self._factor_dtype(M).name
        self.memory_plan_ = self._check_driver_memory(n, d, Y.shape[1])
        # the key of a checkpoint hashes a few rows: not read without one
        key = self._key(X, Y, M) if self.checkpoint is not None else ""
        saved = self._resume(key)
        label = type(self).__name__
        level = logging.INFO if int(self.verbose) > 0 else logging.DEBUG
        if saved is not None:
            centers, b = np.asarray(saved.centers_, dtype=np.float64), np.asarray(saved.rhs_)
            logger.log(level, "%s: resuming from %s at iteration %d", label, self.checkpoint,
                       int(saved.n_iter_))
        else:
            centers = select_centers(X, self.landmarks, M, self.seed_, self)
            b = self._rhs(X, Y, centers)
        T, A, self.jitter_ = falkon_preconditioner(centers, self.kernel_name_, self.kernel_params_,
                                                   float(self.alpha), self.factor_dtype_)

        def precond(R: np.ndarray) -> np.ndarray:
            return falkon_apply(T, A, R, n)

        tol = float(self.tol)
        if saved is not None:
            cg = saved.state()
        else:
            cg = FalkonCG.start(b, precond, tol)
            self._save(key, centers, b, cg)
        while cg.n_iter < int(self.max_iter) and not cg.done:
            t0 = time.perf_counter()
            cg.step(self._h_times(X, centers, cg.p), precond, tol, label)
            self._save(key, centers, b, cg)
            logger.log(level, "%s: pass %d in %.2f s, relative residual %.3e", label, cg.n_iter,
                       time.perf_counter() - t0, cg.residuals[-1])
        self.centers_ = centers
        self._coef = cg.x
        res = CGResult(x=cg.x, n_iter=cg.n_iter, residuals=np.asarray(cg.residuals),
                       converged=cg.done)
        record_cg(self, res, "raise max_iter (a checkpoint resumes where this run stopped), "
                  "n_centers or alpha.", stacklevel=4)

    def _start(self, X: Any) -> Any:
        """The checks every fit starts with; returns X as the passes read it."""
        X = self._check_input(X, reset=True)
        self._check_params_for_shape(*X.shape)
        return X

    @fit_context
    def fit(self, X: Any, y: Any) -> NystromKernelRidge:
        """Pick the centres, then solve for ``coef_`` by CG with one pass over X per iteration.

        X (array, dask array or Zarr store/path, n_samples × n_features) is
        read once and held in memory for the later passes when it fits the
        row cache (dask config ``distsketch.cache-rows``,
        :mod:`distsketch.graph.row_cache`), else read again by every pass; y
        holds one or several targets per row.
        Returns the fitted estimator.
        """
        X = self._start(X)
        Y, one_d = solver_targets(self, y, X.shape[0])
        self._init_seed()
        self._fit_targets(X, Y)
        self.coef_ = self._coef[:, 0] if one_d else self._coef
        self.n_samples_seen_ = int(X.shape[0])
        return self

    def _decision(self, X: Any, coef: np.ndarray) -> Any:
        X = self._check_input(X, reset=False)
        C = np.asarray(self.centers_, dtype=np.float64)
        W = np.asarray(coef, dtype=np.float64).reshape(C.shape[0], -1)
        out = map_blocks(X, kernel_times_rows, C, W, n_out=W.shape[1], dtype=np.float64,
                         kwargs={"kernel": self.kernel_name_, "params": self.kernel_params_},
                         footprint=kernel_times_rows_footprint(X.shape[1], C.shape[0], W.shape[1],
                                                               self.kernel_name_),
                         name="falkon-predict")
        return check_finite_output(out, stage=f"{type(self).__name__} predict")

    def predict(self, X: Any) -> Any:
        """``K(X, centers_) coef_`` for rows X (n_new × n_features), block by block.

        NumPy in gives an ndarray of shape (n_new,) or (n_new, n_targets);
        a dask array in gives the same lazily.
        """
        self._check_is_fitted("coef_")
        out = self._decision(X, self.coef_)
        return out[:, 0] if np.ndim(self.coef_) == 1 else out

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of ``predict(X)`` (averaged over targets)."""
        return r_squared(np.asarray(to_numpy(self.predict(X))), y)
