"""Folder locks."""

from __future__ import annotations

import fcntl
import os

import pytest

from distsketch.errors import WorkflowError
from distsketch.io.storage.locks import folder_lock


def test_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    with folder_lock(tmp_path / "out"):
        assert (tmp_path / "out" / ".lock").read_text() == str(os.getpid())
        fd = os.open(tmp_path / "out" / ".lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # the OS lock is really held
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    # released on exit: a new holder gets it at once
    with folder_lock(tmp_path / "out", wait=0):
        pass


def test_lock_held_elsewhere_refuses_after_the_wait(tmp_path):
    (tmp_path / "out").mkdir()
    fd = os.open(tmp_path / "out" / ".lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"4242")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(WorkflowError, match=r"pid 4242.*--wait"):
            with folder_lock(tmp_path / "out", wait=0.2):
                pass
    finally:
        os.close(fd)


def test_lock_released_and_emptied_when_the_block_raises(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with folder_lock(tmp_path / "out"):
            1 / 0  # noqa: B018
    assert (tmp_path / "out" / ".lock").read_text() == ""  # names no holder
    fd = os.open(tmp_path / "out" / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free at once
    finally:
        os.close(fd)


def test_refused_lock_keeps_the_holders_pid(tmp_path):
    (tmp_path / "out").mkdir()
    fd = os.open(tmp_path / "out" / ".lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"4242")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(WorkflowError):
            with folder_lock(tmp_path / "out"):
                pass
        assert (tmp_path / "out" / ".lock").read_text() == "4242"
    finally:
        os.close(fd)
