"""Every public name resolves; every estimator round-trips through save/load and
follows the estimator conventions (keyword-only params, fitted checks, docs)."""

import inspect

import numpy as np
import pytest

import distsketch
from distsketch.errors import ConfigError, InputError, NotFittedError
from distsketch.io import write_array

rng = np.random.default_rng(0)
X = rng.normal(size=(120, 6)).astype(np.float64)
y = X[:, 0] - 0.5 * X[:, 1] ** 2
labels = (y > np.median(y)).astype(int)

# (class name, constructor kwargs, needs y, method whose output must round-trip)
CASES = [
    ("RandomFourierFeatures", {"n_components": 32}, None, "transform"),
    ("StreamingKernelPCA", {"n_components": 3, "n_random_features": 64, "sketch_size": 8}, None, "transform"),
    ("StreamingKernelPCA", {"n_components": 3, "n_random_features": 64, "method": "rnca"}, None, "transform"),
    ("CountSketch", {"n_components": 16}, None, "transform"),
    ("TensorSketch", {"degree": 2, "n_components": 32}, None, "transform"),
    ("SRHT", {"n_components": 4}, None, "transform"),
    ("TensorSRHT", {"degree": 2, "n_components": 32}, None, "transform"),
    ("PolySketch", {"degree": 3, "n_components": 32}, None, "transform"),
    ("GaussianSketch", {"gamma": 0.05, "n_components": 64}, None, "transform"),
    ("DotProductKernelSketch", {"kernel": "arccos1", "n_components": 64}, None, "transform"),
    ("KSpaceKernelPCA", {"n_components": 3, "degree": 2}, None, "transform"),
    ("KernelPCR", {"n_components": 5, "degree": 2}, "y", "predict"),
    ("NystromFeatures", {"n_landmarks": 20}, None, "transform"),
    ("NystromKernelPCA", {"n_components": 3, "n_landmarks": 20}, None, "transform"),
    ("MEKA", {"n_clusters": 3, "rank": 4}, None, "transform"),
    ("BlockKernelApproximation", {"n_clusters": 3}, None, "predict"),
    ("SketchedKernelRidge", {"alpha": 0.1}, "y", "predict"),
    ("SketchedKernelRidgeClassifier", {"alpha": 0.1}, "labels", "predict"),
    ("KernelSolver", {"alpha": 0.1, "tol": 1e-8}, "y", "predict"),
    ("MEKAKernelRidge", {"alpha": 0.5}, "y", "predict"),
    ("SparsifiedKernelPCA", {"n_components": 3, "p": 0.5}, None, "transform"),
    ("DatabaseFriendlyProjection", {"n_components": 8}, None, "transform"),
]


def test_every_lazy_name_resolves():
    for name in distsketch.__all__:
        assert getattr(distsketch, name) is not None, name


@pytest.mark.parametrize("name,kwargs,target,method", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_save_load_round_trip(tmp_path, name, kwargs, target, method):
    cls = getattr(distsketch, name)
    est = cls(random_state=0, **kwargs) if "random_state" in inspect.signature(cls).parameters \
        else cls(**kwargs)
    with pytest.raises((NotFittedError, AttributeError)):
        getattr(est, method)(X)
    args = (X,) if target is None else (X, {"y": y, "labels": labels}[target])
    est.fit(*args)
    before = np.asarray(getattr(est, method)(X[:30]))
    est.save(tmp_path / "m.zarr")
    loaded = distsketch.load(tmp_path / "m.zarr")
    assert type(loaded) is cls
    assert repr(loaded.get_params()) == repr(est.get_params())
    after = np.asarray(getattr(loaded, method)(X[:30]))
    np.testing.assert_allclose(after, before, rtol=1e-10, atol=1e-12)
    # a different feature count is refused with a clear error
    with pytest.raises(InputError, match="features"):
        getattr(loaded, method)(X[:5, :4])


@pytest.mark.parametrize("name", sorted({c[0] for c in CASES}))
def test_conventions(name):
    cls = getattr(distsketch, name)
    sig = inspect.signature(cls)
    assert all(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values()), name
    doc = inspect.getdoc(cls)
    for section in ("Parameters", "Notes", "References"):
        assert section in doc, f"{name} docstring lacks {section}"
    assert hasattr(cls, "_parameter_constraints") and cls._parameter_constraints, name


def test_fit_from_store_records_fingerprint(tmp_path):
    path = write_array(X.astype(np.float32), tmp_path / "X.zarr", chunk_rows=50)
    m = distsketch.NystromFeatures(n_landmarks=10, random_state=0).fit(str(path))
    assert m.fingerprint_["shape"] == [120, 6]
    m.save(tmp_path / "m.zarr")
    assert distsketch.load(tmp_path / "m.zarr").fingerprint_ == m.fingerprint_


def test_constraint_table_rejects_bad_values():
    with pytest.raises(ConfigError, match="n_components"):
        distsketch.StreamingKernelPCA(n_components=0).fit(X)
    with pytest.raises(ConfigError, match="method"):
        distsketch.StreamingKernelPCA(method="svd").fit(X)


def test_subpackages_are_lazy_attributes():
    import subprocess
    import sys

    # a fresh interpreter: this test session has imported the subpackages already
    code = ("import sys, distsketch; "
            "assert 'distsketch.metrics' not in sys.modules; "
            "m = distsketch.metrics; assert m is sys.modules['distsketch.metrics']; "
            "assert distsketch.datasets.__name__ == 'distsketch.datasets'; "
            "assert distsketch.io.__name__ == 'distsketch.io'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
    from distsketch import io, metrics  # noqa: F401  (from-imports work too)


def test_dir_lists_only_the_public_api():
    names = dir(distsketch)
    assert {"metrics", "datasets", "io", "StreamingKernelPCA", "load", "InputError"} <= set(names)
    assert set(names) == set(distsketch.__all__) | {"metrics", "datasets", "io"}
    for private in ("registry", "importlib", "Any", "annotations", "_registry", "errors"):
        assert private not in names
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        distsketch.nope  # noqa: B018


def test_fit_takes_targets_as_a_store_path(tmp_path):
    import zarr

    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    g.create_array("X", data=X, chunks=(50, 6))
    g.create_array("y", data=y, chunks=(50,))
    g.create_array("labels", data=labels, chunks=(50,))
    store = tmp_path / "d.zarr"
    for name, target in (("SketchedKernelRidge", "y"), ("SketchedKernelRidgeClassifier", "labels")):
        cls = getattr(distsketch, name)
        ref = cls(alpha=0.1, random_state=0).fit(X, {"y": y, "labels": labels}[target])
        by_path = cls(alpha=0.1, random_state=0).fit(f"{store}::X", f"{store}::{target}")
        np.testing.assert_allclose(by_path.predict(X), ref.predict(X), rtol=1e-10, atol=1e-12)
        by_kw = cls(alpha=0.1, random_state=0).fit(f"{store}::X", y=f"{store}::{target}")
        np.testing.assert_allclose(by_kw.predict(X), ref.predict(X), rtol=1e-10, atol=1e-12)
    # misaligned targets are refused with the row counts
    g.create_array("short", data=y[:100], chunks=(50,))
    with pytest.raises(InputError, match="100 rows"):
        distsketch.SketchedKernelRidge().fit(f"{store}::X", f"{store}::short")
