"""``distsketch fit``: fit an estimator on a Zarr input and save the model."""

from __future__ import annotations

import argparse
import inspect
import time
from typing import Any

from distsketch import registry
from distsketch.cli.common import (
    add_input_options,
    apply_progress,
    check_before_cluster,
    cluster,
    loadable_estimators,
    open_command_input,
    parse_params,
    positive_int,
    stage,
    storage_options_arg,
)
from distsketch.cli.output import finish, warn
from distsketch.errors import ConfigError

__all__ = ["add_parser", "resolve_estimator", "resolve_feature_map", "run"]

# shortcuts for the streaming kernel PCA variants of Ghashami et al. (2016)
_SHORTCUTS = {"skpca": ("StreamingKernelPCA", {"method": "fd"}),
              "fd": ("StreamingKernelPCA", {"method": "fd"}),
              "rnca": ("StreamingKernelPCA", {"method": "rnca"})}

# options that set the estimator parameter of the same name
_OPTION_PARAMS = ("n_components", "kernel", "gamma", "n_random_features", "sketch_size",
                  "random_state")


# the seed of a command whose estimator takes random_state and none was given: a CLI run
# is reproducible by default (--param random_state=null draws fresh entropy)
DEFAULT_SEED = 0

# short names of --features (any feature map's registry name works too, in any case)
_FEATURE_SHORTCUTS = {"rff": "RandomFourierFeatures", "nystrom": "NystromFeatures"}
# the default feature map of a model with a ``features`` parameter (SketchedKernelRidge's)
_DEFAULT_FEATURES = "RandomFourierFeatures"
# options that set a feature-map parameter for a model that holds one (--n-features:
# the feature map's width)
_FEATURE_OPTIONS = ("n_components", "kernel", "gamma")


def resolve_estimator(method: str) -> tuple[type, dict[str, Any]]:
    """The estimator class and preset parameters named by ``--method``."""
    key = method.strip().lower()
    if key in _SHORTCUTS:
        name, preset = _SHORTCUTS[key]
    else:
        name, preset = method, {}
    try:
        cls = registry.resolve(name, kind="estimator", where=f"--method {method!r}")
    except ConfigError as exc:
        raise ConfigError(f"{exc} The shortcuts skpca (or fd) and rnca select "
                          "StreamingKernelPCA.") from exc
    if not (inspect.isclass(cls) and hasattr(cls, "fit")):
        raise ConfigError(f"--method {method!r}: {cls.__name__} is not an estimator.")
    return cls, dict(preset)


def _is_feature_map(cls: type) -> bool:
    from distsketch.estimators.base import RowMapTransformer

    return inspect.isclass(cls) and issubclass(cls, RowMapTransformer)


def feature_map_names() -> list[str]:
    """Registry names of the feature maps ``--features`` accepts (blockwise row maps)."""
    return sorted(name for name, cls in loadable_estimators() if _is_feature_map(cls))


