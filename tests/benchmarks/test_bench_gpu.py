"""``benchmarks/bench_gpu.py``: the ``--quick`` CPU run, its numbers, its warm-up, its sizing."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"
ROOT = SCRIPT.parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("bench_gpu_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up while it loads
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load()


def _close(a: float, b: float) -> bool:
    return a == pytest.approx(b, rel=1e-9)


@pytest.fixture(scope="module")
def quick_run(bench, tmp_path_factory):
    """One ``--quick --json`` run in this process, each pipeline's calls logged by store."""
    tmp = tmp_path_factory.mktemp("quick")
    calls: list[tuple[str, str]] = []
    build = bench.build_pipelines

    def logged(args):
        def wrap(p):
            def run(X, y, out, _run=p.run, _key=p.key):
                calls.append((_key, str(X)))
                return _run(X, y, out)
            return dataclasses.replace(p, run=run)
        return [wrap(p) for p in build(args)]

    bench.build_pipelines = logged
    out_json = tmp / "q.json"
    try:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = bench.main(["--quick", "--json", str(out_json), "--workdir", str(tmp / "w")])
    finally:
        bench.build_pipelines = build
    return rc, buf.getvalue(), json.loads(out_json.read_text()), calls


def test_quick_run_prints_and_stores_every_number_with_ratios_of_its_own_rates(bench, quick_run):
    rc, stdout, out, _ = quick_run
    assert rc == 0
    cfg, read, gemm, enc = out["config"], out["read"], out["gemm"], out["encode_write"]
    n, d, m = cfg["rows"], cfg["cols"], cfg["m"]
    assert cfg["device"] == "cpu" and n >= cfg["calib_rows"][1] > cfg["calib_rows"][0] > 0
    assert cfg["threads_warmed"] == cfg["threads"]
    # the hardware's rates, each the best of its timed runs
    assert read["rows"] == n and len(read["seconds"]) == 2 and read["rows_s"] > 0
    assert _close(read["rows_s"], n / min(read["seconds"]))
    assert _close(read["gb_s"], read["rows_s"] * d * 4 / 1e9)
    a, k, _ = gemm["shape"]
    assert _close(gemm["flop_s"], 2 * a * k * k / min(gemm["seconds"])) and gemm["flop_s"] > 0
    assert enc["rows"] == n and enc["cols"] == m and len(enc["seconds"]) == 2
    assert _close(enc["gb_s"], n * m * 4 / min(enc["seconds"]) / 1e9) and enc["gb_s"] > 0
    assert f"{cfg['threads']} reader threads: {read['rows_s']:,.0f} rows/s" in stdout
    assert f"{read['gb_s']:.3f} GB/s" in stdout and f"{gemm['gflop_s']:,.1f} GFLOP/s" in stdout
    assert f"{enc['gb_s']:.3f} GB/s" in stdout

    res = out["pipelines"]
    assert list(res) == list(bench.PIPELINES)
    for key, r in res.items():
        assert "error" not in r, (key, r)
        assert len(r["seconds"]) == 2 and all(s > 0 for s in r["seconds"])
        assert _close(r["rows_s"], n / min(r["seconds"]))
        assert _close(r["ratio_to_read"], r["rows_s"] / read["rows_s"])
        assert _close(r["projected_seconds"], 1e9 / r["rows_s"])
        assert f"| {r['label']} | {r['rows_s']:,.0f} | {r['ratio_to_read']:.2f} |" in stdout
    for key in ("rff_zarr", "rff_engine", "nystrom_zarr"):
        r = res[key]
        assert r["bytes_written"] == n * m * 4 and r["output_shape"] == [n, m]
        assert 0 < r["stored_bytes"]
        assert _close(r["gb_s_written"], r["bytes_written"] / r["best_seconds"] / 1e9)
        assert _close(r["ratio_to_encode_write"], r["gb_s_written"] / enc["gb_s"])
    # the engine's writers write what the dask path writes, and the report compares the two
    eng, ref = res["rff_engine"], res["rff_zarr"]
    assert (f"pass engine / dask tasks (RFF -> Zarr): {eng['rows_s'] / ref['rows_s']:.2f}x"
            in stdout)
    big = cfg["m_big"]
    assert _close(res["krr_big"]["gemm_share"],
                  res["krr_big"]["rows_s"] * (2 * d * big + 2 * big**2) / gemm["flop_s"])
    falkon = res["falkon"]
    M = falkon["centers"]
    assert 0 < M <= cfg["falkon_m"] and _close(falkon["cg_flops_per_row"], 2 * M * (d + 2) + 4 * M)
    passes = falkon["cg_passes"]
    assert len(passes) == cfg["falkon_iters"]
    for p in passes:
        assert p["seconds"] > 0
        assert _close(p["gemm_share"], n * falkon["cg_flops_per_row"] / p["seconds"]
                      / gemm["flop_s"])
    assert _close(falkon["cg_pass_gemm_share_min"], min(p["gemm_share"] for p in passes))

    # each target: its value from the numbers above, PASS exactly when it reaches the threshold
    assert [(t["pipeline"], t["measure"]) for t in out["targets"]] == \
        [(k, m_) for k, m_, _ in bench.TARGETS]
    for t in out["targets"]:
        assert _close(t["value"], res[t["pipeline"]][t["measure"]])
        assert t["pass"] is (t["value"] >= t["threshold"])
        verdict = "PASS" if t["pass"] else "FAIL"
        assert (f"{verdict} {t['pipeline']} {t['measure']}: {t['value']:.3f} "
                f"(target >= {t['threshold']})") in stdout
    assert out["elapsed_seconds"] > 0 and "Machine:" in stdout and "logical cores" in stdout


