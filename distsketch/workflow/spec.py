"""Workflow specs: frozen dataclasses, read from YAML or a mapping and checked once.

A spec names an input Zarr array, optional targets and preprocessing, a
method (a distsketch estimator; with ``partial_fit`` it runs incrementally),
outputs, a cluster and a seed::

    input: data/X.zarr
    seed: 0
    segment_rows: 50000
    preprocessing: {standardize: true}
    method:
      name: StreamingKernelPCA
      params: {n_components: 10, gamma: 0.1}
    outputs:
      dir: runs/skpca
    cluster: local

``method.params`` are checked when the spec is loaded (names, with a close
match suggested for a typo, and values).  A classifier (``partial_fit`` with
``classes``) reads ``targets:`` and takes its labels from ``params.classes``
or, without it, from a pre-pass over the targets; either way they are kept in
the workflow state, so incremental runs use the same classes.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import reprlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distsketch.errors import ConfigError
from distsketch.validation import Interval
from distsketch.validation.config import load_yaml
from distsketch.validation.params import accepts

__all__ = [
    "MethodSpec",
    "OutputsSpec",
    "Preprocessing",
    "ReportSpec",
    "WorkflowSpec",
    "load_workflow_spec",
]

_OUTPUT_KEYS = {"dir", "model", "features", "report", "features_compressor"}
_REPORT_KEYS = {"n_sample", "kernel", "gamma", "degree", "coef0", "png", "kernel_error"}
_PRE_KEYS = {"standardize"}

# the shared constraint vocabulary of distsketch.validation
_SEED = [Interval(int, 0, None)]
_POSITIVE = [Interval(int, 1, None)]
_POSITIVE_OR_NONE = [Interval(int, 1, None), None]
_BOOLEAN = ["boolean"]


_STORAGE_OPTIONS = [dict, None]

#: top-level scalar keys: name -> (default, constraints, what a valid value is).
#: A new scalar key is one line here and one field of WorkflowSpec.
_SCALARS: dict[str, tuple[Any, list[Any], str]] = {
    "seed": (0, _SEED, "a non-negative integer (a fixed seed makes reruns and incremental runs "
                       "reproducible)"),
    "segment_rows": (65536, _POSITIVE, "a positive integer"),
    "block_rows": (None, _POSITIVE_OR_NONE, "a positive integer or null"),
    "segments_in_flight": (None, _POSITIVE_OR_NONE,
                           "a positive integer or null (one per cluster thread)"),
    "storage_options": (None, _STORAGE_OPTIONS,
                        "a mapping of fsspec options (e.g. {anon: false, client_kwargs: "
                        "{endpoint_url: ...}}) or null"),
    "name": (None, [str, None], "a string"),
    "description": (None, [str, None], "a string"),
}
#: keys holding a path or a nested section, parsed by their own functions below
_SECTIONS = {"input", "targets", "preprocessing", "method", "outputs", "cluster", "report"}
_TOP_KEYS = set(_SCALARS) | _SECTIONS


def _check(value: Any, constraints: list[Any], message: str | Callable[[], str]) -> Any:
    # a callable message is built only on failure: a valid value is never repr()'d
    if not any(accepts(c, value) for c in constraints):
        raise ConfigError(message() if callable(message) else message)
    return value


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """The estimator a workflow fits: a distsketch class name and its parameters."""

    name: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """Preprocessing learned on the first run and then frozen."""

    standardize: bool = False


@dataclasses.dataclass(frozen=True)
class OutputsSpec:
    """Where a run writes: ``dir`` holds the lock, ``state/`` and ``result/``.

    ``model``, ``features`` and ``report`` are file names inside ``result/``
    (None skips that output).
    """

    dir: str
    model: str | None = "model.zarr"
    features: str | None = "features.zarr"
    report: str | None = "report.md"
    features_compressor: Any = "lz4"
    predictions: bool | str | None = None  # None: predictions.zarr for a supervised method


@dataclasses.dataclass(frozen=True)
class ReportSpec:
    """The report: rows sampled for the kernel error, the kernel to compare with."""

    n_sample: int = 1000
    png: bool = True
    kernel_error: bool = True
    kernel: str | None = None
    gamma: float | None = None
    degree: float | None = None
    coef0: float | None = None


@dataclasses.dataclass(frozen=True)
class WorkflowSpec:
    """A checked workflow spec with absolute paths and defaults filled in.

    Build it with :func:`load_workflow_spec`.
    """

    input: str
    method: MethodSpec
    outputs: OutputsSpec
    targets: str | None = None
    seed: int = 0
    segment_rows: int = 65536
    block_rows: int | None = None
    segments_in_flight: int | None = None
    storage_options: dict[str, Any] | None = None
    preprocessing: Preprocessing = Preprocessing()
    report: ReportSpec = ReportSpec()
    cluster: Any = None
    name: str | None = None
    description: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The spec as plain JSON-able data (the manifest records it)."""
        # storage options are not copied (asdict copies deeply): only their names are kept
        out = dataclasses.asdict(dataclasses.replace(self, storage_options=None))
        out["report"] = {k: v for k, v in out["report"].items() if v is not None}
        for key in ("name", "description", "segments_in_flight", "storage_options"):
            if out[key] is None:
                del out[key]
        if self.storage_options is not None:
            # credentials never reach a manifest or a report: the option names only
            out["storage_options"] = sorted(self.storage_options)
        return out

    def key(self) -> str:
        """Hash of everything a stored state depends on (not cluster, outputs, report)."""
        d = self.as_dict()
        keyed = {k: d[k] for k in ("input", "targets", "seed", "segment_rows", "preprocessing",
                                   "method")}
        blob = json.dumps(keyed, sort_keys=True, default=str).encode()
        return hashlib.blake2b(blob, digest_size=12).hexdigest()