def resolve_feature_map(name: Any, where: str) -> type:
    """The feature-map class named ``name``: rff, nystrom or a registry name (any case), looked
    up in :mod:`distsketch.registry` (nothing named by the user is imported)."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: expected a feature map name such as rff, nystrom or "
                          f"TensorSketch, got {name!r}.")
    target = _FEATURE_SHORTCUTS.get(name.strip().lower(), name)
    valid = f"rff, nystrom or one of {', '.join(feature_map_names())}"
    try:
        cls = registry.resolve(target, kind="estimator", where=where)
    except ConfigError:
        raise ConfigError(f"{where}: unknown feature map {name!r}; use {valid} (any case)."
                          ) from None
    if not _is_feature_map(cls):
        raise ConfigError(f"{where}: {cls.__name__} is not a feature map; use {valid} "
                          "(any case).")
    return cls


def _params_of(cls: type) -> set[str]:
    return set(inspect.signature(cls).parameters)


def _no_param(option: str, cls: type, name: str) -> ConfigError:
    return ConfigError(f"{option}: {cls.__name__} has no parameter {name!r}; its parameters: "
                       f"{', '.join(sorted(_params_of(cls)))}.")


def _as_gamma(value: Any, option: str) -> Any:
    if isinstance(value, str) and value != "median":
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"{option} {value!r}: use a number or 'median'.") from None
    return value


def build_params(cls: type, preset: dict[str, Any], args: argparse.Namespace,
                 n_rows: int | None = None
                 ) -> tuple[dict[str, Any], type | None, dict[str, Any]]:
    """``(params, feature_class, feature_params)`` of the estimator and of the feature map it
    holds, which is built only when a feature option is given (``feature_class`` None
    otherwise: the model's own default map stands, as in Python)."""
    params = dict(preset)
    accepted = _params_of(cls)
    holds_map = "features" in accepted
    feature_cls: type | None = None
    named = False  # the feature map's class chosen by --features or --param features=NAME
    fparams: dict[str, Any] = {}
    for name in _OPTION_PARAMS:
        value = getattr(args, name)
        if value is None:
            continue
        option = f"--{name.replace('_', '-')}"
        if name in accepted:
            params[name] = _as_gamma(value, option) if name == "gamma" else value
        elif holds_map and name in _FEATURE_OPTIONS:
            fparams[name] = _as_gamma(value, option) if name == "gamma" else value
        else:
            raise ConfigError(f"{option} does not apply to {cls.__name__} (it has no parameter "
                              f"{name!r}); its parameters: {', '.join(sorted(accepted))}.")
    if getattr(args, "n_features", None) is not None:
        if not holds_map:
            raise ConfigError(f"--n-features sets the width of a model's feature map, but "
                              f"{cls.__name__} holds none (no 'features' parameter); use "
                              "--n-components for the output width.")
        fparams["n_components"] = args.n_features
    if getattr(args, "features", None) is not None:
        if not holds_map:
            raise ConfigError(f"--features {args.features}: {cls.__name__} holds no feature map "
                              "(no 'features' parameter); it applies to SketchedKernelRidge and "
                              "SketchedKernelRidgeClassifier.")
        feature_cls = resolve_feature_map(args.features, f"--features {args.features}")
        named = True
    for name, value in parse_params(args.param).items():
        head, dot, sub = name.partition(".")
        if dot and head == "features" and holds_map:
            if not sub:
                raise ConfigError(f"--param {name}=...: name the feature map's parameter, e.g. "
                                  "--param features.gamma=0.01.")
            fparams[sub] = _as_gamma(value, f"--param {name}") if sub == "gamma" else value
        elif name == "features" and holds_map:
            # a registry name only: the class is looked up, never imported by name
            feature_cls = resolve_feature_map(value, f"--param features={value}")
            named = True
        elif name not in accepted:
            raise _no_param(f"--param {name}=...", cls, name)
        else:
            params[name] = _as_gamma(value, f"--param {name}") if name == "gamma" else value
    if "random_state" in accepted and "random_state" not in params:
        params["random_state"] = DEFAULT_SEED
    if holds_map and (feature_cls is not None or fparams):
        # a feature option builds the map with that class's own defaults otherwise, as
        # features=RandomFourierFeatures(gamma=...) does in Python
        feature_cls = feature_cls or registry.resolve(_DEFAULT_FEATURES)
        for name in fparams:
            if name not in _params_of(feature_cls):
                raise _no_param(f"feature map parameter {name!r}", feature_cls, name)
        if not named and "n_components" not in fparams and n_rows is not None:
            # the model's default map with some of its parameters changed: its width stays the
            # model's default, not the map class's own (100 random Fourier features)
            from distsketch.estimators.ridge.defaults import default_n_features

            fparams["n_components"] = default_n_features(n_rows)
        if (isinstance(_as_gamma(args.gamma, "--gamma"), float)
                and "standardize" in accepted and "standardize" not in params):
            # --gamma is the scale fit reports, on standardised columns: "auto" would turn
            # standardising off for a number and the same gamma would mean another kernel
            params["standardize"] = True
    # without feature options the model's own default map (features=None) stands, so a
    # CLI fit is the Python one with the same arguments
    return params, feature_cls, fparams


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "fit", help="fit streaming kernel PCA (or any distsketch estimator) on a Zarr input",
        description=(
            "Fit an estimator out of core on INPUT (a Zarr store, 'store.zarr::X' for an array "
            "in a group) and save it to MODEL (a Zarr group; load it with distsketch.load). "
            "Default: StreamingKernelPCA (random Fourier features + Frequent Directions). "
            "Supervised estimators take their targets with --y, else the labels y stored with "
            "INPUT by `distsketch ingest --label-column` (or --labels); a kernel ridge model's "
            "feature map is chosen with --features and --param features.KEY=VALUE."),
    )
    p.add_argument("input", help="input Zarr store (rows are points)")
    p.add_argument("model", help="output model store (directory)")
    p.add_argument("--method", default="skpca",
                   help="skpca (default), rnca, or an estimator class name such as "
                        "RandomFourierFeatures, NystromKernelPCA, SketchedKernelRidge")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                   help="estimator parameter (repeatable; values are YAML: 64, 0.5, true, rbf); "
                        "features.KEY=VALUE sets one of a kernel ridge model's feature map, "
                        "features=NAME chooses it by registered name")
    p.add_argument("--y", default=None, help="targets for supervised estimators, e.g. "
                                             "data.zarr::y (default: the labels y stored "
                                             "with INPUT by ingest, when it has them)")
    p.add_argument("--n-components", type=int, default=None,
                   help="output width: components, or features of a feature map")
    p.add_argument("--kernel", default=None, help="kernel name (e.g. rbf)")
    p.add_argument("--gamma", default=None,
                   help="kernel scale, or 'median' for 1/median squared distance of a sample; "
                        "for a kernel ridge model, its feature map's on standardised columns, "
                        "as fit reports it: the model keeps standardising and its default "
                        "width (default: chosen by leave-one-out; --param standardize=false "
                        "for a gamma of the columns as they are)")
    p.add_argument("--n-random-features", type=int, default=None,
                   help="width m of an inner random feature map (StreamingKernelPCA)")
    p.add_argument("--sketch-size", type=int, default=None, help="Frequent Directions size l")
    p.add_argument("--random-state", type=int, default=None,
                   help=f"seed of the estimator's random operators (default {DEFAULT_SEED}: two "
                        "runs give the same model; recorded in the model and in --json; "
                        "--param random_state=null draws a fresh one)")
    p.add_argument("--features", default=None, metavar="NAME",
                   help="feature map of a kernel ridge model: rff (RandomFourierFeatures, the "
                        "default), nystrom (NystromFeatures) or another feature map's name, e.g. "
                        "TensorSketch; its parameters: --param features.KEY=VALUE")
    p.add_argument("--n-features", type=positive_int, default=None,
                   help="width of a kernel ridge model's feature map (its n_components)")
    p.add_argument("--n-check", type=_non_negative, default=2000, metavar="ROWS",
                   help="training rows sampled to compare a supervised model with a constant "
                        "predictor, with a warning when it is no better or barely better "
                        "(default 2000; one more pass over INPUT; 0 skips the check)")
    add_input_options(p)
    p.set_defaults(func=run)
    return p


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _read_targets(spec: str, n: int, storage_options: dict | None = None,
                  where: str | None = None) -> Any:
    from distsketch.io.arrays.targets import open_targets

    return open_targets(spec, n, where=where or f"--y {spec}",
                        storage_options=storage_options).as_dask()


