"""Commits under races and kills: the old or the new output is always there.

* two writers of one output: the first commit stays, the second fails (the
  "already exists" check is repeated at commit time and the rename itself
  refuses a non-empty target);
* a writer SIGKILLed at each step of the commit protocol
  (``distsketch.io.commit.atomic``): the next writer, or opening the store, finds the
  old or the new store, and dead ``.tmp-``/``.old-`` siblings are removed;
* only siblings named exactly as distsketch names them, of dead writers, are
  cleaned up.

Races are ordered by events at the protocol's instrumentation points, never by
sleeping.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from distsketch.errors import StoreError
from distsketch.io import atomic, ingest, open_array, write_array

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

A = np.arange(40, dtype=np.float32).reshape(10, 4)
B = -A - 1


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


def read(path: Path) -> np.ndarray:
    return open_array(str(path)).compute()


# ------------------------------------------------------------ concurrent writers


def _race(monkeypatch, out: Path, first_waits_for: str) -> dict:
    """Two threads ingest different sources to ``out``; ``first`` commits first.

    ``first_waits_for``: the step of ``second`` that ``first`` waits for before
    committing ("written": both passed the early check; "checked": the second
    also passed the check at commit time, so only the rename can refuse it).
    """
    second_at = threading.Event()
    first_done = threading.Event()
    real_step = atomic._step

    def step(name: str, path: Path) -> None:
        who = threading.current_thread().name
        if who == "first" and name == "written":
            assert second_at.wait(60)
        if who == "second" and name == first_waits_for:
            second_at.set()
            assert first_done.wait(60)
        if who == "first" and name == "committed":
            first_done.set()
        real_step(name, path)

    monkeypatch.setattr(atomic, "_step", step)
    result: dict = {}

    def work(name: str, src: Path) -> None:
        try:
            result[name] = ingest(src, out, chunk_rows=5)
        except Exception as exc:
            result[name] = exc
            first_done.set()
            second_at.set()

    threads = [threading.Thread(target=work, name=n, args=(n, out.parent / f"{n}.npy"))
               for n in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return result


@pytest.mark.parametrize("second_passed", ["written", "checked"])
def test_concurrent_ingests_the_first_commit_stays(tmp_path, monkeypatch, second_passed):
    np.save(tmp_path / "first.npy", A)
    np.save(tmp_path / "second.npy", B)
    out = tmp_path / "out.zarr"
    result = _race(monkeypatch, out, second_passed)
    assert result["first"] == out
    assert isinstance(result["second"], StoreError), result["second"]
    msg = str(result["second"])
    assert str(out) in msg
    assert ("already exists" in msg) if second_passed == "written" else ("another command" in msg)
    np.testing.assert_array_equal(read(out), A)
    assert siblings(out) == []


# ------------------------------------------------------------ kills during the commit

# One interpreter imports distsketch once and forks one writer per case; each
# writer SIGKILLs itself at its step of the commit protocol.
KILLER = r"""
import os, signal, sys
import numpy as np
from distsketch.io import atomic, write_array
for case in sys.argv[1:]:
    point, out = case.split("=", 1)
    pid = os.fork()
    if pid == 0:
        def step(name, path, point=point):
            if name == point:
                os.kill(os.getpid(), signal.SIGKILL)
        atomic._step = step
        write_array(-np.arange(40, dtype=np.float32).reshape(10, 4) - 1, out, chunk_rows=5,
                    overwrite=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print(case, os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
"""

# point -> (what is at <name> right after the kill, what the recovery leaves)
POINTS = {
    "written": ("old", "old"),       # new complete in .tmp-, old untouched: the new is dropped
    "checked": ("old", "old"),
    "old-aside": (None, "new"),      # between the renames: the complete new one is finished
    "committed": ("new", "new"),     # only the .old- copy is left over
}


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """``<point>/out.zarr`` (holding A) after a writer of B was killed at ``<point>``;
    ``first/new.zarr`` after a first write was killed before its commit."""
    root = tmp_path_factory.mktemp("killed")
    cases = []
    for point in POINTS:
        (root / point).mkdir()
        write_array(A, root / point / "out.zarr", chunk_rows=5)
        cases.append(f"{point}={root / point / 'out.zarr'}")
    (root / "first").mkdir()
    cases.append(f"written={root / 'first' / 'new.zarr'}")
    proc = subprocess.run([sys.executable, "-c", KILLER, *cases], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split().count("True") == len(cases), proc.stdout
    return root


def copy_case(killed: Path, name: str, tmp_path: Path) -> Path:
    shutil.copytree(killed / name, tmp_path / name, symlinks=True)
    return tmp_path / name


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("recover_by", ["open", "next-write"])
def test_kill_at_each_commit_step_is_recovered(killed, tmp_path, point, recover_by):
    out = copy_case(killed, point, tmp_path) / "out.zarr"
    right_after, recovered = POINTS[point]
    assert out.exists() == (right_after is not None)
    if right_after is not None:
        # a reader right after the kill sees a complete store
        np.testing.assert_array_equal(read(out), A if right_after == "old" else B)
    assert siblings(out) != []  # the kill left something behind
    if recover_by == "open":
        np.testing.assert_array_equal(read(out), A if recovered == "old" else B)
        atomic.recover(out)
    else:
        write_array(3 * A, out, chunk_rows=5, overwrite=True)
        np.testing.assert_array_equal(read(out), 3 * A)
    assert siblings(out) == []


def test_swap_killed_with_an_incomplete_new_store_restores_the_old(killed, tmp_path):
    out = copy_case(killed, "old-aside", tmp_path) / "out.zarr"
    (tmp, ) = [p for p in out.parent.iterdir() if ".tmp-" in p.name]
    (tmp / atomic.MARKER_NAME).unlink()  # as if killed before its marker was written
    np.testing.assert_array_equal(read(out), A)  # opening undoes the swap
    assert siblings(out) == []


def test_killed_first_write_leaves_nothing_visible_and_is_cleaned(killed, tmp_path):
    out = copy_case(killed, "first", tmp_path) / "new.zarr"
    assert not out.exists()
    assert len(siblings(out)) == 1
    with pytest.raises(StoreError, match="does not exist"):
        open_array(str(out))
    assert siblings(out) == []  # opening removed the dead temporary
    write_array(A, out, chunk_rows=5)
    np.testing.assert_array_equal(read(out), A)
    assert siblings(out) == []


# ------------------------------------------------------------ leftovers


def test_only_dead_leftovers_named_by_distsketch_are_removed(tmp_path):
    out = tmp_path / "out.zarr"
    write_array(A, out, chunk_rows=5)
    dead_tmp = tmp_path / ".out.zarr.tmp-0123456789ab"
    dead_old = tmp_path / ".out.zarr.old-ba9876543210"
    live_tmp = tmp_path / ".out.zarr.tmp-aaaaaaaaaaaa"
    foreign = [tmp_path / ".out.zarr.tmp-mine", tmp_path / ".out.zarr.old-notes-2024",
               tmp_path / ".other.zarr.tmp-0123456789ab"]
    for p in (dead_tmp, dead_old, live_tmp, *foreign):
        p.mkdir()
        (p / "f").write_text(p.name)
    fd = os.open(live_tmp, os.O_RDONLY)  # a writer still working on it holds this lock
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        write_array(B, out, chunk_rows=5, overwrite=True)
        assert not dead_tmp.exists() and not dead_old.exists()
        assert live_tmp.exists() and (live_tmp / "f").read_text() == live_tmp.name
        for p in foreign:
            assert (p / "f").read_text() == p.name
    finally:
        os.close(fd)
    np.testing.assert_array_equal(read(out), B)
    atomic.recover(out)
    assert not live_tmp.exists()  # its writer is gone now
    assert all(p.exists() for p in foreign)


def test_a_writer_found_between_mkdir_and_lock_is_not_taken_for_a_dead_one(tmp_path,
                                                                            monkeypatch):
    # Another writer's recover() runs in the instant after this writer created its
    # temporary directory and before it opened and locked it: the directory must not be
    # taken for a dead writer's (it was removed, and the write failed with "cannot write
    # under ...: No such file or directory").
    out = tmp_path / "out.zarr"
    np.save(tmp_path / "a.npy", A)
    real_open = os.open
    raced = []

    def open_(path, flags, *args, **kwargs):
        if not raced and os.fspath(path).startswith(os.fspath(tmp_path / ".out.zarr.")):
            raced.append(os.path.basename(os.fspath(path)))
            atomic.recover(out)  # the other writer's clean-up, in the worst instant
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    assert ingest(tmp_path / "a.npy", out, chunk_rows=5) == out
    np.testing.assert_array_equal(read(out), A)
    assert raced and siblings(out) == []
