"""The run report: ``report.md``, ``report.html`` (+ ``report.png``), kernel errors, versions."""

from __future__ import annotations

import contextlib
import importlib
import platform
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import DistsketchError
from distsketch.workflow.spec import WorkflowSpec

__all__ = ["kernel_errors", "performance_report", "spectrum", "versions", "write_report"]


def versions() -> dict[str, str]:
    """Versions of Python and the packages a result depends on."""
    out = {"python": platform.python_version()}
    for mod in ("distsketch", "numpy", "scipy", "dask", "distributed", "zarr", "sklearn"):
        try:
            out[mod] = str(importlib.import_module(mod).__version__)
        except Exception:  # a version is informative only
            out[mod] = "unknown"
    return out


def spectrum(model: Any) -> np.ndarray | None:
    """Eigenvalue estimates (per row) a model exposes, descending; None if it has none."""
    sv = getattr(model, "singular_values_", None)
    n = getattr(model, "n_samples_seen_", None)
    if isinstance(sv, np.ndarray) and sv.ndim == 1 and sv.size and n:
        return np.asarray(sv, dtype=np.float64) ** 2 / n
    for attr in ("eigenvalues_", "explained_variance_", "lambdas_"):
        v = getattr(model, attr, None)
        if isinstance(v, np.ndarray) and v.ndim == 1 and v.size:
            return np.asarray(v, dtype=np.float64)
    return None


def _kernel_spec(spec: WorkflowSpec) -> tuple[Any, dict]:
    """Kernel settings the spec states; the rest come from the fitted model (metrics reads them)."""
    rep = spec.report
    params = spec.method.params
    kernel = rep.kernel if rep.kernel is not None else params.get("kernel")
    kw = {}
    for key in ("gamma", "degree", "coef0"):
        value = getattr(rep, key)
        if value is None:
            value = params.get(key)
        if value is not None and not isinstance(value, str):  # "median": the model's own value
            kw[key] = value
    return kernel, kw


def kernel_errors(spec: WorkflowSpec, Xs: Any, model: Any) -> dict:
    """Kernel approximation errors on ``report.n_sample`` rows (two n_sample² kernel blocks), or
    why there are none."""
    if not spec.report.kernel_error:
        return {"available": False, "reason": "disabled in the spec (report.kernel_error: false)"}
    if not hasattr(model, "kernel_approx"):
        return {"available": False, "reason": f"{type(model).__name__} has no kernel_approx"}
    kernel, kw = _kernel_spec(spec)
    if kernel is not None and not isinstance(kernel, str):
        return {"available": False, "reason": "the kernel is not a named kernel"}
    from distsketch.metrics import kernel_errors as _errors

    try:
        errs = _errors(Xs, model, kernel, n_sample=int(spec.report.n_sample),
                       random_state=spec.seed, **kw)
    except DistsketchError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, **errs}


def performance_report(client: Any, out_dir: Path) -> tuple[Any, Path | None]:
    """distributed's performance report context and its file (a no-op without a client or bokeh)."""
    if client is None:
        return contextlib.nullcontext(), None
    try:
        import bokeh  # noqa: F401  (performance_report needs it)
        from distributed import performance_report as _report
    except ImportError:
        return contextlib.nullcontext(), None
    path = out_dir / f".dask-performance-{uuid.uuid4().hex[:8]}.html"
    return _report(filename=str(path)), path


def write_report(folder: Path, spec: WorkflowSpec, info: dict[str, Any], values: np.ndarray | None,
                 errors: dict[str, Any], name: str) -> list[str]:
    """Write the run report into ``folder``: ``name`` (Markdown), its ``.html`` twin and the
    spectrum PNG (needs matplotlib); returns the files written.

    ``info`` (the manifest so far) gains ``"html_report"`` and, for a spectrum without a
    PNG, ``"plot"`` (why not).
    """
    from distsketch.workflow.report_html import html_report
    from distsketch.workflow.report_md import markdown_report
    from distsketch.workflow.report_plot import spectrum_png

    files = []
    png, no_plot = None, "disabled in the spec (report.png: false)"
    if values is not None and spec.report.png:
        data, no_plot = spectrum_png(values)
        if data is not None:
            png = Path(name).with_suffix(".png").name
            (folder / png).write_bytes(data)
            files.append(png)
    if values is not None and png is None:
        info["plot"] = no_plot
    html_name = Path(name).with_suffix(".html").name
    if html_name != name:
        info["html_report"] = html_name
        (folder / html_name).write_text(html_report(spec, info, values, errors), encoding="utf-8")
        files.append(html_name)
    (folder / name).write_text(markdown_report(spec, info, values, errors, png, no_plot),
                               encoding="utf-8")
    files.append(name)
    return files
