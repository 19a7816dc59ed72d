"""The runner: lock, recover, fold new segments, write outputs, commit.

Layout of ``outputs.dir``::

    .lock                 fcntl lock: one run at a time per output
    state/                checkpoint: state.json + summary/ (committed per segment)
    result/               model.zarr, features.zarr, report.md, report.png,
                          dask-performance.html, distsketch-manifest.json (last)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from distsketch.errors import ConfigError, StoreError, WorkflowError
from distsketch.workflow.hooks import WorkflowHooks
from distsketch.workflow.methods import MethodAdapter
from distsketch.workflow.preprocess import apply_scaler, learn_scaler
from distsketch.workflow.report import kernel_errors, performance_report, spectrum, versions, write_report
from distsketch.workflow.segments import SegmentFolder, segment_bounds
from distsketch.workflow.spec import WorkflowSpec, load_workflow_spec
from distsketch.workflow.state import (
    STATE_VERSION,
    check_state,
    load_checkpoint,
    read_state,
    store_error,
)

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
    run = _Run(spec=load_workflow_spec(spec), cluster=cluster, full=full, wait=wait,
               connect_timeout=connect_timeout,
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
class _Run:
    """One run of a spec: its options, folders and the steps of :func:`run_workflow`."""

    spec: WorkflowSpec
    cluster: Any
    full: bool
    wait: bool | float
    connect_timeout: float
    say: Callable[[str], None]
    hooks: WorkflowHooks

    def __post_init__(self) -> None:
        self.key = self.spec.key()
        self.out_dir = Path(self.spec.outputs.dir)
        self.state_dir = self.out_dir / "state"
        self.result_dir = self.out_dir / "result"
        self.timings: dict[str, float] = {}

    def _open(self) -> Any:
        from distsketch.io import open_array

        return open_array(self.spec.input, block_rows=self.spec.block_rows)

    def execute(self) -> RunResult:
        from distsketch.diagnostics import PeakMemory
        from distsketch.io.atomic import recover
        from distsketch.io.locks import folder_lock

        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise StoreError(f"outputs.dir {self.out_dir} exists and is not a folder; choose another "
                             "path.")
        self._check_foreign()  # before anything is created in the folder
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise store_error(exc, f"the output folder {self.out_dir}") from exc
        t_run = time.perf_counter()
        with folder_lock(self.out_dir, self.wait), PeakMemory() as peak:
            for p in (self.state_dir, self.result_dir):
                recover(p)
            self._check_foreign()  # again, now that a killed swap is repaired
            for stale in self.out_dir.glob(".dask-performance-*.html"):
                stale.unlink(missing_ok=True)
            return self._locked(t_run, peak)

    def _classes(self, method: MethodAdapter, state: dict | None, n: int) -> Any:
        """A classifier's labels: kept from the state, else from the spec, else a pre-pass.

        The pre-pass reads the targets of rows ``[0, n)`` blockwise on the driver
        (no pass over X) and sorts the labels as :func:`numpy.unique` does, as
        scikit-learn's ``classes_``.
        """
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
        from distsketch.io.targets import open_targets

        targets = open_targets(self.spec.targets, n, allow_extra_rows=True)
        classes = targets.distinct(n)
        if classes.size < 2:
            raise WorkflowError(f"targets {self.spec.targets} hold {classes.size} distinct label(s) "
                                f"in rows 0..{n} ({classes.tolist()}); a classifier needs at least "
                                "two.")
        self.say(f"classes learned from the targets: {classes.tolist()}")
        return classes

    def _check_foreign(self) -> None:
        """Refuse an outputs.dir whose state/ or result/ distsketch did not write, or one
        that overlaps the input: the run replaces both folders."""
        from distsketch.io.safety import check_not_input, check_replaceable

        inputs = [self.spec.input, self.spec.targets]
        check_not_input(self.out_dir, inputs)
        for p in (self.state_dir, self.result_dir):
            try:
                check_replaceable(p, inputs=inputs)
            except StoreError as exc:
                raise StoreError(f"outputs.dir {self.out_dir} holds {p.name}/, which distsketch "
                                 f"did not write: {exc} A run replaces {p.name}/; nothing was "
                                 "changed.") from None

    def _locked(self, t_run: float, peak: Any) -> RunResult:
        """The run once the output folder is locked and recovered."""
        from distsketch.cluster import connect
        from distsketch.io import read_manifest

        spec, timings = self.spec, self.timings
        t0 = time.perf_counter()
        X = self._open()
        n, d = int(X.shape[0]), int(X.shape[1])
        if n == 0:
            raise WorkflowError(f"input {spec.input} has no rows; nothing to fit.")
        state = None if self.full else read_state(self.state_dir)
        method = MethodAdapter(spec.method.name, spec.method.params, spec.seed)
        if state is not None:
            check_state(state, spec.input, self.key, X, spec.seed, self.state_dir)
        done = int(state["rows_done"]) if state else 0
        # --full rebuilds the result, so a damaged manifest of the old one is not read
        manifest = (read_manifest(self.result_dir)
                    if self.result_dir.exists() and not self.full else None)
        same = manifest is not None and manifest.get("spec_key") == self.key
        timings["open"] = time.perf_counter() - t0
        if state is not None and done == n and same and manifest["rows"]["after"] == n:  # type: ignore[index]
            msg = (f"nothing new: all {n} rows of {spec.input} were already consumed; the result in "
                   f"{self.result_dir} is up to date.")
            return RunResult("up-to-date", n, n, 0, self.result_dir, manifest, msg)
        before = int(manifest["rows"]["after"]) if same and state is not None else 0  # type: ignore[index]
        if state is not None and not method.incremental and done < n:
            why = ("has no partial_fit" if not hasattr(method.cls, "partial_fit")
                   else "cannot merge new rows into a result equal to a refit")
            self.say(f"{method.name} {why}: refitting on all {n} rows")
            state, done = None, 0
        status = ("full" if state is None else "resumed" if state.get("in_progress")
                  else "refreshed" if done == n else "incremental")
        if state is not None:
            load_checkpoint(method, self.state_dir)
        if method.needs_classes:
            t0 = time.perf_counter()
            method.classes = self._classes(method, state, n)
            timings["classes"] = time.perf_counter() - t0
        with connect(spec.cluster if self.cluster is None else self.cluster,
                     timeout=self.connect_timeout) as client, self._result_writer() as tmp:
            t0 = time.perf_counter()
            if not spec.preprocessing.standardize:
                scaler = None
            elif state is None:
                scaler = learn_scaler(X)
            else:
                scaler = state["scaler"]
            timings["preprocess"] = time.perf_counter() - t0
            Xs = apply_scaler(X, scaler)
            meta = {
                "version": STATE_VERSION, "spec_key": self.key, "input": spec.input, "n_features": d,
                "dtype": str(X.dtype), "segment_rows": spec.segment_rows, "seed": spec.seed,
                "scaler": scaler,
            }
            if method.classes is not None:
                meta["classes"] = {"values": method.classes.tolist(),
                                   "dtype": method.classes.dtype.str}
            perf_ctx, perf_file = performance_report(client, self.out_dir)
            with perf_ctx:
                t0 = time.perf_counter()
                folder = SegmentFolder(method, spec, self.state_dir, self.hooks, self.say)
                segments = folder.fold(X, Xs, done, meta)
                timings["fit"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                model = method.model()
                timings["finalize"] = time.perf_counter() - t0
                self.hooks.before_outputs(tmp)
                errors = self._write_outputs(tmp, Xs, model, n)
            info = self._info(status, X, before, segments, errors, model)
            if perf_file is not None and perf_file.exists():
                os.replace(perf_file, tmp / "dask-performance.html")
                info["performance_report"] = "dask-performance.html"
            timings["total"] = time.perf_counter() - t_run
            info["peak_memory_bytes"] = int(peak.peak_bytes)
            self._finish(tmp, info, model, errors)
        msg = (f"{status}: consumed rows {before}..{n} of {spec.input} ({segments} new segment(s)); "
               f"result committed to {self.result_dir}.")
        return RunResult(status, before, n, segments, self.result_dir, info, msg)

    def _info(self, status: str, X: Any, before: int, segments: int, errors: dict,
              model: Any) -> dict:
        """The manifest's content, less what is known only at the end."""
        from distsketch.io import fingerprint

        n, d = int(X.shape[0]), int(X.shape[1])
        return {
            "kind": "workflow-run", "status": status, "spec": self.spec.as_dict(),
            "spec_key": self.key, "seed": self.spec.seed,
            "input_fingerprint": fingerprint(X, path=self.spec.input), "input_shape": [n, d],
            "rows": {"before": before, "after": n, "new": n - before}, "segments": segments,
            "versions": versions(), "timings": self.timings, "kernel_errors": errors,
            "performance_report": None,
            "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
        }

    def _finish(self, tmp: Path, info: dict, model: Any, errors: dict) -> None:
        """Report, then the manifest last: it marks the result complete."""
        from distsketch.io import write_manifest

        try:
            if self.spec.outputs.report:
                write_report(tmp, self.spec, info, spectrum(model), errors, self.spec.outputs.report)
            info["files"] = sorted(p.name for p in tmp.iterdir())
            self.hooks.before_commit(tmp)
            write_manifest(tmp, info | {"finished_at": time.time()})
        except OSError as exc:
            raise store_error(exc, f"the result {self.result_dir}") from exc

    @contextlib.contextmanager
    def _result_writer(self) -> Iterator[Path]:
        """atomic_dir for the result, with OS errors turned into StoreError."""
        from distsketch.io.atomic import atomic_dir

        try:
            with atomic_dir(self.result_dir, overwrite=True,
                            inputs=[self.spec.input, self.spec.targets]) as tmp:
                yield tmp
        except OSError as exc:
            raise store_error(exc, f"the result {self.result_dir}") from exc

    def _write_outputs(self, tmp: Path, Xs: Any, model: Any, n: int) -> dict:
        """Model, features and kernel error estimate into the uncommitted result folder."""
        from distsketch.io import write_array
        from distsketch.io.model import save_model

        out, timings = self.spec.outputs, self.timings
        try:
            if out.model:
                t0 = time.perf_counter()
                save_model(model, tmp / out.model, extra={"spec_key": self.key, "rows": n})
                timings["save_model"] = time.perf_counter() - t0
            if out.features and (hasattr(model, "transform") or hasattr(model, "predict")):
                t0 = time.perf_counter()
                # supervised models write their predictions, the others their embedding
                Z = model.transform(Xs) if hasattr(model, "transform") else model.predict(Xs)
                if Z.ndim == 1:
                    Z = Z[:, None]
                write_array(Z, tmp / out.features, compressor=out.features_compressor,
                            manifest={"rows": n, "spec_key": self.key}, progress=False)
                timings["features"] = time.perf_counter() - t0
        except OSError as exc:
            raise store_error(exc, f"the outputs under {tmp.parent}") from exc
        t0 = time.perf_counter()
        errors = kernel_errors(self.spec, Xs, model)
        timings["kernel_error"] = time.perf_counter() - t0
        return errors

    def dry_run(self) -> RunResult:
        """What :meth:`execute` would do, computing and writing nothing."""
        from distsketch.io import read_manifest

        spec = self.spec
        X = self._open()
        n = int(X.shape[0])
        state = None if self.full else read_state(self.state_dir)
        done = int(state["rows_done"]) if state else 0
        if state is not None and state.get("spec_key") != self.key:
            plan = "the stored state is from a different spec: the run would refuse (use --full)"
        elif done >= n and state is not None:
            man = read_manifest(self.result_dir) if self.result_dir.exists() else None
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
