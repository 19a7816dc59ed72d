"""The append journal is untrusted input: a planted or edited journal is refused, nothing changes.

An append that is killed leaves ``.distsketch-append.json`` in the store, and
the next append rolls it back (``distsketch.io.arrays.appending``).  Whoever can
write into the store can plant one; before it was checked, its chunk ``key``
and ``backup`` names (``../outside/victim.txt``, an absolute path), its
``shapes`` (``../other.zarr/X``) and a backup that is a link made the next
``ingest --append`` overwrite and delete files outside the store and empty a
neighbouring one.  Each case here starts from a genuine interrupted append,
changes one thing in its journal, and asserts, through the public API and the
CLI, that the append is a ``StoreError`` naming what is wrong and that every
file (the store, the folder beside it, the neighbouring store) is
byte-for-byte as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import distsketch.cli as cli
import distsketch.io.arrays.appending as append_mod
import distsketch.io.storage.locks as locks_mod
from distsketch.errors import StoreError
from distsketch.io import append, ingest, open_array, write_array
from distsketch.io.arrays.targets import open_targets
from distsketch.io.commit.layout import JOURNAL_NAME
from distsketch.io.commit.manifest import MANIFEST_NAME

X = np.random.default_rng(0).normal(size=(1000, 5)).astype(np.float32)
REFUSED = "was not written by an append to this store"


class Killed(BaseException):
    """The append's process dies (no cleanup runs)."""


def _killed(*a, **k):
    raise Killed


def interrupt(store, rows: np.ndarray = X[600:700], url_options: dict | None = None) -> None:
    """An append killed after it grew X: its journal and backups stay in the store."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(append_mod.StoreAppender, "_undo", lambda self: None)
        mp.setattr(append_mod, "consolidate", _killed)
        with pytest.raises(Killed):
            append(store, rows, storage_options=url_options)


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root``: its content's digest (a link: where it points)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for f in [*files, *(x for x in dirs if os.path.islink(os.path.join(d, x)))]:
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = "link -> " + os.readlink(p)
            else:
                out[rel] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


@pytest.fixture
def site(tmp_path):
    """An ingested store with an interrupted append, someone's files beside it, another store."""
    np.save(tmp_path / "x.npy", X[:600])
    np.save(tmp_path / "small.npy", X[600:610])
    store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", chunk_rows=250)
    other = ingest(tmp_path / "x.npy", tmp_path / "other.zarr", chunk_rows=250)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("the victim's file\n")
    (outside / "secret.txt").write_text("the secret\n")
    interrupt(store)
    journal = json.loads((store / JOURNAL_NAME).read_text())
    assert journal["chunks"]["X"]["key"] == "X/c/2/0"  # 600 rows in chunks of 250: chunk 2
    return SimpleNamespace(root=tmp_path, store=store, other=other, outside=outside,
                           journal=journal)


def backup_of(site, name: str = "X") -> Path:
    return site.store / site.journal["chunks"][name]["backup"]


# each case: what is changed in the genuine journal (the dict, or the store), and what the
# message must name


def rel_key_and_backup(site, j):
    j["chunks"]["X"] = {"key": "../outside/victim.txt", "backup": "../outside/secret.txt"}


def rel_key(site, j):
    j["chunks"]["X"]["key"] = "../outside/victim.txt"


def abs_key(site, j):
    j["chunks"]["X"] = {"key": str(site.outside / "victim.txt"), "backup": "zarr.json"}


def abs_key_own_backup(site, j):
    j["chunks"]["X"]["key"] = str(site.outside / "victim.txt")


def shapes_other_store(site, j):
    j["shapes"]["../other.zarr/X"] = [0, 5]


def shapes_own_rows_cut(site, j):
    j["shapes"]["X"] = [0, 5]


def shapes_array_not_in_store(site, j):
    j["shapes"]["y"] = [0]


def other_chunk_of_own_array(site, j):
    j["chunks"]["X"]["key"] = "X/c/0/0"


