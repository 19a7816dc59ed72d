"""With progress on, a fit reports every pass over the data, not only the long computations.

The passes are counted independently of the report, with a dask callback
that sees every computation a local scheduler starts during ``fit``.
"""

from __future__ import annotations

import io
import re

import dask
import dask.array as da
import numpy as np
from dask.callbacks import Callback

from distsketch import SketchedKernelRidgeClassifier
from distsketch.graph import PROGRESS_KEY
from distsketch.graph.progress import FitProgress, fit_progress

NAME = "SketchedKernelRidgeClassifier"
PASS_LINE = re.compile(rf"^{NAME}: pass (\d+) \((.+)\): .*in [\d.]+ s$")


def data() -> tuple[da.Array, da.Array]:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1200, 4)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
    return da.from_array(X, chunks=(150, 4)), da.from_array(y, chunks=150)


def fit_counting(progress: bool, capsys) -> tuple[int, list[str]]:
    X, y = data()
    capsys.readouterr()
    starts: list[int] = []
    with dask.config.set({PROGRESS_KEY: progress, "scheduler": "threads"}), \
            Callback(start=lambda dsk: starts.append(len(dsk))):
        SketchedKernelRidgeClassifier(random_state=0).fit(X, y)
    return len(starts), capsys.readouterr().err.splitlines()


def test_progress_reports_every_pass_of_a_fit(capsys) -> None:
    computes, err = fit_counting(True, capsys)
    passes = [m for line in err if (m := PASS_LINE.match(line))]
    assert computes >= 3  # the targets' classes, the standardisation's sample, the ridge pass
    assert [int(m.group(1)) for m in passes] == list(range(1, computes + 1)), err
    labels = [m.group(2) for m in passes]
    assert "ridge-sample" in labels and "ridge-summary" in labels
    summary = [line for line in err if "pass(es) over the data" in line]
    assert len(summary) == 1 and summary[0].startswith(f"{NAME}: fitted in ")
    assert f": {computes} pass(es) over the data" in summary[0]


def test_progress_off_reports_nothing(capsys) -> None:
    computes, err = fit_counting(False, capsys)
    assert computes >= 3 and err == []


def test_only_the_outermost_fit_reports() -> None:
    with dask.config.set({PROGRESS_KEY: True}):
        with fit_progress("outer") as outer, fit_progress("inner") as inner:
            assert isinstance(outer, FitProgress) and inner is None


def test_a_terminal_gets_a_status_line_and_one_line_per_pass() -> None:
    out = io.StringIO()
    X, _ = data()
    with FitProgress("fit", out=out, live=True):
        (X.sum(axis=0)).compute(scheduler="sync")
    text = out.getvalue()
    finished = [line.split("\x1b[K")[-1] for line in text.split("\n") if "pass 1" in line]
    assert finished and re.fullmatch(r"fit: pass 1 \(.+\): \d+ task\(s\) in [\d.]+ s",
                                     finished[-1])
    assert text.rstrip("\n").split("\x1b[K")[-1].startswith("fit: fitted in ")


def test_a_fit_on_the_engine_reports_its_engine_passes_with_their_blocks(tmp_path) -> None:
    import contextlib

    from distsketch import StreamingKernelPCA
    from distsketch.graph.engine import ENGINE_KEY
    from distsketch.graph.planner import record_plans
    from distsketch.io import open_array, write_array

    X, _ = data()
    path = str(write_array(X, tmp_path / "x.zarr", chunk_rows=100))
    err = io.StringIO()
    with dask.config.set({ENGINE_KEY: "device", PROGRESS_KEY: True}), \
            contextlib.redirect_stderr(err), record_plans() as plans:
        StreamingKernelPCA(n_components=2, n_random_features=32, sketch_size=8,
                           random_state=0).fit(open_array(path, block_rows=100))
    engine = [p for p in plans if p.name.endswith("-engine")]
    assert engine and engine[0].n_blocks == 12
    lines = err.getvalue().splitlines()
    name = "StreamingKernelPCA"
    passes = [m for line in lines
              if (m := re.match(rf"^{name}: pass (\d+) \((.+)\): (.*)in [\d.]+ s$", line))]
    assert [int(m.group(1)) for m in passes] == list(range(1, len(passes) + 1)), lines
    shown = [(m.group(2), m.group(3)) for m in passes if m.group(2).endswith("-engine")]
    assert shown == [(p.name, f"{p.n_blocks} block(s) ") for p in engine], lines
    summary = [line for line in lines if "pass(es) over the data" in line]
    assert len(summary) == 1 and f": {len(passes)} pass(es) over the data" in summary[0]
