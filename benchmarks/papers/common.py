"""Shared helpers of the paper reproductions: arguments, timing, machine line,
Markdown tables, PASS/DIFFERS claims and optional PNG plots.

Every script in ``benchmarks/papers/`` exposes ``main(argv) -> Report`` and
runs as ``python benchmarks/papers/<name>.py [--quick] [--out DIR]``.  Plots
need matplotlib (the ``bench`` extra); without it the tables are still written.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "out" / "papers"


def parse_args(description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes for CI (seconds)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    return p.parse_args(list(argv) if argv is not None else None)


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
