"""benchmarks/bench_defaults.py: gradient boosting beside the kernel models, with score and time."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load():
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("bench_defaults_under_test",
                                                      BENCH / "bench_defaults.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path[:] = saved


def test_gradient_boosting_sits_beside_svm_for_both_tasks():
    bench = _load()
    clf = bench.models_for("clf", 100, 5, seed=0)
    reg = bench.models_for("reg", 100, 5, seed=0)
    assert {"SVC()", "HistGradientBoostingClassifier()"} <= set(clf)
    assert {"SVR()", "HistGradientBoostingRegressor()"} <= set(reg)
    # on tables too large for the exact SVR, boosting still runs
    assert "HistGradientBoostingRegressor()" in bench.models_for("reg", 100, 5, seed=0, exact=False)


def test_every_model_gets_a_score_and_a_fit_time(monkeypatch, capsys):
    bench = _load()
    monkeypatch.setattr(sys, "argv", ["bench_defaults.py", "--seeds", "1", "--tables", "wine,diabetes"])
    bench.main()
    out = capsys.readouterr().out
    rows = re.findall(r"^\| (wine|diabetes) \(\d+ × \d+\) \| (.+?) \| (-?[\d.]+) ± [\d.]+ \| ([\d.]+) \|",
                      out, re.M)
    models = {(t, m) for t, m, _, _ in rows}
    assert ("wine", "HistGradientBoostingClassifier()") in models
    assert ("diabetes", "HistGradientBoostingRegressor()") in models
    assert ("wine", "SVC()") in models and ("diabetes", "SVR()") in models
    assert len(rows) == 10          # five models per table, each with a score and a time
    for table, _, score, seconds in rows:
        # accuracy in [0, 1]; R² at most 1 (and far above −1 for any of these models)
        assert (0.0 <= float(score) <= 1.0) if table == "wine" else (-1.0 < float(score) <= 1.0)
        assert float(seconds) >= 0.0
