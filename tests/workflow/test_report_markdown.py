"""report.md shows plain text as written and names from a spec as text, never as markup.

Checked on the Markdown source and on its rendering by a CommonMark renderer
with GitHub's tables and strikethrough (markdown-it-py).
"""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from distsketch.workflow import load_workflow_spec
from distsketch.workflow.report import write_report
from distsketch.workflow.report_md import md_text

RENDER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
NO_ERRORS = {"available": False, "reason": "disabled in the spec"}
# what a name must not turn into: a link, an image, HTML, emphasis, code, strikethrough
MARKUP = re.compile(r"<(a|img|script|em|strong|code|s|del|b)\b")


def report(tmp_path, name: str, params: dict, shape: list[int], stage: str = "fit") -> str:
    spec = load_workflow_spec({"name": name, "input": str(tmp_path / "X.zarr"),
                               "method": {"name": "StreamingKernelPCA", "params": params},
                               "outputs": {"dir": str(tmp_path / "out")},
                               "report": {"png": False}})
    info = {"status": "full", "input_shape": shape,
            "rows": {"before": 0, "after": shape[0], "new": shape[0]}, "segments": 1,
            "timings": {stage: 0.5}, "peak_memory_bytes": 2**20, "versions": {}}
    write_report(tmp_path, spec, info, None, NO_ERRORS, "report.md")
    return (tmp_path / "report.md").read_text()


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.mark.parametrize("plain", ["[16000, 16]", "(letters, v2)", '{"gamma": "median"}',
                                   "n_components", "a # b", "x [y] z"])
def test_plain_text_is_not_escaped(plain: str) -> None:
    assert md_text(plain) == plain


def test_report_shows_shape_params_and_name_as_written(tmp_path) -> None:
    md = report(tmp_path, "letters (v2)", {"n_components": 3, "gamma": "median"}, [16000, 16])
    assert md.splitlines()[0] == "# distsketch run report: letters (v2)"
    assert "shape [16000, 16]" in md
    assert '- method: StreamingKernelPCA {"n_components": 3, "gamma": "median"}' in md
    rendered = RENDER.render(md)
    assert "shape [16000, 16]" in text_of(rendered) and "\\" not in text_of(rendered)


EVIL = [
    "[x](javascript:alert(1))",
    "![i](http://example.com/i.png)",
    "<img src=x onerror=alert(1)>",
    "<!-- hidden",
    "*em* and **strong**",
    "_em_ and __strong__",
    "~~struck~~ and ~one~",
    "`code`",
    "a | b",
    "[ref][r] and [r]: http://example.com",
    "unbalanced ] and [",
    "&lt;b&gt; &#60;i&#62;",
    "back\\slash\\*",
]


@pytest.mark.parametrize("name", EVIL)
def test_names_from_a_spec_render_as_text(tmp_path, name: str) -> None:
    md = report(tmp_path, name, {"n_components": 3}, [10, 2], stage=name)
    rendered = RENDER.render(md)
    title = re.search(r"<h1>(.*?)</h1>", rendered, re.S)
    assert title is not None
    assert not MARKUP.search(title.group(1)), title.group(1)
    assert text_of(title.group(1)) == f"distsketch run report: {name}"
    # the stage's row of the time table: two cells, the first the name as written
    rows = re.findall(r"<tr>(.*?)</tr>", rendered, re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, re.S) for r in rows]
    stage_rows = [c for c in cells if c and c[-1] == "0.500"]
    assert len(stage_rows) == 1 and len(stage_rows[0]) == 2, stage_rows
    assert not MARKUP.search(stage_rows[0][0]) and text_of(stage_rows[0][0]) == name
    # the only link is the report's own, to report.html beside it
    assert re.findall(r"<a\b[^>]*>", rendered) == ['<a href="report.html">']
