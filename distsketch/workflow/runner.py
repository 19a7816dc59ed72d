"""The runner: lock, recover, fold new segments, write outputs, commit.

Layout of ``outputs.dir``::

    .lock                 fcntl lock (an object with a heartbeat on object stores):
                          one run at a time per output
    state/                checkpoint: state.json + its summary (committed per segment)
    result/               model.zarr, features.zarr, report.md, report.png,
                          dask-performance.html, distsketch-manifest.json (last)

``outputs.dir`` and the input may be fsspec URLs (``s3://...``) with the
spec's ``storage_options``; :mod:`~distsketch.workflow.storage` holds what
differs there.

Over 500 lines because the run's named steps share one lock, one checkpoint and one
commit.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask

from distsketch.errors import ConfigError, WorkflowError
from distsketch.graph import DEVICE_KEY, current_device, record_plans
from distsketch.ops.device import check_device, require_cupy
from distsketch.workflow.hooks import WorkflowHooks
from distsketch.workflow.methods import MethodAdapter
from distsketch.workflow.preprocess import apply_scaler, learn_scaler
from distsketch.workflow.report import kernel_errors, performance_report, spectrum, versions, write_report
from distsketch.workflow.segments import SegmentFolder, plan_summary, segment_bounds
from distsketch.workflow.spec import WorkflowSpec, load_workflow_spec
from distsketch.workflow.state import STATE_VERSION, check_state, store_error
from distsketch.workflow.storage import open_storage
from distsketch.workflow.window import segments_in_flight

__all__ = ["RunResult", "run_workflow"]


@dataclasses.dataclass
class RunResult:
    """What a run did.

    Attributes
    ----------
    status : str
        ``"full"``, ``"incremental"``, ``"resumed"``, ``"refreshed"`` (outputs
        rebuilt from a complete state), ``"up-to-date"`` (nothing new) or
        ``"dry-run"``.
    rows_before, rows_after : int
        Rows of the input consumed before and after the run.
    segments : int
        Row segments processed by this run.
    result_dir : pathlib.Path or str
        The committed result folder (its URL on an object store).
    manifest : dict or None
        The run manifest (None for a dry run).
    message : str
        One-line summary for the user.
    """

    status: str
    rows_before: int
    rows_after: int
    segments: int
    result_dir: Path | str
    manifest: dict | None
    message: str


def run_workflow(
    spec: Any,
    *,
    cluster: Any = None,
    full: bool = False,
    wait: bool | float = False,
    dry_run: bool = False,
    connect_timeout: float = 20.0,
    log: Callable[[str], None] | None = None,
    hooks: WorkflowHooks | None = None,
    force_unlock: bool = False,
    storage_options: dict | None = None,
    dashboard: str | None = None,
    device: str | None = None,
) -> RunResult:
    """Run (or continue) the pipeline described by ``spec``.

    Rows are processed in segments of a fixed global row grid
    (``[k·S, (k+1)·S)``), each segment's summary merged into the running state
    and checkpointed atomically; outputs are refreshed at the end and committed
    in one atomic rename.  Reruns are incremental: rows appended since the last
    run are merged (``partial_fit``); with nothing new a rerun does nothing.  A
    run killed at any point resumes from its last checkpoint; readers of
    ``result/`` always see a complete previous or new result.

    Parameters
    ----------
    spec : path-like, dict or WorkflowSpec
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
    hooks : WorkflowHooks, optional
        Called at fixed points of the run (instrumentation, fault-injection tests).
    force_unlock : bool, default False
        On an object store: remove the lock object another run left before
        taking it (when that run is known to be gone).  Local folders use an
        OS lock that dies with its process.
    storage_options : dict, optional
        fsspec options for URL inputs and outputs, merged over the spec's
        ``storage_options`` (CLI: ``--storage-option KEY=VALUE``).
    dashboard : str, optional
        Serve the Dask dashboard of the cluster the run starts at this
        address (``":0"`` any free port, ``"auto"`` the cluster spec's own
        address or any free port) and log its link; see
        :func:`distsketch.cluster.connect` (CLI: ``--dashboard``).
    device : {"cpu", "cuda"}, optional
        Overrides the spec's ``device`` (CLI: ``--device``); without either,
        the dask config ``distsketch.device`` applies (docs/gpu.md).

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
    summary state per segment in flight (``segments_in_flight``, by default
    one per cluster thread plus one).  Each segment costs one pass over its
    rows plus an atomic checkpoint write of the state; outputs are rewritten
    once per run (features: one pass over all rows).

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016 (mergeable summaries that make incremental runs exact or
    within the FD guarantee).
    """
    spec = load_workflow_spec(spec)
    if dashboard is not None:  # refused before the output folder is locked or written
        from distsketch.cluster import check_dashboard

        check_dashboard(spec.cluster if cluster is None else cluster, dashboard)
    if storage_options:
        from distsketch.io.storage.urls import merge_options

        spec = dataclasses.replace(
            spec, storage_options=merge_options(spec.storage_options, storage_options))
    if device is not None:
        spec = dataclasses.replace(spec, device=check_device(device, "device"))
    if spec.device not in (None, "cpu"):  # refused before the output folder is locked
        require_cupy(f"workflow device {spec.device!r}")
    run = _Run(spec=spec, cluster=cluster, full=full, wait=wait,
               connect_timeout=connect_timeout, force_unlock=force_unlock, dashboard=dashboard,
               say=log or (lambda msg: print(msg, file=sys.stderr, flush=True)),
               hooks=hooks or WorkflowHooks())
    if dry_run:
        return run.dry_run()
    try:
        return run.execute()
    except Exception as exc:
        run.hooks.on_error(exc)
        raise


@dataclasses.dataclass
class _Found:
    """What a locked run finds: the input, the method, the checkpoint and the committed
    result's manifest (``same``: of this spec)."""

    X: Any
    method: MethodAdapter
    state: dict | None
    manifest: dict | None
    same: bool

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def done(self) -> int:
        return int(self.state["rows_done"]) if self.state else 0

    def up_to_date(self) -> bool:
        """Every row is in the checkpoint and in the committed result of this spec."""
        return (self.state is not None and self.done == self.n and self.same
                and self.manifest["rows"]["after"] == self.n)  # type: ignore[index]


