"""Smoke runs of the paper reproductions (``benchmarks/papers/*.py --quick``).

Each script's ``main`` runs on small data and must write its Markdown table and
a PASS / DIFFERS line per claim.  Where a quick run is large enough for a
paper's claim to be decided by theory (a bound that holds with high
probability, a structure the data were built to have), the claim must PASS.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

PAPERS = Path(__file__).resolve().parents[2] / "benchmarks" / "papers"
SCRIPTS = ["meka", "streaming_kpca", "kspace", "polynomial", "sampling"]


def _load(name: str):
    # the scripts import their shared ``common`` from their own folder: leave
    # neither that folder on sys.path nor ``common`` in sys.modules afterwards
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(f"paper_bench_{name}", PAPERS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path[:] = saved
        sys.modules.pop("common", None)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("papers")
    return {name: _load(name).main(["--quick", "--no-plot", "--out", str(out)]) for name in SCRIPTS}, out


def _claims(rep, pattern: str):
    found = [c for c in rep.claims if re.search(pattern, c.text)]
    assert found, f"no claim matching {pattern!r} in {[c.text for c in rep.claims]}"
    return found


@pytest.mark.parametrize("name", SCRIPTS)
def test_quick_run_writes_table_and_verdicts(reports, name):
    reps, out = reports
    rep = reps[name]
    md = (out / f"{name}.md").read_text()
    assert md.startswith("## ") and "|---|" in md
    assert f"python benchmarks/papers/{name}.py --quick" in md
    assert rep.claims
    for c in rep.claims:
        assert c.verdict in {"PASS", "DIFFERS"}
        assert f"**{c.verdict}** {c.text}" in md
        assert c.reason.strip()


def test_meka_beats_low_rank_methods_on_block_structured_data(reports):
    # blobs: 10 well-separated clusters, γ·(within-cluster distance²) ≈ 1 — the block
    # structure MEKA's Theorem 3 is about; the paper's ordering must hold
    (c,) = _claims(reports[0]["meka"], r"^blobs, k = 16: MEKA has the lowest")
    assert c.holds, c.line()


def test_kspace_features_beat_linear_regression_on_digits(reports):
    (c,) = _claims(reports[0]["kspace"], r"^digits: k-Space PCR has lower test error")
    assert c.holds, c.line()


def test_sampling_bounds_hold(reports):
    rep = reports[0]["sampling"]
    for c in _claims(rep, r"Füredi–Komlós|every squared distance within|Hoeffding bound"):
        assert c.holds, c.line()


def test_meka_ridge_runs_at_the_papers_regularisation(reports):
    # the default factored solve clips G̃'s negative eigenvalues, so λ = 2⁻⁵ is accepted
    (c,) = _claims(reports[0]["meka"], r"^digits 0/1: MEKAKernelRidge runs at the paper's λ")
    assert c.holds, c.line()


def test_default_sized_preconditioners_cut_cg_iterations(reports):
    # quick run: λ = 0.1, d_λ ≈ n/5, where the default keeps a sketch of at least 2·d_λ features
    rep = reports[0]["polynomial"]
    for c in _claims(rep, r"sketch preconditioner"):
        assert "rank 0," not in c.reason, c.line()
        assert "converged True" in c.reason, c.line()
        it = dict(re.findall(r"(none|sketch|Nyström) (\d+)", c.reason))
        assert int(it["Nyström"]) < int(it["none"]) and int(it["sketch"]) < int(it["none"]), c.line()


def test_streaming_kpca_reports_crossover_and_time_parts(reports):
    rep = reports[0]["streaming_kpca"]
    assert len(_claims(rep, r"falls below Nyström")) == 2 * 2 * 2    # γ × rank reading × method
    assert len(_claims(rep, r"against rank-10 Nyström")) == 2 * 2    # γ × method
    for c in _claims(rep, r"trains much faster"):
        assert "RFF map" in c.reason and "FD shrinks" in c.reason and "GEMM" in c.reason
