"""``distsketch score``: accuracy (classifiers) or R² (regressors) of a saved model."""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

import numpy as np

from distsketch.cli.common import (
    add_input_options,
    apply_progress,
    cluster,
    open_command_input,
    open_input,
    stage,
    storage_options_arg,
)
from distsketch.cli.output import finish
from distsketch.errors import ConfigError, InputError

__all__ = ["BARELY_BETTER", "add_parser", "check_predictor", "run", "score_predictions",
           "training_check"]

#: a fitted model that closes less than this share of the gap between a constant predictor
#: and a perfect one on its training rows is "barely better than a constant" (warned about)
BARELY_BETTER = 0.1


def check_predictor(model: Any, path: str, targets: str | None = None,
                    input_path: str | None = None, storage_options: dict | None = None) -> None:
    """Refuse a model that cannot predict, with a hint that fits ``targets``' kind."""
    if callable(getattr(model, "predict", None)):
        return
    from distsketch.cli.labels import suggested_methods, target_kind

    kind = target_kind(targets, storage_options) if targets else None
    x = input_path or "X.zarr"
    y = targets or f"{x}::y"
    (first, when), *others = suggested_methods(kind)
    more = "".join(f"; --method {name} {why}" for name, why in others)
    raise ConfigError(
        f"model {path} is a {type(model).__name__}, which has no predict (it is not a "
        "supervised model). Use `distsketch transform MODEL INPUT OUTPUT` for its features, "
        f"or fit a predictor: `distsketch fit {x} model.zarr --method {first} --y {y}` {when}"
        f"{more}.")


def is_classifier(model: Any) -> bool:
    """Whether ``model`` predicts class labels (scikit-learn's estimator type)."""
    from sklearn.base import is_classifier as sk_is_classifier

    return bool(sk_is_classifier(model)) or hasattr(model, "classes_")


def score_predictions(model: Any, y_true: np.ndarray, y_pred: np.ndarray) -> tuple[str, float]:
    """``("accuracy", value)`` for a classifier, ``("r2", value)`` (targets weighted equally)."""
    from sklearn.metrics import accuracy_score, r2_score

    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.shape[0] != y_pred.shape[0]:
        raise InputError(f"the targets have {y_true.shape[0]} rows but the predictions "
                         f"{y_pred.shape[0]}; pass the targets of the same rows.")
    if is_classifier(model):
        if y_true.ndim == 2 and y_true.shape[1] == 1:  # labels stored as one column
            y_true = y_true[:, 0]
        return "accuracy", float(accuracy_score(y_true, y_pred))
    if y_pred.ndim > 2:
        raise ConfigError(f"{type(model).__name__} predicts {y_pred.shape[1]} outputs per target "
                          "(a path of alphas); score a model fitted with one alpha.")
    t = y_pred.shape[1] if y_pred.ndim == 2 else 1
    Yt = y_true.astype(np.float64).reshape(y_true.shape[0], -1)
    if Yt.shape[1] != t:
        raise InputError(f"the targets have {Yt.shape[1]} column(s) but "
                         f"{type(model).__name__} predicts {t}; pass the targets it was fitted "
                         "on.")
    return "r2", float(r2_score(Yt, np.asarray(y_pred, dtype=np.float64).reshape(Yt.shape)))


