"""Atomic directory outputs: committed only on success, nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from distsketch.io import atomic_dir


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


def test_atomic_dir_commits_only_on_success(tmp_path):
    target = tmp_path / "d"
    with pytest.raises(KeyError):
        with atomic_dir(target) as tmp:
            (tmp / "f").write_text("x")
            raise KeyError("stop")
    assert not target.exists() and _siblings(target) == []
    with atomic_dir(target) as tmp:
        (tmp / "f").write_text("x")
    assert (target / "f").read_text() == "x" and _siblings(target) == []