def backup_is_a_chunk(site, j):
    j["chunks"]["X"]["backup"] = "X/c/0/0"


def backup_of_another_token(site, j):
    name = ".distsketch-append-0123456789ab-X.bak"
    (site.store / name).write_bytes(backup_of(site).read_bytes())
    j["chunks"]["X"]["backup"] = name


def root_key_elsewhere(site, j):
    j["chunks"][""]["key"] = "X/zarr.json"


def chunk_of_unknown_array(site, j):
    j["chunks"]["../other.zarr/X"] = {"key": "../other.zarr/X/c/0/0", "backup": "zarr.json"}


def no_format_tag(site, j):
    del j["format"]


def wrong_format_tag(site, j):
    j["format"] = "another-tool-journal"


def planted_as_in_the_issue(site, j):
    # the journal of the report: the earlier form (no format tag, no digest)
    j.clear()
    j.update({"token": "x", "shapes": {"X": [600, 5]},
              "chunks": {"X": {"key": "../outside/victim.txt",
                               "backup": "../outside/secret.txt"}}})


def no_digest(site, j):
    del j["manifest_sha256"]


def digest_of_another_store(site, j):
    j["manifest_sha256"] = hashlib.sha256((site.other / MANIFEST_NAME).read_bytes()).hexdigest()


def token_not_hex(site, j):
    j["token"] = "../../outside"


def classes_not_a_count(site, j):
    j["classes"] = "../outside"


CASES: list[tuple[Callable, str]] = [
    (rel_key_and_backup, "names the backup '../outside/secret.txt'"),
    (rel_key, "names '../outside/victim.txt'; an append to X at 600 rows saves only 'X/c/2/0'"),
    (abs_key, "names the backup 'zarr.json'"),
    (abs_key_own_backup, "saves only 'X/c/2/0'"),
    (shapes_other_store, "shapes names '../other.zarr/X'"),
    (shapes_own_rows_cut, "it records X with shape (0, 5); the manifest records (600, 5)"),
    (shapes_array_not_in_store, "it records the arrays ['X', 'y']; the store's manifest "
                                "records ['X']"),
    (other_chunk_of_own_array, "names 'X/c/0/0'; an append to X at 600 rows saves only"),
    (backup_is_a_chunk, "names the backup 'X/c/0/0'"),
    (backup_of_another_token, "names the backup '.distsketch-append-0123456789ab-X.bak'"),
    (root_key_elsewhere, "chunks[\"\"] names 'X/zarr.json'"),
    (chunk_of_unknown_array, "chunks names '../other.zarr/X'"),
    (no_format_tag, "its format is None"),
    (wrong_format_tag, "its format is 'another-tool-journal'"),
    (planted_as_in_the_issue, "its format is None"),
    (no_digest, "its manifest_sha256 None is not a SHA-256 digest"),
    (digest_of_another_store, "it records the manifest digest"),
    (token_not_hex, "its token '../../outside' is not 12 hex digits"),
    (classes_not_a_count, "its classes '../outside' is not a count of class names"),
]


def run_append(site, entry: str) -> str:
    """Append ``small.npy`` to the store; the error message (the append must fail)."""
    if entry == "api":
        with pytest.raises(StoreError) as info:
            append(site.store, site.root / "small.npy")
        return str(info.value)
    code = cli.main(["ingest", str(site.root / "small.npy"), str(site.store), "--append",
                     "--no-progress"])
    assert code == 2
    return site.capsys.readouterr().err


def assert_refused(site, entry: str, fragment: str, *, journal_check: bool = True) -> None:
    before = snapshot(site.root)
    message = run_append(site, entry)
    assert fragment in message, message
    if journal_check:
        assert REFUSED in message and "nothing was changed" in message, message
        assert "remove it by hand" in message, message
    assert snapshot(site.root) == before
    assert (site.outside / "victim.txt").read_text() == "the victim's file\n"
    assert (site.outside / "secret.txt").read_text() == "the secret\n"
    np.testing.assert_array_equal(open_array(site.other).compute(), X[:600])


