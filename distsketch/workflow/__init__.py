"""Pipeline runs from a YAML spec: incremental, resumable, atomic.

A workflow spec names an input Zarr array, optional targets and preprocessing,
a method (a distsketch estimator; with ``partial_fit`` it runs
incrementally), outputs, a cluster and a seed; :func:`run_workflow` runs it.

Modules: :mod:`~distsketch.workflow.spec` (the spec dataclasses and their
checks), :mod:`~distsketch.workflow.methods` (the estimator adapter),
:mod:`~distsketch.workflow.segments` (folding the global row grid),
:mod:`~distsketch.workflow.window` (segment summaries in flight, merged in
order), :mod:`~distsketch.workflow.state` (checkpoints),
:mod:`~distsketch.workflow.storage` (lock, checkpoints and result in a local
folder or on an object store),
:mod:`~distsketch.workflow.preprocess` (frozen standardisation; a
standardised model is saved as a Pipeline),
:mod:`~distsketch.workflow.predictions` (predictions and the fit metric of a
supervised method), :mod:`~distsketch.workflow.report` (the run report and
kernel errors) with :mod:`~distsketch.workflow.report_data` (what the
reports show), :mod:`~distsketch.workflow.report_md` (``report.md``),
:mod:`~distsketch.workflow.report_html` (``report.html``, readable offline)
and :mod:`~distsketch.workflow.report_plot` (the spectrum plot),
:mod:`~distsketch.workflow.hooks` (instrumentation points) and
:mod:`~distsketch.workflow.runner` (the run itself).
"""

from distsketch.workflow.hooks import Segment, WorkflowHooks
from distsketch.workflow.runner import RunResult, run_workflow
from distsketch.workflow.spec import WorkflowSpec, load_workflow_spec

__all__ = [
    "RunResult",
    "Segment",
    "WorkflowHooks",
    "WorkflowSpec",
    "load_workflow_spec",
    "run_workflow",
]
