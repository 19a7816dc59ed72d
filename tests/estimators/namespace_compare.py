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
    def fit(A: Any, b: Any) -> Any:
        return build(cls).fit(A) if b is None else build(cls).fit(A, b)

    if not cls._array_api_support:  # type: ignore[attr-defined]
        from distsketch.errors import ConfigError

        with pytest.raises(ConfigError, match=r"has no GPU \(array-API\) path yet"):
            fit(Xo, yo)
        return None
    return fit(X, y), fit(Xo, yo)


def assert_learned_match(got: Any, ref: Any, foreign: str, rtol: float, atol: float) -> None:
    """Every learned attribute of ``got`` is host (no ``foreign`` module) and equals ``ref``'s."""
    learned = {k: v for k, v in vars(got).items() if k.endswith("_") and not k.startswith("_")}
    for name, value in learned.items():
        assert not type(value).__module__.startswith(foreign), name
        if not isinstance(value, np.ndarray) or value.dtype == object:
            continue
        expected = getattr(ref, name)
        if name in SIGN_FREE:
            value, expected = value.T @ value, expected.T @ expected
        elif name == "components_" and np.shape(getattr(ref, "singular_values_", ())) == \
                (value.shape[0],):
            # rows of a zero singular value span the null space in any basis
            keep = ref.singular_values_ > 1e-8 * ref.singular_values_.max()
            value, expected = value[keep], expected[keep]
        np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol, err_msg=name)
