"""A labelled store from the command line: ``ingest --label-column`` stores y beside X, and
``fit`` uses it for a supervised method without ``--y``, names the supervised methods for
an unsupervised one, and the hints suggest a classifier for class labels and a regressor
for numeric targets; numbered class labels (1..7) come back as integers."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch import load
from distsketch.cli.labels import integer_class_targets, store_labels, target_kind
from distsketch.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NAMES = np.array(["T", "I", "D", "N"])


def _write_csv(path: Path, labels: np.ndarray, X: np.ndarray, fmt: str = "{}") -> None:
    with open(path, "w") as f:
        f.write("label," + ",".join(f"f{j}" for j in range(X.shape[1])) + "\n")
        for label, row in zip(labels, X):
            f.write(fmt.format(label) + "," + ",".join(f"{v:.5f}" for v in row) + "\n")


def _clusters(labels: np.ndarray, classes: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = {c: 6.0 * np.eye(4)[i % 4] + 3.0 * (i // 4) for i, c in enumerate(classes)}
    return np.stack([centres[c] for c in labels]) + rng.normal(size=(labels.size, 4))


def _main(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *argv) -> dict:
    code, out, err = _main(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Three ingested tables: string classes, class numbers 1..7, and a price."""
    d = tmp_path_factory.mktemp("labelled")
    rng = np.random.default_rng(0)
    names = NAMES[rng.integers(0, NAMES.size, 300)]
    _write_csv(d / "letters.csv", names, _clusters(names, NAMES, 1))
    numbers = rng.integers(1, 8, 300)
    _write_csv(d / "numbers.csv", numbers, _clusters(numbers, np.arange(1, 8), 2))
    Xp = rng.normal(size=(300, 4))
    price = 120.0 + 30.0 * Xp[:, 0] + 5.0 * Xp[:, 1] ** 2
    _write_csv(d / "price.csv", price, Xp, "{:.2f}")
    np.save(d / "plain.npy", Xp.astype(np.float32))
    # module fixtures cannot use capsys: the commands' output goes nowhere
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for name in ("letters", "numbers", "price"):
            assert cli.main(["-q", "ingest", str(d / f"{name}.csv"), str(d / f"{name}.zarr"),
                             "--label-column", "label"]) == 0
        assert cli.main(["-q", "ingest", str(d / "plain.npy"), str(d / "plain.zarr")]) == 0
    return d, names, numbers, price


def test_supervised_fit_uses_the_store_labels_and_says_so(stores, tmp_path, capsys):
    d, names, *_ = stores
    store = d / "letters.zarr"
    res = _json(capsys, "fit", store, tmp_path / "auto.zarr", "--method",
                "SketchedKernelRidgeClassifier", "--cluster", "sync")
    assert res["targets"] == f"{store}::y" and res["targets_from_input"] is True
    model = load(tmp_path / "auto.zarr")
    assert sorted(model.classes_.tolist()) == sorted(set(names.tolist()))
    # the same model as with the labels named explicitly
    _json(capsys, "fit", store, tmp_path / "named.zarr", "--method",
          "SketchedKernelRidgeClassifier", "--y", f"{store}::y", "--cluster", "sync")
    X = zarr.open_group(str(store), mode="r")["X"][...]
    np.testing.assert_array_equal(model.predict(X), load(tmp_path / "named.zarr").predict(X))
    # the text result says where the targets came from
    code, out, err = _main(capsys, "fit", store, tmp_path / "text.zarr", "--method",
                           "SketchedKernelRidgeClassifier", "--cluster", "sync")
    assert code == 0, err
    assert f"with the labels {store}::y stored with the input" in out
    assert f"targets: the labels {store}::y stored with {store}" in err


def test_supervised_fit_without_labels_names_the_ways_to_give_them(stores, tmp_path, capsys):
    d, *_ = stores
    out = tmp_path / "m.zarr"
    args = cli.build_parser().parse_args(["fit", str(d / "plain.zarr"), str(out), "--method",
                                          "SketchedKernelRidge", "--cluster", "sync"])
    with pytest.raises(ConfigError) as info:
        args.func(args)
    message = str(info.value)
    assert "SketchedKernelRidge is supervised: pass its targets with --y" in message
    assert f"{d / 'plain.zarr'} holds no labels of its own" in message
    assert "--label-column NAME" in message
    assert not out.exists()


