"""``distsketch evaluate``: kernel approximation errors of a saved model."""

from __future__ import annotations

import argparse
import time

from distsketch.cli.common import (
    add_block_rows_option,
    add_common_options,
    apply_progress,
    cluster,
    emit,
    open_input,
    print_json,
    stage,
)
from distsketch.errors import ConfigError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "evaluate", help="kernel spectral / Frobenius errors of a saved model on an input",
        description=(
            "Compare the model's approximate kernel with the exact kernel on a uniform row "
            "sample of INPUT: spectral error ||G - G~||_2 / s and Frobenius error "
            "||G - G~||_F / s^2 (Ghashami et al. 2016), and ||G - G~||_F / ||G||_F."),
    )
    p.add_argument("model", help="saved model store")
    p.add_argument("input", help="input Zarr store")
    p.add_argument("--n-sample", type=int, default=2000, help="rows sampled (default 2000)")
    p.add_argument("--kernel", default=None, help="exact kernel (default: the model's)")
    p.add_argument("--gamma", type=float, default=None, help="kernel scale (default: the model's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the row sample")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_block_rows_option(p)
    add_common_options(p, overwrite=False)
    p.set_defaults(func=run)
    return p


def model_kernel(model: object) -> tuple[str, float | None]:
    """The kernel name and gamma a fitted model approximates."""
    kernel = getattr(model, "kernel", None)
    gamma = getattr(model, "gamma_", None)
    if gamma is None:  # a resolved gamma of a nested feature map (e.g. StreamingKernelPCA)
        gamma = getattr(getattr(model, "features_", None), "gamma", None)
    if gamma is None:
        gamma = getattr(model, "gamma", None)
    if not isinstance(kernel, str):
        raise ConfigError(f"{type(model).__name__} does not name its kernel; pass --kernel.")
    return kernel, (float(gamma) if gamma is not None else None)


def run(args: argparse.Namespace) -> int:
    from distsketch.io.model import load
    from distsketch.metrics import kernel_errors

    apply_progress(args)
    model = load(args.model)
    if not hasattr(model, "kernel_approx"):
        raise ConfigError(f"model {args.model} ({type(model).__name__}) cannot approximate a "
                          "kernel (no kernel_approx).")
    kernel, gamma = model_kernel(model) if args.kernel is None else (args.kernel, None)
    gamma = args.gamma if args.gamma is not None else gamma
    X = open_input(args.input, args.block_rows)
    if X.shape[1] != getattr(model, "n_features_in_", X.shape[1]):
        from distsketch.errors import InputError

        raise InputError(f"{args.input} has {X.shape[1]} features but model {args.model} was "
                         f"fitted with {model.n_features_in_}; evaluate on data with the same "
                         "columns.")
    with cluster(args):
        stage(f"kernel errors of {type(model).__name__} ({kernel}, gamma={gamma}) on "
              f"{min(args.n_sample, X.shape[0])} sampled rows of {args.input}")
        t0 = time.perf_counter()
        errs = kernel_errors(X, model, kernel, gamma=gamma, n_sample=args.n_sample,
                             random_state=args.seed)
        seconds = time.perf_counter() - t0
    result = {"model": str(args.model), "model_class": type(model).__name__,
              "input": str(args.input), "rows": int(X.shape[0]), "kernel": kernel,
              "gamma": gamma, "seconds": round(seconds, 3), **errs}
    if args.json:
        print_json(result)
    else:
        emit(f"{'model':<20}{result['model_class']}")
        emit(f"{'rows (sampled)':<20}{result['rows']} ({errs['n_sample']})")
        emit(f"{'spectral error':<20}{errs['spectral']:.4e}   ||G - G~||_2 / s")
        emit(f"{'Frobenius error':<20}{errs['frobenius']:.4e}   ||G - G~||_F / s^2")
        emit(f"{'relative Frobenius':<20}{errs['relative_frobenius']:.4e}   ||G - G~||_F / ||G||_F")
    return 0