def _must_be(where: str, key: str, what: str, value: Any) -> str:
    return f"{where}: {key} must be {what}, got {reprlib.repr(value)}."


def _check_keys(d: Any, allowed: set[str], where: str) -> dict:
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise ConfigError(f"{where} must be a mapping, got {type(d).__name__}.")
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}.")
    return dict(d)


def _resolve_path(value: Any, base: Path) -> str:
    s = os.fspath(value)
    if "://" in s:
        return s
    path, sep, comp = s.partition("::")
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = (base / p).absolute()
    return os.path.normpath(p) + (sep + comp if sep else "")


def load_workflow_spec(spec: Any, *, base: str | os.PathLike | None = None) -> WorkflowSpec:
    """Read and validate a workflow spec.

    Parameters
    ----------
    spec : path-like, dict or WorkflowSpec
        A YAML file, an already parsed mapping, or a spec (returned as is).
    base : path-like, optional
        Folder that relative paths are resolved against (default: the spec
        file's folder, or the working directory for a mapping).

    Returns
    -------
    WorkflowSpec
        The normalised spec: absolute paths, defaults filled in.

    Raises
    ------
    ConfigError
        Unreadable YAML, unknown keys, missing input/method/outputs, bad values,
        unknown method.
    """
    if isinstance(spec, WorkflowSpec):
        return spec
    if isinstance(spec, dict):
        raw, where = dict(spec), "workflow spec"
        base_dir = Path(base) if base is not None else Path.cwd()
    else:
        p = Path(spec).expanduser()
        where = f"workflow spec {p}"
        raw = load_yaml(p, "workflow spec", hint="see workflows/ for examples")
        base_dir = Path(base) if base is not None else p.parent.absolute()
    cfg = _check_keys(raw, _TOP_KEYS, where)
    for key in ("input", "method", "outputs"):
        if key not in cfg:
            raise ConfigError(f"{where}: missing required key {key!r} (input: a Zarr path; method: "
                              "{name, params}; outputs: {dir}).")
    scalars = {key: _check(cfg.get(key, default), constraints,
                           functools.partial(_must_be, where, key, what, cfg.get(key)))
               for key, (default, constraints, what) in _SCALARS.items()}
    pre = _check_keys(cfg.get("preprocessing"), _PRE_KEYS, f"{where}: preprocessing")
    standardize = _check(pre.get("standardize", False), _BOOLEAN,
                         f"{where}: preprocessing.standardize must be true or false.")
    return WorkflowSpec(
        input=_resolve_path(cfg["input"], base_dir),
        targets=None if cfg.get("targets") is None else _resolve_path(cfg["targets"], base_dir),
        **scalars,
        preprocessing=Preprocessing(standardize=standardize),
        method=_method(cfg["method"], where),
        outputs=_outputs(cfg["outputs"], where, base_dir),
        report=_report(cfg.get("report"), where),
        cluster=_cluster(cfg.get("cluster"), where, base_dir),
    )


def _method(value: Any, where: str) -> MethodSpec:
    from distsketch.workflow.methods import check_method_params, resolve_method, with_method_blocks

    method = _check_keys({"name": value} if isinstance(value, str) else value,
                         {"name", "params", "features", "holdout"}, f"{where}: method")
    if "name" not in method:
        raise ConfigError(f"{where}: method needs a 'name' (an estimator such as "
                          "StreamingKernelPCA).")
    params = method.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: method.params must be a mapping.")
    name = str(method["name"])
    cls = resolve_method(name, where)  # fail early on unknown methods and parameters
    params = with_method_blocks(dict(params), method, where)
    return MethodSpec(name=name, params=check_method_params(cls, params, where))


def _outputs(value: Any, where: str, base_dir: Path) -> OutputsSpec:
    out = _check_keys(value if not isinstance(value, str) else {"dir": value},
                      _OUTPUT_KEYS | {"predictions"}, f"{where}: outputs")
    if "dir" not in out:
        raise ConfigError(f"{where}: outputs needs 'dir', the folder that holds the state, the lock "
                          "and the committed result.")
    out["dir"] = _resolve_path(out["dir"], base_dir)
    for key in ("model", "features", "report"):
        v = out.get(key, "")
        if v is not None and (not isinstance(v, str) or "/" in v or v.startswith(".")):
            raise ConfigError(f"{where}: outputs.{key} must be a plain file name inside outputs.dir "
                              f"(or null to skip it), got {v!r}.")
    from distsketch.workflow.predictions import check_predictions_output

    out["predictions"] = check_predictions_output(out.get("predictions"),
                                                  out.get("features", "features.zarr"), where)
    return OutputsSpec(**out)


def _report(value: Any, where: str) -> ReportSpec:
    rep = _check_keys(value, _REPORT_KEYS, f"{where}: report")
    return ReportSpec(**rep)


def _cluster(cluster: Any, where: str, base_dir: Path) -> Any:
    if isinstance(cluster, str) and cluster.endswith((".yaml", ".yml", ".json")):
        return _resolve_path(cluster, base_dir)
    if isinstance(cluster, dict):
        from distsketch.cluster import validate_spec

        return validate_spec(cluster, where=f"{where}: cluster")
    if cluster is not None and not isinstance(cluster, str):
        raise ConfigError(f"{where}: cluster must be a name (local, sync, threads), an address, a "
                          f"file path or a mapping with 'kind', got {cluster!r}.")
    return cluster
