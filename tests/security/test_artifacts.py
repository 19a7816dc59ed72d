"""Model stores are untrusted: no code from files, damaged arrays refused.

Every case edits a saved model as an attacker or a broken disk would and
checks the exact outcome: a ``StoreError`` naming the class or array, nothing
imported or run, the store byte-for-byte as it was, and (CLI) no output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from distsketch import RandomFourierFeatures, StreamingKernelPCA
from distsketch.errors import StoreError, StoreVersionWarning
from distsketch.io import load, save_model
from distsketch.io.storage.codecs import codecs

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CLI = [sys.executable, "-c", "import sys; from distsketch.cli import main; sys.exit(main())"]
X = np.random.default_rng(0).normal(size=(120, 5))


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def edit_attrs(group_dir: Path, change) -> None:
    """Rewrite the attributes of the Zarr group at ``group_dir`` in place."""
    meta = group_dir / "zarr.json"
    body = json.loads(meta.read_text())
    change(body["attributes"])
    meta.write_text(json.dumps(body))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    rff = RandomFourierFeatures(n_components=16, gamma=0.3, random_state=1).fit(X)
    skpca = StreamingKernelPCA(n_components=3, n_random_features=16, sketch_size=8,
                               random_state=2).fit(X)
    return {"rff": rff.save(d / "rff.zarr"), "skpca": skpca.save(d / "skpca.zarr"),
            "_rff": rff, "_skpca": skpca}


@pytest.fixture
def rff_copy(models, tmp_path) -> Path:
    return Path(shutil.copytree(models["rff"], tmp_path / "rff.zarr"))


@pytest.fixture
def skpca_copy(models, tmp_path) -> Path:
    return Path(shutil.copytree(models["skpca"], tmp_path / "skpca.zarr"))


def refused(path: Path, *needles: str) -> StoreError:
    """``load(path)`` raises StoreError naming every needle and leaves the store intact."""
    before = snapshot(path)
    with pytest.raises(StoreError) as exc:
        load(path)
    for needle in needles:
        assert needle in str(exc.value), (needle, str(exc.value))
    assert snapshot(path) == before
    return exc.value


# --- no code from files ---------------------------------------------------------------------

@pytest.mark.parametrize("class_path", [
    "os.system", "subprocess.Popen", "builtins.exec", "builtins.eval", "posix.system",
    "sklearn.svm.SVC",                                  # scikit-learn, but not on the allow-list
    "evil_module_never_imported.Payload",               # a module nobody has
    "distsketch.io.commit.atomic.shutil.rmtree",               # a distsketch prefix is not enough
    "sklearn.kernel_approximation.os.system",
])
def test_root_class_not_registered_is_refused_before_any_import(rff_copy, class_path):
    edit_attrs(rff_copy, lambda a: a.update({"class": class_path}))
    refused(rff_copy, repr(class_path), "not a registered distsketch class")
    assert "evil_module_never_imported" not in sys.modules


def test_popen_with_stored_arguments_runs_nothing(rff_copy, tmp_path):
    marker = tmp_path / "pwned"
    edit_attrs(rff_copy, lambda a: a.update({
        "class": "subprocess.Popen",
        "params": {"args": {"__json__": ["touch", str(marker)]}}}))
    refused(rff_copy, "'subprocess.Popen'")
    assert not marker.exists()


def test_nested_estimator_naming_os_system_is_refused(skpca_copy):
    edit_attrs(skpca_copy / "state" / "features_", lambda a: a.update({"class": "os.system"}))
    refused(skpca_copy, "'os.system'", "not a registered")


def test_estimator_param_naming_os_system_is_refused(skpca_copy):
    # an estimator-valued parameter whose stored class is os.system
    root = zarr.open_group(str(skpca_copy / "params"), mode="r+")
    sub = root.create_group("evil")
    sub.create_group("params")
    sub.create_group("state")
    sub.attrs.update({"class": "os.system", "params": {}, "state": {}})
    edit_attrs(skpca_copy, lambda a: a["params"].update({"gamma": {"__estimator__": "evil"}}))
    refused(skpca_copy, "'os.system'")


def test_stored_object_naming_a_foreign_class_is_refused(rff_copy):
    root = zarr.open_group(str(rff_copy / "state"), mode="r+")
    root.create_group("obj").attrs.update({"class": "builtins.exec", "state": {}})
    edit_attrs(rff_copy, lambda a: a["state"].update({"extra_": {"__object__": "obj"}}))
    refused(rff_copy, "'builtins.exec'")


@pytest.mark.parametrize("desc, needle", [
    ({"__pickle__": "gASV"}, "unrecognised stored value"),
    ({"__json__": 1, "__array__": "x"}, "unrecognised stored value"),
    ({"__dtype__": "O"}, "not numeric"),
    ({"__dtype__": "U8"}, "not numeric"),
    ("not a descriptor", "unrecognised stored value"),
])
def test_stored_params_are_json_arrays_dtypes_or_allowed_estimators(rff_copy, desc, needle):
    edit_attrs(rff_copy, lambda a: a["params"].update({"gamma": desc}))
    refused(rff_copy, needle)


def test_a_private_attribute_cannot_be_set_from_a_store(rff_copy):
    edit_attrs(rff_copy, lambda a: a["state"].update({"__class__": {"__json__": 1}}))
    refused(rff_copy, "'__class__'", "not a learned attribute")


def test_allowed_types_round_trip_bitwise(tmp_path):
    # a Pipeline of a StandardScaler and a distsketch step, a numpy dtype parameter
    pipe = make_pipeline(StandardScaler(), StreamingKernelPCA(
        n_components=2, n_random_features=16, sketch_size=8, random_state=3)).fit(X)
    back = load(save_model(pipe, tmp_path / "pipe.zarr"))
    np.testing.assert_array_equal(back.transform(X), pipe.transform(X))
    # the steps' classes are checked like any other
    step = tmp_path / "pipe.zarr" / "params" / "steps" / "0" / "1"
    edit_attrs(step, lambda a: a.update({"class": "sklearn.svm.SVC"}))
    refused(tmp_path / "pipe.zarr", "'sklearn.svm.SVC'")


# --- versions -------------------------------------------------------------------------------

def test_model_records_versions_and_warns_on_mismatch(rff_copy):
    attrs = json.loads((rff_copy / "zarr.json").read_text())["attributes"]
    assert set(attrs["versions"]) >= {"distsketch", "numpy", "sklearn", "zarr"}
    assert attrs["versions"]["numpy"] == np.__version__
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreVersionWarning)
        load(rff_copy)  # same installation: no warning
    edit_attrs(rff_copy, lambda a: a["versions"].update({"numpy": "0.0.1", "sklearn": "0.1"}))
    with pytest.warns(StoreVersionWarning, match=r"numpy 0\.0\.1 \(installed .*sklearn 0\.1"):
        back = load(rff_copy)
    np.testing.assert_array_equal(back.transform(X), RandomFourierFeatures(
        n_components=16, gamma=0.3, random_state=1).fit(X).transform(X))


# --- damaged arrays -------------------------------------------------------------------------

def replace_array(group_dir: Path, name: str, value: np.ndarray) -> None:
    # with the checksum codec distsketch writes, so that the shape checks are what refuses it
    g = zarr.open_group(str(group_dir), mode="r+")
    arr = g.create_array(name, shape=value.shape, dtype=value.dtype, chunks=value.shape,
                         overwrite=True, compressors=codecs("zstd"))
    arr[...] = value


def test_array_replaced_by_another_shape_is_refused(skpca_copy):
    replace_array(skpca_copy / "state", "components_", np.ones((3, 5)))
    refused(skpca_copy, "components_ has shape (3, 5)", "recorded (3, 16)")


def test_consistent_edit_of_the_wrong_shape_names_the_expected_shape(skpca_copy):
    replace_array(skpca_copy / "state", "components_", np.ones((4, 16)))
    edit_attrs(skpca_copy, lambda a: a["state"]["components_"].update({"shape": [4, 16]}))
    refused(skpca_copy, "components_ has shape (4, 16)", "expected (n_components, width) = (3,")


def test_arrays_that_do_not_fit_together_are_a_store_error_not_matmul(rff_copy):
    replace_array(rff_copy / "state", "random_weights_", np.ones((7, 16)))
    edit_attrs(rff_copy, lambda a: a["state"]["random_weights_"].update({"shape": [7, 16]}))
    # as saved before the digests (which refuse this edit first): the probe is what refuses it
    manifest = rff_copy / "distsketch-manifest.json"
    manifest.write_text(json.dumps({k: v for k, v in json.loads(manifest.read_text()).items()
                                    if k != "digests"}))
    err = refused(rff_copy, "do not fit together", "random_weights_ (7, 16)")
    assert "unexpected" not in str(err)


def test_non_numeric_array_is_refused(rff_copy):
    g = zarr.open_group(str(rff_copy / "state"), mode="r+")
    g.create_array("random_offset_", shape=(16,), dtype=str, overwrite=True)[...] = \
        np.array(["x"] * 16)
    refused(rff_copy, "random_offset_", "not numeric")


def chunk_of(store: Path, name: str) -> Path:
    chunks = [p for p in (store / "state" / name / "c").rglob("*") if p.is_file()]
    assert len(chunks) == 1
    return chunks[0]


def test_missing_chunk_is_refused(rff_copy):
    chunk_of(rff_copy, "random_weights_").unlink()
    refused(rff_copy, "random_weights_", "missing chunk")


def test_corrupt_chunk_is_refused(rff_copy):
    chunk_of(rff_copy, "random_weights_").write_bytes(b"\x00garbage" * 5)
    refused(rff_copy, "random_weights_", "corrupt")


def test_all_zero_arrays_are_stored_and_not_mistaken_for_lost(tmp_path):
    # an all-zero array equals Zarr's fill value; it is still written as a chunk
    rff = RandomFourierFeatures(n_components=4, random_state=0).fit(X)
    rff.random_offset_ = np.zeros_like(rff.random_offset_)
    back = load(rff.save(tmp_path / "m.zarr"))
    np.testing.assert_array_equal(back.random_offset_, np.zeros(4))
    assert chunk_of(tmp_path / "m.zarr", "random_offset_").exists()


# --- the CLI goes through the same load and leaves no output --------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def input_store(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("input") / "in.zarr"
    arr = zarr.create_array(store=str(p), shape=X.shape, dtype=X.dtype, chunks=(60, 5))
    arr[...] = X
    return p


@pytest.mark.system
@pytest.mark.parametrize("damage, needle", [
    ("missing", "missing chunk"),
    ("corrupt", "corrupt"),
    ("class", "'subprocess.Popen'"),
])
def test_transform_cli_refuses_a_damaged_model_and_writes_nothing(rff_copy, input_store, tmp_path,
                                                                 damage, needle):
    if damage == "missing":
        chunk_of(rff_copy, "random_weights_").unlink()
    elif damage == "corrupt":
        chunk_of(rff_copy, "random_weights_").write_bytes(b"not a chunk")
    else:
        edit_attrs(rff_copy, lambda a: a.update({"class": "subprocess.Popen"}))
    out_dir = tmp_path / "outputs"
    out_dir.mkdir()
    before_model, before_input = snapshot(rff_copy), snapshot(input_store)
    res = cli("transform", rff_copy, input_store, out_dir / "Z.zarr", "--cluster", "sync")
    assert res.returncode == 2, res.stderr
    assert "distsketch: error:" in res.stderr and needle in res.stderr
    assert "unexpected" not in res.stderr
    assert list(out_dir.iterdir()) == []  # no output, no .tmp-* leftover
    assert snapshot(rff_copy) == before_model and snapshot(input_store) == before_input


def test_a_model_of_the_first_format_is_refused_with_the_fix(rff_copy):
    # format 1 stores recorded neither versions nor array shapes, nor checksums
    def strip(a):
        del a["format"], a["versions"]
        for d in a["state"].values():
            d.pop("shape", None), d.pop("dtype", None)
    edit_attrs(rff_copy, strip)
    refused(rff_copy, "format 1", "older than the format 3", "Re-fit and re-save")


def test_a_newer_format_is_refused_with_the_fix(rff_copy):
    edit_attrs(rff_copy, lambda a: a.update({"format": 99}))
    refused(rff_copy, "format 99", "upgrade distsketch")


def test_nothing_in_the_package_unpickles_or_imports_names_from_files():
    import distsketch

    root = Path(distsketch.__file__).parent
    for path in root.rglob("*.py"):
        src = path.read_text()
        rel = path.relative_to(root).as_posix()
        assert "allow_pickle=True" not in src, rel
        assert "pickle.load" not in src or rel == "testing.py", rel
        for i, line in enumerate(src.splitlines(), 1):
            if "np.load(" in line and "``" not in line:
                assert "allow_pickle=False" in line, f"{rel}:{i}"
        if "import_module(" in src:
            # only fixed tables import by name: the registry, the lazy top-level names, the
            # CLI's commands, the cluster extras, the report's version list and the old
            # module paths (each package's own table, tests/test_module_aliases.py)
            assert rel in {"registry.py", "__init__.py", "cli/__init__.py", "cluster/spec.py",
                           "workflow/report.py", "module_aliases.py"}, rel


def test_numpy_dtypes_round_trip_as_names(tmp_path):
    rff = RandomFourierFeatures(n_components=4, random_state=0).fit(X)
    rff.dtype_, rff.out_dtype_ = np.float32, np.dtype("<f8")
    back = load(rff.save(tmp_path / "m.zarr"))
    assert back.dtype_ is np.float32 and back.out_dtype_ == np.dtype("<f8")
    attrs = json.loads((tmp_path / "m.zarr" / "zarr.json").read_text())["attributes"]
    assert attrs["state"]["dtype_"] == {"__dtype__": "<f4", "type": True}


@pytest.mark.parametrize("scaler", ["StandardScaler", "MinMaxScaler", "MaxAbsScaler",
                                    "RobustScaler", "Normalizer", "PCA"])
@pytest.mark.parametrize("model", ["LogisticRegression", "LinearSVC", "Ridge",
                                   "LinearRegression", "LinearSVR"])
def test_pipelines_with_scikit_learn_scalers_and_linear_models_round_trip(tmp_path, scaler,
                                                                          model):
    # the steps a user puts around distsketch: a scaler before, a linear model after
    import sklearn.decomposition
    import sklearn.linear_model
    import sklearn.preprocessing
    import sklearn.svm

    find = {m: getattr(mod, m) for mod in (sklearn.preprocessing, sklearn.decomposition,
                                            sklearn.linear_model, sklearn.svm)
            for m in dir(mod) if m in (scaler, model)}
    rng = np.random.default_rng(4)
    Xs = rng.normal(size=(120, 5))
    classify = model in ("LogisticRegression", "LinearSVC")
    y = np.array(["ant", "bee", "cat"])[rng.integers(0, 3, 120)] if classify else Xs[:, 0]
    first = find[scaler](n_components=3) if scaler == "PCA" else find[scaler]()
    pipe = make_pipeline(first, RandomFourierFeatures(n_components=24, random_state=0),
                         find[model]()).fit(Xs, y)
    back = load(save_model(pipe, tmp_path / "pipe.zarr"))
    np.testing.assert_array_equal(back.predict(Xs), pipe.predict(Xs))
    if classify:
        assert back.predict(Xs).dtype == pipe.predict(Xs).dtype  # the user's labels


def test_a_scikit_learn_model_that_needs_private_state_is_refused_on_save(tmp_path):
    from sklearn.linear_model import RidgeClassifier

    pipe = make_pipeline(StandardScaler(), RidgeClassifier()).fit(X, X[:, 0] > 0)
    with pytest.raises(StoreError, match="RidgeClassifier"):
        save_model(pipe, tmp_path / "p.zarr")
    assert not (tmp_path / "p.zarr").exists()
