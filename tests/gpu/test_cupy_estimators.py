"""Every public estimator on CuPy against NumPy, and the GPU benchmark, on a real GPU.

Skipped without CuPy and a visible GPU (CI has none).  On a GPU machine the whole GPU
suite and a short benchmark run are one command (docs/gpu.md, "Checking a GPU machine")::

    pytest -m gpu -q tests/gpu

Each estimator of ``distsketch.__all__`` is fitted on the small data of
tests/estimators/test_api_vocabulary.py three ways — NumPy, a CuPy array and a dask
array of CuPy blocks — with the same seeds and planned blocks.  An estimator with a GPU
path (``_array_api_support``) must give host NumPy learned attributes and outputs of the
input's kind equal to NumPy's within float64 rounding of another BLAS (cuBLAS and CuPy's
reductions sum in another order: rtol 1e-8, atol 1e-10 — the tolerance docs/gpu.md
states); one without must refuse with the ConfigError docs/gpu.md lists.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import is_classifier

cp = pytest.importorskip("cupy")
da = pytest.importorskip("dask.array")

import distsketch as ds  # noqa: E402
from distsketch.errors import ConfigError  # noqa: E402


def _no_gpu() -> str:
    """Why no GPU can run here ('' when one can)."""
    from distsketch.ops.device import require_cupy

    try:
        require_cupy()
    except ConfigError as exc:
        return str(exc)
    return ""


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(_no_gpu()), reason=_no_gpu() or "GPU")]

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    """A helper module of tests/estimators (not a package: loaded from its path)."""
    spec = importlib.util.spec_from_file_location(f"_{name}",
                                                  ROOT / "tests" / "estimators" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


_vocabulary = _load("test_api_vocabulary")
SMALL, XS, YS, _build = _vocabulary.SMALL, _vocabulary.XS, _vocabulary.YS, _vocabulary._build
_compare = _load("namespace_compare")
assert_learned_match, tolerances = _compare.assert_learned_match, _compare.tolerances

RTOL, ATOL = 1e-8, 1e-10
METHODS = ("transform", "predict", "decision_function", "predict_proba")
ESTIMATORS = sorted((obj for name in ds.__all__
                     if inspect.isclass(obj := getattr(ds, name)) and hasattr(obj, "fit")),
                    key=lambda c: c.__name__)


def _targets(cls):
    return _compare.targets(_build(cls), YS)


def _on_gpu(a, kind):
    if a is None:
        return None
    if kind == "cupy":
        return cp.asarray(a)
    chunks = (40, *a.shape[1:])
    return da.from_array(cp.asarray(a), chunks=chunks, asarray=False)


def _on_host(a, kind):
    """The NumPy twin of ``_on_gpu(a, kind)``: the same values in the same blocks (an FD
    sketch depends on the blocks within its guarantee, on every device)."""
    if a is None or kind == "cupy":
        return a
    return da.from_array(a, chunks=(40, *a.shape[1:]))


def _to_host(out):
    if isinstance(out, da.Array):
        assert isinstance(out._meta, cp.ndarray), "a dask of CuPy input gives a dask of CuPy"
        out = out.compute()
    return cp.asnumpy(out) if isinstance(out, cp.ndarray) else np.asarray(out)


@pytest.mark.parametrize("kind", ["cupy", "dask-of-cupy"])
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_cupy_gives_the_numpy_results_or_the_documented_refusal(cls, kind):
    y = _targets(cls)
    Xg, yg = _on_gpu(XS, kind), _on_gpu(y, kind)
    if (pair := _compare.fit_pair(_build, cls, _on_host(XS, kind), _on_host(y, kind),
                                  Xg, yg)) is None:
        return  # the documented refusal
    ref, got = pair
    assert_learned_match(got, ref, "cupy", RTOL, ATOL)
    for method in METHODS:
        if hasattr(ref, method):
            out = getattr(got, method)(Xg)
            if kind == "cupy" and not (is_classifier(ref) and method == "predict"
                                       and ref.classes_.dtype == object):
                assert isinstance(out, cp.ndarray), method
            expected = getattr(ref, method)(XS)
            rt, at = tolerances(ref, expected, RTOL, ATOL)
            np.testing.assert_allclose(_to_host(out), expected,
                                       rtol=rt, atol=at, err_msg=method)
    if y is not None and hasattr(ref, "score"):
        rt, at = tolerances(ref, 1.0, RTOL, ATOL)
        assert got.score(Xg, yg) == pytest.approx(ref.score(XS, y), rel=rt, abs=at)


def test_fit_on_cupy_is_deterministic_run_to_run():
    Xg = cp.asarray(np.random.default_rng(5).normal(size=(3000, 20)).astype(np.float32))
    make = lambda: ds.StreamingKernelPCA(n_components=4, n_random_features=256,  # noqa: E731
                                         sketch_size=32, random_state=0)
    a, b = make().fit(Xg), make().fit(Xg)
    np.testing.assert_array_equal(a.sketch_, b.sketch_)
    np.testing.assert_array_equal(_to_host(a.transform(Xg)), _to_host(b.transform(Xg)))


def test_the_gpu_benchmark_runs_every_pipeline(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"),
                           "--rows", "200000", "--m", "1024", "--cpu-cluster", "threads",
                           "--workdir", str(tmp_path / "w")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines()
            if line.startswith("| ") and "pipeline" not in line]
    assert len(rows) >= 5
    for row in rows:
        assert all(float(c.strip().replace(",", "")) > 0 for c in row.split("|")[2:4]), row
