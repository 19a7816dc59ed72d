"""Every bad-input case, through the Python API and through the CLI.

For each case: the exception class (API) or exit code 2 with a one-line
``distsketch: error:`` message (CLI), a message naming what was wrong and
where, and no output left behind (neither the output nor a temporary
sibling).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from distsketch import RandomFourierFeatures, StreamingKernelPCA, TensorSketch
from distsketch.errors import ConfigError, DistsketchError, InputError, MemoryBudgetError, StoreError
from distsketch.io import open_array, write_array
from distsketch.io.readers import ingest

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning")]

CLI = [sys.executable, "-c", "import sys; from distsketch.cli import main; sys.exit(main())"]

SMALL = ["--cluster", "sync", "--n-components", "2", "--n-random-features", "32", "--sketch-size", "4",
         "--random-state", "0", "--gamma", "0.1"]


def _model_kwargs() -> dict[str, Any]:
    return dict(n_components=2, n_random_features=32, sketch_size=4, random_state=0, gamma=0.1)


@dataclass
class Case:
    id: str
    cls: type[DistsketchError]
    fragments: list[str]              # the message names what and where
    api: Callable[[Path], Any]        # raises
    cli: list[str]                    # arguments; {d} is the case folder
    outputs: list[str] = field(default_factory=lambda: ["out"])


def _good(d: Path, n_features: int = 5) -> Path:
    A = np.random.default_rng(0).normal(size=(60, n_features)).astype(np.float32)
    return write_array(A, d / f"good{n_features}.zarr", chunk_rows=10)


def _with_nan(d: Path) -> Path:
    A = np.random.default_rng(0).normal(size=(60, 5)).astype(np.float32)
    A[37, 2] = np.nan
    A[45, 0] = np.inf
    return write_array(A, d / "nan.zarr", chunk_rows=10, allow_nonfinite=True)


def _model(d: Path) -> Path:
    path = d / "model.zarr"
    if not path.exists():
        StreamingKernelPCA(**_model_kwargs()).fit(open_array(_good(d))).save(path)
    return path


def _transform_to(d: Path, src: Path) -> Path:
    """The API path of `distsketch transform`: model.transform then an atomic write."""
    from distsketch.io import load

    return write_array(load(_model(d)).transform(open_array(str(src))), d / "out")


def _edited(d: Path, **meta: Any) -> Path:
    """A plain Zarr array whose zarr.json was edited afterwards (shape or chunk grid)."""
    path = d / "in.zarr"
    arr = zarr.create_array(str(path), shape=(60, 6), chunks=(10, 6), dtype="f4")
    arr[...] = 1.0
    body = json.loads((path / "zarr.json").read_text())
    if "chunk_shape" in meta:
        body["chunk_grid"]["configuration"]["chunk_shape"] = meta.pop("chunk_shape")
    body.update(meta)
    (path / "zarr.json").write_text(json.dumps(body))
    return path


def _wide(d: Path) -> Path:
    # one row of 3e7 features (zeros compress to almost nothing on disk)
    arr = zarr.create_array(str(d / "wide.zarr"), shape=(1, 30_000_000), chunks=(1, 30_000_000),
                            dtype="f4", config={"write_empty_chunks": True})
    arr[...] = 0.0
    return d / "wide.zarr"


def _text_width_model(d: Path) -> Path:
    """A model whose recorded n_features_in_ was edited from 5 to the text "5"."""
    path = _model(d)
    body = json.loads((path / "zarr.json").read_text())
    body["attributes"]["state"]["n_features_in_"] = {"__json__": "5"}
    (path / "zarr.json").write_text(json.dumps(body))
    return path


def _spec(d: Path, extra: str = "", params: str = "{n_components: 2}") -> Path:
    _good(d)
    (d / "wf.yaml").write_text(f"input: good5.zarr\nmethod: {{name: StreamingKernelPCA, params: "
                               f"{params}}}\noutputs: {{dir: out}}\ncluster: sync\n{extra}")
    return d / "wf.yaml"


# 10 levels of 10 aliases: 10**10 strings once expanded
_LAUGHS = "storage_options:\n  l0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))


def _deep_state(d: Path) -> None:
    from distsketch.workflow import run_workflow

    run_workflow(_spec(d), log=lambda m: None)
    (d / "out" / "state" / "state.json").write_text("[" * 100_000 + "]" * 100_000)


SETUP: dict[str, Callable[[Path], None]] = {
    "corrupt-metadata": lambda d: ((d / "in.zarr").mkdir(),
                                   (d / "in.zarr" / "zarr.json").write_text("{oops")),
    "corrupt-chunk": lambda d: (write_array(np.ones((60, 5), np.float32), d / "in.zarr",
                                            chunk_rows=10),
                                (d / "in.zarr" / "X" / "c" / "4" / "0").write_bytes(b"junk" * 9)),
    "missing-chunk": lambda d: (write_array(np.ones((60, 5), np.float32), d / "in.zarr",
                                            chunk_rows=10),
                                (d / "in.zarr" / "X" / "c" / "2" / "0").unlink()),
    "3-D": lambda d: zarr.create_array(str(d / "in.zarr"), shape=(6, 5, 2), dtype="f4"),
    "complex": lambda d: zarr.create_array(str(d / "in.zarr"), shape=(6, 5), dtype="c8"),
    "zero-rows": lambda d: zarr.create_array(str(d / "in.zarr"), shape=(0, 5), dtype="f4"),
    "nan-fit": _with_nan,
    "nan-transform": lambda d: (_with_nan(d), _model(d)),
    "nan-ingest": lambda d: (d / "in.csv").write_text("1,2\n3,4\n\n5,nan\n"),
    "width-transform": lambda d: (_good(d, 6), _model(d)),
    "width-evaluate": lambda d: (_good(d, 6), _model(d)),
    "param-range": lambda d: _good(d),
    "param-option": lambda d: _good(d),
    "param-unknown": lambda d: _good(d),
    "existing-output": lambda d: (_good(d), (d / "out").mkdir(), (d / "out" / "keep").write_text("x")),
    "n-components-1e9": lambda d: _good(d),
    "n-components-2**63": lambda d: _good(d),
    "tensorsketch-n-components-1e12": lambda d: _good(d),
    "rows-2**62": lambda d: _edited(d, shape=[2**62, 6]),
    "width-2**40": lambda d: _edited(d, shape=[60, 2**40]),
    "wide-row-m4096": _wide,
    "chunk-shape-0": lambda d: _edited(d, chunk_shape=[0, 6]),
    "dotdot-array": lambda d: _good(d),
    "n-features-in-text": _text_width_model,
    "yaml-gamma-1e300": lambda d: _spec(d, params="{gamma: 1e300}"),
    "yaml-number-as-text": lambda d: _spec(d, params="{gamma: 1e-3x}"),
    "yaml-billion-laughs": lambda d: _spec(d, _LAUGHS),
    "yaml-recursive-alias": lambda d: _spec(d, "storage_options: &s {self: *s}\n"),
    "yaml-deep-nesting": lambda d: _spec(d, "storage_options: {a: " + "[" * 100_000 + "]" * 100_000
                                         + "}\n"),
    "state-json-deep": _deep_state,
}


def _load_spec(d: Path) -> Any:
    from distsketch.workflow import load_workflow_spec

    return load_workflow_spec(d / "wf.yaml")


def _read_state(state_dir: Path) -> Any:
    from distsketch.io.storage.urls import resolve
    from distsketch.workflow.state import StateStore

    return StateStore(resolve(state_dir)).read()


def _fit(src: str, **kw: Any) -> Any:
    params = _model_kwargs() | kw
    return StreamingKernelPCA(**params).fit(src)


CASES = [
    Case("missing-store", StoreError, ["missing.zarr", "does not exist"],
         lambda d: _fit(str(d / "missing.zarr")), ["fit", "{d}/missing.zarr", "{d}/out", *SMALL]),
    Case("corrupt-metadata", StoreError, ["in.zarr", "corrupt"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("corrupt-chunk", StoreError, ["in.zarr", "rows 40..50", "corrupt"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("missing-chunk", StoreError, ["in.zarr", "missing chunk", "(2, 0)"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("3-D", InputError, ["in.zarr", "2-D", "(6, 5, 2)"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("complex", InputError, ["in.zarr", "complex64", "not real numeric"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("zero-rows", InputError, ["in.zarr", "0 rows"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("nan-fit", InputError, ["NaN or Inf", "first bad row is 37"],
         lambda d: _fit(str(d / "nan.zarr")), ["fit", "{d}/nan.zarr", "{d}/out", *SMALL]),
    Case("nan-transform", InputError, ["NaN or Inf", "first bad row is 37"],
         lambda d: _transform_to(d, d / "nan.zarr"),
         ["transform", "{d}/model.zarr", "{d}/nan.zarr", "{d}/out", "--cluster", "sync"]),
    Case("nan-ingest", InputError, ["in.csv", "row 2", "line 4", "NaN"],
         lambda d: ingest(d / "in.csv", d / "out"), ["ingest", "{d}/in.csv", "{d}/out"]),
    Case("width-transform", InputError, ["6 features", "expecting 5 features"],
         lambda d: _transform_to(d, d / "good6.zarr"),
         ["transform", "{d}/model.zarr", "{d}/good6.zarr", "{d}/out", "--cluster", "sync"]),
    Case("width-evaluate", InputError, ["6 features", "5"],
         lambda d: __import__("distsketch.io", fromlist=["load"]).load(_model(d)).transform(
             open_array(str(d / "good6.zarr"))),
         ["evaluate", "{d}/model.zarr", "{d}/good6.zarr", "--cluster", "sync"], []),
    Case("param-range", ConfigError, ["sketch_size=0", "an int in [1, inf]"],
         lambda d: _fit(str(d / "good5.zarr"), sketch_size=0),
         ["fit", "{d}/good5.zarr", "{d}/out", *SMALL, "--sketch-size", "0"]),
    Case("param-option", ConfigError, ["method='svd'", "'fd'", "'rnca'"],
         lambda d: _fit(str(d / "good5.zarr"), method="svd"),
         ["fit", "{d}/good5.zarr", "{d}/out", *SMALL, "--param", "method=svd"]),
    Case("param-unknown", ConfigError, ["nonsense"],
         lambda d: StreamingKernelPCA(nonsense=1),
         ["fit", "{d}/good5.zarr", "{d}/out", *SMALL, "--param", "nonsense=1"]),
    Case("existing-output", StoreError, ["out", "already exists", "overwrite"],
         lambda d: StreamingKernelPCA(**_model_kwargs()).fit(str(d / "good5.zarr")).save(d / "out"),
         ["fit", "{d}/good5.zarr", "{d}/out", *SMALL], []),
    # sizes are checked before anything is allocated (issue 26)
    Case("n-components-1e9", MemoryBudgetError,
         ["1000000000 features", "5 input features", "37.25 GiB", "per-task budget", "n_components"],
         lambda d: RandomFourierFeatures(n_components=10**9).fit(str(d / "good5.zarr")),
         ["fit", "{d}/good5.zarr", "{d}/out", "--cluster", "sync", "--method",
          "RandomFourierFeatures", "--n-components", "1000000000"]),
    Case("n-components-2**63", MemoryBudgetError,
         ["9223372036854775808 features", "per-task budget", "n_components"],
         lambda d: RandomFourierFeatures(n_components=2**63).fit(str(d / "good5.zarr")),
         ["fit", "{d}/good5.zarr", "{d}/out", "--cluster", "sync", "--method",
          "RandomFourierFeatures", "--param", "n_components=9223372036854775808"]),
    # every estimator's operator is sized before it is drawn, and before a cluster starts
    Case("tensorsketch-n-components-1e12", MemoryBudgetError,
         ["TensorSketch: n_components=1000000000000", "5 input features", "80.04 TiB",
          "per-task budget", "lower n_components"],
         lambda d: TensorSketch(n_components=10**12).fit(str(d / "good5.zarr")),
         ["fit", "{d}/good5.zarr", "{d}/out", "--method", "TensorSketch", "--n-components",
          "1000000000000"]),
    Case("rows-2**62", InputError, ["in.zarr", "(4611686018427387904, 6)", "chunks", "zarr.json"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("width-2**40", InputError, ["in.zarr", "(60, 1099511627776)", "chunks", "zarr.json"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("wide-row-m4096", MemoryBudgetError,
         ["4096 features", "30000000 input features", "per-task budget"],
         lambda d: StreamingKernelPCA(n_random_features=4096).fit(str(d / "wide.zarr")),
         ["fit", "{d}/wide.zarr", "{d}/out", "--cluster", "sync", "--n-random-features", "4096"]),
    Case("chunk-shape-0", StoreError, ["in.zarr", "chunk shape (0, 6)", "zarr.json"],
         lambda d: _fit(str(d / "in.zarr")), ["fit", "{d}/in.zarr", "{d}/out", *SMALL]),
    Case("dotdot-array", StoreError, ["good5.zarr", "'..'", "good5.zarr::X"],
         lambda d: _fit(str(d / "good5.zarr") + "::.."),
         ["fit", "{d}/good5.zarr::..", "{d}/out", *SMALL]),
    Case("n-features-in-text", StoreError, ["model.zarr", "n_features_in_", "'5'", "Re-save"],
         lambda d: __import__("distsketch.io", fromlist=["load"]).load(d / "model.zarr"),
         ["transform", "{d}/model.zarr", "{d}/good5.zarr", "{d}/out", "--cluster", "sync"]),
    Case("yaml-gamma-1e300", ConfigError, ["wf.yaml", "gamma=1e+300", "|gamma| <="],
         lambda d: _load_spec(d), ["run", "{d}/wf.yaml"]),
    Case("yaml-number-as-text", ConfigError, ["wf.yaml", "gamma", "'1e-3x'", "YAML read it as text"],
         lambda d: _load_spec(d), ["run", "{d}/wf.yaml"]),
    Case("yaml-billion-laughs", ConfigError, ["wf.yaml", "aliases", "expand"],
         lambda d: _load_spec(d), ["run", "{d}/wf.yaml"]),
    Case("yaml-recursive-alias", ConfigError, ["wf.yaml", "recursive alias", "*s"],
         lambda d: _load_spec(d), ["run", "{d}/wf.yaml"]),
    Case("yaml-deep-nesting", ConfigError, ["wf.yaml", "nested more than"],
         lambda d: _load_spec(d), ["run", "{d}/wf.yaml"]),
    Case("state-json-deep", StoreError, ["state.json", "nested more than", "--full"],
         lambda d: _read_state(d / "out" / "state"),
         ["run", "{d}/wf.yaml"], []),
]
# the constructor of an unknown parameter raises TypeError in Python; the table
# test covers the API side of parameter checks, the CLI turns it into a ConfigError
API_CLASS = {"param-unknown": TypeError}


# Each CLI case runs in its own process, forked from one that has imported the
# CLI once (imports cost ~2 s of CPU per fresh interpreter); the process exit
# code and its stdout/stderr are those of `distsketch <args>`.  One case also
# runs through a completely fresh interpreter (test_cli_fresh_process).
FORKER = r"""
import json, os, sys
from distsketch.cli import main
# imported once here rather than in every forked case
import dask.array, zarr, distsketch.io.readers, distsketch.metrics, distsketch.io.model.store
import distsketch.estimators.decomposition.streaming_kpca, distsketch.cluster
jobs = json.loads(sys.stdin.read())
result = {}
for key, (argv, folder) in jobs.items():
    out_path, err_path = os.path.join(folder, ".stdout"), os.path.join(folder, ".stderr")
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    result[key] = [os.waitstatus_to_exitcode(status), open(out_path).read(), open(err_path).read()]
    os.remove(out_path); os.remove(err_path)
