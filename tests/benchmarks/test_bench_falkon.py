"""Smoke run of ``benchmarks/bench_falkon_regime.py --quick``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from distsketch.ops.falkon import tile_rows_for

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_falkon_regime.py"


@pytest.fixture(scope="module")
def bench():
    # loaded from its file: the benchmarks folder is not a package
    spec = importlib.util.spec_from_file_location("bench_falkon_regime", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_run_reports_every_section(bench, tmp_path):
    out = bench.main(["--quick", "--json", str(tmp_path / "r.json")])
    assert (tmp_path / "r.json").is_file()
    real = out["real"]["rows"]
    assert [r["M"] for r in real] == [50, 200]
    # more centres, lower test error (digits: 1.54 -> 1.04 at these sizes)
    assert real[1]["rmse"] < real[0]["rmse"]
    for r in real:  # the same objective as Nystroem + Ridge(λ n), other uniform centres
        assert abs(r["rmse"] - r["sk_rmse"]) < 0.1 * r["sk_rmse"]
        assert r["in_memory"] == "accepted"  # such small M fit the in-memory route too
    for r in out["store"]["rows"]:
        assert np.isfinite(r["rmse"]) and r["pass_seconds"] > 0 and r["bound_seconds"] > 0
        # the traced peak of a pass is what the planner was told, not several times more
        assert r["pass_peak_bytes"] <= 1.5 * r["pass_plan_bytes"]
    for dtype in ("float64", "float32"):
        f = out["factors"][dtype]
        assert f["peak_bytes"] <= 1.1 * f["plan_bytes"]
    ex = out["extrapolation"]
    M = 30000
    assert ex["driver_bytes_float32"] == 2 * M * M * 4 + 8 * M * (16 + 6) + 8 * tile_rows_for(M) * M
    assert ex["largest_M_float32"] > ex["largest_M_float64"]


def test_the_scale_section_reports_memory_against_its_plan(bench, tmp_path):
    out = bench.main(["--sections", "scale", "--scale-rows", "20000", "--scale-m", "100",
                      "--scale-iters", "2", "--workdir", str(tmp_path)])
    r = out["scale"]
    assert r["n"] == 20000 and r["M"] == 100 and r["iters"] == 2
    assert len(r["pass_seconds"]) == 2 and r["bound_seconds"] > 0 and np.isfinite(r["rmse"])
    # the plan counts the factors, the tasks and the process before the fit
    assert r["plan_bytes"] >= r["rss_before_fit_bytes"] + r["plan_driver_bytes"]
    assert r["peak_rss_bytes"] >= r["rss_before_fit_bytes"] > 0