def test_each_pipeline_is_warmed_up_on_another_store_before_its_two_timed_runs(quick_run):
    _, _, out, calls = quick_run
    store = out["config"]["store"]
    for key in out["pipelines"]:
        mine = [x for k, x in calls if k == key]
        assert mine[0] != store, key  # the first call is the warm-up, not a timed run
        on_main = [i for i, x in enumerate(mine) if x == store]
        assert len(on_main) == 2 and on_main == [len(mine) - 2, len(mine) - 1], (key, mine)
    events = out["events"]

    def first(phase, what):
        return min(e["start"] for e in events if e["phase"] == phase and e["what"] == what)

    def last_end(phase, what):
        return max(e["end"] for e in events if e["phase"] == phase and e["what"] == what)

    for what in ("gemm", "read", *out["pipelines"]):
        assert last_end("warmup", what) <= first("timed", what), what
    assert last_end("warmup", "threads") <= min(e["start"] for e in events
                                                if e["phase"] == "timed" and e["what"] != "gemm")


def test_the_plan_takes_the_most_rows_that_fit_the_budget_left(bench):
    n, predicted = bench.plan_rows(100.0, 10.0, 1e-3, lo=1024, hi=10**9, step=512, safety=0.8)
    assert n % 512 == 0 and predicted <= 0.8 * 100 and _close(predicted, 10 + 1e-3 * n)
    assert 10 + 1e-3 * (n + 512) > 0.8 * 100  # one step more would not fit
    assert bench.plan_rows(100.0, 10.0, 1e-3, lo=1024, hi=4096, step=512)[0] == 4096
    assert bench.plan_rows(5.0, 10.0, 1e-3, lo=1024, hi=10**9, step=512)[0] == 1024
    # a line through two exact points; a noisy pair cannot make rows nearly free
    assert bench.linear_cost(1000, 2.0 + 1.0, 2000, 2.0 + 2.0) == pytest.approx((2.0, 1e-3))
    fixed, per_row = bench.linear_cost(1000, 3.0, 2000, 2.0)
    assert per_row == pytest.approx(0.25 * 2.0 / 2000) and fixed >= 0


def test_a_cpu_column_times_the_pipelines_on_the_cpu_as_well(bench, tmp_path, capsys):
    out_json = tmp_path / "c.json"
    assert bench.main(["--quick", "--cpu-cluster", "threads", "--pipelines", "skpca_rnca",
                       "--json", str(out_json), "--workdir", str(tmp_path / "w")]) == 0
    out = json.loads(out_json.read_text())
    assert list(out["pipelines"]) == ["skpca_rnca"]
    cpu = out["cpu_column"]["pipelines"]["skpca_rnca"]
    assert len(cpu["seconds"]) == 2 and _close(cpu["rows_s"], out["config"]["rows"]
                                               / min(cpu["seconds"]))
    dev = out["pipelines"]["skpca_rnca"]["rows_s"]
    assert f"| {cpu['label']} | {cpu['rows_s']:,.0f} | {dev / cpu['rows_s']:.2f} |" \
        in capsys.readouterr().out
    timed = [e["column"] for e in out["events"]
             if e["phase"] == "timed" and e["what"] == "skpca_rnca"]
    assert timed == ["device", "device", "cpu", "cpu"]  # two runs in each column
    # the targets of pipelines that did not run are reported as not measured
    assert [t["pass"] for t in out["targets"] if t["pipeline"] != "skpca_rnca"] == [None] * 5


def test_run_offline_runs_the_quick_gpu_script_and_keeps_its_json_beside_the_log(tmp_path):
    wheels, out = tmp_path / "wheels", tmp_path / "out"
    wheels.mkdir()  # nothing to install: this Python has every dependency
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "benchmarks/run_offline.sh", str(wheels), str(out),
                           "bench_gpu.py", "--quick", "--pipelines", "skpca_fd",
                           "--workdir", str(tmp_path / "w")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    numbers = json.loads((out / "bench_gpu.json").read_text())
    assert numbers["pipelines"]["skpca_fd"]["rows_s"] > 0
    assert "skpca_fd ratio_to_read" in (out / "log.txt").read_text()
    assert (out / "machine.txt").read_text().strip()


def test_without_cupy_the_gpu_run_exits_saying_what_is_missing(tmp_path):
    try:
        import cupy  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("CuPy is installed here: the GPU run would start")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rows", "100"], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 2
    assert "needs CuPy" in proc.stderr and "--quick" in proc.stderr
    assert proc.stdout == ""
