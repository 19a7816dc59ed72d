"""The comparison of a model fitted on another array namespace with its NumPy twin.

Shared by tests/estimators/test_array_namespace.py (array-api-strict) and
tests/gpu/test_cupy_estimators.py (CuPy).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.base import is_classifier, is_regressor

# a Frequent Directions sketch B is defined up to the signs of its rows (the SVD or
# eigendecomposition of each shrink, which two libraries may choose differently): BᵀB
# is what it approximates
SIGN_FREE = {"sketch_"}


def targets(est: Any, y: np.ndarray) -> np.ndarray | None:
    """What ``est.fit`` takes as y: class labels for a classifier, y for a regressor or an
    estimator that requires targets (RoundedExpansion: coefficients), else None."""
    if is_classifier(est):
        return (y > 0).astype(np.int64)
    required = est.__sklearn_tags__().target_tags.required
    return y if is_regressor(est) or required else None


def fit_pair(build: Any, cls: type, X: np.ndarray, y: np.ndarray | None, Xo: Any,
             yo: Any) -> tuple[Any, Any] | None:
    """``(fit on X, fit on Xo)``, or None once an estimator without a GPU path is seen
    refusing ``Xo`` with the ConfigError docs/gpu.md lists."""
    def fit(A: Any, b: Any, **params: Any) -> Any:
        est = build(cls).set_params(**params)
        return est.fit(A) if b is None else est.fit(A, b)

    if not cls._array_api_support:  # type: ignore[attr-defined]
        from distsketch.errors import ConfigError

        with pytest.raises(ConfigError, match=r"has no GPU \(array-API\) path yet"):
            fit(Xo, yo)
        return None
    got = fit(Xo, yo)
    # a state chosen from the input's namespace (Frequent Directions' "auto": the exact
    # covariance on a device) is asked for explicitly on NumPy, so both fits compute alike
    same = ({"state": got.state_} if "state" in got.get_params() and hasattr(got, "state_")
            else {})
    return fit(X, y, **same), got


def solver_tol(ref: Any) -> float | None:
    """The CG tolerance of an estimator fitted by an iterative solve (None for direct ones)."""
    if not hasattr(ref, "residuals_") or "tol" not in ref.get_params():
        return None
    return float(ref.get_params()["tol"])


def tolerances(ref: Any, expected: Any, rtol: float, atol: float) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing ``expected`` (an attribute or output of ``ref``).

    A CG solve stops once its relative residual is under ``tol``; the last
    rounding-level difference of a pass changes where it stops by up to about
    ``tol`` of the solution, so such an estimator agrees to 10 × tol of the
    largest value (docs/gpu.md states it), a direct one to float64 rounding:
    ``rtol`` of each value or of the largest (a linear solve's normwise error).
    """
    values = np.asarray(expected)
    numeric = np.issubdtype(values.dtype, np.number)
    scale = float(np.max(np.abs(values), initial=0.0)) if numeric else 0.0
    tol = solver_tol(ref)
    if tol is None:
        # normwise: a solve (ridge, eigenvectors) rounds each entry to rtol of the largest
        return rtol, max(atol, rtol * scale)
    return max(rtol, 10 * tol), max(atol, 10 * tol * scale)


def assert_learned_match(got: Any, ref: Any, foreign: str, rtol: float, atol: float) -> None:
    """Every learned attribute of ``got`` is host (no ``foreign`` module) and equals ``ref``'s."""
    learned = {k: v for k, v in vars(got).items() if k.endswith("_") and not k.startswith("_")}
    for name, value in learned.items():
        assert not type(value).__module__.startswith(foreign), name
        if not isinstance(value, np.ndarray) or value.dtype == object:
            continue
        expected = getattr(ref, name)
        if name == "residuals_" and (tol := solver_tol(ref)) is not None:
            # the residual history is the path, not the result (another rounding may take
            # one more or one fewer pass): both fits must have converged to the same tol
            assert value[-1] <= tol and expected[-1] <= tol, name
            continue
        if name in SIGN_FREE:
            value, expected = value.T @ value, expected.T @ expected
        elif name == "components_" and np.shape(getattr(ref, "singular_values_", ())) == \
                (value.shape[0],):
            # rows of a zero singular value span the null space in any basis
            keep = ref.singular_values_ > 1e-8 * ref.singular_values_.max()
            value, expected = value[keep], expected[keep]
        rt, at = tolerances(ref, expected, rtol, atol)
        np.testing.assert_allclose(value, expected, rtol=rt, atol=at, err_msg=name)
