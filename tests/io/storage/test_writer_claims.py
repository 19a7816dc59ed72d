"""Two writers of one object-store destination: the second gets a StoreError, and one
output is never silently replaced by the other (the claim object of io.storage.claims)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import uuid

import numpy as np
import pytest

from distsketch.errors import StoreError
from distsketch.io import open_array, resolve, write_array
from distsketch.io.commit.publish import atomic_output
from distsketch.io.storage.claims import WriterClaim

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

A = np.full((40, 3), 1.0, np.float32)
B = np.full((40, 3), 2.0, np.float32)


@pytest.fixture(params=["s3", "memory"])
def dest(request):
    if request.param == "s3":
        s3 = request.getfixturevalue("s3")
        return s3.url() + "/out.zarr", s3.storage_options
    return f"memory://claims-{uuid.uuid4().hex[:10]}/out.zarr", None


def claim_of(url, so):
    return WriterClaim(resolve(url, so)).loc


def test_second_writer_is_refused_while_the_first_writes(dest):
    url, so = dest
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first():
        try:
            with atomic_output(url, storage_options=so) as tmp:
                write_array(A, tmp.url, storage_options=so, name="X")
                inside.set()
                release.wait()
        except BaseException as exc:  # reported to the test
            errors.append(exc)
            inside.set()

    t = threading.Thread(target=first)
    t.start()
    inside.wait()
    try:
        with pytest.raises(StoreError, match=r"another writer .* is writing") as err:
            write_array(B, url, storage_options=so, overwrite=True)
        assert resolve(url, so).url in str(err.value)
        assert "nothing was written by this one" in str(err.value)
    finally:
        release.set()
        t.join()
    assert not errors
    # the first writer's output is committed and intact; its claim is gone
    np.testing.assert_array_equal(open_array(url, storage_options=so).compute(), A)
    loc = claim_of(url, so)
    assert not loc.fs.exists(loc.path)


def test_writer_whose_claim_was_taken_publishes_nothing(dest):
    """Two writers that claimed at once: the one whose claim is not there refuses at commit."""
    url, so = dest
    write_array(A, url, storage_options=so)
    with pytest.raises(StoreError, match="took the destination over"):
        with atomic_output(url, overwrite=True, storage_options=so) as tmp:
            write_array(B, tmp.url, storage_options=so, name=None)
            # the other writer's claim replaces this one's (the race a plain put allows)
            loc = claim_of(url, so)
            loc.fs.pipe_file(loc.path, json.dumps({"token": "other", "owner": "elsewhere:1",
                                                   "started": 0}).encode())
    np.testing.assert_array_equal(open_array(url, storage_options=so).compute(), A)
    loc = claim_of(url, so)
    assert loc.fs.exists(loc.path)  # the other writer's claim is left to it


def test_claim_of_a_killed_writer_on_this_host_is_taken_over(dest):
    url, so = dest
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(proc.stdout)
    loc = claim_of(url, so)
    loc.fs.pipe_file(loc.path, json.dumps({"token": "t", "owner": f"{socket.gethostname()}:{dead}",
                                           "started": 0}).encode())
    write_array(A, url, storage_options=so)
    np.testing.assert_array_equal(open_array(url, storage_options=so).compute(), A)
    assert not loc.fs.exists(loc.path)


def test_claim_of_a_writer_elsewhere_is_refused_with_what_to_do(dest):
    url, so = dest
    loc = claim_of(url, so)
    loc.fs.pipe_file(loc.path, json.dumps({"token": "t", "owner": "otherhost:12",
                                           "started": 0}).encode())
    with pytest.raises(StoreError, match="otherhost:12") as err:
        write_array(A, url, storage_options=so)
    assert f"delete its claim {loc.url}" in str(err.value)
    assert not loc.fs.exists(resolve(url, so).path)  # nothing was written


def test_conditional_put_refuses_an_existing_claim(s3):
    """On S3 the claim is created with If-None-Match: only one of two can create it."""
    url = s3.url() + "/cond.zarr"
    first, second = WriterClaim(resolve(url, s3.storage_options)), \
        WriterClaim(resolve(url, s3.storage_options))
    assert first._create() and not second._create()
    first.held = True
    first.release()
    assert second._create()


def test_append_to_a_url_store_is_refused_while_another_writer_holds_it(s3, tmp_path):
    from distsketch.io import append, ingest

    url, so = s3.url() + "/data.zarr", s3.storage_options
    np.save(tmp_path / "a.npy", A)
    ingest(tmp_path / "a.npy", url, storage_options=so)
    loc = claim_of(url, so)
    loc.fs.pipe_file(loc.path, json.dumps({"token": "t", "owner": "otherhost:12",
                                           "started": 0}).encode())
    with pytest.raises(StoreError, match="otherhost:12"):
        append(url, B, storage_options=so)
    loc.fs.rm_file(loc.path)
    append(url, B, storage_options=so)
    np.testing.assert_array_equal(open_array(url, storage_options=so).compute(), np.vstack([A, B]))
    assert not loc.fs.exists(loc.path)
