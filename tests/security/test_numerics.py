"""No silent NaN, zeros or wrong rows: parameters, data magnitude, outputs, casts, readers.

Every case asserts the error class, that the message names the problem (the
first bad row, the parameter, the stage), that no NaN output came back and,
where a store would be written, that none (and no temporary sibling) was left.
"""

from __future__ import annotations

import gzip
import importlib
import json
import tracemalloc
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import distsketch.cli as cli
from distsketch import (
    NystromKernelPCA,
    PolySketch,
    RandomFourierFeatures,
    SketchedKernelRidge,
    StreamingKernelPCA,
    registry,
)
from distsketch.errors import ConfigError, DistsketchError, InputError, MemoryBudgetError
from distsketch.io import fingerprint, ingest, open_array, write_array
from distsketch.ops.kernels import max_row_sqnorm
from distsketch.validation import (
    MAX_GAMMA,
    FiniteRows,
    cast_checked,
    check_finite_block,
    check_finite_result,
    check_input,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning",
                                        "ignore::RuntimeWarning")

SYNC = ["--cluster", "sync"]  # in process: no local cluster to start
RNG = np.random.default_rng(7)
X = RNG.normal(size=(80, 4))
Y = X[:, 0] - 2 * X[:, 1]


def _classes() -> list[tuple[str, type]]:
    return [(name, getattr(importlib.import_module(mod), name))
            for name, mod in registry.ESTIMATORS.items()]


def _y_for(name: str) -> np.ndarray:
    return (Y > 0).astype(int) if "Classifier" in name else Y


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---------------------------------------------------------------- parameters

GAMMA_CLASSES = [(n, c) for n, c in _classes() if "gamma" in c._parameter_constraints]


@pytest.mark.parametrize("name,cls", GAMMA_CLASSES, ids=[n for n, _ in GAMMA_CLASSES])
@pytest.mark.parametrize("gamma", [np.inf, 1e308, float("nan"), 10 * MAX_GAMMA])
def test_overflowing_gamma_is_refused_by_validation(name, cls, gamma):
    with pytest.raises(ConfigError, match=r"gamma="):
        cls(gamma=gamma).fit(X, _y_for(name))


@pytest.mark.parametrize("params,fragment", [
    ({"coef0": np.inf}, "coef0=inf is invalid; it must be a finite float"),
    ({"coef0": 1e300}, "coef0=1e+300 is invalid; it must be finite with |coef0| <="),
    ({"degree": 200, "gamma": 100.0}, "are invalid together: (gamma + |coef0|) ** degree = 10**400"),
    ({"degree": 2, "gamma": 1e200}, "gamma=1e+200 is invalid"),
])
def test_polynomial_parameters_whose_kernel_value_overflows_are_refused(params, fragment):
    with pytest.raises(ConfigError) as info:
        PolySketch(**params).fit(X)
    assert fragment in str(info.value)


def test_degree_is_not_judged_for_a_kernel_that_ignores_it():
    # the rbf kernel does not use degree: a large one must not be refused
    model = NystromKernelPCA(kernel="rbf", degree=500, gamma=5.0, n_components=2,
                             random_state=0).fit(X)
    assert np.all(np.isfinite(model.transform(X)))


@pytest.mark.parametrize("alpha", [np.inf, float("nan")])
def test_infinite_regularisation_is_refused(alpha):
    with pytest.raises(ConfigError, match="alpha"):
        SketchedKernelRidge(alpha=alpha, random_state=0).fit(X, Y)


def test_cli_fit_refuses_infinite_gamma_and_writes_nothing(tmp_path, capsys):
    write_array(X.astype(np.float32), tmp_path / "in.zarr")
    code = cli.main(["fit", str(tmp_path / "in.zarr"), str(tmp_path / "m.zarr"),
                     "--method", "RandomFourierFeatures", "--gamma", "inf", *SYNC])
    assert code == 2
    assert "gamma" in capsys.readouterr().err
    assert not (tmp_path / "m.zarr").exists()
    assert _leftovers(tmp_path) == ["in.zarr"]


# ------------------------------------------------------- data magnitude (input)

ALL = _classes()


