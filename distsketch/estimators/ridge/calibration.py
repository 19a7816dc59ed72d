"""Calibrated class probabilities of the kernel ridge classifier (temperature scaling).

The design is in the Notes of
:class:`~distsketch.estimators.ridge.classifier.SketchedKernelRidgeClassifier`.  The
leave-one-out values are exact for ridge, ``d₋ᵢ = (dᵢ − hᵢ yᵢ) / (1 − hᵢ)`` with the
leverage ``hᵢ = wᵢ (1/Σw + z̃ᵢᵀ(Z̃ᵀWZ̃ + λI)⁻¹z̃ᵢ)`` (z̃ centred; no ``1/Σw`` without an
intercept); in-sample values would be useless, as with as many features as rows the fit
interpolates its training labels.  One scalar keeps ``argmax predict_proba == predict``
(a per-class bias would not) and cannot overfit a 2000-row sample.
"""

from __future__ import annotations

import numpy as np

from distsketch.blas import single_threaded_blas
from distsketch.estimators.ridge.system import RidgeSystem
from distsketch.summaries.landmarks import UniformLandmarks

__all__ = ["CALIBRATION_ROWS", "MIN_CALIBRATION_ROWS", "calibration_rows", "calibration_sampler",
           "fit_inverse_temperature", "loo_decision_values"]

#: rows of the calibration sample
CALIBRATION_ROWS = 2000

#: fewest sample rows a fit calibrates on (all the sample holds when it holds fewer)
MIN_CALIBRATION_ROWS = 1000

#: rows whose leverage is above this are left out (their leave-one-out value is unstable)
MAX_LEVERAGE = 0.99


def calibration_sampler(seed: int, n_samples: int = CALIBRATION_ROWS) -> UniformLandmarks:
    """The bottom-k row sample that calibrates ``predict_proba`` (its first ``n_samples``)."""
    return UniformLandmarks(int(n_samples), int(seed), "ridge.calibration")


def calibration_rows(n_rows: int) -> int:
    """Sample rows that calibrate a fit on ``n_rows`` rows: n / 8 within [1000, 2000].

    The leverages cost O(k · m²) against the pass's O(n · m²) for ``ZᵀZ``, so
    an eighth of the rows keeps calibration under an eighth of that product;
    one scalar is fitted, and its log-loss is flat near the optimum, so 1000
    rows pin it well enough (``benchmarks/bench_small_fits.py`` prints the
    held-out log-loss).
    """
    return int(min(CALIBRATION_ROWS, max(MIN_CALIBRATION_ROWS, int(n_rows) // 8)))


@single_threaded_blas
def loo_decision_values(Z: np.ndarray, Y: np.ndarray, w: np.ndarray, state: dict,
                        alpha: float, fit_intercept: bool, W: np.ndarray,
                        c: np.ndarray, system: RidgeSystem | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out decision values ``D`` (k', t) of the sample rows kept, and ``keep`` (k,).

    ``Z`` (k, m), ``Y`` (k, t) and ``w`` (k,) are features, targets and weights of rows in
    ``state``, whose solution at ``alpha`` is ``W`` (m, t), ``c`` (t,).  Rows are kept where
    their leverage is below :data:`MAX_LEVERAGE`.  ``system`` (the solve's, when given)
    gives the leverages without a factorisation of their own.
    """
    if system is None:
        system = RidgeSystem(state, fit_intercept)
    Zc = Z - system.zm[None, :] if fit_intercept else Z
    quad = system.quadratic_forms(Zc, alpha)
    h = w * (quad + (1.0 / float(state["n"]) if fit_intercept else 0.0))
    keep = (h < MAX_LEVERAGE) & (w > 0)
    D = Z @ W + c[None, :]
    loo = (D - h[:, None] * Y) / (1.0 - h)[:, None]
    return loo[keep], keep


def _class_scores(D: np.ndarray) -> np.ndarray:
    # two classes: one column d stands for the scores (−d, d), as softmax_scores reads it
    return np.hstack([-D, D]) if D.shape[1] == 1 else D


def fit_inverse_temperature(D: np.ndarray, Y: np.ndarray, w: np.ndarray,
                            max_iter: int = 100) -> float:
    """The ``a > 0`` that minimises the weighted log-loss of ``softmax(a · D)``.

    ``D`` (k, t) are decision values and ``Y`` (k, t) ±1 targets (one column each for two
    classes), ``w`` (k,) row weights; 1.0 (the plain softmax) when the sample holds no row.
    ``L(a) = Σ wᵢ (logsumexp(a Dᵢ) − a Dᵢ,yᵢ)`` is convex in a with
    ``L′ = Σ wᵢ (E_p[Dᵢ] − Dᵢ,yᵢ)`` and ``L″ = Σ wᵢ Var_p[Dᵢ]``; each Newton
    step is halved until L decreases and a stays positive.
    """
    if D.shape[0] == 0 or not np.sum(w) > 0:
        return 1.0
    S = _class_scores(np.asarray(D, dtype=np.float64))
    T = _class_scores(np.asarray(Y, dtype=np.float64))
    target = S[np.arange(S.shape[0]), T.argmax(axis=1)]
    w = np.asarray(w, dtype=np.float64) / np.sum(w)

    def loss(a: float) -> float:
        L = a * S
        top = L.max(axis=1)
        lse = top + np.log(np.exp(L - top[:, None]).sum(axis=1))
        return float(np.dot(w, lse - a * target))

    a, cur = 1.0, loss(1.0)
    for _ in range(max_iter):
        L = a * S
        P = np.exp(L - L.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        mean = (P * S).sum(axis=1)
        grad = float(np.dot(w, mean - target))
        hess = float(np.dot(w, (P * S ** 2).sum(axis=1) - mean ** 2))
        if not hess > 0:
            break
        step = grad / hess
        t = 1.0
        while t > 1e-10:
            new = a - t * step
            if new > 0 and loss(new) <= cur:
                break
            t /= 2
        else:
            break
        a, prev = new, cur
        cur = loss(a)
        if abs(prev - cur) <= 1e-14 * max(1.0, abs(cur)) or abs(t * step) <= 1e-12 * a:
            break
    return float(a)
