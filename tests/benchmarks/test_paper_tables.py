"""docs/papers.md prints what the shipped paper reproductions produce.

Each script of ``benchmarks/papers/`` writes its full run into a marker-
delimited block of docs/papers.md (``--write-doc``) and exposes
``doc_check()``: a cheap, seeded subset of its full-run rows, computed by the
same code and formatted as the full run formats them.  Here the subset is
rerun and every printed value compared with the page's row: a change of the
code that moves a shipped number, or a page edited by hand, fails the test.

Tolerance: one unit in the last printed digit (the page prints four
significant digits; a value on a rounding boundary may print either way when
BLAS sums in another order).  Wall-clock columns are not compared.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from distsketch.errors import InputError

PAPERS = Path(__file__).resolve().parents[2] / "benchmarks" / "papers"
SCRIPTS = ["meka", "streaming_kpca", "kspace", "polynomial", "sampling"]
# kspace's rows are means over five seeds of k-Space fits (about a minute): no cheap subset
CHECKED = ["meka", "streaming_kpca", "polynomial", "sampling"]
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _load(name: str):
    # the scripts import their shared ``common`` from their own folder: leave
    # neither that folder on sys.path nor ``common`` in sys.modules afterwards
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(f"paper_table_{name}", PAPERS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        # registered before it runs: its dataclasses look their module up by name
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path[:] = saved
        sys.modules.pop("common", None)


@pytest.fixture(scope="module")
def common():
    return _load("common")


def _unit(text: str) -> float:
    """One unit in the last printed digit of a number as :func:`common.fmt` prints it."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (int(exponent or 0) - decimals)


def _cell_mismatch(got: str, want: str) -> bool:
    a, b = got.split(), want.split()     # a cell may hold several numbers (eigenvalue lists)
    if len(a) != len(b):
        return True
    for x, y in zip(a, b, strict=True):
        if NUMBER.match(x) and NUMBER.match(y):
            if abs(float(x) - float(y)) > _unit(y) * (1 + 1e-9):
                return True
        elif x != y:
            return True
    return False


def _mismatches(check, doc_tables) -> list[str]:
    """Rows of ``check`` missing from the page or printed differently there."""
    if check.heading not in doc_tables:
        return [f"table {check.heading!r} is not on the page (tables: {sorted(doc_tables)})"]
    header, rows = doc_tables[check.heading]
    if header != check.header:
        return [f"{check.heading}: header {header} on the page, {check.header} from the script"]
    key_idx = [header.index(k) for k in check.keys]
    by_key = {tuple(r[i] for i in key_idx): r for r in rows}
    out = []
    for row in check.rows:
        key = tuple(row[i] for i in key_idx)
        doc_row = by_key.get(key)
        if doc_row is None:
            out.append(f"{check.heading}: no row {dict(zip(check.keys, key, strict=True))} on the page")
            continue
        for col, got, want in zip(header, row, doc_row, strict=True):
            if col not in check.timed and _cell_mismatch(got, want):
                out.append(f"{check.heading}, {dict(zip(check.keys, key, strict=True))}, {col}: "
                           f"the script gives {got}, the page prints {want}")
    return out


@pytest.mark.parametrize("name", SCRIPTS)
def test_page_has_one_generated_full_run_per_script(common, name):
    block = common.read_doc_block(name)
    assert f"Command: `python benchmarks/papers/{name}.py`" in block      # a full run, not --quick
    assert block.lstrip().startswith("### Full run")
    tables = common.doc_tables(block)
    assert tables and all(rows for _, rows in tables.values())
    assert "#### Claims" in block and re.search(r"^- \*\*(PASS|DIFFERS)\*\* ", block, re.M)


# sampling's orthogonal iteration stops at its iteration limit on digits, as the page reports
@pytest.mark.filterwarnings("ignore:orthogonal iteration did not converge")
@pytest.mark.parametrize("name", CHECKED)
def test_page_rows_equal_a_rerun_of_the_script(common, name):
    checks = _load(name).doc_check()
    assert checks and all(c.rows for c in checks)
    doc_tables = common.doc_tables(common.read_doc_block(name))
    problems = [p for c in checks for p in _mismatches(c, doc_tables)]
    assert not problems, (f"docs/papers.md disagrees with benchmarks/papers/{name}.py; rerun "
                          f"`python benchmarks/papers/{name}.py --write-doc`:\n" + "\n".join(problems))


def test_comparison_catches_a_moved_value_and_a_missing_row(common):
    check = common.DocCheck("T", ["m", "error", "fit s"], [["32", "5.226e-05", "0.1"]], ["m"], ["fit s"])
    same = {"T": (["m", "error", "fit s"], [["32", "5.227e-05", "9.9"]])}    # one unit, other time
    assert _mismatches(check, same) == []
    moved = {"T": (["m", "error", "fit s"], [["32", "5.229e-05", "0.1"]])}
    assert len(_mismatches(check, moved)) == 1
    missing = {"T": (["m", "error", "fit s"], [["64", "5.226e-05", "0.1"]])}
    assert "no row" in _mismatches(check, missing)[0]
    assert _cell_mismatch("34.0 31.3", "34.0 31.5") and not _cell_mismatch("True", "True")


def test_write_doc_block_replaces_only_its_block(common, tmp_path):
    begin, end = common.doc_markers("meka")
    doc = tmp_path / "papers.md"
    doc.write_text(f"# head\n\nprose\n{begin}\nold table\n{end}\n\ntail\n", encoding="utf-8")
    doc.chmod(0o644)
    common.write_doc_block("meka", "### Full run\n\nnew table\n", doc)
    assert doc.stat().st_mode & 0o777 == 0o644          # the page keeps its mode
    assert doc.read_text(encoding="utf-8") == (
        f"# head\n\nprose\n{begin}\n### Full run\n\nnew table\n{end}\n\ntail\n")
    assert common.read_doc_block("meka", doc).strip() == "### Full run\n\nnew table"
    assert [p.name for p in tmp_path.iterdir()] == ["papers.md"]       # no temporary file left


def test_write_doc_block_refuses_a_page_without_markers(common, tmp_path):
    doc = tmp_path / "papers.md"
    doc.write_text("# head\n", encoding="utf-8")
    with pytest.raises(InputError, match="exactly one"):
        common.write_doc_block("meka", "x", doc)
    assert doc.read_text(encoding="utf-8") == "# head\n"


def test_write_doc_refuses_a_quick_run(common):
    with pytest.raises(SystemExit):
        common.parse_args("x", ["--quick", "--write-doc"])
    assert common.parse_args("x", ["--write-doc"]).write_doc
