"""Pipeline runs from a YAML spec: incremental, resumable, atomic.

A workflow spec names an input Zarr array, optional preprocessing, a method
(any distsketch estimator with ``partial_fit``, or the built-in ``rnca``:
random features + exact covariance), outputs, a cluster and a seed::

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

:func:`run_workflow` processes the rows in segments of a fixed global row
grid (``[k·S, (k+1)·S)``), merging each segment's summary into the running
state and checkpointing it atomically; outputs are refreshed at the end and
committed in one atomic rename.  Layout of ``outputs.dir``::

    .lock                 fcntl lock: one run at a time per output
    state/                checkpoint: state.json + summary/ (committed per segment)
    result/               model.zarr, features.zarr, report.md, report.png,
                          dask-performance.html, distsketch-manifest.json (last)

Reruns are incremental: rows appended to the input since the last run are
sketched and merged (``partial_fit``); with nothing new a rerun does nothing.
A run killed at any point resumes from its last checkpoint; readers of
``result/`` always see a complete previous or new result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import importlib
import inspect
import json
import os
import platform
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError, DistsketchError, StoreError, WorkflowError
from distsketch.estimators.base import DistsketchEstimator, apply_rows, reduce_rows
from distsketch.summaries.base import Summary
from distsketch.summaries.covariance import Covariance
from distsketch.validation import Interval

__all__ = [
    "FAULT_ENV",
    "RNCAModel",
    "RunResult",
    "load_workflow_spec",
    "run_workflow",
]

#: environment hook for fault-injection tests: ``os._exit`` after the k-th segment of a run
FAULT_ENV = "DISTSKETCH_FAULT_AFTER_SEGMENT"
#: environment hook: ``os._exit`` at a named point (``before-result``, ``before-manifest``)
FAULT_POINT_ENV = "DISTSKETCH_FAULT_POINT"
_FAULT_EXIT = 75

_TOP_KEYS = {"name", "input", "targets", "seed", "segment_rows", "block_rows", "preprocessing", "method",
             "outputs", "cluster", "report", "description"}
_OUTPUT_KEYS = {"dir", "model", "features", "report", "features_compressor"}
_REPORT_KEYS = {"n_sample", "kernel", "gamma", "degree", "coef0", "png", "kernel_error"}
_PRE_KEYS = {"standardize"}
STATE_VERSION = 1


# --------------------------------------------------------------------------- spec


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


def load_workflow_spec(spec: Any, *, base: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read and validate a workflow spec.

    Parameters
    ----------
    spec : path-like or dict
        A YAML file or an already parsed mapping.
    base : path-like, optional
        Folder that relative paths are resolved against (default: the spec
        file's folder, or the working directory for a mapping).

    Returns
    -------
    dict
        The normalised spec: absolute paths, defaults filled in.

    Raises
    ------
    ConfigError
        Unreadable YAML, unknown keys, missing input/method/outputs, bad values.
    """
    import yaml

    if isinstance(spec, dict):
        raw, where = dict(spec), "workflow spec"
        base_dir = Path(base) if base is not None else Path.cwd()
    else:
        p = Path(spec).expanduser()
        where = f"workflow spec {p}"
        if not p.exists():
            raise ConfigError(f"{where} does not exist; see workflows/ for examples.")
        try:
            raw = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{where} is not valid YAML: {exc}") from exc
        base_dir = Path(base) if base is not None else p.parent.absolute()
    cfg = _check_keys(raw, _TOP_KEYS, where)
    for key in ("input", "method", "outputs"):
        if key not in cfg:
            raise ConfigError(f"{where}: missing required key {key!r} (input: a Zarr path; method: "
                              "{name, params}; outputs: {dir}).")
    cfg["input"] = _resolve_path(cfg["input"], base_dir)
    if cfg.get("targets") is not None:
        cfg["targets"] = _resolve_path(cfg["targets"], base_dir)
    else:
        cfg["targets"] = None
    seed = cfg.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"{where}: seed must be a non-negative integer, got {seed!r}; a fixed "
                          "seed makes reruns and incremental runs reproducible.")
    cfg["seed"] = seed
    seg = cfg.get("segment_rows", 65536)
    if not isinstance(seg, int) or isinstance(seg, bool) or seg < 1:
        raise ConfigError(f"{where}: segment_rows must be a positive integer, got {seg!r}.")
    cfg["segment_rows"] = seg
    br = cfg.get("block_rows")
    if br is not None and (not isinstance(br, int) or br < 1):
        raise ConfigError(f"{where}: block_rows must be a positive integer or null, got {br!r}.")
    cfg["block_rows"] = br
    pre = _check_keys(cfg.get("preprocessing"), _PRE_KEYS, f"{where}: preprocessing")
    if not isinstance(pre.get("standardize", False), bool):
        raise ConfigError(f"{where}: preprocessing.standardize must be true or false.")
    cfg["preprocessing"] = {"standardize": bool(pre.get("standardize", False))}
    method = cfg["method"]
    if isinstance(method, str):
        method = {"name": method}
    method = _check_keys(method, {"name", "params"}, f"{where}: method")
    if "name" not in method:
        raise ConfigError(f"{where}: method needs a 'name' (an estimator such as StreamingKernelPCA, "
                          "or 'rnca').")
    params = method.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: method.params must be a mapping.")
    cfg["method"] = {"name": str(method["name"]), "params": params}
    out = _check_keys(cfg["outputs"] if not isinstance(cfg["outputs"], str)
                      else {"dir": cfg["outputs"]}, _OUTPUT_KEYS, f"{where}: outputs")
    if "dir" not in out:
        raise ConfigError(f"{where}: outputs needs 'dir', the folder that holds the state, the lock "
                          "and the committed result.")
    out["dir"] = _resolve_path(out["dir"], base_dir)
    out.setdefault("model", "model.zarr")
    out.setdefault("features", "features.zarr")
    out.setdefault("report", "report.md")
    out.setdefault("features_compressor", "lz4")
    for key in ("model", "features", "report"):
        v = out[key]
        if v is not None and (not isinstance(v, str) or "/" in v or v.startswith(".")):
            raise ConfigError(f"{where}: outputs.{key} must be a plain file name inside outputs.dir "
                              f"(or null to skip it), got {v!r}.")
    cfg["outputs"] = out
    rep = _check_keys(cfg.get("report"), _REPORT_KEYS, f"{where}: report")
    rep.setdefault("n_sample", 1000)
    rep.setdefault("png", True)
    rep.setdefault("kernel_error", True)
    cfg["report"] = rep
    cluster = cfg.get("cluster")
    if isinstance(cluster, str) and cluster.endswith((".yaml", ".yml", ".json")):
        cluster = _resolve_path(cluster, base_dir)
    elif isinstance(cluster, dict):
        from distsketch.cluster_specs import validate_spec

        cluster = validate_spec(cluster, where=f"{where}: cluster")
    elif cluster is not None and not isinstance(cluster, str):
        raise ConfigError(f"{where}: cluster must be a name (local, sync, threads), an address, a "
                          f"file path or a mapping with 'kind', got {cluster!r}.")
    cfg["cluster"] = cluster
    _method_class(cfg["method"]["name"], where)  # fail early on unknown methods
    return cfg