@pytest.mark.parametrize("entry", ["api", "cli"])
@pytest.mark.parametrize("change, fragment", CASES, ids=[c.__name__ for c, _ in CASES])
def test_edited_journal_is_refused_and_nothing_changes(site, capsys, entry, change, fragment):
    site.capsys = capsys
    j = json.loads(json.dumps(site.journal))
    change(site, j)
    (site.store / JOURNAL_NAME).write_text(json.dumps(j))
    assert_refused(site, entry, fragment)


@pytest.mark.parametrize("entry", ["api", "cli"])
@pytest.mark.parametrize("raw, fragment", [
    (b'{"format": "distsketch-append-journal", "shapes": ', "it is not JSON"),
    (b"\xff\xfe not text", "it is not JSON"),
    (b"[]", "it holds a JSON list, not an object"),
    (b"[" * 50_000, "it is not JSON"),
    (b" " * (65 * 1024) + b"{}", "it is larger than 65536 bytes"),
], ids=["truncated", "binary", "list", "deep", "huge"])
def test_garbage_journal_is_refused_and_nothing_changes(site, capsys, entry, raw, fragment):
    site.capsys = capsys
    (site.store / JOURNAL_NAME).write_bytes(raw)
    assert_refused(site, entry, fragment)


@pytest.mark.parametrize("entry", ["api", "cli"])
def test_backup_that_is_a_link_is_refused_and_not_read(site, capsys, entry):
    site.capsys = capsys
    backup = backup_of(site)
    backup.unlink()
    backup.symlink_to(site.outside / "secret.txt")  # would be copied into the store as X/c/2/0
    assert_refused(site, entry, f"the backup {backup} is a symbolic link (-> "
                                f"{site.outside / 'secret.txt'})")


@pytest.mark.parametrize("entry", ["api", "cli"])
def test_journal_that_is_a_link_is_refused_and_not_read(site, capsys, entry):
    site.capsys = capsys
    elsewhere = site.outside / "journal.json"
    (site.store / JOURNAL_NAME).rename(elsewhere)  # a genuine journal, read through a link
    (site.store / JOURNAL_NAME).symlink_to(elsewhere)
    assert_refused(site, entry, "is a symbolic link")


@pytest.mark.parametrize("entry", ["api", "cli"])
def test_link_elsewhere_in_the_store_is_refused_before_the_rollback(site, capsys, entry):
    """The journal is genuine, but a chunk it would rewrite is a link out of the store."""
    site.capsys = capsys
    chunk = site.store / "X" / "c" / "2" / "0"
    chunk.unlink()
    chunk.symlink_to(site.outside / "victim.txt")
    assert_refused(site, entry, f"contains a symbolic link: {chunk}", journal_check=False)


def test_genuine_interrupted_append_is_still_rolled_back_by_the_cli(site, capsys):
    before_outside = snapshot(site.outside)
    code = cli.main(["ingest", str(site.root / "small.npy"), str(site.store), "--append",
                     "--no-progress"])
    assert code == 0, capsys.readouterr().err
    np.testing.assert_array_equal(open_array(site.store).compute(), X[:610])
    assert not [p for p in os.listdir(site.store) if p.startswith(".distsketch-append")]
    assert snapshot(site.outside) == before_outside


@pytest.fixture(params=["memory", "s3"])
def object_root(request):
    """A fresh prefix on an object store (memory://, and S3 on a local moto server): its URL,
    storage options and filesystem."""
    if request.param == "s3":
        s3 = request.getfixturevalue("s3")
        url, options, fs = s3.url(), s3.storage_options, s3.fs
        root = url[len("s3://"):]
    else:
        import fsspec

        root = f"/journal-{uuid.uuid4().hex[:8]}"
        url, options, fs = f"memory://{root}", None, fsspec.filesystem("memory")
    yield url, options, fs, root
    with contextlib.suppress(FileNotFoundError):
        fs.rm(root, recursive=True)


