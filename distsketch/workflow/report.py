"""The run report: ``report.md`` (+ ``report.png``), kernel error estimate, versions."""

from __future__ import annotations

import contextlib
import html
import importlib
import json
import platform
import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from distsketch.errors import DistsketchError
from distsketch.workflow.spec import WorkflowSpec

__all__ = ["kernel_errors", "md_text", "performance_report", "spectrum", "versions",
           "write_report"]


# Markdown punctuation that could start markup (emphasis, links, headings, tables, code)
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()|~#])")


def md_text(value: Any) -> str:
    """``value`` as inert Markdown text: HTML-escaped, Markdown punctuation backslashed.

    A name such as ``<script>`` or ``a|b`` from a spec is shown as written, not
    rendered as HTML, a link or a table cell; newlines become spaces so that a
    value cannot start a heading or a new table row.
    """
    text = " ".join(str(value).splitlines())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=True))


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
        if value is not None:
            kw[key] = value
    return kernel, kw


def kernel_errors(spec: WorkflowSpec, Xs: Any, model: Any) -> dict:
    """Kernel approximation errors on a row sample, or why there are none.

    Notes
    -----
    Reads ``report.n_sample`` rows and forms two n_sample² kernel blocks.
    """
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


def _plot(folder: Path, values: np.ndarray, name: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.15, top=0.9)
    vals = np.clip(values[: min(values.size, 200)], 1e-300, None)
    ax.semilogy(np.arange(1, vals.size + 1), vals, marker=".")
    ax.set_xlabel("index")
    ax.set_ylabel("eigenvalue")
    ax.set_title("kernel eigen-spectrum estimate")
    png = Path(name).with_suffix(".png").name
    fig.savefig(folder / png, dpi=100)
    plt.close(fig)
    return png


def _md_url(name: str) -> str:
    # a relative link to a file written beside the report; percent-encoded
    from urllib.parse import quote

    return quote(str(name), safe="/.-_")


def write_report(folder: Path, spec: WorkflowSpec, info: dict[str, Any], values: np.ndarray | None,
                 errors: dict[str, Any], name: str) -> list[str]:
    """Write ``name`` (Markdown) and, with matplotlib, its eigen-spectrum PNG; return the files."""
    files = []
    png = _plot(folder, values, name) if values is not None and spec.report.png else None
    if png:
        files.append(png)
    rows = info["rows"]
    # every string that came from the spec or an exception is escaped; numbers are ours
    lines = [f"# distsketch run report: {md_text(spec.name or spec.method.name)}", "",
             f"- status: {info['status']}",
             f"- input: {md_text(spec.input)} shape {info['input_shape']}",
             f"- rows consumed: {rows['before']} -> {rows['after']} "
             f"({rows['new']} new, {info['segments']} segment(s) this run)",
             f"- method: {md_text(spec.method.name)} "
             f"{md_text(json.dumps(spec.method.params, default=str))}",
             f"- seed: {spec.seed}",
             f"- peak memory: {info['peak_memory_bytes'] / 2**20:.1f} MiB (process tree)", "",
             "## Time per stage", "", "| stage | seconds |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.3f} |" for k, v in info["timings"].items()]
    lines += ["", "## Kernel error estimate", ""]
    if errors.get("available"):
        lines += [f"On {errors['n_sample']} sampled rows (kernel "
                  f"{md_text(errors['kernel'])}):", "",
                  "| measure | value |", "| --- | ---: |"]
        lines += [f"| {k} | {errors[k]:.4g} |" for k in ("spectral", "frobenius", "relative_frobenius")]
    else:
        lines.append(f"not computed: {md_text(errors.get('reason', 'disabled'))}")
    lines += ["", "## Eigen-spectrum", ""]
    if values is not None:
        top = ", ".join(f"{v:.4g}" for v in values[:10])
        lines.append(f"Top eigenvalues: {top}")
        if png:
            lines += ["", f"![eigen-spectrum]({_md_url(png)})"]
    else:
        lines.append("the model exposes no eigenvalues.")
    if info.get("performance_report"):
        perf = info["performance_report"]
        lines += ["", f"Dask performance report: [{md_text(perf)}]({_md_url(perf)})"]
    (folder / name).write_text("\n".join(lines) + "\n")
    files.append(name)
    return files