def _spec_key(cfg: dict[str, Any]) -> str:
    """Hash of everything a stored state depends on (not cluster, outputs, report)."""
    keyed = {k: cfg[k] for k in ("input", "targets", "seed", "segment_rows", "preprocessing", "method")}
    blob = json.dumps(keyed, sort_keys=True, default=str).encode()
    return hashlib.blake2b(blob, digest_size=12).hexdigest()


# --------------------------------------------------------------------------- methods


class _Moments(Summary):
    """Per-column count, mean and sum of squared deviations (Chan et al. merge)."""

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> dict:
        B = np.asarray(block, dtype=np.float64)
        mean = B.mean(axis=0)
        return {"n": B.shape[0], "mean": mean, "m2": ((B - mean) ** 2).sum(axis=0)}

    def merge(self, states: list[dict]) -> dict:
        out = states[0]
        for s in states[1:]:
            n = out["n"] + s["n"]
            if n == 0:
                continue
            delta = s["mean"] - out["mean"]
            mean = out["mean"] + delta * (s["n"] / n)
            m2 = out["m2"] + s["m2"] + delta**2 * (out["n"] * s["n"] / n)
            out = {"n": n, "mean": mean, "m2": m2}
        return out


class _Shifted(Summary):
    """A summary whose row offsets are shifted to global row indices."""

    def __init__(self, inner: Summary, base: int):
        self.inner = inner
        self.base = int(base)

    def chunk(self, block: Any, row_offset: int, *operands: Any) -> Any:
        return self.inner.chunk(block, self.base + row_offset, *operands)

    def merge(self, states: list[Any]) -> Any:
        return self.inner.merge(states)


