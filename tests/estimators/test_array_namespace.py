"""Every public estimator on arrays of another namespace (the stand-in for GPU blocks).

``array_api_strict`` arrays on a non-CPU device (:func:`distsketch.testing.to_strict_device`)
refuse any hidden conversion to NumPy and any host operand that meets them un-moved,
so an estimator that runs on them runs on CuPy the same way.  Each estimator either
runs fit/transform/predict/score on them with the NumPy results, outputs on that device
and host NumPy learned attributes, or refuses with the ConfigError that docs/gpu.md lists.
"""

from __future__ import annotations

import inspect
import pathlib
import re

import numpy as np
import pytest
from namespace_compare import assert_learned_match, fit_pair, targets, tolerances
from sklearn.base import clone, is_regressor
from test_api_vocabulary import SMALL, XS, YS, _build  # the small settings of every estimator

import distsketch as ds
from distsketch.errors import InputError
from distsketch.testing import from_strict_device, to_strict_device

pytest.importorskip("array_api_strict")

ESTIMATORS = sorted((obj for name in ds.__all__
                     if inspect.isclass(obj := getattr(ds, name)) and hasattr(obj, "fit")),
                    key=lambda c: c.__name__)

# Same seed, same planned blocks and the same merge tree on both sides: the results differ
# only by the rounding of the two libraries' reductions and matrix products (measured
# up to ~5e-15 relative), so float64 agrees to rtol 1e-10.
RTOL, ATOL = 1e-10, 1e-12

METHODS = ("transform", "predict", "decision_function", "predict_proba")
GPU_DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "gpu.md"


def _targets(cls):
    return targets(_build(cls), YS)


def _fit(cls, X, y):
    return _build(cls).fit(X) if y is None else _build(cls).fit(X, y)


def _doc_table() -> dict[str, str]:
    """Estimator name -> its "GPU path" cell in docs/gpu.md's section "Estimators on the GPU"."""
    text = GPU_DOC.read_text()
    section = text.split("## Estimators on the GPU", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^\|\s*`(\w+)`\s*\|\s*([^|]+)\|", section, re.M)}


def test_every_estimator_is_in_the_docs_table_with_its_path():
    table = _doc_table()
    assert set(table) == {c.__name__ for c in ESTIMATORS}
    for cls in ESTIMATORS:
        assert table[cls.__name__].startswith("yes" if cls._array_api_support else "no"), \
            cls.__name__


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_strict_arrays_give_the_numpy_results_or_a_config_error(cls):
    assert cls.__name__ in SMALL
    y = _targets(cls)
    Xs, ys = to_strict_device(XS), None if y is None else to_strict_device(y)
    if (pair := fit_pair(_build, cls, XS, y, Xs, ys)) is None:
        return  # the documented refusal
    ref, got = pair
    assert_learned_match(got, ref, "array_api_strict", RTOL, ATOL)
    ran = 0
    for method in METHODS:
        if not hasattr(ref, method):
            continue
        out = getattr(got, method)(Xs)
        expected = getattr(ref, method)(XS)
        rt, at = tolerances(ref, expected, RTOL, ATOL)
        np.testing.assert_allclose(from_strict_device(out), expected,
                                   rtol=rt, atol=at, err_msg=method)
        ran += 1
    assert ran or cls in (ds.FrequentDirections, ds.BlockKernelApproximation)  # no row map
    if y is not None and hasattr(ref, "score"):
        rt, at = tolerances(ref, 1.0, RTOL, ATOL)
        assert got.score(Xs, ys) == pytest.approx(ref.score(XS, y), rel=rt, abs=at)


@pytest.mark.parametrize("cls", [ds.SketchedKernelRidge, ds.StreamingKernelPCA],
                         ids=lambda c: c.__name__)
def test_model_fitted_on_strict_arrays_loads_and_predicts_on_numpy(cls, tmp_path):
    y = _targets(cls)
    Xs = to_strict_device(XS)
    model = _fit(cls, Xs, None if y is None else to_strict_device(y))
    method = "predict" if y is not None else "transform"
    in_namespace = from_strict_device(getattr(model, method)(Xs))
    model.save(tmp_path / "model.zarr")
    loaded = ds.load(tmp_path / "model.zarr")
    on_host = getattr(loaded, method)(XS)
    assert isinstance(on_host, np.ndarray)
    np.testing.assert_allclose(on_host, in_namespace, rtol=RTOL, atol=ATOL)


def test_mixing_numpy_and_strict_arrays_is_an_input_error():
    with pytest.raises(InputError, match="different array libraries"):
        ds.SketchedKernelRidge().fit(to_strict_device(XS), YS)


def test_strict_input_with_nan_names_the_row():
    X = XS.copy()
    X[7, 2] = np.nan
    with pytest.raises(InputError, match="first bad row is 7"):
        ds.RandomFourierFeatures(n_components=8, random_state=0).fit_transform(to_strict_device(X))


def test_float32_strict_input_gives_float32_strict_features():
    import array_api_strict as xps

    X32 = XS.astype(np.float32)
    Z = ds.RandomFourierFeatures(n_components=8, random_state=0).fit_transform(
        to_strict_device(X32))
    assert Z.dtype == xps.float32
    np.testing.assert_array_equal(
        from_strict_device(Z),
        ds.RandomFourierFeatures(n_components=8, random_state=0).fit_transform(X32))


@pytest.mark.parametrize("model", [
    ds.StreamingKernelPCA(n_components=2, n_random_features=32, method="rnca", random_state=0),
    ds.SketchedKernelRidge(features=ds.NystromFeatures(n_landmarks=12, random_state=0),
                           random_state=0),
    ds.SketchedKernelRidge(features=ds.TensorSketch(n_components=16, random_state=0),
                           alpha=[0.1, 1.0], cv=3, random_state=0),
    ds.NystromFeatures(n_landmarks=6, landmarks="kmeans", random_state=0),
], ids=["skpca-rnca", "krr-nystrom", "krr-tensorsketch-cv", "nystrom-kmeans"])
def test_other_settings_of_the_benchmark_pipelines_match_numpy(model):
    supervised = is_regressor(model)
    ref = clone(model).fit(XS, YS) if supervised else clone(model).fit(XS)
    got = (clone(model).fit(to_strict_device(XS), to_strict_device(YS)) if supervised
           else clone(model).fit(to_strict_device(XS)))
    method = "predict" if supervised else "transform"
    np.testing.assert_allclose(from_strict_device(getattr(got, method)(to_strict_device(XS))),
                               getattr(ref, method)(XS), rtol=RTOL, atol=ATOL)

