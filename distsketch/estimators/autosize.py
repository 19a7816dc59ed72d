"""Feature-map sizes from an error target: ``n_components="auto"`` with ``target_error``.

A map asked for ``"auto"`` takes one pass over X for a chunking-independent row
sample (:func:`distsketch.metrics.sample_rows`), split by a hash of the row number
into *evaluation* rows E and, for maps that read the data in ``fit`` (Nyström
landmarks, GaussianSketch's centre), *pilot-fit* rows F.  Copies of the map at a few
small sizes are fitted on F (or on E) and their relative kernel error
‖K_EE − Z_E Z_Eᵀ‖_F / ‖K_EE‖_F on E sets the size (:func:`choose_size`), with the
error model's exponent a = 1/2 for random features (a Monte Carlo average of m
terms) and fitted for Nyström (the spectrum tail) and the Taylor-series sketches.
The error of the map finally fitted on X, measured on E, is the certificate
(``kernel_error_``); a map that reads its rows and misses there is refitted larger.

References
----------
Sutherland, Schneider. On the error of random Fourier features. UAI 2015 (the
m^(−1/2) law of random features).
Bach. Sharp analysis of low-rank kernel matrix approximations. COLT 2013
(Nyström error and the spectrum tail).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import clone

from distsketch.errors import ConfigError
from distsketch.estimators.kernel_params import resolve_gamma
from distsketch.metrics import model_kernel, sample_rows
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.random import hash_uint64

__all__ = ["AUTO", "AutoSized", "SizeChoice", "choose_size", "fit_power_law", "relative_error"]

#: the size parameter value that asks for a size from ``target_error``
AUTO = "auto"
#: the target used when ``target_error`` is None
DEFAULT_TARGET = 0.1
#: evaluation rows of the pilot sample (an s × s exact Gram; the relative error of the
#: error estimate is about 1/√s for a Frobenius norm over s² entries, a few per cent)
EVAL_ROWS = 500
#: the largest size "auto" chooses (a map of 16 384 features on 500 rows is 64 MiB)
MAX_SIZE = 16384
#: sizes measured before the model is fitted: start, 2·start, 4·start
_PILOT_STEPS = 3
#: a relative error below this is rounding (an exact map: SRHT with m = D, no hash collisions)
_EXACT = 1e-10
#: the chosen size is within this factor of a measured size that missed
_NARROW = 1.25
#: refits on all rows at a larger size when the map fitted on X misses (data-dependent maps)
_REFITS = 3
#: rounds of "measure, grow" after the model's first guess
_GROW_ROUNDS = 6


def is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == AUTO


def relative_error(K: np.ndarray, K_hat: np.ndarray) -> float:
    """‖K − K̂‖_F / ‖K‖_F (0 for a zero K)."""
    den = float(np.linalg.norm(K))
    return float(np.linalg.norm(K - K_hat)) / den if den > 0 else 0.0


def fit_power_law(sizes: np.ndarray, errors: np.ndarray, slope: float | None) -> tuple[float, float]:
    """(c, a) of e(m) = c·m^(−a) through the measured points (log-log least squares).

    ``slope`` fixes a (then c is the geometric mean of e·m^a); None fits a,
    clipped to [0.25, 4] so that two noisy points cannot give a flat or a cliff.
    Errors at rounding level are left out (an exact map needs no model).
    """
    m = np.asarray(sizes, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    ok = e > _EXACT
    m, e = m[ok], e[ok]
    if m.size == 0:
        return 0.0, 0.5 if slope is None else slope
    if slope is None:
        a = 0.5 if m.size < 2 else float(-np.polyfit(np.log(m), np.log(e), 1)[0])
        slope = float(np.clip(a, 0.25, 4.0))
    return float(np.exp(np.mean(np.log(e) + slope * np.log(m)))), slope


@dataclass
class SizeChoice:
    """A size chosen for a target: the pilot's measurements and the model fitted to them."""

    size: int
    error: float
    target: float
    measured: dict[int, float] = field(default_factory=dict)
    slope: float = 0.5
    scale: float = 0.0