class RNCAModel(DistsketchEstimator):
    """Random-feature kernel PCA from an exact covariance summary (RNCA).

    Features z(x) from a distsketch feature map, the exact m × m matrix
    C = Σ z(xᵢ) z(xᵢ)ᵀ accumulated over all rows, and its top eigenvectors V:
    the embedding of x is Vᵀ z(x) and the kernel approximation is
    G̃(a, b) = z(a)ᵀ V Vᵀ z(b).  C is an exact sum, so an incremental run
    equals a full refit up to floating-point summation order.

    Parameters
    ----------
    feature_map : str, default "RandomFourierFeatures"
        Name of a distsketch feature-map estimator.
    feature_params : dict, optional
        Its parameters (``random_state`` is set from the workflow seed).
    n_components : int, default 10
        Number of principal components k.
    random_state : int or None
        Seed of the feature map.

    Attributes
    ----------
    feature_map_ : estimator
        The fitted feature map (m features).
    components_ : ndarray of shape (m, k)
        Top eigenvectors of C (columns, descending eigenvalue).
    eigenvalues_ : ndarray of shape (m,)
        All eigenvalues of C / n, descending (the kernel eigen-spectrum estimate).
    n_rows_seen_ : int

    Notes
    -----
    Per task: a block, its block_rows × m features and an m × m state
    (8·m² bytes); communication: one m × m state per block up the tree.

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016 (RNCA baseline).
    """

    _parameter_constraints = {
        "feature_map": [str],
        "feature_params": [dict, None],
        "n_components": [Interval(int, 1, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, feature_map: str = "RandomFourierFeatures",
                 feature_params: dict | None = None, n_components: int = 10,
                 random_state: Any = None):
        self.feature_map = feature_map
        self.feature_params = feature_params
        self.n_components = n_components
        self.random_state = random_state

    def _make_feature_map(self, n_features: int) -> Any:
        cls = _lazy_class(self.feature_map, "RNCAModel.feature_map")
        params = dict(self.feature_params or {})
        params.setdefault("random_state", self._init_seed())
        fm = cls(**params)
        fm.fit(np.zeros((1, n_features)))
        return fm

    def fit(self, X: Any, y: Any = None) -> RNCAModel:
        """Accumulate C over all rows of X (one tree-reduced pass) and take its eigenvectors.

        Parameters
        ----------
        X : ndarray or dask array of shape (n, d)
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        X = self._check_input(X, reset=True)
        fm = self._make_feature_map(X.shape[1])
        state = reduce_rows(Covariance(transform=fm._map_block), X, *fm._operands(),
                            name="rnca-covariance")
        return self.finalize_from(state, X.shape[1])

    @single_threaded_blas
    def finalize_from(self, state: dict, n_features: int) -> RNCAModel:
        """Set the learned attributes from a merged covariance state."""
        self._validate_params()
        self.feature_map_ = self._make_feature_map(n_features)
        self.n_features_in_ = int(n_features)
        n = int(state["n"])
        vals, vecs = np.linalg.eigh(state["ztz"])
        order = np.argsort(vals)[::-1]
        vals, vecs = vals[order], vecs[:, order]
        # eigenvector signs are arbitrary: fix them so reruns compare equal
        signs = np.sign(vecs[np.argmax(np.abs(vecs), axis=0), np.arange(vecs.shape[1])])
        vecs = vecs * np.where(signs == 0, 1.0, signs)
        k = min(self.n_components, vecs.shape[1])
        self.components_ = np.ascontiguousarray(vecs[:, :k])
        self.eigenvalues_ = vals / max(n, 1)
        self.n_rows_seen_ = n
        self.n_output_features_ = k
        return self

    def transform(self, X: Any) -> Any:
        """Embed rows: Vᵀ z(x).

        Parameters
        ----------
        X : ndarray or dask array of shape (n, d)

        Returns
        -------
        ndarray or dask array of shape (n, k), float64
        """
        self._check_is_fitted("components_")
        fm = self.feature_map_
        return apply_rows(X, _rnca_block, *fm._operands(), self.components_,
                          kwargs={"map_block": fm._map_block}, n_out=self.components_.shape[1],
                          dtype=np.float64, name="rnca-transform")

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """G̃(A, B) = z(A) V Vᵀ z(B)ᵀ for small in-memory row sets."""
        fm = self.feature_map_
        ops = (*fm._operands(), self.components_)
        EA = _rnca_block(np.asarray(A), 0, *ops, map_block=fm._map_block)
        EB = EA if B is None else _rnca_block(np.asarray(B), 0, *ops, map_block=fm._map_block)
        return EA @ EB.T


def _rnca_block(block: Any, offset: int, *operands: Any, map_block: Callable) -> np.ndarray:
    """Vᵀ z(x) for one block; operands are the feature map's followed by V."""
    Z = np.asarray(map_block(block, offset, *operands[:-1]), dtype=np.float64)
    return Z @ operands[-1]


def _lazy_class(name: str, where: str) -> Any:
    import distsketch

    module = distsketch._LAZY.get(name)
    if module is None:
        raise ConfigError(f"{where}: unknown method {name!r}; use 'rnca' or one of the estimators "
                          f"{sorted(distsketch._LAZY)}.")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: method {name!r} (module {module}) is not available in this "
                          f"installation: {exc}.") from exc


def _method_class(name: str, where: str) -> Any:
    if name.lower() == "rnca":
        return RNCAModel
    cls = _lazy_class(name, where)
    if not hasattr(cls, "fit"):
        raise ConfigError(f"{where}: {name} is not an estimator (it has no fit method).")
    return cls


class _Method:
    """Adapter: fold segments into a state, checkpoint it, finalise a model."""

    def __init__(self, cfg: dict[str, Any]):
        self.name = cfg["method"]["name"]
        self.params = dict(cfg["method"]["params"])
        self.seed = cfg["seed"]
        self.cls = _method_class(self.name, "workflow spec")
        # without an exact partial_fit there is no summary to merge: new rows mean a refit on all
        # rows (NystromKernelPCA.partial_fit keeps its first landmarks, so it would not equal a refit)
        self.incremental = self.cls is RNCAModel or (
            hasattr(self.cls, "partial_fit") and getattr(self.cls, "_partial_fit_equals_fit", True))
        if "random_state" in inspect.signature(self.cls).parameters:
            self.params.setdefault("random_state", self.seed)
        self.state: Any = None

    # -- generic estimator: the state is the estimator itself
    def update(self, X: Any, start: int, y: np.ndarray | None = None) -> None:
        if self.cls is RNCAModel:
            self._rnca_update(X, start)
            return
        if not self.incremental:
            if start != 0:
                raise WorkflowError(f"{self.name} has no partial_fit: it can only be fitted on all "
                                    "rows at once; rerun with --full.")
            est = self.cls(**self.params)
            self.state = est.fit(X) if y is None else est.fit(X, y)
            return
        if self.state is None:
            self.state = self.cls(**self.params)
        if y is None:
            self.state.partial_fit(X)
        else:
            self.state.partial_fit(X, y)

    def _rnca_update(self, X: Any, start: int) -> None:
        model = RNCAModel(**self.params)
        fm = model._make_feature_map(X.shape[1])
        summary = _Shifted(Covariance(transform=fm._map_block), start)
        seg = reduce_rows(summary, X, *fm._operands(), name="rnca-covariance", progress=False)
        self.state = seg if self.state is None else Covariance().merge([self.state, seg])

    def save(self, folder: Path) -> None:
        if self.cls is RNCAModel:
            np.savez(folder / "covariance.npz", **{k: np.asarray(v) for k, v in self.state.items()})
        else:
            from distsketch.io.model import save_model

            save_model(self.state, folder / "model.zarr")

    def load(self, folder: Path) -> None:
        if self.cls is RNCAModel:
            with np.load(folder / "covariance.npz") as z:
                self.state = {k: (int(z[k]) if k == "n" else z[k]) for k in z.files}
        else:
            from distsketch.io.model import load

            self.state = load(folder / "model.zarr")

    def model(self, n_features: int) -> Any:
        if self.cls is RNCAModel:
            return RNCAModel(**self.params).finalize_from(self.state, n_features)
        return self.state


def _spectrum(model: Any) -> np.ndarray | None:
    """Eigenvalue estimates (per row) a model exposes, descending; None if it has none."""
    sv = getattr(model, "singular_values_", None)
    n = getattr(model, "n_rows_seen_", None)
    if isinstance(sv, np.ndarray) and sv.ndim == 1 and sv.size and n:
        return np.asarray(sv, dtype=np.float64) ** 2 / n
    for attr in ("eigenvalues_", "explained_variance_", "lambdas_"):
        v = getattr(model, attr, None)
        if isinstance(v, np.ndarray) and v.ndim == 1 and v.size:
            return np.asarray(v, dtype=np.float64)
    return None


# --------------------------------------------------------------------------- state files


def _fault_point(name: str) -> None:
    if os.environ.get(FAULT_POINT_ENV) == name:
        sys.stderr.flush()
        os._exit(_FAULT_EXIT)


def _recover(path: Path) -> None:
    """Undo an interrupted two-rename swap of atomic_dir (old aside, new not yet in)."""
    if path.exists():
        for old in path.parent.glob(f".{path.name}.old-*"):
            shutil.rmtree(old, ignore_errors=True)
        return
    olds = sorted(path.parent.glob(f".{path.name}.old-*"), key=lambda p: p.stat().st_mtime)
    if olds:
        os.replace(olds[-1], path)
        for old in olds[:-1]:
            shutil.rmtree(old, ignore_errors=True)


def _clean_tmp(path: Path) -> None:
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _lock(folder: Path, wait: bool | float) -> Iterator[None]:
    """Hold an exclusive OS lock on ``folder/.lock`` (released when the process dies)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = None if wait is True else time.monotonic() + float(wait or 0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if wait is True:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    break
                if deadline is None or time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                    raise WorkflowError(
                        f"another distsketch run (pid {holder}) is using the output folder {folder}; "
                        "wait for it to finish, or rerun with --wait to queue behind it."
                    ) from None
                time.sleep(0.2)  # polling a lock held by another process
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _prefix_fingerprint(X: Any, stop: int, seed: int) -> str:
    """Hash of the consumed rows [0, stop): first and last 512 rows plus 16 probes."""
    from distsketch.graph import compute
    from distsketch.ops.random import hash_bucket

    if stop <= 0:
        return "empty"
    parts = [X[: min(stop, 512)], X[max(0, stop - 512): stop]]
    if stop > 1024:
        starts = hash_bucket(seed, "workflow.fingerprint", np.arange(16, dtype=np.int64),
                             max(1, stop - 16))
        parts += [X[int(s): int(s) + 16] for s in np.sort(starts)]
    arrays = compute(*parts, progress=False)
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{stop}:{X.shape[1]}:{X.dtype}".encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- peak memory


class _PeakRSS:
    """Peak resident memory of this process and its children, sampled in a thread."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        while True:
            total = 0
            try:
                procs = [me, *me.children(recursive=True)]
            except psutil.Error:
                procs = [me]
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            self.peak_bytes = max(self.peak_bytes, total)
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> _PeakRSS:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def _peak_memory() -> Any:
    try:
        from distsketch.diagnostics import PeakMemory

        return PeakMemory()
    except ImportError:
        return _PeakRSS()


# --------------------------------------------------------------------------- report


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in ("distsketch", "numpy", "scipy", "dask", "distributed", "zarr", "sklearn"):
        try:
            out[mod] = str(importlib.import_module(mod).__version__)
        except Exception:  # a version is informative only
            out[mod] = "unknown"
    return out


def _kernel_spec(cfg: dict[str, Any], model: Any) -> tuple[str | None, dict]:
    rep = cfg["report"]
    params = cfg["method"]["params"]
    if cfg["method"]["name"].lower() == "rnca":
        params = params.get("feature_params") or {}
    kernel = rep.get("kernel", params.get("kernel", getattr(model, "kernel", "rbf")))
    kw = {}
    for key in ("gamma", "degree", "coef0"):
        value = rep.get(key, params.get(key, getattr(model, key, None)))
        if value is not None:
            kw[key] = value
    return kernel if isinstance(kernel, str) else None, kw


def _write_report(folder: Path, cfg: dict[str, Any], info: dict[str, Any], spectrum: np.ndarray | None,
                  errors: dict[str, Any], name: str) -> list[str]:
    files = []
    png = None
    if spectrum is not None and cfg["report"].get("png", True):
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            plt = None
        if plt is not None:
            fig, ax = plt.subplots(figsize=(6, 3.5))
            fig.subplots_adjust(left=0.14, right=0.97, bottom=0.15, top=0.9)
            vals = np.clip(spectrum[: min(spectrum.size, 200)], 1e-300, None)
            ax.semilogy(np.arange(1, vals.size + 1), vals, marker=".")
            ax.set_xlabel("index")
            ax.set_ylabel("eigenvalue")
            ax.set_title("kernel eigen-spectrum estimate")
            png = Path(name).with_suffix(".png").name
            fig.savefig(folder / png, dpi=100)
            plt.close(fig)
            files.append(png)
    lines = [f"# distsketch run report: {cfg.get('name') or cfg['method']['name']}", "",
             f"- status: {info['status']}",
             f"- input: `{cfg['input']}` shape {info['input_shape']}",
             f"- rows consumed: {info['rows']['before']} -> {info['rows']['after']} "
             f"({info['rows']['new']} new, {info['segments']} segment(s) this run)",
             f"- method: {cfg['method']['name']} {json.dumps(cfg['method']['params'], default=str)}",
             f"- seed: {cfg['seed']}",
             f"- peak memory: {info['peak_memory_bytes'] / 2**20:.1f} MiB (process tree)", "",
             "## Time per stage", "", "| stage | seconds |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.3f} |" for k, v in info["timings"].items()]
    lines += ["", "## Kernel error estimate", ""]
    if errors.get("available"):
        lines += [f"On {errors['n_sample']} sampled rows (kernel {errors['kernel']}):", "",
                  "| measure | value |", "| --- | ---: |"]
        lines += [f"| {k} | {errors[k]:.4g} |" for k in ("spectral", "frobenius", "relative_frobenius")]
    else:
        lines.append(f"not computed: {errors.get('reason', 'disabled')}")
    lines += ["", "## Eigen-spectrum", ""]
    if spectrum is not None:
        top = ", ".join(f"{v:.4g}" for v in spectrum[:10])
        lines.append(f"Top eigenvalues: {top}")
        if png:
            lines += ["", f"![eigen-spectrum]({png})"]
    else:
        lines.append("the model exposes no eigenvalues.")
    if info.get("performance_report"):
        lines += ["", f"Dask performance report: [{info['performance_report']}]"
                      f"({info['performance_report']})"]
    (folder / name).write_text("\n".join(lines) + "\n")
    files.append(name)
    return files


# --------------------------------------------------------------------------- the run


@dataclasses.dataclass
class RunResult:
    """What a run did.

    Attributes
    ----------
    status : str
        ``"full"``, ``"incremental"``, ``"resumed"``, ``"refreshed"`` (outputs
        rebuilt from a complete state) or ``"up-to-date"`` (nothing new).
    rows_before, rows_after : int
        Rows of the input consumed before and after the run.
    segments : int
        Row segments processed by this run.
    result_dir : pathlib.Path
        The committed result folder.
    manifest : dict or None
        The run manifest (None for a dry run).
    message : str
        One-line summary for the user.
    """

    status: str
    rows_before: int
    rows_after: int
    segments: int
    result_dir: Path
    manifest: dict | None
    message: str


def _read_state(state_dir: Path) -> dict | None:
    p = state_dir / "state.json"
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise WorkflowError(f"the workflow state {p} is unreadable ({exc}); rerun with --full to "
                            "rebuild it from the input.") from exc


def _save_state(state_dir: Path, method: _Method, meta: dict) -> None:
    from distsketch.io.atomic import atomic_dir

    with atomic_dir(state_dir, overwrite=True) as tmp:
        summary = tmp / "summary"
        summary.mkdir()
        method.save(summary)
        (tmp / "state.json").write_text(json.dumps(meta, indent=2))


def _as_store_error(exc: OSError, what: str) -> StoreError:
    hint = "the disk is full; free space" if exc.errno == errno.ENOSPC else "check the path and permissions"
    return StoreError(f"cannot write {what}: {exc}. {hint} and rerun; the previous result is intact.")


def run_workflow(
    spec: Any,
    *,
    cluster: Any = None,
    full: bool = False,
    wait: bool | float = False,
    dry_run: bool = False,
    connect_timeout: float = 20.0,
    log: Callable[[str], None] | None = None,
) -> RunResult:
    """Run (or continue) the pipeline described by ``spec``.

    Parameters
    ----------
    spec : path-like or dict
        Workflow spec (see :func:`load_workflow_spec`).
    cluster : optional
        Overrides the spec's ``cluster`` (anything :func:`distsketch.cluster.connect`
        accepts: "local", "sync", "threads", "tcp://...", a scheduler file, a
        cluster spec YAML).
    full : bool, default False
        Discard the stored state and refit from row 0.
    wait : bool or float, default False
        If another run holds the output folder: False refuses with
        WorkflowError, True waits, a number waits that many seconds.
    dry_run : bool, default False
        Report what would be done without computing or writing.
    connect_timeout : float, default 20
        Seconds to wait for a remote scheduler before raising ClusterError.
    log : callable, optional
        Receives progress lines (default: print to stderr).

    Returns
    -------
    RunResult

    Raises
    ------
    ConfigError
        Invalid spec.
    WorkflowError
        Output folder locked, spec changed since the stored state, or the
        already consumed input rows changed in place (rerun with ``full=True``).
    StoreError
        Input missing/corrupt (naming the chunk), outputs unwritable (the
        previous result stays intact).

    Notes
    -----
    Memory per task is that of the method on one block; the driver holds one
    summary state.  Each segment costs one pass over its rows plus an atomic
    checkpoint write of the state; outputs are rewritten once per run
    (features: one pass over all rows).

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016 (mergeable summaries that make incremental runs exact or
    within the FD guarantee).
    """
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    cfg = load_workflow_spec(spec)
    out_dir = Path(cfg["outputs"]["dir"])
    state_dir, result_dir = out_dir / "state", out_dir / "result"
    key = _spec_key(cfg)
    if dry_run:
        return _dry_run(cfg, state_dir, result_dir, key, full, say)
    return _run(cfg, key, out_dir, state_dir, result_dir, cluster, full, wait, connect_timeout, say)


def _run(cfg: dict, key: str, out_dir: Path, state_dir: Path, result_dir: Path, cluster: Any,
         full: bool, wait: bool | float, connect_timeout: float,
         say: Callable[[str], None]) -> RunResult:
    """The body of :func:`run_workflow` once the spec is loaded."""
    from distsketch.cluster import connect
    from distsketch.io.zarr_io import fingerprint, open_array, read_manifest, write_manifest

    if out_dir.exists() and not out_dir.is_dir():
        raise StoreError(f"outputs.dir {out_dir} exists and is not a folder; choose another path.")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _as_store_error(exc, f"the output folder {out_dir}") from exc
    timings: dict[str, float] = {}
    t_run = time.perf_counter()
    with _lock(out_dir, wait), _peak_memory() as peak:
        for p in (state_dir, result_dir):
            _recover(p)
            _clean_tmp(p)
        for stale in out_dir.glob(".dask-performance-*.html"):
            stale.unlink(missing_ok=True)
        t0 = time.perf_counter()
        X = open_array(cfg["input"], block_rows=cfg["block_rows"])
        n, d = int(X.shape[0]), int(X.shape[1])
        if n == 0:
            raise WorkflowError(f"input {cfg['input']} has no rows; nothing to fit.")
        state = None if full else _read_state(state_dir)
        method = _Method(cfg)
        if state is not None:
            _check_state(state, cfg, key, X, state_dir)
        done = int(state["rows_done"]) if state else 0
        manifest = read_manifest(result_dir) if result_dir.exists() else None
        same = manifest is not None and manifest.get("spec_key") == key
        timings["open"] = time.perf_counter() - t0
        if state is not None and done == n and same and manifest["rows"]["after"] == n:
            msg = (f"nothing new: all {n} rows of {cfg['input']} were already consumed; the result in "
                   f"{result_dir} is up to date.")
            return RunResult("up-to-date", n, n, 0, result_dir, manifest, msg)
        before = int(manifest["rows"]["after"]) if same and state is not None else 0
        if state is not None and not method.incremental and done < n:
            why = ("has no partial_fit" if not hasattr(method.cls, "partial_fit")
                   else "cannot merge new rows into a result equal to a refit")
            say(f"{method.name} {why}: refitting on all {n} rows")
            state, done = None, 0
        if state is None:
            status = "full"
        elif state.get("in_progress"):
            status = "resumed"
        elif done == n:
            status = "refreshed"
        else:
            status = "incremental"
        if state is not None:
            method.load(state_dir / "summary")
        with connect(cfg["cluster"] if cluster is None else cluster, timeout=connect_timeout) as client, \
                _result_writer(result_dir) as tmp:
            t0 = time.perf_counter()
            if not cfg["preprocessing"]["standardize"]:
                scaler = None
            elif state is None:
                scaler = _learn_scaler(X)
            else:
                scaler = state["scaler"]
            timings["preprocess"] = time.perf_counter() - t0
            Xs = _apply_scaler(X, scaler)
            meta = {
                "version": STATE_VERSION, "spec_key": key, "input": cfg["input"], "n_features": d,
                "dtype": str(X.dtype), "segment_rows": cfg["segment_rows"], "seed": cfg["seed"],
                "scaler": scaler,
            }
            perf_ctx, perf_file = _performance_report(client, out_dir)
            with perf_ctx:
                t0 = time.perf_counter()
                segments = _fit_segments(method, X, Xs, done, n, cfg, meta, state_dir, say)
                timings["fit"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                model = method.model(d)
                timings["finalize"] = time.perf_counter() - t0
                _fault_point("before-result")
                errors = _write_outputs(tmp, cfg, key, Xs, model, n, timings)
            info = {
                "kind": "workflow-run", "status": status, "spec": cfg, "spec_key": key,
                "seed": cfg["seed"], "input_fingerprint": fingerprint(cfg["input"]),
                "input_shape": [n, d], "rows": {"before": before, "after": n, "new": n - before},
                "segments": segments, "versions": _versions(), "timings": timings,
                "kernel_errors": errors, "performance_report": None,
                "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
            }
            if perf_file is not None and perf_file.exists():
                os.replace(perf_file, tmp / "dask-performance.html")
                info["performance_report"] = "dask-performance.html"
            timings["total"] = time.perf_counter() - t_run
            info["peak_memory_bytes"] = int(peak.peak_bytes)
            try:
                if cfg["outputs"]["report"]:
                    _write_report(tmp, cfg, info, _spectrum(model), errors, cfg["outputs"]["report"])
                info["files"] = sorted(p.name for p in tmp.iterdir())
                _fault_point("before-manifest")
                write_manifest(tmp, info | {"finished_at": time.time()})
            except OSError as exc:
                raise _as_store_error(exc, f"the result {result_dir}") from exc
    msg = (f"{status}: consumed rows {before}..{n} of {cfg['input']} ({segments} new segment(s)); "
           f"result committed to {result_dir}.")
    return RunResult(status, before, n, segments, result_dir, info, msg)


@contextlib.contextmanager
def _result_writer(result_dir: Path) -> Iterator[Path]:
    """atomic_dir for the result, with OS errors turned into StoreError."""
    from distsketch.io.atomic import atomic_dir

    try:
        with atomic_dir(result_dir, overwrite=True) as tmp:
            yield tmp
    except OSError as exc:
        raise _as_store_error(exc, f"the result {result_dir}") from exc


def _fit_segments(method: _Method, X: Any, Xs: Any, done: int, n: int, cfg: dict, meta: dict,
                  state_dir: Path, say: Callable[[str], None]) -> int:
    """Fold segments [done, n) of the global row grid into the state, checkpointing each."""
    # an estimator without partial_fit is fitted in one segment holding every row
    seg = cfg["segment_rows"] if method.incremental else n
    fault_after = int(os.environ.get(FAULT_ENV, "0") or 0)
    targets = _open_targets(cfg, n)
    segments = 0
    while done < n:
        stop = min(n, (done // seg + 1) * seg)
        y = None if targets is None else _read_targets(targets, cfg["targets"], done, stop)
        method.update(Xs[done:stop], done, y)
        start, done = done, stop
        segments += 1
        meta.update(rows_done=done, in_progress=done < n,
                    prefix_fingerprint=_prefix_fingerprint(X, done, cfg["seed"]))
        try:
            _save_state(state_dir, method, meta)
        except OSError as exc:
            raise _as_store_error(exc, f"the checkpoint {state_dir}") from exc
        if method.cls is not RNCAModel:
            # keep the in-memory state identical to what a resumed run would load
            method.load(state_dir / "summary")
        say(f"segment rows {start}..{stop}: {done}/{n} rows consumed, checkpointed")
        if fault_after and segments == fault_after:
            sys.stderr.flush()
            os._exit(_FAULT_EXIT)
    return segments


def _check_state(state: dict, cfg: dict, key: str, X: Any, state_dir: Path) -> None:
    if state.get("version") != STATE_VERSION or state.get("spec_key") != key:
        raise WorkflowError(
            f"the stored state in {state_dir} was written by a different spec (input, method, params, "
            "seed, preprocessing or segment_rows changed); rerun with --full to refit from scratch."
        )
    n, d = int(X.shape[0]), int(X.shape[1])
    done = int(state["rows_done"])
    if d != state["n_features"] or str(X.dtype) != state["dtype"] or n < done:
        raise WorkflowError(
            f"input {cfg['input']} changed in place: it now has shape ({n}, {d}) and dtype {X.dtype}, "
            f"but {done} rows of width {state['n_features']} ({state['dtype']}) were already consumed. "
            "Rows may only be appended; rerun with --full to refit on the current data."
        )
    if _prefix_fingerprint(X, done, cfg["seed"]) != state["prefix_fingerprint"]:
        raise WorkflowError(
            f"input {cfg['input']} changed in place: the already consumed rows 0..{done} no longer "
            "match their fingerprint. Rows may only be appended; rerun with --full to refit on the "
            "current data."
        )


def _open_targets(cfg: dict, n: int) -> Any:
    """The targets Zarr array (rows aligned with the input), or None."""
    if cfg["targets"] is None:
        return None
    from distsketch.io.zarr_io import open_zarr

    path, _, comp = cfg["targets"].partition("::")
    arr = open_zarr(path, comp or None)
    if arr.ndim not in (1, 2) or arr.shape[0] < n:
        raise WorkflowError(f"targets {cfg['targets']} have shape {arr.shape}, but the input has {n} "
                            "rows; append the targets of new rows together with the rows.")
    return arr


def _read_targets(arr: Any, where: str, start: int, stop: int) -> np.ndarray:
    try:
        return np.asarray(arr[start:stop])
    except Exception as exc:
        raise StoreError(f"cannot read rows {start}..{stop} of the targets {where}: "
                         f"{type(exc).__name__}: {exc}. Restore the chunk or re-ingest.") from exc


def _learn_scaler(X: Any) -> dict:
    mom = reduce_rows(_Moments(), X, name="standardize-moments", progress=False)
    n = max(int(mom["n"]), 1)
    scale = np.sqrt(mom["m2"] / n)
    scale[scale == 0] = 1.0  # constant columns are centred only
    return {"mean": mom["mean"].tolist(), "scale": scale.tolist()}


def _apply_scaler(X: Any, scaler: dict | None) -> Any:
    if scaler is None:
        return X
    dt = X.dtype if np.dtype(X.dtype).kind == "f" else np.float64
    mean = np.asarray(scaler["mean"], dtype=np.float64).astype(dt)
    scale = np.asarray(scaler["scale"], dtype=np.float64).astype(dt)
    return ((X.astype(dt) - mean) / scale).astype(dt)


def _performance_report(client: Any, out_dir: Path) -> tuple[Any, Path | None]:
    if client is None:
        return contextlib.nullcontext(), None
    try:
        import bokeh  # noqa: F401  (performance_report needs it)
        from distributed import performance_report
    except ImportError:
        return contextlib.nullcontext(), None
    path = out_dir / f".dask-performance-{uuid.uuid4().hex[:8]}.html"
    return performance_report(filename=str(path)), path


def _kernel_errors(cfg: dict, Xs: Any, model: Any) -> dict:
    if not cfg["report"].get("kernel_error", True):
        return {"available": False, "reason": "disabled in the spec (report.kernel_error: false)"}
    if not hasattr(model, "kernel_approx"):
        return {"available": False, "reason": f"{type(model).__name__} has no kernel_approx"}
    kernel, kw = _kernel_spec(cfg, model)
    if kernel is None:
        return {"available": False, "reason": "the kernel is not a named kernel"}
    from distsketch.metrics import kernel_errors

    try:
        errs = kernel_errors(Xs, model, kernel, n_sample=int(cfg["report"]["n_sample"]),
                             random_state=cfg["seed"], **kw)
    except DistsketchError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, "kernel": kernel, **errs}


def _write_outputs(tmp: Path, cfg: dict, key: str, Xs: Any, model: Any, n: int,
                   timings: dict) -> dict:
    """Model, features and kernel error estimate into the uncommitted result folder."""
    from distsketch.io.model import save_model
    from distsketch.io.zarr_io import write_array

    out = cfg["outputs"]
    try:
        if out["model"]:
            t0 = time.perf_counter()
            save_model(model, tmp / out["model"], extra={"spec_key": key, "rows": n})
            timings["save_model"] = time.perf_counter() - t0
        if out["features"] and (hasattr(model, "transform") or hasattr(model, "predict")):
            t0 = time.perf_counter()
            # supervised models write their predictions, the others their embedding
            Z = model.transform(Xs) if hasattr(model, "transform") else model.predict(Xs)
            if Z.ndim == 1:
                Z = Z[:, None]
            write_array(Z, tmp / out["features"], compressor=out["features_compressor"],
                        manifest={"rows": n, "spec_key": key}, progress=False)
            timings["features"] = time.perf_counter() - t0
    except OSError as exc:
        raise _as_store_error(exc, f"the outputs under {tmp.parent}") from exc
    t0 = time.perf_counter()
    errors = _kernel_errors(cfg, Xs, model)
    timings["kernel_error"] = time.perf_counter() - t0
    return errors


def _dry_run(cfg: dict, state_dir: Path, result_dir: Path, key: str, full: bool,
             say: Callable[[str], None]) -> RunResult:
    from distsketch.io.zarr_io import open_array, read_manifest

    X = open_array(cfg["input"], block_rows=cfg["block_rows"])
    n = int(X.shape[0])
    state = None if full else _read_state(state_dir)
    done = int(state["rows_done"]) if state else 0
    if state is not None and state.get("spec_key") != key:
        plan = "the stored state is from a different spec: the run would refuse (use --full)"
    elif done >= n and state is not None:
        man = read_manifest(result_dir) if result_dir.exists() else None
        plan = ("nothing new: the run would do nothing" if man and man.get("rows", {}).get("after") == n
                else "all rows consumed: the run would refresh the outputs")
    else:
        seg = cfg["segment_rows"]
        k = len(range(done // seg, -(-n // seg)))
        plan = f"would consume rows {done}..{n} in {k} segment(s) of up to {seg} rows"
    msg = (f"dry run: input {cfg['input']} has shape {tuple(X.shape)}; method {cfg['method']['name']}; "
           f"{plan}; outputs in {result_dir}.")
    return RunResult("dry-run", done, n, 0, result_dir, None, msg)
