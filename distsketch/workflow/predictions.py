"""Supervised outputs of a workflow: predictions of every input row (written as ``distsketch
predict`` writes them) and a fit metric, both streamed one block at a time."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.workflow.methods import HOLDOUT, held_out

__all__ = ["DEFAULT_NAME", "check_predictions_output", "feature_output", "fit_metric",
           "is_supervised", "predictions_output", "write_predictions"]

#: the file name of the predictions when the spec does not name one
DEFAULT_NAME = "predictions.zarr"

# rows of predictions and targets read at a time to measure the fit
_METRIC_ROWS = 1 << 18


def check_predictions_output(value: Any, features: Any, where: str) -> Any:
    """A spec's ``outputs.predictions``: true, false/null, or a file name inside ``result/``."""
    if value is None or isinstance(value, bool):
        return value
    if not isinstance(value, str) or not value or "/" in value or value.startswith("."):
        raise ConfigError(f"{where}: outputs.predictions must be true, false or a plain file name "
                          f"inside outputs.dir, got {value!r}.")
    if value == features:
        raise ConfigError(f"{where}: outputs.predictions and outputs.features are both {value!r}; "
                          "give them different names (features hold a model's transform, "
                          "predictions its predict).")
    return value


def is_supervised(spec: Any, model: Any) -> bool:
    """A model fitted on targets that predicts them."""
    return spec.targets is not None and callable(getattr(model, "predict", None))


def predictions_output(spec: Any, model: Any) -> str | None:
    """The file name the predictions go to, or None (not supervised, or turned off)."""
    value = getattr(spec.outputs, "predictions", None)
    if value is False or not is_supervised(spec, model):
        return None
    return DEFAULT_NAME if value is None or value is True else str(value)


def feature_output(spec: Any, model: Any) -> str | None:
    """The file name of the features (a model's ``transform`` of every row), or None (also
    when an older spec named the predictions' file as ``features``)."""
    name = spec.outputs.features
    if not name or not callable(getattr(model, "transform", None)):
        return None
    return None if name == predictions_output(spec, model) else name


def write_predictions(folder: Any, spec: Any, model: Any, Xs: Any, n: int,
                      timings: dict[str, float], key: str) -> dict[str, Any] | None:
    """Write ``model``'s predictions of the preprocessed rows ``Xs[:n]`` (if enabled) into the
    result ``folder`` (a path, or a writer with ``target(name)``) and measure the fit.

    Returns None for an unsupervised run, else :func:`fit_metric`'s dict plus
    ``"predictions"`` (the file name or None).  One pass over X, then one driver pass
    over the written predictions and the targets.
    """
    if not is_supervised(spec, model):
        return None
    from sklearn.base import is_classifier

    from distsketch.io import write_array
    from distsketch.io.arrays.class_codes import predictions_attrs

    name = predictions_output(spec, model)
    # the shape predict gives, as the CLI writes it: (n,) for labels or one target
    P = model.predict(Xs)
    source: Any = P
    so = getattr(spec, "storage_options", None)
    if name is not None:
        from distsketch.io.arrays.access import open_zarr

        t0 = time.perf_counter()
        target = getattr(folder, "target", None)
        path, so_out = target(name) if callable(target) else (Path(folder) / name, None)
        opts = {} if so_out is None else {"storage_options": so_out}
        write_array(P, path, compressor=spec.outputs.features_compressor,
                    name="predictions", dimension_names=("sample", "output"),
                    attrs=predictions_attrs(model),
                    manifest={"rows": n, "spec_key": key, "kind": "predictions"},
                    progress=False, **opts)
        timings["predictions"] = time.perf_counter() - t0
        # the metric reads back what was written (class names as the strings written)
        source = open_zarr(path if so_out is not None else str(path), "predictions", **opts)
    t0 = time.perf_counter()
    fraction = spec.method.params.get(HOLDOUT)
    fit = fit_metric(source, spec.targets, n, bool(is_classifier(model)),
                     holdout=(spec.seed, fraction) if fraction else None, storage_options=so)
    timings["fit_metric"] = time.perf_counter() - t0
    if fit.get("warning"):
        logging.getLogger("distsketch").warning("%s: %s", spec.method.name, fit["warning"])
    return {**fit, "predictions": name}


def _rows(P: Any, start: int, stop: int) -> np.ndarray:
    block = P[start:stop]
    if hasattr(block, "dask"):
        from distsketch.graph import compute

        block = compute(block, progress=False)[0]
    return np.asarray(block)


