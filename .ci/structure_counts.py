"""Counts of the package's structure (docs/architecture.md, "Where things live").

    python .ci/structure_counts.py [-v]

Prints the package's lines; the per-block functions (first argument ``block``)
outside ``ops/`` and ``summaries/``; the byte counts written at planner call
sites (``bytes_per_row=`` / ``fixed_bytes=`` keywords given a value rather
than passed on) instead of declared as footprints; the modules over 500 lines;
the functions over 80 lines of code (docstring, blank and comment lines not
counted); the ``*_xp`` twin functions.  ``-v`` lists each place.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "distsketch"
KERNEL_HOMES = ("distsketch/ops/", "distsketch/summaries/")


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, source: list[str]) -> int:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    numbers = {n for stmt in body for n in range(stmt.lineno, (stmt.end_lineno or 0) + 1)}
    return sum(1 for n in numbers
               if source[n - 1].strip() and not source[n - 1].strip().startswith("#"))


def counts() -> dict[str, list]:
    """Each count's places: ``{"per_block": [...], "byte_counts": [...], ...}``."""
    out: dict[str, list] = {"per_block": [], "byte_counts": [], "big_modules": [],
                            "long_functions": [], "twins": [], "lines": [0]}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        text = path.read_text()
        source = text.splitlines()
        out["lines"][0] += len(source)
        if len(source) > 500:
            out["big_modules"].append(f"{rel} ({len(source)})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.posonlyargs + node.args.args
                if args and args[0].arg == "block" and not rel.startswith(KERNEL_HOMES):
                    out["per_block"].append(f"{rel}:{node.name}")
                if node.name.endswith("_xp"):
                    out["twins"].append(f"{rel}:{node.name}")
                if (n := _code_lines(node, source)) > 80:
                    out["long_functions"].append(f"{rel}:{node.name} ({n})")
            if (isinstance(node, ast.keyword) and node.arg in ("bytes_per_row", "fixed_bytes")
                    and not (isinstance(node.value, ast.Name) and node.value.id == node.arg)):
                out["byte_counts"].append(f"{rel}:{node.value.lineno}")
    return out


def main(argv: list[str]) -> int:
    found = counts()
    print(f"lines {found.pop('lines')[0]}")
    for name, places in found.items():
        print(f"{name.replace('_', ' ')}: {len(places)}")
        if "-v" in argv:
            for place in places:
                print(f"  {place}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
