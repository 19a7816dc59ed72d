"""``distsketch --help`` and a refused command line import none of the heavy libraries.

Dask, Zarr, distributed, SciPy and scikit-learn cost over a second to import;
a command imports what its work uses, after its arguments are parsed.  Each
case runs in a fresh interpreter, since this one has imported them all.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("dask", "zarr", "distributed", "scipy", "sklearn")

PROBE = """\
import json, sys
from distsketch.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(m for m in json.loads(sys.argv[2])
                                                 if m in sys.modules)}))
"""


@pytest.mark.parametrize("argv", [
    ["--help"], ["--version"], [], ["fit", "--help"], ["run", "--help"], ["ingest", "--help"],
    ["fit"], ["fit", "in.zarr", "out.zarr", "--no-such-option"], ["no-such-command"],
], ids=lambda argv: " ".join(argv) or "(none)")
def test_parsing_imports_no_heavy_library(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] in (0, 2)  # help or version, or the usage error
    assert result["loaded"] == [], result


def test_not_fitted_error_is_still_scikit_learn_s() -> None:
    # made on first use, so that importing distsketch does not import scikit-learn
    import pickle

    from sklearn.exceptions import NotFittedError as SkNotFittedError

    import distsketch
    from distsketch.errors import DistsketchError, NotFittedError

    assert distsketch.NotFittedError is NotFittedError
    assert issubclass(NotFittedError, SkNotFittedError) and issubclass(NotFittedError,
                                                                        DistsketchError)
    again = pickle.loads(pickle.dumps(NotFittedError("fit first")))
    assert type(again) is NotFittedError and str(again) == "fit first"
