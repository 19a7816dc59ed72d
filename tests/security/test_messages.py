"""Error messages that name the right thing, and a slow input that is not silent.

* huge ``sample_weight`` / ``class_weight``: the weights are named (with the
  row, the class and the fix), never the data X;
* ``--json`` with an option argparse refuses: still one JSON object on stdout;
* an unreadable claim or lock object on S3: named as unreadable (its URL and
  the error), not as a missing bucket or another writer called "?";
* a store in more tiny chunks than ``ingest`` writes: a ``PerformanceWarning``
  naming the chunk shape, the count and a rechunk that works.

Every case asserts the error (or warning) class, what the message names and,
where something would be written, that nothing was.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch import RandomFourierFeatures, SketchedKernelRidge, SketchedKernelRidgeClassifier
from distsketch.errors import ConfigError, InputError, PerformanceWarning, StoreError
from distsketch.estimators.ridge.weights import MAX_WEIGHT_SUM
from distsketch.io import open_array, resolve, write_array
from distsketch.io.readers.ingest import MAX_SMALL_CHUNKS, MIN_CHUNK_BYTES
from distsketch.io.storage.claims import WriterClaim

N = 40


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 3))
    y = rng.normal(size=N)
    return X, y, (y > 0).astype(int)


# ------------------------------------------------------------------ weights
def _names_weights_not_data(msg: str, name: str) -> None:
    assert f"{name} is too large" in msg
    assert "X is not the problem" in msg and "Weights are relative" in msg
    assert "too large for kernel computations" not in msg and "Scale the data" not in msg


@pytest.mark.parametrize("lazy", [False, True])
def test_huge_sample_weight_is_named_with_its_row_and_fix(data, lazy):
    import dask.array as da

    X, y, _ = data
    w = np.full(N, 1e200)
    w[7] = 3e200
    Xin = da.from_array(X, chunks=10) if lazy else X
    with pytest.raises(InputError) as err:
        SketchedKernelRidge(random_state=0).fit(Xin, y, sample_weight=w)
    msg = str(err.value)
    _names_weights_not_data(msg, "sample_weight")
    assert "SketchedKernelRidge.fit" in msg and "at row 7" in msg and "3e+200" in msg
    # the advice works: the same weights divided by the largest fit
    model = SketchedKernelRidge(random_state=0).fit(Xin, y, sample_weight=w / w.max())
    assert np.all(np.isfinite(np.asarray(model.predict(X))))


def test_sample_weight_beyond_float64_in_partial_fit(data):
    X, y, _ = data
    with pytest.raises(InputError) as err:
        SketchedKernelRidge(random_state=0).partial_fit(
            X, y, sample_weight=np.full(N, 1e300))
    msg = str(err.value)
    _names_weights_not_data(msg, "sample_weight")
    assert "partial_fit" in msg and "beyond float64's range" not in msg  # 4e301 is finite


def test_huge_class_weight_is_a_config_error_naming_the_class(data):
    X, _, yc = data
    clf = SketchedKernelRidgeClassifier(class_weight={0: 1e300, 1: 1}, random_state=0)
    with pytest.raises(ConfigError) as err:
        clf.fit(X, yc)
    msg = str(err.value)
    assert "class_weight[0] = 1e+300 is too large" in msg
    assert "Class weights are relative" in msg and "X is not the problem" in msg
    assert "too large for kernel computations" not in msg
    assert not hasattr(clf, "coef_")


def test_class_weights_whose_total_overflows_name_the_row_and_class(data):
    X, _, yc = data
    first = int(np.flatnonzero(yc == 1)[0])
    each = 0.6 * MAX_WEIGHT_SUM  # one row is fine, the class's rows together are not
    with pytest.raises(InputError) as err:
        SketchedKernelRidgeClassifier(class_weight={1: each}, random_state=0).fit(X, yc)
    msg = str(err.value)
    _names_weights_not_data(msg, "class_weight")
    assert f"at row {first} (class 1)" in msg and "every class weight" in msg


def test_sample_weight_times_class_weight_names_both(data):
    X, _, yc = data
    each = MAX_WEIGHT_SUM ** 0.75 / N  # each factor alone is fine, their product is not
    with pytest.raises(InputError) as err:
        SketchedKernelRidgeClassifier(class_weight={0: each, 1: 1}, random_state=0).fit(
            X, yc, sample_weight=np.full(N, each))
    msg = str(err.value)
    _names_weights_not_data(msg, "sample_weight × class_weight")
    assert "(class 0)" in msg and "the sample_weight or the class weights" in msg


def test_bad_sample_weight_names_the_row(data):
    X, y, _ = data
    w = np.ones(N)
    w[5] = -2.0
    with pytest.raises(InputError, match=r"row 5 has weight -2\.0"):
        SketchedKernelRidge(random_state=0).fit(X, y, sample_weight=w)


# ------------------------------------------------------------------ CLI --json
def _one_json_error(out: str, command: str | None) -> dict:
    body = json.loads(out)  # exactly one JSON object on stdout, nothing else
    assert set(body) == {"command", "error", "exit_code"}
    assert body["command"] == command and body["exit_code"] == 2
    return body


@pytest.mark.parametrize("command", cli.SUBCOMMANDS)
@pytest.mark.parametrize("json_first", [False, True])
def test_json_usage_error_is_one_json_object(command, json_first, tmp_path, capsys):
    required = ["--y", str(tmp_path / "y")] if command == "score" else []
    argv = [command, *(str(tmp_path / p) for p in "abc"), *required, "--no-such-option"]
    argv = ["--json", *argv] if json_first else [*argv, "--json"]
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    body = _one_json_error(captured.out, command)
    assert "--no-such-option" in body["error"] and f"distsketch {command} --help" in body["error"]
    assert "usage:" in captured.err  # argparse's text stays on stderr
    said = captured.err.strip().splitlines()[-1].split(": error: ", 1)[1]
    assert body["error"].startswith(said)
    assert list(tmp_path.iterdir()) == []


def test_json_bad_option_value_and_no_command(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(tmp_path / "spec.yaml"), "--connect-timeout", "soon", "--json"])
    assert exc.value.code == 2
    body = _one_json_error(capsys.readouterr().out, "run")
    assert "--connect-timeout" in body["error"] and "'soon'" in body["error"]
    assert cli.main(["--json"]) == 2
    assert "no command given" in _one_json_error(capsys.readouterr().out, None)["error"]
    # without --json the refusal stays argparse's text only
    with pytest.raises(SystemExit):
        cli.main(["run", "--no-such-option"])
    assert capsys.readouterr().out == ""


# ------------------------------------------------------------------ S3 claim/lock objects
def _deny_reading(monkeypatch, loc):
    """The filesystem refuses GetObject on ``loc`` only (access denied, as S3 answers)."""
    fs = loc.fs
    real = fs.cat_file

    def cat_file(path, *args, **kwargs):
        if str(path).rstrip("/").endswith(loc.path.rstrip("/")):
            raise PermissionError(f"Access Denied: {path}")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(fs, "cat_file", cat_file)


def test_unreadable_claim_object_is_not_a_missing_bucket(s3, monkeypatch):
    url, so = s3.url() + "/out.zarr", s3.storage_options
    claim = WriterClaim(resolve(url, so)).loc
    body = json.dumps({"token": "t", "owner": "elsewhere:1", "started": 0}).encode()
    claim.fs.pipe_file(claim.path, body)
    _deny_reading(monkeypatch, claim)
    with pytest.raises(StoreError) as err:
        write_array(np.ones((10, 3), np.float32), url, storage_options=so)
    msg = str(err.value)
    assert f"the claim object {claim.url} is unreadable" in msg
    assert "PermissionError: Access Denied" in msg and "s3:GetObject" in msg
    assert "bucket" not in msg and "cannot write" not in msg
    monkeypatch.undo()
    assert not s3.fs.exists(resolve(url, so).path)  # nothing written
    assert claim.fs.cat_file(claim.path) == body  # the claim is left as it was


def test_claim_object_with_a_corrupt_body_is_named_unreadable(s3):
    url, so = s3.url() + "/out.zarr", s3.storage_options
    claim = WriterClaim(resolve(url, so)).loc
    claim.fs.pipe_file(claim.path, b"\x00not json")
    with pytest.raises(StoreError) as err:
        write_array(np.ones((10, 3), np.float32), url, storage_options=so)
    msg = str(err.value)
    assert f"the claim object {claim.url} of {resolve(url, so).url} is unreadable" in msg
    assert "its body is not JSON" in msg and f"delete {claim.url} and rerun" in msg
    assert "another writer (?" not in msg and " s ago" not in msg
    assert not s3.fs.exists(resolve(url, so).path)
    assert claim.fs.cat_file(claim.path) == b"\x00not json"


def test_unreadable_lock_object_is_not_a_missing_bucket(s3, monkeypatch):
    folder = resolve(s3.url() + "/runs", s3.storage_options)
    lock = folder.child(".lock")
    lock.fs.pipe_file(lock.path, b"{}")
    _deny_reading(monkeypatch, lock)
    with pytest.raises(StoreError) as err:
        with folder.run_lock(False):
            pass
    msg = str(err.value)
    assert f"the lock object {lock.url} is unreadable (PermissionError" in msg
    assert "bucket" not in msg and "cannot write" not in msg
    monkeypatch.undo()
    assert lock.fs.cat_file(lock.path) == b"{}"


# ------------------------------------------------------------------ tiny chunks
def _foreign_store(path, n_rows: int, d: int = 4):
    """A store another tool wrote, one row per chunk (zarr.create_array chunks=(1, d))."""
    X = np.random.default_rng(1).normal(size=(n_rows, d)).astype(np.float32)
    arr = zarr.create_array(str(path), shape=X.shape, chunks=(1, d), dtype="float32")
    arr[:] = X
    return X


def _tiny_chunk_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, PerformanceWarning)]


def test_store_in_one_row_chunks_warns_with_a_rechunk_that_works(tmp_path):
    assert 4 * 4 < MIN_CHUNK_BYTES  # a 1 x 4 float32 chunk is tiny
    src = tmp_path / "foreign.zarr"
    X = _foreign_store(src, MAX_SMALL_CHUNKS + 1)
    with pytest.warns(PerformanceWarning) as record:
        model = RandomFourierFeatures(n_components=8, random_state=0).fit(str(src))
    (msg,) = _tiny_chunk_warnings(record)
    assert f"Zarr array {src}" in msg
    assert f"{MAX_SMALL_CHUNKS + 1} chunks of shape (1, 4)" in msg
    assert f"ingest refuses more than {MAX_SMALL_CHUNKS} chunks under 64 KiB" in msg
    # the valid store is read as it is
    with pytest.warns(PerformanceWarning, match=r"chunks of shape \(1, 4\)"):
        from_store = np.asarray(model.transform(str(src)))
    np.testing.assert_allclose(np.asarray(model.transform(X)), from_store, rtol=1e-6)
    # the command named in the warning rechunks it; the copy reads the same, silently
    code = re.search(r'python -c "(.+?)"', msg).group(1)
    dst = tmp_path / "rechunked.zarr"
    with pytest.warns(PerformanceWarning):  # reading the source one last time
        exec(code.replace("DST.zarr", str(dst)), {})  # the message's own command
    rows = int(re.search(r"chunk_rows=(\d+)", code).group(1))
    assert rows == MAX_SMALL_CHUNKS + 1  # ingest's default: all rows here (under 8 MiB)
    out = zarr.open_group(str(dst), mode="r")["X"]
    assert out.chunks == (rows, 4)
    with _no_warning() as quiet:
        np.testing.assert_array_equal(open_array(str(dst)).compute(), X)
        # ingest's own limit: up to MAX_SMALL_CHUNKS tiny chunks are read silently
        _foreign_store(tmp_path / "at-the-limit.zarr", MAX_SMALL_CHUNKS)
        open_array(str(tmp_path / "at-the-limit.zarr"))
    assert not _tiny_chunk_warnings(quiet)


class _no_warning:
    """Record every warning of a block (pytest.warns insists on at least one)."""

    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings(record=True)
        record = self._cm.__enter__()
        warnings.simplefilter("always")
        return record

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def test_cli_json_carries_the_tiny_chunk_warning(tmp_path, capsys):
    src = tmp_path / "foreign.zarr"
    _foreign_store(src, MAX_SMALL_CHUNKS + 200)
    model = tmp_path / "model.zarr"
    assert cli.main(["fit", str(src), str(model), "--method", "RandomFourierFeatures",
                     "--param", "n_components=8",
                     "--cluster", "sync", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    hits = [w for w in body["warnings"] if "chunks of shape (1, 4)" in w]
    assert hits and "PerformanceWarning" in hits[0] and "chunk_rows=" in hits[0]
