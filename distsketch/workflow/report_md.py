"""The Markdown run report (``report.md``)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

import numpy as np

from distsketch.io.commit.jsonable import json_default
from distsketch.workflow.report_data import fit_line, format_bytes, peak_rows, plan_table

__all__ = ["markdown_report", "md_text", "md_url"]

# Markdown punctuation that could start markup (emphasis, links, headings, tables, code)
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()|~#])")
# what Markdown would read as HTML: a tag or comment ("<"), a character reference ("&amp;")
_MD_HTML = re.compile(r"<|&(?=#?[0-9A-Za-z]+;)")
# inside a line, what could make markup of text (CommonMark and GitHub's tables and
# strikethrough): a backslash escape, code, "*" emphasis, strikethrough, a table cell's end,
# HTML, and "_" emphasis (an underscore between two letters or digits cannot open or close it)
_MD_ACTIVE = re.compile(r"[\\`*~|<]|&#?[0-9A-Za-z]+;|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# a link, an image or a reference: a closing bracket followed by "(", "[" or ":"
_MD_LINK = re.compile(r"\][(\[:]")


def _inert(text: str) -> bool:
    """Whether ``text``, placed inside a line, reads as itself in Markdown (balanced brackets
    not followed by ``(``, ``[`` or ``:`` are plain text; ``{}()#`` are markup only at the
    start of a line, where no value is placed)."""
    if _MD_ACTIVE.search(text) or _MD_LINK.search(text):
        return False
    depth = 0
    for char in text:  # an unbalanced bracket could pair with the report's own
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def md_text(value: Any) -> str:
    """``value`` as inert Markdown text inside a line, shown as written (quotes stay quotes).

    Text that could make markup has its Markdown punctuation backslashed, and ``<`` and a
    character reference's ``&`` become entities (not every renderer reads ``\\<`` as an
    escape); newlines become spaces, so a value cannot start a heading or a table row.
    """
    text = " ".join(str(value).splitlines())
    if _inert(text):
        return text
    text = _MD_HTML.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_url(name: str) -> str:
    """A relative link to a file written beside the report, percent-encoded."""
    return quote(str(name), safe="/.-_")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(md_text(h) for h in headers) + " |",
           "| " + " | ".join("---" for _ in headers) + " |"]
    out += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in rows]
    return out


def markdown_report(spec: Any, info: dict[str, Any], values: np.ndarray | None,
                    errors: dict[str, Any], png: str | None, no_plot: str) -> str:
    """The report's Markdown text from the run's manifest content ``info``, the eigenvalues,
    the kernel errors and the plot file ``png`` (else why not: ``no_plot``); every string
    from the spec or an exception is escaped."""
    rows = info["rows"]
    lines = [f"# distsketch run report: {md_text(spec.name or spec.method.name)}", "",
             f"- status: {md_text(info['status'])}",
             f"- input: {md_text(spec.input)} shape {md_text(info['input_shape'])}",
             f"- rows consumed: {rows['before']} -> {rows['after']} "
             f"({rows['new']} new, {info['segments']} segment(s) this run)",
             f"- method: {md_text(spec.method.name)} "
             f"{md_text(json.dumps(spec.method.params, default=json_default))}",
             f"- seed: {spec.seed}"]
    for key, value in (info.get("resolved_params") or {}).items():
        lines.append(f"- {md_text(key)} = {value:.6g} (median heuristic on a row sample)")
    if info.get("html_report"):
        lines.append(f"- this report with plots: [{md_text(info['html_report'])}]"
                     f"({md_url(info['html_report'])})")
    lines += ["", "## Peak memory", "", "| measured | peak |", "| --- | ---: |"]
    lines += [f"| {md_text(what)} | {format_bytes(b)} |" for what, b in peak_rows(info)]
    fit = info.get("fit")
    if fit:
        lines += ["", "## Fit", "", md_text(fit_line(fit))]
        if fit.get("predictions"):
            lines += ["", f"Predictions of every row: [{md_text(fit['predictions'])}]"
                          f"({md_url(fit['predictions'])})"]
    lines += ["", "## Time per stage", "", "| stage | seconds |", "| --- | ---: |"]
    lines += [f"| {md_text(k)} | {v:.3f} |" for k, v in info["timings"].items()]
    headers, plan_rows, more = plan_table(info)
    if headers:
        lines += ["", "## Block plans", "", *_table(headers, plan_rows)]
        if more:
            lines += ["", f"({more} more plan(s) in the manifest)"]
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
        lines += ["", f"![eigen-spectrum]({md_url(png)})" if png else f"No plot: {md_text(no_plot)}."]
    elif fit:
        lines.append(f"not applicable: {md_text(spec.method.name)} predicts its targets (see Fit).")
    else:
        lines.append("the model exposes no eigenvalues.")
    if info.get("performance_report"):
        perf = info["performance_report"]
        lines += ["", f"Dask performance report: [{md_text(perf)}]({md_url(perf)})"]
    return "\n".join(lines) + "\n"
