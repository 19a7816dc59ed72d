"""The one input fingerprint: whole input and row prefixes."""

from __future__ import annotations

import hashlib

import dask.array as da
import numpy as np
import pytest

from distsketch import StreamingKernelPCA
from distsketch.io import fingerprint, write_array
from distsketch.ops.random import hash_bucket


def _reference_prefix_hash(X, stop: int, seed: int) -> str:
    """The prefix hash workflow checkpoints have stored so far, written out plainly."""
    if stop <= 0:
        return "empty"
    parts = [X[: min(stop, 512)], X[max(0, stop - 512): stop]]
    if stop > 1024:
        starts = hash_bucket(seed, "workflow.fingerprint", np.arange(16, dtype=np.int64),
                             max(1, stop - 16))
        parts += [X[int(s): int(s) + 16] for s in np.sort(starts)]
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{stop}:{X.shape[1]}:{X.dtype}".encode())
    for a in parts:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def A() -> np.ndarray:
    return np.random.default_rng(5).normal(size=(3000, 4)).astype(np.float32)


@pytest.mark.parametrize("stop", [0, 1, 700, 1024, 1025, 2999])
def test_prefix_hash_matches_stored_checkpoints(A, stop):
    got = fingerprint(da.from_array(A, chunks=(250, 4)), n_rows=stop, seed=11)
    assert got["sample_hash"] == _reference_prefix_hash(A, stop, 11)
    assert got["rows"] == stop and got["shape"] == [3000, 4]


def test_prefix_ignores_appended_rows_but_not_changed_ones(A):
    grown = np.concatenate([A, np.ones((500, 4), np.float32)])
    assert fingerprint(grown, n_rows=3000, seed=1)["sample_hash"] == \
        fingerprint(A, n_rows=3000, seed=1)["sample_hash"]
    changed = A.copy()
    changed[10] += 1
    assert fingerprint(changed, n_rows=3000, seed=1)["sample_hash"] != \
        fingerprint(A, n_rows=3000, seed=1)["sample_hash"]
    assert fingerprint(A, n_rows=3000, seed=1) != fingerprint(A, n_rows=2999, seed=1)


def test_whole_input_same_for_path_and_array(tmp_path, A):
    path = write_array(A, tmp_path / "a.zarr", chunk_rows=300)
    by_path = fingerprint(str(path))
    by_array = fingerprint(A)
    assert by_path["path"] == str(path) and "path" not in by_array
    assert by_path["sample_hash"] == by_array["sample_hash"]
    assert by_path["shape"] == [3000, 4] and by_path["dtype"] == "float32"


def test_fit_from_store_fingerprints_once(tmp_path, A, monkeypatch):
    import distsketch.io.arrays.fingerprints as fp

    path = write_array(A, tmp_path / "a.zarr", chunk_rows=300)
    calls = []
    real = fp.fingerprint
    monkeypatch.setattr(fp, "fingerprint",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    import distsketch.io as dio

    monkeypatch.setattr(dio, "fingerprint", fp.fingerprint)
    model = StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=4,
                               random_state=0).fit(str(path))
    assert len(calls) == 1
    assert model.fingerprint_ == fingerprint(str(path))
