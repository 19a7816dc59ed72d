"""The HTML run report (``report.html``): one self-contained file, readable offline.

No scripts, stylesheets, fonts or images are fetched: the style is inline
and the spectrum is an inline SVG.  Every string from the spec, the data or
an exception goes through :func:`html.escape`.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any
from urllib.parse import quote

import numpy as np

from distsketch.io.commit.jsonable import json_default
from distsketch.workflow.report_data import fit_line, format_bytes, peak_rows, plan_table
from distsketch.workflow.report_plot import spectrum_svg

__all__ = ["html_report"]

_STYLE = """
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _table(headers: list[str], rows: list[list[Any]],
           numeric: frozenset[int] | set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{_e(c)}</td>' if i in numeric else f"<td>{_e(c)}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _link(name: str) -> str:
    # a file written beside the report: a relative, percent-encoded link
    return f'<a href="{_e(quote(str(name), safe="/.-_"))}">{_e(name)}</a>'


def html_report(spec: Any, info: dict[str, Any], values: np.ndarray | None,
                errors: dict[str, Any]) -> str:
    """The report as one HTML document (same content as ``report.md``, plots inline)."""
    rows = info["rows"]
    title = f"distsketch run report: {spec.name or spec.method.name}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{_e(title)}</h1>", "<ul>",
           f"<li>status: {_e(info['status'])}</li>",
           f"<li>input: <code>{_e(spec.input)}</code> shape {_e(info['input_shape'])}</li>",
           f"<li>rows consumed: {rows['before']} &rarr; {rows['after']} ({rows['new']} new, "
           f"{info['segments']} segment(s) this run)</li>",
           f"<li>method: <code>{_e(spec.method.name)}</code> "
           f"<code>{_e(json.dumps(spec.method.params, default=json_default))}</code></li>",
           f"<li>seed: {_e(spec.seed)}</li>"]
    for key, value in (info.get("resolved_params") or {}).items():
        out.append(f"<li>{_e(key)} = {value:.6g} (median heuristic on a row sample)</li>")
    out.append("</ul>")

    out += ["<h2>Peak memory</h2>",
            _table(["measured", "peak"], [[w, format_bytes(b)] for w, b in peak_rows(info)], {1})]
    fit = info.get("fit")
    if fit:
        out += ["<h2>Fit</h2>", f"<p>{_e(fit_line(fit))}</p>"]
        if fit.get("predictions"):
            out.append(f"<p>Predictions of every row: {_link(fit['predictions'])}</p>")
    out += ["<h2>Time per stage</h2>",
            _table(["stage", "seconds"], [[k, f"{v:.3f}"] for k, v in info["timings"].items()],
                   {1})]
    headers, plan_rows, more = plan_table(info)
    if headers:
        out += ["<h2>Block plans</h2>", _table(headers, plan_rows)]
        if more:
            out.append(f"<p>({more} more plan(s) in the manifest)</p>")

    out.append("<h2>Kernel error estimate</h2>")
    if errors.get("available"):
        out += [f"<p>On {_e(errors['n_sample'])} sampled rows (kernel {_e(errors['kernel'])}):</p>",
                _table(["measure", "value"],
                       [[k, f"{errors[k]:.4g}"] for k in ("spectral", "frobenius",
                                                          "relative_frobenius")], {1})]
    else:
        out.append(f"<p>not computed: {_e(errors.get('reason', 'disabled'))}</p>")

    out.append("<h2>Eigen-spectrum</h2>")
    if values is not None:
        out.append(f"<p>Top eigenvalues: {_e(', '.join(f'{v:.4g}' for v in values[:10]))}</p>")
        svg = spectrum_svg(values)
        out.append(svg if svg else "<p>No plot: no positive eigenvalue to draw on a log "
                                   "scale.</p>")
    elif fit:
        out.append(f"<p>not applicable: {_e(spec.method.name)} predicts its targets (see Fit).</p>")
    else:
        out.append("<p>the model exposes no eigenvalues.</p>")
    if info.get("performance_report"):
        out.append(f"<p>Dask performance report: {_link(info['performance_report'])}</p>")
    versions = info.get("versions") or {}
    if versions:
        out += ["<h2>Versions</h2>", _table(["package", "version"],
                                            [[k, v] for k, v in versions.items()])]
    out.append("</body></html>")
    return "\n".join(out) + "\n"
