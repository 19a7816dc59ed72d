"""Shared helpers of the paper reproductions: arguments, timing, machine line,
Markdown tables, PASS/DIFFERS claims and optional PNG plots.

Every script in ``benchmarks/papers/`` exposes ``main(argv) -> Report`` and
runs as ``python benchmarks/papers/<name>.py [--quick] [--out DIR] [--write-doc]``.
Plots need matplotlib (the ``bench`` extra); without it the tables are still
written.

``--write-doc`` (full runs only) rewrites the script's generated block of
``docs/papers.md``, the text between :func:`doc_markers`, with the run's
tables and claims, so the page prints what the shipped script produces.  Each
script also exposes ``doc_check() -> list[DocCheck]``: a cheap, seeded subset
of its full-run rows, formatted exactly as the full run formats them, which
``tests/benchmarks/test_paper_tables.py`` compares with the page's rows.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "out" / "papers"
DOC = Path(__file__).resolve().parents[2] / "docs" / "papers.md"


def parse_args(description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes for CI (seconds)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    p.add_argument("--write-doc", action="store_true",
                   help=f"rewrite this script's generated block of {DOC.name} (and its plot in docs/img/)"
                        " with the run's tables; full runs only")
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.write_doc and args.quick:
        # the page documents full runs: a quick run must not replace them
        p.error("--write-doc documents a full run; run without --quick")
    return args


def machine() -> str:
    """One line: CPU, cores, Python and library versions."""
    import dask
    import scipy
    import sklearn

    try:
        from distsketch.diagnostics import cpu_model

        cpu = cpu_model()
    except Exception:   # a missing /proc entry must not stop a benchmark
        cpu = platform.processor() or platform.machine()
    return (f"{cpu}; {os.cpu_count()} logical cores; Python {platform.python_version()}; "
            f"NumPy {np.__version__}; SciPy {scipy.__version__}; dask {dask.__version__}; "
            f"scikit-learn {sklearn.__version__}")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall seconds, result) of one call."""
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def relative_frobenius(G: np.ndarray, Gt: np.ndarray) -> float:
    """‖G − G̃‖_F / ‖G‖_F, exact."""
    return float(np.linalg.norm(G - Gt) / np.linalg.norm(G))


def fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if not np.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{max(digits - 1, 1)}e}"
    return f"{x:.{digits}g}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass
class Claim:
    """One claim of a paper and whether distsketch's numbers reproduce it."""

    text: str
    holds: bool
    reason: str

    @property
    def verdict(self) -> str:
        return "PASS" if self.holds else "DIFFERS"

    def line(self) -> str:
        return f"{self.verdict}: {self.text} — {self.reason}"


@dataclass
class Report:
    """What a script measured: Markdown sections, claims, files written."""

    name: str
    title: str
    command: str
    sections: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, heading: str, text: str) -> None:
        self.sections.append(f"### {heading}\n\n{text}\n")
        print(f"\n== {heading}\n{text}")

    def claim(self, text: str, holds: bool, reason: str) -> Claim:
        c = Claim(text, bool(holds), reason)
        self.claims.append(c)
        print(c.line())
        return c

    def markdown(self) -> str:
        head = [f"## {self.title}", "", f"Command: `{self.command}`", "",
                f"Machine: {machine()}", "",
                f"Total time: {self.seconds:.1f} s (shared machine: other jobs ran on the same cores).", ""]
        claims = ["### Claims", ""] + [f"- **{c.verdict}** {c.text} — {c.reason}" for c in self.claims]
        return "\n".join(head + self.sections + claims) + "\n"

    def write(self, out: Path) -> Path:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{self.name}.md"
        path.write_text(self.markdown())
        self.files.append(path)
        print(f"\nwrote {path}")
        return path

    def doc_block(self) -> str:
        """The generated block of docs/papers.md: command, machine, tables, claims.

        Section headings go one level down (the page nests them under the
        paper's "Full run"); plot sections are left out (the page places the
        plot in its prose).
        """
        head = ["### Full run", "", f"Command: `{self.command}`", "", f"Machine: {machine()}", "",
                f"Total time: {self.seconds:.1f} s (shared machine: other jobs ran on the same cores).", ""]
        body = ["#" + s for s in self.sections if s.startswith("### ")]
        claims = ["#### Claims", ""] + [f"- **{c.verdict}** {c.text} — {c.reason}" for c in self.claims]
        return "\n".join(head + body + claims) + "\n"