def fit_metric(P: Any, targets_path: str, n: int, classifier: bool,
               holdout: tuple[int, float] | None = None, block_rows: int = _METRIC_ROWS,
               storage_options: dict | None = None) -> dict[str, Any]:
    """Accuracy (classifier) or R² (regressor) of predictions ``P`` (shape (n,) or (n, t)) on
    the first ``n`` targets, or with ``holdout=(seed, fraction)`` on the held-out rows only.

    Returns ``available``, ``metric``, ``value``, ``baseline`` (the constant predictor's),
    ``rows``, ``on``, ``holdout`` and a ``warning`` when no better than the baseline; or
    ``available: False`` with a ``reason``.  R² is averaged over targets as scikit-learn's
    ``r2_score`` does, its ``Σ(y − ȳ)²`` merged across blocks with Chan's update.
    """
    from distsketch.io.arrays.targets import open_targets

    opts: dict[str, Any] = {} if storage_options is None else {"storage_options": storage_options}
    targets = open_targets(targets_path, n, allow_extra_rows=True, **opts)
    t_cols = 1 if len(targets.shape) == 1 else int(targets.shape[1])
    p_cols = 1 if len(P.shape) == 1 else int(P.shape[1])
    if p_cols != t_cols:
        return {"available": False,
                "reason": f"the model predicts {p_cols} column(s) for {t_cols} target column(s) "
                          "(a regularisation path predicts one per alpha); no single fit metric"}
    chunks = getattr(P, "chunks", None)
    chunk = int(chunks[0][0] if hasattr(P, "dask") else chunks[0]) if chunks else block_rows
    step = max(chunk, block_rows // max(chunk, 1) * chunk)  # whole chunks per read
    correct = rows = 0
    label_counts: dict[Any, int] = {}
    mean = np.zeros(t_cols)
    m2 = np.zeros(t_cols)
    ss_res = np.zeros(t_cols)
    for start in range(0, n, step):
        stop = min(n, start + step)
        pred = _rows(P, start, stop).reshape(stop - start, t_cols)
        y = np.asarray(targets.rows(start, stop)).reshape(stop - start, t_cols)
        if holdout is not None:
            mask = held_out(holdout[0], start, stop, holdout[1])
            pred, y = pred[mask], y[mask]
        k = y.shape[0]
        if k == 0:
            continue
        if classifier:
            correct += int(np.count_nonzero(pred == y))
            for label, c in zip(*np.unique(y, return_counts=True)):
                label_counts[label.item()] = label_counts.get(label.item(), 0) + int(c)
        else:
            yf, pf = y.astype(np.float64), pred.astype(np.float64)
            ss_res += ((yf - pf) ** 2).sum(axis=0)
            bmean = yf.mean(axis=0)
            bm2 = ((yf - bmean) ** 2).sum(axis=0)
            delta = bmean - mean
            m2 = m2 + bm2 + delta**2 * (rows * k / (rows + k))
            mean = mean + delta * (k / (rows + k))
        rows += k
    if rows == 0:
        return {"available": False, "reason": "no held-out row among the rows fitted"}
    base = {"available": True, "rows": rows,
            "on": "training rows" if holdout is None else "held-out rows",
            "holdout": None if holdout is None else holdout[1]}
    if classifier:
        value = correct / (rows * t_cols)
        # the constant predictor: the most frequent label of these rows
        baseline = max(label_counts.values()) / rows
        out = {**base, "metric": "accuracy", "value": value, "baseline": baseline}
        if value <= baseline:
            out["warning"] = (f"accuracy {value:.4f} is no better than always predicting the most "
                              f"frequent label ({baseline:.4f}): check the kernel scale (gamma: "
                              "median), the feature count and alpha")
        return out
    # a constant target column: R² is 1 for a perfect fit, else 0 (scikit-learn's convention)
    r2 = np.where(m2 > 0, 1.0 - ss_res / np.where(m2 > 0, m2, 1.0),
                  np.where(ss_res == 0, 1.0, 0.0))
    value = float(r2.mean())
    out = {**base, "metric": "r2", "value": value, "baseline": 0.0}
    if value <= 0.0:
        out["warning"] = (f"R² {value:.4f} is no better than always predicting the mean "
                          "(R² 0): check the kernel scale (gamma: median), the feature count and "
                          "alpha")
    return out