def test_unsupervised_fit_on_a_labelled_store_names_the_supervised_methods(stores, tmp_path,
                                                                            capsys):
    d, *_ = stores
    code, out, err = _main(capsys, "fit", d / "letters.zarr", tmp_path / "k.zarr", "-q",
                           "--cluster", "sync")
    assert code == 0, err
    assert type(load(tmp_path / "k.zarr")).__name__ == "StreamingKernelPCA"
    note = out.splitlines()[-1]
    assert note.startswith(f"note: {d / 'letters.zarr'}::y holds the labels stored by ingest, "
                           "which StreamingKernelPCA does not use")
    assert "--method SketchedKernelRidgeClassifier for class labels" in note
    for name in ("regressors KernelPCR", "NystromKernelRidgeClassifier", "SketchedKernelRidge."):
        assert name in note
    # a price: the regressor
    res = _json(capsys, "fit", d / "price.zarr", tmp_path / "p.zarr", "--cluster", "sync")
    assert res["targets"] is None
    assert "--method SketchedKernelRidge for numeric targets" in res["labels_note"]
    assert "SketchedKernelRidgeClassifier for" not in res["labels_note"]
    # no labels: no note
    res = _json(capsys, "fit", d / "plain.zarr", tmp_path / "n.zarr", "--cluster", "sync")
    assert res["labels_note"] is None


@pytest.mark.parametrize("command", ["score", "predict"])
def test_hint_suggests_the_regressor_for_numeric_targets(stores, tmp_path, capsys, command):
    d, *_ = stores
    assert cli.main(["-q", "fit", str(d / "plain.zarr"), str(tmp_path / "k.zarr"),
                     "--cluster", "sync"]) == 0
    expected = {"price": ("--method SketchedKernelRidge --y", "Classifier"),
                "letters": ("--method SketchedKernelRidgeClassifier --y", "quantities")}
    for name, (hint, absent) in expected.items():
        store = d / f"{name}.zarr"
        argv = (["score", str(tmp_path / "k.zarr"), str(store), "--y", f"{store}::y"]
                if command == "score" else
                ["predict", str(tmp_path / "k.zarr"), str(store), str(tmp_path / "p.zarr")])
        args = cli.build_parser().parse_args([*argv, "--cluster", "sync"])
        with pytest.raises(ConfigError) as info:
            args.func(args)
        message = str(info.value)
        assert "StreamingKernelPCA, which has no predict" in message
        assert f"`distsketch fit {store} model.zarr {hint} {store}::y`" in message
        assert absent not in message
        assert not (tmp_path / "p.zarr").exists()


def test_numbered_class_labels_come_back_as_integers(stores, tmp_path, capsys):
    d, _, numbers, _ = stores
    store = d / "numbers.zarr"
    # a CSV's numbers are stored as float64 targets
    assert zarr.open_group(str(store), mode="r")["y"].dtype == np.float64
    _json(capsys, "fit", store, tmp_path / "m.zarr", "--method",
          "SketchedKernelRidgeClassifier", "--y", f"{store}::y", "--cluster", "sync")
    model = load(tmp_path / "m.zarr")
    assert model.classes_.dtype == np.int64
    np.testing.assert_array_equal(model.classes_, np.unique(numbers))
    _json(capsys, "predict", tmp_path / "m.zarr", store, tmp_path / "p.zarr", "--cluster", "sync")
    P = zarr.open_group(str(tmp_path / "p.zarr"), mode="r")["predictions"]
    assert P.dtype == np.int64
    assert set(np.unique(P[...]).tolist()) <= set(numbers.tolist())
    assert np.mean(P[...] == numbers) > 0.9
    res = _json(capsys, "score", tmp_path / "m.zarr", store, "--y", f"{store}::y",
                "--cluster", "sync")
    assert res["accuracy"] == pytest.approx(np.mean(P[...] == numbers))


def test_integer_class_targets_converts_whole_numbers_only():
    whole = da.from_array(np.array([1.0, 7.0, 3.0, 7.0]), chunks=2)
    out = integer_class_targets(whole)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out.compute(), [1, 7, 3, 7])
    for values in ([1.0, 2.5], [1.0, np.nan], [1.0, 2.0**60]):
        y = da.from_array(np.array(values), chunks=1)
        assert integer_class_targets(y).dtype == np.float64
    text = da.from_array(np.array(["a", "b"]), chunks=1)
    assert integer_class_targets(text) is text


def test_store_labels_and_target_kind(stores):
    d, *_ = stores
    assert store_labels(str(d / "letters.zarr")) == f"{d / 'letters.zarr'}::y"
    assert store_labels(f"{d / 'letters.zarr'}::X") == f"{d / 'letters.zarr'}::y"
    # another array of the store, or a store without labels: none
    assert store_labels(f"{d / 'letters.zarr'}::y") is None
    assert store_labels(str(d / "plain.zarr")) is None
    kinds = {name: target_kind(f"{d / name}.zarr::y") for name in ("letters", "numbers", "price")}
    assert kinds == {"letters": "classes", "numbers": "integers", "price": "numbers"}
    assert target_kind(f"{d / 'nothing.zarr'}::y") is None