def _chosen(est: Any) -> dict[str, Any]:
    """The fitted model's ``alpha_`` and ``gamma_`` (those it has), JSON-able."""
    out: dict[str, Any] = {}
    for name in ("alpha_", "gamma_"):
        value = getattr(est, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name.rstrip("_")] = float(value)
    return out


def _standardises(est: Any) -> bool | None:
    """Whether the fitted model standardised its columns (None: it has no such step)."""
    if not hasattr(est, "x_mean_"):
        return None
    return getattr(est, "x_mean_", None) is not None


def _exact(value: float) -> str:
    """``value`` short when that reads back as the same float, else every digit it needs."""
    short = f"{value:.6g}"
    return short if float(short) == value else repr(float(value))


def _chosen_text(chosen: dict[str, Any], standardised: bool | None) -> str:
    """`` (alpha 0.1861, gamma 0.125 on standardised columns)``: gamma exact, for ``--gamma``."""
    parts = []
    for name, value in chosen.items():
        if name == "gamma":
            where = " on standardised columns" if standardised else ""
            parts.append(f"gamma {_exact(value)}{where}")
        else:
            parts.append(f"{name} {value:.4g}")
    return f" ({', '.join(parts)})" if parts else ""


def _labels_note(cls: type, spec: str, storage_options: dict | None) -> str:
    """What a fit of an unsupervised ``cls`` on a store with labels ``spec`` tells the user."""
    from distsketch.cli.labels import method_hint, supervised_methods, target_kind

    classifiers, regressors = supervised_methods()
    return (f"{spec} holds the labels stored by ingest, which {cls.__name__} does not use (it is "
            f"unsupervised). To model them: {method_hint(target_kind(spec, storage_options))} "
            "(fit then uses these labels without --y); the supervised methods are the "
            f"classifiers {', '.join(classifiers)} and the regressors {', '.join(regressors)}.")


def _no_targets(cls: type, source: str) -> ConfigError:
    return ConfigError(
        f"{cls.__name__} is supervised: pass its targets with --y (a Zarr array with one target "
        f"per row of {source}, e.g. --y targets.zarr::y). {source} holds no labels of its own: "
        "`distsketch ingest TABLE STORE --label-column NAME` (or --labels FILE for .npy and idx "
        "labels) stores them as STORE::y, which fit then uses by itself.")


