"""``distsketch evaluate``: kernel approximation errors of a saved model."""

from __future__ import annotations

import argparse
import time
from typing import Any

from distsketch.cli.apply import load_model_and_input
from distsketch.cli.common import add_input_options, apply_progress, cluster, positive_int, stage
from distsketch.cli.output import finish
from distsketch.errors import ConfigError, InputError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "evaluate", help="kernel spectral / Frobenius errors of a saved model on an input",
        description=(
            "Compare the model's approximate kernel with the exact kernel (the model's own "
            "unless given) on INPUT: spectral error ||G - G~||_2 / n and Frobenius error "
            "||G - G~||_F / n^2 (Ghashami et al. 2016), and ||G - G~||_F / ||G||_F, estimated "
            "from a uniform row sample when --n-sample is below the number of rows. A model "
            "saved with its preprocessing (a workflow's Pipeline) maps the sampled rows through "
            "it first and is compared with the exact kernel of the mapped rows."),
    )
    p.add_argument("model", help="saved model store")
    p.add_argument("input", help="input Zarr store")
    p.add_argument("--n-sample", type=positive_int, default=2000, help="rows sampled (default 2000)")
    p.add_argument("--kernel", default=None, help="exact kernel (default: the model's)")
    p.add_argument("--gamma", type=float, default=None, help="kernel scale (default: the model's)")
    p.add_argument("--degree", type=int, default=None, help="polynomial degree (default: the model's)")
    p.add_argument("--coef0", type=float, default=None, help="polynomial offset (default: the model's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the row sample")
    add_input_options(p, overwrite=False)
    p.set_defaults(func=run)
    return p


def _class_name(model: object) -> str:
    """``Pipeline(Standardizer, StreamingKernelPCA)`` for a Pipeline, else the class name."""
    steps = getattr(model, "steps", None)
    if type(model).__name__ == "Pipeline" and isinstance(steps, list):
        return f"Pipeline({', '.join(type(step).__name__ for _, step in steps)})"
    return type(model).__name__


def _check_approximation(model: Any, path: str, kernel: str | None) -> None:
    """Refuse a model whose (last) step names no kernel when --kernel is not given."""
    from distsketch.metrics import model_kernel, split_pipeline

    try:
        # a Pipeline (a workflow's model with its scaler): its last step approximates the kernel
        _, approx = split_pipeline(model)
    except ConfigError as exc:
        raise ConfigError(f"model {path}: {exc}") from None
    if kernel is None and model_kernel(approx) is None:
        raise ConfigError(f"{type(approx).__name__} does not name its kernel; pass --kernel.")


def run(args: argparse.Namespace) -> int:
    from distsketch.metrics import kernel_errors

    apply_progress(args)
    model, X, _ = load_model_and_input(
        args, lambda model: _check_approximation(model, args.model, args.kernel))
    if X.shape[1] != getattr(model, "n_features_in_", X.shape[1]):
        raise InputError(f"{args.input} has {X.shape[1]} features but model {args.model} was "
                         f"fitted with {model.n_features_in_}; evaluate on data with the same "
                         "columns.")
    n_rows = int(X.shape[0])
    s = n_rows if args.n_sample is None or args.n_sample >= n_rows else int(args.n_sample)
    with cluster(args, X):
        stage(f"kernel errors of {_class_name(model)} on {s} sampled rows of {args.input}")
        t0 = time.perf_counter()
        # the model's own kernel unless given; an option that contradicts it is an error
        errs = kernel_errors(X, model, args.kernel, gamma=args.gamma, degree=args.degree,
                             coef0=args.coef0, n_sample=args.n_sample, random_state=args.seed)
        seconds = time.perf_counter() - t0
    note = (f"estimated from {errs['n_sample']} sampled rows of {n_rows}" if errs["sampled"]
            else f"exact, all {n_rows} rows")
    result = {"command": "evaluate", "model": str(args.model), "model_class": _class_name(model),
              "input": str(args.input), "rows": n_rows, **errs,
              "gamma": errs["kernel_params"].get("gamma"), "note": note,
              "seconds": round(seconds, 3)}
    params = ", ".join(f"{k}={v:g}" for k, v in errs["kernel_params"].items())
    finish(result, [
        f"{'model':<20}{result['model_class']}",
        f"{'kernel':<20}{errs['kernel']}({params})",
        f"{'rows (sampled)':<20}{n_rows} ({errs['n_sample']})",
        f"{'errors':<20}{note}",
        f"{'spectral error':<20}{errs['spectral']:.4e}   ||G - G~||_2 / n",
        f"{'Frobenius error':<20}{errs['frobenius']:.4e}   ||G - G~||_F / n^2",
        f"{'relative Frobenius':<20}{errs['relative_frobenius']:.4e}   ||G - G~||_F / ||G||_F"])
    return 0