@dataclasses.dataclass
class _Plan:
    """What a run folds: from ``done`` (0 and no state for a refit) into ``method``."""

    method: MethodAdapter
    state: dict | None
    done: int
    status: str
    before: int


@dataclasses.dataclass
class _Fitted:
    """The finalized model and how the fold went."""

    model: Any
    segments: int
    in_flight: int


@dataclasses.dataclass
class _Written:
    """What the outputs measured: kernel errors and the fit metric (None: unsupervised)."""

    errors: dict
    fit: dict | None


@dataclasses.dataclass
class _Run:
    """One run of a spec: its options, folders and the steps of :func:`run_workflow`."""

    spec: WorkflowSpec
    cluster: Any
    full: bool
    wait: bool | float
    connect_timeout: float
    say: Callable[[str], None]
    hooks: WorkflowHooks
    force_unlock: bool = False
    dashboard: str | None = None

    def __post_init__(self) -> None:
        self.key = self.spec.key()
        self.storage = open_storage(self.spec.outputs.dir, self.spec.storage_options)
        self.out_dir = self.storage.out_dir
        self.state = self.storage.state
        self.state_dir = self.state.where
        self.result_dir = self.storage.result_dir
        self.inputs = [self.spec.input, self.spec.targets]
        self.timings: dict[str, float] = {}

    def _open(self) -> Any:
        from distsketch.io import open_array

        return open_array(self.spec.input, block_rows=self.spec.block_rows,
                          storage_options=self.spec.storage_options)

    def execute(self) -> RunResult:
        from distsketch.diagnostics import PeakMemory

        t_run = time.perf_counter()
        if self.spec.targets_from_input:
            self.say(f"targets: the labels {self.spec.targets} stored with the input (targets: "
                     "in the spec chooses others)")
        with self.storage.locked(self.wait, self.inputs, self.force_unlock), PeakMemory() as peak, \
                dask.config.set({DEVICE_KEY: self.spec.device or current_device()}):
            return self._locked(t_run, peak)

    def _classes(self, method: MethodAdapter, state: dict | None, n: int) -> Any:
        """A classifier's labels: kept from the state, else from the spec, else a pre-pass over
        the targets of rows ``[0, n)`` (sorted as scikit-learn's ``classes_``)."""
        import numpy as np

        if state is not None and isinstance(state.get("classes"), dict):
            stored = state["classes"]
            try:
                dtype = np.dtype(str(stored["dtype"]))
                values = np.asarray(stored["values"], dtype=dtype)
            except (KeyError, TypeError, ValueError) as exc:
                raise WorkflowError(f"the workflow state {self.state_dir} holds unreadable classes "
                                    f"({exc}); rerun with --full to rebuild it.") from exc
            if dtype.kind not in "biufU" or values.ndim != 1:
                raise WorkflowError(f"the workflow state {self.state_dir} holds classes of dtype "
                                    f"{dtype}; rerun with --full to rebuild it.")
            return values
        if method.classes is not None:
            return method.classes
        if self.spec.targets is None:
            raise ConfigError(f"workflow spec: {method.name} is a classifier and needs targets: "
                              "add targets: (a Zarr array of labels, row-aligned with the input) "
                              "to the spec.")
        from distsketch.io.arrays.targets import open_targets
        from distsketch.workflow.spec_targets import IntegerLabels

        # class numbers stored as floats (a CSV's 1..7) are the integers 1..7
        targets = IntegerLabels(open_targets(self.spec.targets, n, allow_extra_rows=True,
                                             storage_options=self.spec.storage_options))
        classes = targets.distinct(n)
        if classes.size < 2:
            raise WorkflowError(f"targets {self.spec.targets} hold {classes.size} distinct label(s) "
                                f"in rows 0..{n} ({classes.tolist()}); a classifier needs at least "
                                "two.")
        self.say(f"classes learned from the targets: {classes.tolist()}")
        return classes

    def _locked(self, t_run: float, peak: Any) -> RunResult:
        """The run once the output folder is locked and recovered: one named step after another,
        each handing the next what it needs."""
        from distsketch.cluster import connect

        found = self._find()
        if found.up_to_date():
            msg = (f"nothing new: all {found.n} rows of {self.spec.input} were already consumed; "
                   f"the result in {self.result_dir} is up to date.")
            return RunResult("up-to-date", found.n, found.n, 0, self.result_dir, found.manifest, msg)
        plan = self._plan(found)
        with connect(self.spec.cluster if self.cluster is None else self.cluster,
                     timeout=self.connect_timeout, log=self.say, dashboard=self.dashboard) as client, \
                self.storage.result_writer(self.inputs) as tmp, record_plans() as plans:
            scaler, Xs = self._preprocess(plan, found.X)
            perf_ctx, perf_file = performance_report(client, self.storage.scratch)
            with perf_ctx:
                fitted = self._fit(plan, found.X, Xs, scaler)
                self.hooks.before_outputs(tmp.hook_arg)
                written = self._write_outputs(tmp, Xs, fitted.model, scaler, found.n)
            info = self._info(plan, found.X, fitted, written)
            self._add_run_facts(info, plans, perf_file, tmp, t_run, peak)
            self._finish(tmp, info, fitted.model, written.errors)
        msg = (f"{plan.status}: consumed rows {plan.before}..{found.n} of {self.spec.input} "
               f"({fitted.segments} new segment(s)); result committed to {self.result_dir}.")
        return RunResult(plan.status, plan.before, found.n, fitted.segments, self.result_dir, info,
                         msg)

    def _find(self) -> _Found:
        """Open the input, read and check the checkpoint, read the committed result's manifest."""
        spec = self.spec
        t0 = time.perf_counter()
        X = self._open()
        n = int(X.shape[0])
        if n == 0:
            raise WorkflowError(f"input {spec.input} has no rows; nothing to fit.")
        state = None if self.full else self.state.read()
        method = MethodAdapter(spec.method.name, spec.method.params, spec.seed)
        if state is not None:
            check_state(state, spec.input, self.key, X, spec.seed, self.state)
        # --full rebuilds the result, so a damaged manifest of the old one is not read
        manifest = None if self.full else self.storage.read_result_manifest()
        self.timings["open"] = time.perf_counter() - t0
        return _Found(X, method, state, manifest, manifest is not None
                      and manifest.get("spec_key") == self.key)

    def _plan(self, found: _Found) -> _Plan:
        """What the run folds (from the checkpoint, or from row 0) and the status it reports;
        the checkpoint and a classifier's labels are loaded into the method."""
        state, done, method, n = found.state, found.done, found.method, found.n
        before = int(found.manifest["rows"]["after"]) if found.same and state is not None else 0  # type: ignore[index]
        if state is not None and not method.incremental and done < n:
            why = ("has no partial_fit" if not hasattr(method.cls, "partial_fit")
                   else "cannot merge new rows into a result equal to a refit")
            self.say(f"{method.name} {why}: refitting on all {n} rows")
            state, done = None, 0
        status = ("full" if state is None else "resumed" if state.get("in_progress")
                  else "refreshed" if done == n else "incremental")
        if state is not None:
            self.state.load(method)
        if method.needs_classes:
            t0 = time.perf_counter()
            method.classes = self._classes(method, state, n)
            self.timings["classes"] = time.perf_counter() - t0
        return _Plan(method, state, done, status, before)

    def _preprocess(self, plan: _Plan, X: Any) -> tuple[dict | None, Any]:
        """The scaler (learned, or kept from the state) and the input the method sees; a new
        state's ``gamma: median`` is chosen from a row sample of it."""
        t0 = time.perf_counter()
        if not self.spec.preprocessing.standardize:
            scaler = None
        elif plan.state is None:
            scaler = learn_scaler(X)
        else:
            scaler = plan.state["scaler"]
        self.timings["preprocess"] = time.perf_counter() - t0
        Xs = apply_scaler(X, scaler)
        if plan.state is None:  # gamma: median, from a row sample of what the method sees
            plan.method.resolve_data_driven(Xs, self.spec.seed, self.say)
        return scaler, Xs

    def _fit(self, plan: _Plan, X: Any, Xs: Any, scaler: dict | None) -> _Fitted:
        """Fold the new segments into the state (a checkpoint each) and finalize the model."""
        spec, method = self.spec, plan.method
        meta = {
            "version": STATE_VERSION, "spec_key": self.key, "input": spec.input,
            "n_features": int(X.shape[1]), "dtype": str(X.dtype), "segment_rows": spec.segment_rows,
            "seed": spec.seed, "scaler": scaler,
        }
        if method.classes is not None:
            meta["classes"] = {"values": method.classes.tolist(), "dtype": method.classes.dtype.str}
        t0 = time.perf_counter()
        in_flight = segments_in_flight(spec.segments_in_flight)
        folder = SegmentFolder(method, spec, self.state, self.hooks, self.say,
                               in_flight=in_flight, check_lock=self.storage.check_held)
        segments = folder.fold(X, Xs, plan.done, meta)
        self.timings["fit"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        model = method.model()
        self.timings["finalize"] = time.perf_counter() - t0
        return _Fitted(model, segments, in_flight)

    def _info(self, plan: _Plan, X: Any, fitted: _Fitted, written: _Written) -> dict:
        """The manifest's content, less what is known only at the end."""
        from distsketch.io import fingerprint

        n, d = int(X.shape[0]), int(X.shape[1])
        model = fitted.model
        return {
            "kind": "workflow-run", "status": plan.status, "spec": self.spec.as_dict(),
            "spec_key": self.key, "seed": self.spec.seed,
            "input_fingerprint": fingerprint(X, path=self.spec.input), "input_shape": [n, d],
            "rows": {"before": plan.before, "after": n, "new": n - plan.before},
            "segments": fitted.segments, "versions": versions(), "timings": self.timings,
            "kernel_errors": written.errors, "performance_report": None,
            "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
            "fit": written.fit, "resolved_params": plan.method.resolved,
            "segments_in_flight": fitted.in_flight,
        }

    def _add_run_facts(self, info: dict, plans: list, perf_file: Path | None, tmp: Any,
                       t_run: float, peak: Any) -> None:
        """Block plans, the performance report, total time and peak memory, into ``info``."""
        info["block_plans"] = plan_summary(plans)
        for line in dict.fromkeys(str(p) for p in plans):
            self.say(f"block plan {line}")
        if perf_file is not None and perf_file.exists():
            tmp.add(perf_file, "dask-performance.html")
            info["performance_report"] = "dask-performance.html"
        self.timings["total"] = time.perf_counter() - t_run
        peak.sample_now()  # while the cluster is still connected
        info["peak_memory_bytes"] = int(peak.peak_bytes)
        info["workers_peak_memory_bytes"] = peak.workers_peak_bytes  # None without a cluster

    def _finish(self, tmp: Any, info: dict, model: Any, errors: dict) -> None:
        """Report, then the manifest last: it marks the result complete."""
        try:
            if self.spec.outputs.report:
                write_report(tmp.staging, self.spec, info, spectrum(model), errors,
                             self.spec.outputs.report)
            tmp.upload_staged()
            info["files"] = tmp.files()
            self.hooks.before_commit(tmp.hook_arg)
            self.storage.check_held()
            tmp.write_manifest(info | {"finished_at": time.time()})
        except OSError as exc:
            raise store_error(exc, f"the result {self.result_dir}") from exc

    def _write_outputs(self, tmp: Any, Xs: Any, model: Any, scaler: dict | None,
                       n: int) -> _Written:
        """Model, features, predictions and the kernel error estimate into the uncommitted result."""
        from distsketch.io import write_array
        from distsketch.io.model.store import save_model
        from distsketch.workflow.predictions import feature_output, write_predictions
        from distsketch.workflow.preprocess import with_preprocessing

        out, timings = self.spec.outputs, self.timings
        try:
            if out.model:
                t0 = time.perf_counter()
                path, so = tmp.target(out.model, small=True)
                save_model(with_preprocessing(model, scaler, n), path,
                           extra={"spec_key": self.key, "rows": n},
                           **({} if so is None else {"storage_options": so}))
                timings["save_model"] = time.perf_counter() - t0
            if feature_output(self.spec, model):
                t0 = time.perf_counter()
                Z = model.transform(Xs)
                if Z.ndim == 1:
                    Z = Z[:, None]
                path, so = tmp.target(out.features)
                write_array(Z, path, compressor=out.features_compressor,
                            manifest={"rows": n, "spec_key": self.key}, progress=False,
                            **({} if so is None else {"storage_options": so}))
                timings["features"] = time.perf_counter() - t0
            fit = write_predictions(tmp, self.spec, model, Xs, n, timings, self.key)
        except OSError as exc:
            raise store_error(exc, f"the outputs under {self.out_dir}") from exc
        t0 = time.perf_counter()
        errors = kernel_errors(self.spec, Xs, model)
        timings["kernel_error"] = time.perf_counter() - t0
        return _Written(errors, fit)

    def dry_run(self) -> RunResult:
        """What :meth:`execute` would do, computing and writing nothing."""
        spec = self.spec
        X = self._open()
        n = int(X.shape[0])
        state = None if self.full else self.state.read()
        done = int(state["rows_done"]) if state else 0
        if state is not None and state.get("spec_key") != self.key:
            plan = "the stored state is from a different spec: the run would refuse (use --full)"
        elif done >= n and state is not None:
            man = self.storage.read_result_manifest()
            plan = ("nothing new: the run would do nothing"
                    if man and man.get("rows", {}).get("after") == n
                    else "all rows consumed: the run would refresh the outputs")
        else:
            seg = spec.segment_rows
            k = len(segment_bounds(done, n, seg))
            plan = f"would consume rows {done}..{n} in {k} segment(s) of up to {seg} rows"
        msg = (f"dry run: input {spec.input} has shape {tuple(X.shape)}; method {spec.method.name}; "
               f"{plan}; outputs in {self.result_dir}.")
        return RunResult("dry-run", done, n, 0, self.result_dir, None, msg)
