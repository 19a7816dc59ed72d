"""Every ```python block of README.md runs as written, on the data it creates.

Each block is executed on its own (a fresh namespace) in an empty temporary
folder, as a reader pasting it into a new session would; a block that needs
files (a Zarr store, the example specs) must create them itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_FENCE = re.compile(r"^```(\S*)\s*$")


def python_blocks(text: str) -> list[tuple[str, int, str]]:
    """``(section heading, first line number, code)`` of each ```python block."""
    blocks, heading, lang, start, body = [], "top", None, 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        fence = _FENCE.match(line)
        if lang is None:
            if fence:
                lang, start, body = fence.group(1), number + 1, []
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
        elif fence and not fence.group(1):
            if lang == "python":
                blocks.append((heading, start, "\n".join(body) + "\n"))
            lang = None
        else:
            body.append(line)
    assert lang is None, f"README.md: a ``` fence opened on line {start - 1} is never closed"
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def _block_id(block: tuple[str, int, str]) -> str:
    heading, line, _ = block
    return f"line{line}-" + re.sub(r"[^A-Za-z0-9]+", "-", heading).strip("-")[:40]


def test_the_block_parser_finds_every_python_fence():
    text = "# A\n```python\nx = 1\n```\n```bash\necho\n```\n## B\n```python\ny = 2\n\nz = 3\n```\n"
    assert python_blocks(text) == [("A", 3, "x = 1\n"), ("B", 10, "y = 2\n\nz = 3\n")]
    assert len(BLOCKS) == README.read_text(encoding="utf-8").count("```python")
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("block", BLOCKS, ids=[_block_id(b) for b in BLOCKS])
def test_readme_block_runs(block, tmp_path, monkeypatch):
    heading, line, code = block
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    # the file name and line number point a traceback at the README line that failed
    padded = "\n" * (line - 1) + code
    exec(compile(padded, str(README), "exec"), namespace)
    assert len(namespace) > 2, f"the block of section {heading!r} defined nothing"