@pytest.mark.parametrize("name,cls", ALL, ids=[n for n, _ in ALL])
def test_rows_too_large_for_kernels_are_refused_naming_the_first(name, cls):
    bad = X.copy()
    bad[17, 2] = 1e300       # finite, but its squared norm is not
    bad[40, 1] = -1e300
    with pytest.raises(InputError, match=r"row 17 is too large") as info:
        cls().fit(bad, _y_for(name))
    assert "contains NaN" not in str(info.value) and "Scale" in str(info.value)


@pytest.mark.parametrize("make", [
    lambda A: da.from_array(A, chunks=(16, 4)),
    lambda A: sp.csr_matrix(A),
], ids=["dask", "sparse"])
def test_magnitude_check_names_the_global_row_for_blocked_input(make):
    bad = X.copy()
    bad[37, 0] = 3e200       # third block of 16 rows
    with pytest.raises(InputError, match=r"row 37 is too large"):
        with dask.config.set(scheduler="sync"):
            StreamingKernelPCA(random_state=0).fit(make(bad))


def test_float32_rows_are_judged_in_float32():
    bad = X.astype(np.float32)
    bad[5, 3] = 1e20        # 1e40 squared: inf in float32, finite in float64
    assert 1e40 > max_row_sqnorm(np.float32)
    with pytest.raises(InputError, match=r"row 5 .*float32.*float64"):
        StreamingKernelPCA(random_state=0).fit(bad)
    # the same row in float64 is fine
    Z = RandomFourierFeatures(random_state=0).fit(X).transform(bad.astype(np.float64))
    assert np.all(np.isfinite(Z))


def test_transform_of_an_oversized_row_is_an_error_not_nan():
    model = NystromKernelPCA(n_components=3, random_state=0).fit(X)
    bad = X.copy()
    bad[61] = 1e300
    with pytest.raises(InputError, match=r"row 61"):
        model.transform(bad)
    lazy = model.transform(da.from_array(bad, chunks=(20, 4)))
    with pytest.raises(InputError, match=r"row 61"):
        lazy.compute(scheduler="sync")


def test_large_but_safe_rows_still_fit():
    # the rule refuses only what overflows: 1e150 has a finite squared norm in float64
    big = X * 1e150
    Z = RandomFourierFeatures(gamma=1e-300, random_state=0).fit(big).transform(big)
    assert np.all(np.isfinite(Z))


# ------------------------------------------------------------ stage outputs


def test_a_transform_producing_inf_names_the_stage_and_row():
    X32 = X.astype(np.float32)
    model = PolySketch(degree=4, n_components=16, random_state=0).fit(X32)
    bad = X32.copy()
    bad[23] *= 1e10          # passes the input check; x^4 overflows float32
    with pytest.raises(InputError, match=r"stage 'PolySketch transform' produced Inf at row 23"):
        model.transform(bad)
    with pytest.raises(InputError, match=r"produced Inf at row 23"):
        model.transform(da.from_array(bad, chunks=(10, 4))).compute(scheduler="sync")


def test_finite_rows_wrapper_checks_every_block_with_its_global_row():
    def half_bad(block, offset):
        out = block.copy()
        if offset <= 12 < offset + len(block):
            out[12 - offset, 0] = np.nan
        return out

    wrapped = FiniteRows(half_bad, "toy stage")
    assert np.array_equal(wrapped(X[:10], 0), X[:10])
    with pytest.raises(InputError, match=r"stage 'toy stage' produced NaN at row 12"):
        wrapped(X[10:20], 10)
    assert dask.base.tokenize(wrapped) == dask.base.tokenize(FiniteRows(half_bad, "toy stage"))
    assert dask.base.tokenize(wrapped) != dask.base.tokenize(FiniteRows(half_bad, "other"))


def test_finite_block_and_result_helpers():
    ok = np.ones((3, 2))
    assert check_finite_block(ok, stage="s") is ok
    bad = ok.copy()
    bad[2, 1] = np.inf
    with pytest.raises(InputError, match=r"stage 's' produced Inf at row 102"):
        check_finite_block(bad, stage="s", row_start=100)
    with pytest.raises(InputError, match=r"stage 'eigh' produced NaN"):
        check_finite_result(ok, np.array([np.nan]), stage="eigh")
    check_finite_result(ok, None, np.arange(3), stage="fine")