def run(args: argparse.Namespace) -> int:
    from distsketch.cli.labels import integer_class_targets, store_labels
    from distsketch.cli.score import is_classifier, training_check
    from distsketch.cli.tables import input_columns
    from distsketch.diagnostics import PeakMemory, format_bytes
    from distsketch.io import fingerprint
    from distsketch.io.model.store import save_model
    from distsketch.io.storage.safety import check_output
    from distsketch.workflow.spec_targets import needs_targets

    apply_progress(args)
    so = storage_options_arg(args)
    check_output(args.model, overwrite=args.overwrite, inputs=[args.input, args.y],
                 storage_options=so)
    cls, preset = resolve_estimator(args.method)
    X = open_command_input(args, so)
    n, d = int(X.shape[0]), int(X.shape[1])
    params, feature_cls, fparams = build_params(cls, preset, args, n_rows=n)
    if feature_cls is not None:
        params["features"] = feature_cls(**fparams)
    # gamma="median" (the model's or its feature map's) is resolved by the model's fit
    median = "median" in (params.get("gamma"), fparams.get("gamma"))
    est = cls(**params)
    check_before_cluster(est, n, d)
    targets, from_input, note = args.y, False, None
    if targets is None:
        # the labels ingest stored beside the rows (STORE::y), when the input has them
        labels = store_labels(args.input, so)
        if needs_targets(cls):
            if labels is None:
                raise _no_targets(cls, args.input)
            targets, from_input = labels, True
        elif labels is not None:
            note = _labels_note(cls, labels, so)
    where = f"the labels {targets} stored with the input" if from_input else None
    y = _read_targets(targets, n, so, where) if targets else None
    with PeakMemory() as pm, cluster(args, X):
        if from_input:
            stage(f"targets: the labels {targets} stored with {args.input} (--y chooses others)")
        if y is not None and is_classifier(est):
            # class numbers stored as float (a CSV's 1..7) stay integers in classes_ and
            # predictions: 7, not 7.0
            y = integer_class_targets(y)
        stage(f"fitting {cls.__name__}({', '.join(f'{k}={v!r}' for k, v in params.items())}) "
              f"on {args.input}: {n} rows x {d} features")
        t0 = time.perf_counter()
        est.fit(X) if y is None else est.fit(X, y)
        seconds = time.perf_counter() - t0
        chosen = getattr(est, "gamma_", None) if median else None
        gamma = float(chosen) if chosen is not None else None
        if gamma is not None:
            # a model that standardises its rows (x_mean_ set) took the median on those
            rows = "standardised rows" if getattr(est, "x_mean_", None) is not None else "rows"
            stage(f"gamma = {gamma:.6g} (median heuristic on 1000 {rows})")
        check = (training_check(est, X, y, n_sample=args.n_check)
                 if y is not None and args.n_check > 0 and callable(getattr(est, "predict", None))
                 else None)
    # the seed actually used (the one drawn when random_state=null was asked for)
    seed = getattr(est, "seed_", params.get("random_state"))
    seed = int(seed) if seed is not None else None
    if check is not None and (check["no_better_than_constant"]
                              or check["barely_better_than_constant"]):
        warn(check["message"])
    save_model(est, args.model, overwrite=args.overwrite,
               extra={"input": str(args.input), "input_fingerprint": fingerprint(X, path=args.input),
                      "fit_seconds": round(seconds, 3), "random_state": seed,
                      # the table's columns, so predict and score can read a CSV as ingest did
                      "input_columns": input_columns(args.input, so)},
               storage_options=so)
    standardised = _standardises(est)
    result: dict[str, Any] = {
        "command": "fit", "model": str(args.model), "model_class": cls.__name__,
        "input": str(args.input), "targets": targets, "targets_from_input": from_input,
        "rows": n, "n_features": d,
        "params": {k: repr(v) for k, v in sorted(est.get_params(deep=False).items())},
        "gamma_median": gamma, "random_state": seed, "fit_seconds": round(seconds, 3),
        # what the model chose by itself (alpha by GCV or CV, its kernel scale), and whether
        # that gamma is of standardised columns (None: a model without that step)
        "chosen": _chosen(est), "standardized": standardised, "labels_note": note,
        "peak_memory_bytes": pm.peak_bytes, "training_check": check}
    chose = _chosen_text(result["chosen"], standardised)
    using = f" with the labels {targets} stored with the input" if from_input else ""
    lines = [f"fitted {cls.__name__} on {n} rows{using}{chose} in {seconds:.1f} s "
             f"(peak memory {format_bytes(pm.peak_bytes)}); model saved to {args.model}"]
    result["gamma_search_note"] = _gamma_search_note(est)
    lines += [f"note: {text}" for text in (note, result["gamma_search_note"]) if text is not None]
    finish(result, lines)
    return 0


def _gamma_search_note(est: Any) -> str | None:
    """The model's note on a gamma found beyond the usual grid (shown with it, not only logged)."""
    search = getattr(est, "gamma_search_", None)
    return search.get("note") if isinstance(search, dict) else None
