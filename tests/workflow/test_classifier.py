"""Classifiers in workflows: classes from a pre-pass over the targets or from the spec,
kept in the state for incremental runs; a failed run leaves its lock free."""

from __future__ import annotations

import fcntl
import json
import os

import numpy as np
import pytest
import zarr
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import RidgeClassifier

import distsketch
from distsketch import RandomFourierFeatures, SketchedKernelRidgeClassifier
from distsketch.errors import ConfigError, StoreError, WorkflowError
from distsketch.io import open_array
from distsketch.workflow import load_workflow_spec, run_workflow

GAMMA, M, SEED = 1.0, 100, 3


def make(n, seed):
    """Three classes in the plane: a disc and the two halves around it."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, 2))
    y = np.where(np.hypot(X[:, 0], X[:, 1]) < 0.7, 0, np.where(X[:, 0] > 0, 1, 2))
    return X, y.astype(np.int64)


def write(path, a, chunk=100):
    arr = zarr.create_array(store=str(path), shape=a.shape, dtype=a.dtype,
                            chunks=(chunk, *a.shape[1:]), overwrite=True)
    arr[...] = a


def append(path, new):
    arr = zarr.open_array(str(path), mode="r+")
    n = arr.shape[0]
    arr.resize((n + new.shape[0], *arr.shape[1:]))
    arr[n:] = new


def spec(tmp, **params):
    return {
        "input": str(tmp / "X.zarr"), "targets": str(tmp / "y.zarr"), "seed": SEED,
        "segment_rows": 200,
        # raw columns: the folded model then equals one fit (partial_fit would standardise
        # with the first segment's moments)
        "method": {"name": "SketchedKernelRidgeClassifier", "params": {
            "features": RandomFourierFeatures(gamma=GAMMA, n_components=M), "standardize": False,
            **params}},
        "outputs": {"dir": str(tmp / "out")}, "cluster": "sync", "report": {"kernel_error": False},
    }


def quiet(msg):
    pass


def lock_is_free(out):
    """True when a new open file description can take the run's flock at once."""
    fd = os.open(out / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def state_classes(tmp):
    return json.loads((tmp / "out" / "state" / "state.json").read_text())["classes"]["values"]


def test_classifier_workflow_end_to_end(tmp_path):
    X, y = make(800, 0)
    Xt, yt = make(1000, 1)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    r = run_workflow(spec(tmp_path), log=quiet)
    assert r.status == "full" and r.segments == 4
    assert state_classes(tmp_path) == [0, 1, 2]  # the pre-pass, sorted as np.unique
    model = distsketch.load(tmp_path / "out" / "result" / "model.zarr")
    np.testing.assert_array_equal(model.classes_, np.unique(y))
    # four merged segments equal one fit on all rows (exact sufficient statistics)
    ref = SketchedKernelRidgeClassifier(features=RandomFourierFeatures(gamma=GAMMA, n_components=M),
                                        standardize=False, random_state=SEED).fit(X, y)
    np.testing.assert_allclose(model.decision_function(Xt), ref.decision_function(Xt),
                               rtol=1e-7, atol=1e-9)
    # the workflow writes its predictions on its input to predictions.zarr
    pred = open_array(str(tmp_path / "out" / "result" / "predictions.zarr"), targets=True).compute()
    np.testing.assert_array_equal(pred, model.predict(X))
    # scikit-learn at equal gamma, width and alpha, with its own random draw.  Over five
    # feature seeds on this set each accuracy varies with sd < 0.01 (binomial sd at 1000
    # test rows: 0.006), so two independent draws differ by < 0.03 (3 sd of the difference)
    rbf = RBFSampler(gamma=GAMMA, n_components=M, random_state=SEED).fit(X)
    sk = RidgeClassifier(alpha=1.0).fit(rbf.transform(X), y).score(rbf.transform(Xt), yt)
    ours = model.score(Xt, yt)
    assert abs(ours - sk) < 0.03, (ours, sk)
    assert ours > 0.9  # far above the majority class (about 0.57)


def test_classes_from_the_spec(tmp_path):
    X, y = make(400, 0)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    loaded = load_workflow_spec(spec(tmp_path, classes=[2, 0, 1]))
    assert loaded.method.params["classes"] == [0, 1, 2]
    run_workflow(loaded, log=quiet)
    model = distsketch.load(tmp_path / "out" / "result" / "model.zarr")
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    assert state_classes(tmp_path) == [0, 1, 2]
    # a label the spec does not list is refused, naming it and the fix
    write(tmp_path / "y.zarr", np.where(y == 2, 9, y))
    with pytest.raises(WorkflowError, match=r"label 9.*method.params.classes.*--full"):
        run_workflow(spec(tmp_path, classes=[0, 1, 2]), full=True, log=quiet)
    assert lock_is_free(tmp_path / "out")


@pytest.mark.parametrize("classes", [[1], [1, 1], [0, "a"], [True, False], "0,1", [0, float("nan")]])
def test_bad_classes_refused_when_the_spec_is_loaded(tmp_path, classes):
    with pytest.raises(ConfigError, match=r"method\.params\.classes must list every label once"):
        load_workflow_spec(spec(tmp_path, classes=classes))


def test_incremental_keeps_classes_and_refuses_a_new_label(tmp_path):
    X, y = make(1000, 0)
    write(tmp_path / "X.zarr", X[:400])
    write(tmp_path / "y.zarr", y[:400])
    run_workflow(spec(tmp_path), log=quiet)
    append(tmp_path / "X.zarr", X[400:600])
    append(tmp_path / "y.zarr", y[400:600])
    r = run_workflow(spec(tmp_path), log=quiet)
    assert r.status == "incremental" and (r.rows_before, r.rows_after) == (400, 600)
    assert state_classes(tmp_path) == [0, 1, 2]
    model = distsketch.load(tmp_path / "out" / "result" / "model.zarr")
    ref = SketchedKernelRidgeClassifier(features=RandomFourierFeatures(gamma=GAMMA, n_components=M),
                                        standardize=False, random_state=SEED).fit(X[:600], y[:600])
    # segments and one pass sum the summary in another order: equal to rounding of the
    # m x m solve, whose last bits also depend on the CPU's BLAS kernel
    np.testing.assert_allclose(model.decision_function(X[600:]), ref.decision_function(X[600:]),
                               rtol=1e-6, atol=1e-7)
    # appended rows with a label never seen: a clear error, the lock is free, the result kept
    y_new = y[600:800].copy()
    y_new[17] = 7
    append(tmp_path / "X.zarr", X[600:800])
    append(tmp_path / "y.zarr", y_new)
    with pytest.raises(WorkflowError, match=r"rows 600\.\.800 hold the label 7.*--full"):
        run_workflow(spec(tmp_path), log=quiet)
    assert lock_is_free(tmp_path / "out")
    assert (tmp_path / "out" / ".lock").read_text() == ""  # names no holder
    kept = distsketch.load(tmp_path / "out" / "result" / "model.zarr")
    np.testing.assert_array_equal(kept.coef_, model.coef_)
    # --full learns the classes again, with the new label
    r = run_workflow(spec(tmp_path), full=True, log=quiet)
    assert r.status == "full" and state_classes(tmp_path) == [0, 1, 2, 7]


def test_failed_pre_pass_leaves_the_lock_free(tmp_path):
    X, y = make(400, 0)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    (tmp_path / "y.zarr" / "c" / "2").write_bytes(b"\x00garbage")  # rows 200..300
    with pytest.raises(StoreError, match=r"rows 0\.\.400 of the targets"):
        run_workflow(spec(tmp_path), log=quiet)
    assert lock_is_free(tmp_path / "out")
    assert not (tmp_path / "out" / "state").exists()  # nothing was checkpointed
    # a classifier without targets is refused before anything is read
    no_targets = spec(tmp_path)
    del no_targets["targets"]
    with pytest.raises(ConfigError, match="needs targets"):
        run_workflow(no_targets, log=quiet)
    assert lock_is_free(tmp_path / "out")


def test_class_names_from_an_ingested_csv(tmp_path):
    """String labels of a CSV label column: the workflow fits, predicts and scores the names."""
    from distsketch.io.readers import ingest

    X, y = make(600, 4)
    names = np.array(["disc", "east", "west"])[y]
    with open(tmp_path / "t.csv", "w") as f:
        for label, row in zip(names, X):
            f.write(f"{label},{row[0]:.17g},{row[1]:.17g}\n")
    ingest(tmp_path / "t.csv", tmp_path / "t.zarr", label_column=0, dtype="float64",
           chunk_rows=100)
    s = {**spec(tmp_path), "input": f"{tmp_path / 't.zarr'}::X",
         "targets": f"{tmp_path / 't.zarr'}::y"}
    r = run_workflow(s, log=quiet)
    assert r.status == "full"
    assert state_classes(tmp_path) == ["disc", "east", "west"]
    model = distsketch.load(tmp_path / "out" / "result" / "model.zarr")
    pred = zarr.open_group(str(tmp_path / "out" / "result" / "predictions.zarr"),
                           mode="r")["predictions"][:]
    np.testing.assert_array_equal(np.array(pred.tolist()), model.predict(X))
    assert np.mean(model.predict(X) == names) > 0.9


def test_segment_merge_weighs_rows_by_a_class_weight_dict():
    import copy

    from sklearn.datasets import load_digits

    from distsketch.workflow.window import folds_ahead

    X, y = load_digits(return_X_y=True)
    X, y = X[:300], y[:300]
    kw = dict(features=RandomFourierFeatures(gamma=0.02, n_components=32, random_state=0),
              alpha=0.5, standardize=False, class_weight={3: 4.0, 8: 0.5}, random_state=0)
    est = SketchedKernelRidgeClassifier(**kw).partial_fit(X[:120], y[:120], classes=np.arange(10))
    assert folds_ahead(SketchedKernelRidgeClassifier)
    summary = copy.deepcopy(est).summarize(X[120:], y[120:], row_offset=120)
    est.fold(summary)
    full = SketchedKernelRidgeClassifier(**kw).fit(X, y)
    np.testing.assert_allclose(est.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    assert est.n_samples_seen_ == 300
    balanced = copy.deepcopy(est)
    balanced.class_weight = "balanced"
    with pytest.raises(ConfigError, match="balanced"):
        balanced.summarize(X[120:], y[120:], row_offset=120)