def test_fit_time_factorisation_input_is_checked(monkeypatch):
    # a NaN appearing mid-computation (here: in the summary) names the stage, not LinAlgError
    import distsketch.estimators.decomposition.streaming_kpca as skpca

    real = skpca._eig_components

    def poisoned(ztz):
        ztz = np.array(ztz, dtype=np.float64)
        ztz[0, 0] = np.nan
        return real(ztz)

    monkeypatch.setattr(skpca, "_eig_components", poisoned)
    with pytest.raises(InputError, match=r"streaming KPCA covariance eigendecomposition"):
        StreamingKernelPCA(method="rnca", random_state=0).fit(X)


# ------------------------------------------------------- narrowing conversions


def test_float64_to_float32_cast_refuses_out_of_range_values():
    bad = X.copy()
    bad[9, 1] = 1e300
    with pytest.raises(InputError, match=r"row 9 holds 1e\+300, which float32 cannot"):
        check_input(bad, dtype=np.float32)
    lazy = check_input(da.from_array(bad, chunks=(4, 4)), dtype=np.float32)
    with pytest.raises(InputError, match=r"row 9 holds"):
        lazy.compute(scheduler="sync")
    with pytest.raises(InputError, match=r"row 9 holds"):
        check_input(sp.csr_matrix(bad), dtype=np.float32, allow_sparse=True)
    # in range: the same values as numpy's cast
    good = check_input(X, dtype=np.float32)
    assert np.array_equal(good, X.astype(np.float32))


@pytest.mark.parametrize("values,dtype,row", [
    (np.array([[1], [2], [300]], dtype=np.int32), np.int8, 2),
    (np.array([[1], [-70000]], dtype=np.int64), np.int16, 1),
    (np.array([[1.0], [2.5]]), np.int32, 1),
    (np.array([[1.0], [np.nan]]), np.int64, 1),
    (np.array([[-1], [5]], dtype=np.int64), np.uint8, 0),
])
def test_integer_narrowing_refuses_the_first_offending_row(values, dtype, row):
    with pytest.raises(InputError, match=rf"row {row} holds"):
        cast_checked(values, dtype, where="v")


def test_widening_and_precision_only_casts_pass_unchanged():
    big = np.array([[2**40], [3]], dtype=np.int64)
    assert np.array_equal(cast_checked(big, np.float32, where="v"), big.astype(np.float32))
    small = np.array([[1], [2]], dtype=np.int8)
    assert cast_checked(small, np.int64, where="v").dtype == np.int64


def test_ingest_refuses_a_value_beyond_float32_naming_the_row(tmp_path, capsys):
    A = X.copy()
    A[5, 0] = 1e300
    np.save(tmp_path / "a.npy", A)
    with pytest.raises(InputError, match=r"row 5 holds 1e\+300.*float32"):
        ingest(tmp_path / "a.npy", tmp_path / "a.zarr", dtype="float32")
    assert _leftovers(tmp_path) == ["a.npy"]
    # the CLI stores float32 by default: the same refusal, naming the fix
    assert cli.main(["ingest", str(tmp_path / "a.npy"), str(tmp_path / "b.zarr")]) == 2
    err = capsys.readouterr().err
    assert "row 5" in err and "--dtype" in err and "NaN" not in err
    assert _leftovers(tmp_path) == ["a.npy"]
    # float64 keeps it exactly
    out = open_array(ingest(tmp_path / "a.npy", tmp_path / "c.zarr", dtype="float64"))
    assert np.array_equal(np.asarray(out[:]), A)


def test_ingest_refuses_integer_narrowing_with_the_line(tmp_path):
    (tmp_path / "a.csv").write_text("1,2\n3,4\n5,300\n")
    with pytest.raises(InputError, match=r"row 2 \(line 3\) holds 300"):
        ingest(tmp_path / "a.csv", tmp_path / "a.zarr", dtype="int8")
    assert _leftovers(tmp_path) == ["a.csv"]


# ------------------------------------------------------------------ readers