def doc_markers(name: str) -> tuple[str, str]:
    """The HTML comments that delimit ``name``'s generated block in docs/papers.md."""
    return (f"<!-- begin: generated by `python benchmarks/papers/{name}.py --write-doc`; "
            "do not edit by hand -->",
            f"<!-- end: generated by benchmarks/papers/{name}.py -->")


def _block_span(text: str, name: str, doc: Path) -> tuple[int, int]:
    from distsketch.errors import InputError

    begin, end = doc_markers(name)
    if text.count(begin) != 1 or text.count(end) != 1:
        raise InputError(f"{doc}: expected exactly one '{begin}' and one '{end}' line for {name}; "
                         f"found {text.count(begin)} and {text.count(end)}.  Put the two markers "
                         "around the paper's 'Full run' section and run the script again.")
    start = text.index(begin) + len(begin)
    stop = text.index(end)
    if stop < start:
        raise InputError(f"{doc}: the end marker of {name} precedes its begin marker; put the "
                         "begin marker first and run the script again.")
    return start, stop


def read_doc_block(name: str, doc: Path = DOC) -> str:
    """The text of ``name``'s generated block in ``doc``."""
    text = doc.read_text(encoding="utf-8")
    start, stop = _block_span(text, name, doc)
    return text[start:stop]


def write_doc_block(name: str, block: str, doc: Path = DOC) -> None:
    """Replace ``name``'s generated block of ``doc`` by ``block`` (atomically)."""
    text = doc.read_text(encoding="utf-8")
    start, stop = _block_span(text, name, doc)
    new = text[:start] + "\n" + block.strip("\n") + "\n" + text[stop:]
    # a temporary file beside the page, renamed over it: an interrupted run leaves the old page
    fd, tmp = tempfile.mkstemp(dir=doc.parent, prefix=f".{doc.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        os.chmod(tmp, doc.stat().st_mode & 0o7777)     # the page keeps its mode (mkstemp's is 0600)
        os.replace(tmp, doc)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def doc_tables(block: str) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Markdown tables of a generated block: heading -> (header cells, row cells)."""
    tables: dict[str, tuple[list[str], list[list[str]]]] = {}
    heading = None
    for line in block.splitlines():
        if line.startswith("#### "):
            heading = line[5:].strip()
        elif line.startswith("|") and heading is not None:
            # a cell may hold an escaped pipe (\|, as in "max \|shift\|"): split on the others
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            if heading not in tables:
                tables[heading] = (cells, [])
            elif not re.fullmatch(r"-+:?", cells[0]):
                tables[heading][1].append(cells)
    return tables


@dataclass
class DocCheck:
    """Rows of one table of a full run, recomputed cheaply, for comparison with the page.

    ``rows`` are formatted as the full run formats them (:func:`md_table`
    cells); ``keys`` name the columns that identify a row, ``timed`` the
    columns that are wall-clock times (not compared).
    """

    heading: str
    header: list[str]
    rows: list[list[str]]
    keys: list[str]
    timed: list[str] = field(default_factory=list)


def section_checks(rep: Report, keys: Sequence[str], timed: Sequence[str] = ()) -> list[DocCheck]:
    """A :class:`DocCheck` per table of ``rep`` (a subset run), as the page would print it.

    ``keys`` and ``timed`` name columns across all the tables; each table keeps
    those of its own header.
    """
    text = "\n".join("#" + s for s in rep.sections if s.startswith("### "))
    return [DocCheck(heading, header, rows, [k for k in keys if k in header],
                     [t for t in timed if t in header])
            for heading, (header, rows) in doc_tables(text).items()]


def publish(rep: Report, args: argparse.Namespace) -> None:
    """Write the run's Markdown to ``--out`` and, with ``--write-doc``, into docs/papers.md."""
    rep.write(args.out)
    if not getattr(args, "write_doc", False):
        return
    write_doc_block(rep.name, rep.doc_block())
    print(f"rewrote the {rep.name} block of {DOC}")
    for f in rep.files:
        if f.suffix == ".png":
            dest = DOC.parent / "img" / f.name
            shutil.copyfile(f, dest)
            print(f"copied {f} to {dest}")


def save_plot(out: Path, name: str, draw: Callable[[Any], None], enabled: bool = True,
              figsize: tuple[float, float] = (9.0, 3.2)) -> Path | None:
    """Draw with ``draw(fig)`` and save ``out/name.png`` (None without matplotlib)."""
    if not enabled:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install '.[bench]')")
        return None
    out.mkdir(parents=True, exist_ok=True)
    fig = plt.figure(figsize=figsize)
    draw(fig)
    fig.tight_layout()
    path = out / f"{name}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    print(f"wrote {path}")
    return path
