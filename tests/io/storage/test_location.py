"""The storage protocol: one Location subclass per storage kind, asked instead of branched on.

A local path is a LocalLocation (folder swaps, symbolic links checked), any
other fsspec URL an FsspecLocation (manifest-last commits, lease objects); the
writers take whatever subclass they are given, so a new kind is one class.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest

from distsketch.io import read_manifest, resolve, write_manifest
from distsketch.io.commit.checkpoint import FolderSwap
from distsketch.io.commit.kinds import FsspecLocation, LocalLocation
from distsketch.io.commit.manifest import MANIFEST_NAME
from distsketch.io.commit.publish import atomic_output
from distsketch.io.storage.location import Location
from distsketch.testing import LocationTests
from distsketch.workflow.storage import open_storage


class TestLocalLocation(LocationTests):
    """The local file system: folder swaps, links checked, ``flock`` on the store."""

    def make_location(self, tmp_path):
        return resolve(tmp_path / "out")


class TestMemoryLocation(LocationTests):
    """fsspec's in-memory filesystem: manifest-last commits, claim objects."""

    def make_location(self, tmp_path):
        return _memory("out")


class TestS3Location(LocationTests):
    """An S3 bucket (a moto server): what an object store really answers."""

    @pytest.fixture(autouse=True)
    def _server(self, s3):
        self.s3 = s3

    def make_location(self, tmp_path):
        return resolve(self.s3.url(), self.s3.storage_options)


def _memory(name: str) -> Location:
    return resolve(f"memory://loc-{uuid.uuid4().hex[:8]}/{name}")


def test_each_path_gets_its_kind_and_capabilities(tmp_path):
    local, remote = resolve(tmp_path / "x.zarr"), _memory("x.zarr")
    assert type(local) is LocalLocation and type(remote) is FsspecLocation
    assert (local.supports_rename, local.supports_links) == (True, True)
    assert (remote.supports_rename, remote.supports_links) == (False, False)
    # derived locations keep their kind, so an operation on them asks the same class
    assert type(local.child("a").parent) is LocalLocation
    assert type(remote.sibling(".x.zarr.tmp-1")) is FsspecLocation
    assert local.child("a").parent == local and remote.child("a").parent == remote
    assert isinstance(local, Location) and isinstance(remote, Location)


def test_a_new_storage_kind_is_one_subclass():
    """A subclass passed to the writers is what they use: nothing else names the kind."""
    written: list[str] = []

    @dataclasses.dataclass(frozen=True)
    class TracedLocation(FsspecLocation):
        def write_bytes(self, name: str, data: bytes) -> None:
            written.append(name)
            super().write_bytes(name, data)

    base = _memory("out")
    loc = TracedLocation(url=base.url, path=base.path, fs=base.fs)
    with atomic_output(loc) as tmp:
        assert type(tmp) is TracedLocation
        tmp.write_bytes("data.bin", b"\x00\x01")
        write_manifest(tmp, {"kind": "traced"})
    assert written == ["data.bin", MANIFEST_NAME]
    assert loc.read_bytes("data.bin") == b"\x00\x01"
    assert read_manifest(loc)["kind"] == "traced"
    assert loc.list_names() == sorted([".distsketch", "data.bin", MANIFEST_NAME])


def test_local_write_bytes_replaces_the_file_whole(tmp_path):
    loc = resolve(tmp_path)
    loc.write_bytes("state.json", b'{"rows": 1}')
    loc.write_bytes("state.json", b'{"rows": 2}')
    assert json.loads((tmp_path / "state.json").read_bytes()) == {"rows": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no .part left


def test_local_remove_deletes_a_link_not_what_it_points_to(tmp_path):
    target = tmp_path / "theirs"
    target.mkdir()
    (target / "data.txt").write_text("keep")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".dask-performance-1.html").symlink_to(target)
    resolve(run).remove(".dask-performance-1.html")
    assert not (run / ".dask-performance-1.html").is_symlink()
    assert (target / "data.txt").read_text() == "keep"


def test_leftovers_of_killed_writers_are_removed_and_nothing_else():
    out = _memory("run")
    for name in (".result.tmp-abc/x", ".results.tmp-abc/x", "result/x", ".state.tmp-1/x"):
        out.write_bytes(name, b"1")
    out.child("result").clean_leftovers()
    assert out.list_names() == [".results.tmp-abc", ".state.tmp-1", "result"]
    assert _memory("missing").list_names() == []


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_run_storage_commits_the_way_the_location_can(tmp_path, kind):
    where = str(tmp_path / "out") if kind == "local" else _memory("out").url
    storage = open_storage(where, None)
    assert isinstance(storage.state.commit, FolderSwap) is storage.loc.supports_rename
    assert storage.state.read() is None
    assert storage.read_result_manifest() is None
    with storage.locked(False, inputs=[]):
        storage.check_held()
        with storage.result_writer(inputs=[]) as res:
            (res.staging / "report.md").write_text("# run")
            res.upload_staged()
            res.write_manifest({"kind": "workflow-result"})
            assert res.files() == [MANIFEST_NAME, "report.md"]
    assert storage.read_result_manifest()["kind"] == "workflow-result"
    assert storage.loc.child("result").read_bytes("report.md") == b"# run"