def test_csv_byte_order_mark_is_not_data(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"\xef\xbb\xbf1.5,2\r\n3,4\r\n")
    out = np.asarray(open_array(ingest(tmp_path / "a.csv", tmp_path / "a.zarr"))[:])
    assert np.array_equal(out, [[1.5, 2.0], [3.0, 4.0]])
    (tmp_path / "h.csv").write_bytes(b"\xef\xbb\xbfa,b\n1,2\n")
    out = np.asarray(open_array(ingest(tmp_path / "h.csv", tmp_path / "h.zarr"))[:])
    assert np.array_equal(out, [[1.0, 2.0]])


def test_svmlight_byte_order_mark_is_not_data(tmp_path):
    (tmp_path / "a.svm").write_bytes(b"\xef\xbb\xbf1 1:2 3:4\n-1 2:5\n")
    path = ingest(tmp_path / "a.svm", tmp_path / "a.zarr")
    assert np.array_equal(np.asarray(open_array(path)[:]), [[2, 0, 4], [0, 5, 0]])
    assert np.array_equal(zarr.open_array(str(path) + "/y", mode="r")[:], [1, -1])


def test_quoted_csv_fields_are_one_field(tmp_path):
    (tmp_path / "q.csv").write_text('"1.5","2"\n"3",4 # note\n"5","6#"\n')
    with pytest.raises(InputError, match=r"line 3, column 2: '6#' is not a number"):
        ingest(tmp_path / "q.csv", tmp_path / "q.zarr")
    (tmp_path / "ok.csv").write_text('"1.5","2"\n"3",4 # note\n')
    out = np.asarray(open_array(ingest(tmp_path / "ok.csv", tmp_path / "ok.zarr"))[:])
    assert np.array_equal(out, [[1.5, 2.0], [3.0, 4.0]])


def test_quoted_field_holding_the_delimiter_is_refused_as_such(tmp_path):
    (tmp_path / "q.csv").write_text('1,2\n"3,5",4\n')
    with pytest.raises(InputError) as info:
        ingest(tmp_path / "q.csv", tmp_path / "q.zarr")
    msg = str(info.value)
    assert "line 2, column 1: '3,5' is not a number" in msg and "quoted field" in msg
    assert "ragged" not in msg and "fields" not in msg.split("(")[0]
    assert _leftovers(tmp_path) == ["q.csv"]


@pytest.mark.parametrize("content,fragment", [
    (b"1 2147483648:1\n", "implies 2147483648 features"),
    (b"1 99999999999999999999999:1\n", "beyond any usable width"),
    (b"1 1:1\n0 -3:2\n", "negative feature index -3"),
], ids=["huge-index", "overflowing-index", "negative-index"])
def test_svmlight_absurd_indices_are_refused_before_allocation(tmp_path, content, fragment):
    (tmp_path / "a.svm").write_bytes(content)
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=fragment):
            ingest(tmp_path / "a.svm", tmp_path / "a.zarr")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    assert _leftovers(tmp_path) == ["a.svm"]


def test_svmlight_declared_width_bounds_indices_and_memory(tmp_path, capsys):
    (tmp_path / "a.svm").write_bytes(b"1 1:1 9:2\n")
    with pytest.raises(InputError, match=r"index 9 needs at least 9 features but n_features=4"):
        ingest(tmp_path / "a.svm", tmp_path / "a.zarr", n_features=4)
    with pytest.raises(MemoryBudgetError, match=r"nothing was allocated"):
        ingest(tmp_path / "a.svm", tmp_path / "a.zarr", n_features=2**40)
    assert cli.main(["ingest", str(tmp_path / "a.svm"), str(tmp_path / "b.zarr"),
                     "--n-features", "4"]) == 2
    assert "n_features=4" in capsys.readouterr().err
    assert _leftovers(tmp_path) == ["a.svm"]


def test_svmlight_zero_index_with_one_based_is_refused(tmp_path):
    (tmp_path / "a.svm").write_bytes(b"1 0:1 2:3\n")
    with pytest.raises(InputError, match="index 0"):
        ingest(tmp_path / "a.svm", tmp_path / "a.zarr", zero_based=False)
    out = np.asarray(open_array(ingest(tmp_path / "a.svm", tmp_path / "z.zarr"))[:])
    assert np.array_equal(out, [[1, 0, 3]])


