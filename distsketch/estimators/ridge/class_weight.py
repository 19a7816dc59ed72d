"""Per-row weights from a ``class_weight`` parameter, as scikit-learn defines them."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.estimators.ridge.weights import MAX_WEIGHT_SUM

__all__ = ["class_row_weights"]


def class_row_weights(class_weight: Any, classes: np.ndarray, codes: np.ndarray,
                      where: str) -> np.ndarray:
    """Weight of every row (float64, shape (n_rows,)): the weight of its class.

    "balanced": class c weighs ``n / (n_classes · n_c)`` with ``n_c`` its rows among
    ``codes`` (each row's index into the sorted ``classes``; scikit-learn's
    ``compute_class_weight``); a dict maps labels to non-negative weights, labels not in
    it weigh 1.  A ConfigError names a key that is not a class, or a weight that is not a
    finite number in [0, :data:`~distsketch.estimators.ridge.weights.MAX_WEIGHT_SUM`].
    """
    codes = np.asarray(codes, dtype=np.int64)
    if isinstance(class_weight, str):
        counts = np.bincount(codes, minlength=classes.size).astype(np.float64)
        per_class = np.where(counts > 0, codes.size / (classes.size * np.maximum(counts, 1)), 0.0)
        return per_class[codes]
    per_class = np.ones(classes.size)
    known = {c: i for i, c in enumerate(classes.tolist())}
    for label, weight in class_weight.items():
        key = label.item() if isinstance(label, np.generic) else label
        if key not in known:
            raise ConfigError(f"{where}: class_weight names the label {label!r}, which is not one "
                              f"of the classes {classes.tolist()}; use labels of y as keys.")
        try:
            value = float(weight)
        except (TypeError, ValueError):
            value = float("nan")
        if not (np.isfinite(value) and value >= 0):
            raise ConfigError(f"{where}: class_weight[{label!r}] = {weight!r}; a class weight "
                              "must be a finite number >= 0.")
        if value > MAX_WEIGHT_SUM:
            # one row of the class would already overflow the weighted sums of the fit
            raise ConfigError(
                f"{where}: class_weight[{label!r}] = {weight!r} is too large: a row weight "
                f"above {MAX_WEIGHT_SUM:.3g} overflows the fit's weighted sums in float64 (the "
                "data X is not the problem). Class weights are relative: divide every class "
                "weight by one constant c, e.g. the largest (with a fixed alpha, divide alpha "
                "by c too for the same fit).")
        per_class[known[key]] = value
    return per_class[codes]
