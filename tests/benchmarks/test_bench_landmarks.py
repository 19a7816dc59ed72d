"""Smoke run of ``benchmarks/bench_landmarks.py --quick``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_landmarks.py"


def test_quick_run_compares_every_choice(capsys):
    spec = importlib.util.spec_from_file_location("bench_landmarks", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.main(["--quick"])
    assert {r["how"] for r in rows} == {"uniform", "kmeans", "leverage", "rpcholesky"}
    assert {r["table"] for r in rows} == {"wine", "diabetes"}
    for r in rows:
        # relative errors of a Nyström approximation lie in [0, 1]: K − K̃ is PSD and K̃ ⪰ 0
        assert 0.0 <= r["fro"] <= 1.0 and 0.0 <= r["trace"] <= 1.0
        # a 10- or 20-landmark model still predicts: wine above chance (3 classes), diabetes R² > 0
        assert r["score"] > (0.5 if r["task"] == "class" else 0.0)
    out = capsys.readouterr().out
    assert "| wine (178 × 13) | default | 10 | leverage |" in out
    assert "leverage: lower kernel error than uniform in" in out