def choose_size(measure: Callable[[int], float], target: float, *, start: int, cap: int,
                admissible: Callable[[int], int], slope: float | None, owner: str,
                param: str) -> SizeChoice:
    """The smallest size the error model gives for ``target``, checked by ``measure``.

    ``measure(m)`` is the relative kernel error of the map of size m on the
    evaluation rows; ``admissible(m)`` rounds m up to a size the map accepts
    (an even width, at most the Hadamard dimension); ``cap`` bounds the search.
    Sizes start, 2·start, 4·start are measured, e(m) = c·m^(−a) is fitted
    (:func:`fit_power_law`), the size it gives for ``target`` is measured and
    grown while it misses, then narrowed geometrically towards the largest
    smaller size that missed; the smallest measured size meeting the target wins.

    Raises
    ------
    ConfigError
        When the size ``cap`` still misses the target.
    """
    seen: dict[int, float] = {}

    def err(m: int) -> float:
        if m not in seen:
            seen[m] = float(measure(m))
        return seen[m]

    cap = admissible(max(1, cap))
    pilot = sorted({admissible(min(cap, start << i)) for i in range(_PILOT_STEPS)})
    for m in pilot:
        err(m)
    c, a = fit_power_law(np.array(pilot), np.array([seen[m] for m in pilot]), slope)
    m = admissible(int(min(cap, max(1, math.ceil((c / target) ** (1.0 / a)))))) if c > 0 else pilot[0]
    for _ in range(_GROW_ROUNDS):
        e = err(m)
        if e <= target:
            break
        if m >= cap:
            raise ConfigError(
                f"{owner}: {param}='auto' cannot reach target_error={target:g}: at the largest "
                f"size it tries, {param}={cap}, the relative kernel error on the {EVAL_ROWS}-row "
                f"sample is {e:.3g} (error model {c:.3g}·m^-{a:.2f} asks for about "
                f"{param}={math.ceil((c / target) ** (1.0 / a)) if c > 0 else cap}). Raise "
                f"target_error, or pass {param} as an integer.")
        grow = (e / target) ** (1.0 / a) if a > 0 else 2.0
        m = admissible(int(min(cap, max(math.ceil(1.1 * m), math.ceil(m * grow)))))
    else:
        e = err(m)
        if e > target:
            raise ConfigError(
                f"{owner}: {param}='auto' did not reach target_error={target:g} in "
                f"{_GROW_ROUNDS} rounds (last {param}={m}, error {e:.3g}); pass {param} as an "
                "integer.")
    # narrow the gap between the largest miss below m and m geometrically, so that the
    # size is within _NARROW of one that missed (a grow step may have overshot)
    lo = max((s for s, v in seen.items() if s < m and v > target), default=0)
    hi = m
    for _ in range(_GROW_ROUNDS):
        if lo == 0 or hi <= _NARROW * lo:
            break
        mid = admissible(round(math.sqrt(lo * hi)))
        if not lo < mid < hi:
            break
        if err(mid) <= target:
            hi = mid
        else:
            lo = mid
    # the smallest measured size meeting the target (the error of one draw per size need
    # not fall monotonically)
    ok = [s for s, v in seen.items() if v <= target]
    best = min(ok) if ok else m
    return SizeChoice(best, seen[best], target, dict(sorted(seen.items())), a, c)


def _split(index: np.ndarray, seed: int, n_eval: int) -> np.ndarray:
    """A boolean mask of the evaluation rows: the n_eval smallest hash(seed, row)."""
    if n_eval >= index.size:
        return np.ones(index.size, dtype=bool)
    order = np.argsort(hash_uint64(seed, "autosize.split", index), kind="stable")
    mask = np.zeros(index.size, dtype=bool)
    mask[order[:n_eval]] = True
    return mask


