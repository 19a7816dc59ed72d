"""Where a run keeps its lock, checkpoints and result: ``.lock``, ``state/`` and ``result/``
under ``outputs.dir`` on any storage, each step asked of its
:class:`~distsketch.io.storage.location.Location` (on an object store the lock is best
effort: one writer per outputs.dir, docs/workflows.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distsketch.errors import StoreError, WorkflowError
from distsketch.io.storage.location import Location
from distsketch.io.storage.locks import ObjectLock
from distsketch.workflow.state import StateStore, store_error

__all__ = ["ObjectLock", "ResultFolder", "RunStorage", "open_storage"]

#: files a run writes into outputs.dir before moving them into the result
_PERF_PREFIX = ".dask-performance-"


def open_storage(out_dir: str, storage_options: dict | None) -> RunStorage:
    """The storage of ``outputs.dir`` (a path, ``file://`` or fsspec URL)."""
    from distsketch.io.storage.urls import resolve

    return RunStorage(resolve(out_dir, storage_options))


class ResultFolder:
    """The uncommitted result, plus the local folder where the report's files are built
    (the result folder itself where it is local)."""

    def __init__(self, tmp: Location, staging: Path):
        self.tmp = tmp
        self.staging = staging
        self.hook_arg: Any = tmp.handle()

    def target(self, name: str, small: bool = False) -> tuple[Any, dict | None]:
        """Where output ``name`` is written, and the storage options to write it with (a
        ``small`` one, written by the driver, is staged and moved in with the report)."""
        if small:
            return self.staging / name, None
        return self.tmp.child(name).user_path(), self.tmp.worker_options

    def add(self, local_file: Path, name: str) -> None:
        self.tmp.move_in(local_file, name)

    def upload_staged(self) -> None:
        """Move what the staging folder holds into the result (nothing when it is the result)."""
        self.tmp.move_tree_in(self.staging)

    def files(self) -> list[str]:
        return self.tmp.list_names()

    def write_manifest(self, info: dict) -> None:
        from distsketch.io import write_manifest

        write_manifest(self.tmp, info)


class RunStorage:
    """``outputs.dir``: its lock, its checkpoint (:attr:`state`) and its result."""

    def __init__(self, loc: Location):
        self.loc = loc
        self.out_dir: Any = loc.user_path()
        self.state = StateStore(loc.child("state"))
        self.result_dir: Any = loc.child("result").user_path()
        self.lock: Any = None
        self._scratch: Path | None = None

    @property
    def scratch(self) -> Path:
        """The local folder where the performance report is written first (the folder
        itself where it is local); set while :meth:`locked` holds the lock."""
        if self._scratch is None:
            raise WorkflowError("the run's scratch folder is used before outputs.dir is locked")
        return self._scratch

    def check_foreign(self, inputs: list) -> None:
        """Refuse an outputs.dir that overlaps an input, or whose ``state/`` or ``result/``
        distsketch did not write: the run replaces both."""
        from distsketch.io.storage.safety import check_not_input, check_replaceable

        check_not_input(self.loc, inputs)
        for name, check in (("state", self.state.check_foreign),
                            ("result", lambda i: check_replaceable(self.loc.child("result"),
                                                                   inputs=i))):
            try:
                check(inputs)
            except StoreError as exc:
                raise StoreError(f"outputs.dir {self.out_dir} holds {name}/, which distsketch "
                                 f"did not write: {exc} A run replaces {name}/; nothing was "
                                 "changed.") from None

    @contextlib.contextmanager
    def locked(self, wait: bool | float, inputs: list, force_unlock: bool = False) -> Iterator[None]:
        """Check and lock outputs.dir; repair or remove what a killed run left; yield."""
        self.check_foreign(inputs)  # before anything is created there
        with contextlib.ExitStack() as stack:
            try:
                self.lock = stack.enter_context(self.loc.run_lock(wait, force_unlock))
            except OSError as exc:
                raise store_error(exc, f"the output folder {self.out_dir}") from exc
            for part in ("state", "result"):
                self.loc.child(part).clean_leftovers()
            self.check_foreign(inputs)  # again, now that a killed swap is repaired
            self.state.clean()
            for name in self.loc.list_names():
                if name.startswith(_PERF_PREFIX):
                    self.loc.remove(name)
            self._scratch = stack.enter_context(self.loc.staging())
            yield

    def check_held(self) -> None:
        """Raise if another run took the lock over (never, for an OS lock)."""
        if self.lock is not None:
            self.lock.check()

    def read_result_manifest(self) -> dict | None:
        """The committed result's manifest; None also for a result whose publication was
        interrupted (no manifest): the run publishes it again."""
        from distsketch.io import read_manifest

        return read_manifest(self.loc.child("result"))

    @contextlib.contextmanager
    def result_writer(self, inputs: list) -> Iterator[ResultFolder]:
        """The result, committed when the block succeeds (OS errors become StoreError)."""
        from distsketch.io.commit.publish import atomic_output

        try:
            with atomic_output(self.loc.child("result"), overwrite=True, inputs=inputs) as tmp, \
                    tmp.staging() as staging:
                yield ResultFolder(tmp, staging)
                self.check_held()  # a run that lost its lock does not publish
        except OSError as exc:
            raise store_error(exc, f"the result {self.result_dir}") from exc