def test_compressed_idx_with_an_absurd_header_is_refused_before_reading(tmp_path):
    header = bytes([0, 0, 0x0D, 3]) + np.array([1, 2**15, 2**15], dtype=">u4").tobytes()
    with gzip.open(tmp_path / "x-idx3-ubyte.gz", "wb") as f:
        f.write(header + b"\0" * 16)
    with pytest.raises(DistsketchError, match="implies 1073741824 features"):
        ingest(tmp_path / "x-idx3-ubyte.gz", tmp_path / "x.zarr")
    assert _leftovers(tmp_path) == ["x-idx3-ubyte.gz"]


# -------------------------------------------------------------- fingerprints


def test_fingerprint_states_the_rows_it_describes(tmp_path):
    path = write_array(X.astype(np.float32), tmp_path / "in.zarr", chunk_rows=16)
    whole = fingerprint(open_array(path), path=path)
    assert whole["rows"] == 80 and whole == fingerprint(str(path))
    assert fingerprint(open_array(path), n_rows=30)["rows"] == 30


def test_cli_fit_manifest_fingerprints_the_rows_it_read(tmp_path):
    path = write_array(X.astype(np.float32), tmp_path / "in.zarr", chunk_rows=16)
    assert cli.main(["fit", str(path), str(tmp_path / "m.zarr"), "--method",
                     "RandomFourierFeatures", *SYNC]) == 0
    info = zarr.open_group(str(tmp_path / "m.zarr"), mode="r").attrs["info"]
    recorded = (json.loads(info) if isinstance(info, str) else info)["input_fingerprint"]
    assert recorded["rows"] == 80
    assert recorded["sample_hash"] == fingerprint(str(path))["sample_hash"]


@pytest.mark.parametrize("cls,attr,stage", [
    ("SketchedKernelRidge", "intercept_", "ridge predict"),
    ("KernelSolver", "dual_coef_", "KernelSolver predict"),
    ("KernelPCR", "coef_", "k-space projection"),
    ("MEKAKernelRidge", "coef_", "MEKA ridge predict"),
])
@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_a_corrupted_model_predicts_an_error_not_nan(cls, attr, stage, lazy):
    params = {"n_components": 5} if cls == "KernelPCR" else {}
    est = getattr(importlib.import_module("distsketch"), cls)(random_state=0, **params).fit(X, Y)
    coef = np.full(np.shape(getattr(est, attr)), np.nan)
    setattr(est, attr, coef)
    data = da.from_array(X, chunks=(25, 4)) if lazy else X
    with pytest.raises(InputError, match=rf"stage .{stage}. produced NaN at row \d+"):
        out = est.predict(data)
        if lazy:
            out.compute(scheduler="sync")


def test_check_finite_output_numbers_rows_globally_for_dask():
    from distsketch.validation import check_finite_output

    Z = np.zeros((30, 2))
    Z[27, 1] = np.nan
    with pytest.raises(InputError, match=r"stage 'tiles' produced NaN at row 27"):
        check_finite_output(da.from_array(Z, chunks=(10, 2)), stage="tiles").compute()
    with pytest.raises(InputError, match=r"produced NaN at row 27"):
        check_finite_output(Z, stage="tiles")


def test_cli_fit_and_transform_refuse_oversized_rows_and_write_nothing(tmp_path, capsys):
    bad = X.copy()
    bad[50, 3] = 1e300
    write_array(bad, tmp_path / "bad.zarr", chunk_rows=16)
    write_array(X, tmp_path / "good.zarr", chunk_rows=16)
    before = _leftovers(tmp_path)
    assert cli.main(["fit", str(tmp_path / "bad.zarr"), str(tmp_path / "m.zarr"),
                     "--method", "NystromKernelPCA", *SYNC]) == 2
    err = capsys.readouterr().err
    assert "row 50 is too large" in err and "NaN or Inf" not in err
    assert _leftovers(tmp_path) == before
    assert cli.main(["fit", str(tmp_path / "good.zarr"), str(tmp_path / "m.zarr"),
                     "--method", "NystromKernelPCA", *SYNC]) == 0
    capsys.readouterr()
    assert cli.main(["transform", str(tmp_path / "m.zarr"), str(tmp_path / "bad.zarr"),
                     str(tmp_path / "Z.zarr"), *SYNC]) == 2
    assert "row 50 is too large" in capsys.readouterr().err
    assert _leftovers(tmp_path) == sorted([*before, "m.zarr"])
