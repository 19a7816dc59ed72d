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

cp = pytest.importorskip("cupy")
da = pytest.importorskip("dask.array")

import distsketch as ds  # noqa: E402
from distsketch.errors import ConfigError  # noqa: E402
from distsketch.ops.device import require_cupy  # noqa: E402

try:
    require_cupy()
except ConfigError as exc:  # CuPy installed, no GPU
    pytest.skip(str(exc), allow_module_level=True)

from sklearn.base import is_classifier, is_regressor  # noqa: E402

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "_vocabulary", ROOT / "tests" / "estimators" / "test_api_vocabulary.py")
_vocabulary = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(_vocabulary)  # type: ignore[union-attr]
SMALL, XS, YS, _build = _vocabulary.SMALL, _vocabulary.XS, _vocabulary.YS, _vocabulary._build

RTOL, ATOL = 1e-8, 1e-10
SIGN_FREE = {"sketch_"}  # an FD sketch is defined up to the signs of its rows
METHODS = ("transform", "predict", "decision_function", "predict_proba")
ESTIMATORS = sorted((obj for name in ds.__all__
                     if inspect.isclass(obj := getattr(ds, name)) and hasattr(obj, "fit")),
                    key=lambda c: c.__name__)


def _targets(cls):
    est = _build(cls)
    if is_classifier(est):
        return (YS > 0).astype(np.int64)
    required = est.__sklearn_tags__().target_tags.required
    return YS if is_regressor(est) or required else None


def _on_gpu(a, kind):
    if a is None:
        return None
    if kind == "cupy":
        return cp.asarray(a)
    chunks = (40, *a.shape[1:])
    return da.from_array(cp.asarray(a), chunks=chunks, asarray=False)


def _to_host(out):
    if isinstance(out, da.Array):
        assert isinstance(out._meta, cp.ndarray), "a dask of CuPy input gives a dask of CuPy"
        out = out.compute()
    return cp.asnumpy(out) if isinstance(out, cp.ndarray) else np.asarray(out)


def _fit(cls, X, y):
    return _build(cls).fit(X) if y is None else _build(cls).fit(X, y)


@pytest.mark.parametrize("kind", ["cupy", "dask-of-cupy"])
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_cupy_gives_the_numpy_results_or_the_documented_refusal(cls, kind):
    y = _targets(cls)
    Xg, yg = _on_gpu(XS, kind), _on_gpu(y, kind)
    if not cls._array_api_support:
        with pytest.raises(ConfigError, match=r"has no GPU \(array-API\) path yet"):
            _fit(cls, Xg, yg)
        return
    ref, got = _fit(cls, XS, y), _fit(cls, Xg, yg)
    for name, value in vars(got).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        assert not type(value).__module__.startswith("cupy"), name
        if isinstance(value, np.ndarray) and value.dtype != object:
            expected = getattr(ref, name)
            if name in SIGN_FREE:
                value, expected = value.T @ value, expected.T @ expected
            elif name == "components_" and np.shape(getattr(ref, "singular_values_", ())) == \
                    (value.shape[0],):
                keep = ref.singular_values_ > 1e-8 * ref.singular_values_.max()
                value, expected = value[keep], expected[keep]
            np.testing.assert_allclose(value, expected, rtol=RTOL, atol=ATOL, err_msg=name)
    for method in METHODS:
        if hasattr(ref, method):
            out = getattr(got, method)(Xg)
            if kind == "cupy" and not (is_classifier(ref) and method == "predict"
                                       and ref.classes_.dtype == object):
                assert isinstance(out, cp.ndarray), method
            np.testing.assert_allclose(_to_host(out), getattr(ref, method)(XS),
                                       rtol=RTOL, atol=ATOL, err_msg=method)
    if y is not None and hasattr(ref, "score"):
        assert got.score(Xg, yg) == pytest.approx(ref.score(XS, y), rel=RTOL, abs=ATOL)


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