def test_journal_on_an_object_store_is_checked_too(object_root):
    """Object stores (no links) check the journal's names the same way."""
    url_root, so, fs, root = object_root
    url = f"{url_root}/s.zarr"
    fs.pipe_file(f"{root}/outside/victim.txt", b"the victim's file\n")
    write_array(X[:600], url, chunk_rows=250, storage_options=so)
    interrupt(url, url_options=so)
    path = f"{root}/s.zarr/{JOURNAL_NAME}"
    genuine = fs.cat_file(path)
    j = json.loads(genuine)
    j["chunks"]["X"]["key"] = "../outside/victim.txt"
    fs.pipe_file(path, json.dumps(j).encode())
    before = {p: fs.cat_file(p) for p in fs.find(root)}
    with pytest.raises(StoreError, match="saves only 'X/c/2/0'") as info:
        append(url, X[600:610], storage_options=so)
    assert REFUSED in str(info.value)
    assert {p: fs.cat_file(p) for p in fs.find(root)} == before
    # the genuine journal is rolled back, and the append goes ahead
    fs.pipe_file(path, genuine)
    append(url, X[600:610], storage_options=so)
    np.testing.assert_array_equal(open_array(url, storage_options=so).compute(), X[:610])
    assert not [p for p in fs.find(f"{root}/s.zarr") if ".distsketch-append" in p]
    assert fs.cat_file(f"{root}/outside/victim.txt") == b"the victim's file\n"


# ------------------------------------------------------------------ shapes, kills, races


