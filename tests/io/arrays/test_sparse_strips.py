"""The CSR strip store: round trip, manifest last, nothing left behind on failure, no links."""

from __future__ import annotations

import pickle
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from distsketch.errors import StoreError
from distsketch.io import read_manifest
from distsketch.io.arrays.sparse_strips import CSRStripReader, write_csr_strips
from distsketch.io.storage.codecs import has_checksum


def _strips(rng):
    A = sp.random_array((30, 30), density=0.2, random_state=rng, format="csr")
    A = sp.tril(A + A.T, format="csr")
    bounds = [(0, 12), (12, 30)]
    return A, bounds, [sp.csr_array(A[r0:r1, :r1]) for r0, r1 in bounds]


def test_round_trip_equals_the_written_strips(tmp_path):
    A, bounds, strips = _strips(np.random.default_rng(0))
    path = tmp_path / "g.zarr"
    with write_csr_strips(path, attrs={"n": 30}, manifest={"kind": "test"}) as w:
        for s, m in enumerate(strips):
            w.strip(s, m)
        w.diagonal(A.diagonal())
    reader = pickle.loads(pickle.dumps(CSRStripReader(str(path))))  # travels to workers
    for s, (r0, r1) in enumerate(bounds):
        got = reader.strip(s, (r1 - r0, r1))
        np.testing.assert_array_equal(got.toarray(), strips[s].toarray())
    assert read_manifest(path)["kind"] == "test"


def test_failure_inside_the_block_leaves_no_store(tmp_path):
    _, _, strips = _strips(np.random.default_rng(1))
    path = tmp_path / "g.zarr"
    with pytest.raises(RuntimeError, match="boom"), \
            write_csr_strips(path, attrs={}, manifest={"kind": "test"}) as w:
        w.strip(0, strips[0])
        raise RuntimeError("boom")
    assert not path.exists()
    assert not [p for p in tmp_path.iterdir()]


def test_strip_linked_to_another_store_is_refused_and_strips_are_checksummed(tmp_path):
    A, _, strips = _strips(np.random.default_rng(1))
    for name in ("g.zarr", "other.zarr"):
        with write_csr_strips(tmp_path / name, attrs={"n": 30}, manifest={"kind": "t"}) as w:
            for s, m in enumerate(strips):
                w.strip(s, m)
            w.diagonal(A.diagonal())
    assert has_checksum(zarr.open_array(str(tmp_path / "g.zarr" / "strips" / "0" / "data")))
    folder = tmp_path / "g.zarr" / "strips" / "1"
    shutil.rmtree(folder)
    folder.symlink_to(tmp_path / "other.zarr" / "strips" / "1", target_is_directory=True)
    with pytest.raises(StoreError, match="symbolic link"):
        CSRStripReader(str(tmp_path / "g.zarr"))