sys.__stdout__.write(json.dumps(result))
"""


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    base = tmp_path_factory.mktemp("errors-cli")
    jobs = {}
    for case in CASES:
        d = base / case.id
        d.mkdir()
        SETUP.get(case.id, lambda d: None)(d)
        jobs[case.id] = ([a.replace("{d}", str(d)) for a in case.cli], str(d))
    env = dict(os.environ, DISTSKETCH_PROGRESS="0", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", FORKER], input=json.dumps(jobs),
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    raw = json.loads(proc.stdout)
    return {k: (Path(jobs[k][1]), subprocess.CompletedProcess(jobs[k][0], *raw[k]))
            for k in jobs}


def _assert_clean(d: Path, outputs: list[str], existed: set[str]) -> None:
    for name in outputs:
        if name not in existed:
            assert not (d / name).exists(), f"{name} was left behind"
    assert not [p.name for p in d.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_api(tmp_path, case):
    SETUP.get(case.id, lambda d: None)(tmp_path)
    existed = {p.name for p in tmp_path.iterdir()}
    with pytest.raises(API_CLASS.get(case.id, case.cls)) as info:
        case.api(tmp_path)
    if case.id not in API_CLASS:
        for frag in case.fragments:
            assert frag in str(info.value), (frag, str(info.value))
    _assert_clean(tmp_path, case.outputs, existed)
    if case.id == "existing-output":
        assert (tmp_path / "out" / "keep").read_text() == "x"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cli(cli_results, case):
    d, res = cli_results[case.id]
    assert res.returncode == 2, res.stderr
    err_lines = [ln for ln in res.stderr.splitlines() if ln.startswith("distsketch: error:")]
    assert len(err_lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    for frag in case.fragments:
        assert frag in err_lines[0], (frag, err_lines[0])
    existed = {"model.zarr", "good5.zarr", "good6.zarr", "nan.zarr", "in.zarr", "in.csv",
               "wide.zarr", "wf.yaml"}
    if case.id == "existing-output":
        existed.add("out")
        assert (d / "out" / "keep").read_text() == "x"
    _assert_clean(d, case.outputs, existed)


def test_cli_unexpected_error_is_short(tmp_path):
    """An internal failure (not a user error) exits 1 with a hint, not a traceback."""
    script = ("import sys; import distsketch.cli.ingest as m\n"
              "def boom(args): raise RuntimeError('internal')\n"
              "m.run = boom\n"
              "from distsketch.cli import main; sys.exit(main(['ingest', 'a', 'b']))")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    # run is bound at parser construction, so patch before main builds it
    assert res.returncode == 1, res.stderr
    assert "unexpected error: RuntimeError: internal" in res.stderr
    assert "Traceback" not in res.stderr


def test_cli_fresh_process(tmp_path):
    """A bad input through the installed entry point in a fresh interpreter."""
    _with_nan(tmp_path)
    res = subprocess.run([*CLI, "fit", str(tmp_path / "nan.zarr"), str(tmp_path / "out"), *SMALL],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].startswith("distsketch: error:")
    assert "first bad row is 37" in res.stderr and "Traceback" not in res.stderr
    _assert_clean(tmp_path, ["out"], {"nan.zarr"})