def test_rollback_deletes_listed_chunks_not_every_position_of_an_edited_shape(site, monkeypatch):
    """X/zarr.json of the interrupted append edited to 10**15 rows: Zarr's own resize would
    enumerate every chunk position of that shape (hours, all memory) to delete the chunks past
    the old rows; the rollback lists the files instead, and the append goes ahead."""
    from zarr.core.chunk_grids import RegularChunkGrid

    meta_path = site.store / "X" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"][0] = 10**15
    meta_path.write_text(json.dumps(meta))
    enumerate_grid = RegularChunkGrid.all_chunk_coords

    def bounded(self, array_shape):
        positions = 1
        for s, c in zip(array_shape, self.chunk_shape, strict=False):
            positions *= -(-s // c)
        assert positions <= 10**6, f"enumerated {positions} chunk positions"
        return enumerate_grid(self, array_shape)

    monkeypatch.setattr(RegularChunkGrid, "all_chunk_coords", bounded)
    before_outside = snapshot(site.outside)
    append(site.store, site.root / "small.npy")
    np.testing.assert_array_equal(open_array(site.store).compute(), X[:610])
    assert not [p for p in os.listdir(site.store) if p.startswith(".distsketch-append")]
    assert snapshot(site.outside) == before_outside


_DIE_WHILE_WRITING = """
import os, signal, sys
from pathlib import Path
import numpy as np
from distsketch.io import append
from distsketch.io.commit.kinds import LocalLocation

store, target = sys.argv[1], sys.argv[2]
write = LocalLocation.write_bytes

def dying(self, name, data):
    if name.endswith(target):  # half of it written beside, then the process is killed
        Path(self.path, name + ".part").write_bytes(data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    write(self, name, data)

LocalLocation.write_bytes = dying
append(store, np.zeros((100, 5), np.float32))
"""


@pytest.mark.parametrize("target", [JOURNAL_NAME, "-X.bak", "-root.bak"],
                         ids=["journal", "chunk-backup", "root-backup"])
def test_append_killed_while_journalling_leaves_nothing_behind(tmp_path, target):
    """SIGKILL while the journal or a backup is written: the next append removes every file
    the killed one wrote (backups, temporaries) and appends; the rows are the old ones."""
    np.save(tmp_path / "x.npy", X[:600])
    store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", chunk_rows=250)
    chunks = snapshot(store / "X")
    done = subprocess.run([sys.executable, "-c", _DIE_WHILE_WRITING, str(store), target],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert snapshot(store / "X") == chunks  # nothing was appended before the kill
    append(store, X[600:610])
    np.testing.assert_array_equal(open_array(store).compute(), X[:610])
    assert not [p for p in os.listdir(store) if p.startswith(".distsketch-append")]


@pytest.mark.parametrize("how", ["failed", "killed"])
def test_class_names_of_an_append_that_did_not_commit_are_dropped(tmp_path, how):
    """A new class name is written to y's attributes at commit, before the manifest; an
    append that fails (or dies) after that must not leave it there: the store would no
    longer match its manifest and every reader would refuse it."""
    (tmp_path / "a.csv").write_text("f1,f2,label\n1,2,cat\n3,4,dog\n")
    store = ingest(tmp_path / "a.csv", tmp_path / "s.zarr", label_column="label")
    before = snapshot(store)
    error = OSError("no space left on device") if how == "failed" else Killed()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(append_mod, "consolidate", lambda *a, **k: (_ for _ in ()).throw(error))
        if how == "killed":
            mp.setattr(append_mod.StoreAppender, "_undo", lambda self: None)
        with pytest.raises(type(error)):
            append(store, np.array([[5.0, 6.0]]), np.array(["bird"]))
    if how == "failed":
        assert snapshot(store) == before  # rolled back at once, byte for byte
    append(store, np.array([[7.0, 8.0]]), np.array(["dog"]))  # (rolls a killed one back)
    assert open_targets(f"{store}::y", 3).rows(0, 3).tolist() == ["cat", "dog", "dog"]
    np.testing.assert_array_equal(open_array(store).compute(), [[1, 2], [3, 4], [7, 8]])


def test_overwrite_while_an_append_runs_is_refused(tmp_path):
    """`ingest --overwrite` moved the store aside while an append wrote to it by path: the
    append's later rows, metadata and manifest went into the new store, which then read
    100 rows of zeros.  The overwrite now waits for no append: it is refused."""
    np.save(tmp_path / "x.npy", X[:600])
    np.save(tmp_path / "z.npy", np.full((600, 5), 7, np.float32))
    store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", chunk_rows=250)
    with append_mod.StoreAppender.open(store) as app:
        app.write(X[600:700])
        with pytest.raises(StoreError, match="another process is appending to") as info:
            ingest(tmp_path / "z.npy", store, chunk_rows=250, overwrite=True)
        assert "it was not replaced and nothing was committed" in str(info.value)
        app.write(X[700:710])
        app.commit()
    np.testing.assert_array_equal(open_array(store).compute(), X[:710])
    assert sorted(os.listdir(tmp_path)) == ["s.zarr", "x.npy", "z.npy"]


def test_store_replaced_while_the_append_takes_its_lock_is_refused(tmp_path, monkeypatch):
    """The overwrite's swap lands between the append opening the store's folder and locking
    it: the append holds the lock of the folder moved aside and must not write by path
    into the new store."""
    np.save(tmp_path / "x.npy", X[:600])
    np.save(tmp_path / "z.npy", np.full((600, 5), 7, np.float32))
    store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", chunk_rows=250)
    real = locks_mod.fcntl

    class SwapFirst:
        LOCK_EX, LOCK_NB, LOCK_UN = real.LOCK_EX, real.LOCK_NB, real.LOCK_UN

        @staticmethod
        def flock(fd, op):
            monkeypatch.setattr(locks_mod, "fcntl", real)
            ingest(tmp_path / "z.npy", store, chunk_rows=250, overwrite=True)
            return real.flock(fd, op)

    monkeypatch.setattr(locks_mod, "fcntl", SwapFirst)
    with pytest.raises(StoreError, match="was replaced") as info:
        append(store, X[600:700])
    assert "nothing was appended" in str(info.value)
    replaced = open_array(store).compute()
    np.testing.assert_array_equal(replaced, np.full((600, 5), 7, np.float32))
    assert not [p for p in os.listdir(store) if p.startswith(".distsketch-append")]
