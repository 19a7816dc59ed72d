"""Class labels in every classifier are read as scikit-learn reads them."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr
from sklearn.datasets import load_digits
from sklearn.exceptions import DataConversionWarning
from sklearn.preprocessing import LabelEncoder

from distsketch import KernelPCRClassifier, RandomFourierFeatures, SketchedKernelRidgeClassifier
from distsketch.errors import InputError
from distsketch.estimators.labels import decode_labels, encode_labels

RNG = np.random.default_rng(0)
X = RNG.normal(size=(240, 5))
# three classes from a nonlinear rule, as integer codes 0, 1, 2
CODES = (X[:, 0] * X[:, 1] > 0).astype(int) + (X[:, 2] > 0.8).astype(int)
NAMES = np.array(["cat", "dog", "emu"])


def _pcr():
    return KernelPCRClassifier(n_components=12, degree=2, random_state=0)


def _ridge():
    return SketchedKernelRidgeClassifier(
        features=RandomFourierFeatures(gamma=0.2, n_components=64, random_state=0), alpha=0.1,
        standardize=False)  # partial_fit equals fit on raw columns (not on first-batch moments)


CLASSIFIERS = {"KernelPCRClassifier": _pcr, "SketchedKernelRidgeClassifier": _ridge}

# each kind of labels with the codes it stands for (sorted order = code order)
LABELS = {
    "int": lambda c: c * 7 - 3,
    "str": lambda c: NAMES[c],
    "object": lambda c: pd.Series(NAMES[c]).astype(str).to_numpy(),
    "bool": lambda c: c > 0,
    "categorical": lambda c: pd.Series(pd.Categorical(NAMES[c])),
    "pandas-Int64": lambda c: pd.Series(c * 7 - 3, dtype="Int64"),
    "pandas-string": lambda c: pd.Series(NAMES[c], dtype="string"),
    "float": lambda c: c.astype(np.float64) + 10.0,
}


def _codes_for(kind):
    return (CODES > 0).astype(int) if kind == "bool" else CODES


def test_digits_object_labels_predict_the_labels():
    # object-dtype labels (what pandas gives for strings) were cast to float: accuracy 0.000
    Xd, yd = load_digits(return_X_y=True)
    Xd, yd = Xd[:900] / 16.0, yd[:900]
    y_obj = pd.Series(yd).astype(str).to_numpy()
    assert y_obj.dtype == object
    tr, te = slice(0, 600), slice(600, 900)
    clf = KernelPCRClassifier(n_components=60, degree=3, gamma=1 / 8, random_state=0)
    acc = clf.fit(Xd[tr], y_obj[tr]).score(Xd[te], y_obj[te])
    ref = KernelPCRClassifier(n_components=60, degree=3, gamma=1 / 8, random_state=0)
    ref.fit(Xd[tr], yd[tr])
    assert clf.classes_.dtype == object
    np.testing.assert_array_equal(clf.classes_, [str(i) for i in range(10)])
    pred = clf.predict(Xd[te])
    assert pred.dtype == object
    # the same model as with integer labels: identical predictions, mapped to the strings
    np.testing.assert_array_equal(pred, ref.predict(Xd[te]).astype(str))
    assert acc == ref.score(Xd[te], yd[te]) > 0.85


@pytest.mark.parametrize("kind", list(LABELS))
@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_every_label_kind_gives_the_integer_model_and_the_labels_back(name, kind):
    codes = _codes_for(kind)
    y = LABELS[kind](codes)
    ref_classes = LabelEncoder().fit(np.asarray(y)).classes_
    clf = CLASSIFIERS[name]().fit(X, y)
    ref = CLASSIFIERS[name]().fit(X, codes)
    np.testing.assert_array_equal(clf.classes_, ref_classes)
    assert clf.classes_.dtype == ref_classes.dtype
    # the ±1 targets depend only on the class order: the same scores bit for bit
    np.testing.assert_array_equal(clf.decision_function(X), ref.decision_function(X))
    pred = clf.predict(X)
    assert pred.dtype == ref_classes.dtype
    np.testing.assert_array_equal(pred, ref_classes[ref.predict(X)])
    assert clf.score(X, y) == ref.score(X, codes)
    assert clf.score(X, y) > 0.6  # chance is below 0.5 on these classes
    lazy = clf.predict(da.from_array(X, chunks=(70, 5)))
    assert lazy.dtype == ref_classes.dtype
    np.testing.assert_array_equal(lazy.compute(), pred)


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_dask_and_zarr_labels(name):
    y = NAMES[CODES]
    ref = CLASSIFIERS[name]().fit(X, y)
    yd = da.from_array(CODES, chunks=50)
    clf = CLASSIFIERS[name]().fit(da.from_array(X, chunks=(50, 5)), yd)
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])
    np.testing.assert_array_equal(NAMES[clf.predict(X)], ref.predict(X))
    z = zarr.create_array(zarr.storage.MemoryStore(), shape=CODES.shape, dtype=CODES.dtype,
                          chunks=(64,))
    z[...] = CODES
    clf_z = CLASSIFIERS[name]().fit(X, z)
    np.testing.assert_array_equal(clf_z.predict(X), clf.predict(X))


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_regression_target_is_refused(name):
    with pytest.raises(InputError, match=r"continuous.*regression"):
        CLASSIFIERS[name]().fit(X, X[:, 0])
    # float labels that are not whole numbers are real values too (as in scikit-learn)
    with pytest.raises(InputError, match="continuous"):
        CLASSIFIERS[name]().fit(X, CODES + 0.5)


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_bad_labels_are_named(name):
    mixed = NAMES[CODES].astype(object)
    mixed[3] = 7
    with pytest.raises(InputError, match="one kind"):
        CLASSIFIERS[name]().fit(X, mixed)
    with_nan = CODES.astype(float)
    with_nan[5] = np.nan
    with pytest.raises(InputError, match="NaN"):
        CLASSIFIERS[name]().fit(X, with_nan)
    with pytest.raises(InputError, match="only one class"):
        CLASSIFIERS[name]().fit(X, np.full(len(X), "a"))
    with pytest.raises(InputError, match="multi-output"):
        CLASSIFIERS[name]().fit(X, np.stack([CODES, CODES], axis=1))
    with pytest.warns(DataConversionWarning):
        col = CLASSIFIERS[name]().fit(X, NAMES[CODES][:, None])
    np.testing.assert_array_equal(col.predict(X), CLASSIFIERS[name]().fit(X, NAMES[CODES]).predict(X))


def test_partial_fit_classes_keep_their_dtype():
    y = pd.Series(NAMES[CODES]).astype(str).to_numpy()
    full = _ridge().fit(X, y)
    inc = _ridge()
    inc.partial_fit(X[:100], y[:100], classes=np.array(["emu", "cat", "dog"], dtype=object))
    inc.partial_fit(X[100:], NAMES[CODES[100:]])  # the same labels as a <U array
    assert inc.classes_.dtype == object
    np.testing.assert_array_equal(inc.classes_, full.classes_)
    np.testing.assert_allclose(inc.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(inc.predict(X), full.predict(X))
    with pytest.raises(InputError, match=r"'yak' .*row 1.*not one of classes"):
        inc.partial_fit(X[:3], np.array(["cat", "yak", "dog"]))


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_object_labels_survive_save_and_load(name, tmp_path):
    from distsketch.io.model.store import load

    y = pd.Series(NAMES[CODES]).astype(str).to_numpy()
    clf = CLASSIFIERS[name]().fit(X, y)
    clf.save(tmp_path / "m")
    back = load(tmp_path / "m")
    assert back.classes_.dtype == object
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))


def test_encode_decode_round_trip():
    y = np.array([True, False, True, True])
    classes, codes = encode_labels(y, 4, owner="T")
    np.testing.assert_array_equal(classes, [False, True])
    np.testing.assert_array_equal(decode_labels(classes, codes), y)
    with pytest.raises(InputError, match="has 4 rows but X has 5"):
        encode_labels(y, 5, owner="T")
    lazy = decode_labels(classes, da.from_array(codes, chunks=2))
    np.testing.assert_array_equal(lazy.compute(), y)
