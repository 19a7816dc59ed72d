"""The run report: the spectrum plot's floor, matplotlib optional with its reason, an offline
HTML report with block plans, peak memory (client and workers) and the fit, all escaped."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from distsketch.workflow import load_workflow_spec
from distsketch.workflow.report import write_report
from distsketch.workflow.report_data import PLOT_FLOOR, peak_rows, plan_table, plot_values
from distsketch.workflow.report_plot import NO_MATPLOTLIB, spectrum_png, spectrum_svg

EVIL = "<script>alert(1)</script> | [x](javascript:alert(1))"


def make_spec(tmp, name="run", png=True):
    return load_workflow_spec({"name": name, "input": str(tmp / "X.zarr"),
                               "method": {"name": "StreamingKernelPCA",
                                          "params": {"n_components": 3}},
                               "outputs": {"dir": str(tmp / "out")},
                               "report": {"png": png}})


def make_info(**extra):
    return {"status": "full", "input_shape": [900, 5],
            "rows": {"before": 0, "after": 900, "new": 900}, "segments": 3,
            "timings": {"open": 0.01, "fit": 1.5}, "peak_memory_bytes": 300 * 2**20,
            "versions": {"numpy": "2.0"}, **extra}


NO_ERRORS = {"available": False, "reason": "disabled in the spec"}


# ------------------------------------------------------------------ the plot's floor


def test_plot_values_drop_zero_negative_and_rounding_level_values():
    values = np.array([2.0, 0.5, 1e-3, 3e-15, 1e-314, 0.0, -1e-4, np.nan])
    index, shown, dropped = plot_values(values)
    # 3e-15 < 1e-14 × 2: rounding noise; the subnormal 1e-314 stretched the old axis
    np.testing.assert_array_equal(index, [1, 2, 3])
    np.testing.assert_array_equal(shown, [2.0, 0.5, 1e-3])
    assert dropped == 5
    assert shown.min() >= PLOT_FLOOR * shown.max()


def test_svg_axis_starts_at_the_smallest_shown_decade():
    values = np.array([10.0, 1.0, 0.02, 0.0, 1e-314])
    svg = spectrum_svg(values)
    ticks = [int(t) for t in re.findall(r">1e(-?\d+)<", svg)]
    assert min(ticks) == -2 and max(ticks) == 1  # floor(log10 0.02), ceil(log10 10)
    assert "2 value(s) not shown" in svg
    # one marker per value shown, ordered as the values: y grows as the value falls
    ys = [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)]
    assert len(ys) == 3 and ys == sorted(ys)
    assert spectrum_svg(np.array([0.0, -1.0])) == ""


def test_png_y_axis_is_not_stretched_by_a_zero_eigenvalue():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    data, reason = spectrum_png(np.array([4.0, 1.0, 0.25, 0.0]))
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and reason == ""
    # the axes drawn for the same values: limits within a decade of the shown range
    index, shown, _ = plot_values(np.array([4.0, 1.0, 0.25, 0.0]))
    fig, ax = plt.subplots()
    ax.semilogy(index, shown)
    lo, hi = ax.get_ylim()
    plt.close(fig)
    assert 0.025 < lo <= 0.25 and 4.0 <= hi < 40.0


def test_without_matplotlib_the_report_says_why_and_html_still_plots(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    data, reason = spectrum_png(np.array([1.0, 0.5]))
    assert data is None and reason == NO_MATPLOTLIB
    info = make_info()
    files = write_report(tmp_path, make_spec(tmp_path), info, np.array([1.0, 0.5, 0.0]),
                         NO_ERRORS, "report.md")
    assert sorted(files) == ["report.html", "report.md"]
    md = (tmp_path / "report.md").read_text()
    assert "No plot: matplotlib is not installed (it is optional: pip install distsketch[plot])" in md
    assert info["plot"] == NO_MATPLOTLIB
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") == 1 and html.count("<circle") == 2


def test_report_png_written_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    files = write_report(tmp_path, make_spec(tmp_path), make_info(), np.array([1.0, 0.5, 0.0]),
                         NO_ERRORS, "report.md")
    assert sorted(files) == ["report.html", "report.md", "report.png"]
    assert (tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert "![eigen-spectrum](report.png)" in (tmp_path / "report.md").read_text()
    files = write_report(tmp_path, make_spec(tmp_path, png=False), make_info(), np.array([1.0]),
                         NO_ERRORS, "r2.md")
    assert "r2.png" not in files
    assert "No plot: disabled in the spec (report.png: false)" in (tmp_path / "r2.md").read_text()


# ------------------------------------------------------------------ plans, memory, fit


PLANS = [  # the runner's info["block_plans"]: one dict per distinct plan
    {"stage": "standardize-moments", "block_rows": 2514, "tasks": 120,
     "task_bytes": 41 * 2**20, "budget": 64 * 2**20, "limit": "memory budget", "fan_in": 8,
     "depth": 2, "merge_bytes": 3 * 2**10, "count": 1},
    {"stage": f"fit {EVIL}", "block_rows": 300, "tasks": 3, "task_bytes": 1536, "budget": None,
     "limit": "block_rows", "fan_in": None, "depth": None, "merge_bytes": None, "count": 4,
     "extra_key": "kept"},
]


def test_block_plan_table_has_every_key_with_sizes_formatted():
    headers, rows, more = plan_table({"block_plans": PLANS})
    assert headers[:4] == ["stage", "rows per block", "tasks", "memory per task"]
    assert headers[-2:] == ["times applied", "extra key"] and more == 0
    assert rows[0][:4] == ["standardize-moments", "2514", "120", "41.00 MiB"]
    assert rows[0][headers.index("budget per task")] == "64.00 MiB"
    assert rows[0][headers.index("memory per merge")] == "3.00 KiB"
    assert rows[1][3] == "1.50 KiB" and rows[1][headers.index("budget per task")] == ""
    assert rows[1][headers.index("times applied")] == "4"
    assert plan_table({}) == ([], [], 0)
    many = plan_table({"block_plans": PLANS * 30})
    assert len(many[1]) == 50 and many[2] == 10


def test_peak_memory_rows_include_what_the_cluster_adds():
    info = make_info(workers_peak_memory_bytes=2**30, peak_memory={"scheduler_bytes": 2**20})
    assert peak_rows(info) == [("client process tree", 300 * 2**20), ("scheduler", 2**20),
                               ("workers peak memory", 2**30)]
    # a run without a cluster records None for the workers: nothing to show
    assert peak_rows(make_info(workers_peak_memory_bytes=None)) == [
        ("client process tree", 300 * 2**20)]


def test_reports_render_plans_memory_fit_and_escape_everything(tmp_path):
    fit = {"available": True, "metric": "accuracy", "value": 0.93124, "rows": 900,
           "on": "training rows", "predictions": "predictions.zarr"}
    info = make_info(block_plans=PLANS, workers_peak_memory_bytes=3 * 2**30, fit=fit,
                     resolved_params={"features.gamma": 0.0123456789},
                     timings={EVIL: 0.5}, performance_report="dask-performance.html")
    spec = make_spec(tmp_path, name=EVIL)
    errors = {"available": False, "reason": EVIL}
    write_report(tmp_path, spec, info, None, errors, "report.md")
    html = (tmp_path / "report.html").read_text()
    md = (tmp_path / "report.md").read_text()
    for text in (html, md):
        assert "<script" not in text and "<img" not in text
        assert "2514" in text and "41.00 MiB" in text and "memory budget" in text
        assert "3.00 GiB" in text and "300.00 MiB" in text  # workers and client
        assert "training accuracy: 0.9312 on 900 rows" in text
        assert "features.gamma = 0.0123457" in text
        assert "predicts its targets" in text  # a supervised model: no spectrum expected
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | [x](javascript:alert(1))" in html
    # readable offline: nothing fetched (no scripts, stylesheets or remote URLs)
    assert not re.search(r"<(script|link|iframe|img)\b", html)
    assert "http:" not in html and "https:" not in html and "url(" not in html
    assert re.findall(r'href="([^"]+)"', html) == ["predictions.zarr", "dask-performance.html"]
    # Markdown needs no entity for ">" (nor for quotes): only "<" could open a tag
    assert md.startswith("# distsketch run report: &lt;script>alert\\(1\\)&lt;/script> \\| \\[x\\]")
    for line in md.splitlines():
        # an unescaped pipe appears only in the report's own table rows
        if "|" in line.replace("\\|", ""):
            assert line.startswith("| ") and line.endswith("|"), line
    assert "- this report with plots: [report.html](report.html)" in md


def test_unsupervised_report_without_spectrum_says_so(tmp_path):
    write_report(tmp_path, make_spec(tmp_path), make_info(), None, NO_ERRORS, "report.md")
    assert "the model exposes no eigenvalues." in (tmp_path / "report.md").read_text()
    assert "## Block plans" not in (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert "<svg" not in html and "the model exposes no eigenvalues." in html


def test_a_workflow_run_writes_the_html_report(tmp_path):
    """A run's result holds report.html beside report.md, with its spectrum inline."""
    import zarr

    import distsketch
    from distsketch.io import read_manifest
    from distsketch.workflow import run_workflow
    from distsketch.workflow.report import spectrum

    X = np.random.default_rng(0).normal(size=(400, 4))
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(100, 4))
    arr[...] = X
    res = run_workflow({"input": str(tmp_path / "X.zarr"), "seed": 1,
                        "method": {"name": "StreamingKernelPCA", "params": {
                            "method": "rnca", "n_random_features": 32, "n_components": 3,
                            "gamma": 0.2}},
                        "outputs": {"dir": str(tmp_path / "out")}, "cluster": "sync",
                        "report": {"n_sample": 100, "png": False}}, log=lambda m: None)
    man = read_manifest(res.result_dir)
    assert "report.html" in man["files"] and man["html_report"] == "report.html"
    assert man["fit"] is None  # unsupervised
    html = (res.result_dir / "report.html").read_text()
    values = spectrum(distsketch.load(res.result_dir / "model.zarr"))
    assert values.size == 32 and html.count("<circle") == plot_values(values)[1].size > 3
    assert "relative_frobenius" in html and f"{values[0]:.4g}" in html


def test_markdown_report_shows_quotes_as_written_and_html_escapes_them(tmp_path):
    """report.md is Markdown, not HTML: a quote is a quote, not &quot; (the params' JSON too);
    an ampersand that would read as an entity stays literal; report.html escapes for HTML."""
    name = 'letters "v2" & it\'s &quot;raw&quot; <b>'
    write_report(tmp_path, make_spec(tmp_path, name=name), make_info(), None, NO_ERRORS,
                 "report.md")
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    title = md.splitlines()[0]
    assert title == ("# distsketch run report: letters \"v2\" & it's &amp;quot;raw&amp;quot; "
                     "&lt;b>")
    assert "&quot;" not in md.replace("&amp;quot;", "") and "&#x27;" not in md
    assert '{"n_components": 3}' in md  # the method's parameters: JSON, quotes kept
    assert "<b>" not in md
    assert ("<h1>distsketch run report: letters &quot;v2&quot; &amp; it&#x27;s "
            "&amp;quot;raw&amp;quot; &lt;b&gt;</h1>") in html
