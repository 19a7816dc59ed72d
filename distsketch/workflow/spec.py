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

``method.params`` are checked when the spec is loaded; a supervised method given no
``targets:`` fits the labels stored with the input (:mod:`~distsketch.workflow.spec_targets`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from distsketch.errors import ConfigError
from distsketch.io.commit.jsonable import json_default
from distsketch.validation import Interval, Satisfies, StrOptions, check_section
from distsketch.validation.config import load_yaml

__all__ = [
    "MethodSpec",
    "OutputsSpec",
    "Preprocessing",
    "ReportSpec",
    "WorkflowSpec",
    "load_workflow_spec",
]

# Every section is a constraint table checked by distsketch.validation.check_section: a new
# key is one line in its table (and one field).
_ANY: list[Any] = [object]  # a path or a nested section, judged by the function that parses it
_SEED = [Interval(int, 0, None)]
_POSITIVE = [Interval(int, 1, None)]
_POSITIVE_OR_NONE = [Interval(int, 1, None), None]
_BOOLEAN = ["boolean"]
_TRUE_OR_FALSE = "true or false"

#: top-level scalar keys: name -> (default, constraints, what a valid value is)
_SCALARS: dict[str, tuple[Any, list[Any], str]] = {
    "seed": (0, _SEED, "a non-negative integer (a fixed seed makes reruns and incremental runs "
                       "reproducible)"),
    "segment_rows": (65536, _POSITIVE, "a positive integer"),
    "block_rows": (None, _POSITIVE_OR_NONE, "a positive integer or null"),
    "segments_in_flight": (None, _POSITIVE_OR_NONE,
                           "a positive integer or null (one per cluster thread)"),
    "storage_options": (None, [dict, None],
                        "a mapping of fsspec options (e.g. {anon: false, client_kwargs: "
                        "{endpoint_url: ...}}) or null"),
    "device": (None, [StrOptions({"cpu", "cuda"}), None],
               "cpu or cuda (CuPy blocks on a GPU: pip install 'distsketch[gpu]'), or null for "
               "the dask config distsketch.device"),
    "name": (None, [str, None], "a string"),
    "description": (None, [str, None], "a string"),
}
_TOP = {key: constraints for key, (_, constraints, _) in _SCALARS.items()} | dict.fromkeys(
    ("input", "targets", "preprocessing", "method", "outputs", "cluster", "report"), _ANY)
_TOP_WHAT = {key: what for key, (_, _, what) in _SCALARS.items()}
_TOP_REQUIRED = {"input": "a Zarr path", "method": "{name, params}", "outputs": "{dir}"}

_PREPROCESSING: dict[str, list[Any]] = {"standardize": _BOOLEAN}
_METHOD: dict[str, list[Any]] = {"name": [str], "params": [dict, None], "features": _ANY,
                                 "holdout": _ANY}
_METHOD_WHAT = {"name": "an estimator name such as StreamingKernelPCA",
                "params": "a mapping of the estimator's parameters"}
_FILE_NAME: list[Any] = [
    Satisfies(lambda v: isinstance(v, str) and "/" not in v and not v.startswith("."),
              "a plain file name inside outputs.dir"), None]
_OUTPUTS: dict[str, list[Any]] = {
    "dir": [str, os.PathLike], "model": _FILE_NAME, "features": _FILE_NAME, "report": _FILE_NAME,
    "features_compressor": _ANY, "predictions": _ANY}
_OUTPUTS_WHAT = dict.fromkeys(("model", "features", "report"),
                              "a plain file name inside outputs.dir (or null to skip it)")
_REPORT: dict[str, list[Any]] = {"n_sample": _POSITIVE, "png": _BOOLEAN, "kernel_error": _BOOLEAN,
           "kernel": _ANY, "gamma": _ANY, "degree": _ANY, "coef0": _ANY}


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
    #: ``targets`` are the labels of the input store (the spec gave none)
    targets_from_input: bool = False
    seed: int = 0
    segment_rows: int = 65536
    block_rows: int | None = None
    segments_in_flight: int | None = None
    storage_options: dict[str, Any] | None = None
    device: str | None = None  # "cpu", "cuda"; None: the dask config distsketch.device
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
        for key in ("name", "description", "segments_in_flight", "storage_options", "device"):
            if out[key] is None:
                del out[key]
        if not out["targets_from_input"]:
            del out["targets_from_input"]
        if self.storage_options is not None:
            # credentials never reach a manifest or a report: the option names only
            out["storage_options"] = sorted(self.storage_options)
        return out

    def key(self) -> str:
        """Hash of everything a stored state depends on (not cluster, outputs, report)."""
        d = self.as_dict()
        keyed = {k: d[k] for k in ("input", "targets", "seed", "segment_rows", "preprocessing",
                                   "method")}
        blob = json.dumps(keyed, sort_keys=True, default=json_default).encode()
        return hashlib.blake2b(blob, digest_size=12).hexdigest()


def _section(value: Any, table: dict[str, list[Any]], where: str, **kwargs: Any) -> dict:
    """A spec section (absent or null: empty) checked against its table."""
    return check_section({} if value is None else value, table, where, noun="key", **kwargs)


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
    cfg = _section(raw, _TOP, where, required=_TOP_REQUIRED, what=_TOP_WHAT)
    scalars = {key: cfg.get(key, default) for key, (default, _, _) in _SCALARS.items()}
    pre = _section(cfg.get("preprocessing"), _PREPROCESSING, f"{where}: preprocessing",
                   what={"standardize": _TRUE_OR_FALSE})
    standardize = pre.get("standardize", False)
    method = _method(cfg["method"], where)
    input_path = _resolve_path(cfg["input"], base_dir)
    targets = None if cfg.get("targets") is None else _resolve_path(cfg["targets"], base_dir)
    from_input = False
    if targets is None:
        # a supervised method on a store ingested with labels fits them, as the CLI's fit does
        from distsketch.workflow.methods import resolve_method
        from distsketch.workflow.spec_targets import store_targets

        targets = store_targets(input_path, resolve_method(method.name, where),
                                scalars.get("storage_options"))
        from_input = targets is not None
    return WorkflowSpec(
        input=input_path,
        targets=targets,
        targets_from_input=from_input,
        **scalars,
        preprocessing=Preprocessing(standardize=standardize),
        method=method,
        outputs=_outputs(cfg["outputs"], where, base_dir),
        report=_report(cfg.get("report"), where),
        cluster=_cluster(cfg.get("cluster"), where, base_dir),
    )


def _method(value: Any, where: str) -> MethodSpec:
    from distsketch.workflow.methods import check_method_params, resolve_method, with_method_blocks

    method = _section({"name": value} if isinstance(value, str) else value, _METHOD,
                      f"{where}: method", required={"name": _METHOD_WHAT["name"]},
                      what=_METHOD_WHAT)
    params = method.get("params") or {}
    name = method["name"]
    cls = resolve_method(name, where)  # fail early on unknown methods and parameters
    params = with_method_blocks(dict(params), method, where)
    return MethodSpec(name=name, params=check_method_params(cls, params, where))


def _outputs(value: Any, where: str, base_dir: Path) -> OutputsSpec:
    out = _section(value if not isinstance(value, str) else {"dir": value}, _OUTPUTS,
                   f"{where}: outputs", what=_OUTPUTS_WHAT, required={
                       "dir": "the folder that holds the state, the lock and the committed result"})
    out["dir"] = _resolve_path(out["dir"], base_dir)
    from distsketch.workflow.predictions import check_predictions_output

    out["predictions"] = check_predictions_output(out.get("predictions"),
                                                  out.get("features", "features.zarr"), where)
    return OutputsSpec(**out)


def _report(value: Any, where: str) -> ReportSpec:
    return ReportSpec(**_section(value, _REPORT, f"{where}: report",
                                 what={"png": _TRUE_OR_FALSE, "kernel_error": _TRUE_OR_FALSE}))


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