def training_check(model: Any, X: Any, y: Any, *, n_sample: int = 2000,
                   random_state: int = 0) -> dict[str, Any]:
    """Compare a fitted predictor with a constant one (the majority class, or the mean: R² 0)
    on ``n_sample`` of its training rows (one pass over ``X``, memory O(n_sample × d)).

    Returns ``metric``, ``value``, ``baseline``, ``skill`` (the share of the gap to a perfect
    score closed), ``n_sample``, ``estimated``, ``no_better_than_constant``,
    ``barely_better_than_constant`` (``skill`` below :data:`BARELY_BETTER`) and ``message``.
    """
    from distsketch.graph import to_numpy
    from distsketch.metrics import sample_rows

    idx, S = sample_rows(X, n_sample, random_state)
    y_s = to_numpy(y[idx]) if hasattr(y, "dask") else np.asarray(y)[idx]
    pred = to_numpy(model.predict(S.astype(X.dtype, copy=False)))
    metric, value = score_predictions(model, y_s, pred)
    if metric == "accuracy":
        _, counts = np.unique(np.ravel(y_s), return_counts=True)
        baseline = float(counts.max() / counts.sum())
        what = f"accuracy {value:.3f} <= majority-class rate {baseline:.3f}"
    else:
        baseline = 0.0
        what = f"R^2 {value:.3f} <= 0 (the mean's)"
    estimated = idx.size < X.shape[0]
    rows = f"{idx.size} sampled training rows" if estimated else f"all {idx.size} training rows"
    bad = value <= baseline
    # a perfect score is 1 for both metrics; one class only (baseline 1) leaves no gap
    skill = (value - baseline) / (1.0 - baseline) if baseline < 1.0 else 0.0
    barely = not bad and skill < BARELY_BETTER
    fix = ("check the kernel scale (--gamma median), the feature map's width (--n-features) and "
           "alpha.")
    if bad:
        message = (f"the fitted {type(model).__name__} is no better than a constant predictor on "
                   f"{rows} ({what}): {fix}")
    elif barely:
        name = {"accuracy": "accuracy", "r2": "R^2"}[metric]
        message = (f"the fitted {type(model).__name__} is barely better than a constant predictor "
                   f"on {rows} ({name} {value:.3f} against {baseline:.3f}: it closes {skill:.1%} "
                   f"of the gap to a perfect fit, less than {BARELY_BETTER:.0%}): {fix}")
    else:
        message = f"{metric} {value:.4f} on {rows} (constant predictor: {baseline:.4f})"
    return {"metric": metric, "value": value, "baseline": baseline, "skill": float(skill),
            "n_sample": int(idx.size), "estimated": bool(estimated),
            "no_better_than_constant": bool(bad), "barely_better_than_constant": bool(barely),
            "message": message}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "score", help="accuracy (classifiers) or R^2 (regressors) of a saved model on an input",
        description=(
            "Predict every row of INPUT with MODEL (blockwise) and compare with the targets "
            "given by --y: accuracy for a classifier, the coefficient of determination R^2 "
            "(averaged over targets) for a regressor, on all rows. INPUT may be a CSV or "
            "Parquet file, read as `predict` reads it; its targets are then the model's label "
            "column (the one ingested with --label-column for the fit), unless --y is given."),
    )
    p.add_argument("model", help="saved model store with predict (e.g. a kernel ridge model)")
    p.add_argument("input", help="input Zarr store ('store.zarr::X' for an array in a group), "
                                 "or a CSV or Parquet file")
    p.add_argument("--y", default=None, help="targets of INPUT's rows, e.g. data.zarr::y "
                                             "(default: the labels stored with INPUT, or a "
                                             "table INPUT's label column)")
    add_input_options(p, overwrite=False)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from distsketch.cli.labels import store_labels
    from distsketch.cli.tables import is_table_file, table_input
    from distsketch.io.model.store import load

    show = apply_progress(args)
    so = storage_options_arg(args)
    model = load(args.model, storage_options=so)
    check_predictor(model, args.model, targets=args.y, input_path=args.input, storage_options=so)
    with contextlib.ExitStack() as stack:
        targets, shown = args.y, args.y
        if is_table_file(args.input):
            # the table read as ingest reads it, with the model's label column as y
            store, read = stack.enter_context(table_input(args.input, model, args.model, so,
                                                          labels=args.y is None, progress=show))
            X = open_input(store, args.block_rows)
            if targets is None and read["label_column"] is not None:
                targets = f"{store}::y"
                shown = f"{args.input}, column {read['label_column']}"
        else:
            X = open_command_input(args, so)
            if targets is None:
                targets = shown = store_labels(args.input, so)
        if targets is None:
            raise ConfigError(f"score needs the targets of {args.input}'s rows: pass --y (e.g. "
                              "--y data.zarr::y); a store ingested with --label-column, or a "
                              "table holding the label column the model was fitted with, "
                              "gives them itself.")
        return _score(args, model, X, targets, shown, so)


def _score(args: argparse.Namespace, model: Any, X: Any, targets: str, shown: str | None,
           so: dict[str, Any] | None) -> int:
    from distsketch.graph import to_numpy
    from distsketch.io.arrays.targets import open_targets
    from distsketch.validation import check_n_features

    check_n_features(model, X, reset=False)
    where = f"--y {args.y}" if args.y is not None else f"the labels {shown}"
    y = open_targets(targets, int(X.shape[0]), where=where, storage_options=so).as_dask()
    with cluster(args, X):
        stage(f"scoring {type(model).__name__} on {X.shape[0]} rows of {args.input}")
        t0 = time.perf_counter()
        pred = to_numpy(model.predict(X))
        y_true = to_numpy(y)
        metric, value = score_predictions(model, y_true, pred)
        seconds = time.perf_counter() - t0
    name = {"accuracy": "accuracy", "r2": "R^2"}[metric]
    result = {"command": "score", "model": str(args.model), "model_class": type(model).__name__,
              "input": str(args.input),
              "targets": shown,
              "rows": int(X.shape[0]),
              "metric": metric, "score": value, metric: value, "seconds": round(seconds, 3)}
    errors = ""
    if metric == "r2":
        # a regressor's errors in the targets' units, beside R²
        from distsketch.metrics import regression_scores

        reg = regression_scores(y_true, pred)
        result.update(rmse=reg["rmse"], mae=reg["mae"])
        errors = f", RMSE {reg['rmse']:.4g}, MAE {reg['mae']:.4g}"
    finish(result, f"{name} {value:.4f}{errors} of {type(model).__name__} on {X.shape[0]} rows "
                   f"of {args.input} ({seconds:.1f} s)")
    return 0