class AutoSized:
    """Size hooks of a feature map whose size may be ``"auto"`` (with ``target_error``).

    A map's ``fit`` calls :meth:`_resolve_size` before drawing its operator
    and :meth:`_certify` after; the size is stored as ``<param>_`` (e.g.
    ``n_components_``), the error reached as ``kernel_error_`` and the pilot's
    measurements as ``pilot_sizes_``, ``pilot_errors_`` (sizes increasing).
    """

    #: the parameter holding the size
    _size_param = "n_components"
    #: the smallest size measured by the pilot
    _auto_start = 32
    #: exponent a of the error model e ∝ m^(−a); None fits it from the pilot
    _auto_slope: float | None = 0.5
    #: rows the pilot copies are fitted on besides the evaluation rows (0: they read no rows)
    _auto_fit_rows = 0
    #: parameters the pilot copies take (checks that would refuse a small pilot size)
    _auto_overrides: dict[str, Any] = {}
    #: the size cannot exceed the pilot-fit rows (landmarks drawn from them)
    _auto_rows_cap = False

    def _auto_cap(self, n_samples: int, n_features: int) -> int:
        return MAX_SIZE

    def _admissible(self, m: int) -> int:
        return int(m)

    def _size_for_check(self) -> int:
        """For "auto", the size chosen so far (the smallest pilot size before the choice)."""
        value = getattr(self, self._size_param)
        if not is_auto(value):
            return int(value)
        return int(getattr(self, "_auto_size", None) or self._auto_start)

    def _exact_kernel(self, fitted: Any) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        spec = dict(model_kernel(fitted) or {"kernel": "linear"})
        name = spec.pop("kernel")
        if callable(name):
            return lambda A, B: np.asarray(name(A, B), dtype=np.float64)
        return lambda A, B: pairwise_kernel(A, B, name, **spec)

    def _resolve_size(self, X: Any) -> int:
        """The size to fit with: the given integer, or one chosen for ``target_error``."""
        retry = getattr(self, "_auto_retry", None)
        self._auto_retry: tuple[Any, int] | None = None
        self._auto_choice: tuple[SizeChoice, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._auto_size: int | None = None
        value = getattr(self, self._size_param)
        if not is_auto(value):
            return int(value)
        n, d = int(X.shape[0]), int(X.shape[1])
        if retry is not None:
            # a refit at a larger size after the map fitted on X missed the target
            self._auto_choice, self._auto_size = retry
            self._check_params_for_shape(n, d)  # type: ignore[attr-defined]
            return int(retry[1])
        self._auto_refits = 0
        target = getattr(self, "target_error", None)
        target = DEFAULT_TARGET if target is None else float(target)
        seed = int(self.seed_)  # type: ignore[attr-defined]
        n_eval = min(EVAL_ROWS, n if not self._auto_fit_rows else max(2, n // 2))
        index, rows = sample_rows(X, n_eval + self._auto_fit_rows, random_state=seed)
        mask = _split(index, seed, n_eval)
        eval_rows = rows[mask]
        fit_rows = rows[~mask] if self._auto_fit_rows else eval_rows
        overrides = dict(self._auto_overrides)
        if "gamma" in self.get_params():  # type: ignore[attr-defined]
            # resolved once on X, so that the pilot copies approximate the same kernel
            overrides["gamma"] = resolve_gamma(self.gamma, X)  # type: ignore[attr-defined]
        gram: list[np.ndarray] = []
        owner = type(self).__name__

        def measure(m: int) -> float:
            est = clone(self).set_params(**{self._size_param: m}, **overrides)  # type: ignore[arg-type]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(fit_rows)
            if not gram:
                gram.append(self._exact_kernel(est)(eval_rows, eval_rows))
            return relative_error(gram[0], est.kernel_approx(eval_rows))

        cap = self._auto_cap(n, d)
        if self._auto_rows_cap:
            cap = min(cap, int(fit_rows.shape[0]))
        choice = choose_size(measure, target, start=min(self._auto_start, cap), cap=cap,
                             admissible=self._admissible, slope=self._auto_slope, owner=owner,
                             param=self._size_param)
        self._auto_choice = (choice, index[mask], eval_rows, gram[0])
        self._auto_size = choice.size
        self._check_params_for_shape(n, d)  # type: ignore[attr-defined]
        return choice.size

    def _certify(self, X: Any) -> None:
        """``kernel_error_`` on the evaluation rows ("auto" only); a map that reads its
        rows and misses the target is refitted larger (at most ``_REFITS`` times)."""
        auto = getattr(self, "_auto_choice", None)
        if auto is None:
            return
        choice, index, rows, K = auto
        self._auto_choice = None
        # rows that are landmarks of the fitted map are reproduced exactly: leave them out
        keep = ~np.isin(index, getattr(self, "landmark_indices_", np.zeros(0, dtype=np.int64)))
        if not keep.all():
            rows, K = rows[keep], K[np.ix_(keep, keep)]
        self.kernel_error_ = relative_error(K, self.kernel_approx(rows))  # type: ignore[attr-defined]
        self.pilot_sizes_ = np.array(list(choice.measured), dtype=np.int64)
        self.pilot_errors_ = np.array(list(choice.measured.values()), dtype=np.float64)
        m = int(self._auto_size or choice.size)
        if self.kernel_error_ <= choice.target:
            return
        cap = self._admissible(min(self._auto_cap(*X.shape), int(X.shape[0])))
        if self._auto_refits < _REFITS and m < cap:
            grow = (self.kernel_error_ / choice.target) ** (1.0 / choice.slope)
            self._auto_refits += 1
            self._auto_retry = (auto, self._admissible(
                int(min(cap, max(math.ceil(1.2 * m), math.ceil(m * grow))))))
            self.fit(X)  # type: ignore[attr-defined]
            return
        warnings.warn(
            f"{type(self).__name__}: {self._size_param}='auto' chose {choice.size} on the pilot "
            f"rows (error {choice.error:.3g}), but the map fitted on all rows with "
            f"{self._size_param}={m} has relative kernel error {self.kernel_error_:.3g} > "
            f"target_error={choice.target:g} on the {rows.shape[0]} evaluation rows; pass a "
            f"larger {self._size_param} explicitly.", UserWarning, stacklevel=3)
